"""Client.usage against a coordinator of its own, whose one worker naps
in every chunk, so that the time charged is known within bounds."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path
from typing import Iterator

import pytest

import scimesh
from conftest import Coordinator, need

NAP = 0.4  # seconds a chunk takes at least
CHUNKS = 3


@pytest.fixture(scope="module")
def napped(binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Coordinator]:
    """A coordinator whose worker has run one job of CHUNKS chunks of the
    workload nap."""
    c = Coordinator(binary, tmp_path_factory.mktemp("usage"))
    try:
        c.worker("w", f"nap=sleep {NAP}; sed 1s/value/score/", concurrency=CHUNKS)
        table = "id,value\n" + "".join(f"r{i},{i}\n" for i in range(CHUNKS * 10))
        job = c.client().submit(table.encode(), workload="nap", top_k=2, chunk_rows=10)
        assert job.wait(progress=False).status == "completed"
        yield c
    finally:
        c.stop()


def test_usage_dataframe(napped: Coordinator) -> None:
    need("pandas")
    c = napped.client()
    df = c.usage()
    assert list(df.columns) == ["account", "tasks", "worker_seconds"]
    assert df["account"].tolist() == ["admin"] and df["tasks"].tolist() == [CHUNKS]
    # Each chunk's lease lasts its nap and the round trips around it.
    assert CHUNKS * NAP <= df["worker_seconds"][0] < CHUNKS * (NAP + 5)

    today = datetime.datetime.now(datetime.timezone.utc).date()
    df = c.usage(since=today, by=["day", "workload", "worker_account"])
    assert list(df.columns) == ["day", "workload", "worker_account", "tasks", "worker_seconds"]
    assert df["day"].dt.date.tolist() == [today]
    assert df["workload"].tolist() == ["nap"] and df["worker_account"].tolist() == [""]

    empty = c.usage(since=datetime.datetime.now() + datetime.timedelta(days=2), by="account,day")
    assert list(empty.columns) == ["account", "day", "tasks", "worker_seconds"] and len(empty) == 0


def test_usage_without_pandas(napped: Coordinator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas fails
    rows = napped.client().usage(by="workload,account", until="2999-01-01T00:00:00Z")
    assert isinstance(rows, list) and len(rows) == 1 and isinstance(rows[0], scimesh.Usage)
    assert set(rows[0]) == {"workload", "account", "tasks", "worker_seconds"}
    assert rows[0].workload == "nap" and rows[0].account == "admin" and rows[0].tasks == CHUNKS
    assert rows[0].day is None and rows[0].worker_account is None  # not asked for


def test_usage_bad_input(napped: Coordinator) -> None:
    c = napped.client()
    with pytest.raises(scimesh.APIError) as e:
        c.usage(by="owner")
    assert e.value.status == 400 and e.value.code == "invalid_argument" and "owner" in e.value.message
    with pytest.raises(scimesh.APIError) as e:
        c.usage(since="last week")
    assert e.value.status == 400
    with pytest.raises(TypeError):
        c.usage(since=1700000000)
