#!/usr/bin/env bash
# orrery replay against PyTorch itself, on this machine: for each recorded model (MLP, CNN,
# transformer block; training and inference) the original iteration, run by Debian's torch 1.13
# without any profiler (tests/replay/record_models.py --measure), against the replayed iteration
# (orrery replay, 5 warm-up and N measured iterations), both on one intra-op thread, medians of N
# (wall and process CPU time, user + system); operator coverage; then --emit-chakra and
# orrery run (the simulated iteration against the mean replayed iteration of the run that emitted
# it: --emit-chakra writes the operators' means, whose sum is that mean); then the two-process DDP
# replay over Gloo (as the original ran) and under mpirun, with its all-reduce sizes. The original
# and the replay of a model run back to back, `rounds` times alternately, and the medians are over
# every sample.
# Both run with glibc's malloc fixed to keep large blocks in the heap (MALLOC_MMAP_THRESHOLD_ and
# MALLOC_TRIM_THRESHOLD_ at 1 GiB): by default glibc maps each large temporary afresh or trims the
# heap, depending on the history of the process, and the page faults that follow cost the Python
# process of the CNN's inference 3 to 4 ms per iteration more than the replay (13 against 9.5 ms of
# CPU; 10.2 against 9.5 with the setting). REPLAY_STUDY_DEFAULT_MALLOC=1 leaves malloc as it is.
# With a batch scale K > 1 the models (and DDP) are first recorded afresh with K times their batch
# (tests/replay/record_models.py --batch-scale K, into a scratch directory) and both sides run
# those: what the Python program spends around the operators is about the same per step whatever
# the batch, so the comparison at K = 1 (the tests' traces, steps of 0.4 to 11 ms) and at larger K
# separates it from the operators' own time.
# REPLAY_FLAGS adds options to every replay (REPLAY_FLAGS=--autograd: backward passes through
# libtorch's autograd engine, docs/models/replay.md).
# Usage: bench/replay_study.sh [build-dir] [iterations (10)] [rounds (2)] [batch scale (1)]
set -euo pipefail
# One thread for OpenBLAS too (libtorch multiplies through it when libopenblas0-pthread is
# installed): torch.set_num_threads and --threads do not reach its pthreads, which otherwise run
# (and spin) on every core, so each side used two cores' CPU for one core's wall time.
export OPENBLAS_NUM_THREADS=1
if [[ -z "${REPLAY_STUDY_DEFAULT_MALLOC:-}" ]]; then
  export MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=1073741824
fi
build=${1:-build}
iterations=${2:-10}
rounds=${3:-2}
scale=${4:-1}
orrery="$build/orrery"
read -ra replay_flags <<<"${REPLAY_FLAGS:-}"
python=/usr/bin/python3
recorded=tests/data/pytorch/recorded
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if [[ "$scale" != 1 ]]; then
  recorded="$out/recorded"
  "$python" tests/replay/record_models.py --out "$recorded" --batch-scale "$scale" 2>/dev/null
fi
printf 'topology: [ Ring ]\nnpus_count: [ 2 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n' \
  >"$out/net.yml"
cat >"$out/sys.json" <<'JSON'
{"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
 "preferred-dataset-splits": 4, "all-reduce-implementation": ["ring"],
 "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["ring"],
 "all-to-all-implementation": ["ring"], "collective-optimization": "localBWAware",
 "local-mem-bw": 50}
JSON
malloc_state="thresholds fixed at 1 GiB"
[[ -n "${MALLOC_MMAP_THRESHOLD_:-}" ]] || malloc_state="as glibc sets it"
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start;" \
  "malloc $malloc_state; batch scale $scale; replay flags: ${REPLAY_FLAGS:-none}"
printf "%-18s %11s %11s %8s | %10s %10s %8s | %7s %7s | %11s %8s | %s %s\n" model "orig wall" "replay" "diff" \
  "orig CPU" "replay CPU" "diff" "cov #" "cov t" "simulated" "vs rep" "paired CPU diff, range" \
  "| orig - replay CPU"
