// ASTRA-sim system files: every real example reads with its values, and every kind of bad input is
// an error naming the file, the line and the key.
#include "system/system_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "chakra/trace_builder.h"

namespace orrery::sys {
namespace system_config_test {

namespace fs = std::filesystem;
using test::TempDir;

std::string config_file(const std::string& name) {
  return test::test_data("astra-sim/configs/" + name);
}

// The error message of parsing `text` as "sys.json" (fails the test when it parses).
std::string error_of(const std::string& text) {
  Expected<SystemConfig> config = parse_system_config("sys.json", text);
  EXPECT_FALSE(config) << "parsed: " << text;
  return config ? std::string() : config.error().message();
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

std::vector<Algorithm> rings(size_t count) {
  return std::vector<Algorithm>(count, Algorithm{AlgorithmKind::kRing, 0});
}

// Copies ASTRA-sim's custom-collective example into `root` in its repository layout:
// examples/system/custom_collectives/{custom_collective.json, custom_ring_allreduce_8npus_1MB/}.
std::string lay_out_custom_example(const fs::path& root) {
  const fs::path folder = root / "examples/system/custom_collectives";
  fs::create_directories(folder / "custom_ring_allreduce_8npus_1MB");
  for (int rank = 0; rank < 8; ++rank) {
    const std::string name = "custom_allreduce." + std::to_string(rank) + ".et";
    fs::copy_file(test::test_data("astra-sim/custom_ring_allreduce/" + name),
                  folder / "custom_ring_allreduce_8npus_1MB" / name);
  }
  fs::copy_file(config_file("custom_collective.json"), folder / "custom_collective.json");
  return (folder / "custom_collective.json").string();
}

// Runs a block with another working directory, restoring the old one afterwards.
class WorkingDirectory {
 public:
  explicit WorkingDirectory(const fs::path& path) : old_(fs::current_path()) {
    fs::current_path(path);
  }
  ~WorkingDirectory() { fs::current_path(old_); }
  WorkingDirectory(const WorkingDirectory&) = delete;
  WorkingDirectory& operator=(const WorkingDirectory&) = delete;

 private:
  fs::path old_;
};

// ---- real files ---------------------------------------------------------------------------------

TEST(SystemConfig, reads_ring_4chunks_example) {
  Expected<SystemConfig> config = load_system_config(config_file("Ring_4chunks.json"));
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->path, config_file("Ring_4chunks.json"));
  EXPECT_EQ(config->scheduling_policy, SchedulingPolicy::kLifo);
  EXPECT_EQ(config->endpoint_delay_ns, 10);
  EXPECT_TRUE(config->endpoint_delay_given);
  EXPECT_EQ(config->active_chunks_per_dimension, 1u);
  EXPECT_EQ(config->preferred_dataset_splits, 4u);
  EXPECT_EQ(config->all_reduce, rings(1));
  EXPECT_EQ(config->all_gather, rings(1));
  EXPECT_EQ(config->reduce_scatter, rings(1));
  EXPECT_EQ(config->all_to_all, rings(1));
  EXPECT_EQ(config->collective_optimization, CollectiveOptimization::kLocalBwAware);
  EXPECT_EQ(config->local_mem_bw_gbps, 1600.0);
  EXPECT_FALSE(config->roofline_enabled);
  EXPECT_EQ(config->peak_perf_tflops, 900.0);
  EXPECT_EQ(config->ignored_keys, std::vector<std::string>{"boost-mode"});
  EXPECT_TRUE(config->unknown_keys.empty());
  EXPECT_TRUE(config->all_reduce_custom.empty());
}

TEST(SystemConfig, reads_hgx_h100_validated_example) {
  Expected<SystemConfig> config = load_system_config(config_file("HGX-H100-validated.json"));
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->active_chunks_per_dimension, 2u);
  EXPECT_EQ(config->preferred_dataset_splits, 4u);
  EXPECT_EQ(config->local_mem_bw_gbps, 3350.0);
  EXPECT_FALSE(config->peak_perf_tflops.has_value());
  EXPECT_EQ(config->all_to_all, rings(1));
  EXPECT_EQ(config->ignored_keys, std::vector<std::string>{"boost-mode"});
}

TEST(SystemConfig, reads_regression_template_system_file) {
  Expected<SystemConfig> config = load_system_config(config_file("system_cfg.json"));
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->local_mem_bw_gbps, 50.0);
  EXPECT_EQ(config->collective_optimization, CollectiveOptimization::kLocalBwAware);
  EXPECT_EQ(config->all_reduce, rings(1));
}

