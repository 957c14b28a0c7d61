"""Test workload: fails chunk 1 while the file FLAKY_MARKER exists, else
scores a row by its `value` column."""

import os

import scimesh


def score(row, params):
    if os.environ["SCIMESH_CHUNK_INDEX"] == "1" and os.path.exists(os.environ["FLAKY_MARKER"]):
        raise RuntimeError("the marker file is there")
    return float(row["value"])


scimesh.run_workload(score)
