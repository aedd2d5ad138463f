#!/usr/bin/env bash
# orrery replay on the public traces of ../shared/data (facebookresearch/param's et_replay inputs):
# ResNet-50 training on 2 GPUs (one rank, schema 1.1.0), the linear model and its Kineto trace, the
# torch.compile trace (schema 1.1.1), and the 8-rank DLRM set with its Kineto traces, replayed as
# 8 processes under mpirun (or rank 0 alone, see below). Recorded on GPUs, replayed
# on this CPU: the figures are coverage (by count, and by the recorded time where a profiler trace
# of the same run exists) and the operators that cannot be replayed, with why; times are the CPU's.
# One measured iteration after the check pass. Skipped without ../shared/data.
# Usage: bench/replay_public.sh [build-dir]
set -euo pipefail
build=${1:-build}
orrery="$build/orrery"
inputs=../shared/data/facebookresearch+param/et_replay/tests/inputs
if [[ ! -d "$inputs" ]]; then
  echo "skipped: no $inputs"
  exit 0
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
summarize() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
job = json.load(open(path))
for rank in job["ranks"]:
    cov_t = rank["coverage_by_time"]
    time = f", {100*cov_t:.1f}% by recorded time" if cov_t is not None else ""
    print(f"{label} rank {rank['rank']}: {rank['ops']} ops in {rank['iteration']}, "
          f"{rank['replayed']} replayed: {100*rank['coverage_by_count']:.1f}% by count{time}; "
          f"iteration {rank['iteration_us']/1000:.1f} ms on the CPU "
          f"(CPU time {rank['iteration_cpu_us']['median']/1000:.1f} ms)")
    if rank["rank"] != 0:
        continue
    for group in rank["skipped"]:
        print(f"    {group['count']} x {group['name']}: {group['reason']}")
PY
}
/usr/bin/time -f "  (%e s wall, %U+%S s CPU)" "$orrery" replay \
  "$inputs/1.1.0-chakra.0.0.4/resnet_2gpu_et.json.gz" --warmup 0 --iterations 1 --threads 1 \
  --json -o "$out/resnet.json" >/dev/null
summarize "ResNet-50 (resnet_2gpu_et)" "$out/resnet.json"
/usr/bin/time -f "  (%e s wall, %U+%S s CPU)" "$orrery" replay "$inputs/linear_et.json.gz" \
  --profile "$inputs/linear_kineto.json.gz" --warmup 0 --iterations 1 --threads 1 --json \
  -o "$out/linear.json" >/dev/null
summarize "linear (linear_et + linear_kineto)" "$out/linear.json"
mkdir -p "$out/pt2" "$out/dlrm"
tar -xzf "$inputs/pt2_et.json.tar.gz" -C "$out/pt2"
"$orrery" replay "$out/pt2/pt2_et.json" --warmup 0 --iterations 1 --json -o "$out/pt2.json" \
  >/dev/null
summarize "PT2 (pt2_et, torch.compile)" "$out/pt2.json"
tar -xzf "$inputs/dlrm_pytorch_et.tar.gz" -C "$out/dlrm"
tar -xzf "$inputs/dlrm_kineto.tar.gz" -C "$out/dlrm"
# The DLRM set runs as 8 processes under mpirun, one per rank, with its all-to-alls and
# all-reduces as real MPI collectives (each rank's replay holds about 0.2 GB: the embedding tables
# that only the skipped fbgemm lookups read are not allocated). REPLAY_PUBLIC_DLRM_RANK0=1 replays
# rank 0 alone instead (its collectives over 8 ranks skipped, named).
if [[ -z "${REPLAY_PUBLIC_DLRM_RANK0:-}" ]]; then
  /usr/bin/time -f "  (%e s wall, %U+%S s CPU, max RSS of one rank %M KB)" mpirun --allow-run-as-root \
    --oversubscribe -np 8 "$orrery" replay --dir "$out/dlrm" --warmup 0 --iterations 1 --threads 1 \
    --json -o "$out/dlrm.json" >/dev/null
  summarize "DLRM (8 ranks, mpirun -np 8)" "$out/dlrm.json"
else
  /usr/bin/time -f "  (%e s wall, %U+%S s CPU, max RSS %M KB)" "$orrery" replay --dir "$out/dlrm" \
    --rank 0 --warmup 0 --iterations 1 --threads 1 --json -o "$out/dlrm.json" >/dev/null
  summarize "DLRM (rank 0 of 8, alone)" "$out/dlrm.json"
fi
