"""A look at a job's result before it ends: Job.peek() and
`scimesh result --partial`, against a real coordinator and workers."""

from __future__ import annotations

import os
import subprocess
import time

import pandas as pd
import pytest

import scimesh
from conftest import Coordinator

# Chunk 0 scores its rows by line number at once; the other chunks take a
# minute, so that the job stays running with one chunk done.
HALF = ("half=if [ \"$SCIMESH_CHUNK_INDEX\" = 0 ]; then awk -F, 'NR==1{print \"id,score\"; next}{print $1\",\"NR}'; "
        "else cat >/dev/null; sleep 60; fi")


def test_peek_running_job(own_coord: Coordinator) -> None:
    coord = own_coord
    coord.worker("half", HALF, concurrency=3)
    c = coord.client()
    job = c.submit(b"id,x\na,1\nb,2\nc,3\nd,4\ne,5\nf,6\n", workload="half", top_k=3, chunk_rows=2)
    try:
        deadline = time.monotonic() + 30
        while True:
            best = job.peek(dtype={"id": str})
            if best.attrs["chunks_done"] == 1 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert best.attrs == {"chunks_done": 1, "chunks_total": 3}
        assert job.refresh().status == "running"
        # Chunk 0's rows (a, b on lines 2 and 3), best first.
        assert best.to_dict("list") == {"id": ["b", "a"], "score": [3, 2]}
        env = dict(os.environ, SCIMESH_COORDINATOR=coord.url, SCIMESH_TOKEN=coord.client_token)
        out = subprocess.run([str(coord.binary), "result", job.id, "--partial"], env=env, check=True,
                             capture_output=True, timeout=30)
        assert out.stdout == b"id,score\nb,3\na,2\n"
        assert b"1 of 3 chunks" in out.stderr
    finally:
        job.cancel()


def test_peek_before_and_after(client: scimesh.Client) -> None:
    waiting = client.submit(b"id,text\na,x\n", workload="nobody-runs-this")
    try:
        empty = waiting.peek()
        assert empty.empty and empty.attrs == {"chunks_done": 0, "chunks_total": 1}
    finally:
        waiting.cancel()
    done = client.submit(b"id,text\na,abc\nb,zz\nc,q\n", workload="charsum", top_k=2, chunk_rows=1)
    done.wait(progress=False, timeout=60)
    pd.testing.assert_frame_equal(done.peek(), done.dataframe())
    assert done.peek().attrs == {"chunks_done": 3, "chunks_total": 3}
