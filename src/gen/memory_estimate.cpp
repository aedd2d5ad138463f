#include "gen/memory_estimate.h"

#include <algorithm>
#include <cmath>

#include "gen/common.h"
#include "gen/inference_generator.h"

namespace orrery::gen {

namespace {

constexpr uint64_t kStatsBytes = 4;  // FlashAttention's log-sum-exp per query and head (fp32)
constexpr uint64_t kLogitBytes = 4;  // logits kept in fp32 for the cross-entropy

}  // namespace

uint64_t layer_activation_bytes(const TransformerModel& model, uint32_t layer,
                                const LayerShard& shard) {
  const uint64_t b = dtype_bytes(model.dtype);
  const uint64_t t = shard.tp;
  const uint64_t h = model.hidden;
  const uint64_t tokens = shard.batch * shard.q_tokens;
  const uint64_t kv_tokens = shard.batch * shard.kv_tokens;
  const uint64_t norm_tokens = shard.sp ? tokens / t : tokens;
  const uint64_t mask = model.dropout ? kMaskBytes : 0;
  // Attention: norm input, QKV input (the sequence shard with SP; Megatron-LM gathers it again),
  // queries, keys and values (keys and values of the whole sequence with context parallelism),
  // attention output (the output projection's input), softmax statistics, dropout mask.
  uint64_t bytes = 2 * norm_tokens * h * b;
  bytes += (tokens * model.q_dim() / t + 2 * kv_tokens * model.kv_dim() / t) * b;
  bytes += tokens * model.q_dim() / t * b + tokens * (model.heads / t) * kStatsBytes;
  bytes += norm_tokens * h * mask;
  // MLP: norm input, first linear input, activation input(s), second linear input, dropout mask.
  bytes += norm_tokens * h * b + norm_tokens * h * mask;
  const uint64_t up_outputs = model.mlp_matrices() - 1ULL;
  if (model.is_moe_layer(layer)) {
    const auto routed = static_cast<uint64_t>(std::ceil(
        static_cast<double>(model.top_k) * static_cast<double>(tokens) * model.capacity_factor));
    const uint64_t f = model.expert_ffn() / t;
    // Router input, dispatched tokens (the experts' input), activation inputs, down input.
    bytes += tokens * h * b + routed * h * b + routed * f * up_outputs * b + routed * f * b;
  } else {
    const uint64_t f = model.ffn / t;
    bytes += norm_tokens * h * b + tokens * f * up_outputs * b + tokens * f * b;
  }
  return bytes;
}

std::vector<StageMemory> estimate_training_memory(const TransformerModel& model,
                                                  const ParallelPlan& plan) {
  const uint64_t b = dtype_bytes(model.dtype);
  const uint64_t optimizer_bytes = model.dtype == DType::kFp32 ? 8 : 12;
  const uint64_t data = static_cast<uint64_t>(plan.dp) * plan.cp;
  const uint64_t expert_data = data / plan.ep;
  LayerShard shard;
  shard.batch = plan.micro_batch;
  shard.q_tokens = plan.seq / plan.cp;
  shard.kv_tokens = plan.seq;
  shard.tp = plan.tp;
  shard.sp = plan.sp;
  shard.ep = plan.ep;
  const uint64_t tokens = shard.batch * shard.q_tokens;
  const uint64_t norm_tokens = plan.sp ? tokens / plan.tp : tokens;
  const std::vector<uint32_t> first = virtual_stage_layers(model, plan);
  const uint32_t last = plan.chunks() - 1;

  std::vector<StageMemory> stages;
  for (uint32_t stage = 0; stage < plan.pp; ++stage) {
    StageMemory entry;
    entry.stage = stage;
    uint64_t dense = 0;
    uint64_t expert = 0;
    // Activations per micro-batch of each chunk, and the largest single layer (recomputation).
    std::vector<uint64_t> chunk_bytes(plan.virtual_stages, 0);
    uint64_t largest_layer = 0;
    for (uint32_t chunk = 0; chunk < plan.virtual_stages; ++chunk) {
      const uint32_t q = chunk * plan.pp + stage;
      if (q == 0) {
        dense += embedding_params(model, plan.tp);
        chunk_bytes[chunk] += tokens * model.hidden * b;  // embedding output
      }
      for (uint32_t layer = first[q]; layer < first[q + 1]; ++layer) {
        const LayerParams params = layer_params(model, layer, plan.tp, plan.ep);
        dense += params.dense;
        expert += params.expert;
        const uint64_t full = layer_activation_bytes(model, layer, shard);
        largest_layer = std::max(largest_layer, full);
        chunk_bytes[chunk] += plan.recompute ? norm_tokens * model.hidden * b : full;
      }
      if (q == last) {
        dense += head_params(model, plan.tp, plan.pp == 1);
        const uint64_t vocab = padded_vocab(model, plan.tp) / plan.tp;
        chunk_bytes[chunk] += 2 * norm_tokens * model.hidden * b + tokens * vocab * kLogitBytes;
      }
    }
    entry.parameters = dense + expert;
    const uint64_t dense_shard = data > 1 ? ceil_div(dense, data) : dense;
    const uint64_t expert_shard = expert_data > 1 ? ceil_div(expert, expert_data) : expert;
    const uint64_t full = dense + expert;
    const uint64_t sharded = dense_shard + expert_shard;
    entry.memory.weights = (plan.zero >= 3 ? sharded : full) * b;
    entry.memory.gradients = (plan.zero >= 2 ? sharded : full) * b;
    entry.memory.optimizer = (plan.zero >= 1 ? sharded : full) * optimizer_bytes;
    // Walk the schedule: activations are held from a chunk's forward to its backward.
    uint64_t held = 0;
    uint64_t peak = 0;
    uint64_t in_flight = 0;
    uint64_t peak_in_flight = 0;
    for (const PipelineStep& step : pipeline_steps(plan, stage)) {
      if (step.forward) {
        held += chunk_bytes[step.chunk];
        ++in_flight;
        if (held > peak) {
          peak = held;
          peak_in_flight = in_flight;
        }
      } else {
        held -= chunk_bytes[step.chunk];
        --in_flight;
      }
    }
    entry.in_flight = peak_in_flight;
    entry.memory.activations = peak + (plan.recompute ? largest_layer : 0);
    stages.push_back(entry);
  }
  return stages;
}

std::vector<StageMemory> estimate_inference_memory(const TransformerModel& model,
                                                   const InferencePlan& plan) {
  const uint64_t b = dtype_bytes(model.dtype);
  const std::vector<uint32_t> first = inference_stage_layers(model, plan.pp);
  uint64_t cached_tokens = 0;  // KV-cache entries per layer at the end
  uint64_t largest_group = 0;  // prefill tokens of the largest micro-batch
  std::vector<uint64_t> group_tokens(plan.micro_batches, 0);
  for (size_t request = 0; request < plan.requests(); ++request) {
    cached_tokens +=
        static_cast<uint64_t>(plan.prompt_lengths[request]) + plan.output_lengths[request];
    group_tokens[request % plan.micro_batches] += plan.prompt_lengths[request];
  }
  for (uint64_t tokens : group_tokens) largest_group = std::max(largest_group, tokens);
  std::vector<StageMemory> stages;
  for (uint32_t stage = 0; stage < plan.pp; ++stage) {
    StageMemory entry;
    entry.stage = stage;
    uint64_t params = stage == 0 ? embedding_params(model, plan.tp) : 0;
    if (stage + 1 == plan.pp) params += head_params(model, plan.tp, plan.pp == 1);
    uint64_t widest = model.hidden;  // the widest activation of a layer, per token
    for (uint32_t layer = first[stage]; layer < first[stage + 1]; ++layer) {
      params += layer_params(model, layer, plan.tp, 1).total();
      const uint64_t f = (model.is_moe_layer(layer) ? model.expert_ffn() : model.ffn) / plan.tp;
      widest = std::max(
          {widest, (model.q_dim() + 2 * model.kv_dim()) / plan.tp, f * model.mlp_matrices()});
    }
    const uint64_t layers = first[stage + 1] - first[stage];
    entry.parameters = params;
    entry.memory.weights = params * b;
    entry.memory.kv_cache = 2 * layers * cached_tokens * model.kv_dim() / plan.tp * b;
    // One layer's input and its widest intermediate for the largest prefill, plus the last logits.
    entry.memory.activations = largest_group * (model.hidden + widest) * b;
    if (stage + 1 == plan.pp) {
      entry.memory.activations += plan.requests() * padded_vocab(model, plan.tp) * kLogitBytes;
    }
    stages.push_back(entry);
  }
  return stages;
}

}  // namespace orrery::gen
