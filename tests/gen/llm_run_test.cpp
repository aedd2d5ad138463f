// Generated training and inference traces as the simulator sees them: every rank file validates
// strictly and runs to completion under many plans, and the pipeline bubble `orrery run` measures
// is the schedule's (p-1)/(m+p-1), or (p-1)/(v m+p-1) interleaved, within 1%.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "chakra/comm_groups.h"
#include "chakra/trace_file.h"
#include "chakra/validation.h"
#include "gen/dlrm_generator.h"
#include "gen/gen_test_support.h"
#include "gen/inference_generator.h"
#include "gen/llm_generator.h"
#include "gen/rescale.h"
#include "sim/sim_test_support.h"

// Some inputs are the public files in ../shared/data; without that folder these tests skip.
#define SKIP_WITHOUT_SHARED_DATA()                            \
  if (!std::filesystem::is_directory(ORRERY_SHARED_DATA_DIR)) \
  GTEST_SKIP() << "no " ORRERY_SHARED_DATA_DIR

namespace orrery::gen {
namespace llm_run_test {

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
  chakra::CommGroups groups(ranks);
  EXPECT_TRUE(chakra::load_comm_group_file(traces.group_file, groups));
  EXPECT_EQ(groups.named().size(), traces.groups);
}

// Runs generated rank files strictly; the system and network are given as text.
Expected<sim::RunResult> run_files(const GeneratedTraces& traces, const std::string& prefix,
                                   const Network& network, const std::string& backend,
                                   const std::string& system) {
  test::RunInputs inputs;
  inputs.traces = test::load_traces(prefix);
  inputs.system = system;
  inputs.network =
      test::network_yaml(network.kinds, network.sizes, network.bandwidths, network.latencies);
  inputs.comm_groups = test::read_text(traces.group_file);
  inputs.settings.backend = backend;
  inputs.settings.mode = chakra::ValidationMode::kStrict;
  std::vector<std::string> warnings;
  Expected<sim::RunResult> result = test::simulate(inputs, &warnings);
  for (const std::string& warning : warnings) ADD_FAILURE() << warning;
  return result;
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
  Expected<sim::RunResult> result = run_files(
      *traces, prefix, network, backend, system.empty() ? roofline_system(network.dims) : system);
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

TEST(LlmRun, a_plan_built_in_memory_runs_exactly_as_its_rank_files) {
  TempDir dir;
  ParallelPlan plan = plan_of(2, 2, 2, 8);
  plan.zero = 1;
  const sim::RunResult from_files = generate_and_run(dir, tiny_gpt(), plan, kCube);
  Expected<LlmGenerator> gen = LlmGenerator::create(tiny_gpt(), plan);
  ASSERT_TRUE(gen) << gen.error().message();
  Expected<BuiltTraces> built = build_llm_traces(*gen, "tiny", RankFileOptions{});
  ASSERT_TRUE(built) << built.error().message();
  // Every rank of this plan has its own groups, hence its own graph; ranks of a data-parallel
  // plan run the same program and share one.
  EXPECT_EQ(built->traces->rank_count(), 8u);
  EXPECT_EQ(built->traces->graph_count(), 8u);
  Expected<LlmGenerator> data_parallel = LlmGenerator::create(tiny_gpt(), plan_of(4, 1, 1, 8));
  ASSERT_TRUE(data_parallel) << data_parallel.error().message();
  Expected<BuiltTraces> shared = build_llm_traces(*data_parallel, "dp", RankFileOptions{});
  ASSERT_TRUE(shared) << shared.error().message();
  EXPECT_EQ(shared->traces->rank_count(), 4u);
  EXPECT_EQ(shared->traces->graph_count(), 1u);
  EXPECT_EQ(built->groups->named().size(), gen->groups().count());
  test::RunInputs inputs;
  inputs.traces = built->traces;
  inputs.system = roofline_system(3);
  inputs.network = test::network_yaml(kCube.kinds, kCube.sizes, kCube.bandwidths, kCube.latencies);
  sim::Scenario::Inputs parts;
  Expected<sim::Scenario> base = test::make_scenario(inputs);
  ASSERT_TRUE(base) << base.error().message();
  parts = base->inputs();
  parts.comm_groups = built->groups;
  parts.settings.mode = chakra::ValidationMode::kStrict;
  Expected<sim::Scenario> scenario = sim::Scenario::create(parts);
  ASSERT_TRUE(scenario) << scenario.error().message();
  Expected<sim::RunResult> in_memory = sim::simulate(*scenario);
  ASSERT_TRUE(in_memory) << in_memory.error().message();
  ASSERT_EQ(in_memory->rank_results.size(), from_files.rank_results.size());
  for (size_t rank = 0; rank < from_files.rank_results.size(); ++rank) {
    EXPECT_EQ(in_memory->rank_results[rank].finish, from_files.rank_results[rank].finish);
    EXPECT_EQ(in_memory->rank_results[rank].comm_exposed,
              from_files.rank_results[rank].comm_exposed);
  }
  EXPECT_EQ(in_memory->collectives.size(), from_files.collectives.size());
  EXPECT_EQ(in_memory->events, from_files.events);
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
      run_files(*traces, prefix, network, "analytical", roofline_system(2));
  ASSERT_TRUE(result) << result.error().message();
  for (const auto& rank : result->rank_results) EXPECT_TRUE(rank.finished) << rank.rank;
}

TEST(DlrmRun, every_sharding_validates_and_runs_with_the_embedding_exchange_on_the_network) {
  for (const Sharding sharding : {Sharding::kTable, Sharding::kRow, Sharding::kColumn}) {
    TempDir dir;
    Expected<DlrmModel> model = resolve_dlrm_model("dlrm-kaggle");
    ASSERT_TRUE(model);
    DlrmPlan plan;
    plan.ranks = 8;
    plan.global_batch = 2048;
    plan.sharding = sharding;
    Expected<DlrmGenerator> gen = DlrmGenerator::create(*model, plan);
    ASSERT_TRUE(gen) << gen.error().message();
    const std::string prefix = dir.file("dlrm/d");
    Expected<GeneratedTraces> traces = write_dlrm_traces(*gen, prefix, RankFileOptions{});
    ASSERT_TRUE(traces) << traces.error().message();
    expect_valid_files(*traces, 8);
    Expected<sim::RunResult> result =
        run_files(*traces, prefix, kCube, "analytical", roofline_system(3));
    ASSERT_TRUE(result) << result.error().message();
    const DlrmComm comm = dlrm_comm(*model, plan);
    for (const auto& rank : result->rank_results) {
      EXPECT_TRUE(rank.finished) << sharding_name(sharding) << " rank " << rank.rank;
      EXPECT_EQ(rank.completed, rank.nodes);
    }
    // 3 embedding collectives and one all-reduce per MLP layer (4 bottom, 3 top), each once.
    ASSERT_EQ(result->collectives.size(), 10u) << sharding_name(sharding);
    uint64_t bytes = 0;
    for (const auto& collective : result->collectives) bytes += collective.bytes;
    uint64_t expected = comm.index_all_to_all + comm.output_dist + comm.grad_dist;
    for (uint64_t reduce : comm.mlp_all_reduce) expected += reduce;
    EXPECT_EQ(bytes, expected) << sharding_name(sharding);
  }
}

TEST(RescaleRun, generated_dp_2_traces_rescaled_to_dp_8_validate_and_run) {
  TempDir dir;
  ParallelPlan plan = plan_of(2, 2, 2, 8);
  plan.zero = 1;
  Expected<LlmGenerator> gen = LlmGenerator::create(tiny_gpt(), plan);
  ASSERT_TRUE(gen);
  Expected<GeneratedTraces> traces = write_llm_traces(*gen, dir.file("in/w"), RankFileOptions{});
  ASSERT_TRUE(traces);
  RescaleSpec spec;
  spec.workload = dir.file("in/w");
  spec.comm_groups = traces->group_file;
  spec.from_dp = 2;
  spec.to_dp = 8;
  spec.stride = 2;
  spec.output = dir.file("out/w");
  Expected<RescaleResult> rescaled = rescale_traces(spec);
  ASSERT_TRUE(rescaled) << rescaled.error().message();
  GeneratedTraces out;
  out.rank_files = rescaled->rank_files;
  out.group_file = rescaled->group_file;
  out.groups = rescaled->new_groups;
  expect_valid_files(out, 32);
  const Network network{"Ring, Ring, Switch", "2, 8, 2", "200, 100, 50", "500, 500, 1000", 3};
  Expected<sim::RunResult> result =
      run_files(out, dir.file("out/w"), network, "analytical", roofline_system(3));
  ASSERT_TRUE(result) << result.error().message();
  for (const auto& rank : result->rank_results) {
    EXPECT_TRUE(rank.finished) << rank.rank;
    EXPECT_EQ(rank.completed, rank.nodes) << rank.rank;
  }
}

// A real trace set: Symbolic Tensor Graph's dp 2 x tp 2 x pp 2 Llama (data-parallel ranks
// adjacent, stride 1; tensor groups {0, 2}; pipeline sends to rank + 4), rescaled to dp 4.
TEST(RescaleRun, symbolic_tensor_graph_dp2_tp2_pp2_rescaled_to_dp4_runs) {
  SKIP_WITHOUT_SHARED_DATA();
  const std::string in = std::string(ORRERY_SHARED_DATA_DIR) +
                         "/astra-sim+symbolic_tensor_graph/generated/out_dp2tp2pp2/workload";
  TempDir dir;
  RescaleSpec spec;
  spec.workload = in;
  spec.comm_groups = in + ".json";
  spec.from_dp = 2;
  spec.to_dp = 4;
  spec.stride = 1;
  spec.output = dir.file("out/w");
  Expected<RescaleResult> rescaled = rescale_traces(spec);
  ASSERT_TRUE(rescaled) << rescaled.error().message();
  EXPECT_EQ(rescaled->new_ranks, 16u);
  // 4 data groups {0, 1}, ...; 4 tensor groups and 8 one-rank groups within a replica.
  EXPECT_EQ(rescaled->data_groups, 4u);
  EXPECT_EQ(rescaled->replica_groups, 12u);
  EXPECT_EQ(rescaled->new_groups, 4u + 2 * 12);
  chakra::CommGroups groups(16);
  ASSERT_TRUE(chakra::load_comm_group_file(rescaled->group_file, groups));
  EXPECT_EQ(groups.find("1")->ranks, (std::vector<uint32_t>{0, 1, 2, 3}));
  GeneratedTraces out;
  out.rank_files = rescaled->rank_files;
  out.group_file = rescaled->group_file;
  out.groups = rescaled->new_groups;
  expect_valid_files(out, 16);
  const Network network{"Ring, Ring, Switch", "4, 2, 2", "200, 100, 50", "500, 500, 1000", 3};
  Expected<sim::RunResult> result =
      run_files(out, dir.file("out/w"), network, "analytical", roofline_system(3));
  ASSERT_TRUE(result) << result.error().message();
  uint64_t nodes = 0;
  for (const auto& rank : result->rank_results) {
    EXPECT_TRUE(rank.finished) << rank.rank;
    EXPECT_EQ(rank.completed, rank.nodes) << rank.rank;
    nodes += rank.nodes;
  }
  EXPECT_EQ(nodes, 2u * 784);  // every input rank twice
}

}  // namespace llm_run_test
}  // namespace orrery::gen
