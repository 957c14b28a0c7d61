"""Test workload that loads slowly: at start it records its process in the
file STARTS_FILE and sleeps 2 s (a model being loaded), then scores each
row by its `value` field. Under `scimesh worker --persistent` it starts
once per slot, whatever the number of chunks."""

import os
import time

import scimesh

with open(os.environ["STARTS_FILE"], "a") as f:
    f.write("%d %s\n" % (os.getpid(), os.environ.get("SCIMESH_PROTOCOL", "")))
time.sleep(2)


def score(row, params):
    return float(row["value"])


scimesh.run_workload(score)
