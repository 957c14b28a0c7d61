"""Fixtures: a real coordinator and real workers, from the Go binary built
once per session out of this repository.

Under CI (the environment has CI set), what the tests need but lacks
(pandas, tqdm, the Go toolchain) is a failure; elsewhere the tests that
need it skip, saying why.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import shutil
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

import pytest

PYTHON_DIR = Path(__file__).resolve().parent.parent
REPO = PYTHON_DIR.parent
sys.path.insert(0, str(PYTHON_DIR))  # the package under test, not an installed copy

import scimesh  # noqa: E402


def need(module: str) -> None:
    """Skips the test loudly when module is not installed, or fails it under CI."""
    try:
        __import__(module)
    except ImportError:
        msg = f"{module} is not installed (apt-get install python3-{module}); skipping"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)


def _go() -> str:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not os.path.exists(go):
        msg = "the Go toolchain is not installed: cannot build scimesh"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return go


@pytest.fixture(scope="session")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bin") / "scimesh"
    subprocess.run([_go(), "build", "-o", str(out), "./cmd/scimesh"], cwd=REPO, check=True)
    return out


def build_release(dist: Path) -> Path:
    """Runs tools/release.sh for this machine's platform only, into dist."""
    go = _go()
    goos, goarch = subprocess.run([go, "env", "GOOS", "GOARCH"], check=True, capture_output=True, text=True).stdout.split()
    env = dict(os.environ, PATH=f"{Path(go).parent}{os.pathsep}{os.environ['PATH']}", PLATFORMS=f"{goos}/{goarch}", DIST=str(dist))
    for name in ("VERSION", "SOURCE_DATE_EPOCH"):
        env.pop(name, None)
    subprocess.run([str(REPO / "tools" / "release.sh")], cwd=REPO, env=env, check=True)
    return dist


@pytest.fixture(scope="session")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dist/ of a release build for this machine's platform: its
    archive and SHA256SUMS."""
    return build_release(tmp_path_factory.mktemp("dist"))


class Coordinator:
    """A `scimesh serve` process on a port of ``addr`` (loopback unless
    said) with its own database, and ``serve_args`` added to its command.
    ``ca`` is the PEM file of the authority of its TLS certificate, if it
    has one: its clients and workers are told to trust it."""

    def __init__(self, binary: Path, dir: Path, addr: str = "127.0.0.1:0", serve_args: Sequence[str] = (),
                 ca: Optional[Path] = None) -> None:
        self.binary = binary
        self.dir = dir
        self.ca = ca
        self.client_token = secrets.token_hex(16)
        self.worker_token = secrets.token_hex(16)
        self.log = dir / "serve.log"
        env = dict(os.environ, WORKER_AUTH_TOKEN=self.worker_token, CLIENT_AUTH_TOKEN=self.client_token)
        for name in ("SCIMESH_COORDINATOR", "SCIMESH_TOKEN", "PEER_AUTH_TOKEN", "DATABASE_URL", "ENV_FILE"):
            env.pop(name, None)
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [str(binary), "serve", "--addr", addr, "--db", f"sqlite:{dir / 'db'}", "--data-dir", str(dir / "data"),
                 *serve_args],
                cwd=dir, env=env, stdout=log, stderr=subprocess.STDOUT,
            )
        self.url = self._wait_ready()
        self.workers: List[subprocess.Popen] = []
        self.clients: List[scimesh.Client] = []  # closed by stop()

    def _wait_ready(self) -> str:
        deadline = time.monotonic() + 30
        url = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited ({self.proc.returncode}):\n{self.log.read_text()}")
            if url is None:
                m = re.search(r"msg=serving addr=\S+ url=(\S+)", self.log.read_text())
                if m:
                    url = m.group(1)
            if url is not None:
                try:
                    tls = ssl.create_default_context(cafile=self.ca) if self.ca else None
                    with urllib.request.urlopen(url + "/ready", timeout=5, context=tls) as r:
                        if r.status == 200:
                            return url
                except OSError:
                    pass
            time.sleep(0.05)
        raise RuntimeError(f"serve is not ready after 30 s:\n{self.log.read_text()}")

    def client(self, **kwargs) -> scimesh.Client:
        """A client of this coordinator (its client token unless said),
        closed by stop()."""
        kwargs.setdefault("token", self.client_token)
        if self.ca:
            kwargs.setdefault("ca_cert", self.ca)
        c = scimesh.Client(self.url, **kwargs)
        self.clients.append(c)
        return c

    def worker(self, name: str, *workloads: str, concurrency: int = 2, extra: List[str] = ()) -> subprocess.Popen:
        """Starts `scimesh worker` with --workload for each of workloads
        (NAME or NAME=COMMAND)."""
        args = [str(self.binary), "worker", "--coordinator", self.url, "--id", name,
                "--concurrency", str(concurrency), "--work-dir", str(self.dir / f"work-{name}"), *extra]
        for w in workloads:
            args += ["--workload", w]
        env = dict(os.environ, SCIMESH_TOKEN=self.worker_token)
        if self.ca:
            env["SSL_CERT_FILE"] = str(self.ca)
        log = open(self.dir / f"{name}.log", "wb")
        p = subprocess.Popen(args, cwd=self.dir, env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.workers.append(p)
        return p

    def stop(self) -> None:
        for c in self.clients:
            c.close()
        for p in self.workers + [self.proc]:
            if p.poll() is None:
                p.terminate()
        for p in self.workers + [self.proc]:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def python_command(script: Path, **env: str) -> str:
    """The worker command that runs script with this Python and the package
    under test on its path (the command is run by /bin/sh -c)."""
    assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in {"PYTHONPATH": str(PYTHON_DIR), **env}.items())
    return f"{assigns} {shlex.quote(sys.executable)} {shlex.quote(str(script))}"


SCRIPTS = Path(__file__).resolve().parent / "workloads"


@pytest.fixture(scope="session")
def coord(binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Coordinator]:
    """A coordinator with workers for the built-in tanimoto and for the test
    workloads in tests/workloads (run through scimesh.run_workload)."""
    c = Coordinator(binary, tmp_path_factory.mktemp("coord"))
    try:
        marker = c.dir / "fail-marker"
        c.marker = marker
        c.worker("w1", "tanimoto",
                 "charsum=" + python_command(SCRIPTS / "charsum.py"),
                 "flaky=" + python_command(SCRIPTS / "flaky.py", FLAKY_MARKER=str(marker)),
                 concurrency=2)
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def own_coord(binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Coordinator]:
    """A coordinator for one test module alone, without workers: the
    workers a module starts on it announce no workload to the others'."""
    c = Coordinator(binary, tmp_path_factory.mktemp("own"))
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture()
def client(coord: Coordinator) -> Iterator[scimesh.Client]:
    c = coord.client()
    yield c
    c.close()


def env_without(*names: str) -> Dict[str, str]:
    env = dict(os.environ)
    for n in names:
        env.pop(n, None)
    return env
