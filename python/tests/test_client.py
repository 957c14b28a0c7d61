"""The client against a real coordinator and real workers (conftest)."""

from __future__ import annotations

import io
import os
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

import scimesh
from conftest import SCRIPTS, Coordinator, need, python_command
from helpers import fingerprints, parse, tanimoto_top, top, write_fingerprints

N, K = 2000, 25


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory):
    rows, query = fingerprints(N, seed=7)
    path = tmp_path_factory.mktemp("table") / "fps.csv"
    write_fingerprints(path, rows)
    return path, rows, query, tanimoto_top(rows, query, K)


def test_submit_path(client: scimesh.Client, table) -> None:
    path, _, query, want = table
    job = client.submit(str(path), workload="tanimoto", top_k=K, params={"query": query}, chunk_rows=300, name="path")
    assert job.status in ("pending", "running")
    assert job.tasks.total == 7  # 2000 rows in chunks of 300
    assert job.wait(progress=False) is job
    assert job.status == "completed" and job.progress == 1.0 and job.tasks.completed == 7
    assert parse(job.result()) == want


def test_submit_path_names_the_job(client: scimesh.Client, table) -> None:
    path = table[0]
    for source in (str(path), path):
        job = client.submit(source, workload="nobody-runs-this")
        assert job.name == "fps.csv" and client.job(job.id).name == "fps.csv"
    assert client.submit(path, workload="nobody-runs-this", name="mine").name == "mine"
    with open(path, "rb") as f:
        assert client.submit(f, workload="nobody-runs-this").name == ""


def test_submit_file_objects(client: scimesh.Client, table, tmp_path: Path) -> None:
    path, _, query, want = table
    with open(path, "rb") as f:
        job = client.submit(f, workload="tanimoto", top_k=K, params={"query": query}, chunk_rows=500)
    assert parse(job.wait(progress=False).result()) == want
    text = io.StringIO("not part of the table\n" + path.read_text())
    text.readline()  # a file object is sent from where it stands
    job = client.submit(text, workload="tanimoto", top_k=K, params={"query": query}, chunk_rows=500)
    assert parse(job.wait(progress=False).result()) == want
    job.download(tmp_path / "out.csv")
    assert (tmp_path / "out.csv").read_text() == job.result()


def test_submit_pipe(client: scimesh.Client, table) -> None:
    # A one-shot stream (not seekable): sent as it comes, with chunked encoding.
    path, _, query, want = table
    r, w = os.pipe()
    data = path.read_bytes()

    def feed() -> None:
        with os.fdopen(w, "wb") as f:
            for i in range(0, len(data), 4096):
                f.write(data[i : i + 4096])

    threading.Thread(target=feed, daemon=True).start()
    with os.fdopen(r, "rb") as f:
        job = client.submit(f, workload="tanimoto", top_k=K, params={"query": query}, chunk_rows=700)
    assert parse(job.wait(progress=False).result()) == want


def test_submit_dataframe(client: scimesh.Client, table, monkeypatch: pytest.MonkeyPatch) -> None:
    need("pandas")
    import pandas as pd

    from scimesh import _source

    _, rows, query, want = table
    df = pd.DataFrame(rows, columns=["id", "fingerprint"])
    monkeypatch.setattr(_source, "FRAME_ROWS", 333)  # several pieces, one header
    job = client.submit(df, workload="tanimoto", top_k=K, params={"query": query}, chunk_rows=400)
    assert job.tasks.total == 5
    job.wait(progress=False)
    assert parse(job.result()) == want
    got = job.dataframe()
    assert list(got.columns) == ["id", "score"]
    assert list(zip(got["id"], got["score"])) == want
    # A named index is a column of the table.
    job = client.submit(df.set_index("id"), workload="tanimoto", top_k=K, params={"query": query})
    assert parse(job.wait(progress=False).result()) == want


def test_dataframe_without_pandas(client: scimesh.Client, table, monkeypatch: pytest.MonkeyPatch) -> None:
    path, _, query, _ = table
    job = client.submit(path, workload="tanimoto", top_k=3, params={"query": query}).wait(progress=False)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="needs pandas"):
        job.dataframe()


