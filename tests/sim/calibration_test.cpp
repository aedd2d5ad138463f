// ASTRA-sim 2.x's own figures (reference/astra-sim-compat.md), reproduced to the nanosecond by
// traces orrery generates and by the microbenchmark .et files ASTRA-sim ships.
//
// Settings: LIFO, 4 chunks, 1 active chunk per dimension, endpoint delay 10 ns, local-mem-bw 1600,
// localBWAware; one dimension of 8 ranks, 50 GB/s, 500 ns. The model behind the numbers is in
// docs/models/system.md (e.g. ring all-reduce of 1 MiB: 4 chunks x (10 + 14 x (1,110 + 10) +
// 7 x 60) = 64,440 ns).
#include <gtest/gtest.h>

#include "sim/sim_test_support.h"

namespace orrery::sim {
namespace calibration_test {

using gen::MicrobenchKind;
using test::MicroRun;

constexpr uint64_t kMiB = 1 << 20;

struct Figure {
  const char* topology;
  const char* algorithm;
  MicrobenchKind kind;
  int64_t ns[3];  // 1 MiB, 64 MiB, 1 GiB
  bool aware_too;
};

const Figure kFigures[] = {
    {"Ring", "ring", MicrobenchKind::kAllReduce, {64440, 2326112, 36790164}, true},
    {"Ring", "ring", MicrobenchKind::kAllGather, {151016, 8764320, 140014320}, true},
    {"Ring", "ring", MicrobenchKind::kReduceScatter, {33080, 1218096, 19275884}, true},
    {"Ring", "ring", MicrobenchKind::kAllToAll, {125480, 4432104, 70057160}, true},
    {"FullyConnected", "direct", MicrobenchKind::kAllReduce, {9240, 332336, 5255772}, true},
    {"FullyConnected", "direct", MicrobenchKind::kAllGather, {21608, 1252080, 20002080}, true},
    {"FullyConnected", "direct", MicrobenchKind::kReduceScatter, {4760, 174048, 2753732}, true},
    {"FullyConnected", "direct", MicrobenchKind::kAllToAll, {4520, 158328, 2502080}, true},
    {"Switch", "ring", MicrobenchKind::kAllReduce, {92440, 2354112, 36818164}, false},
};

// A readable, stable test name (the default prints the struct's bytes, pointers included).
void PrintTo(const Figure& figure, std::ostream* os) {
  *os << figure.topology << " " << figure.algorithm << " " << static_cast<int>(figure.kind);
}

class CalibrationTable : public ::testing::TestWithParam<Figure> {};

TEST_P(CalibrationTable, every_size_matches_astra_sim_to_the_nanosecond) {
  const Figure& figure = GetParam();
  const uint64_t sizes[3] = {kMiB, 64 * kMiB, 1024 * kMiB};
  for (const char* backend : {"analytical", "congestion-aware"}) {
    if (std::string(backend) == "congestion-aware" && !figure.aware_too) continue;
    for (int idx = 0; idx < 3; ++idx) {
      MicroRun run;
      run.kind = figure.kind;
      run.bytes = sizes[idx];
      run.backend = backend;
      run.system = test::system_json(figure.algorithm, 1);
      run.network = test::network_yaml(figure.topology, "8", "50.0", "500.0");
      auto result = test::run_micro(run);
      ASSERT_TRUE(result) << result.error().message();
      EXPECT_EQ(test::common_finish_ns(*result), figure.ns[idx])
          << figure.topology << " " << figure.algorithm << " " << backend << " " << sizes[idx]
          << " B";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AstraSim, CalibrationTable, ::testing::ValuesIn(kFigures));

// The public examples, with ASTRA-sim's own example files (copies in tests/data).
std::string data(const std::string& relative) { return test::test_data(relative); }

Expected<RunResult> run_files(const std::string& workload, const std::string& system,
                              const std::string& network, const std::string& backend) {
  RunConfig config;
  config.workload = workload;
  config.system = system;
  config.network = network;
  config.backend = backend;
  return run_simulation(config, [](const std::string&) {});
}

TEST(PublicExamples, reduce_scatter_1mb_on_4_ranks_takes_22240_ns) {
  auto result = run_files(data("astra-sim/microbenchmarks/reduce_scatter/4npus_1MB/reduce_scatter"),
                          data("astra-sim/configs/Ring_4chunks.json"),
                          data("network/Ring_4npus.yml"), "analytical");
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_EQ(test::common_finish_ns(*result), 22240);
}

TEST(PublicExamples, all_gather_1mb_on_16_ranks_congestion_aware_takes_323560_ns) {
  gen::MicrobenchSpec micro;
  micro.kind = MicrobenchKind::kAllGather;
  micro.bytes = kMiB;
  micro.ranks = 16;
  auto traces = gen::build_microbench(micro);
  ASSERT_TRUE(traces) << traces.error().message();
  test::RunInputs inputs;
  inputs.traces = *traces;
  inputs.system = test::read_text(data("astra-sim/configs/Ring_4chunks.json"));
  inputs.network = test::read_text(data("network/Ring_16npus.yml"));
  inputs.settings.backend = "congestion-aware";
  auto result = test::simulate(inputs);
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_EQ(test::common_finish_ns(*result), 323560);
}

TEST(PublicExamples, hgx_h100_all_reduce_with_two_active_chunks_takes_57426_ns) {
  // Two chunks contend for each rank's switch uplink: the second waits 76 ns, then both flow.
  auto result = run_files(data("astra-sim/microbenchmarks/all_reduce/8npus_1MB/all_reduce"),
                          data("astra-sim/configs/HGX-H100-validated.json"),
                          data("network/HGX-H100-validated.yml"), "congestion-aware");
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_EQ(test::common_finish_ns(*result), 57426);
}

TEST(PublicExamples, custom_ring_all_reduce_graph_takes_90174_ns) {
  // The collective runs as ASTRA-sim's own point-to-point graph: 14 x 2,941 + 7 x 7,000 ns.
  test::RunInputs inputs;
  inputs.traces =
      test::load_traces(data("astra-sim/microbenchmarks/all_reduce/8npus_1MB/all_reduce"));
  inputs.system = fmt::format(
      "{{\"scheduling-policy\": \"FIFO\", \"preferred-dataset-splits\": 1,\n"
      " \"all-reduce-implementation-custom\": [\"{}\"], \"local-mem-bw\": 50}}\n",
      data("astra-sim/custom_ring_allreduce/custom_allreduce"));
  inputs.network = test::read_text(data("network/Ring_8npus.yml"));
  inputs.settings.backend = "congestion-aware";
  auto result = test::simulate(inputs);
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_EQ(test::common_finish_ns(*result), 90174);
}

TEST(PublicExamples, the_shipped_microbenchmark_files_give_the_table_figures) {
  const std::pair<const char*, int64_t> cases[] = {{"all_reduce", 64440},
                                                   {"all_gather", 151016},
                                                   {"reduce_scatter", 33080},
                                                   {"all_to_all", 125480}};
  for (const auto& [name, expected] : cases) {
    test::RunInputs inputs;
    inputs.traces = test::load_traces(
        data(std::string("astra-sim/microbenchmarks/") + name + "/8npus_1MB/" + name));
    inputs.system = test::system_json("ring", 1);
    inputs.network = test::network_yaml("Ring", "8", "50.0", "500.0");
    auto result = test::simulate(inputs);
    ASSERT_TRUE(result) << result.error().message();
    EXPECT_EQ(test::common_finish_ns(*result), expected) << name;
  }
}

}  // namespace calibration_test
}  // namespace orrery::sim