echo "(paired: the median over rounds of each round's replay CPU median against that round's original's, and their range)"

for model in mlp_train mlp_infer cnn_train cnn_infer transformer_train transformer_infer; do
  : >"$out/orig.samples"
  : >"$out/replay.samples"
  for round in $(seq "$rounds"); do
    "$python" tests/replay/record_models.py --measure "$model" --iterations "$iterations" \
      --batch-scale "$scale" >"$out/orig.$round.json"
    "$orrery" replay "${replay_flags[@]}" "$recorded/$model/${model}_et.json.gz" \
      --profile "$recorded/$model/${model}_trace.json.gz" --threads 1 --warmup 5 \
      --iterations "$iterations" --emit-chakra "$out/$model" --json >"$out/replay.$round.json"
  done
  "$orrery" run -q -w "$out/$model" -s "$out/sys.json" -n "$out/net.yml" --uniform \
    --output "$out/$model.run.json" >/dev/null
  "$python" - "$out" "$model" "$rounds" <<'PY'
import json, statistics, sys
out, model, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
orig_wall, orig_cpu, rep_wall, rep_cpu, paired = [], [], [], [], []
for r in range(1, rounds + 1):
    o = json.load(open(f"{out}/orig.{r}.json"))
    orig_wall += o["samples_us"]; orig_cpu += o["cpu_samples_us"]
    p = json.load(open(f"{out}/replay.{r}.json"))
    rep_wall.append(p["iteration_wall_us"]["median"]); rep_cpu.append(p["iteration_cpu_us"]["median"])
    # A round's two sides ran back to back: their ratio cancels the machine's slower drift.
    paired.append(rep_cpu[-1] / statistics.median(o["cpu_samples_us"]) - 1)
# The replay JSON holds medians per run; every run has the same number of iterations, so the
# median of run medians stands for the median of samples.
ow, oc = statistics.median(orig_wall), statistics.median(orig_cpu)
rw, rc = statistics.median(rep_wall), statistics.median(rep_cpu)
sim = json.load(open(f"{out}/{model}.run.json"))["summary"]["simulated_ns"] / 1000.0
last = json.load(open(f"{out}/replay.{rounds}.json"))
cov_t = last["coverage_by_time"]
print(f"{model:<18} {ow/1000:9.2f}ms {rw/1000:9.2f}ms {100*(rw/ow-1):+7.1f}% | "
      f"{oc/1000:8.2f}ms {rc/1000:8.2f}ms {100*(rc/oc-1):+7.1f}% | "
      f"{100*last['coverage_by_count']:6.1f}% {100*cov_t if cov_t is not None else float('nan'):6.1f}% | "
      f"{sim/1000:9.2f}ms {100*(sim/last['iteration_wall_us']['mean']-1):+7.1f}% | "
      f"{100*statistics.median(paired):+7.1f}% {100*min(paired):+6.1f}..{100*max(paired):+.1f}% | "
      f"{oc - rc:7.0f}us")
PY
done

echo
echo "DDP over two processes (the original over Gloo; the replay over Gloo, as the original, and"
echo "over Open MPI, mpirun -np 2), alternately, rounds x iterations"
: >"$out/ddp.orig.samples"
for round in $(seq "$rounds"); do
  "$python" tests/replay/record_models.py --measure ddp --iterations "$iterations" \
    --batch-scale "$scale" >"$out/ddp.orig.$round.json"
  "$orrery" replay "${replay_flags[@]}" --dir "$recorded/ddp" --backend gloo --threads 1 --warmup 5 \
    --iterations "$iterations" --emit-chakra "$out/ddp" --json >"$out/ddp.gloo.$round.json"
  mpirun --allow-run-as-root --oversubscribe -np 2 "$orrery" replay "${replay_flags[@]}" --dir "$recorded/ddp" \
    --threads 1 --warmup 5 --iterations "$iterations" --json >"$out/ddp.mpi.$round.json"
