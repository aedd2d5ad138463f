#!/usr/bin/env bash
# Where the replay's gap to PyTorch lies, on a training step (docs/models/replay.md): the same step
# timed several ways, in rounds that alternate between them, one thread each, subnormals flushed,
# OpenBLAS on one thread, glibc's malloc thresholds fixed (as bench/replay_study.sh):
#   pytorch   tests/replay/record_models.py --measure MODEL (the original: Python, nn modules,
#             autograd, torch.optim.SGD)
#   c++       bench/replay_gap/mlp_step.cpp or transformer_step.cpp: the same step in C++ with
#             libtorch's modules, autograd and SGD (built here against Debian's libtorch-dev in a
#             scratch directory)
#   torch.ops bench/replay_gap/ops_step.py (the MLP only): the step's operators issued one by one
#             from Python, as et_replay replays a trace
#   replay    orrery replay of the recorded trace
# Prints each round and the medians of process CPU time per step, in microseconds.
# With a batch scale K > 1 every way runs K times the batch: the trace is recorded afresh
# (record_models.py --batch-scale K) and torch.ops is left out.
# Usage: bench/replay_gap.sh [build-dir] [rounds (5)] [steps per round (100)]
#                            [model: mlp_train (default) or transformer_train] [batch scale (1)]
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
steps=${3:-100}
model=${4:-mlp_train}
scale=${5:-1}
case "$model" in
  mlp_train) cxx_step=mlp_step ;;
  transformer_train) cxx_step=transformer_step ;;
  *) echo "replay_gap.sh: model is mlp_train or transformer_train, not $model" >&2; exit 2 ;;
esac
export OPENBLAS_NUM_THREADS=1 MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=1073741824
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cmake -S "$here/replay_gap" -B "$scratch/b" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$scratch/b" >/dev/null
trace=tests/data/pytorch/recorded/$model/${model}_et.json.gz
if [[ "$scale" != 1 ]]; then
  "$python" tests/replay/record_models.py --out "$scratch/recorded" --batch-scale "$scale" \
    "$model" 2>/dev/null
  trace=$scratch/recorded/$model/${model}_et.json.gz
fi
: >"$scratch/rows"
echo "$model, batch x$scale; machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
printf "%-6s %10s %10s %10s %10s\n" round pytorch "c++" torch.ops replay
for round in $(seq "$rounds"); do
  pytorch=$("$python" tests/replay/record_models.py --measure "$model" --iterations "$steps" \
    --batch-scale "$scale" |
    "$python" -c "import json, sys; print(json.load(sys.stdin)['cpu_median_us'])")
  cxx=$("$scratch/b/$cxx_step" "$steps" "$scale")
  ops=nan
  [[ "$model" != mlp_train || "$scale" != 1 ]] || ops=$("$python" "$here/replay_gap/ops_step.py" "$steps")
  replay=$("$build/orrery" replay "$trace" --threads 1 --warmup 5 --iterations "$steps" --json -q |
    "$python" -c "import json, sys; print(json.load(sys.stdin)['iteration_cpu_us']['median'])")
  echo "$pytorch $cxx $ops $replay" >>"$scratch/rows"
  printf "%-6s %10.0f %10.0f %10.0f %10.0f\n" "$round" "$pytorch" "$cxx" "$ops" "$replay"
done
"$python" - "$scratch/rows" <<'PY'
import statistics, sys
rows = [list(map(float, line.split())) for line in open(sys.argv[1])]
med = [statistics.median(col) for col in zip(*rows)]
print(f"{'median':<6} {med[0]:10.0f} {med[1]:10.0f} {med[2]:10.0f} {med[3]:10.0f}")
print(f"against pytorch: c++ {100*(med[1]/med[0]-1):+.1f}%, torch.ops {100*(med[2]/med[0]-1):+.1f}%, "
      f"replay {100*(med[3]/med[0]-1):+.1f}%")
PY