def test_wait_tqdm(client: scimesh.Client, table, capsys: pytest.CaptureFixture) -> None:
    need("tqdm")
    path, _, query, want = table
    job = client.submit(path, workload="tanimoto", top_k=K, params={"query": query}, chunk_rows=250)
    job.wait(progress="tqdm")
    err = capsys.readouterr().err
    assert f"job {job.id}" in err and "8/8" in err and "100%" in err, err
    assert parse(job.result()) == want


def test_wait_text_bar(client: scimesh.Client, table, capsys: pytest.CaptureFixture) -> None:
    path, _, query, _ = table
    job = client.submit(path, workload="tanimoto", top_k=K, params={"query": query}, chunk_rows=250)
    job.wait(progress="text")
    lines = capsys.readouterr().err.splitlines()
    assert lines, "no progress shown"
    assert lines[-1] == f"job {job.id} [{'#' * 30}] 100% 8/8 chunks (completed)", lines


def test_wait_falls_back_without_tqdm(client: scimesh.Client, table, capsys, monkeypatch) -> None:
    path, _, query, _ = table
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    job = client.submit(path, workload="tanimoto", top_k=K, params={"query": query}, chunk_rows=1000)
    job.wait()  # progress=True: tqdm when it imports, else the text bar
    assert capsys.readouterr().err.splitlines()[-1].endswith("100% 2/2 chunks (completed)")


def test_run_workload_as_worker_command(client: scimesh.Client, tmp_path: Path) -> None:
    # tests/workloads/charsum.py: scimesh.run_workload in a real worker, one process per chunk.
    texts = [f"molecule {i} \u00e9\u4e2d" * (i % 5) for i in range(400)]
    texts[3] = 'quoted "text",\nwith a newline'
    texts[10] = "skip me"
    path = tmp_path / "texts.csv"
    import csv

    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["id", "text"])
        w.writerows((f"r{i:04d}", t) for i, t in enumerate(texts))
    scored = [(f"r{i:04d}", sum(map(ord, t)) * 3 / 7) for i, t in enumerate(texts) if not t.startswith("skip")]
    want = top(scored, 30)
    job = client.submit(path, workload="charsum", top_k=30, params={"factor": 3}, chunk_rows=37)
    job.wait(progress=False)
    # The scores as run_workload wrote them (repr), byte for byte.
    assert job.result() == "id,score\n" + "".join(f"{i},{s!r}\n" for i, s in want)


def test_cancel(client: scimesh.Client, table) -> None:
    path, _, _, _ = table
    job = client.submit(path, workload="nobody-runs-this", top_k=5)
    assert job.status == "pending"
    with pytest.raises(scimesh.APIError) as e:
        job.result()
    assert (e.value.status, e.value.code) == (409, "not_ready")
    with pytest.raises(TimeoutError, match="still pending"):
        job.wait(progress=False, timeout=1)
    assert job.cancel() is job and job.status == "cancelled"
    assert job.cancel().status == "cancelled"  # idempotent
    with pytest.raises(scimesh.JobFailed) as failed:
        job.wait(progress=False)
    assert failed.value.status == "cancelled" and failed.value.job is job
    assert job.id in {j.id for j in client.jobs(status="cancelled")}


def test_retry_failed_job(coord: Coordinator, client: scimesh.Client, tmp_path: Path) -> None:
    path = tmp_path / "values.csv"
    values = [(i * 7919) % 1000 / 8 for i in range(90)]
    path.write_text("id,value\n" + "".join(f"v{i},{v}\n" for i, v in enumerate(values)))
    coord.marker.write_text("")
    try:
        job = client.submit(path, workload="flaky", top_k=10, chunk_rows=30, max_attempts=1)
        with pytest.raises(scimesh.JobFailed) as e:
            job.wait(progress=False)
        assert e.value.status == "failed" and e.value.job.status == "failed"
        [failed] = job.list_tasks(state="failed")
        assert failed.task_id in e.value.error
        assert "the marker file is there" in client.logs(failed.task_id)
    finally:
        coord.marker.unlink()
    assert job.retry() is job and job.status == "pending"
    job.wait(progress=False)
    assert parse(job.result()) == top([(f"v{i}", v) for i, v in enumerate(values)], 10)
    with pytest.raises(scimesh.APIError) as e:
        job.retry()  # a completed job
    assert (e.value.status, e.value.code) == (409, "conflict")


