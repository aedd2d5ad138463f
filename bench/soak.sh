#!/bin/sh
# bench/soak.sh [BUILD] [RUNS] [SEED]: the soak of docs/fuzzing.md, RUNS random workloads (default
# 10,000) through BUILD/orrery (default build), then 1,000 monotonicity checks, under nice. Prints
# the soak's summary lines; exits non-zero on any failure (inputs kept under BUILD/soak/run<N>).
set -eu
build=${1:-build}
runs=${2:-10000}
seed=${3:-1}
soak=$build/tests/e2e/orrery_soak
[ -x "$soak" ] || { echo "soak.sh: $soak not built (cmake --build $build --target orrery_soak)" >&2; exit 2; }
start=$(date +%s)
status=0
nice -n 15 "$soak" --orrery "$build/orrery" --runs "$runs" --seed "$seed" --work "$build/soak" \
  --timeout 300 || status=1
nice -n 15 "$soak" --orrery "$build/orrery" --runs 1000 --seed "$seed" --monotone \
  --work "$build/soak-monotone" --timeout 300 || status=1
echo "soak.sh: $(( $(date +%s) - start )) s wall"
exit $status
