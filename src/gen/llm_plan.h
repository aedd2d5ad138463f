// gen/llm_plan.h: how a training job splits a transformer over ranks.
//
// A ParallelPlan is the data, tensor (with or without sequence parallelism), pipeline (1F1B or
// interleaved), context and expert parallel degrees, the ZeRO stage, activation recomputation and
// the batch. validate_plan() checks it against a model with errors that name the flag to change.
// The layout puts tensor parallelism fastest, then context, then data, then pipeline (Megatron-LM's
// default order): rank = tp + T (cp + C (dp + D pp)), so tensor-parallel groups are consecutive
// ranks and fall on the innermost network dimension. Expert parallelism is carved out of data
// parallelism: an expert group is ep consecutive data-parallel indices.
//
// LlmGroups numbers the communicator groups every collective names (pg_name "1", "2", ...): tensor,
// context, data (data x context: the ranks that hold the same weights), expert, expert-data and the
// embedding group that ties the first and last pipeline stages. Groups of one rank do not exist;
// their collectives are never written.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "gen/transformer_model.h"

namespace orrery::gen {

// The most nodes a generator writes into one rank file (2^24, about 16.8 million): plans beyond it
// (a million micro-batches, a hundred million decode steps) are refused by name rather than by
// running out of memory. Real plans stay far below: gpt3-175b at global batch 1,536 on pp 16 is
// about 50,000 nodes per rank.
inline constexpr uint64_t kMaxNodesPerRank = uint64_t{1} << 24;

enum class PipelineSchedule : uint8_t { k1F1B, kInterleaved };

struct ParallelPlan {
  uint32_t dp = 1;
  uint32_t tp = 1;
  uint32_t pp = 1;
  uint32_t cp = 1;
  uint32_t ep = 1;
  bool sp = false;         // sequence parallelism (with tp)
  uint32_t zero = 0;       // 0 (plain data parallel), 1, 2, 3 (= FSDP full sharding)
  bool recompute = false;  // full activation recomputation, layer by layer
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  uint32_t virtual_stages = 1;  // model chunks per rank (interleaved schedule)
  uint64_t global_batch = 0;    // sequences per iteration
  uint64_t micro_batch = 1;     // sequences per micro-batch
  uint32_t seq = 0;             // sequence length; 0 = the model's
  uint64_t bucket_bytes = 0;    // data-parallel gradient buckets; 0 = one collective per layer

  uint32_t ranks() const { return dp * tp * pp * cp; }
  // Micro-batches each pipeline runs per iteration.
  uint64_t micro_batches() const { return global_batch / (micro_batch * dp); }
  uint32_t chunks() const { return pp * virtual_stages; }  // virtual pipeline stages
};

// Checks `plan` against `model` and fills defaults (seq from the model). Errors name the flag:
// "--tp 16 does not divide the 8 key-value heads of llama2-70b".
Status validate_plan(const TransformerModel& model, ParallelPlan& plan);

// "1f1b" or "interleaved".
Expected<PipelineSchedule> parse_schedule(std::string_view name);
std::string_view schedule_name(PipelineSchedule schedule);

struct RankCoords {
  uint32_t tp = 0;
  uint32_t cp = 0;
  uint32_t dp = 0;
  uint32_t pp = 0;
};
RankCoords rank_coords(const ParallelPlan& plan, uint32_t rank);
uint32_t rank_of(const ParallelPlan& plan, const RankCoords& coords);

// The first layer of every virtual stage (chunks() + 1 entries, the last = layers). Virtual stage
// q = chunk x pp + stage; the first layers % chunks() virtual stages get one layer more.
std::vector<uint32_t> virtual_stage_layers(const TransformerModel& model, const ParallelPlan& plan);

// One step of a pipeline stage's schedule: the forward or backward of a micro-batch on one model
// chunk.
struct PipelineStep {
  bool forward = true;
  uint32_t micro_batch = 0;
  uint32_t chunk = 0;
};
// The order `stage` runs its steps in: 1F1B (warm-up forwards, one forward one backward, cool-down
// backwards) or Megatron-LM's interleaved schedule over virtual_stages chunks.
std::vector<PipelineStep> pipeline_steps(const ParallelPlan& plan, uint32_t stage);

enum class GroupKind : uint8_t { kTensor, kContext, kData, kExpert, kExpertData, kEmbedding };
inline constexpr size_t kGroupKinds = 6;
std::string_view group_kind_name(GroupKind kind);

class LlmGroups {
 public:
  // Numbers every group of `plan` (validated). `tied` adds the embedding groups when pp > 1.
  LlmGroups(const ParallelPlan& plan, bool tied_embeddings, bool moe);

  // The group `rank` belongs to for `kind`: its id (1-based, the pg_name), 0 when the group would
  // hold one rank only.
  uint32_t id(GroupKind kind, uint32_t rank) const;
  // Members of group `id` (ascending ranks), and its kind.
  const std::vector<uint32_t>& members(uint32_t id) const { return members_[id - 1]; }
  GroupKind kind(uint32_t id) const { return kinds_[id - 1]; }
  size_t count() const { return members_.size(); }

 private:
  uint32_t ranks_ = 0;
  std::vector<std::array<uint32_t, kGroupKinds>> by_rank_;
  std::vector<std::vector<uint32_t>> members_;
  std::vector<GroupKind> kinds_;
};

}  // namespace orrery::gen
