// Training traces: FLOPs against the Megatron-LM formula and invariant under the plan; every kind
// of parallelism communicates exactly its closed form per rank; pipeline sends and receives pair
// up; bad plans are refused with the flag named.
#include "gen/llm_generator.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>

#include "gen/gen_test_support.h"
#include "gen/memory_estimate.h"

namespace orrery::gen {
namespace llm_generator_test {

using ChakraProtoMsg::ALL_GATHER;
using ChakraProtoMsg::ALL_REDUCE;
using ChakraProtoMsg::ALL_TO_ALL;
using ChakraProtoMsg::CollectiveCommType;
using ChakraProtoMsg::REDUCE_SCATTER;
using test::count_kind;
using test::plan_of;
using test::preset;
using test::tiny_gpt;
using test::tiny_moe;

LlmGenerator generator(const TransformerModel& model, const ParallelPlan& plan) {
  Expected<LlmGenerator> created = LlmGenerator::create(model, plan);
  EXPECT_TRUE(created) << created.error().message();
  return std::move(*created);
}

double total_flops(const LlmGenerator& gen) {
  double flops = 0;
  for (uint32_t rank = 0; rank < gen.ranks(); ++rank) {
    flops += static_cast<double>(gen.build(rank).total_flops());
  }
  return flops;
}

struct Tally {
  uint64_t count = 0;
  uint64_t bytes = 0;
  std::set<uint64_t> sizes;
};

// The collectives of one rank on groups of `kind` with comm type `type` whose name contains
// `needle`.
Tally tally(const LlmGenerator& gen, const RankProgram& program, GroupKind kind,
            CollectiveCommType type, const std::string& needle = "") {
  Tally result;
  for (ProgRef ref = 0; ref < program.size(); ++ref) {
    const RankProgram::Node& node = program.node(ref);
    if (node.kind != ProgKind::kCollective || node.group == 0) continue;
    if (gen.groups().kind(node.group) != kind || node.comm_type != type) continue;
    if (node.name.find(needle) == std::string::npos) continue;
    ++result.count;
    result.bytes += node.bytes;
    result.sizes.insert(node.bytes);
  }
  return result;
}

// --- FLOPs ---------------------------------------------------------------------------------------

TEST(LlmFlops, gpt_presets_are_within_2_percent_of_megatron_under_every_plan_and_plan_invariant) {
  for (const char* name : {"gpt3-175b", "gpt3-6.7b"}) {
    SCOPED_TRACE(name);
    const TransformerModel model = preset(name);
    const uint64_t batch = 8;
    const double formula = megatron_flops(model, batch, 2048, false);
    std::vector<ParallelPlan> plans;
    plans.push_back(plan_of(1, 1, 1, batch));  // one rank
    plans.push_back(plan_of(2, 8, 8, batch));  // 128 ranks, Megatron's 3-D layout
    ParallelPlan sp_cp = plan_of(2, 4, 4, batch, 2);
    sp_cp.sp = true;
    sp_cp.cp = 2;
    plans.push_back(sp_cp);
    ParallelPlan interleaved = plan_of(1, 2, 4, batch);
    interleaved.schedule = PipelineSchedule::kInterleaved;
    interleaved.virtual_stages = 3;
    plans.push_back(interleaved);
    ParallelPlan fsdp = plan_of(4, 2, 2, batch, 2);
    fsdp.zero = 3;
    plans.push_back(fsdp);
    std::vector<double> totals;
    for (const ParallelPlan& plan : plans) {
      const double flops = total_flops(generator(model, plan));
      totals.push_back(flops);
      EXPECT_NEAR(flops / formula, 1.0, 0.02)
          << "dp " << plan.dp << " tp " << plan.tp << " pp " << plan.pp << " cp " << plan.cp;
    }
    // The plan moves work between ranks but does not change it, except the element-wise work
    // that tensor parallelism without SP replicates on every rank of the group (norms, dropout,
    // residual adds): +0.05% for GPT-3 175B and +0.12% for GPT-3 6.7B at tp 8.
    for (size_t index = 0; index < totals.size(); ++index)
      EXPECT_NEAR(totals[index] / totals.front(), 1.0, 2e-3) << "plan " << index;
  }
}

TEST(LlmFlops, recomputation_matches_the_96_formula_and_smaller_gpt_too) {
  const TransformerModel model = preset("gpt3-175b");
  ParallelPlan plan = plan_of(1, 8, 4, 4);
  plan.recompute = true;
  EXPECT_NEAR(total_flops(generator(model, plan)) / megatron_flops(model, 4, 2048, true), 1.0,
              0.02);
  const TransformerModel small = preset("gpt3-6.7b");
  ParallelPlan small_plan = plan_of(2, 2, 2, 8);
  EXPECT_NEAR(total_flops(generator(small, small_plan)) / megatron_flops(small, 8, 2048, false),
              1.0, 0.02);
}

// --- communication closed forms
// --------------------------------------------------------------------

TEST(LlmComm, tensor_parallel_makes_4_all_reduces_of_b_s_h_per_layer_and_micro_batch) {
  const TransformerModel model = tiny_gpt();
  const ParallelPlan plan = plan_of(2, 4, 2, 8, 2);  // 16 ranks, 2 micro-batches of 2
  const LlmGenerator gen = generator(model, plan);
  const uint64_t m = 2;
  const uint64_t layers_per_stage = 2;
  const uint64_t bsh_bytes = 2ULL * 128 * 256 * 2;  // b s h elements of bf16
  for (uint32_t rank = 0; rank < gen.ranks(); ++rank) {
    const RankProgram program = gen.build(rank);
    const Tally layer = tally(gen, program, GroupKind::kTensor, ALL_REDUCE, ".L");
    EXPECT_EQ(layer.count, 4 * layers_per_stage * m) << rank;
    EXPECT_EQ(layer.sizes, std::set<uint64_t>{bsh_bytes});
    EXPECT_EQ(tally(gen, program, GroupKind::kTensor, ALL_GATHER).count, 0u);
    EXPECT_EQ(tally(gen, program, GroupKind::kTensor, REDUCE_SCATTER).count, 0u);
    // Outside the layers: the vocabulary-parallel embedding's all-reduce (first stage); the
    // output layer's input gradient and the cross-entropy statistics (last stage).
    const bool first = rank_coords(plan, rank).pp == 0;
    EXPECT_EQ(tally(gen, program, GroupKind::kTensor, ALL_REDUCE, "embedding").count,
              first ? m : 0);
    EXPECT_EQ(tally(gen, program, GroupKind::kTensor, ALL_REDUCE, "loss").count, first ? 0 : m);
  }
}

TEST(LlmComm, sequence_parallel_makes_6_all_gathers_and_4_reduce_scatters_per_layer) {
  const TransformerModel model = tiny_gpt();
  ParallelPlan plan = plan_of(1, 4, 1, 2);
  plan.sp = true;
  const LlmGenerator gen = generator(model, plan);
  const uint64_t m = 2;
  const uint64_t bsh_bytes = 128ULL * 256 * 2;
  for (uint32_t rank = 0; rank < gen.ranks(); ++rank) {
    const RankProgram program = gen.build(rank);
    // Forward: all-gather before QKV and MLP, reduce-scatter after; backward: the all-gathers of
    // the reduce-scatters' gradients, the inputs gathered again for the weight gradients, and the
    // reduce-scatters of the all-gathers' gradients. The per-rank input of an all-gather is the
    // sequence shard b s h / t; a reduce-scatter's buffer is b s h.
    const Tally gathers = tally(gen, program, GroupKind::kTensor, ALL_GATHER, ".L");
    const Tally scatters = tally(gen, program, GroupKind::kTensor, REDUCE_SCATTER, ".L");
    EXPECT_EQ(gathers.count, 6 * 4 * m);
    EXPECT_EQ(gathers.sizes, std::set<uint64_t>{bsh_bytes / 4});
    EXPECT_EQ(scatters.count, 4 * 4 * m);
    EXPECT_EQ(scatters.sizes, std::set<uint64_t>{bsh_bytes});
    EXPECT_EQ(tally(gen, program, GroupKind::kTensor, ALL_REDUCE, ".L").count, 0u);
  }
}

TEST(LlmComm, recomputation_repeats_the_forward_all_reduces) {
  ParallelPlan plan = plan_of(1, 2, 1, 3);
  plan.recompute = true;
  const LlmGenerator gen = generator(tiny_gpt(), plan);
  const RankProgram program = gen.build(0);
  EXPECT_EQ(tally(gen, program, GroupKind::kTensor, ALL_REDUCE, ".L").count, 6u * 4 * 3);
  EXPECT_EQ(tally(gen, program, GroupKind::kTensor, ALL_REDUCE, "recompute.").count, 2u * 4 * 3);
}

TEST(LlmComm, data_parallel_reduces_each_layers_gradients_once_per_iteration_for_each_zero_stage) {
  const TransformerModel model = tiny_gpt();
  const uint64_t m = 3;
  const uint64_t d = 4;
  for (uint32_t zero = 0; zero <= 3; ++zero) {
    ParallelPlan plan = plan_of(4, 2, 1, d * m);
    plan.zero = zero;
    const LlmGenerator gen = generator(model, plan);
    const RankProgram program = gen.build(5);
    for (uint32_t layer = 0; layer < model.layers; ++layer) {
      const uint64_t params = layer_params(model, layer, 2, 1).dense;
      const uint64_t grad_bytes = params * 2;
      const uint64_t shard_bytes = (params + d - 1) / d * 2;
      const std::string name = fmt::format("L{}.", layer);
      const Tally all_reduce = tally(gen, program, GroupKind::kData, ALL_REDUCE, name);
      const Tally scatter = tally(gen, program, GroupKind::kData, REDUCE_SCATTER, name);
      const Tally gather = tally(gen, program, GroupKind::kData, ALL_GATHER, name);
      SCOPED_TRACE(fmt::format("zero {} layer {}", zero, layer));
      switch (zero) {
        case 0:  // one all-reduce of the gradients
          EXPECT_EQ(all_reduce.count, 1u);
          EXPECT_EQ(all_reduce.bytes, grad_bytes);
          EXPECT_EQ(scatter.count + gather.count, 0u);
          break;
        case 1:  // reduce-scatter of the gradients, all-gather of the updated shards
          EXPECT_EQ(scatter.count, 1u);
          EXPECT_EQ(scatter.bytes, grad_bytes);
          EXPECT_EQ(gather.count, 1u);
          EXPECT_EQ(gather.bytes, shard_bytes);
          EXPECT_EQ(all_reduce.count, 0u);
          break;
        case 2:  // a reduce-scatter after every micro-batch (gradients are sharded)
          EXPECT_EQ(scatter.count, m);
          EXPECT_EQ(scatter.bytes, m * grad_bytes);
          EXPECT_EQ(gather.count, 1u);
          EXPECT_EQ(gather.bytes, shard_bytes);
          break;
        case 3:  // weights gathered for forward and backward of every micro-batch
          EXPECT_EQ(gather.count, 2 * m);
          EXPECT_EQ(gather.bytes, 2 * m * shard_bytes);
          EXPECT_EQ(scatter.count, m);
          EXPECT_EQ(scatter.bytes, m * grad_bytes);
          break;
      }
    }
    // Every data-parallel collective but ZeRO-3's gathers runs in the background lane.
    for (ProgRef ref = 0; ref < program.size(); ++ref) {
      const RankProgram::Node& node = program.node(ref);
      if (node.kind == ProgKind::kCollective && gen.groups().kind(node.group) == GroupKind::kData &&
          node.comm_type != ALL_GATHER) {
        EXPECT_EQ(node.lane, Lane::kBackground) << node.name;
      }
    }
  }
}

// tiny_gpt's layer (h 256, ffn 1024, biases, LayerNorm), forward order, parameters: norm 256 +
// 256, QKV 196,608 + 768, projection 65,536 + 256, norm 256 + 256, fc1 262,144 + 1,024, fc2
// 262,144 + 256. 12 h^2 + 13 h in all.
TEST(LlmComm, buckets_hold_whole_tensors_in_the_order_gradients_become_ready) {
  ParallelPlan plan = plan_of(2, 1, 1, 2);
  plan.bucket_bytes = 300000;
  const TransformerModel model = tiny_gpt();
  const uint64_t h = 256;
  const LlmGenerator gen = generator(model, plan);
  const RankProgram program = gen.build(0);
  const Tally layer0 = tally(gen, program, GroupKind::kData, ALL_REDUCE, "L0.");
  // Backward order, bf16, closed at 300,000 bytes: fc2 (bias, weight), fc1 (bias, weight), norm,
  // projection and QKV (the bucket reaches 300,000 bytes with the QKV weight), then the first
  // norm alone. No bucket splits a tensor, as in PyTorch's DDP and Megatron-LM.
  const std::set<uint64_t> expected{2 * (256 + 262'144), 2 * (1'024 + 262'144),
                                    2 * (2 * 256 + 256 + 65'536 + 768 + 196'608), 2 * (2 * 256)};
  EXPECT_EQ(layer0.count, 4u);
  EXPECT_EQ(layer0.sizes, expected);
  EXPECT_EQ(layer0.bytes, 2 * (12 * h * h + 13 * h));
  EXPECT_EQ(layer0.bytes, 2 * layer_params(model, 0, 1, 1).dense);
}

// A bucket smaller than every tensor gives one collective per tensor, not one per byte (1-byte
// buckets used to split a layer into a collective per parameter byte and exhaust memory).
TEST(LlmComm, a_bucket_smaller_than_a_tensor_is_one_collective_per_tensor) {
  ParallelPlan plan = plan_of(2, 2, 1, 2);
  plan.bucket_bytes = 1;
  const TransformerModel model = tiny_gpt();
  const LlmGenerator gen = generator(model, plan);
  const RankProgram program = gen.build(0);
  const Tally layer0 = tally(gen, program, GroupKind::kData, ALL_REDUCE, "L0.");
  EXPECT_EQ(layer0.count, 12u);
  EXPECT_EQ(layer0.bytes, 2 * layer_params(model, 0, 2, 1).dense);
  EXPECT_EQ(layer_tensors(model, 0, 2, 1).size(), 12u);
  // Word and position embeddings; the head's final norm (its output layer is tied).
  EXPECT_EQ(tally(gen, program, GroupKind::kData, ALL_REDUCE, "embedding.").count, 2u);
}

TEST(LlmComm, context_parallel_gathers_keys_and_values_and_scatters_their_gradients) {
  TransformerModel model = tiny_moe();
  model.experts = 0;
  model.top_k = 0;
  ParallelPlan plan = plan_of(1, 2, 1, 2);
  plan.cp = 4;
  const LlmGenerator gen = generator(model, plan);
  const uint64_t m = 2;
  const uint64_t local_tokens = 128 / 4;
  const uint64_t kv_bytes = local_tokens * 2 * model.kv_dim() / 2 * 2;  // K and V, tp 2, bf16
  for (uint32_t rank = 0; rank < gen.ranks(); ++rank) {
    const RankProgram program = gen.build(rank);
    const Tally gathers = tally(gen, program, GroupKind::kContext, ALL_GATHER);
    const Tally scatters = tally(gen, program, GroupKind::kContext, REDUCE_SCATTER);
    EXPECT_EQ(gathers.count, 4 * m);
    EXPECT_EQ(gathers.sizes, std::set<uint64_t>{kv_bytes});
    EXPECT_EQ(scatters.count, 4 * m);
    EXPECT_EQ(scatters.sizes, std::set<uint64_t>{4 * kv_bytes});
    // Data-parallel gradients are reduced over context x data ranks (4 here).
    EXPECT_EQ(tally(gen, program, GroupKind::kData, ALL_REDUCE, "L0.").count, 1u);
  }
  EXPECT_EQ(gen.groups().members(gen.groups().id(GroupKind::kData, 0)),
            (std::vector<uint32_t>{0, 2, 4, 6}));
  EXPECT_EQ(gen.groups().members(gen.groups().id(GroupKind::kContext, 1)),
            (std::vector<uint32_t>{1, 3, 5, 7}));
}

TEST(LlmComm, expert_parallel_dispatches_and_combines_with_all_to_alls) {
  const TransformerModel model = tiny_moe();
  ParallelPlan plan = plan_of(4, 1, 1, 8, 1);
  plan.ep = 2;
  const LlmGenerator gen = generator(model, plan);
  const uint64_t m = 2;
  const uint64_t routed_bytes = 2ULL * 128 * 256 * 2;  // top-2 copies of b s tokens of h, bf16
  for (uint32_t rank = 0; rank < gen.ranks(); ++rank) {
    const RankProgram program = gen.build(rank);
    const Tally a2a = tally(gen, program, GroupKind::kExpert, ALL_TO_ALL);
    EXPECT_EQ(a2a.count, 4 * 4 * m);  // dispatch and combine, forward and backward
    EXPECT_EQ(a2a.sizes, std::set<uint64_t>{routed_bytes});
    // Expert weights: 4 of 8 experts per rank, reduced over the 2 ranks holding the same experts;
    // everything else over all 4 data-parallel ranks.
    const Tally experts = tally(gen, program, GroupKind::kExpertData, ALL_REDUCE, "L0.");
    EXPECT_EQ(experts.count, 1u);
    EXPECT_EQ(experts.bytes, layer_params(model, 0, 1, 2).expert * 2);
    EXPECT_EQ(tally(gen, program, GroupKind::kData, ALL_REDUCE, "L0.").bytes,
              layer_params(model, 0, 1, 2).dense * 2);
  }
  EXPECT_EQ(gen.groups().members(gen.groups().id(GroupKind::kExpert, 2)),
            (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(gen.groups().members(gen.groups().id(GroupKind::kExpertData, 2)),
            (std::vector<uint32_t>{0, 2}));
}

TEST(LlmComm, tied_embeddings_are_reduced_between_the_first_and_last_stage) {
  const TransformerModel model = tiny_gpt();
  const LlmGenerator gen = generator(model, plan_of(1, 2, 4, 4));
  const uint64_t rows = 1024 / 2 * 256;
  for (uint32_t rank = 0; rank < gen.ranks(); ++rank) {
    const uint32_t stage = rank_coords(gen.plan(), rank).pp;
    const Tally tie = tally(gen, gen.build(rank), GroupKind::kEmbedding, ALL_REDUCE);
    EXPECT_EQ(tie.count, stage == 0 || stage == 3 ? 1u : 0u) << rank;
    if (tie.count > 0) {
      EXPECT_EQ(tie.bytes, rows * 2);
    }
  }
  EXPECT_EQ(gen.groups().members(gen.groups().id(GroupKind::kEmbedding, 1)),
            (std::vector<uint32_t>{1, 7}));
}

// --- pipeline
// --------------------------------------------------------------------------------------

void expect_matched_messages(const LlmGenerator& gen) {
  std::vector<RankProgram> programs;
  for (uint32_t rank = 0; rank < gen.ranks(); ++rank) programs.push_back(gen.build(rank));
  test::expect_matched_messages(programs);
}

TEST(LlmPipeline, one_f_one_b_sends_activations_forward_and_gradients_back) {
  const LlmGenerator gen = generator(tiny_gpt(), plan_of(1, 1, 4, 6));
  const uint64_t m = 6;
  for (uint32_t stage = 0; stage < 4; ++stage) {
    const RankProgram program = gen.build(stage);
    EXPECT_EQ(count_kind(program, ProgKind::kSend), (stage < 3 ? m : 0) + (stage > 0 ? m : 0));
    EXPECT_EQ(count_kind(program, ProgKind::kRecv), (stage > 0 ? m : 0) + (stage < 3 ? m : 0));
  }
  expect_matched_messages(gen);
  // The schedule: stage 0 warms up with 3 forwards, then alternates, then cools down.
  const std::vector<PipelineStep> steps = pipeline_steps(gen.plan(), 0);
  std::string order;
  for (const PipelineStep& step : steps)
    order += fmt::format("{}{} ", step.forward ? 'F' : 'B', step.micro_batch);
  EXPECT_EQ(order, "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5 ");
  std::string last;
  for (const PipelineStep& step : pipeline_steps(gen.plan(), 3)) last += step.forward ? 'F' : 'B';
  EXPECT_EQ(last, "FBFBFBFBFBFB");
}

TEST(LlmPipeline, interleaved_schedule_visits_every_chunk_and_matches_its_messages) {
  ParallelPlan plan = plan_of(1, 1, 2, 4);
  plan.schedule = PipelineSchedule::kInterleaved;
  plan.virtual_stages = 2;
  const LlmGenerator gen = generator(tiny_gpt(), plan);
  // Stage 0 holds virtual stages 0 and 2, stage 1 holds 1 and 3: every chunk boundary but the ends
  // of the model carries one message per micro-batch and direction.
  for (uint32_t stage = 0; stage < 2; ++stage) {
    const RankProgram program = gen.build(stage);
    EXPECT_EQ(count_kind(program, ProgKind::kSend), 3u * 4);
    EXPECT_EQ(count_kind(program, ProgKind::kRecv), 3u * 4);
  }
  expect_matched_messages(gen);
  std::string order;
  for (const PipelineStep& step : pipeline_steps(gen.plan(), 0)) {
    order += fmt::format("{}{}c{} ", step.forward ? 'F' : 'B', step.micro_batch, step.chunk);
  }
  // Megatron-LM's order for p = 2, v = 2, m = 4 on the first stage: 4 warm-up forwards.
  EXPECT_EQ(order,
            "F0c0 F1c0 F0c1 F1c1 F2c0 B0c1 F3c0 B1c1 F2c1 B0c0 F3c1 B1c0 B2c1 B3c1 B2c0 B3c0 ");
}

TEST(LlmPipeline, ranks_are_laid_out_tensor_first_then_context_data_and_pipeline) {
  ParallelPlan plan = plan_of(2, 4, 2, 4);
  plan.cp = 2;
  const LlmGenerator gen = generator(tiny_gpt(), plan);
  EXPECT_EQ(gen.ranks(), 32u);
  EXPECT_EQ(gen.groups().members(gen.groups().id(GroupKind::kTensor, 5)),
            (std::vector<uint32_t>{4, 5, 6, 7}));
  const RankCoords coords = rank_coords(gen.plan(), 29);  // 29 = 1 + 4 (1 + 2 (1 + 2 x 1))
  EXPECT_EQ(coords.tp, 1u);
  EXPECT_EQ(coords.cp, 1u);
  EXPECT_EQ(coords.dp, 1u);
  EXPECT_EQ(coords.pp, 1u);
  EXPECT_EQ(rank_of(gen.plan(), coords), 29u);
}

// --- plans that cannot be generated
// ---------------------------------------------------------------

std::string plan_error(const TransformerModel& model, ParallelPlan plan) {
  Expected<LlmGenerator> created = LlmGenerator::create(model, plan);
  EXPECT_FALSE(created);
  return created ? "" : created.error().message();
}

TEST(LlmPlan, bad_plans_name_the_flag_to_change) {
  const TransformerModel llama = preset("llama2-70b");
  EXPECT_CONTAINS(plan_error(llama, plan_of(1, 16, 1, 4)),
                  "--tp 16 does not divide the 8 key-value heads of llama2-70b");
  EXPECT_CONTAINS(plan_error(llama, plan_of(3, 1, 1, 10)),
                  "--global-batch 10 is not a multiple of --micro-batch x --dp = 1 x 3 = 3");
  EXPECT_CONTAINS(plan_error(llama, plan_of(1, 1, 1, 0)), "missing --global-batch");
  EXPECT_CONTAINS(plan_error(llama, plan_of(0, 1, 1, 4)), "--dp 0: every parallel degree");
  EXPECT_CONTAINS(plan_error(llama, plan_of(1, 1, 81, 4)), "pipeline stages exceed the 80 layers");
  ParallelPlan sp = plan_of(1, 1, 1, 4);
  sp.sp = true;
  EXPECT_CONTAINS(plan_error(llama, sp), "--sp shards the sequence over tensor-parallel ranks");
  ParallelPlan ep = plan_of(2, 1, 1, 4);
  ep.ep = 2;
  EXPECT_CONTAINS(plan_error(llama, ep),
                  "--ep 2 needs a Mixture-of-Experts model; llama2-70b is dense");
  const TransformerModel mixtral = preset("mixtral-8x7b");
  ep.ep = 4;
  EXPECT_CONTAINS(plan_error(mixtral, ep), "--ep 4 does not divide --dp 2");
  ParallelPlan cp = plan_of(1, 1, 1, 4);
  cp.cp = 3;
  EXPECT_CONTAINS(plan_error(llama, cp), "--seq 4096 is not a multiple of --cp 3");
  ParallelPlan zero = plan_of(1, 1, 1, 4);
  zero.zero = 4;
  EXPECT_CONTAINS(plan_error(llama, zero), "--zero 4: expected 0, 1, 2 or 3");
  ParallelPlan interleaved = plan_of(1, 1, 4, 6);
  interleaved.schedule = PipelineSchedule::kInterleaved;
  interleaved.virtual_stages = 2;
  EXPECT_CONTAINS(plan_error(llama, interleaved), "is not a multiple of it");
  interleaved.pp = 1;
  EXPECT_CONTAINS(plan_error(llama, interleaved), "--schedule interleaved needs --pp 2 or more");
}

// --- memory
// ------------------------------------------------------------------------------------------

TEST(LlmMemory, gpt_activations_follow_korthikanti_with_flash_attention) {
  const TransformerModel model = preset("gpt3-175b");
  LayerShard shard;
  shard.batch = 1;
  shard.q_tokens = 2048;
  shard.kv_tokens = 2048;
  const double sbh = 2048.0 * 12288;
  // 34 s b h (the 5 a s^2 b of the materialized softmax is gone with FlashAttention), plus the
  // softmax statistics (4 bytes per head and token).
  const double stats = 2048.0 * 96 * 4;
  EXPECT_DOUBLE_EQ(static_cast<double>(layer_activation_bytes(model, 0, shard)), 34 * sbh + stats);
  shard.tp = 8;
  EXPECT_DOUBLE_EQ(static_cast<double>(layer_activation_bytes(model, 0, shard)),
                   (10 + 24.0 / 8) * sbh + stats / 8);
  shard.sp = true;
  EXPECT_DOUBLE_EQ(static_cast<double>(layer_activation_bytes(model, 0, shard)),
                   34 * sbh / 8 + stats / 8);
}

TEST(LlmMemory, zero_stages_divide_states_and_1f1b_holds_p_minus_stage_micro_batches) {
  const TransformerModel model = tiny_gpt();
  for (uint32_t zero = 0; zero <= 3; ++zero) {
    ParallelPlan plan = plan_of(4, 1, 4, 32);
    plan.zero = zero;
    ASSERT_TRUE(validate_plan(model, plan));
    const std::vector<StageMemory> stages = estimate_training_memory(model, plan);
    ASSERT_EQ(stages.size(), 4u);
    for (const StageMemory& stage : stages) {
      const uint64_t psi = stage.parameters;
      const uint64_t shard = (psi + 3) / 4;
      EXPECT_EQ(stage.memory.weights, (zero >= 3 ? shard : psi) * 2);
      EXPECT_EQ(stage.memory.gradients, (zero >= 2 ? shard : psi) * 2);
      EXPECT_EQ(stage.memory.optimizer, (zero >= 1 ? shard : psi) * 12);
      EXPECT_EQ(stage.in_flight, 4u - stage.stage);
    }
  }
  // Full recomputation keeps each layer's input only, plus one layer being recomputed.
  ParallelPlan plan = plan_of(1, 1, 1, 1);
  ASSERT_TRUE(validate_plan(model, plan));
  const uint64_t full = estimate_training_memory(model, plan).front().memory.activations;
  plan.recompute = true;
  const uint64_t recomputed = estimate_training_memory(model, plan).front().memory.activations;
  LayerShard shard;
  shard.q_tokens = 128;
  shard.kv_tokens = 128;
  const uint64_t layer = layer_activation_bytes(model, 0, shard);
  const uint64_t input = 128ULL * 256 * 2;
  EXPECT_EQ(full - recomputed, 4 * (layer - input) - layer);
}

TEST(LlmGenerator, gradient_accumulation_kernels_feed_the_data_parallel_reduce) {
  TransformerModel model = tiny_gpt();
  model.grad_accumulation_bytes = 6;
  const uint64_t m = 3;
  ParallelPlan plan = plan_of(2, 1, 1, 2 * m);
  const LlmGenerator gen = generator(model, plan);
  const RankProgram program = gen.build(0);
  uint64_t accumulations = 0;
  for (ProgRef ref = 0; ref < program.size(); ++ref) {
    const RankProgram::Node& node = program.node(ref);
    if (node.name.find("grad_accumulate") == std::string::npos) continue;
    ++accumulations;
    // One per layer and micro-batch, over that layer's parameters: 6 bytes each.
    EXPECT_EQ(node.bytes, 6 * node.flops) << node.name;
    EXPECT_EQ(node.flops, layer_params(model, 0, 1, 1).total()) << node.name;
  }
  EXPECT_EQ(accumulations, m * model.layers);
}

}  // namespace llm_generator_test
}  // namespace orrery::gen
