"""Progress bars for Job.wait: tqdm's when it is installed (tqdm.auto, so
a notebook gets its widget), else a small text bar on stderr."""

from __future__ import annotations

import sys
from typing import IO, Any, Dict, Optional, Union

from .types import TaskCounts

Progress = Union[bool, str]


class _Bar:
    """What Job.wait drives: update with each answer, close at the end."""

    def update(self, job: Dict[str, Any]) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError


def make_bar(kind: Progress, job_id: str) -> Optional[_Bar]:
    """The bar for ``progress=kind``: True (or "auto") is tqdm when it
    imports and the text bar otherwise, "tqdm" insists on tqdm, "text" is
    the text bar, False none."""
    if kind is False or kind is None:
        return None
    if kind is True or kind == "auto":
        try:
            return _TqdmBar(job_id)
        except ImportError:
            return TextBar(job_id)
    if kind == "tqdm":
        return _TqdmBar(job_id)
    if kind == "text":
        return TextBar(job_id)
    raise ValueError(f'progress={kind!r}: use True, False, "tqdm" or "text"')


def _note(job: Dict[str, Any], c: TaskCounts) -> str:
    note = str(job.get("status", ""))
    if c.leased:
        note += f", {c.leased} leased"
    if c.failed:
        note += f", {c.failed} failed"
    return note


class _TqdmBar(_Bar):
    def __init__(self, job_id: str) -> None:
        from tqdm.auto import tqdm  # ImportError when tqdm is not installed

        self._tqdm = tqdm
        self._id = job_id
        self._bar: Any = None

    def update(self, job: Dict[str, Any]) -> None:
        c = TaskCounts.from_json(job.get("tasks") or {})
        if self._bar is None:  # made at the first answer, which has the total
            self._bar = self._tqdm(total=c.total, desc=f"job {self._id}", unit="chunk", dynamic_ncols=True)
        elif self._bar.total != c.total:
            self._bar.total = c.total
        if c.completed > self._bar.n:
            self._bar.update(c.completed - self._bar.n)
        self._bar.set_postfix_str(_note(job, c))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


class TextBar(_Bar):
    """A bar of '#' on ``stream`` (stderr): redrawn in place on a terminal,
    where a notebook or a log file gets a line per tenth of the way (and
    per change of status) instead of a carriage return each second."""

    WIDTH = 30

    def __init__(self, job_id: str, stream: Optional[IO[str]] = None) -> None:
        self._id = job_id
        self._out = stream if stream is not None else sys.stderr
        try:
            self._tty = self._out.isatty()
        except (AttributeError, ValueError):
            self._tty = False
        self._last: Optional[tuple] = None
        self._line = ""

    def update(self, job: Dict[str, Any]) -> None:
        c = TaskCounts.from_json(job.get("tasks") or {})
        total, done = c.total, c.completed
        frac = done / total if total else 0.0
        filled = int(frac * self.WIDTH)
        line = (
            f"job {self._id} [{'#' * filled}{'-' * (self.WIDTH - filled)}] "
            f"{frac * 100:3.0f}% {done}/{total} chunks ({_note(job, c)})"
        )
        if self._tty:
            pad = " " * max(0, len(self._line) - len(line))
            self._out.write("\r" + line + pad)
            self._out.flush()
        else:
            key = (job.get("status"), int(frac * 10), c.failed)
            if key != self._last:
                self._out.write(line + "\n")
                self._out.flush()
            self._last = key
        self._line = line

    def close(self) -> None:
        if self._tty and self._line:
            self._out.write("\n")
            self._out.flush()
