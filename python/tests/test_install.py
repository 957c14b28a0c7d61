"""install.sh, run as `curl -fsSL …/install.sh | sh` against a local HTTP
server that serves it beside a release's dist/ (this machine's platform)."""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Iterator, Tuple

import pytest

from conftest import REPO


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep the test output for failures
        pass


@pytest.fixture()
def site(tmp_path: Path, release: Path) -> Iterator[Tuple[str, Path]]:
    """A loopback HTTP server serving a copy of the release and install.sh:
    its URL and its directory."""
    root = tmp_path / "www"
    shutil.copytree(release, root)
    shutil.copy(REPO / "install.sh", root)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", root
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def only_tools(dir: Path, downloader: str, hasher: str) -> str:
    """A PATH holding only what install.sh may use, with one downloader and
    one checksum tool, so that each choice the script makes is tried."""
    dir.mkdir()
    for name in ("sh", "uname", "mktemp", "rm", "mkdir", "grep", "head", "cut", "tar", "gzip", "cp", "chmod", "mv", downloader, hasher):
        found = shutil.which(name)
        if not found:
            msg = f"{name} is not installed: cannot run install.sh with it"
            if os.environ.get("CI"):
                pytest.fail(msg)
            pytest.skip(msg)
        (dir / name).symlink_to(found)
    return str(dir)


def install(url: str, tmp_path: Path, downloader: str = "curl", hasher: str = "sha256sum", **env: str) -> subprocess.CompletedProcess:
    """Runs `curl -fsSL URL/install.sh | sh` (or wget's) as a user would."""
    fetch = {"curl": "curl -fsSL", "wget": "wget -qO-"}[downloader]
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    full = {"PATH": only_tools(tmp_path / "tools", downloader, hasher), "HOME": str(home), "SCIMESH_RELEASE_BASE": url, **env}
    return subprocess.run(["/bin/sh", "-c", f"{fetch} {url}/install.sh | sh"], env=full, capture_output=True, text=True, timeout=120)


def archive_version(root: Path) -> str:
    (archive,) = root.glob("scimesh_*.tar.gz")
    return archive.name.split("_")[1]


@pytest.mark.parametrize("downloader,hasher,default_dir", [("curl", "sha256sum", True), ("wget", "shasum", False)])
def test_install_sh_installs_a_binary_that_runs(site: Tuple[str, Path], tmp_path: Path, downloader: str, hasher: str, default_dir: bool) -> None:
    url, root = site
    if default_dir:
        env, dir = {}, tmp_path / "home" / ".local" / "bin"
    else:
        dir = tmp_path / "opt" / "bin"
        env = {"SCIMESH_INSTALL_DIR": str(dir)}
    r = install(url, tmp_path, downloader, hasher, **env)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(dir)) == ["scimesh"]
    version = archive_version(root)
    assert f"Installed scimesh {version} into {dir}/scimesh." in r.stdout
    # dir is not on the PATH install.sh ran with: it says how to add it.
    assert f'export PATH="{dir}:$PATH"' in r.stdout, r.stdout
    assert f"{dir}/scimesh demo" in r.stdout, r.stdout

    out = subprocess.run([str(dir / "scimesh"), "version", "--json"], check=True, capture_output=True, text=True).stdout
    assert json.loads(out)["version"] == version


def test_install_sh_installs_nothing_from_a_tampered_archive(site: Tuple[str, Path], tmp_path: Path) -> None:
    url, root = site
    (archive,) = root.glob("scimesh_*.tar.gz")
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0x01
    archive.write_bytes(bytes(data))
    dir = tmp_path / "bin"
    dir.mkdir()
    (dir / "scimesh").write_text("the scimesh installed before\n")

    r = install(url, tmp_path, SCIMESH_INSTALL_DIR=str(dir))
    assert r.returncode != 0
    assert f"checksum mismatch for {archive.name}" in r.stderr and "Nothing was installed." in r.stderr, r.stderr
    assert sorted(os.listdir(dir)) == ["scimesh"]
    assert (dir / "scimesh").read_text() == "the scimesh installed before\n"


def test_install_sh_says_when_the_release_has_no_archive_for_this_machine(site: Tuple[str, Path], tmp_path: Path) -> None:
    url, root = site
    sums = root / "SHA256SUMS"
    digest = sums.read_text().split()[0]
    sums.write_text(f"{digest}  scimesh_v1.0.0_plan9_mips.tar.gz\n")
    dir = tmp_path / "bin"

    r = install(url, tmp_path, SCIMESH_INSTALL_DIR=str(dir))
    assert r.returncode != 0
    assert "SHA256SUMS lists no archive for" in r.stderr, r.stderr
    assert not dir.exists()
