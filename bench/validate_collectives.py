#!/usr/bin/python3
"""Regenerates docs/validation.md's "Against hardware" tables: `orrery collective --compare` on
every measured nccl-tests table of ../shared/data/hardware, and predictions for the systems its
README describes without measurements. Usage: bench/validate_collectives.py [build/orrery]"""
import json
import os
import subprocess
import sys

ORRERY = sys.argv[1] if len(sys.argv) > 1 else "build/orrery"
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data",
                    "hardware")

MEASURED = [
    ("DGX H100, 8 GPUs, all-reduce", "dgxh100_8gpu_allreduce_nvidia_dgxc.tsv",
     ["--hardware", "dgx-h100", "--op", "all-reduce"]),
    ("Azure NDmv4 (A100 80GB), 8 GPUs, all-reduce", "azure_a100_8gpu_allreduce.tsv",
     ["--hardware", "dgx-a100", "--op", "all-reduce"]),
    ("Azure NDmv4, 2 nodes x 8 A100, HDR 200 x 8, all-reduce", "azure_a100_2node16gpu_allreduce.tsv",
     ["--hardware", "dgx-a100", "--nodes", "2", "--nic", "hdr200x8", "--op", "all-reduce"]),
    ("HGX B200, 8 GPUs, all-reduce", "b200_vultr_8gpu_allreduce.tsv",
     ["--hardware", "hgx-b200", "--op", "all-reduce"]),
    ("HGX B200, 8 GPUs, all-gather", "b200_vultr_8gpu_allgather.tsv",
     ["--hardware", "hgx-b200", "--op", "all-gather"]),
]


def run(args):
    out = subprocess.run([ORRERY, "collective"] + args, check=True, capture_output=True, text=True)
    return out.stdout


def size_text(size):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def compare(title, table, args):
    path = os.path.join(DATA, table)
    text = run(args + ["--compare", path])
    rows = []
    summary = ""
    for line in text.splitlines():
        if line.startswith("# |error|"):
            summary = line[2:]
        elif line and not line.startswith("#"):
            f = line.split()
            rows.append((int(f[0]), float(f[1]), float(f[2]), float(f[3]), float(f[4]), float(f[5])))
    print(f"### {title}\n")
    print(f"`orrery collective {' '.join(args)} --compare {table}`\n")
    print("| size | measured (us) | orrery (us) | error | busbw measured | busbw orrery |")
    print("|---|---|---|---|---|---|")
    for size, meas, sim, err, bm, bs in rows:
        mark = "" if size < 1 << 20 or abs(err) <= 10 else " **"
        print(f"| {size_text(size)} | {meas:,.2f} | {sim:,.2f} | {err:+.1f}%{mark} | {bm:.1f} | {bs:.1f} |")
    print(f"\n{summary}\n")


def predict(title, args, op):
    sizes = [1 << 20, 64 << 20, 1 << 30, 8 << 30]
    cells = []
    for size in sizes:
        rows = json.loads(run(args + ["--op", op, "-b", str(size), "--json"]))
        cells.append(f"{rows[0]['time_us']:,.1f} us, {rows[0]['busbw']:.0f} GB/s")
    print(f"| {title} | {op} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    for entry in MEASURED:
        compare(*entry)
    print("### Predictions for the systems without measurements\n")
    print("| system (orrery flags) | op | 1 MiB | 64 MiB | 1 GiB | 8 GiB |")
    print("|---|---|---|---|---|---|")
    for title, args, ops in [
        ("AWS p5: `--hardware dgx-h100 --nic efa100x32 --nodes 2`",
         ["--hardware", "dgx-h100", "--nic", "efa100x32", "--nodes", "2"], ["all-reduce"]),
        ("HGX B200 x 2, NDR: `--hardware hgx-b200 --nodes 2`", ["--hardware", "hgx-b200", "--nodes", "2"],
         ["all-reduce", "all-gather", "reduce-scatter", "all-to-all"]),
        ("HGX B200, 1 node: `--hardware hgx-b200`", ["--hardware", "hgx-b200"],
         ["reduce-scatter", "all-to-all"]),
        ("2 x XE9680 H200, Spectrum-X: `--hardware hgx-h200 --nodes 2`",
         ["--hardware", "hgx-h200", "--nodes", "2"], ["all-reduce"]),
        ("GCP A3 Mega: `--hardware dgx-h100 --nic tcpxo200x8 --nodes 2`",
         ["--hardware", "dgx-h100", "--nic", "tcpxo200x8", "--nodes", "2"], ["all-reduce"]),
        ("2 x 8 H100, NDR: `--hardware dgx-h100 --nodes 2`", ["--hardware", "dgx-h100", "--nodes", "2"],
         ["all-reduce"]),
    ]:
        for op in ops:
            predict(title, args, op)
