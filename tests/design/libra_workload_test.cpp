// LIBRA workloads derived from Chakra traces and `orrery gen llm` plans: group sizes per dimension
// of sub-grids, the generator's closed forms (tensor-parallel all-reduces of b s h, data-parallel
// all-reduces of every parameter's gradient), files and memory agree, the real traces of
// ../shared/data, and bad input.
#include "design/libra_workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "chakra/trace_file.h"
#include "design/libra_input.h"
#include "design/libra_model.h"
#include "gen/gen_test_support.h"
#include "scratch_dir.h"
#include "workload/executor.h"

// Some inputs are the public files in ../shared/data; without that folder these tests skip.
#define SKIP_WITHOUT_SHARED_DATA()                            \
  if (!std::filesystem::is_directory(ORRERY_SHARED_DATA_DIR)) \
  GTEST_SKIP() << "no " ORRERY_SHARED_DATA_DIR

namespace orrery::design {
namespace libra_workload_test {

std::vector<Dimension> network(std::initializer_list<uint32_t> sizes) {
  std::vector<Dimension> dims;
  for (const uint32_t size : sizes) dims.push_back({TopologyKind::kRing, size, ""});
  return dims;
}

std::filesystem::path scratch(const std::string& name) {
  return test::scratch_dir("libra-workload") / name;
}

// An A100-like roofline: 312 TFLOPS, 2,039 GB/s.
ComputeTiming a100() {
  ComputeTiming timing;
  timing.roofline = true;
  timing.peak_tflops = 312;
  timing.mem_bw = 2039;
  return timing;
}

gen::LlmGenerator tiny_plan(uint32_t tp, uint32_t dp, uint32_t pp, uint64_t global_batch) {
  Expected<gen::LlmGenerator> created =
      gen::LlmGenerator::create(test::tiny_gpt(), test::plan_of(dp, tp, pp, global_batch));
  EXPECT_TRUE(created) << created.error().message();
  return std::move(*created);
}

TEST(LibraWorkload, a_groups_size_in_each_dimension_is_the_number_of_coordinates_it_takes) {
  const std::vector<Dimension> dims = network({4, 4, 2});  // rank = c0 + 4 (c1 + 4 c2)
  auto sizes = [&](std::vector<uint32_t> ranks) {
    Expected<std::vector<int32_t>> s = group_dimension_sizes(ranks, dims);
    EXPECT_TRUE(s) << s.error().message();
    return s ? *s : std::vector<int32_t>{};
  };
  EXPECT_EQ(sizes({0, 1, 2, 3}), (std::vector<int32_t>{4, -1, -1}));
  EXPECT_EQ(sizes({1, 5, 9, 13}), (std::vector<int32_t>{-1, 4, -1}));
  EXPECT_EQ(sizes({0, 16}), (std::vector<int32_t>{-1, -1, 2}));
  EXPECT_EQ(sizes({0, 1, 4, 5}), (std::vector<int32_t>{2, 2, -1}));  // part of two dimensions
  EXPECT_EQ(sizes({2, 6, 18, 22}), (std::vector<int32_t>{-1, 2, 2}));
  EXPECT_EQ(sizes({7}), (std::vector<int32_t>{-1, -1, -1}));
  std::vector<uint32_t> all(32);
  for (uint32_t r = 0; r < 32; ++r) all[r] = r;
  EXPECT_EQ(sizes(all), (std::vector<int32_t>{4, 4, 2}));
}

TEST(LibraWorkload, a_group_that_is_not_a_sub_grid_or_leaves_the_network_is_refused) {
  const std::vector<Dimension> dims = network({4, 4});
  Expected<std::vector<int32_t>> diagonal = group_dimension_sizes({0, 5}, dims);
  ASSERT_FALSE(diagonal);
  EXPECT_NE(diagonal.error().message().find("[0, 5] is not a sub-grid of the 4 x 4 network"),
            std::string::npos)
      << diagonal.error().message();
  Expected<std::vector<int32_t>> outside = group_dimension_sizes({3, 16}, dims);
  ASSERT_FALSE(outside);
  EXPECT_NE(outside.error().message().find("rank 16 is outside the 16-NPU network"),
            std::string::npos)
      << outside.error().message();
}

// tp 4 x dp 2 on Ring 4 x Ring 2, 2 micro-batches of one 128-token sequence (bf16).
TEST(LibraWorkload, an_llm_plan_gives_the_generators_closed_forms_per_layer_and_dimension) {
  const gen::TransformerModel model = test::tiny_gpt();
  const gen::LlmGenerator gen = tiny_plan(4, 2, 1, 4);
  const std::vector<Dimension> dims = network({4, 2});
  Expected<DerivedWorkload> derived = workload_from_llm(gen, 3, dims, a100());
  ASSERT_TRUE(derived) << derived.error().message();

  const uint64_t m = 2;
  const double bsh_bytes = 1.0 * 128 * 256 * 2;
  uint64_t tp_layer_reduces = 0;
  double dp_bytes = 0;
  std::map<uint32_t, std::vector<double>> dp_by_layer;
  for (const Layer& layer : derived->layers) {
    const Phase& phase = layer.phases[0];
    EXPECT_EQ(layer.phases[1].collective, CollectiveKind::kNone);
    EXPECT_EQ(layer.phases[2].collective, CollectiveKind::kNone);
    if (phase.collective == CollectiveKind::kNone) continue;
    EXPECT_EQ(phase.collective, CollectiveKind::kAllReduce) << layer.name;
    if (phase.groups == std::vector<int32_t>{4, -1}) {
      if (layer.name.find(".L") != std::string::npos) {
        ++tp_layer_reduces;
        EXPECT_EQ(phase.bytes, bsh_bytes) << layer.name;
      }
    } else {
      ASSERT_EQ(phase.groups, (std::vector<int32_t>{-1, 2})) << layer.name;
      dp_bytes += phase.bytes;
      for (uint32_t l = 0; l < model.layers; ++l) {
        if (layer.name.rfind(fmt::format("L{}.", l), 0) == 0) dp_by_layer[l].push_back(phase.bytes);
      }
    }
  }
  // Tensor parallelism: 4 all-reduces of b s h per layer and micro-batch (2 forward, 2 backward).
  EXPECT_EQ(tp_layer_reduces, 4 * model.layers * m);
  // Data parallelism: each layer's gradients once (ZeRO 0), and every parameter of the rank once.
  uint64_t params = embedding_params(model, 4) + head_params(model, 4, true);
  for (uint32_t l = 0; l < model.layers; ++l) {
    const uint64_t layer = gen::layer_params(model, l, 4, 1).dense;
    params += layer;
    EXPECT_EQ(dp_by_layer[l], std::vector<double>{2.0 * static_cast<double>(layer)}) << l;
  }
  EXPECT_EQ(dp_bytes, 2.0 * static_cast<double>(params));

  // Compute: every compute node of the rank by the roofline, nothing else.
  const gen::RankProgram program = gen.build(3);
  double compute_ns = 0;
  uint64_t nodes = 0;
  for (gen::ProgRef ref = 0; ref < program.size(); ++ref) {
    const gen::RankProgram::Node& node = program.node(ref);
    if (node.kind != gen::ProgKind::kCompute || node.flops == 0) continue;
    compute_ns += workload::roofline_time(node.flops, node.bytes, 312, 2039).ns();
    ++nodes;
  }
  EXPECT_EQ(derived->timed_by_roofline, nodes);
  EXPECT_EQ(derived->timed_by_duration, 0u);
  EXPECT_DOUBLE_EQ(derived->compute_ns, compute_ns);
  double layer_compute = 0;
  for (const Layer& layer : derived->layers) layer_compute += layer.phases[0].compute_ns;
  EXPECT_DOUBLE_EQ(layer_compute, compute_ns);

  // LIBRA's traffic: an all-reduce of S over 4 moves 2 S 3/4 per NPU in dimension 0.
  Problem problem;
  problem.dimensions = dims;
  problem.layers = derived->layers;
  Expected<TrafficModel> traffic = build_traffic_model(problem);
  ASSERT_TRUE(traffic) << traffic.error().message();
  bool found = false;
  for (const CollectiveTraffic& c : traffic->collectives) {
    if (c.bytes_per_dim[1] == 0 && c.bytes_per_dim[0] == 2 * bsh_bytes * 3 / 4) found = true;
  }
  EXPECT_TRUE(found);
}

TEST(LibraWorkload, traces_written_by_gen_llm_give_the_workload_of_the_plan_in_memory) {
  const gen::LlmGenerator gen = tiny_plan(2, 2, 2, 4);  // pipeline sends and receives too
  const std::string prefix = scratch("tp2dp2pp2/w").string();
  Expected<gen::GeneratedTraces> written = gen::write_llm_traces(gen, prefix, {});
  ASSERT_TRUE(written) << written.error().message();
  const std::vector<Dimension> dims = network({2, 2, 2});
  for (const uint32_t rank : {0u, 5u}) {
    Expected<DerivedWorkload> memory = workload_from_llm(gen, rank, dims, a100());
    Expected<DerivedWorkload> files = workload_from_trace(prefix, "", rank, dims, a100());
    ASSERT_TRUE(memory) << memory.error().message();
    ASSERT_TRUE(files) << files.error().message();
    ASSERT_EQ(memory->layers.size(), files->layers.size());
    for (size_t l = 0; l < memory->layers.size(); ++l) {
      const Phase& a = memory->layers[l].phases[0];
      const Phase& b = files->layers[l].phases[0];
      EXPECT_EQ(memory->layers[l].name, files->layers[l].name);
      EXPECT_EQ(a.compute_ns, b.compute_ns);
      EXPECT_EQ(a.collective, b.collective);
      EXPECT_EQ(a.bytes, b.bytes);
      EXPECT_EQ(a.groups, b.groups);
    }
    EXPECT_GT(files->point_to_point, 0u);  // pipeline messages are counted, not modelled
    EXPECT_EQ(files->point_to_point, memory->point_to_point);
    EXPECT_NE(files->summary().find("point-to-point"), std::string::npos) << files->summary();
  }
}

TEST(LibraWorkload, compute_with_flops_and_no_duration_needs_the_roofline) {
  const gen::LlmGenerator gen = tiny_plan(2, 2, 1, 2);
  Expected<DerivedWorkload> derived = workload_from_llm(gen, 0, network({2, 2}), ComputeTiming{});
  ASSERT_FALSE(derived);
  EXPECT_NE(derived.error().message().find("FLOPs and no duration_micros; give a system file with "
                                           "roofline-enabled"),
            std::string::npos)
      << derived.error().message();
}

TEST(LibraWorkload, the_plan_or_trace_set_must_have_the_networks_ranks) {
  const gen::LlmGenerator gen = tiny_plan(2, 2, 1, 2);
  Expected<DerivedWorkload> plan = workload_from_llm(gen, 0, network({4, 4}), a100());
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.error().message().find("the plan has 4 ranks (tp 2 x cp 1 x dp 2 x pp 1) but the "
                                        "network (4 x 4) has 16 NPUs"),
            std::string::npos)
      << plan.error().message();
  const std::string prefix = scratch("tp2dp2/w").string();
  ASSERT_TRUE(gen::write_llm_traces(gen, prefix, {}));
  Expected<DerivedWorkload> trace = workload_from_trace(prefix, "", 0, network({2, 4}), a100());
  ASSERT_FALSE(trace);
  EXPECT_NE(trace.error().message().find("4 rank files but the network (2 x 4) has 8 NPUs"),
            std::string::npos)
      << trace.error().message();
  Expected<DerivedWorkload> rank = workload_from_trace(prefix, "", 4, network({2, 2}), a100());
  ASSERT_FALSE(rank);
  EXPECT_NE(rank.error().message().find("has ranks 0..3"), std::string::npos);
}

TEST(LibraWorkload, plan_text_reads_gen_llm_flags_and_refuses_other_words) {
  Expected<std::vector<std::pair<std::string, std::string>>> options =
      parse_llm_plan_text("--model gpt3-175b  --tp 8 --sp --global-batch=64 --recompute");
  ASSERT_TRUE(options) << options.error().message();
  const std::vector<std::pair<std::string, std::string>> expected = {{"model", "gpt3-175b"},
                                                                     {"tp", "8"},
                                                                     {"sp", "true"},
                                                                     {"global-batch", "64"},
                                                                     {"recompute", "true"}};
  EXPECT_EQ(*options, expected);
  Expected<std::vector<std::pair<std::string, std::string>>> bad = parse_llm_plan_text("--tp 8 16");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("'16' is not an option"), std::string::npos);
  WorkloadSource source;
  source.llm = {{"model", "gpt3-175b"}, {"tp", "eight"}};
  source.where = "p.yml:3";
  Expected<DerivedWorkload> derived = derive_workload(source, network({8, 8}));
  ASSERT_FALSE(derived);
  EXPECT_EQ(derived.error().message(),
            "p.yml:3: --tp 'eight': expected a non-negative whole number");
}

