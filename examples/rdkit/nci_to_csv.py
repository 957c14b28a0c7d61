#!/usr/bin/python3
"""Turns RDKit's NCI sample (rdkit-data: SMILES, then an ID, per line) into
the id,smiles CSV the example's workload reads.

    nci_to_csv.py /usr/share/RDKit/Data/NCI/first_5K.smi > nci.csv
"""

import csv
import sys

out = csv.writer(sys.stdout, lineterminator="\n")
out.writerow(["id", "smiles"])
with open(sys.argv[1]) as f:
    for line in f:
        fields = line.split()
        if len(fields) >= 2:
            out.writerow(["nci-" + fields[1], fields[0]])
