#!/usr/bin/env bash
# Bit-identical results before and after a change to the simulator: runs every case with two
# orrery binaries and compares their outputs (`run --output` JSON without its wall-clock field, the
# printed summary without its timing line, CSV files, and the timeline for small cases).
#
# Usage: bench/compare_results.sh BEFORE AFTER [work-dir] [big-case-dir ...]
#   BEFORE, AFTER  two orrery binaries (e.g. a copy of build/orrery made before the change)
#   work-dir       where traces and outputs go (default: a temporary folder, removed at the end)
#   big-case-dir   optional folders, each with w.*.et, w.json, system.json and network.yml
#                  (e.g. the GPT-3 1,024-rank plan): run once per binary with --fast-path off
# Cases: ASTRA-sim's microbenchmarks and example configurations; `gen microbench` for every
# collective x algorithm on Ring, FullyConnected, Switch and multi-dimensional networks (both
# collective optimizations, several chunk settings); `gen llm`, `gen dlrm`, `gen inference` plans;
# a custom collective; a graph topology under the flow backend; each under analytical and
# congestion-aware, with the fast path on and off and both timings where they differ.
# Exit status 1 when any output differs.
set -uo pipefail
before=$(realpath "$1")
after=$(realpath "$2")
work=${3:-}
shift $(($# < 3 ? $# : 3))
big=("$@")
repo=$(cd "$(dirname "$0")/.." && pwd)
data="$repo/tests/data"
if [[ -z "$work" ]]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
work=$(realpath "$work")
cd "$work" || exit 1

cases=0
diffs=0
failed_cases=()

# run_case NAME ARGS...: runs both binaries with ARGS plus outputs, compares.
run_case() {
  local name=$1
  shift
  local ok=1
  for which in before after; do
    local bin=$before
    [[ $which == after ]] && bin=$after
    local out="$work/out/$name.$which"
    rm -rf "$out"
    mkdir -p "$out"
    local args=()
    local arg
    for arg in "$@"; do args+=("${arg//@OUT@/$out}"); done
    "$bin" run -q "${args[@]}" -o "$out/result.json" --csv-dir "$out/csv" >"$out/stdout.txt" \
      2>"$out/stderr.txt"
    echo "exit $?" >>"$out/stdout.txt"
    # Wall-clock fields are the only figures allowed to differ.
    sed -i '/"wall_seconds"/d' "$out/result.json" 2>/dev/null
    sed -i -E 's/ events in [0-9.]+ s$/ events/' "$out/stdout.txt"
    sed -i "s|$out|OUT|g" "$out/stdout.txt" "$out/stderr.txt"
  done
  if ! diff -r "out/$name.before" "out/$name.after" >"out/$name.diff" 2>&1; then
    ok=0
  fi
  cases=$((cases + 1))
  if ((ok)); then
    rm -f "out/$name.diff"
  else
    diffs=$((diffs + 1))
    failed_cases+=("$name")
    echo "DIFFERS: $name (see $work/out/$name.diff)"
  fi
}

mkdir -p nets sys traces out

net() { # name kinds sizes bandwidths latencies
  printf 'topology: [ %s ]\nnpus_count: [ %s ]\nbandwidth: [ %s ]\nlatency: [ %s ]\n' \
    "$2" "$3" "$4" "$5" >"nets/$1.yml"
}
net ring8 Ring 8 50 500
net fc8 FullyConnected 8 50 500
net sw8 Switch 8 50 500
net ring4sw2 "Ring, Switch" "4, 2" "100, 25" "500, 2000"
net fc4ring4 "FullyConnected, Ring" "4, 4" "200, 50" "300, 1000"
net sw2fc4ring2 "Switch, FullyConnected, Ring" "2, 4, 2" "300, 100, 25" "200, 700, 3000"
net sw4sw4 "Switch, Switch" "4, 4" "300, 25" "700, 3000"

# sysfile name algorithm dims [splits active optimization policy extra]
sysfile() {
  local name=$1 algo=$2 dims=$3 splits=${4:-4} active=${5:-1} opt=${6:-localBWAware}
  local policy=${7:-LIFO} extra=${8:-}
  local list="" d
  for ((d = 0; d < dims; d++)); do list+="${list:+, }\"$algo\""; done
  local a2a=$list ag=$list
  # in-network collectives have no all-to-all, the tree is an all-reduce only: direct and ring
  # stand in.
  if [[ $algo == inSwitch || $algo == doubleBinaryTree ]]; then
    a2a=""
    for ((d = 0; d < dims; d++)); do a2a+="${a2a:+, }\"direct\""; done
  fi
  if [[ $algo == doubleBinaryTree ]]; then
    ag=""
    for ((d = 0; d < dims; d++)); do ag+="${ag:+, }\"ring\""; done
  fi
  cat >"sys/$name.json" <<EOF
{"scheduling-policy": "$policy", "endpoint-delay": 10, "active-chunks-per-dimension": $active,
 "preferred-dataset-splits": $splits, "all-reduce-implementation": [$list],
 "all-gather-implementation": [$ag], "reduce-scatter-implementation": [$ag],
 "all-to-all-implementation": [$a2a], "collective-optimization": "$opt", "local-mem-bw": 1600$extra}
EOF
}

# ---- ASTRA-sim's own microbenchmarks and configurations ----
for coll in all_reduce all_gather reduce_scatter all_to_all; do
  for npus in 4 8; do
    dir="$data/astra-sim/microbenchmarks/$coll/${npus}npus_1MB"
    [[ -d $dir ]] || continue
    for backend in analytical congestion-aware; do
      for cfg in Ring_4chunks system_cfg HGX-H100-validated; do
        netfile="$data/network/Ring_${npus}npus.yml"
        [[ $cfg == HGX-H100-validated ]] && { [[ $npus == 8 ]] || continue; netfile="$data/network/HGX-H100-validated.yml"; }
        run_case "astra.$coll.$npus.$cfg.$backend" -w "$dir/$coll" \
          -s "$data/astra-sim/configs/$cfg.json" -n "$netfile" -b "$backend"
        run_case "astra.$coll.$npus.$cfg.$backend.off" -w "$dir/$coll" \
          -s "$data/astra-sim/configs/$cfg.json" -n "$netfile" -b "$backend" --fast-path off
      done
    done
  done
done
for t in MLP_ModelParallel Resnet50_DataParallel microAllReduce; do
  run_case "astra.text.$t" -w "$data/astra-sim/text_converter/$t" \
    -s "$data/astra-sim/configs/system_cfg.json" -n "$data/network/Ring_4npus.yml"
done
# A custom collective: the ring graphs of ASTRA-sim's example.
mkdir -p custom
cat >sys/custom.json <<EOF
{"scheduling-policy": "FIFO", "preferred-dataset-splits": 1,
 "all-reduce-implementation-custom": ["$data/astra-sim/custom_ring_allreduce/custom_allreduce"],
 "local-mem-bw": 50}
EOF
"$before" gen microbench --collective all-reduce --size 1MiB --ranks 8 -o traces/ar8 >/dev/null
for backend in analytical congestion-aware; do
  run_case "custom.$backend" -w "$work/traces/ar8" -s "$work/sys/custom.json" -n "$data/network/Ring_8npus.yml" \
    -b "$backend"
done

# ---- every collective x algorithm on small networks ----
colls=(all-reduce all-gather reduce-scatter all-to-all broadcast reduce gather scatter barrier send-recv)
for coll in "${colls[@]}"; do
  for ranks in 8 16; do
    "$before" gen microbench --collective "$coll" --size 1MiB --ranks "$ranks" --compute-us 3 \
      -o "traces/$coll.$ranks" >/dev/null
  done
done
declare -A netranks=([ring8]=8 [fc8]=8 [sw8]=8 [ring4sw2]=8 [fc4ring4]=16 [sw2fc4ring2]=16 [sw4sw4]=16)
declare -A netdims=([ring8]=1 [fc8]=1 [sw8]=1 [ring4sw2]=2 [fc4ring4]=2 [sw2fc4ring2]=3 [sw4sw4]=2)
# Broadcast, reduce, gather, scatter, barrier and send-recv run flat whatever the algorithm: they
# run once, under ring.
for algo in ring direct direct2 halvingDoubling doubleBinaryTree oneRing oneDirect oneHalvingDoubling inSwitch; do
  for netname in ring8 fc8 sw8 ring4sw2 fc4ring4 sw2fc4ring2 sw4sw4; do
    dims=${netdims[$netname]}
    ranks=${netranks[$netname]}
    if [[ $algo == inSwitch && $netname != sw8 && $netname != sw4sw4 ]]; then continue; fi
    for variant in a b c; do
      case $variant in
        a) sysfile "$algo.$dims.a" "$algo" "$dims" 4 1 localBWAware LIFO ;;
        b) sysfile "$algo.$dims.b" "$algo" "$dims" 3 2 baseline FIFO ;;
        c) sysfile "$algo.$dims.c" "$algo" "$dims" 1 1 localBWAware LIFO ;;
      esac
      for coll in "${colls[@]}"; do
        case $coll in
          all-reduce | all-gather | reduce-scatter | all-to-all) ;;
          *) [[ $algo == ring ]] || continue ;;
        esac
        if [[ $algo == doubleBinaryTree && $coll != all-reduce ]]; then continue; fi
        if [[ $algo == inSwitch && $coll == all-to-all ]]; then continue; fi
        base="micro.$algo.$netname.$variant.$coll"
        args=(-w "$work/traces/$coll.$ranks" -s "$work/sys/$algo.$dims.$variant.json" -n "$work/nets/$netname.yml")
        if [[ $variant == a ]]; then
          for backend in analytical congestion-aware; do
            run_case "$base.$backend" "${args[@]}" -b "$backend"
            run_case "$base.$backend.off" "${args[@]}" -b "$backend" --fast-path off
          done
          run_case "$base.exact" "${args[@]}" --timing exact
        else
          run_case "$base.off" "${args[@]}" --fast-path off
          [[ $coll == all-reduce ]] && run_case "$base.ca" "${args[@]}" -b congestion-aware
        fi
      done
    done
  done
