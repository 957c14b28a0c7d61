#!/usr/bin/python3
"""RDKit side of the SciMesh tanimoto benchmark; main.go drives it.

  rdkit_bench.py morgan --smiles FILE --n N --out CSV
      Writes N Morgan fingerprints (radius 2, 2048 bits) of the molecules in
      FILE, cycling through them, as the CSV id,fingerprint in hex (FPS
      byte order: the digits 2k, 2k+1 are byte k, bit 0 first).

  rdkit_bench.py time --csv CSV --query HEX --runs R --scores OUT
      Times RDKit's BulkTanimotoSimilarity over the fingerprints of CSV,
      R times each way, prints the medians of wall-clock and CPU seconds as
      JSON, and writes the scores of the last run to OUT as native float64s,
      in row order.

Run it with /usr/bin/python3, which has Debian's python3-rdkit.
"""

import argparse
import array
import json
import statistics
import sys
import time

from rdkit import Chem, DataStructs, RDLogger
from rdkit.Chem import AllChem


def morgan(args):
    RDLogger.DisableLog("rdApp.*")
    fps = []
    with open(args.smiles) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            mol = Chem.MolFromSmiles(parts[0])
            if mol is None:
                continue
            name = parts[1] if len(parts) > 1 else str(len(fps))
            fp = AllChem.GetMorganFingerprintAsBitVect(mol, 2, nBits=2048)
            fps.append((name, DataStructs.BitVectToFPSText(fp)))
    if not fps:
        sys.exit("no molecules in " + args.smiles)
    with open(args.out, "w") as out:
        out.write("id,fingerprint\n")
        for i in range(args.n):
            name, hexfp = fps[i % len(fps)]
            out.write("NCI%s-%d,%s\n" % (name, i // len(fps), hexfp))
    print(json.dumps({"molecules": len(fps)}))


def load(path, query_hex):
    """Reads the CSV and builds the bit vectors: the conversion cost."""
    with open(path) as f:
        lines = f.read().splitlines()
    fps = [DataStructs.CreateFromFPSText(line.split(",", 1)[1]) for line in lines[1:]]
    return DataStructs.CreateFromFPSText(query_hex), fps


def timed(fn, wall, cpu):
    """Calls fn, appends its wall-clock and CPU seconds, returns its result."""
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    result = fn()
    wall.append(time.perf_counter() - start_wall)
    cpu.append(time.process_time() - start_cpu)
    return result


def time_bulk(args):
    with_wall, with_cpu, without_wall, without_cpu = [], [], [], []

    def whole():
        query, fps = load(args.csv, args.query)
        return DataStructs.BulkTanimotoSimilarity(query, fps)

    for _ in range(args.runs):
        timed(whole, with_wall, with_cpu)
    query, fps = load(args.csv, args.query)
    for _ in range(args.runs):
        scores = timed(lambda: DataStructs.BulkTanimotoSimilarity(query, fps), without_wall, without_cpu)
    with open(args.scores, "wb") as out:
        array.array("d", scores).tofile(out)
    print(json.dumps({
        "rdkit_version": __import__("rdkit").__version__,
        "rows": len(fps),
        "with_conversion": {"wall_s": statistics.median(with_wall), "cpu_s": statistics.median(with_cpu)},
        "without_conversion": {"wall_s": statistics.median(without_wall), "cpu_s": statistics.median(without_cpu)},
    }))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("morgan")
    m.add_argument("--smiles", required=True)
    m.add_argument("--n", type=int, required=True)
    m.add_argument("--out", required=True)
    t = sub.add_parser("time")
    t.add_argument("--csv", required=True)
    t.add_argument("--query", required=True)
    t.add_argument("--runs", type=int, default=5)
    t.add_argument("--scores", required=True)
    args = p.parse_args()
    if args.cmd == "morgan":
        morgan(args)
    else:
        time_bulk(args)


if __name__ == "__main__":
    main()
