"""Jobs open to other accounts' machines: untrusted worker keys of two
accounts agree on every chunk of a job whose workers are "any"."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import scimesh
from conftest import Coordinator


def _cli(coord: Coordinator, token: str, *args: str) -> str:
    env = dict(os.environ, SCIMESH_COORDINATOR=coord.url, SCIMESH_TOKEN=token)
    out = subprocess.run([str(coord.binary), *args], env=env, check=True, capture_output=True, text=True)
    return out.stdout.strip()


def test_volunteers_reach_a_quorum(binary: Path, tmp_path: Path) -> None:
    coord = Coordinator(binary, tmp_path)
    try:
        keys = {}
        for name in ("bob", "carol"):
            token = _cli(coord, coord.client_token, "account", "add", name)
            keys[name] = _cli(coord, token, "worker-key", "add", "laptop")
            coord.worker(name + "1", "copy=sed 1s/value/score/", extra=["--token", keys[name]])
        rows = [(f"r{i:03d}", (i * 37) % 101) for i in range(60)]
        table = "id,value\n" + "".join(f"{i},{v}\n" for i, v in rows)
        admin = coord.client()

        job = admin.submit(table.encode(), workload="copy", top_k=5, chunk_rows=10, workers="any")
        assert (job.workers, job.quorum) == ("any", 2)
        job.wait(progress=False, timeout=60)
        assert job.status == "completed", job.error
        best = sorted(rows, key=lambda r: -r[1])[:5]  # stable: ties by row order
        assert job.result() == "id,score\n" + "".join(f"{i},{v}\n" for i, v in best)
        usage = admin.usage(by="worker_account")
        usage = usage.to_dict("records") if hasattr(usage, "to_dict") else usage
        ran = {u["worker_account"]: u["tasks"] for u in usage}
        assert ran == {"bob": 6, "carol": 6}, ran  # each of the six chunks by both

        trusted = admin.submit(b"id,value\na,1\n", workload="copy")
        assert (trusted.workers, trusted.quorum) == ("trusted", None)
        trusted.cancel()
        for bad in ({"workers": "any", "quorum": 6}, {"workers": "trusted", "quorum": 2}, {"workers": "everyone"}):
            with pytest.raises(scimesh.APIError) as e:
                admin.submit(b"id,value\na,1\n", workload="copy", **bad)
            assert e.value.status == 400, bad
    finally:
        coord.stop()
