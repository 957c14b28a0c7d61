"""Workloads in Python: ``run_workload(score)`` as the body of the command a
worker runs, in either protocol of docs/workload-protocol.md.

- One process per chunk (the default): the chunk is stdin, the job's
  parameters are ``SCIMESH_PARAMETERS``, the scored rows go to stdout and
  the process exits (status 1 when ``score`` raised).
- One process per worker slot (``scimesh worker --persistent NAME``; the
  environment has ``SCIMESH_PROTOCOL=frames/1``): chunk after chunk comes in
  frames (``TYPE LENGTH\\n`` and LENGTH bytes): a ``task`` frame (JSON), an
  ``input`` frame (the chunk); the answer is ``output`` frames, then
  ``done``, or ``error`` when ``score`` raised, after which the next chunk
  is served as usual. Things loaded at import time (a model) are so loaded
  once per slot rather than once per chunk.

In both, stdout carries only the protocol: what the process prints, by
``print()`` in ``score`` or from a C library writing to file descriptor 1,
goes to stderr, hence to the task's log.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
import traceback
from typing import IO, Any, Callable, Dict, Iterable, Optional

from .errors import Error

__all__ = ["run_workload", "ScoreFunc"]

ScoreFunc = Callable[[Dict[str, str], Dict[str, Any]], Optional[float]]

# Output is sent in pieces of about this many bytes.
_PIECE = 1 << 16

# A frame header is a short line: "output 123456789\n".
_MAX_HEADER = 64

# The task variables a per-chunk command has in its environment; a frame
# loop sets them for each chunk too, so that score sees the same in both.
_TASK_ENV = {
    "task_id": "SCIMESH_TASK_ID",
    "job_id": "SCIMESH_JOB_ID",
    "chunk_index": "SCIMESH_CHUNK_INDEX",
    "attempt": "SCIMESH_ATTEMPT",
}


class WorkloadError(Error):
    """A chunk that cannot be scored: a missing id column, a bad score."""


class _ProtocolError(Exception):
    """What the worker sent is not the frames protocol."""


def run_workload(score: ScoreFunc, id_column: str = "id") -> None:
    """Scores the chunk(s) a worker hands this process and writes ``id,score``.

    ``score(row, params)`` is called for each row of the chunk: ``row`` a
    dict of the row's fields by header name (strings), ``params`` the job's
    parameters (a dict); it returns the row's score (a finite number) or
    None to leave the row out. The output is CSV with the header
    ``id,score``, ``id`` the row's ``id_column`` field, the score written
    with ``repr()`` so that it reads back as the same float. Submit the job
    with the default ``score_column`` ("score").

    Speaks the protocol the environment says: ``SCIMESH_PROTOCOL=frames/1``
    (``scimesh worker --persistent``) serves chunk after chunk until stdin
    ends; otherwise one chunk is read from stdin and the call returns. An
    exception in ``score`` fails the chunk with the row's line and id: the
    process exits with status 1 in the first case, and answers an ``error``
    frame and goes on in the second.
    """
    out = _claim_stdout()
    stdin = sys.stdin.buffer
    protocol = os.environ.get("SCIMESH_PROTOCOL", "")
    if protocol == "frames/1":
        code = serve_frames(score, stdin, out, id_column=id_column)
    elif protocol:
        print(f"scimesh: SCIMESH_PROTOCOL={protocol!r} is not a protocol this version speaks (frames/1)", file=sys.stderr)
        code = 2
    else:
        code = run_chunk(score, stdin, out, id_column=id_column)
    out.flush()
    if code:
        raise SystemExit(code)


def run_chunk(score: ScoreFunc, stdin: IO[bytes], out: IO[bytes], *, id_column: str = "id") -> int:
    """One chunk from stdin, parameters from ``SCIMESH_PARAMETERS``; returns
    the exit status (0, or 1 after telling stderr what failed)."""
    try:
        params = _params(os.environ.get("SCIMESH_PARAMETERS"))
        text = io.TextIOWrapper(stdin, encoding="utf-8", errors="surrogateescape", newline="")
        _score_csv(score, params, text, lambda s: out.write(s.encode("utf-8", "surrogateescape")), id_column)
    except Exception as e:
        traceback.print_exc(file=sys.stderr)
        print(f"scimesh: the chunk failed: {_describe(e)}", file=sys.stderr)
        return 1
    return 0


def serve_frames(score: ScoreFunc, stdin: IO[bytes], out: IO[bytes], *, id_column: str = "id") -> int:
    """Serves chunks in frames until stdin ends; returns the exit status
    (0 at the end of stdin, 2 when the worker sent no frames protocol)."""
    home = os.getcwd()
    try:
        while True:
            frame = _read_frame(stdin)
            if frame is None:
                return 0
            kind, body = frame
            if kind != "task":
                raise _ProtocolError(f"expected a task frame, got {kind!r}")
            task = json.loads(body.decode("utf-8"))
            if not isinstance(task, dict):
                raise _ProtocolError("the task frame is not a JSON object")
            frame = _read_frame(stdin)
            if frame is None or frame[0] != "input":
                raise _ProtocolError(f"expected the input frame of task {task.get('task_id')}, got {frame and frame[0]!r}")
            _serve_chunk(score, task, frame[1], out, id_column, home)
    except (_ProtocolError, ValueError) as e:
        print(f"scimesh: frames/1: {e}", file=sys.stderr)
        return 2


def _serve_chunk(score: ScoreFunc, task: Dict[str, Any], data: bytes, out: IO[bytes], id_column: str, home: str) -> None:
    saved = {name: os.environ.get(name) for name in list(_TASK_ENV.values()) + ["SCIMESH_PARAMETERS"]}
    try:
        params = task.get("parameters")
        if params is None:
            params = {}
        for key, name in _TASK_ENV.items():
            if key in task:
                os.environ[name] = str(task[key])
        os.environ["SCIMESH_PARAMETERS"] = json.dumps(params)
        if task.get("work_dir"):
            os.chdir(task["work_dir"])
        if not isinstance(params, dict):
            raise WorkloadError(f"the task's parameters are a {type(params).__name__}, not a JSON object")
        text = io.StringIO(data.decode("utf-8", "surrogateescape"), newline="")
        _score_csv(
            score, params, text, lambda s: write_frame(out, "output", s.encode("utf-8", "surrogateescape")), id_column
        )
    except Exception as e:
        traceback.print_exc(file=sys.stderr)
        write_frame(out, "error", _describe(e).encode("utf-8", "replace"))
    else:
        write_frame(out, "done", b"")
    finally:
        out.flush()
        os.chdir(home)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _score_csv(
    score: ScoreFunc, params: Dict[str, Any], lines: Iterable[str], emit: Callable[[str], Any], id_column: str
) -> None:
    reader = csv.reader(lines)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["id", "score"])
    header = next(reader, None)
    if header is not None:
        if id_column not in header:
            raise WorkloadError(
                f"the chunk's header {header} has no {id_column!r} column; name it with run_workload(score, id_column=...)"
            )
        idx = header.index(id_column)
        line = reader.line_num + 1
        for row in reader:
            if len(row) != len(header):
                raise WorkloadError(f"line {line}: {len(row)} fields where the header has {len(header)}")
            rec = dict(zip(header, row))
            try:
                value = score(rec, params)
                if value is not None:
                    s = float(value)
                    if not math.isfinite(s):
                        raise WorkloadError(f"score returned {value!r}; a score must be a finite number, or None to skip the row")
            except Exception as e:
                raise _RowError(line, row[idx], e) from e
            if value is not None:
                w.writerow([row[idx], repr(s)])
                if buf.tell() >= _PIECE:
                    emit(buf.getvalue())
                    buf.seek(0)
                    buf.truncate()
            line = reader.line_num + 1
    emit(buf.getvalue())


class _RowError(Exception):
    def __init__(self, line: int, row_id: str, cause: BaseException) -> None:
        super().__init__(f"line {line} (id {row_id!r}): {_describe(cause)}")


def _describe(e: BaseException) -> str:
    if isinstance(e, (_RowError, WorkloadError)):
        return str(e)
    return f"{type(e).__name__}: {e}"


def _params(raw: Optional[str]) -> Dict[str, Any]:
    if not raw:
        return {}
    params = json.loads(raw)
    if not isinstance(params, dict):
        raise WorkloadError(f"SCIMESH_PARAMETERS is a {type(params).__name__}, not a JSON object")
    return params


def _read_frame(stdin: IO[bytes]) -> Optional[tuple]:
    """The next (type, body), or None at the end of stdin between frames."""
    header = stdin.readline(_MAX_HEADER + 1)
    if not header:
        return None
    if not header.endswith(b"\n"):
        raise _ProtocolError(f"frame header {header[:_MAX_HEADER]!r} is cut short or too long")
    parts = header[:-1].split(b" ")
    if len(parts) != 2 or not parts[0].isalpha() or not parts[0].islower() or not parts[1].isdigit():
        raise _ProtocolError(f"{header!r} is not a frame header (TYPE LENGTH)")
    n = int(parts[1])
    chunks = []
    left = n
    while left > 0:
        piece = stdin.read(left)
        if not piece:
            raise _ProtocolError(f"stdin ended {left} bytes into a {parts[0].decode()} frame of {n}")
        chunks.append(piece)
        left -= len(piece)
    return parts[0].decode("ascii"), b"".join(chunks)


def write_frame(out: IO[bytes], kind: str, body: bytes) -> None:
    """Writes one frame: ``kind len(body)\\n`` then body."""
    out.write(b"%s %d\n" % (kind.encode("ascii"), len(body)))
    if body:
        out.write(body)


def _claim_stdout() -> IO[bytes]:
    """Keeps the process's stdout for the protocol alone: returns a binary
    file on a copy of file descriptor 1, and points descriptor 1 and
    sys.stdout at stderr, so that whatever else would be printed there
    lands in the task's log rather than in the output."""
    try:
        sys.stdout.flush()
    except (AttributeError, ValueError, OSError):
        pass
    try:
        fd = os.dup(1)
        os.dup2(2, 1)
    except OSError:
        return sys.stdout.buffer
    sys.stdout = sys.stderr
    return os.fdopen(fd, "wb", buffering=_PIECE)