def test_workloads(coord: Coordinator, client: scimesh.Client) -> None:
    deadline = time.monotonic() + 30
    while not (got := client.workloads()) and time.monotonic() < deadline:
        time.sleep(0.1)  # until the worker's first claim
    assert [w.name for w in got] == ["charsum", "flaky", "tanimoto"], got
    assert all(w.workers == 1 and w.last_seen.endswith("Z") for w in got), got
    with pytest.raises(scimesh.APIError) as e:
        coord.client(token=coord.worker_token).workloads()
    assert e.value.status == 403


def test_errors(coord: Coordinator, client: scimesh.Client) -> None:
    def code(call) -> tuple:
        with pytest.raises(scimesh.APIError) as e:
            call()
        return e.value.status, e.value.code, e.value.message

    assert code(lambda: coord.client(token="not-the-token").jobs())[:2] == (401, "unauthenticated")
    assert code(lambda: coord.client(token="").jobs())[:2] == (401, "unauthenticated")
    assert code(lambda: coord.client(token=coord.worker_token).jobs())[:2] == (403, "permission_denied")
    assert code(lambda: client.job("s0:no-such-job"))[:2] == (404, "not_found")
    status, c, msg = code(lambda: client.upload(b"id,fingerprint\na,00\nb\n"))
    assert (status, c) == (400, "invalid_argument") and "line 3" in msg, msg
    status, c, msg = code(lambda: client.submit(b"id,fingerprint\na,00\n", workload="tanimoto", top_k=0))
    assert (status, c) == (400, "invalid_argument") and "top_k" in msg, msg


def test_bad_record_early_in_a_big_upload(client: scimesh.Client, tmp_path: Path) -> None:
    # The coordinator refuses at line 3 and stops reading: the client still
    # reports its answer, not the broken pipe of the rest of the body.
    path = tmp_path / "big-bad.csv"
    with open(path, "w") as f:
        f.write("id,fingerprint\na,00\nb\n")
        line = "c,00ff00ff00ff00ff\n" * 1000
        for _ in range(1500):  # about 27 MB
            f.write(line)
    with pytest.raises(scimesh.APIError) as e:
        client.upload(path)
    assert (e.value.status, e.value.code) == (400, "invalid_argument") and "line 3" in e.value.message