// ASTRA-sim 1.0's ResNet-50 data-parallel text workload, converted to Chakra by Chakra's own text
// converter (4 ranks): the derived workload has the text file's 54 weight-gradient all-reduces
// over all 4 ranks, and every compute node's recorded time.
TEST(LibraWorkload, real_resnet50_traces_carry_the_text_workloads_all_reduces) {
  SKIP_WITHOUT_SHARED_DATA();
  const std::string root =
      std::string(ORRERY_SHARED_DATA_DIR) + "/astra-sim+astra-sim/legacy_text_workloads/";
  const std::vector<Dimension> dims = network({2, 2});
  Expected<DerivedWorkload> derived = workload_from_trace(
      root + "generated_by_chakra_text_converter/Resnet50_DataParallel", "", 0, dims, {});
  ASSERT_TRUE(derived) << derived.error().message();
  // The text workload, read as LIBRA reads it (a header of 2 lines, then layer lines).
  std::ifstream in(root + "ASTRA-sim-1.0/Resnet50_DataParallel.txt");
  std::string line;
  std::getline(in, line);
  std::getline(in, line);
  std::vector<double> text_bytes;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string field; fields >> field;) f.push_back(field);
    if (f.size() < 11) continue;
    ASSERT_EQ(f[9], "ALLREDUCE") << line;
    text_bytes.push_back(std::stod(f[10]));
  }
  ASSERT_EQ(text_bytes.size(), 54u);
  std::vector<double> bytes;
  for (const Layer& layer : derived->layers) {
    const Phase& phase = layer.phases[0];
    if (phase.collective == CollectiveKind::kNone) continue;
    EXPECT_EQ(phase.collective, CollectiveKind::kAllReduce);
    EXPECT_EQ(phase.groups, (std::vector<int32_t>{2, 2})) << layer.name;  // pg "": all ranks
    bytes.push_back(phase.bytes);
  }
  std::sort(bytes.begin(), bytes.end());
  std::sort(text_bytes.begin(), text_bytes.end());
  EXPECT_EQ(bytes, text_bytes);
  EXPECT_EQ(derived->collectives, 54u);
  // Compute: the sum of the rank's recorded durations.
  Expected<chakra::TraceGraph> graph =
      chakra::load_trace(root + "generated_by_chakra_text_converter/Resnet50_DataParallel.0.et");
  ASSERT_TRUE(graph);
  double micros = 0;
  uint64_t timed = 0;
  for (chakra::NodeIndex n = 0; n < graph->size(); ++n) {
    if (graph->type(n) != ChakraProtoMsg::COMP_NODE || graph->duration_micros(n) == 0) continue;
    micros += static_cast<double>(graph->duration_micros(n));
    ++timed;
  }
  EXPECT_EQ(derived->timed_by_duration, timed);
  EXPECT_GT(timed, 100u);
  EXPECT_DOUBLE_EQ(derived->compute_ns, micros * 1000);
}

