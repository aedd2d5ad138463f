// `gen llm` and `gen inference` in memory by stage: they build one program per pipeline stage and
// rename it for the stage's other ranks (LlmGenerator::renaming, InferenceGenerator::renaming,
// chakra::TraceGraph::renamed_from). The
// set must be, rank for rank and node for node, the one every rank's own program gives: the same
// ids, names, types, times, dependencies and attribute values, and the same validation report.
// Checked over hand-picked and random plans of every parallelism.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "chakra/trace_builder.h"
#include "gen/dlrm_generator.h"
#include "gen/gen_test_support.h"
#include "gen/inference_generator.h"
#include "gen/llm_generator.h"

namespace orrery::gen {
namespace llm_classes_test {

using test::tiny_gpt;
using test::tiny_moe;

std::string describe(const ParallelPlan& plan) {
  return fmt::format("tp {} cp {} pp {} dp {} ep {}{} zero {}{}{} mb {} batch {}", plan.tp, plan.cp,
                     plan.pp, plan.dp, plan.ep, plan.sp ? " sp" : "", plan.zero,
                     plan.recompute ? " recompute" : "",
                     plan.schedule == PipelineSchedule::kInterleaved ? " interleaved" : "",
                     plan.micro_batch, plan.global_batch);
}

// Rank for rank, node for node: a renamed set against the set of every rank's own program.
void expect_same_ranks(const chakra::TraceSet& a, const chakra::TraceSet& b) {
  ASSERT_EQ(a.rank_count(), b.rank_count());
  for (uint32_t rank = 0; rank < a.rank_count(); ++rank) {
    const chakra::TraceGraph& mine = a.rank_graph(rank);
    const chakra::TraceGraph& theirs = b.rank_graph(rank);
    ASSERT_EQ(mine.size(), theirs.size()) << "rank " << rank;
    // same_work compares types, durations, dependencies and every attribute's name and value.
    ASSERT_TRUE(mine.same_work(theirs)) << "rank " << rank;
    for (chakra::NodeIndex node = 0; node < mine.size(); ++node) {
      ASSERT_EQ(mine.id(node), theirs.id(node)) << "rank " << rank;
      ASSERT_EQ(mine.name(node), theirs.name(node)) << "rank " << rank;
      for (const char* peer : {"comm_src", "comm_dst"}) {
        Expected<std::optional<uint64_t>> left = mine.get_uint(node, peer);
        Expected<std::optional<uint64_t>> right = theirs.get_uint(node, peer);
        ASSERT_TRUE(left && right);
        ASSERT_EQ(*left, *right) << "rank " << rank << " node " << mine.id(node) << " " << peer;
      }
      Expected<std::optional<std::string_view>> left = mine.get_string(node, "pg_name");
      Expected<std::optional<std::string_view>> right = theirs.get_string(node, "pg_name");
      ASSERT_TRUE(left && right);
      ASSERT_EQ(*left, *right) << "rank " << rank << " node " << mine.id(node);
    }
    const chakra::ValidationReport& left = a.report(a.graph_index(rank));
    const chakra::ValidationReport& right = b.report(b.graph_index(rank));
    EXPECT_EQ(left.summary_lines(), right.summary_lines()) << "rank " << rank;
    EXPECT_EQ(left.passes(chakra::ValidationMode::kStrict),
              right.passes(chakra::ValidationMode::kStrict))
        << "rank " << rank;
  }
}

void expect_same_traces(const BuiltTraces& renamed, const BuiltTraces& whole) {
  EXPECT_EQ(renamed.nodes, whole.nodes);
  EXPECT_EQ(renamed.flops, whole.flops);
  expect_same_ranks(*renamed.traces, *whole.traces);
}

// The set of every rank's own program (build_trace_set without a renaming).
template <typename Generator>
Expected<BuiltTraces> built_rank_by_rank(const Generator& generator,
                                         const std::vector<std::vector<uint32_t>>& groups,
                                         const RankFileOptions& options) {
  return build_trace_set(
      generator.ranks(), "w", options,
      [&](uint32_t rank) -> Expected<RankProgram> { return generator.build(rank); }, groups);
}

void expect_same_sets(const TransformerModel& model, const ParallelPlan& plan) {
  SCOPED_TRACE(describe(plan));
  Expected<LlmGenerator> generator = LlmGenerator::create(model, plan);
  ASSERT_TRUE(generator) << generator.error().message();
  RankFileOptions options;
  options.threads = 2;
  Expected<BuiltTraces> renamed = build_llm_traces(*generator, "w", options);
  ASSERT_TRUE(renamed) << renamed.error().message();
  std::vector<std::vector<uint32_t>> groups;
  for (uint32_t id = 1; id <= generator->groups().count(); ++id) {
    groups.push_back(generator->groups().members(id));
  }
  Expected<BuiltTraces> whole = built_rank_by_rank(*generator, groups, options);
  ASSERT_TRUE(whole) << whole.error().message();
  expect_same_traces(*renamed, *whole);
}

TEST(LlmClasses, every_rank_is_its_stage_representative_renamed) {
  ParallelPlan plan;
  plan.tp = 2;
  plan.dp = 2;
  plan.pp = 4;
  plan.global_batch = 8;
  expect_same_sets(tiny_gpt(), plan);  // tied embeddings: first and last stage
  plan.pp = 2;
  plan.schedule = PipelineSchedule::kInterleaved;
  plan.virtual_stages = 2;
  plan.zero = 3;
  plan.sp = true;
  expect_same_sets(tiny_gpt(), plan);
  ParallelPlan moe;
  moe.tp = 2;
  moe.cp = 2;
  moe.dp = 4;
  moe.ep = 2;
  moe.pp = 2;
  moe.global_batch = 16;
  moe.zero = 1;
  expect_same_sets(tiny_moe(), moe);
}

TEST(LlmClasses, random_plans_are_the_same_renamed_as_built_rank_by_rank) {
  std::mt19937_64 rng(2026);
  size_t accepted = 0;
  for (int draw = 0; draw < 400 && accepted < 20; ++draw) {
    test::RandomPlan drawn = test::random_plan(rng);
    const TransformerModel& model = drawn.model;
    ParallelPlan& plan = drawn.plan;
    if (plan.ranks() > 32 || !validate_plan(model, plan)) continue;
    expect_same_sets(model, plan);
    if (HasFatalFailure()) return;
    ++accepted;
  }
  EXPECT_EQ(accepted, 20u);
}

TEST(LlmClasses, the_renaming_names_the_stage_peers_and_every_group) {
  ParallelPlan plan;
  plan.tp = 2;
  plan.dp = 2;
  plan.pp = 3;
  plan.global_batch = 4;
  Expected<LlmGenerator> generator = LlmGenerator::create(tiny_gpt(), plan);
  ASSERT_TRUE(generator);
  // rank = tp + 2 (dp + 2 pp): rank 7 is tp 1, dp 1, stage 1; its stage's first rank is 4.
  const RankRenaming renaming = generator->renaming(7);
  EXPECT_EQ(renaming.representative, 4u);
  const std::vector<std::pair<int64_t, int64_t>> peers = {{0, 3}, {4, 7}, {8, 11}};
  EXPECT_EQ(renaming.peers, peers);
  const LlmGroups& groups = generator->groups();
  for (const GroupKind kind : {GroupKind::kTensor, GroupKind::kData}) {
    const std::pair<uint32_t, uint32_t> entry{groups.id(kind, 4), groups.id(kind, 7)};
    EXPECT_NE(std::find(renaming.groups.begin(), renaming.groups.end(), entry),
              renaming.groups.end());
  }
  EXPECT_EQ(generator->renaming(4).representative, 4u);
  EXPECT_TRUE(generator->renaming(4).peers.empty());
}

TEST(InferenceClasses, every_rank_is_its_stage_representative_renamed) {
  for (const auto& [tp, pp, groups] : {std::tuple{2u, 3u, 1u}, std::tuple{4u, 2u, 2u},
                                       std::tuple{1u, 4u, 2u}, std::tuple{4u, 1u, 1u}}) {
    SCOPED_TRACE(fmt::format("tp {} pp {} micro-batches {}", tp, pp, groups));
    InferencePlan plan;
    plan.tp = tp;
    plan.pp = pp;
    plan.prompt_lengths = {64, 32, 48, 16};
    plan.output_lengths = {3, 5, 2, 4};
    plan.micro_batches = groups;
    Expected<InferenceGenerator> generator = InferenceGenerator::create(tiny_gpt(), plan);
    ASSERT_TRUE(generator) << generator.error().message();
    RankFileOptions options;
    Expected<BuiltTraces> renamed = build_inference_traces(*generator, "w", options);
    ASSERT_TRUE(renamed) << renamed.error().message();
    Expected<BuiltTraces> whole = built_rank_by_rank(*generator, generator->groups(), options);
    ASSERT_TRUE(whole) << whole.error().message();
    expect_same_traces(*renamed, *whole);
  }
}

// `gen --classes` files (a class file per stage and a rank map) against the rank files, both read
// back by chakra::TraceSet::load: rank for rank the same graphs, reports and totals.
void expect_class_files_read_as_rank_files(
    const std::function<Expected<GeneratedTraces>(const std::string&, const RankFileOptions&)>&
        write,
    bool gzip, size_t classes, size_t kept_renamed) {
  test::TempDir dir;
  RankFileOptions options;
  options.threads = 2;
  options.gzip = gzip;
  Expected<GeneratedTraces> ranks = write(dir.file("ranks/w"), options);
  ASSERT_TRUE(ranks) << ranks.error().message();
  options.classes = true;
  Expected<GeneratedTraces> by_class = write(dir.file("classes/w"), options);
  ASSERT_TRUE(by_class) << by_class.error().message();
  EXPECT_EQ(by_class->rank_files.size(), classes);
  EXPECT_EQ(by_class->rank_map, dir.file("classes/w.ranks.json"));
  EXPECT_EQ(by_class->ranks, ranks->rank_files.size());
  EXPECT_EQ(by_class->nodes, ranks->nodes);
  EXPECT_EQ(by_class->flops, ranks->flops);
  EXPECT_EQ(by_class->groups, ranks->groups);
  EXPECT_FALSE(std::filesystem::exists(dir.file("classes/w.0.et")));
  Expected<std::shared_ptr<const chakra::TraceSet>> a = chakra::TraceSet::load(dir.file("ranks/w"));
  ASSERT_TRUE(a) << a.error().message();
  Expected<std::shared_ptr<const chakra::TraceSet>> b =
      chakra::TraceSet::load(dir.file("classes/w"));
  ASSERT_TRUE(b) << b.error().message();
  // Every rank but a class's own is kept as its class and renaming, built only when asked for.
  const chakra::TraceSet& set = **b;
  size_t kept = 0;
  for (uint32_t rank = 0; rank < set.rank_count(); ++rank) {
    const uint32_t index = set.graph_index(rank);
    if (set.renaming(index) == nullptr) continue;
    ++kept;
    EXPECT_EQ(set.renaming(set.base(index)), nullptr);
    EXPECT_EQ(set.source(index), fmt::format("{} as rank {}", set.rank_path(rank), rank));
  }
  EXPECT_EQ(kept, kept_renamed);
  const size_t before = set.memory_bytes();
  expect_same_ranks(set, **a);
  if (kept > 0) {
    EXPECT_GT(set.memory_bytes(), before);  // the renamed graphs, now built
  }
}

TEST(ClassFiles, gen_llm_classes_read_back_as_its_rank_files) {
  ParallelPlan plan;
  plan.tp = 2;
  plan.dp = 2;
  plan.pp = 4;
  plan.global_batch = 8;
  plan.zero = 1;
  Expected<LlmGenerator> generator = LlmGenerator::create(tiny_gpt(), plan);
  ASSERT_TRUE(generator) << generator.error().message();
  for (const bool gzip : {false, true}) {
    SCOPED_TRACE(gzip ? "gzip" : "plain");
    expect_class_files_read_as_rank_files(
        [&](const std::string& prefix, const RankFileOptions& options) {
          return write_llm_traces(*generator, prefix, options);
        },
        gzip, 4, 12);  // one class per stage; 16 ranks
  }
}

TEST(ClassFiles, gen_inference_and_dlrm_classes_read_back_as_their_rank_files) {
  InferencePlan plan;
  plan.tp = 2;
  plan.pp = 3;
  plan.prompt_lengths = {64, 32};
  plan.output_lengths = {3, 5};
  Expected<InferenceGenerator> inference = InferenceGenerator::create(tiny_gpt(), plan);
  ASSERT_TRUE(inference) << inference.error().message();
  expect_class_files_read_as_rank_files(
      [&](const std::string& prefix, const RankFileOptions& options) {
        return write_inference_traces(*inference, prefix, options);
      },
      false, 3, 3);
  // DLRM ranks are grouped by identical programs: data-parallel MLPs with every table
  // row-wise sharded over all ranks give one program for all of them.
  DlrmPlan dlrm_plan;
  dlrm_plan.ranks = 4;
  dlrm_plan.global_batch = 64;
  dlrm_plan.sharding = Sharding::kRow;
  Expected<DlrmGenerator> dlrm = DlrmGenerator::create(test::small_dlrm(), dlrm_plan);
  ASSERT_TRUE(dlrm) << dlrm.error().message();
  expect_class_files_read_as_rank_files(
      [&](const std::string& prefix, const RankFileOptions& options) {
        return write_dlrm_traces(*dlrm, prefix, options);
      },
      false, 1, 0);
}

}  // namespace llm_classes_test
}  // namespace orrery::gen
