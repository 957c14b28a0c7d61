#!/usr/bin/env python3
"""Builds the Python wheels that carry the scimesh binary (make wheels).

For each release archive listed in DIST/SHA256SUMS (tools/release.sh), it
writes OUT/scimesh-VERSION-py3-none-PLATFORM.whl: the package python/scimesh
with the archive's binary at scimesh/bin/scimesh, and a ``scimesh`` console
command that runs it. The binaries are the archives' own, checked against
SHA256SUMS first, so nothing is built twice.

A wheel is a zip file (PEP 427) whose NAME-VERSION.dist-info holds METADATA,
WHEEL, entry_points.txt and RECORD; this script writes them directly. The
metadata comes from python/pyproject.toml. Entries have fixed times
(SOURCE_DATE_EPOCH, the commit's time unless set), modes and order, so two
runs on one commit give the same bytes.

    tools/wheels.py [--dist dist] [--out python/dist]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "python" / "scimesh"

# The wheel platform tags of each release platform. The binary is static,
# so one Linux wheel serves glibc (manylinux) and musl (musllinux) alike;
# Go's linker marks darwin binaries as needing macOS 12 or later.
PLATFORM_TAGS: Dict[str, List[str]] = {
    "linux_amd64": ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "musllinux_1_1_x86_64"],
    "linux_arm64": ["manylinux_2_17_aarch64", "manylinux2014_aarch64", "musllinux_1_1_aarch64"],
    "darwin_amd64": ["macosx_12_0_x86_64"],
    "darwin_arm64": ["macosx_12_0_arm64"],
}

ARCHIVE = re.compile(r"scimesh_([A-Za-z0-9.+-]+)_(linux|darwin)_(amd64|arm64)\.tar\.gz")

# A PEP 440 version in canonical form (PEP 440, appendix B), with a local
# label.
PEP440 = re.compile(
    r"([1-9][0-9]*!)?(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))*((a|b|rc)(0|[1-9][0-9]*))?"
    r"(\.post(0|[1-9][0-9]*))?(\.dev(0|[1-9][0-9]*))?(\+[a-z0-9]+(\.[a-z0-9]+)*)?"
)


def pep440(version: str, base: str) -> str:
    """The PEP 440 form of a release version (git describe's output or the
    VERSION given to make release). A bare commit (no tag yet) is a local
    version of base, the version in pyproject.toml; a commit N after tag
    vX.Y.Z is X.Y.Z.postN; a changed tree adds "dirty" to the local label."""
    v, dirty = version, False
    if v.endswith("-dirty"):
        v, dirty = v[: -len("-dirty")], True
    local: List[str] = []
    m = re.fullmatch(r"[0-9a-f]{7,40}", v)
    if m:
        public, local = base, ["g" + v]
    else:
        m = re.fullmatch(r"v?(.+)-([0-9]+)-g([0-9a-f]+)", v)
        if m:
            public, local = f"{m[1]}.post{m[2]}", ["g" + m[3]]
        else:
            public = v[1:] if v.startswith("v") else v
    if "+" in public:
        public, _, rest = public.partition("+")
        local = rest.split(".") + local
    if dirty:
        local.append("dirty")
    out = public + ("+" + ".".join(local) if local else "")
    if not PEP440.fullmatch(out):
        raise ValueError(f"version {version!r} gives {out!r}, which is not a PEP 440 version: tag releases vX.Y.Z")
    return out


def pyproject() -> dict:
    try:
        import tomllib
    except ImportError:  # Python before 3.11
        sys.exit("tools/wheels.py: needs Python 3.11 or later (tomllib)")
    with open(REPO / "python" / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def metadata(project: dict, version: str) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {version}",
        f"Summary: {project['description']}",
        f"License: {project['license']['text']}",
        f"Requires-Python: {project['requires-python']}",
    ]
    lines += [f"Classifier: {c}" for c in project.get("classifiers", [])]
    lines += [f"Requires-Dist: {d}" for d in project.get("dependencies", [])]
    for extra, deps in sorted(project.get("optional-dependencies", {}).items()):
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {d}; extra == "{extra}"' for d in deps]
    lines.append("Description-Content-Type: text/markdown")
    readme = (REPO / "python" / project["readme"]).read_text()
    return "\n".join(lines) + "\n\n" + readme


def record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def package_files() -> List[Tuple[str, bytes, int]]:
    """The package's files as (path in the wheel, content, mode)."""
    files = []
    for path in sorted(PACKAGE.rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        if path.relative_to(PACKAGE).parts[0] == "bin":
            continue  # a binary left by hand: the wheel's comes from the archive
        files.append((f"scimesh/{path.relative_to(PACKAGE).as_posix()}", path.read_bytes(), 0o644))
    return files


def write_wheel(out: Path, project: dict, version: str, tags: List[str], exe: bytes, epoch: int) -> Path:
    name = project["name"]
    info = f"{name}-{version}.dist-info"
    files = package_files() + [("scimesh/bin/scimesh", exe, 0o755)]
    wheel_meta = "Wheel-Version: 1.0\nGenerator: scimesh tools/wheels.py\nRoot-Is-Purelib: false\n"
    wheel_meta += "".join(f"Tag: py3-none-{t}\n" for t in tags)
    entry_points = "".join(f"[console_scripts]\n{k} = {v}\n" for k, v in project.get("scripts", {}).items())
    files += [
        (f"{info}/METADATA", metadata(project, version).encode(), 0o644),
        (f"{info}/WHEEL", wheel_meta.encode(), 0o644),
        (f"{info}/entry_points.txt", entry_points.encode(), 0o644),
        (f"{info}/LICENSE", (REPO / "LICENSE").read_bytes(), 0o644),
    ]
    record = "".join(f"{p},{record_hash(d)},{len(d)}\n" for p, d, _ in files) + f"{info}/RECORD,,\n"
    files.append((f"{info}/RECORD", record.encode(), 0o644))

    when = time.gmtime(max(epoch, 315532800))[:6]  # zip times start in 1980
    path = out / f"{name}-{version}-py3-none-{'.'.join(tags)}.whl"
    with zipfile.ZipFile(path, "w") as z:
        for p, data, mode in files:
            zi = zipfile.ZipInfo(p, date_time=when)
            zi.create_system = 3  # Unix, whose mode bits follow
            zi.external_attr = (0o100000 | mode) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return path


def archive_binary(path: Path) -> bytes:
    with tarfile.open(path, "r:gz") as t:
        member = t.extractfile("scimesh")
        if member is None:
            raise ValueError(f"{path} holds no scimesh binary")
        return member.read()


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dist", type=Path, default=REPO / "dist", help="the archives and SHA256SUMS of make release")
    ap.add_argument("--out", type=Path, default=REPO / "python" / "dist", help="where to write the wheels")
    args = ap.parse_args(argv)

    sums = args.dist / "SHA256SUMS"
    if not sums.exists():
        sys.exit(f"tools/wheels.py: {sums} is missing: run make release first")
    epoch = os.environ.get("SOURCE_DATE_EPOCH") or subprocess.run(
        ["git", "log", "-1", "--format=%ct"], cwd=REPO, check=True, capture_output=True, text=True).stdout
    project = pyproject()
    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("scimesh-*.whl"):
        old.unlink()
    for line in sums.read_text().splitlines():
        want, _, name = line.partition("  ")
        m = ARCHIVE.fullmatch(name)
        if not m:
            sys.exit(f"tools/wheels.py: {sums}: not a release archive: {line!r}")
        data = (args.dist / name).read_bytes()
        if hashlib.sha256(data).hexdigest() != want:
            sys.exit(f"tools/wheels.py: {name} does not match its checksum in {sums}")
        version = pep440(m[1], project["version"])
        exe = archive_binary(args.dist / name)
        path = write_wheel(args.out, project, version, PLATFORM_TAGS[f"{m[2]}_{m[3]}"], exe, int(epoch))
        print(f"wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}", file=sys.stderr)


if __name__ == "__main__":
    main()