TEST(SystemConfig, reads_every_system_file_in_the_shared_data) {
  if (!test::shared_data_present()) GTEST_SKIP() << "no shared data folder";
  const std::string root = std::string(ORRERY_SHARED_DATA_DIR) + "/astra-sim+astra-sim/";
  for (const char* path : {"examples/system/native_collectives/Ring_4chunks.json",
                           "examples/system/native_collectives/HGX-H100-validated.json",
                           "examples/system/custom_collectives/custom_collective.json",
                           "tests_rt_template/inputs/system_cfg.json"}) {
    Expected<SystemConfig> config = load_system_config(root + path);
    EXPECT_TRUE(config) << path << ": " << config.error().message();
  }
}

TEST(SystemConfig, custom_collective_example_resolves_from_an_ancestor_of_its_folder) {
  // The example's entry is relative to ASTRA-sim's checkout, three folders above the file.
  if (!test::shared_data_present()) GTEST_SKIP() << "no shared data folder";
  const std::string root = std::string(ORRERY_SHARED_DATA_DIR) + "/astra-sim+astra-sim";
  Expected<SystemConfig> config =
      load_system_config(root + "/examples/system/custom_collectives/custom_collective.json");
  ASSERT_TRUE(config) << config.error().message();
  ASSERT_EQ(config->all_reduce_custom.size(), 1u);
  const std::string expected =
      (fs::absolute(root) /
       "examples/system/custom_collectives/custom_ring_allreduce_8npus_1MB/"
       "custom_allreduce")
          .lexically_normal()
          .string();
  EXPECT_EQ(config->all_reduce_custom[0], expected);
  EXPECT_EQ(config->scheduling_policy, SchedulingPolicy::kFifo);
  EXPECT_EQ(config->preferred_dataset_splits, 1u);
  EXPECT_EQ(config->local_mem_bw_gbps, 50.0);
  EXPECT_FALSE(config->endpoint_delay_given);
  EXPECT_TRUE(config->all_reduce.empty());
}

TEST(SystemConfig, bundled_custom_collective_example_resolves_in_its_repository_layout) {
  TempDir dir;
  const std::string path = lay_out_custom_example(dir.file("checkout"));
  Expected<SystemConfig> config = load_system_config(path);
  ASSERT_TRUE(config) << config.error().message();
  ASSERT_EQ(config->all_reduce_custom.size(), 1u);
  EXPECT_TRUE(fs::exists(config->all_reduce_custom[0] + ".7.et")) << config->all_reduce_custom[0];
  EXPECT_EQ(fs::path(config->all_reduce_custom[0]).filename(), "custom_allreduce");
}

TEST(SystemConfig, custom_collective_prefix_is_first_taken_relative_to_the_working_directory) {
  TempDir dir;
  const std::string path = lay_out_custom_example(dir.file("checkout"));
  // From the checkout, the entry resolves as written, exactly as ASTRA-sim reads it.
  WorkingDirectory cwd(dir.file("checkout"));
  Expected<SystemConfig> config = load_system_config(path);
  ASSERT_TRUE(config) << config.error().message();
  ASSERT_EQ(config->all_reduce_custom.size(), 1u);
  EXPECT_EQ(config->all_reduce_custom[0],
            "examples/system/custom_collectives/custom_ring_allreduce_8npus_1MB/custom_allreduce");
}

TEST(SystemConfig, custom_collective_prefix_relative_to_the_file_folder) {
  TempDir dir;
  fs::create_directories(dir.file("conf/graphs"));
  std::ofstream(dir.file("conf/graphs/ring.0.et")) << "";
  std::ofstream(dir.file("conf/sys.json"))
      << "{\n  \"all-gather-implementation-custom\": [\"graphs/ring\"]\n}\n";
  Expected<SystemConfig> config = load_system_config(dir.file("conf/sys.json"));
  ASSERT_TRUE(config) << config.error().message();
  ASSERT_EQ(config->all_gather_custom.size(), 1u);
  EXPECT_EQ(fs::path(config->all_gather_custom[0]),
            (fs::absolute(dir.file("conf")) / "graphs/ring").lexically_normal());
}

