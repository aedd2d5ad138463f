// gen/inference_generator.h: Chakra traces of serving a batch of requests with a KV cache.
//
// A batch of requests, each with a prompt length and a number of tokens to generate, runs as one
// prefill step (every prompt token, attention over the prompt, the KV cache written) and then
// decode steps of one token per request still generating (attention over the request's cache,
// weights and cache read once per step: memory-bound, as on real hardware). The model is split over
// tensor- and pipeline-parallel ranks (rank = tp + T pp); tensor parallelism all-reduces after the
// attention and MLP of every layer and all-gathers the last logits for sampling; pipeline stages
// pass the hidden states on, and the last stage sends the sampled tokens back to the first for the
// next step. With several micro-batches the requests are dealt round-robin into groups that follow
// each other through the pipeline, so stages overlap. docs/models/workloads.md has the rules.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "gen/llm_generator.h"
#include "gen/rank_program.h"
#include "gen/transformer_model.h"

namespace orrery::gen {

struct InferencePlan {
  uint32_t tp = 1;
  uint32_t pp = 1;
  std::vector<uint32_t> prompt_lengths;  // one per request
  std::vector<uint32_t> output_lengths;  // tokens generated per request (one value: every request)
  uint32_t micro_batches = 1;            // request groups pipelined through the stages

  uint32_t ranks() const { return tp * pp; }
  size_t requests() const { return prompt_lengths.size(); }
  // Prefill plus the decode steps of the longest generation.
  uint32_t steps() const;
};

// Checks the plan (errors name the flag) and expands a single output length to every request.
Status validate_inference_plan(const TransformerModel& model, InferencePlan& plan);

// The first layer of every pipeline stage (pp + 1 entries).
std::vector<uint32_t> inference_stage_layers(const TransformerModel& model, uint32_t pp);

class InferenceGenerator {
 public:
  static Expected<InferenceGenerator> create(TransformerModel model, InferencePlan plan);

  const TransformerModel& model() const { return model_; }
  const InferencePlan& plan() const { return plan_; }
  uint32_t ranks() const { return plan_.ranks(); }
  // Tensor-parallel groups, one per stage (empty with tp 1); group i has pg_name i + 1.
  const std::vector<std::vector<uint32_t>>& groups() const { return groups_; }

  // The program of one rank; thread-safe.
  RankProgram build(uint32_t rank) const;
  // How `rank`'s program is its stage's first rank's: the same nodes, with the peers of every
  // stage renamed to those of `rank`'s tensor-parallel index (a stage's ranks share its group).
  RankRenaming renaming(uint32_t rank) const;

 private:
  InferenceGenerator(TransformerModel model, InferencePlan plan);

  TransformerModel model_;
  InferencePlan plan_;
  std::vector<std::vector<uint32_t>> groups_;
};

// Writes <prefix>.<rank>.et for every rank and the communicator groups to <prefix>.json.
Expected<GeneratedTraces> write_inference_traces(const InferenceGenerator& generator,
                                                 const std::string& prefix,
                                                 const RankFileOptions& options);
// The same trace set in memory, named `name`.
Expected<BuiltTraces> build_inference_traces(const InferenceGenerator& generator,
                                             const std::string& name,
                                             const RankFileOptions& options);

}  // namespace orrery::gen
