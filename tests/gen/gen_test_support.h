// tests/gen/gen_test_support.h: small transformers and plans, and checks shared by the generator
// tests.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gen/dlrm_generator.h"
#include "gen/llm_plan.h"
#include "gen/rank_program.h"
#include "gen/transformer_model.h"

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

namespace orrery::test {

// 8 tables of 1,000 rows, d = 16, pooling 3; bottom 13-64-16, top (16 + 36 = 52)-64-1; fp32.
inline gen::DlrmModel small_dlrm(size_t tables = 8) {
  gen::DlrmModel model;
  model.name = "small";
  model.dense_features = 13;
  model.bottom_mlp = {64, 16};
  model.top_mlp = {64, 1};
  model.dim = 16;
  model.tables.assign(tables, gen::EmbeddingTable{1000, 3});
  return model;
}

inline gen::TransformerModel preset(const std::string& name) {
  Expected<gen::TransformerModel> model = gen::resolve_model(name);
  EXPECT_TRUE(model) << model.error().message();
  return model ? *model : gen::TransformerModel();
}

// A small GPT-style model for communication counts: 4 layers, h 256, 8 heads, 4h MLP, tied
// embeddings, sequence 128.
inline gen::TransformerModel tiny_gpt() {
  gen::TransformerModel model;
  model.name = "tiny-gpt";
  model.layers = 4;
  model.hidden = 256;
  model.heads = 8;
  model.kv_heads = 8;
  model.ffn = 1024;
  model.vocab = 1024;
  model.seq = 128;
  model.bias = true;
  model.tied_embeddings = true;
  model.learned_positions = true;
  model.dropout = true;
  return model;
}

// A small Mixture-of-Experts model with grouped-query attention and SwiGLU: 8 experts, top 2.
inline gen::TransformerModel tiny_moe() {
  gen::TransformerModel model = tiny_gpt();
  model.name = "tiny-moe";
  model.kv_heads = 2;
  model.mlp = gen::MlpKind::kSwiGlu;
  model.norm = gen::NormKind::kRmsNorm;
  model.tied_embeddings = false;
  model.learned_positions = false;
  model.dropout = false;
  model.bias = false;
  model.experts = 8;
  model.top_k = 2;
  return model;
}

// A random small plan of every parallelism (tp, pp, dp, cp, ep with the MoE model, SP, ZeRO,
// recomputation, interleaving, micro-batches, buckets) on tiny_gpt or tiny_moe, not validated:
// callers skip what validate_plan refuses.
struct RandomPlan {
  gen::TransformerModel model;
  gen::ParallelPlan plan;
  bool moe = false;
};
inline RandomPlan random_plan(std::mt19937_64& rng) {
  auto pick = [&](std::initializer_list<uint32_t> values) {
    std::vector<uint32_t> list(values);
    return list[std::uniform_int_distribution<size_t>(0, list.size() - 1)(rng)];
  };
  RandomPlan out;
  out.moe = pick({0, 0, 1}) == 1;
  out.model = out.moe ? tiny_moe() : tiny_gpt();
  gen::ParallelPlan& plan = out.plan;
  plan.tp = pick({1, 2, 4});
  plan.pp = pick({1, 2, 4});
  plan.dp = pick({1, 2, 4});
  plan.cp = pick({1, 1, 2});
  plan.ep = out.moe ? pick({1, 2}) : 1;
  plan.sp = plan.tp > 1 && pick({0, 1}) == 1;
  plan.zero = pick({0, 1, 2, 3});
  plan.recompute = pick({0, 0, 1}) == 1;
  if (plan.pp > 1 && pick({0, 1}) == 1) {
    plan.schedule = gen::PipelineSchedule::kInterleaved;
    plan.virtual_stages = 2;
  }
  plan.micro_batch = pick({1, 2});
  plan.global_batch = plan.micro_batch * plan.dp * pick({1, 2, 4, 8});
  plan.bucket_bytes = pick({0, 0, 65536});
  return out;
}

inline gen::ParallelPlan plan_of(uint32_t dp, uint32_t tp, uint32_t pp, uint64_t global_batch,
                                 uint64_t micro_batch = 1) {
  gen::ParallelPlan plan;
  plan.dp = dp;
  plan.tp = tp;
  plan.pp = pp;
  plan.global_batch = global_batch;
  plan.micro_batch = micro_batch;
  return plan;
}

// Every send of the programs (index = rank) has exactly one receive with the same source,
// destination, tag and size, and no two sends share (source, destination, tag).
inline void expect_matched_messages(const std::vector<gen::RankProgram>& programs) {
  std::map<std::tuple<int32_t, int32_t, int32_t>, uint64_t> sends;
  std::map<std::tuple<int32_t, int32_t, int32_t>, uint64_t> recvs;
  for (size_t rank = 0; rank < programs.size(); ++rank) {
    const gen::RankProgram& program = programs[rank];
    const auto self = static_cast<int32_t>(rank);
    for (gen::ProgRef ref = 0; ref < program.size(); ++ref) {
      const gen::RankProgram::Node& node = program.node(ref);
      if (node.kind == gen::ProgKind::kSend) {
        EXPECT_TRUE(sends.emplace(std::tuple{self, node.peer, node.tag}, node.bytes).second)
            << node.name;
      } else if (node.kind == gen::ProgKind::kRecv) {
        EXPECT_TRUE(recvs.emplace(std::tuple{node.peer, self, node.tag}, node.bytes).second)
            << node.name;
      }
    }
  }
  EXPECT_EQ(sends, recvs);
}

inline uint64_t count_kind(const gen::RankProgram& program, gen::ProgKind kind) {
  uint64_t count = 0;
  for (gen::ProgRef ref = 0; ref < program.size(); ++ref) {
    count += program.node(ref).kind == kind ? 1U : 0U;
  }
  return count;
}

}  // namespace orrery::test
