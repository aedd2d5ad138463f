#!/usr/bin/env bash
# bench/synth_study.sh [BUILD] [WORK]: the `orrery synth` study behind docs/models/synth.md.
#
# Builds the corpus (bench/synth_corpus.sh), trains LayerDAG on its training split, samples 1,000
# trace sets, and evaluates them and as many baseline samples against the held-out split; then the
# training split itself against the held-out split, as the reference a perfect generator would
# reach. Wall time, CPU time (user + sys) and peak memory of every step come from /usr/bin/time.
# Long: run under nice on a shared machine. STEPS, SAMPLES and SEED override the defaults;
# RESUME=1 keeps WORK's corpus and model.pt (and its train.time) and starts at sampling.
set -euo pipefail
BUILD=${1:-build}
WORK=${2:-/tmp/orrery-synth-study}
STEPS=${STEPS:-2000}
SAMPLES=${SAMPLES:-1000}
SEED=${SEED:-1}
ORRERY=$(cd "$BUILD" && pwd)/orrery
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/measure.sh"  # OpenBLAS for libtorch; measure NAME COMMAND...
mkdir -p "$WORK"
cd "$WORK"


if [ -n "${RESUME:-}" ] && [ -f model.pt ] && [ -f train.time ]; then
  grep '^train ' costs.txt > costs.new || true
  mv costs.new costs.txt
else
  rm -f costs.txt
  "$HERE/synth_corpus.sh" "$ORRERY" corpus
  measure train nice -n 10 "$ORRERY" synth train --corpus corpus/train -o model.pt --steps "$STEPS" \
    --eval-every 100 --seed "$SEED" --threads 1
fi
grep -E "^(corpus|LayerDAG|labels|layer-size|attributes|edges|wrote)" train.log
rm -rf samples
measure sample nice -n 10 "$ORRERY" synth sample --model model.pt -n "$SAMPLES" -o samples \
  --seed "$SEED" --threads 1
cat sample.log
measure eval nice -n 10 "$ORRERY" synth eval --model model.pt --real corpus/heldout \
  --synthetic samples --seed "$SEED" --threads 1 --json
sed -n '/^{/,$p' eval.log > eval.json
rm -f reference.json
if [ -z "${NO_REFERENCE:-}" ]; then  # the training split as a generator: the floor of every distance
  nice -n 10 "$ORRERY" synth eval --model model.pt --real corpus/heldout --synthetic corpus/train \
    --seed "$SEED" --threads 1 --baseline-samples 1 --json | sed -n '/^{/,$p' > reference.json
fi
/usr/bin/python3 - <<'EOF'
import json
import os
e = json.load(open("eval.json"))
r = json.load(open("reference.json")) if os.path.exists("reference.json") else None
ref = lambda kind, name: f"{r[kind][name]['model']:>10.4f}" if r else f"{'-':>10}"
print(f"validity: model {100 * e['validity']:.1f}% of {e['synthetic_sets']}, baseline "
      f"{100 * e['baseline_validity']:.1f}% of {e['baseline_samples']}; held-out graphs {e['real_graphs']}")
print(f"{'statistic':<16} {'LayerDAG':>10} {'baseline':>10} {'train set':>10}")
wins = 0
for name, v in sorted(e["mmd"].items()):
    wins += v["model"] < v["baseline"]
    print(f"{name:<16} {v['model']:>10.4f} {v['baseline']:>10.4f} {ref('mmd', name)}")
print(f"LayerDAG closer than the baseline on {wins} of {len(e['mmd'])} MMD statistics")
for name, v in sorted(e["wasserstein"].items()):
    m = e["mean"][name]
    print(f"W1 {name:<13} {v['model']:>10.4f} {v['baseline']:>10.4f} {ref('wasserstein', name)}"
          f"   means: held-out {m['real']:.3f}, LayerDAG {m['model']:.3f}, baseline {m['baseline']:.3f}")
for side, label in (("model", "LayerDAG"), ("baseline", "baseline")):
    s = e["surrogate"][side]
    print(f"surrogate trained on {label:<9} Pearson {s['pearson']:.3f}, Spearman {s['spearman']:.3f}, MAE {s['mae']:.3f}")
if r:
    s = r["surrogate"]["model"]
    print(f"surrogate trained on train set  Pearson {s['pearson']:.3f}, Spearman {s['spearman']:.3f}, MAE {s['mae']:.3f}")
EOF
cat costs.txt
