"""Code blocks of the project's Markdown pages, and a bash that runs them
as a reader would: the README's and the tutorial's tests share these."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from pathlib import Path
from typing import List, Tuple

_BLOCK = re.compile(r"(?:<!-- (file|not run): ?([^>]*?) -->\n[ \t]*)?```(\w+)\n(.*?)```", re.S)


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


class Reader:
    """A reader following a page: an empty directory to work in, the
    built binary and this checkout's package where the page's installs
    would put them (a `python3` on PATH that has the package on its module
    path), a coordinator address of its own, one bash for the page's sh
    blocks and one namespace for its python blocks. Use it as a context
    manager: inside, the process works in that directory and environment."""

    def __init__(self, binary: Path, tmp_path: Path, python_dir: Path, python: str) -> None:
        self.work = tmp_path / "work"
        self.work.mkdir()
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "scimesh").symlink_to(binary)
        shim = bin_dir / "python3"
        shim.write_text(f'#!/bin/sh\nPYTHONPATH={python_dir} exec {python} "$@"\n')
        shim.chmod(0o755)
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCIMESH_") and not k.endswith("_AUTH_TOKEN")}
        env.update(PATH=f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}", HOME=str(tmp_path),
                   SCIMESH_ADDR=f"127.0.0.1:{self.port}", SCIMESH_COORDINATOR=f"http://127.0.0.1:{self.port}")
        self.env = env
        self.namespace: dict = {"__name__": "__page__"}
        self.shell: "Shell | None" = None

    def __enter__(self) -> "Reader":
        self._saved, self._cwd = dict(os.environ), os.getcwd()
        self.shell = Shell(self.work, self.env)
        os.chdir(self.work)
        os.environ.clear()
        os.environ.update(self.env)
        return self

    def __exit__(self, *exc) -> None:
        os.chdir(self._cwd)
        os.environ.clear()
        os.environ.update(self._saved)
        assert self.shell is not None
        self.shell.close()

    def run(self, kind: str, arg: str, code: str, page: Path) -> None:
        """Does what the block of kind says (see blocks); a skipped block
        does nothing."""
        assert self.shell is not None
        if kind == "file":
            (self.work / arg).write_text(code)
        elif kind == "sh":
            self.shell.run(code)
            if "scimesh serve" in code:
                wait_ready(self.port, self.shell)
        elif kind == "python":
            try:
                exec(compile(code, str(page), "exec"), self.namespace)
            except BaseException as e:
                raise AssertionError(f"this block failed: {e!r}\n{code}\n{self.shell.output()}") from e

    def wait_stopped(self) -> None:
        """Waits for the page's coordinator to stop listening."""
        deadline = time.monotonic() + 15
        while listening(self.port):
            assert time.monotonic() < deadline, "the coordinator still listens 15 s after the page stopped it"
            time.sleep(0.1)
