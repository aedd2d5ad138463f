// How ranks execute their traces: issue slots, compute models, point-to-point matching,
// communicator groups from METADATA nodes, involved dimensions and the scheduling policy.
#include <gtest/gtest.h>

#include "sim/sim_test_support.h"

namespace orrery::sim {
namespace executor_test {

class Executor : public ::testing::Test {
 protected:
  // Runs `ranks` (one node list per rank) on a Ring of that many ranks, 50 GB/s, 500 ns.
  Expected<RunResult> go(const std::vector<std::vector<ChakraProtoMsg::Node>>& ranks,
                         const std::string& system = test::system_json("ring", 1),
                         const std::string& network = "") {
    test::RunInputs inputs;
    inputs.traces = test::traces_of(ranks);
    inputs.system = system;
    inputs.network = network.empty()
                         ? test::network_yaml("Ring", std::to_string(ranks.size()), "50", "500")
                         : network;
    return test::simulate(inputs);
  }
};

ChakraProtoMsg::Node compute(uint64_t id, uint64_t micros, bool cpu,
                             std::initializer_list<uint64_t> deps = {}) {
  auto node = test::make_node(id, ChakraProtoMsg::COMP_NODE, deps);
  node.set_duration_micros(micros);
  test::add_attr(node, "is_cpu_op").set_bool_val(cpu);
  return node;
}

TEST_F(Executor, two_accelerator_kernels_share_one_slot_but_a_cpu_op_runs_beside_them) {
  auto result = go({{compute(1, 10, false), compute(2, 10, false), compute(3, 10, true)},
                    {compute(1, 10, false), compute(2, 10, true)}});
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_EQ(result->rank_results[0].finish, SimTime::from_us(20));
  EXPECT_EQ(result->rank_results[0].gpu_compute, SimTime::from_us(20));
  EXPECT_EQ(result->rank_results[0].cpu_compute, SimTime::from_us(10));
  EXPECT_EQ(result->rank_results[1].finish, SimTime::from_us(10));
}

TEST_F(Executor, a_zero_duration_counts_as_one_nanosecond_and_empty_compute_as_nothing) {
  // Replayed compute with FLOPs but no recorded time takes 1 ns; with neither it is skipped.
  auto with_flops = [](uint64_t id, std::initializer_list<uint64_t> deps) {
    auto node = compute(id, 0, false, deps);
    test::add_attr(node, "num_ops").set_int64_val(4096);
    return node;
  };
  auto empty = test::make_node(2, ChakraProtoMsg::COMP_NODE, {1});
  auto result = go({{with_flops(1, {}), empty, with_flops(3, {2})}, {compute(1, 1, false)}});
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_EQ(result->rank_results[0].finish, SimTime::from_ns(2));
  EXPECT_EQ(result->rank_results[0].completed, 3u);
}

TEST_F(Executor, the_roofline_takes_the_lower_of_peak_and_memory_bound_performance) {
  // peak 900 TFLOPS, 1600 GB/s: 1e9 FLOPs on 1e6 bytes (intensity 1000) are compute bound:
  // 1e9 / 9e14 s = 1,111 ns; on 1e9 bytes (intensity 1) memory bound: 1e9 / 1.6e12 s = 625,000 ns.
  auto node = [](uint64_t id, uint64_t bytes, std::initializer_list<uint64_t> deps) {
    auto comp = test::make_node(id, ChakraProtoMsg::COMP_NODE, deps);
    test::add_attr(comp, "num_ops").set_int64_val(1000000000);
    test::add_attr(comp, "tensor_size").set_uint64_val(bytes);
    return comp;
  };
  const std::string system = test::system_json("ring", 1, 4, 1, 10, 1600, "localBWAware",
                                               ", \"roofline-enabled\": 1, \"peak-perf\": 900");
  auto result = go({{node(1, 1000000, {})}, {node(1, 1000000000, {})}}, system);
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_EQ(result->rank_results[0].finish, SimTime::from_ns(1111));
  EXPECT_EQ(result->rank_results[1].finish, SimTime::from_ns(625000));
}

ChakraProtoMsg::Node p2p(uint64_t id, bool send, int peer, int tag, int64_t bytes,
                         std::initializer_list<uint64_t> deps = {}) {
  auto node = test::make_node(
      id, send ? ChakraProtoMsg::COMM_SEND_NODE : ChakraProtoMsg::COMM_RECV_NODE, deps);
  test::add_attr(node, send ? "comm_dst" : "comm_src").set_int32_val(peer);
  test::add_attr(node, "comm_tag").set_int32_val(tag);
  test::add_attr(node, "comm_size").set_int64_val(bytes);
  return node;
}

TEST_F(Executor, receives_match_sends_by_tag_whatever_the_order) {
  // Rank 0 sends tag 1 then tag 2; rank 1 waits for tag 2 first. A message takes
  // floor(500 + 1 MiB / 50 GiB/s) = 20,031 ns on this ring.
  auto result = go({{p2p(1, true, 1, 1, 1 << 20), p2p(2, true, 1, 2, 1 << 20, {1})},
                    {p2p(1, false, 0, 2, 1 << 20), p2p(2, false, 0, 1, 1 << 20, {1})}});
  ASSERT_TRUE(result) << result.error().message();
  // The sends share rank 0's communication slot: the second leaves when the first arrives.
  EXPECT_EQ(result->rank_results[0].finish, SimTime::from_ns(2 * 20031));
  EXPECT_EQ(result->rank_results[1].finish, SimTime::from_ns(2 * 20031));
}

TEST_F(Executor, groups_come_from_metadata_nodes) {
  auto metadata = test::make_node(0, ChakraProtoMsg::METADATA_NODE);
  metadata.mutable_inputs()->set_values(
      "[{'pg_name': '5', 'ranks': [0, 1]}, {'pg_name': '6', 'ranks': [2, 3]}]");
  auto coll = [](uint64_t id, const char* pg) {
    auto node = test::coll_node(id, ChakraProtoMsg::ALL_REDUCE, 1 << 20, {0});
    test::add_attr(node, "pg_name").set_string_val(pg);
    return node;
  };
  auto result = go({{metadata, coll(1, "5")},
                    {metadata, coll(1, "5")},
                    {metadata, coll(1, "6")},
                    {metadata, coll(1, "6")}});
  ASSERT_TRUE(result) << result.error().message();
  ASSERT_EQ(result->collectives.size(), 2u);
  EXPECT_EQ(result->collectives[0].ranks, 2u);
  EXPECT_EQ(result->collective_group_names[result->collectives[0].group], "5");
  EXPECT_EQ(result->collective_group_names[result->collectives[1].group], "6");
}

TEST_F(Executor, byte_identical_rank_files_share_a_graph_and_its_groups) {
  // Ranks 1 and 3 are byte copies of rank 0: the loader parses rank 0 once and re-applies its
  // METADATA groups for them. Rank 2 differs and only computes.
  auto metadata = test::make_node(0, ChakraProtoMsg::METADATA_NODE);
  metadata.mutable_inputs()->set_values("[{'pg_name': '5', 'ranks': [0, 1, 3]}]");
  auto coll = test::coll_node(1, ChakraProtoMsg::ALL_REDUCE, 3 << 20, {0});
  test::add_attr(coll, "pg_name").set_string_val("5");
  const std::vector<ChakraProtoMsg::Node> first = {metadata, coll};
  auto result = go({first, first, {test::comp_node(1)}, first});
  ASSERT_TRUE(result) << result.error().message();
  ASSERT_EQ(result->collectives.size(), 1u);
  EXPECT_EQ(result->collective_group_names[result->collectives[0].group], "5");
  EXPECT_EQ(result->collectives[0].ranks, 3u);
  EXPECT_EQ(result->rank_results[2].finish, SimTime::from_us(10));
  for (const uint32_t rank : {0u, 1u, 3u}) {
    EXPECT_GT(result->rank_results[rank].comm_active, SimTime()) << "rank " << rank;
  }
}

// Ranks whose graphs share a structure share each node's slot and compute time, worked out once;
// a rank that patches a node must still be timed by its own values. Rank 0 (issued first) and
// rank 2 patch node 1's FLOPs (twice the work) and node 2's is_cpu_op (a CPU op beside node 3);
// rank 1 does not. Roofline at 1,000 TFLOPS, compute bound: 1e9 FLOPs take 1,000 ns.
TEST_F(Executor, ranks_of_one_structure_are_timed_by_their_own_patched_values) {
  auto kernel = [](uint64_t id, int64_t flops, bool cpu, std::initializer_list<uint64_t> deps) {
    auto node = test::make_node(id, ChakraProtoMsg::COMP_NODE, deps);
    node.set_duration_micros(5);  // what a CPU op replays
    test::add_attr(node, "is_cpu_op").set_bool_val(cpu);
    test::add_attr(node, "num_ops").set_int64_val(flops);
    test::add_attr(node, "tensor_size").set_uint64_val(1000);
    return node;
  };
  const chakra::TraceGraph base =
      test::build_graph({kernel(1, 1000000000, false, {}), kernel(2, 1000000000, false, {1}),
                         kernel(3, 3000000000, false, {1})});
  auto patched = [&] {
    chakra::TraceGraph graph = chakra::TraceGraph::derived_from(base);
    EXPECT_TRUE(graph.patch_node(0, kernel(1, 2000000000, false, {}), false));
    EXPECT_TRUE(graph.patch_node(1, kernel(2, 1000000000, true, {1}), false));
    return graph;
  };
  std::vector<chakra::TraceGraph> graphs;
  graphs.push_back(patched());
  graphs.push_back(chakra::TraceGraph::derived_from(base));
  graphs.push_back(patched());
  ASSERT_TRUE(graphs[0].shares_structure(graphs[1]) && graphs[1].shares_structure(graphs[2]));
  test::RunInputs inputs;
  inputs.traces = chakra::TraceSet::from_graphs("w", std::move(graphs));
  inputs.system = test::system_json("ring", 1, 4, 1, 10, 1600, "localBWAware",
                                    ", \"roofline-enabled\": 1, \"peak-perf\": 1000");
  inputs.network = test::network_yaml("Ring", "3", "50", "500");
  auto result = test::simulate(inputs);
  ASSERT_TRUE(result) << result.error().message();
  // Unpatched: node 1 (1,000 ns), then nodes 2 and 3 on the one accelerator slot (1,000 + 3,000).
  const workload::RankResult& plain = result->rank_results[1];
  EXPECT_EQ(plain.finish, SimTime::from_ns(5000));
  EXPECT_EQ(plain.gpu_compute, SimTime::from_ns(5000));
  EXPECT_EQ(plain.cpu_compute, SimTime::zero());
  // Patched: node 1 takes 2,000 ns; node 2 replays 5 us on the CPU beside node 3's 3,000 ns.
  for (const uint32_t rank : {0u, 2u}) {
    const workload::RankResult& own = result->rank_results[rank];
    EXPECT_EQ(own.finish, SimTime::from_ns(7000)) << "rank " << rank;
    EXPECT_EQ(own.gpu_compute, SimTime::from_ns(5000)) << "rank " << rank;
    EXPECT_EQ(own.cpu_compute, SimTime::from_us(5)) << "rank " << rank;
  }
}

TEST_F(Executor, involved_dim_keeps_a_collective_to_the_dimensions_it_names) {
  // On Ring(4) x Ring(2), an all-reduce limited to dimension 0 runs four independent rings of 4.
  auto only_dim0 = [](uint64_t id) {
    auto node = test::coll_node(id, ChakraProtoMsg::ALL_REDUCE, 1 << 20);
    auto& dims = test::add_attr(node, "involved_dim");
    dims.mutable_bool_list()->add_values(true);
    dims.mutable_bool_list()->add_values(false);
    return node;
  };
  std::vector<std::vector<ChakraProtoMsg::Node>> ranks(8, {only_dim0(1)});
  auto two_d = go(ranks, test::system_json("ring", 2),
                  test::network_yaml("Ring, Ring", "4, 2", "50, 50", "500, 500"));
  ASSERT_TRUE(two_d) << two_d.error().message();
  test::MicroRun run;
  run.ranks = 4;
  run.system = test::system_json("ring", 1);
  run.network = test::network_yaml("Ring", "4", "50", "500");
  auto one_d = test::run_micro(run);
  ASSERT_TRUE(one_d) << one_d.error().message();
  // The chunk minimum differs (8 ranks in the network): 1 MiB / 4 chunks is far above both.
  EXPECT_EQ(two_d->rank_results[0].finish, one_d->rank_results[0].finish);
}

TEST_F(Executor, lifo_lets_a_later_collective_overtake_waiting_chunks_and_fifo_does_not) {
  // Each rank issues a host-side all-reduce (node 1) and an accelerator all-reduce (node 2) at
  // once: they use different slots and meet in the same dimension queue, one chunk at a time.
  auto pair = [](uint64_t id, bool cpu) {
    auto node = test::make_node(id, ChakraProtoMsg::COMM_COLL_NODE);
    test::add_attr(node, "is_cpu_op").set_bool_val(cpu);
    test::add_attr(node, "comm_type").set_int64_val(ChakraProtoMsg::ALL_REDUCE);
    test::add_attr(node, "comm_size").set_int64_val(1 << 20);
    return node;
  };
  std::vector<std::vector<ChakraProtoMsg::Node>> ranks(4, {pair(1, true), pair(2, false)});
  auto lifo = go(ranks);
  ASSERT_TRUE(lifo) << lifo.error().message();
  std::string fifo_system = test::system_json("ring", 1);
  fifo_system.replace(fifo_system.find("LIFO"), 4, "FIFO");
  auto fifo = go(ranks, fifo_system);
  ASSERT_TRUE(fifo) << fifo.error().message();
  ASSERT_EQ(lifo->collectives.size(), 2u);
  // LIFO: the second collective's chunks go before the first's waiting three: it ends first.
  EXPECT_LT(lifo->collectives[1].last_finish, lifo->collectives[0].last_finish);
  // FIFO: the first collective's chunks all run first.
  EXPECT_LT(fifo->collectives[0].last_finish, fifo->collectives[1].last_finish);
  // Either way the queue is never idle: both end at the same time.
  EXPECT_EQ(lifo->end, fifo->end);
}

TEST_F(Executor, direct_with_a_window_is_slower_than_full_direct_and_the_full_window_is_direct) {
  test::MicroRun run;
  run.network = test::network_yaml("FullyConnected", "8", "50", "500");
  run.system = test::system_json("direct", 1);
  auto direct = test::run_micro(run);
  run.system = test::system_json("direct7", 1);
  auto direct7 = test::run_micro(run);
  run.system = test::system_json("direct2", 1);
  auto direct2 = test::run_micro(run);
  ASSERT_TRUE(direct && direct7 && direct2);
  EXPECT_EQ(direct->end, direct7->end);
  EXPECT_GT(direct2->end, direct->end);
}

TEST_F(Executor, one_ring_on_one_dimension_is_the_ring) {
  test::MicroRun run;
  run.network = test::network_yaml("Ring", "8", "50", "500");
  run.system = test::system_json("ring", 1);
  auto ring = test::run_micro(run);
  run.system = test::system_json("oneRing", 1);
  auto one_ring = test::run_micro(run);
  ASSERT_TRUE(ring && one_ring);
  EXPECT_EQ(ring->end, one_ring->end);
}

TEST_F(Executor, double_binary_tree_all_reduce_completes_on_every_rank) {
  test::MicroRun run;
  run.network = test::network_yaml("FullyConnected", "8", "50", "500");
  run.system =
      "{\"preferred-dataset-splits\": 4, \"local-mem-bw\": 1600, \"all-reduce-implementation\": "
      "[\"doubleBinaryTree\"]}";
  auto tree = test::run_micro(run);
  ASSERT_TRUE(tree) << tree.error().message();
  for (const auto& rank : tree->rank_results) EXPECT_TRUE(rank.finished);
  // Each chunk climbs and descends a tree of depth 3 (8 members): at least 6 message times.
  EXPECT_GE(tree->end, SimTime::from_ns(4 * 6 * 500));
}

}  // namespace executor_test
}  // namespace orrery::sim
