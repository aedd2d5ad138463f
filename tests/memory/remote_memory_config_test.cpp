// ASTRA-sim remote memory files: the four memory types and every bad input named by file, line and
// key.
#include "memory/remote_memory_config.h"

#include <gtest/gtest.h>

#include <string>

namespace orrery::memory {
namespace remote_memory_config_test {

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

std::string data(const std::string& name) {
  return std::string(ORRERY_TEST_DATA_DIR) + "/astra-sim/configs/" + name;
}

std::string error_of(const std::string& text) {
  Expected<RemoteMemoryConfig> config = parse_remote_memory_config("mem.json", text);
  EXPECT_FALSE(config) << "parsed: " << text;
  return config ? std::string() : config.error().message();
}

TEST(RemoteMemoryConfig, reads_astra_sim_no_memory_expansion_examples) {
  for (const char* name : {"no_memory_expansion.json", "remote_memory_cfg.json"}) {
    Expected<RemoteMemoryConfig> config = load_remote_memory_config(data(name));
    ASSERT_TRUE(config) << name << ": " << config.error().message();
    EXPECT_EQ(config->path, data(name));
    EXPECT_EQ(config->type, MemoryType::kNoExpansion);
    EXPECT_EQ(config->latency_ns, 0.0);
    EXPECT_EQ(config->bandwidth_gbps, 0.0);
    EXPECT_TRUE(config->unknown_keys.empty());
  }
}

TEST(RemoteMemoryConfig, reads_every_remote_memory_file_in_the_shared_data) {
  const std::string root = std::string(ORRERY_SHARED_DATA_DIR) + "/astra-sim+astra-sim/";
  for (const char* path : {"examples/remote_memory/analytical/no_memory_expansion.json",
                           "tests_rt_template/inputs/remote_memory_cfg.json"}) {
    Expected<RemoteMemoryConfig> config = load_remote_memory_config(root + path);
    if (!config && config.error().kind() == ErrorKind::kIo) GTEST_SKIP() << "no shared data";
    ASSERT_TRUE(config) << path << ": " << config.error().message();
    EXPECT_EQ(config->type, MemoryType::kNoExpansion);
  }
}

TEST(RemoteMemoryConfig, per_npu_expansion_reads_latency_and_bandwidth) {
  Expected<RemoteMemoryConfig> config = parse_remote_memory_config(
      "mem.json",
      R"({"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 500, "remote-mem-bw": 50})");
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->type, MemoryType::kPerNpu);
  EXPECT_EQ(config->latency_ns, 500.0);
  EXPECT_EQ(config->bandwidth_gbps, 50.0);
  EXPECT_EQ(config->num_nodes, 0u);
}

TEST(RemoteMemoryConfig, per_node_expansion_reads_its_node_shape) {
  Expected<RemoteMemoryConfig> config = parse_remote_memory_config(
      "mem.json",
      R"({"memory-type": "PER_NODE_MEMORY_EXPANSION", "num-nodes": 2, "num-npus-per-node": 4,
          "remote-mem-latency": 100.5, "remote-mem-bw": 12.5})");
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->type, MemoryType::kPerNode);
  EXPECT_EQ(config->num_nodes, 2u);
  EXPECT_EQ(config->num_npus_per_node, 4u);
  EXPECT_EQ(config->latency_ns, 100.5);
  EXPECT_EQ(config->bandwidth_gbps, 12.5);
}

TEST(RemoteMemoryConfig, memory_pool_allows_zero_latency) {
  Expected<RemoteMemoryConfig> config = parse_remote_memory_config(
      "mem.json",
      R"({"memory-type": "MEMORY_POOL", "remote-mem-latency": 0, "remote-mem-bw": 100})");
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->type, MemoryType::kPool);
  EXPECT_EQ(config->latency_ns, 0.0);
}

TEST(RemoteMemoryConfig, keys_astra_sim_does_not_read_are_listed) {
  Expected<RemoteMemoryConfig> config = parse_remote_memory_config(
      "mem.json",
      "{\n  \"memory-type\": \"PER_NPU_MEMORY_EXPANSION\",\n  \"npu-ids\": [0, 1],\n"
      "  \"remote-mem-latency\": 5,\n  \"remote-mem-bw\": 6,\n  \"remote-mem-bandwith\": 7\n}");
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->unknown_keys, (std::vector<std::string>{"npu-ids", "remote-mem-bandwith"}));
}

TEST(RemoteMemoryConfig, unknown_or_missing_memory_type_lists_the_four) {
  EXPECT_EQ(error_of("{\n  \"memory-type\": \"CXL_EXPANSION\"\n}"),
            "mem.json:2: key 'memory-type': unknown memory type \"CXL_EXPANSION\" (expected "
            "NO_MEMORY_EXPANSION, PER_NPU_MEMORY_EXPANSION, PER_NODE_MEMORY_EXPANSION or "
            "MEMORY_POOL)");
  EXPECT_CONTAINS(error_of("{\"memory-type\": \"no_memory_expansion\"}"),
                  "unknown memory type \"no_memory_expansion\"");
  EXPECT_EQ(error_of("{}"),
            "mem.json: key 'memory-type': missing (expected NO_MEMORY_EXPANSION, "
            "PER_NPU_MEMORY_EXPANSION, PER_NODE_MEMORY_EXPANSION or MEMORY_POOL)");
  EXPECT_EQ(error_of("{\n  \"memory-type\": 2\n}"),
            "mem.json:2: key 'memory-type': expected a string, found 2");
}

