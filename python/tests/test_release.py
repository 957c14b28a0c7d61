"""tools/release.sh (make release), built for this machine's platform only
to keep the suite quick."""

from __future__ import annotations

import hashlib
import json
import subprocess
import tarfile
from pathlib import Path

from conftest import REPO, _go, build_release


def archive_of(dist: Path) -> Path:
    archives = sorted(dist.glob("scimesh_*.tar.gz"))
    assert len(archives) == 1, archives
    return archives[0]


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, check=True, capture_output=True, text=True).stdout.strip()


def test_two_release_builds_of_one_commit_give_the_same_bytes(release: Path, tmp_path: Path) -> None:
    again = build_release(tmp_path / "dist")
    assert (again / "SHA256SUMS").read_text() == (release / "SHA256SUMS").read_text()
    # SHA256SUMS lists every archive, with its true checksum.
    listed = {}
    for line in (release / "SHA256SUMS").read_text().splitlines():
        digest, _, name = line.partition("  ")
        listed[name] = digest
    assert listed == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in release.glob("scimesh_*.tar.gz")}


def has_interpreter(elf: bytes) -> bool:
    """Whether a 64-bit little-endian ELF file names a dynamic loader (a
    PT_INTERP program header): a static binary names none."""
    assert elf[:6] == b"\x7fELF\x02\x01", "not a 64-bit little-endian ELF file"
    phoff = int.from_bytes(elf[0x20:0x28], "little")
    size = int.from_bytes(elf[0x36:0x38], "little")
    count = int.from_bytes(elf[0x38:0x3A], "little")
    return any(int.from_bytes(elf[phoff + i * size: phoff + i * size + 4], "little") == 3 for i in range(count))


def test_release_archive_holds_the_stamped_static_binary_readme_and_license(release: Path, tmp_path: Path) -> None:
    go = _go()
    goos, goarch, goversion = subprocess.run([go, "env", "GOOS", "GOARCH", "GOVERSION"], check=True, capture_output=True, text=True).stdout.split()
    version = git("describe", "--tags", "--always", "--dirty")
    archive = archive_of(release)
    assert archive.name == f"scimesh_{version}_{goos}_{goarch}.tar.gz"

    with tarfile.open(archive, "r:gz") as t:
        members = t.getmembers()
        assert sorted(m.name for m in members) == ["LICENSE", "README.md", "scimesh"]
        commit_time = int(git("log", "-1", "--format=%ct"))
        for m in members:
            assert m.isfile(), m.name
            assert (m.uid, m.gid, m.uname, m.gname) == (0, 0, "", ""), m.name
            assert m.mtime == commit_time, m.name
            assert m.mode == (0o755 if m.name == "scimesh" else 0o644), (m.name, oct(m.mode))
        for name in ("README.md", "LICENSE"):
            assert t.extractfile(name).read() == (REPO / name).read_bytes(), name
        exe = t.extractfile("scimesh").read()

    if goos == "linux":
        assert not has_interpreter(exe), "the binary is dynamically linked: CGO_ENABLED=0 is lost"
    path = tmp_path / "scimesh"
    path.write_bytes(exe)
    path.chmod(0o755)
    out = subprocess.run([str(path), "version", "--json"], check=True, capture_output=True, text=True).stdout
    assert json.loads(out) == {"version": version, "commit": git("rev-parse", "HEAD"), "go": goversion, "platform": f"{goos}/{goarch}"}
