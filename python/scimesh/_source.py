"""Turns what a user submits (a path, a file object, a DataFrame, bytes)
into a streamed upload body, never the whole table in memory at once."""

from __future__ import annotations

import io
import os
import stat
import sys
from typing import IO, Any, Callable, Iterator, Union

from ._transport import Body
from .errors import SourceError

# How much of a file is read and sent at a time.
BLOCK = 1 << 20

# How many rows of a DataFrame are turned into CSV at a time.
FRAME_ROWS = 50_000

Source = Union[str, "os.PathLike[str]", IO[Any], bytes, bytearray, Any]


def body_of(source: Source) -> Body:
    """The upload body of source; raises TypeError for what is none of the
    kinds :meth:`scimesh.Client.submit` takes."""
    if isinstance(source, (str, os.PathLike)):
        return _path_body(os.fspath(source))
    if isinstance(source, (bytes, bytearray)):
        data = bytes(source)
        return Body(lambda: [data], len(data), True)
    if _is_dataframe(source):
        return Body(lambda: _dataframe_csv(source), None, True)
    if hasattr(source, "read"):
        return _file_body(source)
    raise TypeError(
        f"cannot upload a {type(source).__name__}: pass a path, a file object opened for reading, "
        "a pandas DataFrame or the CSV as bytes"
    )


def _path_body(path: str) -> Body:
    st = os.stat(path)  # a missing file fails here, before any request
    if not stat.S_ISREG(st.st_mode):
        # A named pipe or a device: read it as it comes, once.
        return Body(lambda: _read(lambda: open(path, "rb"), None, close=True), None, False)
    size = st.st_size
    return Body(lambda: _read(lambda: open(path, "rb"), size, close=True), size, True)


def _file_body(f: IO[Any]) -> Body:
    seekable = False
    try:
        seekable = f.seekable()
    except (AttributeError, OSError, ValueError):
        pass
    if not seekable:
        return Body(lambda: _read(lambda: f, None), None, False)  # one pass only: not retried
    start = f.tell()
    length = None
    try:
        st = os.fstat(f.fileno())
        if stat.S_ISREG(st.st_mode) and isinstance(f.read(0), bytes):
            length = max(0, st.st_size - start)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        pass

    def again() -> Iterator[bytes]:
        f.seek(start)
        return _read(lambda: f, length)

    return Body(again, length, True)


def _read(opener: Callable[[], IO[Any]], limit: Union[int, None], close: bool = False) -> Iterator[bytes]:
    """The bytes of the file opener gives, a block at a time (text is sent
    as UTF-8); with limit, no more than that many, so that a file growing
    while it is sent does not outrun its Content-Length. A file that cannot
    be opened or read is a SourceError, which no retry follows."""
    try:
        f = opener()
    except OSError as e:
        raise SourceError(f"cannot open what is being uploaded: {e}") from e
    try:
        yield from _blocks(f, limit)
    except OSError as e:
        raise SourceError(f"cannot read what is being uploaded: {e}") from e
    finally:
        if close:
            f.close()


def _blocks(f: IO[Any], limit: Union[int, None]) -> Iterator[bytes]:
    """f's bytes a block at a time, no more than limit if given."""
    left = limit
    while left is None or left > 0:
        piece = f.read(BLOCK if left is None else min(BLOCK, left))
        if not piece:
            return
        if isinstance(piece, str):
            piece = piece.encode("utf-8")
        if left is not None:
            left -= len(piece)
        yield piece


def _is_dataframe(obj: Any) -> bool:
    pd = sys.modules.get("pandas")  # a DataFrame means pandas is imported already
    return pd is not None and isinstance(obj, pd.DataFrame)


def _dataframe_csv(df: Any) -> Iterator[bytes]:
    """df as CSV, FRAME_ROWS rows at a time. The index is written as the
    first column(s) when it is named (df.set_index("id")), else left out."""
    index = any(name is not None for name in df.index.names)
    for start in range(0, max(len(df), 1), FRAME_ROWS):
        part = df.iloc[start : start + FRAME_ROWS]
        yield _to_csv(part, header=start == 0, index=index).encode("utf-8")


def _to_csv(df: Any, **kwargs: Any) -> str:
    try:
        return df.to_csv(lineterminator="\n", **kwargs)
    except TypeError:  # pandas before 1.5 spells it line_terminator
        return df.to_csv(line_terminator="\n", **kwargs)