TEST(SystemConfig, missing_custom_collective_names_key_line_and_every_location_tried) {
  TempDir dir;
  fs::create_directories(dir.file("a/b"));
  const std::string path = dir.file("a/b/sys.json");
  std::ofstream(path) << "{\n  \"scheduling-policy\": \"FIFO\",\n"
                         "  \"all-reduce-implementation-custom\": [\"graphs/nothing\"]\n}\n";
  Expected<SystemConfig> config = load_system_config(path);
  ASSERT_FALSE(config);
  const std::string message = config.error().message();
  EXPECT_EQ(config.error().kind(), ErrorKind::kConfig);
  EXPECT_CONTAINS(message, path + ":3: key 'all-reduce-implementation-custom'");
  EXPECT_CONTAINS(message, "custom collective 'graphs/nothing' not found");
  EXPECT_CONTAINS(message, "tried graphs/nothing.0.et, ");
  const fs::path folder = fs::absolute(dir.file("a/b")).lexically_normal();
  EXPECT_CONTAINS(message, (folder / "graphs/nothing.0.et").string());
  EXPECT_CONTAINS(message, (folder.parent_path() / "graphs/nothing.0.et").string());
  EXPECT_CONTAINS(message, "/graphs/nothing.0.et)");  // the root, last
}

TEST(SystemConfig, missing_absolute_custom_collective_is_tried_only_as_given) {
  const std::string message =
      error_of("{\n  \"all-to-all-implementation-custom\": [\"/nonexistent/orrery/a2a\"]\n}\n");
  EXPECT_CONTAINS(message, "sys.json:2: key 'all-to-all-implementation-custom'");
  EXPECT_CONTAINS(message, "(tried /nonexistent/orrery/a2a.0.et)");
}

TEST(SystemConfig, custom_collective_takes_exactly_one_prefix) {
  const std::string message =
      error_of("{\n  \"reduce-scatter-implementation-custom\": [\"a\", \"b\"]\n}\n");
  EXPECT_CONTAINS(message, "sys.json:2: key 'reduce-scatter-implementation-custom'");
  EXPECT_CONTAINS(message, "expected exactly one trace prefix");
  EXPECT_CONTAINS(message, "found 2");
}

// ---- defaults and accepted forms
// ------------------------------------------------------------------

TEST(SystemConfig, absent_keys_take_astra_sim_defaults) {
  Expected<SystemConfig> config = parse_system_config("sys.json", "{}");
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->path, "sys.json");
  EXPECT_EQ(config->scheduling_policy, SchedulingPolicy::kLifo);
  EXPECT_EQ(config->collective_optimization, CollectiveOptimization::kBaseline);
  EXPECT_EQ(config->preferred_dataset_splits, 1u);
  EXPECT_EQ(config->active_chunks_per_dimension, 1u);
  EXPECT_EQ(config->endpoint_delay_ns, 10);
  EXPECT_FALSE(config->endpoint_delay_given);
  EXPECT_FALSE(config->local_mem_bw_gbps.has_value());
  EXPECT_FALSE(config->roofline_enabled);
  EXPECT_FALSE(config->replay_only);
  EXPECT_FALSE(config->track_local_mem);
  EXPECT_FALSE(config->trace_enabled);
  EXPECT_TRUE(config->all_reduce.empty());
}

TEST(SystemConfig, every_policy_and_optimization_reads) {
  const std::pair<const char*, SchedulingPolicy> policies[] = {
      {"LIFO", SchedulingPolicy::kLifo},
      {"FIFO", SchedulingPolicy::kFifo},
      {"EXPLICIT", SchedulingPolicy::kExplicit}};
  for (const auto& [name, policy] : policies) {
    Expected<SystemConfig> config =
        parse_system_config("sys.json", std::string("{\"scheduling-policy\": \"") + name +
                                            "\", \"collective-optimization\": \"baseline\"}");
    ASSERT_TRUE(config) << config.error().message();
    EXPECT_EQ(config->scheduling_policy, policy) << name;
    EXPECT_EQ(config->collective_optimization, CollectiveOptimization::kBaseline);
  }
}

TEST(SystemConfig, switches_accept_0_1_and_booleans) {
  Expected<SystemConfig> config = parse_system_config(
      "sys.json",
      R"({"roofline-enabled": true, "peak-perf": 989.5, "local-mem-bw": 3350, "replay-only": 1,
          "track-local-mem": false, "trace-enabled": 1.0})");
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_TRUE(config->roofline_enabled);
  EXPECT_EQ(config->peak_perf_tflops, 989.5);
  EXPECT_TRUE(config->replay_only);
  EXPECT_FALSE(config->track_local_mem);
  EXPECT_TRUE(config->trace_enabled);
}

