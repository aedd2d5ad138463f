// `orrery collective`'s library: sizes as nccl-tests sweeps them, simulated rows against the
// model's closed form, nccl-tests files, and doubleBinaryTree run where ASTRA-sim cannot.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "chakra/comm_groups.h"
#include "chakra/trace_builder.h"
#include "hardware/collective_bench.h"
#include "hardware/nccl_tests_file.h"
#include "hardware/preset.h"
#include "sim/scenario.h"
#include "sim/simulation.h"

namespace orrery::hw {
namespace collective_bench_test {

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

BenchMachine machine(const std::string& preset, uint32_t nodes, uint32_t per_node = 0) {
  Expected<HardwarePreset> p = load_preset(preset);
  EXPECT_TRUE(p);
  Expected<Hardware> hw = build_hardware(*p, nodes, "", per_node);
  EXPECT_TRUE(hw) << hw.error().message();
  return BenchMachine{hw->system, hw->network, hw->description};
}

TEST(CollectiveBench, sizes_sweep_as_nccl_tests) {
  BenchOptions options;
  options.min_bytes = 8;
  options.max_bytes = 1024;
  options.factor = 4;
  Expected<std::vector<uint64_t>> sizes = bench_sizes(options, 8);
  ASSERT_TRUE(sizes);
  EXPECT_EQ(*sizes, (std::vector<uint64_t>{8, 32, 128, 512}));
  // All-gather buffers are whole floats per rank (multiples of 32 bytes on 8): 8 rounds to 0.
  options.op = gen::MicrobenchKind::kAllGather;
  options.max_bytes = 2048;
  sizes = bench_sizes(options, 8);
  ASSERT_TRUE(sizes);
  EXPECT_EQ(*sizes, (std::vector<uint64_t>{32, 128, 512, 2048}));
  options.min_bytes = 4096;
  EXPECT_CONTAINS(bench_sizes(options, 8).error().message(), "-b 4096 is above -e 2048");
  options.min_bytes = 8;
  options.factor = 1;
  EXPECT_CONTAINS(bench_sizes(options, 8).error().message(), "-f 1");
  options.op = gen::MicrobenchKind::kBarrier;
  EXPECT_FALSE(bench_sizes(options, 8));
  // From 0 the sizes never grew: `-b 0 -e 8` ran forever.
  options.op = gen::MicrobenchKind::kAllReduce;
  options.factor = 2;
  options.min_bytes = 0;
  options.max_bytes = 8;
  EXPECT_EQ(bench_sizes(options, 8).error().message(), "-b 0: sizes start at 1 byte or more");
  // Nothing to run is an error, not an empty table.
  options.op = gen::MicrobenchKind::kAllGather;
  options.min_bytes = 1;
  options.max_bytes = 31;
  EXPECT_EQ(bench_sizes(options, 8).error().message(),
            "-b 1 -e 31: every size rounds down to 0 bytes (the op divides its buffer over 8 ranks "
            "in 4-byte floats: sizes are multiples of 32 bytes)");
}

// The simulated time is the model's closed form: NCCL's time for the chosen pair (the barrier of
// 1-byte messages on latency-free links adds picoseconds).
TEST(CollectiveBench, rows_are_the_nccl_model_on_the_preset) {
  for (const auto& [preset, nodes] :
       {std::pair{"dgx-a100", 1u}, std::pair{"dgx-h100", 1u}, std::pair{"dgx-a100", 2u}}) {
    const BenchMachine m = machine(preset, nodes);
    BenchOptions options;
    options.rounding = net::TimeRounding::kExact;
    const std::vector<uint64_t> sizes = {8, uint64_t{1} << 20, uint64_t{1} << 30};
    Expected<std::vector<BenchRow>> rows = run_bench(m, options, sizes);
    ASSERT_TRUE(rows) << rows.error().message();
    ASSERT_EQ(rows->size(), 3u);
    const uint32_t ranks = 8 * nodes;
    sys::NcclFabric fabric;
    fabric.ranks = ranks;
    fabric.nodes = nodes;
    fabric.nvlink_gbps = m.system->path == "builtin:dgx-h100.yaml" ? 450 : 300;
    fabric.net_gbps = nodes > 1 ? 200 : 0;
    for (size_t idx = 0; idx < sizes.size(); ++idx) {
      const sys::NcclEstimate e =
          sys::nccl_estimate(sys::NcclOp::kAllReduce, sizes[idx], fabric, m.system->nccl);
      const BenchRow& row = (*rows)[idx];
      EXPECT_EQ(row.size, sizes[idx]);
      EXPECT_EQ(row.count, sizes[idx] / 4);
      EXPECT_NEAR(row.time_us, e.time_us, 1e-3) << preset << " " << sizes[idx];
      EXPECT_NEAR(row.algbw, static_cast<double>(row.size) / (row.time_us * 1e3), 1e-9);
      EXPECT_NEAR(row.busbw, row.algbw * 2.0 * (ranks - 1) / ranks, 1e-9);
    }
  }
  // DGX A100 at 1 GiB is a Simple ring: 8.5 + 8.4 + 14 x 3.79 us + 1.75 S / (300 x 0.776 GB/s).
  Expected<std::vector<BenchRow>> a100 =
      run_bench(machine("dgx-a100", 1), BenchOptions{}, {uint64_t{1} << 30});
  ASSERT_TRUE(a100);
  EXPECT_NEAR((*a100)[0].time_us, 8.5 + 8.4 + 14 * 3.79 + 1.75 * 1073741824.0 / (300 * 0.776 * 1e3),
              1e-3);
}

// Each row names the pair the model picks, and that pair's time is the row's. The picks follow
// NCCL's constants: LL for small buffers, trees across nodes, NVLS in an H100 node.
TEST(CollectiveBench, rows_name_the_pair_the_nccl_model_picks) {
  struct Case {
    const char* preset;
    uint32_t nodes;
    uint64_t size;
    sys::NcclAlgorithm algorithm;
    sys::NcclProtocol protocol;
  };
  for (const Case& c : {
           Case{"dgx-h100", 1, 8, sys::NcclAlgorithm::kRing, sys::NcclProtocol::kLL},
           Case{"dgx-h100", 1, uint64_t{128} << 20, sys::NcclAlgorithm::kNvls,
                sys::NcclProtocol::kSimple},
           Case{"dgx-a100", 2, uint64_t{512} << 10, sys::NcclAlgorithm::kTree,
                sys::NcclProtocol::kLL},
           Case{"dgx-a100", 2, uint64_t{1} << 20, sys::NcclAlgorithm::kTree,
                sys::NcclProtocol::kLL128},
           Case{"dgx-a100", 2, uint64_t{32} << 20, sys::NcclAlgorithm::kRing,
                sys::NcclProtocol::kSimple},
           Case{"dgx-a100", 2, uint64_t{64} << 20, sys::NcclAlgorithm::kRing,
                sys::NcclProtocol::kSimple},
           Case{"dgx-a100", 1, uint64_t{16} << 20, sys::NcclAlgorithm::kRing,
                sys::NcclProtocol::kLL128},
       }) {
    BenchOptions options;
    options.rounding = net::TimeRounding::kExact;
    Expected<std::vector<BenchRow>> rows = run_bench(machine(c.preset, c.nodes), options, {c.size});
    ASSERT_TRUE(rows) << rows.error().message();
    const BenchRow& row = (*rows)[0];
    ASSERT_TRUE(row.nccl.has_value()) << c.preset << " " << c.size;
    EXPECT_EQ(sys::nccl_algorithm_name(row.nccl->algorithm), sys::nccl_algorithm_name(c.algorithm))
        << c.preset << " " << c.size;
    EXPECT_EQ(sys::nccl_protocol_name(row.nccl->protocol), sys::nccl_protocol_name(c.protocol))
        << c.preset << " " << c.size;
    EXPECT_NEAR(row.time_us, row.nccl->time_us, 1e-3);
  }
}

TEST(CollectiveBench, every_op_runs_on_a_preset_and_busbw_uses_its_factor) {
  const BenchMachine m = machine("hgx-b200", 1, 4);
  const std::pair<gen::MicrobenchKind, double> ops[] = {
      {gen::MicrobenchKind::kAllReduce, 1.5},      {gen::MicrobenchKind::kAllGather, 0.75},
      {gen::MicrobenchKind::kReduceScatter, 0.75}, {gen::MicrobenchKind::kAllToAll, 0.75},
      {gen::MicrobenchKind::kBroadcast, 1.0},      {gen::MicrobenchKind::kReduce, 1.0}};
  for (const auto& [op, factor] : ops) {
    BenchOptions options;
    options.op = op;
    Expected<std::vector<BenchRow>> rows = run_bench(m, options, {uint64_t{64} << 20});
    ASSERT_TRUE(rows) << rows.error().message();
    EXPECT_GT((*rows)[0].time_us, 10.0);
    EXPECT_NEAR((*rows)[0].busbw, (*rows)[0].algbw * factor, 1e-9);
  }
}

TEST(CollectiveBench, reads_a_measured_table) {
  const std::string path =
      std::string(ORRERY_TEST_DATA_DIR) + "/hardware/dgxh100_8gpu_allreduce_nvidia_dgxc.tsv";
  Expected<std::vector<MeasuredRow>> rows = load_nccl_tests(path);
  ASSERT_TRUE(rows) << rows.error().message();
  ASSERT_EQ(rows->size(), 22u);
  EXPECT_EQ(rows->front().size, 8u);
  EXPECT_DOUBLE_EQ(rows->front().time_us, 13.67);  // out of place, not 13.03 in place
  EXPECT_EQ(rows->front().line, 4);
  EXPECT_EQ(rows->back().size, 17179869184u);
  EXPECT_DOUBLE_EQ(rows->back().time_us, 62648);
}

TEST(CollectiveBench, reads_nccl_tests_own_output) {
  const std::string text =
      "# nThread 1 nGpus 8 minBytes 8 maxBytes 1048576 step: 2(factor)\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong"
      "     time   algbw   busbw #wrong\n"
      "           8             2     float     sum      -1    13.67    0.00    0.00      0"
      "    13.03    0.00    0.00      0\n"
      "     1048576        262144     float     sum      -1    27.37   38.31   67.04      0"
      "    26.93   38.94   68.14      0\n"
      "# Avg bus bandwidth    : 33.5\n";
  Expected<std::vector<MeasuredRow>> rows = parse_nccl_tests(text, "log");
  ASSERT_TRUE(rows) << rows.error().message();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_DOUBLE_EQ((*rows)[0].time_us, 13.67);
  EXPECT_EQ((*rows)[1].size, 1048576u);
  EXPECT_DOUBLE_EQ((*rows)[1].time_us, 27.37);
  // Older nccl-tests print no redop and root.
  rows = parse_nccl_tests("  1024  256  float  20.5  0.05  0.09  0\n", "old");
  ASSERT_TRUE(rows);
  EXPECT_DOUBLE_EQ((*rows)[0].time_us, 20.5);
}

TEST(CollectiveBench, bad_measured_files_name_file_and_line) {
  EXPECT_CONTAINS(parse_nccl_tests("# nothing\n", "m.tsv").error().message(),
                  "m.tsv: no measured rows");
  EXPECT_CONTAINS(parse_nccl_tests("size_B\toop_time_us\n8\tfast\n", "m.tsv").error().message(),
                  "m.tsv:2: time 'fast' is not a positive number");
  EXPECT_CONTAINS(parse_nccl_tests("size_B\toop_time_us\n16\t1\n8\t2\n", "m.tsv").error().message(),
                  "m.tsv:3: size 8 does not increase (line 2 has 16)");
  EXPECT_CONTAINS(parse_nccl_tests("size_B\tcount\n8\t2\n", "m.tsv").error().message(),
                  "m.tsv:1: no time column");
  EXPECT_CONTAINS(parse_nccl_tests("-8 2 float 3\n", "m.tsv").error().message(),
                  "m.tsv:1: size '-8' is not a positive whole number");
  EXPECT_CONTAINS(load_nccl_tests("/nonexistent/m.tsv").error().message(), "cannot open");
}

// ASTRA-sim reads doubleBinaryTree in any list; only running a collective other than all-reduce
// on it fails, naming it.
TEST(CollectiveBench, double_binary_tree_fails_only_when_a_non_all_reduce_runs_it) {
  Expected<sys::SystemConfig> system =
      sys::parse_system_config("dbt.json",
                               R"({"all-reduce-implementation": ["doubleBinaryTree"],
          "all-gather-implementation": ["doubleBinaryTree"],
          "reduce-scatter-implementation": ["ring"], "all-to-all-implementation": ["ring"],
          "local-mem-bw": 50})");
  ASSERT_TRUE(system) << system.error().message();
  Expected<net::NetworkDescription> network = net::parse_network_yaml(
      "topology: [Switch]\nnpus_count: [8]\nbandwidth: [50]\nlatency: [500]\n", "net.yml");
  ASSERT_TRUE(network) << network.error().message();
  BenchMachine m{std::make_shared<const sys::SystemConfig>(*system),
                 std::make_shared<const net::NetworkDescription>(std::move(*network)), "net.yml"};
  BenchOptions options;
  Expected<std::vector<BenchRow>> all_reduce = run_bench(m, options, {1 << 20});
  ASSERT_TRUE(all_reduce) << all_reduce.error().message();
  options.op = gen::MicrobenchKind::kAllGather;
  Expected<std::vector<BenchRow>> all_gather = run_bench(m, options, {1 << 20});
  ASSERT_FALSE(all_gather);
  EXPECT_CONTAINS(all_gather.error().message(),
                  "dbt.json: 'all-gather-implementation' lists doubleBinaryTree for dimension 0");
  EXPECT_CONTAINS(all_gather.error().message(), "all-gather of rank 0 node 0 cannot run it");
}

// A data-parallel group with one rank per node (the rails of two DGX A100s) is timed on the
// network: one NIC of 25 GB/s per rank, not NVLink.
TEST(CollectiveBench, a_group_across_nodes_is_timed_on_its_nics) {
  const BenchMachine m = machine("dgx-a100", 2);
  const int64_t bytes = int64_t{1} << 30;
  std::vector<chakra::TraceGraph> graphs;
  auto groups = std::make_shared<chakra::CommGroups>(16);
  for (uint32_t rank = 0; rank < 16; ++rank) {
    ChakraProtoMsg::Node node = test::coll_node(1, ChakraProtoMsg::ALL_REDUCE, bytes);
    test::add_attr(node, "pg_name").set_string_val(fmt::format("rail{}", rank % 8));
    graphs.push_back(test::build_graph({node}));
    if (rank < 8) {
      ASSERT_TRUE(groups->add(fmt::format("rail{}", rank), {rank, rank + 8}, "test"));
    }
  }
  sim::Scenario::Inputs inputs;
  inputs.traces = chakra::TraceSet::from_graphs("rails", std::move(graphs));
  inputs.network = m.network;
  inputs.system = m.system;
  inputs.comm_groups = groups;
  inputs.settings.backend_options.rounding = net::TimeRounding::kExact;
  Expected<sim::Scenario> scenario = sim::Scenario::create(std::move(inputs));
  ASSERT_TRUE(scenario) << scenario.error().message();
  Expected<sim::RunResult> result = sim::simulate(*scenario);
  ASSERT_TRUE(result) << result.error().message();
  sys::NcclFabric fabric;
  fabric.ranks = 2;
  fabric.nodes = 2;
  fabric.nvlink_gbps = 300;
  fabric.net_gbps = 25;  // the rank's own rail
  const sys::NcclEstimate e = sys::nccl_estimate(
      sys::NcclOp::kAllReduce, static_cast<uint64_t>(bytes), fabric, m.system->nccl);
  EXPECT_NEAR(static_cast<double>(result->end.ps()) / 1e6, e.time_us, 1e-3);
  EXPECT_GT(e.time_us, 1073741824.0 / (25 * 1e3));  // slower than the rail's line rate
}

}  // namespace collective_bench_test
}  // namespace orrery::hw
