#!/usr/bin/python3
"""Brute-force reference for the rdkit example: the best K rows of a whole
table scored in one process with RDKit alone (no SciMesh), ranked as
SciMesh ranks them (score descending, ties by row order), written as
SciMesh writes its final CSV.

    reference.py TABLE.csv QUERY_SMILES K > expected.csv
"""

import csv
import sys

from rdkit import Chem, DataStructs, RDLogger
from rdkit.Chem import AllChem


def main():
    table, query, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
    RDLogger.DisableLog("rdApp.*")
    qfp = AllChem.GetMorganFingerprintAsBitVect(Chem.MolFromSmiles(query), 2, nBits=2048)
    ids, fps = [], []
    with open(table, newline="") as f:
        for row in csv.DictReader(f):
            mol = Chem.MolFromSmiles(row["smiles"])
            if mol is not None:
                ids.append(row["id"])
                fps.append(AllChem.GetMorganFingerprintAsBitVect(mol, 2, nBits=2048))
    scores = DataStructs.BulkTanimotoSimilarity(qfp, fps)
    order = sorted(range(len(ids)), key=lambda i: -scores[i])  # sorted() is stable
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["id", "score"])
    for i in order[:k]:
        out.writerow([ids[i], repr(scores[i])])


if __name__ == "__main__":
    main()