TEST(SystemConfig, endpoint_delay_may_be_written_as_a_whole_float) {
  Expected<SystemConfig> config = parse_system_config("sys.json", R"({"endpoint-delay": 25.0})");
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->endpoint_delay_ns, 25);
  EXPECT_TRUE(config->endpoint_delay_given);
  Expected<SystemConfig> zero = parse_system_config("sys.json", R"({"endpoint-delay": 0})");
  ASSERT_TRUE(zero) << zero.error().message();
  EXPECT_EQ(zero->endpoint_delay_ns, 0);
}

TEST(SystemConfig, one_algorithm_per_dimension_in_order) {
  Expected<SystemConfig> config = parse_system_config(
      "sys.json",
      R"({"all-reduce-implementation": ["ring", "direct4", "halvingDoubling", "doubleBinaryTree"],
          "all-gather-implementation": ["oneRing"],
          "reduce-scatter-implementation": ["oneDirect", "oneDirect8"],
          "all-to-all-implementation": ["direct", "oneHalvingDoubling"]})");
  ASSERT_TRUE(config) << config.error().message();
  const std::vector<Algorithm> all_reduce = {{AlgorithmKind::kRing, 0},
                                             {AlgorithmKind::kDirect, 4},
                                             {AlgorithmKind::kHalvingDoubling, 0},
                                             {AlgorithmKind::kDoubleBinaryTree, 0}};
  EXPECT_EQ(config->all_reduce, all_reduce);
  EXPECT_EQ(config->all_gather, (std::vector<Algorithm>{{AlgorithmKind::kOneRing, 0}}));
  EXPECT_EQ(config->reduce_scatter, (std::vector<Algorithm>{{AlgorithmKind::kOneDirect, 0},
                                                            {AlgorithmKind::kOneDirect, 8}}));
  EXPECT_EQ(config->all_to_all, (std::vector<Algorithm>{{AlgorithmKind::kDirect, 0},
                                                        {AlgorithmKind::kOneHalvingDoubling, 0}}));
}

TEST(SystemConfig, ignored_and_unknown_keys_are_listed_in_file_order) {
  Expected<SystemConfig> config = parse_system_config("sys.json",
                                                      "{\n"
                                                      "  \"zeta-typo\": 1,\n"
                                                      "  \"L\": 0,\n"
                                                      "  \"model-shared-bus\": 0,\n"
                                                      "  \"boost-mode\": 1,\n"
                                                      "  \"endpont-delay\": 5,\n"
                                                      "  \"local-reduction-delay\": 1\n"
                                                      "}\n");
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->ignored_keys, (std::vector<std::string>{"L", "model-shared-bus", "boost-mode",
                                                            "local-reduction-delay"}));
  EXPECT_EQ(config->unknown_keys, (std::vector<std::string>{"zeta-typo", "endpont-delay"}));
  EXPECT_FALSE(config->endpoint_delay_given);
}

// ---- parse_algorithm
// --------------------------------------------------------------------------------

TEST(SystemConfig, every_algorithm_name_round_trips) {
  for (const char* name :
       {"ring", "direct", "direct4", "direct16", "halvingDoubling", "doubleBinaryTree", "oneRing",
        "oneDirect", "oneDirect8", "oneHalvingDoubling"}) {
    Expected<Algorithm> algorithm = parse_algorithm(name);
    ASSERT_TRUE(algorithm) << name << ": " << algorithm.error().message();
    EXPECT_EQ(algorithm_name(*algorithm), name);
  }
  EXPECT_EQ(parse_algorithm("direct4")->window, 4u);
  EXPECT_EQ(parse_algorithm("direct")->window, 0u);
  EXPECT_EQ(parse_algorithm("oneDirect8")->kind, AlgorithmKind::kOneDirect);
}

TEST(SystemConfig, unknown_algorithm_names_are_errors_listing_the_accepted_names) {
  for (const char* name : {"Ring", "rings", "directx", "direct-4", "oneDirectN", "",
                           "hierarchicalRing", "direct99999999999"}) {
    Expected<Algorithm> algorithm = parse_algorithm(name);
    ASSERT_FALSE(algorithm) << name;
    EXPECT_EQ(algorithm.error().kind(), ErrorKind::kConfig);
    EXPECT_CONTAINS(algorithm.error().message(), "expected ring, direct, directN (e.g. direct4)");
  }
  Expected<Algorithm> zero = parse_algorithm("direct0");
  ASSERT_FALSE(zero);
  EXPECT_CONTAINS(zero.error().message(), "must be at least 1");
}

