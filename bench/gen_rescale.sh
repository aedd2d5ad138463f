#!/usr/bin/env bash
# `orrery trace rescale` from 256 to 1,024 ranks: GPT-3 175B generated with two data-parallel
# replicas (tp 8 x dp 2 x pp 16, 1F1B, full recomputation, ZeRO-1, 32 micro-batches of one
# 2,048-token sequence per pipeline), rescaled to dp 8 (the stride, 8 tensor ranks, found from the
# groups), then compared with generating dp 8 directly: `orrery run` on the network of
# examples/gpt3_175b_1024 prints the same results for both (per-rank batch: rescaling is exact).
# Prints wall time and peak RSS of the rescale. Usage: bench/gen_rescale.sh [build-dir]
set -euo pipefail
build=${1:-build}
orrery="$build/orrery"
example=examples/gpt3_175b_1024
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$orrery" gen llm --model gpt3-175b --global-batch 64 --micro-batch 1 --dp 2 --tp 8 --pp 16 \
  --recompute --zero 1 -o "$out/two/w" > /dev/null
/usr/bin/time -f "trace rescale 256 -> 1,024 ranks: %e s wall, %U s user, %M KiB peak RSS" \
  "$orrery" trace rescale "$out/two/w" -g "$out/two/w.json" --from-dp 2 --dp 8 -o "$out/big/w"
"$orrery" gen llm --model gpt3-175b --global-batch 256 --micro-batch 1 --dp 8 --tp 8 --pp 16 \
  --recompute --zero 1 -o "$out/direct/w" > /dev/null
for set in big direct; do
  echo "run of the $set traces:"
  "$orrery" run -w "$out/$set/w" -g "$out/$set/w.json" -s "$example/system.json" \
    -n "$example/network.yml" -q | grep -E "simulated time|collectives"
done
