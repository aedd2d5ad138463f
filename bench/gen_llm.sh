#!/usr/bin/env bash
# GPT-3 175B on 1,024 ranks: `orrery gen llm` writes one training iteration (tp 8 x dp 8 x pp 16,
# 1F1B, full recomputation, ZeRO-1, 32 micro-batches of one 2,048-token sequence per pipeline) and
# `orrery run` simulates it on the three-dimensional network of examples/gpt3_175b_1024.
# Prints wall time and peak RSS of both. Usage: bench/gen_llm.sh [build-dir]
set -euo pipefail
build=${1:-build}
orrery="$build/orrery"
example=examples/gpt3_175b_1024
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

/usr/bin/time -f "gen llm: %e s wall, %U s user, %M KiB peak RSS" \
  "$orrery" gen llm --model gpt3-175b --global-batch 256 --micro-batch 1 \
  --dp 8 --tp 8 --pp 16 --recompute --zero 1 -o "$out/gpt3" | grep -E "^(plan|batch|wrote|FLOPs)"
echo "trace size: $(du -sh "$out" | cut -f1)"
/usr/bin/time -f "run: %e s wall, %U s user, %M KiB peak RSS" \
  "$orrery" run -w "$out/gpt3" -g "$out/gpt3.json" -s "$example/system.json" \
  -n "$example/network.yml" -q
