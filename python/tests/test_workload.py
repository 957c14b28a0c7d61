"""scimesh.run_workload driven by hand, without a worker: one chunk on
stdin, and the frames/1 loop with hand-made frames through a pipe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import IO, List, Optional, Tuple

from conftest import PYTHON_DIR, SCRIPTS, env_without

FRAMED = SCRIPTS / "framed.py"


def _env(**extra: str) -> dict:
    env = env_without("SCIMESH_PROTOCOL", "SCIMESH_PARAMETERS", "SCIMESH_TASK_ID")
    env["PYTHONPATH"] = str(PYTHON_DIR)
    env.update(extra)
    return env


def test_one_chunk_exact_output(tmp_path: Path) -> None:
    chunk = 'id,x\na,1.5\nb,none\n"c,1","0.1"\nd,3\n'
    done = subprocess.run(
        [sys.executable, str(FRAMED)], input=chunk.encode(), capture_output=True,
        env=_env(SCIMESH_PARAMETERS='{"k": 3}'), cwd=tmp_path, timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == f'id,score\na,{1.5 * 3!r}\n"c,1",{0.1 * 3!r}\nd,{3.0 * 3!r}\n'
    assert b"stray print from" in done.stderr  # print() went to the log, not the output
    assert (tmp_path / "touched").exists()


def test_one_chunk_failure_names_the_row(tmp_path: Path) -> None:
    chunk = "id,x\na,1\nb,2\nbad-one,boom\n"
    done = subprocess.run(
        [sys.executable, str(FRAMED)], input=chunk.encode(), capture_output=True,
        env=_env(SCIMESH_PARAMETERS='{"k": 1}'), cwd=tmp_path, timeout=30,
    )
    assert done.returncode == 1
    err = done.stderr.decode()
    assert "line 4 (id 'bad-one'): ValueError: cannot score boom" in err, err


def test_one_chunk_without_the_id_column(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(FRAMED)], input=b"name,x\na,1\n", capture_output=True,
        env=_env(SCIMESH_PARAMETERS='{"k": 1}'), cwd=tmp_path, timeout=30,
    )
    assert done.returncode == 1
    assert "has no 'id' column" in done.stderr.decode()


def _frame(kind: str, body: bytes) -> bytes:
    return b"%s %d\n" % (kind.encode(), len(body)) + body


def _read_frame(out: IO[bytes]) -> Optional[Tuple[str, bytes]]:
    header = out.readline()
    if not header:
        return None
    kind, n = header.decode().split(" ")
    body = out.read(int(n))
    assert len(body) == int(n)
    return kind, body


def _answer(out: IO[bytes]) -> Tuple[str, str]:
    """Reads a chunk's answer: the output frames joined, and the last
    frame's type (done or error) with its body."""
    pieces: List[bytes] = []
    while True:
        frame = _read_frame(out)
        assert frame is not None, "the process closed stdout mid-chunk"
        kind, body = frame
        if kind == "output":
            pieces.append(body)
            continue
        assert kind in ("done", "error"), kind
        return b"".join(pieces).decode(), f"{kind}:{body.decode()}"


def test_frames_loop(tmp_path: Path) -> None:
    slot = tmp_path / "slot"
    slot.mkdir()
    p = subprocess.Popen(
        [sys.executable, str(FRAMED)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=open(tmp_path / "stderr", "wb"), env=_env(SCIMESH_PROTOCOL="frames/1"), cwd=slot,
    )
    try:
        def chunk(n: int, params: dict, csv: str) -> Tuple[str, str]:
            work = tmp_path / f"work{n}"
            work.mkdir()
            task = {"task_id": f"s0:t{n}", "job_id": "s0:j1", "chunk_index": n, "attempt": 1,
                    "parameters": params, "work_dir": str(work)}
            p.stdin.write(_frame("task", json.dumps(task).encode()) + _frame("input", csv.encode()))
            p.stdin.flush()
            return _answer(p.stdout)

        # A big chunk comes back in several output frames, in order.
        rows = "".join(f"r{i},{i}\n" for i in range(20000))
        out, end = chunk(0, {"k": 2}, "id,x\n" + rows)
        assert end == "done:"
        assert out == "id,score\n" + "".join(f"r{i},{i * 2.0!r}\n" for i in range(20000))
        assert (tmp_path / "work0" / "touched").exists()  # each chunk runs in its work_dir

        # An exception in score fails the chunk with an error frame naming the row...
        out, end = chunk(1, {"k": 1}, "id,x\na,1\nz,boom\n")
        assert end == "error:line 3 (id 'z'): ValueError: cannot score boom"
        assert p.poll() is None

        # ...and the process serves the next chunk as usual, with its parameters.
        out, end = chunk(2, {"k": 0.5}, 'id,x\nq,none\n"w\nx",3\n')
        assert (out, end) == (f'id,score\n"w\nx",{1.5!r}\n', "done:")
        assert not (slot / "touched").exists()

        p.stdin.close()  # no more chunks: the process exits 0
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    err = (tmp_path / "stderr").read_text()
    assert "stray print from s0:t2" in err, err  # the task's variables, and print() on stderr


def test_frames_protocol_garbage(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(FRAMED)], input=b"hello world\n", capture_output=True,
        env=_env(SCIMESH_PROTOCOL="frames/1"), cwd=tmp_path, timeout=30,
    )
    assert done.returncode == 2
    assert done.stdout == b""
    assert b"not a frame header" in done.stderr


def test_unknown_protocol(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(FRAMED)], input=b"", capture_output=True,
        env=_env(SCIMESH_PROTOCOL="frames/9"), cwd=tmp_path, timeout=30,
    )
    assert done.returncode == 2
    assert b"frames/9" in done.stderr


def test_binary_safe(tmp_path: Path) -> None:
    # Bytes that are not UTF-8 in an id come back as they went.
    chunk = b"id,x\n\xff\xfeid,2\n"
    done = subprocess.run(
        [sys.executable, str(FRAMED)], input=chunk, capture_output=True,
        env=_env(SCIMESH_PARAMETERS='{"k": 1}'), cwd=tmp_path, timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"id,score\n\xff\xfeid,2.0\n"
    assert os.path.exists(tmp_path / "touched")