TEST(RemoteMemoryConfig, expansion_types_need_latency_and_bandwidth) {
  for (const char* type :
       {"PER_NPU_MEMORY_EXPANSION", "PER_NODE_MEMORY_EXPANSION", "MEMORY_POOL"}) {
    EXPECT_EQ(error_of(std::string("{\"memory-type\": \"") + type + "\", \"remote-mem-bw\": 5}"),
              std::string("mem.json: key 'remote-mem-latency': missing: ") + type +
                  " needs the access latency in ns");
    EXPECT_EQ(
        error_of(std::string("{\"memory-type\": \"") + type + "\", \"remote-mem-latency\": 5}"),
        std::string("mem.json: key 'remote-mem-bw': missing: ") + type +
            " needs the bandwidth in GB/s");
  }
}

TEST(RemoteMemoryConfig, latency_and_bandwidth_out_of_range_or_of_the_wrong_kind) {
  const std::string head = "{\n  \"memory-type\": \"MEMORY_POOL\",\n";
  EXPECT_EQ(error_of(head + "  \"remote-mem-latency\": -1,\n  \"remote-mem-bw\": 5\n}"),
            "mem.json:3: key 'remote-mem-latency': expected a number from 0 to 1e+09 ns, found -1");
  EXPECT_EQ(error_of(head + "  \"remote-mem-latency\": \"fast\",\n  \"remote-mem-bw\": 5\n}"),
            "mem.json:3: key 'remote-mem-latency': expected a number, found \"fast\"");
  EXPECT_EQ(error_of(head + "  \"remote-mem-latency\": 1,\n  \"remote-mem-bw\": 0\n}"),
            "mem.json:4: key 'remote-mem-bw': expected a number from 0.001 to 1e+09 GB/s, found 0");
  EXPECT_EQ(
      error_of(head + "  \"remote-mem-latency\": 1,\n  \"remote-mem-bw\": -50\n}"),
      "mem.json:4: key 'remote-mem-bw': expected a number from 0.001 to 1e+09 GB/s, found -50");
  EXPECT_EQ(error_of(head + "  \"remote-mem-latency\": 1,\n  \"remote-mem-bw\": [50]\n}"),
            "mem.json:4: key 'remote-mem-bw': expected a number, found [50]");
}

TEST(RemoteMemoryConfig, per_node_expansion_needs_node_counts_of_at_least_1) {
  const std::string head =
      "{\n  \"memory-type\": \"PER_NODE_MEMORY_EXPANSION\",\n"
      "  \"remote-mem-latency\": 1,\n  \"remote-mem-bw\": 5,\n";
  EXPECT_EQ(error_of(head + "  \"num-npus-per-node\": 4\n}"),
            "mem.json: key 'num-nodes': missing: PER_NODE_MEMORY_EXPANSION needs it (a count of 1 "
            "or more)");
  EXPECT_EQ(error_of(head + "  \"num-nodes\": 2\n}"),
            "mem.json: key 'num-npus-per-node': missing: PER_NODE_MEMORY_EXPANSION needs it (a "
            "count of 1 or more)");
  EXPECT_EQ(error_of(head + "  \"num-nodes\": 0,\n  \"num-npus-per-node\": 4\n}"),
            "mem.json:5: key 'num-nodes': expected an integer from 1 to 2147483647, found 0");
  EXPECT_EQ(error_of(head + "  \"num-nodes\": 2,\n  \"num-npus-per-node\": 1.5\n}"),
            "mem.json:6: key 'num-npus-per-node': expected an integer, found 1.5");
}

TEST(RemoteMemoryConfig, top_level_syntax_and_missing_file_errors) {
  EXPECT_EQ(error_of("[\"MEMORY_POOL\"]"),
            "mem.json: expected a JSON object ({\"memory-type\": ...}), found [\"MEMORY_POOL\"]");
  Expected<RemoteMemoryConfig> broken =
      parse_remote_memory_config("mem.json", "{\n  \"memory-type\": NO_MEMORY_EXPANSION\n}");
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error().kind(), ErrorKind::kParse);
  EXPECT_CONTAINS(broken.error().message(), "mem.json: parse error at line 2");
  Expected<RemoteMemoryConfig> missing = load_remote_memory_config("/nonexistent/orrery/mem.json");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind(), ErrorKind::kIo);
  EXPECT_EQ(missing.error().message(),
            "/nonexistent/orrery/mem.json: cannot open: No such file or directory");
}

}  // namespace remote_memory_config_test
}  // namespace orrery::memory