done
cp "$out/ddp.gloo.$rounds.json" "$out/ddp.json"
"$python" - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
wall, cpu = [], []
for r in range(1, rounds + 1):
    o = json.load(open(f"{out}/ddp.orig.{r}.json"))
    wall += o["samples_us"]; cpu += o["cpu_samples_us"]
ow, oc = statistics.median(wall), statistics.median(cpu)
print(f"  original rank 0     {ow/1000:9.2f} ms wall, {oc/1000:9.2f} ms CPU")
for backend in ("gloo", "mpi"):
    jobs = [json.load(open(f"{out}/ddp.{backend}.{r}.json")) for r in range(1, rounds + 1)]
    for rank in jobs[-1]["ranks"]:
        at = rank["rank"]
        rw = statistics.median(j["ranks"][at]["iteration_wall_us"]["median"] for j in jobs)
        rc = statistics.median(j["ranks"][at]["iteration_cpu_us"]["median"] for j in jobs)
        comms = [op for op in rank["operators"] if op["kind"] == "communication"]
        sizes = ", ".join(f"{op['bytes']:,} B in {op['measured_us']/1000:.2f} ms" for op in comms)
        print(f"  {backend:<4} replay rank {at}  {rw/1000:9.2f} ms wall ({100*(rw/ow-1):+.1f}%), "
              f"{rc/1000:9.2f} ms CPU ({100*(rc/oc-1):+.1f}%); coverage "
              f"{100*rank['coverage_by_count']:.1f}% by count; all-reduces: {sizes}; compute "
              f"waited {rank['comm_wait_us']['median']/1000:.2f} ms")
PY
# The simulated network is what the replay's Gloo all-reduces achieved here (bytes over their mean
# time: on two ranks each sends its whole buffer once), not a datacenter link: the comparison is
# of the step's structure, compute and exposed communication, on this machine.
gbps=$("$python" -c "
import json, sys
ops = [op for r in json.load(open(sys.argv[1]))['ranks'] for op in r['operators']
       if op['kind'] == 'communication']
print(f\"{sum(op['bytes'] for op in ops) / (sum(op['measured_mean_us'] for op in ops) * 1e3):.3f}\")
" "$out/ddp.json")
printf 'topology: [ Ring ]\nnpus_count: [ 2 ]\nbandwidth: [ %s ]\nlatency: [ 500.0 ]\n' "$gbps" \
  >"$out/net_ddp.yml"
"$orrery" run -q -w "$out/ddp" -s "$out/sys.json" -n "$out/net_ddp.yml" \
  --output "$out/ddp.run.json" >/dev/null
# replay-only: every node, the all-reduces included, takes its measured time.
"$python" -c "
import json, sys
system = json.load(open(sys.argv[1])); system['replay-only'] = True
json.dump(system, open(sys.argv[2], 'w'))
" "$out/sys.json" "$out/sys_replay.json"
"$orrery" run -q -w "$out/ddp" -s "$out/sys_replay.json" -n "$out/net_ddp.yml" \
  --output "$out/ddp.replay_only.json" >/dev/null
"$python" - "$out" "$gbps" <<'PY'
import json, sys
out, gbps = sys.argv[1], sys.argv[2]
rep = max(r["iteration_wall_us"]["mean"] for r in json.load(open(f"{out}/ddp.json"))["ranks"]) / 1000
for name, what in (("ddp.replay_only", "replay-only (measured all-reduces)"),
                   ("ddp.run", f"analytical ring at the measured {gbps} GB/s")):
    sim = json.load(open(f"{out}/{name}.json"))["summary"]["simulated_ns"] / 1e6
    print(f"  simulated, {what}: {sim:.2f} ms against the replayed mean {rep:.2f} ms "
          f"({100*(sim/rep-1):+.1f}%)")
PY
echo "machine: load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
