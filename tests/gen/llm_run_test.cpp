// Generated training and inference traces as the simulator sees them: every rank file validates
// strictly and runs to completion under many plans, and the pipeline bubble `orrery run` measures
// is the schedule's (p-1)/(m+p-1), or (p-1)/(v m+p-1) interleaved, within 1%.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "chakra/trace_file.h"
#include "chakra/validation.h"
#include "gen/gen_test_support.h"
#include "gen/inference_generator.h"
#include "gen/llm_generator.h"
#include "sim/sim_test_support.h"
#include "workload/comm_groups.h"

namespace orrery::gen {
namespace {

using test::plan_of;
using test::TempDir;
using test::tiny_gpt;
using test::tiny_moe;

struct Network {
  std::string kinds;
  std::string sizes;
  std::string bandwidths;
  std::string latencies;
  uint32_t dims = 1;
};

// Every rank file validates in strict mode and the group file reads back.
void expect_valid_files(const GeneratedTraces& traces, uint32_t ranks) {
  ASSERT_EQ(traces.rank_files.size(), ranks);
  for (const std::string& path : traces.rank_files) {
    Expected<chakra::TraceGraph> graph = chakra::load_trace(path);
    ASSERT_TRUE(graph) << graph.error().message();
    const chakra::ValidationReport report = chakra::validate_trace(*graph);
    EXPECT_TRUE(report.passes(chakra::ValidationMode::kStrict)) << path;
    for (const std::string& line : report.summary_lines()) ADD_FAILURE() << path << ": " << line;
  }
  workload::CommGroups groups(ranks);
  EXPECT_TRUE(workload::load_comm_group_file(traces.group_file, groups));
  EXPECT_EQ(groups.named().size(), traces.groups);
}

Expected<sim::RunResult> run_files(const TempDir& dir, const GeneratedTraces& traces,
                                   const std::string& prefix, const Network& network,
                                   const std::string& backend, const std::string& system) {
  test::write_text(dir.file("sys.json"), system);
  test::write_text(dir.file("net.yml"), test::network_yaml(network.kinds, network.sizes,
                                                           network.bandwidths, network.latencies));
  sim::RunConfig config;
  config.workload = prefix;
  config.comm_groups = traces.group_file;
  config.system = dir.file("sys.json");
  config.network = dir.file("net.yml");
  config.backend = backend;
  config.mode = chakra::ValidationMode::kStrict;
  return sim::run_simulation(config, [](const std::string& warning) { ADD_FAILURE() << warning; });
}

std::string roofline_system(uint32_t dims, double peak_tflops = 300, double mem_bw = 2000) {
  return test::system_json(
      "ring", dims, 4, 1, 10, mem_bw, "localBWAware",
      fmt::format(", \"roofline-enabled\": 1, \"peak-perf\": {}", peak_tflops));
}

// Generates, validates and runs one plan; returns the run.
sim::RunResult generate_and_run(const TempDir& dir, const TransformerModel& model,
                                const ParallelPlan& plan, const Network& network,
                                const std::string& backend = "analytical",
                                const std::string& system = "") {
  Expected<LlmGenerator> gen = LlmGenerator::create(model, plan);
  EXPECT_TRUE(gen) << gen.error().message();
  if (!gen) return {};
  RankFileOptions options;
  options.threads = 2;
  const std::string prefix = dir.file("trace/w");
  Expected<GeneratedTraces> traces = write_llm_traces(*gen, prefix, options);
  EXPECT_TRUE(traces) << traces.error().message();
  if (!traces) return {};
  expect_valid_files(*traces, gen->ranks());
  Expected<sim::RunResult> result =
      run_files(dir, *traces, prefix, network, backend,
                system.empty() ? roofline_system(network.dims) : system);
  EXPECT_TRUE(result) << result.error().message();
  if (!result) return {};
  for (const auto& rank : result->rank_results) {
    EXPECT_TRUE(rank.finished) << "rank " << rank.rank;
    EXPECT_EQ(rank.completed, rank.nodes) << "rank " << rank.rank;
    EXPECT_GT(rank.gpu_compute, SimTime::zero());
  }
  return std::move(*result);
}

const Network kCube{"Ring, Ring, Switch", "2, 2, 2", "200, 100, 50", "500, 500, 1000", 3};

TEST(LlmRun, tensor_sequence_pipeline_data_zero1_and_recomputation_run) {
  TempDir dir;
  ParallelPlan plan = plan_of(2, 2, 2, 8);
  plan.sp = true;
  plan.zero = 1;
  plan.recompute = true;
  const sim::RunResult result = generate_and_run(dir, tiny_gpt(), plan, kCube);
  EXPECT_GT(result.collectives.size(), 0u);
}

TEST(LlmRun, context_parallel_with_fsdp_runs_on_the_congestion_aware_backend) {
  TempDir dir;
  ParallelPlan plan = plan_of(2, 2, 1, 4);
  plan.cp = 2;
  plan.zero = 3;
  generate_and_run(dir, tiny_gpt(), plan, kCube, "congestion-aware");
}

TEST(LlmRun, expert_parallel_moe_with_zero2_runs) {
  TempDir dir;
  ParallelPlan plan = plan_of(4, 2, 1, 8);
  plan.ep = 2;
  plan.zero = 2;
  generate_and_run(dir, tiny_moe(), plan, kCube);
}

TEST(LlmRun, interleaved_pipeline_with_buckets_and_tied_embeddings_runs) {
  TempDir dir;
  ParallelPlan plan = plan_of(1, 2, 4, 8);
  plan.schedule = PipelineSchedule::kInterleaved;
  plan.virtual_stages = 2;
  plan.bucket_bytes = 256 * 1024;
  TransformerModel model = tiny_gpt();
  model.layers = 8;
  const Network network{"Ring, Switch", "2, 4", "200, 50", "500, 1000", 2};
  generate_and_run(dir, model, plan, network, "congestion-aware");
}

TEST(LlmRun, data_and_pipeline_parallel_tied_embeddings_with_zero1_run) {
  TempDir dir;
  ParallelPlan plan = plan_of(4, 1, 2, 8, 2);
  plan.zero = 1;
  const Network network{"Ring, Switch", "4, 2", "200, 50", "500, 1000", 2};
  generate_and_run(dir, tiny_gpt(), plan, network);
}

// A model whose pipeline stages all take the same time: no vocabulary to speak of, and a system
// where compute dominates (memory bandwidth so high that only FLOPs count, a network so fast that
// pipeline messages take nanoseconds next to the 86 us of a layer's forward).
TransformerModel uniform_model() {
  TransformerModel model;
  model.name = "uniform";
  model.layers = 16;
  model.hidden = 512;
  model.heads = 8;
  model.kv_heads = 8;
  model.ffn = 2048;
  model.vocab = 8;
  model.seq = 1024;
  return model;
}

double measured_bubble(const sim::RunResult& result, uint32_t rank) {
  const double compute = static_cast<double>(result.rank_results[rank].gpu_compute.ps());
  return 1.0 - compute / static_cast<double>(result.end.ps());
}

TEST(LlmRun, one_f_one_b_bubble_is_p_minus_1_over_m_plus_p_minus_1) {
  TempDir dir;
  const ParallelPlan plan = plan_of(1, 1, 4, 8);
  const Network network{"Ring", "4", "1000000", "1", 1};
  const sim::RunResult result = generate_and_run(dir, uniform_model(), plan, network, "analytical",
                                                 roofline_system(1, 100, 1e6));
  const double expected = 3.0 / (8 + 3);
  for (uint32_t rank = 0; rank < 4; ++rank) {
    EXPECT_NEAR(measured_bubble(result, rank) / expected, 1.0, 0.01) << "stage " << rank;
  }
}

TEST(LlmRun, interleaved_bubble_is_p_minus_1_over_v_m_plus_p_minus_1) {
  for (const uint32_t chunks : {2U, 4U}) {
    TempDir dir;
    ParallelPlan plan = plan_of(1, 1, 4, 8);
    plan.schedule = PipelineSchedule::kInterleaved;
    plan.virtual_stages = chunks;
    const Network network{"Ring", "4", "1000000", "1", 1};
    const sim::RunResult result = generate_and_run(dir, uniform_model(), plan, network,
                                                   "analytical", roofline_system(1, 100, 1e6));
    const double expected = 3.0 / (chunks * 8 + 3);
    for (uint32_t rank = 0; rank < 4; ++rank) {
      EXPECT_NEAR(measured_bubble(result, rank) / expected, 1.0, 0.01)
          << "stage " << rank << ", " << chunks << " chunks";
    }
  }
}

TEST(InferenceRun, prefill_and_decode_with_tensor_and_pipeline_parallelism_run) {
  TempDir dir;
  InferencePlan plan;
  plan.tp = 2;
  plan.pp = 2;
  plan.prompt_lengths = {64, 32, 16, 128};
  plan.output_lengths = {8, 3, 5, 1};
  plan.micro_batches = 2;
  Expected<InferenceGenerator> gen = InferenceGenerator::create(tiny_moe(), plan);
  ASSERT_TRUE(gen) << gen.error().message();
  const std::string prefix = dir.file("serve/s");
  Expected<GeneratedTraces> traces = write_inference_traces(*gen, prefix, RankFileOptions{});
  ASSERT_TRUE(traces) << traces.error().message();
  expect_valid_files(*traces, 4);
  const Network network{"Ring, Switch", "2, 2", "200, 50", "500, 1000", 2};
  Expected<sim::RunResult> result =
      run_files(dir, *traces, prefix, network, "analytical", roofline_system(2));
  ASSERT_TRUE(result) << result.error().message();
  for (const auto& rank : result->rank_results) EXPECT_TRUE(rank.finished) << rank.rank;
}

}  // namespace
}  // namespace orrery::gen
