// gen/memory_estimate.h: how much accelerator memory a rank needs, before anything runs.
//
// Training (per pipeline stage; every rank of a stage holds the same): weights in the model's data
// type, gradients in the same type, Adam's states (fp32 master weights and two moments: 12 bytes
// per parameter below fp32, 8 bytes at fp32), divided by the data-parallel group as the ZeRO stage
// says (1: optimizer states, 2: and gradients, 3: and weights); activations of the micro-batches in
// flight at the peak of the stage's schedule (1F1B: up to pp - stage; interleaved: as its warm-up
// says), per layer what backward needs (Korthikanti et al., MLSys'23, with FlashAttention: 34 s b h
// bytes per GPT layer without parallelism; 10 + 24/t with tensor parallelism; 34/t with sequence
// parallelism; with full recomputation only the layer input, plus one layer being recomputed).
// Inference: weights and the KV cache of every request at its final length, plus the largest
// activations of one layer. docs/models/workloads.md gives the formulas.
#pragma once

#include <cstdint>
#include <vector>

#include "gen/llm_plan.h"
#include "gen/transformer_model.h"

namespace orrery::gen {

struct MemoryBreakdown {
  uint64_t weights = 0;
  uint64_t gradients = 0;
  uint64_t optimizer = 0;
  uint64_t activations = 0;
  uint64_t kv_cache = 0;
  uint64_t total() const { return weights + gradients + optimizer + activations + kv_cache; }
};

struct StageMemory {
  uint32_t stage = 0;
  uint64_t parameters = 0;  // held by one rank of the stage before ZeRO sharding
  uint64_t in_flight = 0;   // micro-batches whose activations are held at the peak
  MemoryBreakdown memory;
};

// Activation bytes one layer keeps for backward, per micro-batch, on one rank (no recomputation).
uint64_t layer_activation_bytes(const TransformerModel& model, uint32_t layer,
                                const LayerShard& shard);

// One entry per pipeline stage. `plan` must be validated.
std::vector<StageMemory> estimate_training_memory(const TransformerModel& model,
                                                  const ParallelPlan& plan);

struct InferencePlan;  // gen/inference_generator.h
// One entry per pipeline stage.
std::vector<StageMemory> estimate_inference_memory(const TransformerModel& model,
                                                   const InferencePlan& plan);

}  // namespace orrery::gen
