// Whole runs with memory: MEM_LOAD and MEM_STORE nodes under each remote memory type, with their
// finish times worked out by hand, and peak memory per rank with the capacity warning.
//
// Remote memory figures: latency 500 ns, 50 GB/s (bytes per ns), 1 MiB per access:
// 500 + floor(1,048,576 / 50) = 21,471 ns (written A below). Every rank loads 1 MiB, then stores
// 1 MiB once the load is done.
#include <gtest/gtest.h>

#include <algorithm>

#include "sim/sim_test_support.h"

namespace orrery::sim {
namespace memory_run_test {

using ChakraProtoMsg::Node;

constexpr int64_t kAccess = 21471;  // A
constexpr uint64_t kMiB = 1 << 20;

class MemoryRun : public ::testing::Test {
 protected:
  // Runs one node list per rank on a Ring of that many ranks (50 GB/s, 500 ns).
  Expected<RunResult> go(const std::vector<std::vector<Node>>& ranks,
                         const std::string& remote_memory = "", uint64_t capacity = 0,
                         const std::string& system_extra = "") {
    test::RunInputs inputs;
    inputs.traces = test::traces_of(ranks);
    inputs.system = test::system_json("ring", 1, 4, 1, 10, 1600, "localBWAware", system_extra);
    inputs.network = test::network_yaml("Ring", std::to_string(ranks.size()), "50", "500");
    inputs.remote_memory = remote_memory;
    inputs.settings.memory_capacity = capacity;
    warnings_.clear();
    return test::simulate(inputs, &warnings_);
  }

  std::vector<std::string> warnings_about(const std::string& text) const {
    std::vector<std::string> out;
    for (const std::string& line : warnings_) {
      if (line.find(text) != std::string::npos) out.push_back(line);
    }
    return out;
  }

  std::vector<std::string> warnings_;
};

Node memory_node(uint64_t id, bool load, std::initializer_list<uint64_t> deps = {}) {
  Node node = test::make_node(
      id, load ? ChakraProtoMsg::MEM_LOAD_NODE : ChakraProtoMsg::MEM_STORE_NODE, deps);
  test::add_attr(node, "tensor_size").set_uint64_val(kMiB);
  return node;
}

std::vector<std::vector<Node>> load_then_store(size_t ranks) {
  return std::vector<std::vector<Node>>(ranks, {memory_node(1, true), memory_node(2, false, {1})});
}

std::string memory_file(const std::string& type, const std::string& extra = "") {
  return fmt::format(
      "{{\"memory-type\": \"{}\", \"remote-mem-latency\": 500, \"remote-mem-bw\": 50{}}}\n", type,
      extra);
}

std::vector<int64_t> finishes(const RunResult& result) {
  std::vector<int64_t> out;
  for (const auto& rank : result.rank_results) out.push_back(rank.finish.ns_truncated());
  return out;
}

TEST_F(MemoryRun, per_npu_memory_never_makes_a_rank_wait) {
  // Each rank: load [0, A], store [A, 2A] = 42,942 ns.
  auto result = go(load_then_store(4), memory_file("PER_NPU_MEMORY_EXPANSION"));
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_EQ(finishes(*result), std::vector<int64_t>(4, 2 * kAccess));
  for (const auto& rank : result->rank_results) {
    EXPECT_EQ(rank.memory, SimTime::from_ns(2 * kAccess));
    EXPECT_EQ(rank.completed, 2u);
  }
}

TEST_F(MemoryRun, per_node_memory_serializes_the_ranks_of_a_node) {
  // Two nodes of two NPUs: {0, 1} and {2, 3}. On node 0: rank 0 loads [0, A], rank 1's load waits
  // [A, 2A]; rank 0's store, issued at A, waits for it: [2A, 3A]; rank 1's store, issued at 2A:
  // [3A, 4A]. Node 1 runs the same, independently.
  auto result = go(load_then_store(4), memory_file("PER_NODE_MEMORY_EXPANSION",
                                                   ", \"num-nodes\": 2, \"num-npus-per-node\": 2"));
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_EQ(finishes(*result),
            (std::vector<int64_t>{3 * kAccess, 4 * kAccess, 3 * kAccess, 4 * kAccess}));
  // Waiting in the FIFO counts as memory time: rank 1 spends its whole run on memory nodes.
  EXPECT_EQ(result->rank_results[1].memory, SimTime::from_ns(4 * kAccess));
  EXPECT_TRUE(warnings_about("num-nodes").empty());
}

TEST_F(MemoryRun, per_node_ranks_past_the_configured_nodes_form_nodes_of_their_own) {
  // One node of two NPUs for four ranks: ranks 2 and 3 form a second node, with a warning.
  auto result = go(load_then_store(4), memory_file("PER_NODE_MEMORY_EXPANSION",
                                                   ", \"num-nodes\": 1, \"num-npus-per-node\": 2"));
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_EQ(finishes(*result),
            (std::vector<int64_t>{3 * kAccess, 4 * kAccess, 3 * kAccess, 4 * kAccess}));
  const auto warned = warnings_about("num-nodes x num-npus-per-node = 1 x 2 covers 2 NPUs");
  ASSERT_EQ(warned.size(), 1u) << fmt::format("{}", fmt::join(warnings_, "\n"));
  EXPECT_NE(warned[0].find("the network has 4 ranks; ranks 2 and above"), std::string::npos)
      << warned[0];
}

TEST_F(MemoryRun, a_memory_pool_serializes_every_rank) {
  // One FIFO: loads of ranks 0-3 end at A, 2A, 3A, 4A; the stores, issued as each load ends, queue
  // behind the last load: 5A, 6A, 7A, 8A.
  auto result = go(load_then_store(4), memory_file("MEMORY_POOL"));
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_EQ(finishes(*result),
            (std::vector<int64_t>{5 * kAccess, 6 * kAccess, 7 * kAccess, 8 * kAccess}));
  EXPECT_EQ(result->end, SimTime::from_ns(171768));
}

TEST_F(MemoryRun, memory_nodes_without_remote_memory_stop_the_run_as_in_astra_sim) {
  auto none = go(load_then_store(2));
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().kind(), ErrorKind::kConfig);
  EXPECT_NE(none.error().message().find("rank 0 node 1: memory nodes need a remote memory, but no "
                                        "remote memory file was given"),
            std::string::npos)
      << none.error().message();

