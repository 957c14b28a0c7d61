#!/usr/bin/python3
"""Brute-force reference for the rdkit example: the best K rows of a whole
table in one process, ranked as SciMesh ranks them (score descending, ties
by row order), written as SciMesh writes its final CSV.

    reference.py TABLE.csv QUERY_SMILES K > expected.csv
"""

import csv
import io
import os
import subprocess
import sys


def main():
    table, query, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
    score = os.path.join(os.path.dirname(os.path.abspath(__file__)), "score.py")
    env = dict(os.environ, SCIMESH_PARAMETERS='{"query": %s}' % _json_string(query))
    with open(table, "rb") as f:
        done = subprocess.run([sys.executable, score], stdin=f, env=env, capture_output=True, check=True)
    rows = list(csv.reader(io.StringIO(done.stdout.decode())))
    header, rows = rows[0], rows[1:]
    order = sorted(range(len(rows)), key=lambda i: -float(rows[i][1]))  # sorted() is stable
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(header)
    for i in order[:k]:
        out.writerow(rows[i])


def _json_string(s):
    import json
    return json.dumps(s)


if __name__ == "__main__":
    main()
