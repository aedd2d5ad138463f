// Inference traces: one prefill and then one decode step per generated token, each request leaving
// the batch when it is done; attention reads the request's KV cache; tensor parallelism all-reduces
// twice per layer and step; pipeline stages pass hidden states on and sampled tokens back.
#include "gen/inference_generator.h"

#include <gtest/gtest.h>

#include <string>

#include "gen/gen_test_support.h"
#include "gen/memory_estimate.h"

namespace orrery::gen {
namespace inference_generator_test {

using test::count_kind;
using test::tiny_gpt;

InferencePlan plan_of(uint32_t tp, uint32_t pp, std::vector<uint32_t> prompts,
                      std::vector<uint32_t> outputs, uint32_t micro_batches = 1) {
  InferencePlan plan;
  plan.tp = tp;
  plan.pp = pp;
  plan.prompt_lengths = std::move(prompts);
  plan.output_lengths = std::move(outputs);
  plan.micro_batches = micro_batches;
  return plan;
}

InferenceGenerator generator(const TransformerModel& model, const InferencePlan& plan) {
  Expected<InferenceGenerator> created = InferenceGenerator::create(model, plan);
  EXPECT_TRUE(created) << created.error().message();
  return std::move(*created);
}

const RankProgram::Node* find(const RankProgram& program, const std::string& name) {
  for (ProgRef ref = 0; ref < program.size(); ++ref) {
    if (program.node(ref).name == name) return &program.node(ref);
  }
  ADD_FAILURE() << "no node " << name;
  return nullptr;
}

TEST(Inference, prefill_then_decode_steps_until_every_request_is_done) {
  const TransformerModel model = tiny_gpt();
  const InferenceGenerator gen = generator(model, plan_of(2, 1, {16, 32, 8}, {4, 2, 3}));
  EXPECT_EQ(gen.plan().steps(), 4u);
  const RankProgram program = gen.build(0);
  // Prefill: every prompt token through every matrix.
  const RankProgram::Node* prefill = find(program, "prefill.L0.qkv");
  ASSERT_NE(prefill, nullptr);
  EXPECT_EQ(prefill->flops, 2ULL * 56 * 256 * (3 * 256) / 2);
  // Decode step 2: requests 0 and 2 are still generating (request 1 made its 2 tokens).
  const RankProgram::Node* decode = find(program, "decode2.L0.qkv");
  ASSERT_NE(decode, nullptr);
  EXPECT_EQ(decode->flops, 2ULL * 2 * 256 * (3 * 256) / 2);
  // Attention at step 2 reads caches of 16 + 2 and 8 + 2 tokens: keys and values of 4 heads of 32.
  const RankProgram::Node* attention = find(program, "decode2.L0.attention");
  ASSERT_NE(attention, nullptr);
  const uint64_t cached = (16 + 2) + (8 + 2);
  EXPECT_EQ(attention->bytes, (2 * 2 * 128 + 2 * cached * 128) * 2);
  // Two all-reduces per layer and step, one for the embedding, one all-gather of the logits.
  uint64_t all_reduces = 0;
  uint64_t all_gathers = 0;
  for (ProgRef ref = 0; ref < program.size(); ++ref) {
    const RankProgram::Node& node = program.node(ref);
    if (node.kind != ProgKind::kCollective) continue;
    (node.comm_type == ChakraProtoMsg::ALL_REDUCE ? all_reduces : all_gathers) += 1;
    EXPECT_EQ(node.group, 1u);
  }
  EXPECT_EQ(all_reduces, 4u * (2 * 4 + 1));
  EXPECT_EQ(all_gathers, 4u);
  EXPECT_EQ(find(program, "decode3.logits.tp_allgather")->bytes, 1ULL * 512 * 2);
}

TEST(Inference, pipeline_stages_pass_hidden_states_on_and_tokens_back) {
  const InferenceGenerator gen = generator(tiny_gpt(), plan_of(1, 2, {16, 32, 8}, {4, 2, 3}));
  std::vector<RankProgram> programs = {gen.build(0), gen.build(1)};
  // Stage 0 sends the hidden states of 4 steps; stage 1 sends tokens back after steps 0, 1, 2.
  EXPECT_EQ(count_kind(programs[0], ProgKind::kSend), 4u);
  EXPECT_EQ(count_kind(programs[0], ProgKind::kRecv), 3u);
  EXPECT_EQ(count_kind(programs[1], ProgKind::kSend), 3u);
  EXPECT_EQ(count_kind(programs[1], ProgKind::kRecv), 4u);
  test::expect_matched_messages(programs);
  EXPECT_EQ(find(programs[0], "prefill.send_hidden.s1")->bytes, 56ULL * 256 * 2);
  EXPECT_EQ(find(programs[1], "decode1.send_tokens")->bytes, 2ULL * 4);  // requests 0 and 2 go on

  // Micro-batches: requests 0 and 2 in group 0, request 1 in group 1; each group has its own steps.
  const InferenceGenerator split = generator(tiny_gpt(), plan_of(1, 2, {16, 32, 8}, {4, 2, 3}, 2));
  std::vector<RankProgram> split_programs = {split.build(0), split.build(1)};
  test::expect_matched_messages(split_programs);
  EXPECT_EQ(count_kind(split_programs[0], ProgKind::kSend), 4u + 2u);
}

TEST(Inference, memory_holds_weights_and_the_kv_cache_at_its_final_length) {
  const TransformerModel model = test::preset("llama2-70b");
  InferencePlan plan = plan_of(8, 1, {1024, 2048}, {512});
  ASSERT_TRUE(validate_inference_plan(model, plan));
  const std::vector<StageMemory> stages = estimate_inference_memory(model, plan);
  ASSERT_EQ(stages.size(), 1u);
  // 2 (K, V) x 80 layers x (1024 + 512 + 2048 + 512) tokens x 1024 / 8 x 2 bytes.
  EXPECT_EQ(stages[0].memory.kv_cache, 2ULL * 80 * 4096 * 128 * 2);
  EXPECT_NEAR(static_cast<double>(stages[0].memory.weights), 68.98e9 / 8 * 2, 0.01e9);
}

TEST(Inference, bad_plans_name_the_flag) {
  const TransformerModel model = tiny_gpt();
  auto error = [&](InferencePlan plan) {
    Expected<InferenceGenerator> created = InferenceGenerator::create(model, std::move(plan));
    EXPECT_FALSE(created);
    return created ? std::string() : created.error().message();
  };
  EXPECT_CONTAINS(error(plan_of(1, 1, {}, {1})), "missing --prompt-lengths");
  EXPECT_CONTAINS(error(plan_of(1, 1, {8, 8, 8}, {1, 2})),
                  "--output-lengths has 2 values for 3 requests");
  EXPECT_CONTAINS(error(plan_of(3, 1, {8}, {1})), "--tp 3 does not divide the 8 attention heads");
  EXPECT_CONTAINS(error(plan_of(1, 5, {8}, {1})), "--pp 5 exceeds the 4 layers");
  EXPECT_CONTAINS(error(plan_of(1, 1, {8}, {0})),
                  "--output-lengths: a request generates at least 1");
  EXPECT_CONTAINS(error(plan_of(1, 1, {8, 8}, {2}, 3)), "--micro-batches 3: expected 1 to the 2");
}

}  // namespace inference_generator_test
}  // namespace orrery::gen
