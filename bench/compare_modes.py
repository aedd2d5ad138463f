#!/usr/bin/python3
"""Compares two `orrery run --output` JSON files of one scenario run in different simulation modes
(rank classes or symmetric against --fast-path off): every figure must be identical except the
wall-clock time, the count of events handled, the "simulation" block (collectives in the order
listed: every mode lists them by first issue, then group and sequence) and the workload's name (a
set of rank files and its `gen --classes` form are one workload under two prefixes).
Usage: bench/compare_modes.py A.json B.json   (exit status 1 when they differ)"""
import json
import sys


def load(path):
    with open(path) as f:
        doc = json.load(f)
    doc.pop("simulation", None)
    doc.pop("workload", None)
    doc["summary"].pop("wall_seconds", None)
    doc["summary"].pop("events", None)
    return doc


def main():
    a, b = load(sys.argv[1]), load(sys.argv[2])
    differ = 0
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            differ += 1
            print(f"differs: {key}")
            if isinstance(a.get(key), list) and isinstance(b.get(key), list):
                la, lb = a[key], b[key]
                print(f"  lengths {len(la)} vs {len(lb)}")
                for i, (x, y) in enumerate(zip(la, lb)):
                    if x != y:
                        print(f"  first difference at {i}:\n    {x}\n    {y}")
                        break
    print("identical" if differ == 0 else f"{differ} sections differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
