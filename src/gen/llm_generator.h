// gen/llm_generator.h: Chakra traces of one training iteration of a decoder-only transformer.
//
// LlmGenerator turns a TransformerModel and a ParallelPlan into one RankProgram per rank: every
// micro-batch's forward and backward on the rank's pipeline stage in the schedule's order (1F1B or
// interleaved), the collectives each parallelism needs (tensor: all-reduce, or all-gather and
// reduce-scatter with sequence parallelism; context: all-gather of keys and values, reduce-scatter
// of their gradients; expert: all-to-all dispatch and combine; data: gradient all-reduce, or
// reduce-scatter and parameter all-gather under ZeRO / FSDP), pipeline sends and receives tagged by
// (micro-batch, direction, boundary), recomputation, and the optimizer step.
// docs/models/workloads.md states every rule and the closed forms the tests check.
//
// The generator is immutable after create(); build() may run concurrently for different ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "gen/llm_plan.h"
#include "gen/rank_program.h"
#include "gen/transformer_model.h"

namespace orrery::gen {

class LlmGenerator {
 public:
  // Validates the plan against the model (errors name the flag) and numbers the groups.
  static Expected<LlmGenerator> create(TransformerModel model, ParallelPlan plan);

  const TransformerModel& model() const { return model_; }
  const ParallelPlan& plan() const { return plan_; }
  const LlmGroups& groups() const { return groups_; }
  uint32_t ranks() const { return plan_.ranks(); }

  // The program of one rank. O(nodes of the rank); thread-safe.
  RankProgram build(uint32_t rank) const;
  // How `rank`'s program is its stage's first rank's (tensor, context and data coordinates 0):
  // the same nodes, with the peers of the other stages and the groups of every kind that rank
  // holds renamed to `rank`'s. A program depends on a rank's stage, its groups and its peers
  // alone. O(pp + group kinds).
  RankRenaming renaming(uint32_t rank) const;

 private:
  LlmGenerator(TransformerModel model, ParallelPlan plan)
      : model_(std::move(model)),
        plan_(plan),
        groups_(plan_, model_.tied_embeddings, model_.is_moe()) {}

  TransformerModel model_;
  ParallelPlan plan_;
  LlmGroups groups_;
};

// What a generator wrote.
// Writes <prefix>.<rank>.et for every rank and the communicator groups to <prefix>.json.
Expected<GeneratedTraces> write_llm_traces(const LlmGenerator& generator, const std::string& prefix,
                                           const RankFileOptions& options);
// The same trace set in memory, named `name`.
Expected<BuiltTraces> build_llm_traces(const LlmGenerator& generator, const std::string& name,
                                       const RankFileOptions& options);

}  // namespace orrery::gen
