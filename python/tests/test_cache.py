"""The chunk cache seen from Python: a job submitted again is completed
from remembered outputs, with the same bytes; cache=False runs it."""

from __future__ import annotations

import scimesh


def test_resubmitted_job_comes_from_the_cache(client: scimesh.Client) -> None:
    table = b"id,text\n" + b"".join(b"r%d,%s\n" % (i, b"x" * (i % 7 + 1)) for i in range(60))
    first = client.submit(table, workload="charsum", top_k=5, chunk_rows=10, params={"factor": 3})
    first.wait(progress=False, timeout=60)
    assert first.tasks["cached"] == 0 and first.tasks["completed"] == 6
    again = client.submit(table, workload="charsum", top_k=5, chunk_rows=10, params={"factor": 3})
    assert again.tasks["cached"] == 6, again.tasks  # completed when created, no chunk claimed
    again.wait(progress=False, timeout=60)
    assert again.result() == first.result()
    fewer = client.submit(table, workload="charsum", top_k=2, chunk_rows=10, params={"factor": 3})
    assert fewer.tasks["cached"] == 6
    assert fewer.wait(progress=False, timeout=60).result().splitlines() == first.result().splitlines()[:3]
    fresh = client.submit(table, workload="charsum", top_k=5, chunk_rows=10, params={"factor": 3}, cache=False)
    assert fresh.tasks["cached"] == 0
    assert fresh.wait(progress=False, timeout=60).result() == first.result()
    assert fresh.data["cache"] is False and again.data["cache"] is True
