"""The chunk cache seen from Python: a job submitted again is completed
from remembered outputs, with the same bytes; cache=False runs it."""

from __future__ import annotations

import time

import scimesh


def test_resubmitted_job_comes_from_the_cache(client: scimesh.Client) -> None:
    table = b"id,text\n" + b"".join(b"r%d,%s\n" % (i, b"x" * (i % 7 + 1)) for i in range(60))
    first = client.submit(table, workload="charsum", top_k=5, chunk_rows=10, params={"factor": 3})
    first.wait(progress=False, timeout=60)
    assert first.tasks.cached == 0 and first.tasks.completed == 6
    again = client.submit(table, workload="charsum", top_k=5, chunk_rows=10, params={"factor": 3})
    assert again.tasks.cached == 6, again.tasks  # completed when created, no chunk claimed
    again.wait(progress=False, timeout=60)
    assert again.result() == first.result()
    fewer = client.submit(table, workload="charsum", top_k=2, chunk_rows=10, params={"factor": 3})
    assert fewer.tasks.cached == 6
    assert fewer.wait(progress=False, timeout=60).result().splitlines() == first.result().splitlines()[:3]
    fresh = client.submit(table, workload="charsum", top_k=5, chunk_rows=10, params={"factor": 3}, cache=False)
    assert fresh.tasks.cached == 0
    assert fresh.wait(progress=False, timeout=60).result() == first.result()
    assert fresh.data["cache"] is False and again.data["cache"] is True


def test_cache_survives_a_restart(binary, tmp_path_factory) -> None:
    """The cache is in the coordinator's database: a coordinator started
    again on it completes a resubmitted job from what it remembered."""
    from conftest import Coordinator  # the session's coordinator is not restarted

    table = b"id,fingerprint\n" + b"".join(b"m%d,%02x\n" % (i, i) for i in range(40))
    dir = tmp_path_factory.mktemp("restart")
    first = Coordinator(binary, dir)
    try:
        first.worker("w", "tanimoto")
        job = first.client().submit(table, workload="tanimoto", top_k=3, chunk_rows=10, params={"query": "0f"})
        result = job.wait(progress=False, timeout=60).result()
        assert job.tasks.cached == 0
    finally:
        first.stop()
    again = Coordinator(binary, dir)
    try:
        again.worker("w2", "tanimoto")
        c = again.client()
        deadline = time.monotonic() + 30
        while not c.workloads() and time.monotonic() < deadline:
            time.sleep(0.05)  # until the worker announced its version
        job = c.submit(table, workload="tanimoto", top_k=3, chunk_rows=10, params={"query": "0f"})
        assert job.tasks.cached == 4, job.tasks
        assert job.wait(progress=False, timeout=60).result() == result
    finally:
        again.stop()