// symbolic_tensor_graph's Llama with dp 2, tp 2, pp 2 (8 ranks, groups in workload.json): tensor
// groups {0,1}, {2,3}, ... are dimension 0 of a 2 x 2 x 2 network, data groups {0,2}, ...
// dimension 1; its compute has FLOPs and no durations, so the roofline times it.
TEST(LibraWorkload, real_stg_traces_put_tensor_and_data_groups_on_their_dimensions) {
  SKIP_WITHOUT_SHARED_DATA();
  const std::string dir = std::string(ORRERY_SHARED_DATA_DIR) +
                          "/astra-sim+symbolic_tensor_graph/generated/out_dp2tp2pp2/";
  const std::vector<Dimension> dims = network({2, 2, 2});
  Expected<DerivedWorkload> derived =
      workload_from_trace(dir + "workload", dir + "workload.json", 0, dims, a100());
  ASSERT_TRUE(derived) << derived.error().message();
  Expected<chakra::TraceGraph> graph = chakra::load_trace(dir + "workload.0.et");
  ASSERT_TRUE(graph);
  // Every collective of the file is in the workload or counted as over one rank.
  uint64_t file_collectives = 0;
  double multi_rank_bytes = 0;
  for (chakra::NodeIndex n = 0; n < graph->size(); ++n) {
    if (graph->type(n) != ChakraProtoMsg::COMM_COLL_NODE) continue;
    ++file_collectives;
    const std::string pg(graph->get_string(n, "pg_name")->value_or(""));
    Expected<std::optional<uint64_t>> size = graph->get_uint(n, "comm_size");
    ASSERT_TRUE(size);
    // Groups 1 to 8 hold two ranks, 9 to 16 one (workload.json).
    if (std::stoi(pg) <= 8) multi_rank_bytes += static_cast<double>(size->value_or(0));
  }
  EXPECT_EQ(derived->collectives + derived->single_rank + derived->unmodelled, file_collectives);
  double bytes = 0;
  uint64_t tensor = 0, data = 0;
  for (const Layer& layer : derived->layers) {
    const Phase& phase = layer.phases[0];
    if (phase.collective == CollectiveKind::kNone) continue;
    bytes += phase.bytes;
    if (phase.groups == std::vector<int32_t>{2, -1, -1}) ++tensor;
    if (phase.groups == std::vector<int32_t>{-1, 2, -1}) ++data;
  }
  EXPECT_EQ(tensor + data, derived->collectives);
  EXPECT_GT(tensor, 0u);
  EXPECT_GT(data, 0u);
  EXPECT_EQ(bytes, multi_rank_bytes);
  EXPECT_GT(derived->point_to_point, 0u);
  EXPECT_GT(derived->timed_by_roofline, 0u);
  EXPECT_EQ(derived->timed_by_duration, 0u);
}

}  // namespace libra_workload_test
}  // namespace orrery::design
