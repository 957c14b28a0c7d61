"""The scimesh binary that a wheel carries, and the ``scimesh`` command
that runs it.

A wheel built by ``make wheels`` holds the static binary at
``scimesh/bin/scimesh``; the package installed from source
(``pip install ./python``) holds none. Its ``scimesh`` command then runs
the next scimesh on PATH (one installed by install.sh or built with Go),
so that it does not hide it, or says that there is none.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

NO_BINARY = """\
scimesh: this installation of the Python package carries no scimesh binary,
and PATH has no other scimesh. It was installed from source, which gives
the Python client only.
To get the scimesh command, do one of these:
  pip install scimesh-VERSION-py3-none-PLATFORM.whl   (a wheel of a release)
  curl -fsSL https://github.com/scimesh/scimesh/releases/latest/download/install.sh | sh
  go build -o ~/.local/bin/scimesh ./cmd/scimesh   (from a clone, with Go)
"""


def binary() -> Optional[Path]:
    """The path of the scimesh binary this package carries, or None when it
    carries none."""
    path = Path(__file__).resolve().parent / "bin" / "scimesh"
    return path if os.access(path, os.X_OK) else None


def _is_this_command(path: str) -> bool:
    """Whether path is a ``scimesh`` command of this package (this one or
    another environment's), which must not be run in turn."""
    try:
        with open(path, "rb") as f:
            return b"scimesh._binary" in f.read(4096)
    except OSError:
        return True


def other_on_path() -> Optional[str]:
    """The first scimesh on PATH that is a program, not a ``scimesh``
    command of this package, or None."""
    for dir in os.get_exec_path():
        path = os.path.join(dir, "scimesh")
        if os.path.isfile(path) and os.access(path, os.X_OK) and not _is_this_command(path):
            return path
    return None


def main() -> None:
    """The ``scimesh`` console command: runs the carried binary, else the
    next scimesh on PATH, with this command's arguments, in place of this
    process."""
    path = binary() or other_on_path()
    if path is None:
        sys.stderr.write(NO_BINARY)
        sys.exit(1)
    os.execv(path, [str(path), *sys.argv[1:]])
