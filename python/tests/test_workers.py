"""Other accounts' machines: untrusted worker keys of two accounts agree
on every chunk of a job whose workers are "any"; Client.workers lists the
workers of the pool and of keys."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Iterator, List

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


@pytest.fixture(scope="module")
def keyed(binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Coordinator]:
    """A coordinator with a pool worker, pool-1, and a worker of each of
    the keys ada/laptop and bob/desk, ada-box and bob-box; the accounts'
    tokens are in .tokens."""
    c = Coordinator(binary, tmp_path_factory.mktemp("workers"))
    try:
        c.tokens = {}
        c.worker("pool-1", "copy=cat")
        for account, key in (("ada", "laptop"), ("bob", "desk")):
            c.tokens[account] = _cli(c, c.client_token, "account", "add", account)
            secret = _cli(c, c.tokens[account], "worker-key", "add", key)
            c.worker(f"{account}-box", "copy=cat", "dock=cat", extra=["--token", secret])
        yield c
    finally:
        c.stop()


def _listed(client: scimesh.Client, n: int) -> List[scimesh.Worker]:
    """client.workers() once it lists n workers (the workers' first
    claims come within a second or so)."""
    deadline = time.monotonic() + 30
    while len(got := client.workers()) < n and time.monotonic() < deadline:
        time.sleep(0.1)
    return got


def test_workers(keyed: Coordinator) -> None:
    admin = keyed.client()
    ada = keyed.client(token=keyed.tokens["ada"])
    bob = keyed.client(token=keyed.tokens["bob"])
    got = {w.id: w for w in _listed(admin, 3)}
    assert sorted(got) == ["ada-box", "bob-box", "pool-1"], got
    fields = {"id", "account", "key", "trusted", "workloads", "last_seen", "tasks_done"}
    assert all(set(w) == fields for w in admin._json("GET", "/workers")["workers"])  # as the coordinator sends them
    view = {i: (w.account, w.key, w.trusted, w.workloads, w.tasks_done) for i, w in got.items()}
    assert view == {
        "pool-1": ("", "", True, ("copy",), 0),
        "ada-box": ("ada", "laptop", False, ("copy", "dock"), 0),
        "bob-box": ("bob", "desk", False, ("copy", "dock"), 0),
    }, view
    assert all(w.last_seen.endswith("Z") for w in got.values()), got
    assert [w.id for w in ada.workers()] == ["ada-box"]
    assert [w.id for w in bob.workers()] == ["bob-box"]

    _cli(keyed, keyed.client_token, "worker-key", "trust", "ada/laptop")
    assert [(w.id, w.trusted) for w in ada.workers()] == [("ada-box", True)]
    _cli(keyed, keyed.tokens["ada"], "worker-key", "revoke", "laptop")
    assert [(w.id, w.trusted) for w in ada.workers()] == [("ada-box", False)]

    with pytest.raises(scimesh.APIError) as e:
        keyed.client(token=keyed.worker_token).workers()
    assert (e.value.status, e.value.code) == (403, "permission_denied")
