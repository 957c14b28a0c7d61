"""docs/tutorial.md, run as it is written.

Its blocks run in order in an empty directory, as a reader would run them:
```sh blocks in one bash (so `&` and `kill %1` mean what they say), ```python
blocks in one namespace (a notebook's kernel), and a block after
`<!-- file: NAME -->` saved as NAME. A block after `<!-- not run: WHY -->`
is skipped, for the reason it gives: the installs, which the tests stand in
for with the binary they built and the package of this checkout, found
through a `python3` on PATH that puts it on the module path.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Tuple

from conftest import PYTHON_DIR, REPO, need

TUTORIAL = REPO / "docs" / "tutorial.md"

_BLOCK = re.compile(r"(?:<!-- (file|not run): ?([^>]*?) -->\n)?```(\w+)\n(.*?)```", re.S)


def blocks(text: str) -> List[Tuple[str, str, str]]:
    """The tutorial's code blocks in order, as (kind, arg, code): kind is
    "file" (arg the name), "skip" (arg why), "sh" or "python"."""
    out = []
    for m in _BLOCK.finditer(text):
        mark, arg, lang, code = m.groups()
        if mark == "file":
            out.append(("file", arg.strip(), code))
        elif mark == "not run":
            out.append(("skip", arg.strip(), code))
        elif lang in ("sh", "python"):
            out.append((lang, "", code))
        else:
            raise AssertionError(f"a ```{lang} block the test does not know how to run:\n{code}")
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Shell:
    """One bash that runs the sh blocks in turn, its output in a file."""

    def __init__(self, cwd: Path, env: dict) -> None:
        self.dir = cwd / ".shell"
        self.dir.mkdir()
        self.out = open(self.dir / "out", "wb")
        self.proc = subprocess.Popen(["bash"], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=self.out, stderr=subprocess.STDOUT, start_new_session=True)
        self.n = 0

    def run(self, code: str, timeout: float = 60) -> None:
        self.n += 1
        rc = self.dir / f"rc{self.n}"
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{code}\necho $? > {rc}\n".encode())
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while not rc.exists() or not rc.read_text().endswith("\n"):
            assert time.monotonic() < deadline, f"this block did not end in {timeout} s:\n{code}\n{self.output()}"
            assert self.proc.poll() is None, f"bash exited:\n{self.output()}"
            time.sleep(0.05)
        assert rc.read_text().strip() == "0", f"this block failed:\n{code}\n{self.output()}"

    def output(self) -> str:
        return (self.dir / "out").read_text(errors="replace")

    def close(self) -> None:
        """Stops bash and what it left running (a worker lets its tasks
        end first, for up to its --grace of 30 s)."""
        deadline = time.monotonic() + 40
        sig = 15
        while True:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            if time.monotonic() > deadline:
                sig = 9
            time.sleep(0.1)
            self.proc.poll()
        self.proc.wait(timeout=30)
        self.out.close()


def test_tutorial(binary: Path, tmp_path: Path) -> None:
    need("pandas")
    need("numpy")
    work = tmp_path / "work"
    work.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(binary, bin_dir / "scimesh")
    shim = bin_dir / "python3"
    shim.write_text(f'#!/bin/sh\nPYTHONPATH={PYTHON_DIR} exec {sys.executable} "$@"\n')
    shim.chmod(0o755)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCIMESH_") and not k.endswith("_AUTH_TOKEN")}
    env.update(PATH=f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}", HOME=str(tmp_path),
               SCIMESH_ADDR=f"127.0.0.1:{port}", SCIMESH_COORDINATOR=f"http://127.0.0.1:{port}")

    todo = blocks(TUTORIAL.read_text())
    kinds = [k for k, _, _ in todo]
    assert kinds.count("sh") >= 2 and kinds.count("python") >= 5 and kinds.count("file") == 2, kinds

    saved = dict(os.environ)
    cwd = os.getcwd()
    shell = Shell(work, env)
    notebook: dict = {"__name__": "__tutorial__"}
    try:
        os.chdir(work)
        os.environ.clear()
        os.environ.update(env)
        for kind, arg, code in todo:
            if kind == "file":
                (work / arg).write_text(code)
            elif kind == "sh":
                shell.run(code)
                if "scimesh serve" in code:
                    wait_ready(port, shell)
            elif kind == "python":
                try:
                    exec(compile(code, str(TUTORIAL), "exec"), notebook)
                except BaseException as e:
                    raise AssertionError(f"this cell failed: {e!r}\n{code}\n{shell.output()}") from e
        assert shell.proc.poll() is None
        deadline = time.monotonic() + 15
        while listening(port):
            assert time.monotonic() < deadline, "the coordinator still listens 15 s after the tutorial's kill"
            time.sleep(0.1)
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(saved)
        shell.close()


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_ready(port: int, shell: Shell) -> None:
    """Waits for the coordinator the tutorial started, as the reader would
    wait for its first log line."""
    deadline = time.monotonic() + 30
    while not listening(port):
        assert time.monotonic() < deadline, f"serve did not listen in 30 s:\n{shell.output()}"
        time.sleep(0.05)
