"""Tables for the tests and the results they should give, computed here
directly, without SciMesh."""

from __future__ import annotations

import csv
import io
import random
from pathlib import Path
from typing import List, Tuple

Row = Tuple[str, float]


def fingerprints(n: int, seed: int, nbytes: int = 8) -> Tuple[List[Tuple[str, str]], str]:
    """n rows (id, fingerprint in hex) and a query of the same length."""
    rng = random.Random(seed)
    width = nbytes * 2
    rows = [(f"m{i:05d}", format(rng.getrandbits(nbytes * 8), f"0{width}x")) for i in range(n)]
    return rows, format(rng.getrandbits(nbytes * 8), f"0{width}x")


def write_fingerprints(path: Path, rows: List[Tuple[str, str]]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["id", "fingerprint"])
        w.writerows(rows)


def _bits(x: int) -> int:
    return bin(x).count("1")


def tanimoto_top(rows: List[Tuple[str, str]], query: str, k: int) -> List[Row]:
    """The best k rows by Tanimoto similarity to query, ties by row order
    (as SciMesh ranks them)."""
    q = int(query, 16)
    scored = []
    for mol_id, fp in rows:
        a = int(fp, 16)
        union = _bits(a | q)
        scored.append((mol_id, _bits(a & q) / union if union else 0.0))
    return top(scored, k)


def top(scored: List[Row], k: int, desc: bool = True) -> List[Row]:
    order = sorted(range(len(scored)), key=lambda i: -scored[i][1] if desc else scored[i][1])  # stable
    return [scored[i] for i in order[:k]]


def parse(result: str) -> List[Row]:
    """A final CSV of id,score as (id, float) pairs."""
    rows = list(csv.reader(io.StringIO(result)))
    assert rows[0] == ["id", "score"], rows[:1]
    return [(r[0], float(r[1])) for r in rows[1:]]
