"""The client's return types: dataclasses built from the coordinator's
JSON, read as attributes or, as the dicts of earlier versions were, as
mappings; and every call returns its type, against a real coordinator."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from typing import Any, Dict, List

import pytest

import scimesh
from scimesh._source import body_of
from scimesh.types import APIObject
from conftest import Coordinator
from helpers import fingerprints, write_fingerprints

TASK = {
    "task_id": "s0:j1-0", "job_id": "s0:j1", "chunk_index": 0, "attempt": 2, "max_attempts": 3,
    "lease_expires_at": "2026-03-01T12:00:05Z", "workload": "tanimoto", "parameters": {"query": "00ff", "n": [1, 2]},
    "top_k": 10, "score_column": "score", "order": "desc", "has_header": True, "timeout_seconds": 0,
    "input": {"url": "/tasks/s0:j1-0/input", "sha256": "ab" * 32, "bytes": 120},
    "state": "leased", "lease_owner": "w1", "error": None,
    "created_at": "2026-03-01T12:00:00Z", "updated_at": "2026-03-01T12:00:01Z",
}

# One whole object of each type, as a coordinator sends it.
SAMPLES: Dict[type, Dict[str, Any]] = {
    scimesh.Upload: {"upload_id": "s0:u1", "bytes": 120, "sha256": "ab" * 32, "rows": 3},
    scimesh.TaskCounts: {"total": 7, "pending": 1, "leased": 2, "completed": 4, "failed": 0, "cancelled": 0, "cached": 3},
    scimesh.Task: TASK,
    scimesh.Workload: {"name": "tanimoto", "workers": 2, "last_seen": "2026-03-01T12:00:00Z", "versions": ["1", "2"]},
    scimesh.Worker: {"id": "w1", "account": "ada", "key": "laptop", "trusted": False, "workloads": ["copy"],
                     "last_seen": "2026-03-01T12:00:00Z", "tasks_done": 5},
    scimesh.Account: {"name": "ada", "admin": False, "disabled": False, "weight": 2, "max_running": 0, "max_jobs": 20,
                      "max_storage": 1024, "created_at": "2026-03-01T12:00:00Z", "updated_at": "2026-03-01T12:00:00Z",
                      "usage": {"running": 1, "jobs": 2, "storage_bytes": 300}},
    scimesh.Usage: {"account": "ada", "day": "2026-03-01", "tasks": 412, "worker_seconds": 3605.25},
}


@pytest.mark.parametrize("cls", list(SAMPLES), ids=lambda c: c.__name__)
def test_from_json_round_trip(cls: type) -> None:
    data = SAMPLES[cls]
    obj = cls.from_json(data)
    assert type(obj) is cls and not isinstance(obj, dict)
    assert obj.to_dict() == data and dict(obj) == data and obj == data
    assert cls.from_json(obj.to_dict()) == obj


@pytest.mark.parametrize("cls", list(SAMPLES), ids=lambda c: c.__name__)
def test_unknown_fields_are_ignored(cls: type) -> None:
    newer = dict(SAMPLES[cls], added_in_a_later_version={"x": 1}, another=[1])
    obj = cls.from_json(newer)
    assert obj == cls.from_json(SAMPLES[cls])
    assert "another" not in obj and not hasattr(obj, "added_in_a_later_version")


@pytest.mark.parametrize("cls", list(SAMPLES), ids=lambda c: c.__name__)
def test_missing_fields_take_their_defaults(cls: type) -> None:
    empty = cls.from_json({})
    assert empty == cls()
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        assert getattr(empty, f.name) == default, f.name


def test_defaults() -> None:
    t = scimesh.Task.from_json({"task_id": "s0:j1-0", "state": "pending"})  # an older coordinator's task, say
    assert (t.task_id, t.state, t.attempt, t.error, t.lease_owner) == ("s0:j1-0", "pending", 0, None, None)
    assert t.parameters == {} and t.input == scimesh.TaskInput() and t.timeout_seconds == 0
    assert scimesh.TaskCounts.from_json({"total": 3, "completed": 3}).cached == 0
    assert scimesh.Workload.from_json({"name": "tanimoto", "versions": None}).versions == ()
    a = scimesh.Account.from_json({"name": "ada"})
    assert (a.weight, a.usage) == (1, None)
    assert "usage" not in a and set(a) == set(SAMPLES[scimesh.Account]) - {"usage"}


def test_typed_fields() -> None:
    t = scimesh.Task.from_json(TASK)
    assert isinstance(t.input, scimesh.TaskInput) and t.input.bytes == 120 and t.input.range is None
    assert t.parameters == {"query": "00ff", "n": [1, 2]}
    w = scimesh.Worker.from_json(SAMPLES[scimesh.Worker])
    assert w.workloads == ("copy",)  # JSON arrays are tuples
    a = scimesh.Account.from_json(SAMPLES[scimesh.Account])
    assert a.usage == scimesh.AccountUsage(running=1, jobs=2, storage_bytes=300)
    u = scimesh.Usage.from_json({"account": "ada", "tasks": 3, "worker_seconds": 60})
    assert u.worker_seconds == 60.0 and type(u.worker_seconds) is float
    assert (u.workload, u.day, u.worker_account) == (None, None, None)


@pytest.mark.parametrize("cls", list(SAMPLES), ids=lambda c: c.__name__)
def test_mapping_access_is_attribute_access(cls: type) -> None:
    obj = cls.from_json(SAMPLES[cls])
    assert list(obj) == list(obj.keys()) == list(SAMPLES[cls])  # the coordinator's order
    assert len(obj) == len(SAMPLES[cls])
    for key in obj:
        value = getattr(obj, key)
        assert key in obj
        if isinstance(value, APIObject):
            assert obj[key] == value.to_dict() and obj[key] == value  # a dict, as the JSON has it
        elif isinstance(value, tuple):
            assert obj[key] == list(value)
        else:
            assert obj[key] == value and obj.get(key) == value
    assert obj.get("no-such-field") is None and obj.get("no-such-field", 7) == 7 and "no-such-field" not in obj
    with pytest.raises(KeyError):
        obj["no-such-field"]


def test_mapping_access_as_dicts_were_used() -> None:
    t = scimesh.Task.from_json(TASK)
    assert t["state"] == "leased" and t["input"]["url"] == "/tasks/s0:j1-0/input" and t.get("error") is None
    a = scimesh.Account.from_json(SAMPLES[scimesh.Account])
    assert a["usage"] == {"running": 1, "jobs": 2, "storage_bytes": 300} and a["usage"]["jobs"] == 2
    assert set(a["usage"]) == {"running", "jobs", "storage_bytes"}
    c = scimesh.TaskCounts.from_json(SAMPLES[scimesh.TaskCounts])
    assert c.get("completed", 0) == c["completed"] == c.completed == 4 and dict(c)["cached"] == 3
    u = scimesh.Usage.from_json({"workload": "nap", "tasks": 3, "worker_seconds": 1.5})
    assert set(u) == {"workload", "tasks", "worker_seconds"} and "account" not in u  # only the fields asked for
    with pytest.raises(KeyError):
        u["account"]


def test_read_only() -> None:
    t = scimesh.Task.from_json(TASK)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.state = "completed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        t["state"] = "completed"  # type: ignore[index]
    d = t.to_dict()
    d["input"]["url"] = "elsewhere"
    d["parameters"]["query"] = "ffff"
    t["parameters"]["query"] = "ffff"
    assert t.input.url == "/tasks/s0:j1-0/input" and t.parameters["query"] == "00ff"  # copies
    w = scimesh.Worker.from_json(SAMPLES[scimesh.Worker])
    assert hash(w) == hash(scimesh.Worker.from_json(SAMPLES[scimesh.Worker])) and len({w, w}) == 1


def test_equality() -> None:
    a, b = scimesh.Upload.from_json(SAMPLES[scimesh.Upload]), scimesh.Upload.from_json(SAMPLES[scimesh.Upload])
    assert a == b and a == SAMPLES[scimesh.Upload] and SAMPLES[scimesh.Upload] == a
    assert a != dict(SAMPLES[scimesh.Upload], rows=4) and a != scimesh.Upload()
    assert scimesh.TaskCounts() != scimesh.AccountUsage() and scimesh.TaskCounts() != [1]


def test_from_json_takes_an_object() -> None:
    with pytest.raises(TypeError):
        scimesh.Task.from_json(["s0:j1-0"])  # type: ignore[arg-type]


# Each call, against a real coordinator.


def _until(what: str, get, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while not (got := get()):
        assert time.monotonic() < deadline, f"no {what} after {timeout} s"
        time.sleep(0.1)
    return got


def _is(obj: object, cls: type) -> None:
    """obj is a cls, no dict: a call that returned a dict again fails here."""
    assert type(obj) is cls and not isinstance(obj, dict), type(obj)


def _are(objs: object, cls: type) -> None:
    assert type(objs) is list, type(objs)
    for o in objs:  # type: ignore[attr-defined]
        _is(o, cls)


def test_every_call_returns_its_type(coord: Coordinator, client: scimesh.Client, tmp_path, monkeypatch) -> None:
    rows, query = fingerprints(60, seed=11)
    path = tmp_path / "fps.csv"
    write_fingerprints(path, rows)

    up = client.upload(path)
    _is(up, scimesh.Upload)
    assert (up.rows, up.bytes) == (61, path.stat().st_size) and up.upload_id and len(up.sha256) == 64

    job = client.submit(path, workload="tanimoto", top_k=5, chunk_rows=9, params={"query": query})
    _is(job, scimesh.Job)
    _is(job.tasks, scimesh.TaskCounts)
    assert job.tasks.total == 7
    job.wait(progress=False)
    assert job.tasks == scimesh.TaskCounts.from_json(job.data["tasks"]) and job.tasks.completed == 7

    tasks = client.tasks(job.id)  # one page
    _are(tasks, scimesh.Task)
    assert [t.chunk_index for t in tasks] == list(range(7)) and all(t.state == "completed" for t in tasks)
    assert all(t.job_id == job.id and t.parameters == {"query": query} for t in tasks)
    _are(job.list_tasks(state="completed"), scimesh.Task)
    assert job.list_tasks(state="failed") == []
    # iter_tasks in pages of 2: the same tasks in the same order, over 4 calls.
    calls: List[Any] = []
    call = client._t.call
    monkeypatch.setattr(client._t, "call", lambda *a, **k: calls.append(a) or call(*a, **k))
    monkeypatch.setattr(scimesh.client, "_PAGE", 2)
    lazy = client.iter_tasks(job.id)
    assert not isinstance(lazy, list) and calls == []
    got = list(lazy)
    _are(got, scimesh.Task)
    assert [t.task_id for t in got] == [t.task_id for t in tasks] and got == tasks
    assert len(calls) == 4, calls

    task = client.task(tasks[0].task_id)
    _is(task, scimesh.Task)
    _is(task.input, scimesh.TaskInput)
    assert task == tasks[0] and task.input.url == f"/tasks/{task.task_id}/input"

    jobs = client.jobs(limit=1)
    _are(jobs, scimesh.Job)
    assert len(jobs) == 1 and job.id in {j.id for j in client.iter_jobs()}

    workloads = _until("workloads", client.workloads)
    _are(workloads, scimesh.Workload)
    assert "tanimoto" in {w.name for w in workloads}

    workers = _until("workers", client.workers)
    _are(workers, scimesh.Worker)
    assert "w1" in {w.id for w in workers}
    _is(next(client.iter_workers()), scimesh.Worker)

    account = client.account()
    _is(account, scimesh.Account)
    _is(account.usage, scimesh.AccountUsage)
    assert account.name == "admin"

    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas fails: a list of Usage
    usage = client.usage(by="workload")
    _are(usage, scimesh.Usage)
    assert "tanimoto" in {u.workload for u in usage}


def test_the_types_hold_what_the_coordinator_sends(coord: Coordinator, client: scimesh.Client) -> None:
    """Each type has the fields of the coordinator's object, no more, no
    fewer, and to_dict() gives its JSON back: a field the coordinator
    adds, or drops, shows here (the types must follow)."""
    def fields(cls: type) -> set:
        return {f.name for f in dataclasses.fields(cls)}

    job = client.submit(b"id,fingerprint\na,00\nb,ff\n", workload="tanimoto", params={"query": "0f"})
    job.wait(progress=False)
    raw_tasks: List[Dict[str, Any]] = client._json("GET", f"/jobs/{job.id}/tasks")["tasks"]
    assert [t.to_dict() for t in client.tasks(job.id)] == raw_tasks
    assert client.task(raw_tasks[0]["task_id"]).to_dict() == raw_tasks[0]
    assert set(raw_tasks[0]) == fields(scimesh.Task) and set(raw_tasks[0]["input"]) == {"url", "sha256", "bytes"}
    assert job.tasks.to_dict() == job.data["tasks"] and set(job.data["tasks"]) == fields(scimesh.TaskCounts)
    raw = client._json("GET", "/account")
    assert client.account().to_dict() == raw and set(raw) == fields(scimesh.Account)
    assert set(raw["usage"]) == fields(scimesh.AccountUsage)
    raw = client._t.call("POST", "/upload", body=body_of(b"id,fingerprint\na,00\n"), headers={"Content-Type": "text/csv"})
    assert set(json.loads(raw)) == fields(scimesh.Upload)
    # Workloads and workers: their last_seen moves between two calls.
    raw = client._json("GET", "/workloads")["workloads"]
    assert raw and all(set(w) == fields(scimesh.Workload) for w in raw)
    raw = client._json("GET", "/workers")["workers"]
    assert raw and all(set(w) == fields(scimesh.Worker) for w in raw)
    raw = client._json("GET", "/usage", query={"by": "account,workload,day,worker_account"})["usage"]
    assert raw and all(set(u) == fields(scimesh.Usage) for u in raw)
    assert [u.to_dict() for u in map(scimesh.Usage.from_json, raw)] == raw