  auto explicit_none =
      go(load_then_store(2), "{\"memory-type\": \"NO_MEMORY_EXPANSION\", \"colour\": 1}");
  ASSERT_FALSE(explicit_none);
  EXPECT_NE(explicit_none.error().message().find("sets NO_MEMORY_EXPANSION"), std::string::npos)
      << explicit_none.error().message();

  // Without memory nodes the same file is fine; its unknown key is reported.
  auto no_memory_nodes = go({{test::comp_node(1)}, {test::comp_node(1)}},
                            "{\"memory-type\": \"NO_MEMORY_EXPANSION\", \"colour\": 1}");
  ASSERT_TRUE(no_memory_nodes) << no_memory_nodes.error().message();
  EXPECT_EQ(warnings_about("key 'colour' is not an ASTRA-sim remote memory key").size(), 1u);
}

TEST_F(MemoryRun, replay_only_replays_memory_nodes_without_touching_the_remote_memory) {
  // ASTRA-sim's replay-only mode gives every node its recorded duration, memory nodes included, so
  // they need no remote memory: load 3 us, then store 4 us.
  Node load = memory_node(1, true);
  load.set_duration_micros(3);
  Node store = memory_node(2, false, {1});
  store.set_duration_micros(4);
  auto result = go({{load, store}, {load, store}}, "", 0, ", \"replay-only\": 1");
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_EQ(finishes(*result), (std::vector<int64_t>{7000, 7000}));
  EXPECT_EQ(result->rank_results[0].memory, SimTime::from_us(7));
}

// ---- peak memory ----

void tensors(Node& node, const char* attribute,
             std::initializer_list<std::pair<const char*, uint64_t>> list) {
  auto* values = test::add_attr(node, attribute).mutable_string_list();
  for (const auto& [name, size] : list) {
    values->add_values(name);
    values->add_values(std::to_string(size) + ".0");
  }
}

Node kernel(uint64_t id, std::initializer_list<uint64_t> deps,
            std::initializer_list<std::pair<const char*, uint64_t>> in,
            std::initializer_list<std::pair<const char*, uint64_t>> out) {
  Node node = test::comp_node(id, deps);  // 10 us
  tensors(node, "inputs", in);
  tensors(node, "outputs", out);
  return node;
}

TEST_F(MemoryRun, peak_memory_follows_the_tensors_of_a_chain) {
  // Rank 0: A writes x (1 MiB) [0, 10 us]; B reads x, writes y (2 MiB) [10, 20]; C reads y and
  // the weight w (4 MiB) [20, 30]. w is held from the start until C ends: 4 + 1 + 2 = 7 MiB while B
  // runs. Rank 1 only writes a 5 MiB tensor no one reads.
  auto result =
      go({{kernel(1, {}, {}, {{"x", kMiB}}), kernel(2, {1}, {{"x", kMiB}}, {{"y", 2 * kMiB}}),
           kernel(3, {2}, {{"y", 2 * kMiB}, {"w", 4 * kMiB}}, {})},
          {kernel(1, {}, {}, {{"z", 5 * kMiB}})}});
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_EQ(result->rank_results[0].finish, SimTime::from_us(30));
  EXPECT_EQ(result->peak_memory, (std::vector<uint64_t>{7 * kMiB, 5 * kMiB}));
  EXPECT_TRUE(warnings_about("peak memory").empty());
}

TEST_F(MemoryRun, traces_without_tensors_report_no_peak_unless_asked) {
  Node compute = test::comp_node(1);
  test::add_attr(compute, "tensor_size").set_uint64_val(3000);
  auto plain = go({{compute}, {compute}});
  ASSERT_TRUE(plain) << plain.error().message();
  EXPECT_TRUE(plain->peak_memory.empty());
  // With a capacity the bytes of the running nodes are counted.
  auto checked = go({{compute}, {compute}}, "", 1000);
  ASSERT_TRUE(checked) << checked.error().message();
  EXPECT_EQ(checked->peak_memory, (std::vector<uint64_t>{3000, 3000}));
  EXPECT_EQ(warnings_about("exceeds the capacity").size(), 2u);
  // So does ASTRA-sim's track-local-mem.
  auto tracked = go({{compute}, {compute}}, "", 0, ", \"track-local-mem\": 1");
  ASSERT_TRUE(tracked) << tracked.error().message();
  EXPECT_EQ(tracked->peak_memory, (std::vector<uint64_t>{3000, 3000}));
}

TEST_F(MemoryRun, a_malformed_tensor_list_only_stops_a_run_that_checks_a_capacity) {
  Node odd = test::comp_node(1);
  test::add_attr(odd, "outputs").mutable_string_list()->add_values("x");
  auto lenient = go({{odd}, {odd}});
  ASSERT_TRUE(lenient) << lenient.error().message();
  EXPECT_TRUE(lenient->peak_memory.empty());
  EXPECT_EQ(warnings_about("'outputs' has 1 strings, expected tensor name and size pairs; peak "
                           "memory is not tracked")
                .size(),
            1u)
      << fmt::format("{}", fmt::join(warnings_, "\n"));
  auto checked = go({{odd}, {odd}}, "", 80ull << 30);
  ASSERT_FALSE(checked);
  EXPECT_NE(checked.error().message().find("w rank 0: node 1: 'outputs' has 1 strings"),
            std::string::npos)
      << checked.error().message();
}

TEST_F(MemoryRun, the_capacity_warning_names_the_ranks_over_it_and_counts_the_rest) {
  // Ten ranks hold 1 MiB each, rank 6 2 MiB; a 1 KiB capacity: eight ranks named, two counted.
  std::vector<std::vector<Node>> ranks;
  for (int rank = 0; rank < 10; ++rank) {
    ranks.push_back({kernel(1, {}, {}, {{"x", rank == 6 ? 2 * kMiB : kMiB}})});
  }
  auto over = go(ranks, "", 1024);
  ASSERT_TRUE(over) << over.error().message();
  const auto warned = warnings_about("capacity");
  ASSERT_EQ(warned.size(), 9u) << fmt::format("{}", fmt::join(warnings_, "\n"));
  EXPECT_EQ(warned[0], "rank 0: peak memory 1.00 MiB exceeds the capacity of 1.00 KiB");
  EXPECT_EQ(warned[6], "rank 6: peak memory 2.00 MiB exceeds the capacity of 1.00 KiB");
  EXPECT_EQ(warned[8],
            "... and 2 more ranks exceed the capacity of 1.00 KiB (the highest peak: rank 6, "
            "2.00 MiB)");
  // Exactly at the capacity is within it.
  auto at = go(ranks, "", 2 * kMiB);
  ASSERT_TRUE(at) << at.error().message();
  EXPECT_TRUE(warnings_about("capacity").empty());
  auto under = go(ranks, "", 2 * kMiB - 1);
  ASSERT_TRUE(under) << under.error().message();
  EXPECT_EQ(
      warnings_about("capacity"),
      std::vector<std::string>{"rank 6: peak memory 2.00 MiB exceeds the capacity of 2.00 MiB"});
}

// ---- the symbolic tensor graph example ----

Expected<RunResult> run_stg(uint64_t capacity, std::vector<std::string>& warnings) {
  test::RunInputs inputs;
  inputs.traces = test::load_traces(test::test_data("symbolic_tensor_graph/dp2tp2pp2/workload"));
  inputs.system = test::system_json("ring", 2, 4, 1, 10, 1600, "localBWAware",
                                    ", \"roofline-enabled\": 1, \"peak-perf\": 900");
  inputs.network = test::network_yaml("Ring, Switch", "4, 2", "200, 50", "500, 1000");
  inputs.comm_groups =
      test::read_text(test::test_data("symbolic_tensor_graph/dp2tp2pp2/workload.json"));
  inputs.settings.memory_capacity = capacity;
  return test::simulate(inputs, &warnings);
}

TEST(MemoryRunStg, the_llama_example_has_a_plausible_peak_equal_across_symmetric_ranks) {
  std::vector<std::string> warnings;
  auto result = run_stg(0, warnings);
  ASSERT_TRUE(result) << result.error().message();
  ASSERT_EQ(result->peak_memory.size(), 8u);
  // Rank 0 names 114 tensors of 15,073,280 bytes in all, 6,815,744 of them read but never written
  // (held from the start): the peak lies between the two.
  EXPECT_GE(result->peak_memory[0], 6815744u);
  EXPECT_LE(result->peak_memory[0], 15073280u);
  // Ranks 0-3 run pipeline stage 0 and ranks 4-7 stage 1; within a stage the ranks differ only in
  // their tensor- and data-parallel position, so they hold the same.
  for (uint32_t rank = 0; rank < 8; ++rank) {
    EXPECT_GT(result->peak_memory[rank], 0u);
    EXPECT_EQ(result->peak_memory[rank], result->peak_memory[rank < 4 ? 0 : 4]) << "rank " << rank;
  }
  // The figures themselves: replaying ASTRA-sim's LocalMemUsageTracker rules by hand (a script over
  // this run's --timeline and the traces' tensor lists) gives 7,471,104 bytes for stage 0 and
  // 7,077,888 for stage 1.
  EXPECT_EQ(result->peak_memory[0], 7471104u);
  EXPECT_EQ(result->peak_memory[4], 7077888u);
  for (const std::string& line : warnings) EXPECT_EQ(line.find("capacity"), std::string::npos);

  // 80 GiB is plenty; 1 MiB is not, for any rank.
  warnings.clear();
  ASSERT_TRUE(run_stg(80ull << 30, warnings));
  for (const std::string& line : warnings) EXPECT_EQ(line.find("capacity"), std::string::npos);
  warnings.clear();
  ASSERT_TRUE(run_stg(kMiB, warnings));
  const auto over = std::count_if(warnings.begin(), warnings.end(), [](const std::string& line) {
    return line.find("exceeds the capacity of 1.00 MiB") != std::string::npos;
  });
  EXPECT_EQ(over, 8);
}

}  // namespace memory_run_test
}  // namespace orrery::sim
