#!/usr/bin/env python3
"""Checks that every source under src/ includes only headers its layer may use.

The allowed edges are the table in cmake/layers.txt: a line `layer: dep dep ...` per layer. A
source file of src/<layer>/ may include "<layer>/...", "<dep>/..." for each listed dep, and
"et_def.pb.h" only when proto is listed. Anything else is reported as file:line with the layer
edge it would add, and the exit status is 1. The table itself must name known layers and have no
cycle. Usage: check_layers.py --table cmake/layers.txt --src src [--stamp FILE]
"""
import argparse
import re
import sys
from pathlib import Path

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_SUFFIXES = {".h", ".hpp", ".cpp", ".cc"}


def read_table(path):
    table = {}
    for number, raw in enumerate(Path(path).read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if ":" not in line:
            raise ValueError(f"{path}:{number}: expected 'layer: dep dep ...', found '{raw}'")
        layer, deps = line.split(":", 1)
        layer = layer.strip()
        if layer in table:
            raise ValueError(f"{path}:{number}: layer '{layer}' is listed twice")
        table[layer] = deps.split()
    for layer, deps in table.items():
        for dep in deps:
            if dep not in table:
                raise ValueError(f"{path}: layer '{layer}' uses '{dep}', which is not a layer")
            if dep == layer:
                raise ValueError(f"{path}: layer '{layer}' lists itself")
    # No cycle: depth-first search with colours.
    state = {}

    def visit(layer, trail):
        if state.get(layer) == "done":
            return
        if state.get(layer) == "open":
            cycle = trail[trail.index(layer):] + [layer]
            raise ValueError(f"{path}: the layers form a cycle: {' -> '.join(cycle)}")
        state[layer] = "open"
        for dep in table[layer]:
            visit(dep, trail + [layer])
        state[layer] = "done"

    for layer in table:
        visit(layer, [])
    return table


def check(table, src):
    problems = []
    layers = {path.name for path in Path(src).iterdir() if path.is_dir()}
    for folder in sorted(layers):
        if folder not in table:
            problems.append(f"{src}/{folder}: a folder under src/ that cmake/layers.txt does not "
                            "list (add its line: which layers it may use)")
            continue
        allowed = set(table[folder]) | {folder}
        for path in sorted(Path(src, folder).rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES:
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                header = match.group(1)
                if header == "et_def.pb.h":
                    used = "proto"
                elif "/" in header and header.split("/", 1)[0] in layers:
                    used = header.split("/", 1)[0]
                else:
                    continue  # a header beside the file, or a third-party one
                if used not in allowed:
                    problems.append(
                        f"{path}:{number}: includes \"{header}\": layer {folder} may not use "
                        f"{used} (cmake/layers.txt allows {folder}: "
                        f"{' '.join(table[folder]) or 'nothing'})")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", required=True)
    parser.add_argument("--src", required=True)
    parser.add_argument("--stamp", help="touched when the check passes (for the build)")
    args = parser.parse_args()
    try:
        table = read_table(args.table)
    except (OSError, ValueError) as error:
        print(f"check_layers: error: {error}", file=sys.stderr)
        return 1
    problems = check(table, args.src)
    for problem in problems:
        print(f"check_layers: error: {problem}", file=sys.stderr)
    if problems:
        return 1
    if args.stamp:
        Path(args.stamp).write_text("layers ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
