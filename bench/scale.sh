#!/usr/bin/env bash
# The scale cases of issue #8, run end to end: for each, wall time and peak RSS of `orrery run`
# (GNU time), the simulated time, and events per second. Usage: bench/scale.sh [build-dir]
#
# ASTRA-sim 2.x on the same 2-core machine class (reference/astra-sim-compat.md, issue #8):
#   64 MiB all-reduce, 4,096-rank ring: 260 s, 5.6 GB (congestion-aware 460 s)
#   4,096-rank switch: 25 s, 5.6 GB;  8 x 512: 70.6 s;  8 x 8 x 256: 24.5 s, 1.9 GB
#   16,384-rank ring: does not fit in 24 GB;  1,024-rank 32-layer training step: 82 s
set -euo pipefail
build=${1:-build}
orrery="$(cd "$(dirname "$build")" && pwd)/$(basename "$build")/orrery"
work=$(mktemp -d /tmp/orrery-scale.XXXXXX)
trap 'rm -rf "$work"' EXIT

cat > "$work/sys.json" <<'JSON'
{"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
 "preferred-dataset-splits": 4, "collective-optimization": "localBWAware", "local-mem-bw": 1600,
 "all-reduce-implementation": ["ring", "ring", "ring"], "all-gather-implementation": ["ring", "ring", "ring"],
 "reduce-scatter-implementation": ["ring", "ring", "ring"], "all-to-all-implementation": ["direct", "direct", "direct"]}
JSON

network() {  # name kinds sizes
  local bws lats
  bws=$(echo "$2" | sed -E 's/[A-Za-z]+/50/g')
  lats=$(echo "$2" | sed -E 's/[A-Za-z]+/500/g')
  printf 'topology: [ %s ]\nnpus_count: [ %s ]\nbandwidth: [ %s ]\nlatency: [ %s ]\n' "$2" "$3" "$bws" "$lats" > "$work/$1.yml"
}

printf '%-52s %8s %8s %8s %14s %10s %12s\n' case wall_s cpu_s rss_MB simulated_ns events events_per_s
run_case() {  # label workload network [extra flags...]
  local label=$1 workload=$2 net=$3
  shift 3
  local out
  out=$( { /usr/bin/time -f 'TIME %e %M %U %S' "$orrery" run -q -w "$workload" -s "$work/sys.json" -n "$work/$net.yml" "$@" > "$work/out.txt"; } 2>&1 )
  local wall cpu rss sim events
  wall=$(echo "$out" | awk '/^TIME/ {print $2}')
  cpu=$(echo "$out" | awk '/^TIME/ {printf "%.2f", $4 + $5}')
  rss=$(echo "$out" | awk '/^TIME/ {printf "%.0f", $3 / 1024}')
  sim=$(awk '/simulated time/ {gsub(",", "", $3); print $3}' "$work/out.txt")
  events=$(awk '/ events in / {for (i = 1; i <= NF; i++) if ($i == "events") {gsub(",", "", $(i-1)); print $(i-1)}}' "$work/out.txt")
  printf '%-52s %8s %8s %8s %14s %10s %12.0f\n' "$label" "$wall" "$cpu" "$rss" "$sim" "$events" \
    "$(awk -v e="$events" -v w="$wall" 'BEGIN {print (w > 0 ? e / w : 0)}')"
}

micro() {  # name ranks [one-file]
  if [ "${3:-}" = one ]; then
    "$orrery" gen microbench --collective all-reduce --size 64MiB --ranks 1 -o "$work/$1/ar" > /dev/null
  else
    "$orrery" gen microbench --collective all-reduce --size 64MiB --ranks "$2" -o "$work/$1/ar" > /dev/null
  fi
}

micro ring4k 4096;  network ring4k "Ring" 4096
run_case "64 MiB all-reduce, Ring 4,096" "$work/ring4k/ar" ring4k
network switch4k "Switch" 4096
run_case "64 MiB all-reduce, Switch 4,096" "$work/ring4k/ar" switch4k
run_case "64 MiB all-reduce, Ring 4,096, congestion-aware" "$work/ring4k/ar" ring4k -b congestion-aware
network two_d "Ring, Ring" "8, 512"
run_case "64 MiB all-reduce, 8 x 512" "$work/ring4k/ar" two_d
micro r16k 1 one;  network three_d "Ring, FullyConnected, Switch" "8, 8, 256"
run_case "64 MiB all-reduce, 8 x 8 x 256 (16,384)" "$work/r16k/ar" three_d --uniform
network ring16k "Ring" 16384
run_case "64 MiB all-reduce, Ring 16,384" "$work/r16k/ar" ring16k --uniform
network million "Ring, FullyConnected, Switch" "64, 128, 128"
run_case "64 MiB all-reduce, 64 x 128 x 128 (1,048,576)" "$work/r16k/ar" million --uniform

# The 1,024-rank data-parallel training step: 32 layers, forward 1 ms and backward 2 ms per
# layer, a 32 MiB all-reduce of each layer's gradients as its backward ends (overlapping the next).
{
  # Written as Chakra JSON by the shell, then encoded by `orrery trace from-json`.
  printf '{"format": "chakra-et-json/1", "global_metadata": {"version": "0.0.4"}, "nodes": [\n'
  id=0
  for layer in $(seq 0 31); do
    deps=""; [ "$id" -gt 0 ] && deps=", \"data_deps\": [\"$((id - 1))\"]"
    printf '{"id": "%d", "name": "fwd%d", "type": "COMP_NODE", "duration_micros": "1000"%s},\n' "$id" "$layer" "$deps"
    id=$((id + 1))
  done
  prev=$((id - 1))
  for layer in $(seq 31 -1 0); do
    printf '{"id": "%d", "name": "bwd%d", "type": "COMP_NODE", "duration_micros": "2000", "data_deps": ["%d"]},\n' "$id" "$layer" "$prev"
    prev=$id; id=$((id + 1))
    sep=","; [ "$layer" -eq 0 ] && sep=""
    printf '{"id": "%d", "name": "allreduce%d", "type": "COMM_COLL_NODE", "data_deps": ["%d"], "attr": [{"name": "is_cpu_op", "bool_val": false}, {"name": "comm_type", "int64_val": "0"}, {"name": "comm_size", "int64_val": "%d"}]}%s\n' "$id" "$layer" "$prev" $((32 << 20)) "$sep"
    id=$((id + 1))
  done
  printf ']}\n'
} > "$work/step.json"
mkdir -p "$work/step"
"$orrery" trace from-json "$work/step.json" -o "$work/step/step.0.et"
network step "Ring, Switch" "8, 128"
run_case "32-layer DP step, 8 x 128 (1,024)" "$work/step/step" step --uniform

# Without the fast path, every rank is simulated event by event (4,096 ranks: 134 M messages).
if [ "${ORRERY_SCALE_FULL:-0}" = 1 ]; then
  run_case "Ring 4,096, full simulation" "$work/ring4k/ar" ring4k --fast-path off
  run_case "Ring 4,096, congestion-aware (full)" "$work/ring4k/ar" ring4k -b congestion-aware --fast-path off
fi