done

# ---- generated plans ----
"$before" gen llm --model llama2-7b --global-batch 8 --micro-batch 1 --dp 2 --tp 2 --pp 2 \
  -o traces/llm8 >/dev/null
"$before" gen llm --model gpt3-6.7b --global-batch 16 --micro-batch 1 --dp 2 --tp 4 --pp 2 \
  --sp --zero 2 --recompute -o traces/llm16 >/dev/null
"$before" gen llm --model llama2-7b --global-batch 8 --micro-batch 1 --dp 2 --tp 2 --pp 4 \
  --schedule interleaved --zero 3 -o traces/llm16i >/dev/null
"$before" gen dlrm --model dlrm-mlperf --ranks 8 --global-batch 4096 --sharding row \
  -o traces/dlrm8 >/dev/null
"$before" gen dlrm --model dlrm-mlperf --ranks 16 --global-batch 4096 --sharding table \
  -o traces/dlrm16 >/dev/null
"$before" gen inference --model llama2-7b --tp 4 --pp 2 --prompt-lengths 128,256 \
  --output-lengths 8 --micro-batches 2 -o traces/inf8 >/dev/null
sysfile plan2.a ring 2 4 1 localBWAware LIFO ', "roofline-enabled": 1, "peak-perf": 312'
sysfile plan2.b halvingDoubling 2 2 2 baseline FIFO
sysfile plan2.c direct 2 4 1 localBWAware EXPLICIT ', "roofline-enabled": 1, "peak-perf": 100'
sysfile plan3.a ring 3 4 1 localBWAware LIFO ', "roofline-enabled": 1, "peak-perf": 312'
sysfile plan2.d inSwitch 2 4 1 localBWAware LIFO
for plan in llm8:ring4sw2 llm16:fc4ring4 llm16:sw4sw4 llm16i:sw2fc4ring2 dlrm8:ring4sw2 dlrm16:sw4sw4 inf8:ring4sw2; do
  trace=${plan%%:*}
  netname=${plan##*:}
  dims=${netdims[$netname]}
  groups=()
  [[ -f traces/$trace.json ]] && groups=(-g "$work/traces/$trace.json")
  for s in a b c d; do
    [[ $dims == 3 && $s != a ]] && continue
    [[ $s == d && $netname != sw4sw4 ]] && continue
    sysname="plan$dims.$s"
    [[ -f sys/$sysname.json ]] || continue
    for backend in analytical congestion-aware; do
      run_case "plan.$trace.$netname.$s.$backend" -w "$work/traces/$trace" "${groups[@]}" \
        -s "$work/sys/$sysname.json" -n "$work/nets/$netname.yml" -b "$backend" --fast-path off
    done
  done
done
run_case "example.llama" -w "$repo/examples/llama_dp2tp2pp2/workload" \
  -g "$repo/examples/llama_dp2tp2pp2/workload.json" -s "$repo/examples/llama_dp2tp2pp2/system.json" \
  -n "$repo/examples/llama_dp2tp2pp2/network.yml" --timeline @OUT@/timeline.json
run_case "example.llama.ca" -w "$repo/examples/llama_dp2tp2pp2/workload" \
  -g "$repo/examples/llama_dp2tp2pp2/workload.json" -s "$repo/examples/llama_dp2tp2pp2/system.json" \
  -n "$repo/examples/llama_dp2tp2pp2/network.yml" -b congestion-aware --timeline @OUT@/timeline.json

# ---- a graph topology (flow and congestion-aware backends on a physical graph) ----
"$before" topo generate clos2 leaves=2 npus_per_leaf=4 spines=2 -o nets/clos.yml >/dev/null 2>&1
if [[ -s nets/clos.yml ]]; then
  for backend in flow congestion-aware analytical; do
    run_case "graph.llm8.$backend" -w "$work/traces/llm8" -g "$work/traces/llm8.json" \
      -s "$work/sys/plan2.a.json" -n "$work/nets/clos.yml" -b "$backend"
  done
fi

# ---- large plans given on the command line ----
for dir in "${big[@]}"; do
  dir=$(realpath "$dir")
  name=$(basename "$dir")
  run_case "big.$name" -w "$dir/w" -g "$dir/w.json" -s "$dir/system.json" -n "$dir/network.yml" \
    --fast-path off
done

echo "$cases cases, $diffs differ"
((diffs == 0))
