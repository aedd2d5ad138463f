#!/usr/bin/env bash
# A ZionEX-like DLRM case study (docs/models/sharding.md): 128 GPUs in 16 hosts of 8, 400 fp16
# embedding tables of realistic spread (24 of 10^9 rows, the rest log-uniform over 10^3 .. 10^8
# rows; dimensions 64-256; pooling 1-100): 2.05 trillion parameters (4.1 TB), more than the HBM
# left for tables on 128 A100s of 40 GB once TorchRec's reservations and buffers are counted.
# `orrery shard plan` plans it with every sharding type and with one type for every table;
# `orrery gen dlrm --plan` writes each plan's iteration and `orrery run` simulates it on a
# rail-optimized fabric (NVSwitch 600 GB/s inside a host, one 25 GB/s NIC per GPU, flow backend).
# Prints, per plan, TorchRec's estimate (the busiest rank, ms) and the simulated iteration.
# Usage: bench/shard_case_study.sh [build-dir] [tables]
set -euo pipefail
build=${1:-build}
tables=${2:-400}
orrery="$(cd "$build" && pwd)/orrery"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cd "$out"

/usr/bin/python3 - "$tables" <<'PY'
import random, sys
count = int(sys.argv[1])
rng = random.Random(2022)
with open("tables.csv", "w") as f:
    f.write("name,rows,dim,pooling,dtype\n")
    for i in range(count):
        if i < 24:   # the few huge tables: ids of users and items
            rows, dim, pooling = 10**9, 64, rng.randint(20, 80)
        else:
            rows = int(10 ** rng.uniform(3, 8))
            dim = rng.choice([64, 128, 256])
            pooling = rng.randint(1, 100)
        f.write(f"t{i},{rows},{dim},{pooling},fp16\n")
PY
params=$(awk -F, 'NR > 1 { p += $2 * $3 } END { printf "%.3g", p }' tables.csv)
echo "tables: $tables ($params parameters), 128 GPUs in 16 hosts of 8"

cluster=(--world-size 128 --local-world-size 8 --batch 512 --hbm 40GiB --ddr 192GiB
         --intra-host-bw 600 --inter-host-bw 25)
# The DLRM around the tables: MLPerf's MLPs with a shorter top (its input is the interaction of
# 400 vectors), fp16.
cat > model.json <<'JSON'
{"base": "dlrm-mlperf", "top_mlp": [512, 256, 1], "dtype": "fp16"}
JSON
cat > system.json <<'JSON'
{"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
 "preferred-dataset-splits": 4, "all-reduce-implementation": ["ring", "ring"],
 "all-gather-implementation": ["ring", "ring"], "reduce-scatter-implementation": ["ring", "ring"],
 "all-to-all-implementation": ["direct", "direct"], "collective-optimization": "localBWAware",
 "local-mem-bw": 1555, "roofline-enabled": 1, "peak-perf": 312}
JSON
"$orrery" topo generate rail nodes=16 gpus_per_node=8 nodes_per_leaf=16 nvlink_bandwidth=600 \
  nic_bandwidth=25 -o rail.yml > /dev/null

plan() {  # name, flags...
  local name=$1
  shift
  local t0=$SECONDS
  if ! "$orrery" shard plan --tables tables.csv "${cluster[@]}" "$@" -o "$name.json" \
      > "$name.txt" 2> "$name.err"; then
    printf "%-26s %s\n" "$name" "$(sed 's/^orrery: error: //' "$name.err")"
    return
  fi
  local mix estimate
  mix=$(sed -n 's/^mix: //p' "$name.txt")
  estimate=$(sed -n 's/^estimate: \([0-9.]*\) ms.*imbalance \([0-9.]*\)$/\1 \2/p' "$name.txt")
  "$orrery" gen dlrm --plan "$name.json" --model model.json -o "traces/$name/d" > /dev/null
  local sim
  sim=$( { /usr/bin/time -f "%U" "$orrery" run -w "traces/$name/d" -g "traces/$name/d.json" \
      -s system.json -n rail.yml -b flow -q 2> "$name.time"; } \
      | sed -n 's/^  simulated time *\([0-9,]*\) ns.*/\1/p' | tr -d ,)
  printf "%-26s estimate %10.3f ms (imbalance %5s)  simulated %10.3f ms  (run %s s CPU)\n    mix: %s\n" \
    "$name" "${estimate% *}" "${estimate#* }" "$(echo "$sim / 1000000" | bc -l)" \
    "$(tail -1 "$name.time")" "$mix"
}

plan best-memory-balanced --partitioner memory-balanced
plan best-greedy
plan table-wise-only --sharding-types tw
plan row-wise-only --sharding-types rw
plan table-row-wise-only --sharding-types twrw
plan column-wise-only --sharding-types cw
plan data-parallel-only --sharding-types dp
