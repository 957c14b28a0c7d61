"""Test workload for the frame loop: scores a row by float(row["x"]) times
the parameter `k`; x "boom" raises, x "none" skips the row. Each chunk
prints to stdout (which must reach stderr, not the protocol) and leaves a
file in its working directory."""

import os

import scimesh


def score(row, params):
    if row["x"] == "boom":
        raise ValueError("cannot score boom")
    if row["x"] == "none":
        return None
    print("stray print from", os.environ.get("SCIMESH_TASK_ID"))
    open("touched", "w").close()
    return float(row["x"]) * params["k"]


scimesh.run_workload(score)
