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

import sys
from pathlib import Path

from conftest import PYTHON_DIR, REPO, need
from docblocks import Reader, blocks

TUTORIAL = REPO / "docs" / "tutorial.md"


def test_tutorial(binary: Path, tmp_path: Path) -> None:
    need("pandas")
    need("numpy")
    todo = blocks(TUTORIAL.read_text())
    kinds = [k for k, _, _ in todo]
    assert kinds.count("sh") >= 2 and kinds.count("python") >= 5 and kinds.count("file") == 2, kinds
    with Reader(binary, tmp_path, PYTHON_DIR, sys.executable) as r:
        for block in todo:
            r.run(*block, TUTORIAL)
        assert r.shell is not None and r.shell.proc.poll() is None
        r.wait_stopped()
