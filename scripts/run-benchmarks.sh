#!/usr/bin/env bash
# Runs every Google Benchmark program of a build tree, then the scripted end-to-end benchmarks.
# Usage: scripts/run-benchmarks.sh [build-dir]
set -euo pipefail
build=${1:-build}
shopt -s nullglob
for program in "$build"/bench/bench_*; do
  echo "== $(basename "$program")"
  "$program" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
done
for script in bench/*.sh; do
  echo "== $script"
  "$script" "$build"
done