// ---- errors
// -----------------------------------------------------------------------------------------

TEST(SystemConfig, unknown_algorithm_in_a_list_names_key_line_and_dimension) {
  const std::string message = error_of(
      "{\n"
      "  \"scheduling-policy\": \"LIFO\",\n"
      "  \"all-reduce-implementation\": [\"ring\", \"rign\"]\n"
      "}\n");
  EXPECT_CONTAINS(message, "sys.json:3: key 'all-reduce-implementation': dimension 1: ");
  EXPECT_CONTAINS(message, "unknown collective algorithm \"rign\"");
}

TEST(SystemConfig, double_binary_tree_loads_in_every_list_as_astra_sim_accepts_it) {
  // Only running it for a collective other than all-reduce fails (tests/hardware).
  for (const char* key : {"all-gather-implementation", "reduce-scatter-implementation",
                          "all-to-all-implementation"}) {
    Expected<SystemConfig> config = parse_system_config(
        "sys.json", std::string("{\n\n  \"") + key + "\": [\"ring\", \"doubleBinaryTree\"]\n}");
    ASSERT_TRUE(config) << config.error().message();
    const std::vector<Algorithm>& list =
        std::string(key) == "all-gather-implementation"       ? config->all_gather
        : std::string(key) == "reduce-scatter-implementation" ? config->reduce_scatter
                                                              : config->all_to_all;
    ASSERT_EQ(list.size(), 2u);
    EXPECT_EQ(list[1].kind, AlgorithmKind::kDoubleBinaryTree);
  }
}

TEST(SystemConfig, nccl_is_an_algorithm_name) {
  Expected<Algorithm> nccl = parse_algorithm("nccl");
  ASSERT_TRUE(nccl);
  EXPECT_EQ(nccl->kind, AlgorithmKind::kNccl);
  EXPECT_EQ(algorithm_name(*nccl), "nccl");
}

TEST(SystemConfig, implementation_lists_must_be_lists_of_names) {
  EXPECT_CONTAINS(error_of("{\n\"all-gather-implementation\": \"ring\"}"),
                  "sys.json:2: key 'all-gather-implementation': expected a list of strings, "
                  "found \"ring\"");
  EXPECT_CONTAINS(error_of("{\n\"all-to-all-implementation\": [\"ring\", 2]}"),
                  "sys.json:2: key 'all-to-all-implementation': expected a list of strings, "
                  "found the item 2");
  EXPECT_CONTAINS(error_of("{\n\"all-reduce-implementation-custom\": \"prefix\"}"),
                  "sys.json:2: key 'all-reduce-implementation-custom': expected a list of strings");
}

TEST(SystemConfig, unknown_policy_and_optimization_are_errors) {
  EXPECT_CONTAINS(error_of("{\n  \"scheduling-policy\": \"RANDOM\"\n}"),
                  "sys.json:2: key 'scheduling-policy': unknown policy \"RANDOM\" (expected LIFO, "
                  "FIFO or EXPLICIT)");
  EXPECT_CONTAINS(error_of("{\n  \"scheduling-policy\": \"lifo\"\n}"), "unknown policy \"lifo\"");
  EXPECT_CONTAINS(error_of("{\n  \"scheduling-policy\": 1\n}"),
                  "sys.json:2: key 'scheduling-policy': expected a string, found 1");
  EXPECT_CONTAINS(error_of("{\n\n  \"collective-optimization\": \"fast\"\n}"),
                  "sys.json:3: key 'collective-optimization': unknown optimization \"fast\" "
                  "(expected baseline or localBWAware)");
}

