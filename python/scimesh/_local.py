"""scimesh.local(): a coordinator and a worker on this machine, for as long
as a with block lasts."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Iterator, List, Mapping, Optional, Union

from . import _binary
from .client import Client

# The coordinator's line that says where it serves.
_SERVING = re.compile(r"msg=serving addr=\S+ url=(\S+)")

# Reaches the coordinator without any HTTP_PROXY of the environment.
_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))

# Settings of the caller's environment that would change what the local
# coordinator and worker are (tokens, a database, TLS, another data
# directory) or where they connect: none of them is passed on.
_DROPPED = ("WORKER_AUTH_TOKEN", "CLIENT_AUTH_TOKEN", "PEER_AUTH_TOKEN", "DATABASE_URL", "ENV_FILE")


@contextlib.contextmanager
def local(
    workers: int = 1,
    workloads: Optional[Mapping[str, Optional[str]]] = None,
    *,
    binary: Optional[Union[str, "os.PathLike[str]"]] = None,
    timeout: float = 30.0,
) -> Iterator[Client]:
    """Runs a coordinator and a worker on this machine and yields a
    :class:`Client` of the coordinator; both stop, and their files are
    removed, when the ``with`` block ends, by an exception too::

        with scimesh.local(workers=4, workloads={"tanimoto": None}) as c:
            job = c.submit("fps.csv", workload="tanimoto", params={"query": "00ff"})
            df = job.wait().dataframe()

    The coordinator (``scimesh serve``) keeps its SQLite database and
    uploads in a temporary directory and listens on a free port of
    127.0.0.1, without tokens. The worker (``scimesh worker``) runs
    ``workers`` tasks at once and has one workload per entry of
    ``workloads``: ``NAME: COMMAND`` runs COMMAND with ``/bin/sh -c`` for
    tasks of NAME, and ``NAME: None`` turns on the built-in NAME (such as
    ``tanimoto``). ``workloads`` defaults to ``{"tanimoto": None}``. Each
    command runs in a directory of its own, so name the files it uses by
    absolute path.

    The ``scimesh`` program is ``binary``, else the ``SCIMESH_BINARY``
    environment variable, else the one a wheel of this package carries,
    else ``scimesh`` on PATH; none found raises
    :class:`FileNotFoundError`. A coordinator or worker that stops, or is
    not ready within ``timeout`` seconds, raises :class:`RuntimeError` with
    the end of its log.
    """
    if workers < 1:
        raise ValueError(f"workers={workers}: a worker runs at least 1 task at a time")
    workloads = {"tanimoto": None} if workloads is None else dict(workloads)
    if not workloads:
        raise ValueError("workloads is empty: name at least one, such as {'tanimoto': None}")
    specs: List[str] = []
    for name, command in workloads.items():
        if command is None:
            specs.append(name)
        elif not command.strip():
            raise ValueError(f"workload {name!r} has an empty command: give a command, or None for a built-in")
        else:
            specs.append(f"{name}={command}")
    program = _find_binary(binary)

    dir = Path(tempfile.mkdtemp(prefix="scimesh-local-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCIMESH_") and k not in _DROPPED}
    procs: List[_Process] = []
    try:
        serve = _Process(
            [program, "serve", "--addr", "127.0.0.1:0", "--db", f"sqlite:{dir / 'scimesh.db'}",
             "--data-dir", str(dir / "data")],
            dir, env, "serve",
        )
        procs.append(serve)
        url = _wait_for_coordinator(serve, time.monotonic() + timeout)
        args = [program, "worker", "--coordinator", url, "--id", "local", "--concurrency", str(workers),
                "--work-dir", str(dir / "work")]
        for spec in specs:
            args += ["--workload", spec]
        worker = _Process(args, dir, env, "worker")
        procs.append(worker)
        worker.wait_for("worker started", time.monotonic() + timeout)
        with Client(url, token="") as c:
            yield c
    finally:
        for p in reversed(procs):  # the worker first: it reports to the coordinator as it stops
            p.stop()
        shutil.rmtree(dir, ignore_errors=True)


def _find_binary(binary: Optional[Union[str, "os.PathLike[str]"]]) -> str:
    """The scimesh program to run: binary, SCIMESH_BINARY, the one this
    package carries, or PATH's."""
    given = os.fspath(binary) if binary is not None else os.environ.get("SCIMESH_BINARY") or None
    if given is not None:
        found = shutil.which(given)
        if found is None:
            raise FileNotFoundError(f"the scimesh program {given!r} (binary= or SCIMESH_BINARY) is not an executable file")
        return found
    # The binary a wheel carries works without PATH (a notebook's kernel
    # may run from an environment that is not activated); PATH's scimesh
    # may be this package's own command, which is no binary.
    carried = _binary.binary()
    found = str(carried) if carried is not None else _binary.other_on_path()
    if found is None:
        raise FileNotFoundError(
            "scimesh.local() runs the scimesh program, which is not on PATH: install a SciMesh wheel or release, "
            "or pass binary= (or set SCIMESH_BINARY) to the path of a scimesh you built (go build ./cmd/scimesh)"
        )
    return found


class _Process:
    """A scimesh process whose output goes to a log file in dir."""

    def __init__(self, args: List[str], dir: Path, env: Mapping[str, str], name: str) -> None:
        self.name = name
        self.log = dir / f"{name}.log"
        with open(self.log, "wb") as out:
            # cwd=dir: no .env of the caller's directory is read.
            self.proc = subprocess.Popen(args, cwd=dir, env=dict(env), stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT)

    def text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def check(self) -> None:
        """Raises RuntimeError when the process has stopped."""
        if self.proc.poll() is not None:
            raise RuntimeError(f"scimesh {self.name} stopped (exit status {self.proc.returncode}):\n{self.tail()}")

    def tail(self, n: int = 20) -> str:
        return "\n".join(self.text().splitlines()[-n:])

    def wait_for(self, line: str, deadline: float) -> None:
        """Waits until the log holds line."""
        while line not in self.text():
            self.check()
            if time.monotonic() > deadline:
                raise RuntimeError(f"scimesh {self.name} is not ready in time:\n{self.tail()}")
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _wait_for_coordinator(serve: _Process, deadline: float) -> str:
    """The coordinator's URL once it answers /ready."""
    url = None
    while True:
        serve.check()
        if url is None:
            m = _SERVING.search(serve.text())
            url = m.group(1) if m else None
        if url is not None:
            try:
                with _direct.open(url + "/ready", timeout=5) as r:
                    if r.status == 200:
                        return url
            except OSError:
                pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"scimesh serve is not ready in time:\n{serve.tail()}")
        time.sleep(0.05)
