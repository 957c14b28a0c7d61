"""The README's commands, read from the README and run: the demo, the
test command, the first job on a CSV of one's own and Python in ten lines.

Its blocks run as docs/tutorial.md's do (see docblocks.Reader). The
install lines are not run: the binary the tests built stands in for them.
"""

from __future__ import annotations

import csv
import random
import sys
from pathlib import Path

from conftest import PYTHON_DIR, REPO, need
from docblocks import Reader, blocks

README = REPO / "README.md"


def section(text: str, heading: str) -> str:
    """The README's text under ## heading, up to the next ##."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def lines(code: str) -> list:
    return [ln.strip() for ln in code.strip().splitlines()]


def test_readme_first_screen() -> None:
    """The demo and the test commands come first, and the test command is
    the one CI runs."""
    text = README.read_text()
    first_screen = "\n".join(text.splitlines()[:40])
    assert "scimesh demo" in first_screen and "make test" in first_screen
    (kind, _, code), = blocks(section(text, "Run the tests"))
    assert (kind, lines(code)) == ("sh", ["make test"])
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == "make test"


def samples(path: Path, n: int) -> list:
    """Writes a CSV of n rows with an id and a yield; returns the rows."""
    rng = random.Random(11)
    rows = [(f"s{i:05d}", round(rng.uniform(0, 100), 3)) for i in range(n)]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "yield"])
        w.writerows(rows)
    return rows


def test_readme_commands(binary: Path, tmp_path: Path) -> None:
    need("pandas")
    text = README.read_text()
    (kind, _, code), = blocks(section(text, "Try it"))
    install, demo = lines(code)
    assert kind == "sh" and install.startswith("curl -fsSL https://") and install.endswith("/install.sh | sh"), install
    first_job = blocks(section(text, "A first job on your own CSV"))
    assert [k for k, _, _ in first_job] == ["file", "sh", "sh"]
    ten = blocks(section(text, "Python in ten lines"))
    assert [k for k, _, _ in ten] == ["python"] and len(lines(ten[0][2])) <= 10

    with Reader(binary, tmp_path, PYTHON_DIR, sys.executable) as r:
        r.run("sh", "", demo, README)
        assert "the result equals the direct computation, byte for byte" in r.shell.output(), r.shell.output()

        rows = samples(r.work / "samples.csv", 3000)
        want = [(i, float(y)) for i, y in sorted(rows, key=lambda t: -t[1])[:20]]
        for block in first_job:
            r.run(*block, README)
        with open(r.work / "best.csv", newline="") as f:
            got = [(row["id"], float(row["score"])) for row in csv.DictReader(f)]
        assert got == want

        for block in ten:
            r.run(*block, README)
        best = r.namespace["best"]
        assert [(i, float(s)) for i, s in zip(best["id"], best["score"])] == want
