"""Backups of stragglers with real coordinators and workers: a chunk that
one worker holds far longer than the others took is run again by an idle
worker; the first result completes it, the other attempt is stopped, and
the final CSV is the same whichever wins or whatever becomes of the
other attempt (it finishes, fails, or its worker is killed)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Callable, Dict

import pytest

import scimesh
from conftest import Coordinator

# Scores a row by the length of its text.
SCORE = "exec awk -F, 'NR==1{print \"id,score\";next}{print $1\",\"length($2)}'"

ROWS = [(f"r{i}", "x" * (i * 7 % 11 + 1)) for i in range(40)]
TABLE = ("id,text\n" + "".join(f"{i},{t}\n" for i, t in ROWS)).encode()


def expected(top_k: int) -> str:
    best = sorted(ROWS, key=lambda r: -len(r[1]))[:top_k]  # stable: ties keep input order
    return "id,score\n" + "".join(f"{i},{len(t)}\n" for i, t in best)


def scripts(dir: Path) -> Dict[str, str]:
    """The workload of the slow worker, which waits for the file slow-go
    (or fails at slow-fail), and of the fast one, whose backups wait for
    fast-go; a command that was let go touches went-TASK-ATTEMPT."""
    slow, fast = dir / "slow.sh", dir / "fast.sh"
    slow.write_text(f"""#!/bin/sh
while [ ! -e {dir}/slow-go ] && [ ! -e {dir}/slow-fail ]; do sleep 0.05; done
touch {dir}/went-$SCIMESH_TASK_ID-$SCIMESH_ATTEMPT
[ -e {dir}/slow-fail ] && exit 1
{SCORE}
""")
    fast.write_text(f"""#!/bin/sh
if [ "$SCIMESH_ATTEMPT" -gt 1 ]; then
  while [ ! -e {dir}/fast-go ]; do sleep 0.05; done
  touch {dir}/went-$SCIMESH_TASK_ID-$SCIMESH_ATTEMPT
fi
{SCORE}
""")
    return {"slow": f"rank=sh {slow}", "fast": f"rank=sh {fast}"}


def until(what: str, cond: Callable[[], object], timeout: float = 60) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"not {what} after {timeout} s")


def straggler(c: Coordinator) -> tuple[scimesh.Client, scimesh.Job, Dict[str, object], str]:
    """Starts the slow worker, submits a job of 8 chunks, lets the slow
    worker take chunk 0, then starts the fast worker and waits for its
    backup of chunk 0. Returns the client, the job, the workers and the
    chunk's task ID."""
    cmds = scripts(c.dir)
    client = c.client()
    slow = c.worker("slow", cmds["slow"], concurrency=1)
    job = client.submit(TABLE, workload="rank", top_k=5, chunk_rows=5, lease_seconds=6, cache=False)
    chunk = until("leased to slow", lambda: next((t.task_id for t in client.tasks(job.id, state="leased")
                                                  if t.lease_owner == "slow"), None))
    fast = c.worker("fast", cmds["fast"], concurrency=1)
    until("backed up", lambda: client.task(chunk).attempt == 2 and client.task(chunk).lease_owner == "fast")
    assert job.refresh().status == "running"
    return client, job, {"slow": slow, "fast": fast}, chunk


@pytest.mark.parametrize("winner", ["backup", "straggler"])
def test_first_result_wins(binary, tmp_path_factory, winner: str) -> None:
    c = Coordinator(binary, tmp_path_factory.mktemp("backup"))
    try:
        client, job, _, chunk = straggler(c)
        first, then = ("fast-go", "slow-go") if winner == "backup" else ("slow-go", "fast-go")
        (c.dir / first).touch()
        assert job.wait(progress=False, timeout=60).result() == expected(5)
        task = client.task(chunk)
        assert task.state == "completed"
        assert task.lease_owner == ("fast" if winner == "backup" else "slow")
        # The other attempt is stopped: its heartbeat (every 2 s, a third
        # of the 6 s lease) gets 409 lease_lost and its worker kills the
        # command, which so never sees the file that would let it go.
        loser_attempt = 1 if winner == "backup" else 2
        time.sleep(3)
        (c.dir / then).touch()
        time.sleep(1)
        assert not (c.dir / f"went-{chunk}-{loser_attempt}").exists(), "the losing attempt's command was not stopped"
        assert (c.dir / f"went-{chunk}-{3 - loser_attempt}").exists(), "the winner's marker is missing: the check sees nothing"
        # Its worker, of concurrency 1, runs a new job.
        again = client.submit(TABLE, workload="rank", top_k=5, chunk_rows=20, speculate_after=0, cache=False)
        assert again.wait(progress=False, timeout=60).result() == expected(5)
        assert client.task(chunk).lease_owner == task.lease_owner
    finally:
        c.stop()


@pytest.mark.parametrize("end", ["fails", "is killed"])
def test_straggler_ends_backup_goes_on(binary, tmp_path_factory, end: str) -> None:
    c = Coordinator(binary, tmp_path_factory.mktemp("backup"))
    try:
        client, job, workers, chunk = straggler(c)
        if end == "fails":
            (c.dir / "slow-fail").touch()
            until("the straggler's failure recorded", lambda: client.task(chunk).error)
        else:
            os.kill(workers["slow"].pid, signal.SIGKILL)
            time.sleep(7)  # the straggler's lease of 6 s runs out; the backup's is renewed
        # The chunk stays leased to the backup.
        task = client.task(chunk)
        assert task.state == "leased" and task.lease_owner == "fast" and task.attempt == 2, task
        (c.dir / "fast-go").touch()
        assert job.wait(progress=False, timeout=60).result() == expected(5)
        assert client.task(chunk).lease_owner == "fast"
    finally:
        c.stop()


def test_no_backups(binary, tmp_path_factory) -> None:
    """speculate_after 0: the job waits for its straggler."""
    c = Coordinator(binary, tmp_path_factory.mktemp("backup"))
    try:
        cmds = scripts(c.dir)
        client = c.client()
        c.worker("slow", cmds["slow"], concurrency=1)
        job = client.submit(TABLE, workload="rank", top_k=5, chunk_rows=5, lease_seconds=6, cache=False, speculate_after=0)
        assert job.data["speculate_after"] == 0
        chunk = until("leased to slow", lambda: next((t.task_id for t in client.tasks(job.id, state="leased")
                                                      if t.lease_owner == "slow"), None))
        c.worker("fast", cmds["fast"], concurrency=1)
        until("the other chunks completed", lambda: job.refresh().tasks.completed == 7)
        time.sleep(2)  # well past 3 times their median: a backup would have started
        task = client.task(chunk)
        assert task.attempt == 1 and task.lease_owner == "slow", task
        (c.dir / "slow-go").touch()
        assert job.wait(progress=False, timeout=60).result() == expected(5)
    finally:
        c.stop()
