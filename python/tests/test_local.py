"""scimesh.local(): a real coordinator and worker started from Python,
from the binary conftest builds."""

from __future__ import annotations

import os
import socket
import tempfile
import urllib.parse
from pathlib import Path
from typing import Dict, List

import pytest

import scimesh
from conftest import SCRIPTS, python_command
from helpers import fingerprints, parse, tanimoto_top, write_fingerprints


def processes_under(dir: Path) -> Dict[int, List[str]]:
    """The processes whose command line names dir, by PID."""
    out = {}
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = [a.decode() for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if any(str(dir) in a for a in args):
            out[int(pid)] = args
    return out


def refused(url: str) -> bool:
    u = urllib.parse.urlsplit(url)
    try:
        socket.create_connection((u.hostname, u.port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


@pytest.fixture()
def tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary directory where scimesh.local() makes its own."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_local_runs_jobs_and_stops(binary: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What the caller's environment says of another coordinator is ignored.
    monkeypatch.setenv("SCIMESH_COORDINATOR", "http://127.0.0.1:1")
    monkeypatch.setenv("SCIMESH_TOKEN", "not-this-one")
    monkeypatch.setenv("CLIENT_AUTH_TOKEN", "not-this-one-either")
    rows, query = fingerprints(900, seed=11)
    table = tmp / "fps.csv"
    write_fingerprints(table, rows)
    charsum = python_command(SCRIPTS / "charsum.py")
    with scimesh.local(workers=3, workloads={"tanimoto": None, "charsum": charsum}, binary=binary) as c:
        assert isinstance(c, scimesh.Client) and c.url.startswith("http://127.0.0.1:")
        [dir] = [p for p in tmp.iterdir() if p.name.startswith("scimesh-local-")]
        assert (dir / "scimesh.db").exists()
        procs = processes_under(dir)
        [worker] = [args for args in procs.values() if args[1] == "worker"]
        assert worker[worker.index("--concurrency") + 1] == "3"
        assert ["--workload", "tanimoto"] == worker[worker.index("tanimoto") - 1 : worker.index("tanimoto") + 1]
        assert "charsum=" + charsum in worker
        assert sorted(args[1] for args in procs.values()) == ["serve", "worker"]

        job = c.submit(table, workload="tanimoto", top_k=12, params={"query": query}, chunk_rows=200)
        assert parse(job.wait(progress=False, timeout=60).result()) == tanimoto_top(rows, query, 12)
        text = c.submit(b"id,text\na,abc\nb,skip me\nc,zz\n", workload="charsum", top_k=5, params={"factor": 7})
        assert parse(text.wait(progress=False, timeout=60).result()) == [("a", 294.0), ("c", 244.0)]
        url = c.url
    assert not dir.exists(), "the temporary directory is left behind"
    assert processes_under(dir) == {}, "a process is left running"
    assert refused(url)


def test_local_stops_on_exception(binary: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCIMESH_BINARY", str(binary))  # found this way too
    with pytest.raises(KeyError):
        with scimesh.local() as c:
            [dir] = [p for p in tmp.iterdir() if p.name.startswith("scimesh-local-")]
            assert len(processes_under(dir)) == 2
            url = c.url
            raise KeyError("boom")
    assert not dir.exists() and processes_under(dir) == {} and refused(url)


def test_local_without_binary(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCIMESH_BINARY", raising=False)
    monkeypatch.setenv("PATH", str(tmp))
    with pytest.raises(FileNotFoundError, match="not on PATH"):
        with scimesh.local():
            pass
    with pytest.raises(FileNotFoundError, match="SCIMESH_BINARY"):
        with scimesh.local(binary=tmp / "nowhere"):
            pass
    assert list(tmp.iterdir()) == [], "a directory was made before the binary was found"


def test_local_bad_workload(binary: Path, tmp: Path) -> None:
    with pytest.raises(RuntimeError, match="scimesh worker stopped") as e:
        with scimesh.local(workloads={"not a name!": "cat"}, binary=binary):
            pass
    assert "not a name!" in str(e.value)
    assert list(tmp.iterdir()) == []
    with pytest.raises(ValueError, match="empty command"):
        with scimesh.local(workloads={"x": " "}, binary=binary):
            pass