def test_jobs_pages(client: scimesh.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    tag = uuid.uuid4().hex[:8]
    made = [client.submit(b"id,fingerprint\na,00\n", workload="nobody-runs-this", name=f"{tag}-{i}") for i in range(5)]
    all_jobs = client.jobs()
    paged = client.jobs(page_size=2)
    assert [j.id for j in paged] == [j.id for j in all_jobs]
    assert len({j.id for j in paged}) == len(paged)
    assert {j.id for j in made} <= {j.id for j in paged}
    assert len(client.jobs(limit=3, page_size=2)) == 3
    # iter_jobs: the same jobs, a page asked for when the last is used up.
    calls = []
    call = client._t.call
    monkeypatch.setattr(client._t, "call", lambda *a, **k: calls.append(k.get("query")) or call(*a, **k))
    lazy = client.iter_jobs(page_size=2)
    assert calls == []
    first = [next(lazy), next(lazy)]
    assert len(calls) == 1
    assert [j.id for j in first + list(lazy)] == [j.id for j in all_jobs] and len(calls) > 1
    assert [j.id for j in client.iter_jobs(limit=3, page_size=2)] == [j.id for j in all_jobs[:3]]
    pending = {j.id for j in client.jobs(status="pending")}
    assert {j.id for j in made} <= pending
    for j in made:
        j.cancel()
    assert not ({j.id for j in made} & {j.id for j in client.jobs(status="pending")})


def test_defaults_from_environment(coord: Coordinator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCIMESH_COORDINATOR", coord.url)
    monkeypatch.setenv("SCIMESH_TOKEN", coord.client_token)
    with scimesh.Client() as c:
        assert c.url == coord.url
        c.jobs(limit=1)  # authenticated
    monkeypatch.setenv("SCIMESH_TOKEN", "wrong")
    with pytest.raises(scimesh.APIError) as e, scimesh.Client() as c:
        c.jobs(limit=1)
    assert e.value.status == 401



def test_run_workload_persistent(coord, client: scimesh.Client, tmp_path: Path) -> None:
    # tests/workloads/slowload.py takes 2 s to load; under `worker
    # --persistent` with two slots it loads twice for 50 chunks, speaking
    # frames/1 through scimesh.run_workload, and the result is exact.
    starts = tmp_path / "starts"
    coord.worker("wp", "slowload=" + python_command(SCRIPTS / "slowload.py", STARTS_FILE=str(starts)),
                 concurrency=2, extra=["--persistent", "slowload"])
    rows = [(f"r{i}", (i * 37) % 101) for i in range(1000)]
    path = tmp_path / "values.csv"
    path.write_text("id,value\n" + "".join(f"{i},{v}\n" for i, v in rows))
    job = client.submit(str(path), workload="slowload", top_k=10, chunk_rows=20)
    assert job.tasks.total == 50
    job.wait(progress=False, timeout=120)
    best = sorted(rows, key=lambda r: -r[1])[:10]  # stable: ties in row order
    assert job.result() == "id,score\n" + "".join(f"{i},{float(v)!r}\n" for i, v in best)
    lines = starts.read_text().splitlines()
    assert len(lines) == 2, lines
    assert all(line.endswith(" frames/1") for line in lines), lines


def test_unreadable_source_is_not_a_network_error(client: scimesh.Client, tmp_path: Path) -> None:
    # A file that cannot be read fails at once, as itself: not retried, not a NetworkError.
    with pytest.raises(scimesh.SourceError, match="cannot open"):
        client.submit(tmp_path, workload="tanimoto")  # a directory

    class Unreadable(io.RawIOBase):  # a read that fails, even for root (CI runs as root)
        def readable(self) -> bool:
            return True

        def readinto(self, b) -> int:  # type: ignore[override]
            raise OSError(5, "Input/output error")

    with pytest.raises(scimesh.SourceError):
        client.submit(Unreadable(), workload="tanimoto")


def test_errors_share_a_base(client: scimesh.Client) -> None:
    for e in (scimesh.APIError, scimesh.NetworkError, scimesh.SourceError, scimesh.JobFailed, scimesh.Timeout,
              scimesh.WorkloadError):
        assert issubclass(e, scimesh.Error), e
    with pytest.raises(scimesh.Error) as caught:
        client.job("s0:no-such-job")
    assert isinstance(caught.value, scimesh.APIError) and caught.value.status == 404
    # A wait that runs out of time: a scimesh.Error and a TimeoutError both.
    job = client.submit(b"id,fingerprint\na,00\n", workload="nobody-runs-this")
    try:
        with pytest.raises(scimesh.Error) as caught:
            job.wait(progress=False, timeout=1)
        assert type(caught.value) is scimesh.Timeout and isinstance(caught.value, TimeoutError)
        assert "still pending" in str(caught.value)
        with pytest.raises(TimeoutError):
            job.wait(progress=False, timeout=0.5)
    finally:
        job.cancel()


def test_connections_are_kept_open(coord) -> None:
    """Calls reuse one connection; close() lets it go and the next call
    connects again; a kept connection closed under it is replaced at once."""
    import socket

    with coord.client() as c:
        opened = []
        connect = c._t._connect
        c._t._connect = lambda timeout: opened.append(timeout) or connect(timeout)
        for _ in range(5):
            c.jobs()
        c.workloads()
        assert len(opened) == 1, opened
        c.close()
        c.jobs()
        assert len(opened) == 2, opened
        c._t._idle[-1].sock.shutdown(socket.SHUT_RDWR)  # as the coordinator closing it while idle
        assert isinstance(c.jobs(), list)
        assert len(opened) == 3, opened
    assert c._t._idle == []
