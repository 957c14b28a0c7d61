#!/usr/bin/python3
"""SciMesh workload: Tanimoto similarity of Morgan fingerprints to a query.

Reads a chunk as CSV on stdin (a header with the columns `id` and `smiles`),
takes the task's parameters from SCIMESH_PARAMETERS:

    {"query": "SMILES", "radius": 2, "nbits": 2048}

and writes `id,score` CSV on stdout, one row per molecule, score being the
Tanimoto similarity of the molecule's Morgan fingerprint to the query's.
Molecules whose SMILES RDKit cannot parse are skipped, with a line on stderr
(which SciMesh ships to the task's log). A query that does not parse is an
error: the script exits with status 2 and says why.

Run it with Debian's /usr/bin/python3, which has python3-rdkit.
"""

import csv
import json
import os
import sys

from rdkit import Chem, DataStructs, RDLogger
from rdkit.Chem import AllChem


def fingerprint(mol, radius, nbits):
    return AllChem.GetMorganFingerprintAsBitVect(mol, radius, nBits=nbits)


def main():
    RDLogger.DisableLog("rdApp.*")  # parse errors are reported below, once each
    params = json.loads(os.environ.get("SCIMESH_PARAMETERS") or "{}")
    query_smiles = params.get("query")
    if not isinstance(query_smiles, str) or not query_smiles:
        print('parameter "query" (a SMILES string) is required', file=sys.stderr)
        return 2
    radius = int(params.get("radius", 2))
    nbits = int(params.get("nbits", 2048))
    query = Chem.MolFromSmiles(query_smiles)
    if query is None:
        print(f"query {query_smiles!r} is not a SMILES string RDKit can parse", file=sys.stderr)
        return 2
    qfp = fingerprint(query, radius, nbits)

    reader = csv.reader(sys.stdin)
    header = next(reader, None)
    if header is None:
        print("the chunk is empty: expected a header with id and smiles", file=sys.stderr)
        return 2
    try:
        id_col, smiles_col = header.index("id"), header.index("smiles")
    except ValueError:
        print(f"the chunk's header {header} lacks an id or a smiles column", file=sys.stderr)
        return 2

    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["id", "score"])
    ids, fps = [], []
    for line, row in enumerate(reader, start=2):
        mol = Chem.MolFromSmiles(row[smiles_col])
        if mol is None:
            print(f"line {line}: skipped {row[id_col]}: cannot parse SMILES {row[smiles_col]!r}", file=sys.stderr)
            continue
        ids.append(row[id_col])
        fps.append(fingerprint(mol, radius, nbits))
    for mol_id, score in zip(ids, DataStructs.BulkTanimotoSimilarity(qfp, fps)):
        out.writerow([mol_id, repr(score)])
    print(f"scored {len(ids)} molecules", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
