#!/usr/bin/env bash
# The congestion-control study of issue #10 on the reference's 128-NPU two-tier Clos (8 leaves x
# 16 NPUs, 8 spines, 200 Gb/s, 5 us NPU-leaf, 12.5 us leaf-spine): ring all-reduce (one 128-rank
# ring), hierarchical all-reduce (rings inside leaves, then across), all-to-all, and a data-parallel
# training step whose gradient all-reduces overlap the backward pass, each under PFC only, DCQCN,
# DCTCP, TIMELY and HPCC with the default parameters (docs/models/roce.md).
# Prints one row per run: collective time, PAUSE frames, time paused, ECN marks, peak switch
# buffer and peak egress queue, drops, the wall time of `orrery run`, and the same collective under
# the `flow` backend for reference.
# Usage: bench/roce_study.sh [build-dir] [size, default 64MiB] [schemes, default all]
# QP=message runs with a queue pair per message instead of one per pair of NPUs (docs/models/roce.md);
# QPS=n gives every pair n queue pairs (qps_per_pair); CASES picks the cases (default "ring hier
# a2a step").
set -euo pipefail
build=${1:-build}
size=${2:-64MiB}
schemes=${3:-"none dcqcn dctcp timely hpcc"}
qp=${QP:-pair}
qps=${QPS:-1}
orrery="$(cd "$(dirname "$build")" && pwd)/$(basename "$build")/orrery"
work=$(mktemp -d /tmp/orrery-roce.XXXXXX)
trap 'rm -rf "$work"' EXIT

cat > "$work/sys.json" <<'JSON'
{"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
 "preferred-dataset-splits": 4, "collective-optimization": "localBWAware", "local-mem-bw": 1600,
 "all-reduce-implementation": ["ring", "ring"], "all-gather-implementation": ["ring", "ring"],
 "reduce-scatter-implementation": ["ring", "ring"], "all-to-all-implementation": ["direct", "direct"]}
JSON
# The one-dimension layouts (ring, flat) take one implementation per collective: a system file
# listing more than the network's dimensions is refused.
sed 's/\["ring", "ring"\]/["ring"]/g; s/\["direct", "direct"\]/["direct"]/' "$work/sys.json" \
  > "$work/sys1.json"
printf 'generator: clos2\nlogical: [[Ring, 128]]\n' > "$work/ring.yml"
printf 'generator: clos2\n' > "$work/hier.yml"   # logical [[Switch, 16], [Switch, 8]]
printf 'generator: clos2\nlogical: [[Switch, 128]]\n' > "$work/flat.yml"
"$orrery" gen microbench --collective all-reduce --size "$size" --ranks 128 -o "$work/ar" > /dev/null
"$orrery" gen microbench --collective all-to-all --size "$size" --ranks 128 -o "$work/a2a" > /dev/null
# A training step: a small GPT (8 layers, hidden 1024, 0.15 B parameters) data-parallel over the
# 128 NPUs, 8 micro-batches of 1,024 tokens each, roofline compute at 400 TFLOPS; gradients are
# all-reduced layer by layer (hierarchical, as above) while the backward pass goes on.
printf '{"base": "gpt3-6.7b", "layers": 8, "hidden": 1024, "heads": 16, "kv_heads": 16, "ffn": 4096, "seq": 1024}\n' \
  > "$work/tiny.json"
"$orrery" gen llm --model "$work/tiny.json" --global-batch 1024 --micro-batch 1 --dp 128 \
  -o "$work/step" > /dev/null
sed 's/"local-mem-bw": 1600/"local-mem-bw": 1600, "roofline-enabled": 1, "peak-perf": 400/' \
  "$work/sys.json" > "$work/sys_step.json"

printf '| collective | cc | time (us) | vs flow | PAUSE frames | paused (us, all ports) | ECN marks | peak buffer | peak egress queue | drops | wall (s) |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|\n'
run_case() {  # label workload network [system file] [orrery run options...]
  local label=$1 workload=$2 net=$3 sys=${4:-$work/sys.json} cc flow
  shift $(($# < 4 ? $# : 4))
  flow=$("$orrery" run -q -w "$workload" -s "$sys" -n "$work/$net.yml" -b flow "$@" |
    awk '/simulated time/ {gsub(",", "", $3); printf "%.1f", $3 / 1000}')
  echo "| $label | flow backend | $flow | | | | | | | | |"
  for cc in $schemes; do
    printf 'cc: %s\nqp: %s\n' "$cc" "$qp" > "$work/cc.yml"
    if [[ $qps != 1 ]]; then printf 'qps_per_pair: %s\n' "$qps" >> "$work/cc.yml"; fi
    local start end
    start=$(date +%s.%N)
    "$orrery" run -q -w "$workload" -s "$sys" -n "$work/$net.yml" -b roce \
      --roce-config "$work/cc.yml" --roce-stats "$work/stats.json" "$@" > "$work/out.txt"
    end=$(date +%s.%N)
    local sim
    sim=$(awk '/simulated time/ {gsub(",", "", $3); printf "%.1f", $3 / 1000}' "$work/out.txt")
    python3 - "$work/stats.json" "$label" "$cc" "$sim" "$start" "$end" "$flow" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
t = s["totals"]
peak_q = max((p["peak_queue_bytes"] for p in s["ports"]), default=0)
ratio = float(sys.argv[4]) / float(sys.argv[7])
print(f"| {sys.argv[2]} | {sys.argv[3]} | {sys.argv[4]} | {ratio:.3f}x | {t['pauses']} | {t['paused_us']:.1f} | "
      f"{t['ecn_marks']} | {t['peak_buffer_bytes'] / 1024:.0f} KiB | {peak_q / 1024:.0f} KiB | "
      f"{t['drops']} | {float(sys.argv[6]) - float(sys.argv[5]):.1f} |")
PY
  done
}
for c in ${CASES:-ring hier a2a step}; do
  case $c in
    ring) run_case "ring all-reduce $size" "$work/ar" ring "$work/sys1.json" ;;
    hier) run_case "hierarchical all-reduce $size" "$work/ar" hier ;;
    a2a) run_case "all-to-all $size" "$work/a2a" flat "$work/sys1.json" ;;
    step) run_case "training step (GPT 0.15B, DP 128)" "$work/step" hier "$work/sys_step.json" \
      -g "$work/step.json" ;;
    *) echo "roce_study: unknown case '$c' (ring, hier, a2a, step)" >&2; exit 1 ;;
  esac
done
