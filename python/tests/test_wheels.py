"""tools/wheels.py (make wheels), and the scimesh command that the Python
package installs (scimesh/_binary.py): from a wheel it runs the binary the
wheel carries; from source it runs the scimesh on PATH or says that there
is none."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from conftest import PYTHON_DIR, REPO, need

_spec = importlib.util.spec_from_file_location("wheels", REPO / "tools" / "wheels.py")
wheels = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wheels)

SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.mark.parametrize("version,want", [
    ("22e9ea3", "0.1.0+g22e9ea3"),
    ("22e9ea3-dirty", "0.1.0+g22e9ea3.dirty"),
    ("v1.2.3", "1.2.3"),
    ("v1.2.3-dirty", "1.2.3+dirty"),
    ("v1.2.3-4-gabc1234", "1.2.3.post4+gabc1234"),
    ("v1.2.3-4-gabc1234-dirty", "1.2.3.post4+gabc1234.dirty"),
    ("1.0.0rc1", "1.0.0rc1"),
    ("v2.0.0+lab.7", "2.0.0+lab.7"),
])
def test_pep440(version: str, want: str) -> None:
    assert wheels.pep440(version, "0.1.0") == want


@pytest.mark.parametrize("version", ["v1.2-beta", "release-7", "V1.0", "1.02"])
def test_pep440_refuses_what_pip_would_not_take(version: str) -> None:
    with pytest.raises(ValueError, match="not a PEP 440 version"):
        wheels.pep440(version, "0.1.0")


def new_venv(path: Path, *options: str) -> Path:
    """A fresh virtual environment of Debian's Python; its bin directory."""
    r = subprocess.run([SYSTEM_PYTHON, "-m", "venv", *options, str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        msg = f"{SYSTEM_PYTHON} -m venv failed (apt-get install python3-venv):\n{r.stdout}{r.stderr}"
        if os.environ.get("CI") or "ensurepip" not in r.stdout + r.stderr:
            pytest.fail(msg)
        pytest.skip(msg)
    return path / "bin"


def check_record(whl: zipfile.ZipFile) -> None:
    """Every file of the wheel is in RECORD with its true hash and size."""
    (record,) = [n for n in whl.namelist() if n.endswith(".dist-info/RECORD")]
    listed = {}
    for line in whl.read(record).decode().splitlines():
        name, digest, size = line.rsplit(",", 2)
        listed[name] = (digest, size)
    want = {record: ("", "")}
    for name in whl.namelist():
        if name != record:
            data = whl.read(name)
            want[name] = ("sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode(), str(len(data)))
    assert listed == want


def test_wheel_gives_a_scimesh_that_runs_without_go(release: Path, tmp_path: Path) -> None:
    out = tmp_path / "wheels"
    subprocess.run([sys.executable, str(REPO / "tools" / "wheels.py"), "--dist", str(release), "--out", str(out)], check=True)
    (archive,) = release.glob("scimesh_*.tar.gz")
    _, version, goos, goarch = archive.name[: -len(".tar.gz")].split("_")
    (whl,) = out.iterdir()
    pyversion = wheels.pep440(version, "0.1.0")
    tags = ".".join(wheels.PLATFORM_TAGS[f"{goos}_{goarch}"])
    assert whl.name == f"scimesh-{pyversion}-py3-none-{tags}.whl"
    with zipfile.ZipFile(whl) as z, tarfile.open(archive, "r:gz") as t:
        check_record(z)
        assert z.read("scimesh/bin/scimesh") == t.extractfile("scimesh").read(), "the wheel's binary is not the archive's"
        assert z.read(f"scimesh-{pyversion}.dist-info/entry_points.txt").decode() == "[console_scripts]\nscimesh = scimesh._binary:main\n"

    bin = new_venv(tmp_path / "venv")
    subprocess.run([str(bin / "pip"), "install", "--quiet", "--no-index", str(whl)], check=True)
    path = f"{bin}:/usr/bin:/bin"
    assert shutil.which("go", path=path) is None, "Go is on the PATH of the test"
    env = {"PATH": path, "HOME": str(tmp_path)}
    r = subprocess.run(["scimesh", "version", "--json"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["version"] == version
    r = subprocess.run(["scimesh", "demo"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "check: the result equals the direct computation" in r.stdout, r.stdout

    # scimesh.local() finds the carried binary with the environment off
    # PATH, as in a notebook whose kernel runs from it unactivated.
    script = tmp_path / "local.py"
    script.write_text(LOCAL_JOB)
    r = subprocess.run([str(bin / "python"), str(script), str(tmp_path / "fps.csv")], env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[:2] == ["id,score", "a,1"], r.stdout


LOCAL_JOB = """\
import pathlib, sys
import scimesh
csv = pathlib.Path(sys.argv[1])
csv.write_text("id,fingerprint\\nb,0f\\na,ff\\n")
with scimesh.local() as c:
    job = c.submit(str(csv), workload="tanimoto", top_k=1, params={"query": "ff"})
    print(job.wait(progress=False).result(), end="")
"""


def test_source_install_runs_the_scimesh_on_path_or_says_there_is_none(release: Path, tmp_path: Path) -> None:
    # Offline, pip builds the package with the setuptools and wheel of
    # Debian's Python, as python/README.md says.
    need("setuptools")
    need("wheel")
    src = tmp_path / "src"
    shutil.copytree(PYTHON_DIR, src, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "tests", "bin"))
    bin = new_venv(tmp_path / "venv", "--system-site-packages")
    subprocess.run([str(bin / "pip"), "install", "--quiet", "--no-index", "--no-build-isolation", str(src)], check=True)

    # A second environment's scimesh command on PATH is no binary either.
    other = new_venv(tmp_path / "other", "--system-site-packages")
    shutil.copy(bin / "scimesh", other / "scimesh")
    env = {"PATH": f"{bin}:{other}:/usr/bin:/bin", "HOME": str(tmp_path)}
    r = subprocess.run(["scimesh", "version"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stdout == ""
    assert "this installation of the Python package carries no scimesh binary" in r.stderr, r.stderr

    # A scimesh installed otherwise (install.sh, go build) is not hidden.
    (archive,) = release.glob("scimesh_*.tar.gz")
    installed = tmp_path / "local-bin"
    installed.mkdir()
    with tarfile.open(archive, "r:gz") as t:
        t.extract("scimesh", installed)
    env["PATH"] = f"{bin}:{other}:{installed}:/usr/bin:/bin"
    r = subprocess.run(["scimesh", "version", "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["version"] == archive.name.split("_")[1]
