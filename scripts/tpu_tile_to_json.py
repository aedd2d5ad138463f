#!/usr/bin/python3
"""Writes LayerDAG's TPU Tile graphs (a .pth file of its repository) as an orrery graph set.

LayerDAG (github.com/Graph-COM/LayerDAG, data_files/tpu_tile_processed/{train,val,test}.pth, from
Google's TpuGraphs tile collection, Apache-2.0) stores a dict of four lists: src_list and dst_list
(edge endpoints, parent to child), x_n_list (the opcode category of every node) and y_list (the
kernel's normalized runtime averaged over compiler configurations). orrery reads the same graphs
as JSON (src/synth/graphs.h): {"format": "orrery graph set 1", "categories": N, "label": ...,
"graphs": [{"x": [...], "edges": [[parent, child], ...], "y": ...}]}.

Reading .pth needs torch: run it with Debian's /usr/bin/python3 (python3-torch).
Usage: tpu_tile_to_json.py IN.pth OUT.json [--categories 47] [--first N] [--every K]
"""
import argparse
import json
import sys

import torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pth")
    parser.add_argument("json")
    parser.add_argument("--categories", type=int, default=0,
                        help="categories of the set (default: the largest found + 1; give 47 so "
                             "that every split of TPU Tile agrees)")
    parser.add_argument("--first", type=int, default=0, help="keep only the first N graphs")
    parser.add_argument("--every", type=int, default=1, help="keep every K-th graph")
    args = parser.parse_args()

    data = torch.load(args.pth)
    for key in ("src_list", "dst_list", "x_n_list", "y_list"):
        if key not in data:
            sys.exit(f"{args.pth}: no '{key}': not a LayerDAG graph file")
    graphs = []
    largest = -1
    count = len(data["src_list"])
    for index in range(0, count, max(args.every, 1)):
        src = [int(v) for v in data["src_list"][index]]
        dst = [int(v) for v in data["dst_list"][index]]
        x = [int(v) for v in data["x_n_list"][index]]
        largest = max([largest] + x)
        graphs.append({"x": x, "edges": [[s, d] for s, d in zip(src, dst)],
                       "y": float(data["y_list"][index])})
        if args.first and len(graphs) == args.first:
            break
    categories = args.categories or largest + 1
    if largest >= categories:
        sys.exit(f"{args.pth}: category {largest} is not below --categories {categories}")
    with open(args.json, "w") as out:
        json.dump({"format": "orrery graph set 1", "categories": categories,
                   "label": "normalized runtime", "graphs": graphs}, out, separators=(",", ":"))
        out.write("\n")
    print(f"{args.json}: {len(graphs)} graphs of {count}, {categories} categories")


if __name__ == "__main__":
    main()
