#!/usr/bin/env bash
# bench/synth_tile.sh [BUILD] [WORK] [DATA]: `orrery synth` on LayerDAG's own benchmark, the TPU
# Tile kernel graphs (docs/models/synth.md, "TPU Tile").
#
# DATA is a folder with LayerDAG's val.pth and test.pth (data_files/tpu_tile_processed of
# github.com/Graph-COM/LayerDAG; default: the mirror fetched under /work/.mirror). Its train.pth is
# not used: the public snapshot lacks it, so the model trains on val (630 graphs) and is tested on
# test (631 graphs), which no step has seen. Converts both with scripts/tpu_tile_to_json.py
# (Debian's /usr/bin/python3 and python3-torch), trains LayerDAG, samples one graph per training
# label (LayerDAG's protocol), and evaluates against test.json with the real training graphs as
# the reference surrogate. Wall time, CPU time and peak memory of every step come from
# /usr/bin/time. STEPS and SEED override the defaults.
set -euo pipefail
BUILD=${1:-build}
WORK=${2:-/tmp/orrery-synth-tile}
DATA=${3:-}
STEPS=${STEPS:-2000}
SEED=${SEED:-1}
ORRERY=$(cd "$BUILD" && pwd)/orrery
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/measure.sh"  # OpenBLAS for libtorch; measure NAME COMMAND...
mkdir -p "$WORK"
cd "$WORK"

if [ -z "$DATA" ]; then
  MIRROR=$(ls -d /work/.mirror/Graph-COM+LayerDAG/* 2>/dev/null | head -1 || true)
  [ -n "$MIRROR" ] || { echo "give DATA: a folder with LayerDAG's val.pth and test.pth" >&2; exit 1; }
  DATA=$WORK/pth
  mkdir -p "$DATA"
  for split in val test; do
    git -C "$MIRROR" show "HEAD:data_files/tpu_tile_processed/$split.pth" > "$DATA/$split.pth"
  done
fi
for split in val test; do
  /usr/bin/python3 "$HERE/../scripts/tpu_tile_to_json.py" "$DATA/$split.pth" "$split.json" \
    --categories 47
done


rm -f costs.txt
measure train nice -n 10 "$ORRERY" synth train --graphs val.json -o tile.pt --steps "$STEPS" \
  --seed "$SEED" --threads 1
grep -E "^(graph set|layer-size|attributes|edges|wrote)" train.log
measure sample nice -n 10 "$ORRERY" synth sample --model tile.pt -o samples.json --seed "$SEED" \
  --threads 1
cat sample.log
measure eval nice -n 10 "$ORRERY" synth eval --model tile.pt --real test.json \
  --synthetic samples.json --reference val.json --seed "$SEED" --threads 1 --json
sed -n '/^{/,$p' eval.log > eval.json
/usr/bin/python3 - eval.json <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
print(f"validity {report['validity']:.3f} of {report['synthetic_graphs']} graphs "
      f"(baseline {report['baseline_validity']:.3f})")
wins = 0
for name, pair in sorted(report["mmd"].items()):
    win = pair["model"] < pair["baseline"]
    wins += win
    print(f"  MMD {name:<12} model {pair['model']:.4f}  baseline {pair['baseline']:.4f}"
          f"{'  *' if win else ''}")
print(f"  model closer on {wins} of {len(report['mmd'])} statistics")
for side in ("model", "baseline", "real_training"):
    c = report["surrogate"].get(side)
    if c:
        print(f"surrogate trained on {side:<13} Pearson {c['pearson']:.3f}  "
              f"Spearman {c['spearman']:.3f}  MAE {c['mae']:.3f}")
PY
