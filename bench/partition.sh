#!/usr/bin/env bash
# RePurpose against the contiguous split, magnitude pruning and a random placement: the digit MLP
# (64-512-512-10) and CNN of tests/data/partition on K = 2, 4 and 8 workers, each method at the
# least traffic within 1 accuracy point of the unpartitioned model (plus the `refit` ablation:
# the contiguous placement with RePurpose's refit), and the simulated latency of a batch of 64
# inferences on a switch (25 GB/s, 2 us per hop) with a 10 TFLOP/s, 100 GB/s roofline per worker.
# Writes <out>/<model>_k<K>.json and .svg and prints one table. Takes tens of minutes.
# Usage: bench/partition.sh [build-dir] [out-dir]
set -euo pipefail
build=${1:-build}
out=${2:-$(mktemp -d)}
data=tests/data/partition
mkdir -p "$out"
cat > "$out/system.json" <<'JSON'
{"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
 "preferred-dataset-splits": 1, "all-reduce-implementation": ["ring"],
 "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["ring"],
 "all-to-all-implementation": ["ring"], "collective-optimization": "baseline",
 "local-mem-bw": 100, "roofline-enabled": 1, "peak-perf": 10}
JSON
for model in digits_mlp.pt digits_cnn.pt; do
  for k in 2 4 8; do
    printf 'topology: [ Switch ]\nnpus_count: [ %d ]\nbandwidth: [ 25.0 ]\nlatency: [ 2000.0 ]\n' \
      "$k" > "$out/switch_$k.yml"
    name="${model%.pt}_k$k"
    /usr/bin/time -f "$name: %e s wall, %U s user, %S s sys, %M KiB peak RSS" \
      "$build/orrery" partition --model "$data/$model" --workers "$k" \
      --calibration "$data/calibration.csv" --data "$data/test.csv" \
      --methods repurpose,contiguous,random,magnitude,refit --chart "$out/$name.svg" \
      --system "$out/system.json" --network "$out/switch_$k.yml" --batch 64 --json \
      > "$out/$name.json"
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
print(f"{'model':<12}{'K':>3} {'method':<11}{'accuracy':>9}{'traffic B':>11}{'vs contig':>10}"
      f"{'max MFLOP':>10}{'latency us':>11}")
for model in ("digits_mlp", "digits_cnn"):
    for k in (2, 4, 8):
        d = json.load(open(os.path.join(out, f"{model}_k{k}.json")))
        contiguous = d["methods"]["contiguous"]["traffic_bytes"]
        for name in ("repurpose", "refit", "magnitude", "random", "contiguous"):
            m = d["methods"][name]
            t = m["traffic_bytes"]
            print(f"{model:<12}{k:>3} {name:<11}{100 * m['accuracy']:>8.2f}%{t:>11,}"
                  f"{contiguous / t:>9.1f}x{max(m['flops_per_worker']) / 1e6:>10.3f}"
                  f"{m['latency_ns'] / 1e3:>11.1f}")
        print(f"{'':<12}{'':>3} unpartitioned {100 * d['unpartitioned_accuracy']:.2f}%")
PY
echo "results in $out"
