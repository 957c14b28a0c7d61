"""Jobs that carry input columns into their result (`columns`), run by a
real coordinator and real workers."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import time
from pathlib import Path
from typing import List, Tuple

import pytest

import scimesh
from conftest import Coordinator
from helpers import top

# Rows of id, text (charsum scores it), smiles and name, with fields that
# need quoting; ids repeat in different chunks (of 3 rows) with other
# values.
ROWS = [
    ("a", "hello", "CCO", "ethanol, absolute"),
    ("b", "zz", "C\nC", 'say "ethane"'),
    ("c", "skip me", "N", "ammonia"),
    ("a", "zzzz", "O=C=O", "carbon dioxide"),
    ("d", "yy", "C1CC1", "cyclopropane"),
    ("e", "abc", "c1ccccc1", "benzene"),
    ("f", "q", "[Na+].[Cl-]", "salt"),
]


def table() -> bytes:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["id", "text", "smiles", "name"])
    w.writerows(ROWS)
    return out.getvalue().encode()


def expected(k: int) -> List[Tuple[str, float, str, str]]:
    """The best k rows as charsum scores them (factor 1), with their
    smiles and name, computed here without SciMesh."""
    scored = []
    for i, (mol_id, text, _, _) in enumerate(ROWS):
        if not text.startswith("skip"):
            scored.append((str(i), sum(map(ord, text)) / 7))
    return [(ROWS[int(i)][0], s, ROWS[int(i)][2], ROWS[int(i)][3]) for i, s in top(scored, k)]


def rows_of(result: str, header: List[str]) -> List[Tuple[str, float, str, str]]:
    rows = list(csv.reader(io.StringIO(result)))
    assert rows[0] == header
    return [(r[0], float(r[1]), r[2], r[3]) for r in rows[1:]]


def test_columns_joined(client: scimesh.Client) -> None:
    job = client.submit(table(), workload="charsum", top_k=4, chunk_rows=3, columns=["smiles", "name"])
    assert job.wait(progress=False, timeout=60).status == "completed"
    assert rows_of(job.result(), ["id", "score", "smiles", "name"]) == expected(4)
    assert client.job(job.id).data["columns"] == ["smiles", "name"]
    # The same job without columns: the same rows, the same scores.
    plain = client.submit(table(), workload="charsum", top_k=4, chunk_rows=3)
    plain_rows = list(csv.reader(io.StringIO(plain.wait(progress=False, timeout=60).result())))
    joined_rows = list(csv.reader(io.StringIO(job.result())))
    assert [r[:2] for r in joined_rows] == plain_rows


def test_columns_cli(coord: Coordinator, tmp_path: Path) -> None:
    path = tmp_path / "mols.csv"
    path.write_bytes(table())
    out = tmp_path / "top.csv"
    env = dict(os.environ, SCIMESH_COORDINATOR=coord.url, SCIMESH_TOKEN=coord.client_token)
    subprocess.run([str(coord.binary), "submit", str(path), "--workload", "charsum", "--top-k", "3",
                    "--chunk-rows", "2", "--columns", "name,smiles", "--wait", "--output", str(out)],
                   env=env, check=True, capture_output=True, timeout=60)
    want = [(i, s, name, smiles) for i, s, smiles, name in expected(3)]
    assert rows_of(out.read_text(), ["id", "score", "name", "smiles"]) == want


def test_columns_refused(client: scimesh.Client) -> None:
    with pytest.raises(scimesh.APIError) as e:
        client.submit(table(), workload="charsum", columns=["mass"])
    assert e.value.status == 400 and 'no column "mass"' in e.value.message


def test_columns_output_id_not_in_input(own_coord: Coordinator) -> None:
    # A workload that names a row its input does not have.
    own_coord.worker("liar", "badid=cat >/dev/null; printf 'id,score\\nnope,1\\n'", concurrency=1)
    c = own_coord.client()
    job = c.submit(table(), workload="badid", chunk_rows=10, columns=["smiles"])
    with pytest.raises(scimesh.JobFailed):
        job.wait(progress=False, timeout=60)
    assert 'output id "nope"' in job.error, job.error
