#!/usr/bin/python3
"""SciMesh workload: Tanimoto similarity of Morgan fingerprints to a query.

A chunk of `id,smiles` CSV in, `id,score` out, through scimesh.run_workload
(the package in python/ of the repository: `pip install ./python`, or
PYTHONPATH pointing at python/). Parameters: `query` (SMILES, required),
`radius` (2), `nbits` (2048). Molecules RDKit cannot parse are skipped,
with a line in the task's log. Run it with Debian's /usr/bin/python3, which
has python3-rdkit.
"""

import functools
import sys

import scimesh
from rdkit import Chem, DataStructs, RDLogger
from rdkit.Chem import AllChem

RDLogger.DisableLog("rdApp.*")  # parse errors are reported below, once each


@functools.lru_cache(maxsize=16)  # once per query, not once per row
def query_fingerprint(smiles, radius, nbits):
    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        raise ValueError(f"query {smiles!r} is not a SMILES string RDKit can parse")
    return AllChem.GetMorganFingerprintAsBitVect(mol, radius, nBits=nbits)


def score(row, params):
    radius, nbits = int(params.get("radius", 2)), int(params.get("nbits", 2048))
    query = query_fingerprint(params["query"], radius, nbits)
    mol = Chem.MolFromSmiles(row["smiles"])
    if mol is None:
        print(f"skipped {row['id']}: cannot parse SMILES {row['smiles']!r}", file=sys.stderr)
        return None
    return DataStructs.TanimotoSimilarity(query, AllChem.GetMorganFingerprintAsBitVect(mol, radius, nBits=nbits))


scimesh.run_workload(score)
