#!/usr/bin/env bash
# bench/synth_corpus.sh ORRERY OUT: the corpus of the `orrery synth` study (docs/models/synth.md).
#
# OUT/train and OUT/heldout, split by model family so that the held-out figures measure
# generalization:
#   train    transformer training iterations of the Llama 2, Llama 3 and Mixtral families (1-4
#            layers, ten parallel plans), Llama 2 inference, DLRM (MLPerf model), every
#            microbenchmark, and the real Chakra traces of ../shared/data (symbolic tensor graph
#            dp2tp2pp2, the text converter's ResNet-50 / MLP / all-reduce, ASTRA-sim's custom ring
#            all-reduce, Chakra's converted PyTorch ResNet trace);
#   heldout  GPT-3 family training iterations (6.7B and 175B shapes), DLRM (Kaggle model), and the
#            symbolic tensor graph's FSDP trace.
# Plans that a model does not allow (more stages than layers, ...) are skipped. Every trace set
# has 8 ranks except the real ones.
set -euo pipefail
ORRERY=${1:?usage: synth_corpus.sh ORRERY OUT}
OUT=${2:?usage: synth_corpus.sh ORRERY OUT}
SHARED=${SHARED:-$(cd "$(dirname "$0")/.." && pwd)/../shared/data}
rm -rf "$OUT"
mkdir -p "$OUT/train" "$OUT/heldout" "$OUT/models"

plans=(
  "--dp 8"
  "--dp 4 --tp 2"
  "--dp 2 --tp 4"
  "--tp 8"
  "--dp 2 --tp 2 --pp 2"
  "--dp 4 --pp 2"
  "--tp 2 --pp 4"
  "--dp 2 --tp 2 --pp 2 --sp"
  "--dp 8 --zero 3"
  "--dp 4 --tp 2 --recompute"
)

llm() {  # llm SPLIT BASE
  local split=$1 base=$2 layers plan idx=0
  for layers in 1 2 4; do
    echo "{\"base\": \"$base\", \"layers\": $layers}" > "$OUT/models/$base-$layers.json"
    for plan in "${plans[@]}"; do
      for batch in 8 16; do
        idx=$((idx + 1))
        # shellcheck disable=SC2086
        "$ORRERY" gen llm --model "$OUT/models/$base-$layers.json" --global-batch $batch $plan \
          -o "$OUT/$split/llm-$base/$idx/w" > /dev/null 2>&1 || rm -rf "$OUT/$split/llm-$base/$idx"
      done
    done
  done
  if [ "$base" = mixtral-8x7b ]; then
    for layers in 1 2; do
      "$ORRERY" gen llm --model "$OUT/models/$base-$layers.json" --global-batch 8 --dp 8 --ep 8 \
        -o "$OUT/$split/llm-$base/ep$layers/w" > /dev/null
    done
  fi
}

for base in llama2-7b llama2-70b llama3-405b mixtral-8x7b; do llm train $base; done
for base in gpt3-6.7b gpt3-175b; do llm heldout $base; done

# Inference (Llama 2 7B, 1-2 layers).
for layers in 1 2; do
  for tp in 2 4 8; do
    for prompts in 128,256 512,512,1024; do
      "$ORRERY" gen inference --model "$OUT/models/llama2-7b-$layers.json" --tp $tp \
        --prompt-lengths $prompts --output-lengths 4 \
        -o "$OUT/train/infer/$layers-$tp-${prompts//,/_}/s" > /dev/null
    done
  done
done

dlrm() {  # dlrm SPLIT MODEL
  local sharding batch
  for sharding in table row column; do
    for batch in 2048 16384; do
      "$ORRERY" gen dlrm --model "$2" --ranks 8 --global-batch $batch --sharding $sharding \
        -o "$OUT/$1/dlrm-$2/$sharding-$batch/d" > /dev/null 2>&1 || true
    done
  done
}
dlrm train dlrm-mlperf
dlrm heldout dlrm-kaggle

for collective in all-reduce all-gather reduce-scatter all-to-all broadcast reduce gather scatter; do
  for size in 64KiB 1MiB 16MiB; do
    for compute in 0 50; do
      "$ORRERY" gen microbench --collective $collective --size $size --ranks 8 --compute-us $compute \
        -o "$OUT/train/micro/$collective-$size-$compute/m" > /dev/null
    done
  done
done
for size in 64KiB 4MiB; do
  "$ORRERY" gen microbench --collective send-recv --size $size --ranks 8 \
    -o "$OUT/train/micro/send-recv-$size/m" > /dev/null
done

# Real traces (skipped visibly when ../shared/data is absent).
if [ -d "$SHARED" ]; then
  copy() {  # copy SPLIT NAME FILES...
    local split=$1 name=$2
    shift 2
    mkdir -p "$OUT/$split/real/$name"
    cp "$@" "$OUT/$split/real/$name/"
  }
  stg=$SHARED/astra-sim+symbolic_tensor_graph/generated
  copy train stg-dp2tp2pp2 "$stg"/out_dp2tp2pp2/workload.*
  copy heldout stg-fsdp4 "$stg"/out_fsdp4/workload.*
  legacy=$SHARED/astra-sim+astra-sim/legacy_text_workloads/generated_by_chakra_text_converter
  for name in Resnet50_DataParallel MLP_ModelParallel microAllReduce; do
    copy train "legacy-$name" "$legacy/$name".*.et
  done
  copy train custom-ring "$SHARED"/astra-sim+astra-sim/examples/system/custom_collectives/custom_ring_allreduce_8npus_1MB/custom_allreduce.*.et
  copy train chakra-feeder "$SHARED"/mlcommons+chakra/tests/data/feeder_tests_chakra.0.et
else
  echo "synth_corpus: $SHARED not found: the corpus has no real traces" >&2
fi

for split in train heldout; do
  echo "$split: $(find "$OUT/$split" -name '*.0.et' | wc -l) trace sets, $(find "$OUT/$split" -name '*.et' | wc -l) rank files"
done