TEST(SystemConfig, counts_out_of_range_or_of_the_wrong_kind_are_errors) {
  EXPECT_CONTAINS(error_of("{\n  \"preferred-dataset-splits\": 0\n}"),
                  "sys.json:2: key 'preferred-dataset-splits': expected an integer from 1 to "
                  "65536, found 0");
  EXPECT_CONTAINS(
      error_of("{\n  \"preferred-dataset-splits\": \"four\"\n}"),
      "sys.json:2: key 'preferred-dataset-splits': expected an integer, found \"four\"");
  EXPECT_CONTAINS(error_of("{\n  \"active-chunks-per-dimension\": -1\n}"),
                  "sys.json:2: key 'active-chunks-per-dimension': expected an integer from 1");
  EXPECT_CONTAINS(error_of("{\n  \"active-chunks-per-dimension\": 1.5\n}"),
                  "sys.json:2: key 'active-chunks-per-dimension': expected an integer, found 1.5");
  EXPECT_CONTAINS(error_of("{\n  \"endpoint-delay\": -10\n}"),
                  "sys.json:2: key 'endpoint-delay': expected an integer from 0 to 2147483647, "
                  "found -10");
  EXPECT_CONTAINS(error_of("{\n  \"endpoint-delay\": 10.5\n}"),
                  "sys.json:2: key 'endpoint-delay': expected an integer, found 10.5");
}

TEST(SystemConfig, bandwidth_and_peak_must_be_positive_numbers) {
  EXPECT_CONTAINS(
      error_of("{\n  \"local-mem-bw\": 0\n}"),
      "sys.json:2: key 'local-mem-bw': expected a number from 0.001 to 1e+18 GB/s, found 0");
  EXPECT_CONTAINS(error_of("{\n  \"local-mem-bw\": \"fast\"\n}"),
                  "sys.json:2: key 'local-mem-bw': expected a number, found \"fast\"");
  EXPECT_CONTAINS(
      error_of("{\n  \"peak-perf\": -900\n}"),
      "sys.json:2: key 'peak-perf': expected a number from 1e-06 to 1e+09 TFLOPS, found -900");
}

TEST(SystemConfig, switches_reject_other_values) {
  EXPECT_CONTAINS(error_of("{\n  \"roofline-enabled\": 2\n}"),
                  "sys.json:2: key 'roofline-enabled': expected 0, 1, true or false, found 2");
  EXPECT_CONTAINS(error_of("{\n  \"trace-enabled\": \"yes\"\n}"),
                  "sys.json:2: key 'trace-enabled': expected 0, 1, true or false, found \"yes\"");
  EXPECT_CONTAINS(error_of("{\n  \"replay-only\": null\n}"), "sys.json:2: key 'replay-only'");
}

TEST(SystemConfig, roofline_needs_peak_perf_and_local_mem_bw) {
  EXPECT_CONTAINS(error_of("{\n  \"local-mem-bw\": 1600,\n  \"roofline-enabled\": 1\n}"),
                  "sys.json:3: key 'roofline-enabled': roofline is enabled but 'peak-perf' "
                  "(TFLOPS) is not given");
  EXPECT_CONTAINS(error_of("{\n  \"roofline-enabled\": 1,\n  \"peak-perf\": 900\n}"),
                  "sys.json:2: key 'roofline-enabled': roofline is enabled but 'local-mem-bw' "
                  "(GB/s) is not given");
}

TEST(SystemConfig, models_orrery_does_not_have_are_refused_by_name) {
  EXPECT_CONTAINS(error_of("{\n  \"model-shared-bus\": 1\n}"),
                  "sys.json:2: key 'model-shared-bus': the LogGP shared-bus model");
  EXPECT_CONTAINS(error_of("{\n  \"per-node-custom-implementation\": \"nodes.yaml\"\n}"),
                  "sys.json:2: key 'per-node-custom-implementation': per-node custom collectives "
                  "are not supported yet");
}

TEST(SystemConfig, top_level_must_be_an_object) {
  EXPECT_CONTAINS(error_of("[\"ring\"]"),
                  "sys.json: expected a JSON object of settings, found [\"ring\"]");
  EXPECT_CONTAINS(error_of("42"), "sys.json: expected a JSON object of settings, found 42");
}

TEST(SystemConfig, syntax_errors_and_missing_files_are_named) {
  Expected<SystemConfig> broken =
      parse_system_config("sys.json", "{\n  \"scheduling-policy\": \"LIFO\"\n  \"x\": 1\n}");
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error().kind(), ErrorKind::kParse);
  EXPECT_CONTAINS(broken.error().message(), "sys.json: parse error at line 3");
  Expected<SystemConfig> missing = load_system_config("/nonexistent/orrery/sys.json");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind(), ErrorKind::kIo);
  EXPECT_CONTAINS(missing.error().message(), "/nonexistent/orrery/sys.json: cannot open");
}

}  // namespace system_config_test
}  // namespace orrery::sys
