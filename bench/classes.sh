#!/usr/bin/env bash
# Rank classes against full simulation on issue #19's training steps: for each case, `orrery run`
# by default (rank classes / symmetric fast path) on the rank files and on the `gen --classes`
# files (a file per class and a rank map), and with --fast-path off, wall and CPU time
# (user + sys) and peak RSS (GNU time), events, classes, and whether the two outputs are identical
# (bench/compare_modes.py). Usage: bench/classes.sh [build-dir] [case ...]
# Cases: 6.7b_tp8_dp8 175b_tp8_pp4_dp2 175b_tp8_pp4_dp8 175b_tp8_pp4_dp32 example (default: all).
#
# ASTRA-sim 2.x on this machine, analytical backend, the same inputs (issue #19):
#   6.7b tp8 dp8 20.4 s 599 MiB; 175b tp8 pp4 dp2 54.0 s 1,537 MiB; dp8 74.1 s 1,666 MiB;
#   dp32 145 s 2,358 MiB. (The example: no ASTRA-sim figure; its system file has three
#   implementations per list, which ASTRA-sim refuses on a two-dimension network.)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
shift || true
orrery="$(cd "$build" && pwd)/orrery"
cases=${*:-"6.7b_tp8_dp8 175b_tp8_pp4_dp2 175b_tp8_pp4_dp8 175b_tp8_pp4_dp32 example"}
work=$(mktemp -d /tmp/orrery-classes.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The example's system, two implementations per list (ASTRA-sim asserts on longer lists).
sed -E 's/\["(ring|direct)", "(ring|direct)", "(ring|direct)"\]/["\1", "\2"]/' \
  "$here/../examples/gpt3_175b_1024/system.json" > "$work/sys2.json"
network() {  # file ranks
  printf 'topology: [ Switch, Switch ]\nnpus_count: [ 8, %s ]\nbandwidth: [ 300, 25 ]\nlatency: [ 500, 2000 ]\n' \
    "$(($2 / 8))" > "$1"
}

measure() {  # label output-json run-args...
  local label=$1 json=$2
  shift 2
  local out
  out=$( { /usr/bin/time -f 'TIME %e %M %U %S' "$orrery" run -q -o "$json" "$@" > "$work/stdout.txt"; } 2>&1 )
  echo "$out" | awk -v label="$label" -v json="$json" '/^TIME/ {
    printf "  %-8s wall %7.2f s  cpu %7.2f s  rss %6.0f MB", label, $2, $4 + $5, $3 / 1024 }'
  /usr/bin/python3 - "$json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s, m = d["summary"], d.get("simulation", {})
print(f"  events {s['events']:>11,}  simulated {s['simulated_ns']:,} ns  "
      f"mode {m.get('mode', '?')} ({m.get('simulated_ranks', '?')} simulated)")
PY
}

run_case() {  # name gen-args...
  local name=$1
  shift
  local dir=$work/$name
  mkdir -p "$dir"
  "$orrery" gen llm "$@" -o "$dir/w" > /dev/null
  mkdir -p "$dir/c"
  "$orrery" gen llm "$@" --classes -o "$dir/c/w" > /dev/null
  local ranks sys net
  ranks=$(ls "$dir" | grep -c '^w\.[0-9]*\.et$')
  if [ "$name" = example ]; then
    sys=$here/../examples/gpt3_175b_1024/system.json
    net=$here/../examples/gpt3_175b_1024/network.yml
  else
    sys=$work/sys2.json
    net=$dir/net.yml
    network "$net" "$ranks"
  fi
  echo "$name: $ranks ranks, rank files $(du -sh --exclude=c "$dir" | cut -f1), class files $(du -sh "$dir/c" | cut -f1)"
  measure classes "$dir/classes.json" -w "$dir/w" -g "$dir/w.json" -s "$sys" -n "$net"
  measure by-class "$dir/by_class.json" -w "$dir/c/w" -g "$dir/c/w.json" -s "$sys" -n "$net"
  measure full "$dir/full.json" -w "$dir/w" -g "$dir/w.json" -s "$sys" -n "$net" --fast-path off
  echo "  classes vs full: $(/usr/bin/python3 "$here/compare_modes.py" "$dir/classes.json" "$dir/full.json" | tail -1)"
  echo "  class files vs full: $(/usr/bin/python3 "$here/compare_modes.py" "$dir/by_class.json" "$dir/full.json" | tail -1)"
  rm -rf "$dir"
}

for name in $cases; do
  case $name in
    6.7b_tp8_dp8) run_case "$name" --model gpt3-6.7b --tp 8 --dp 8 --global-batch 64 --micro-batch 1 ;;
    175b_tp8_pp4_dp2) run_case "$name" --model gpt3-175b --tp 8 --pp 4 --dp 2 --global-batch 16 --micro-batch 1 ;;
    175b_tp8_pp4_dp8) run_case "$name" --model gpt3-175b --tp 8 --pp 4 --dp 8 --global-batch 64 --micro-batch 1 ;;
    175b_tp8_pp4_dp32) run_case "$name" --model gpt3-175b --tp 8 --pp 4 --dp 32 --global-batch 256 --micro-batch 1 ;;
    example) run_case "$name" --model gpt3-175b --global-batch 256 --micro-batch 1 --dp 8 --tp 8 --pp 16 \
      --recompute --zero 1 ;;
    *) echo "unknown case $name" >&2; exit 2 ;;
  esac
done
