// Whole runs: real traces to completion, determinism, and runs that cannot finish or should not
// start, each with a message that names what is wrong.
#include <gtest/gtest.h>

#include "sim/sim_test_support.h"

namespace orrery::sim {
namespace run_test {

std::string data(const std::string& relative) { return test::test_data(relative); }

// The traces at `workload` (under tests/data) with a system and a network given as text, and the
// communicator-group file at `groups` (under tests/data) when not empty.
Expected<RunResult> run(const std::string& workload, const std::string& system,
                        const std::string& network, const std::string& groups = "",
                        const std::string& backend = "analytical") {
  test::RunInputs inputs;
  inputs.traces = test::load_traces(workload);
  inputs.system = system;
  inputs.network = network;
  if (!groups.empty()) inputs.comm_groups = test::read_text(groups);
  inputs.settings.backend = backend;
  return test::simulate(inputs);
}

std::string roofline_system(uint32_t dims) {
  return test::system_json("ring", dims, 4, 1, 10, 1600, "localBWAware",
                           ", \"roofline-enabled\": 1, \"peak-perf\": 900");
}

TEST(RealTraces, stg_llama_dp2_tp2_pp2_runs_with_its_groups_and_the_roofline) {
  const std::string sys(roofline_system(2));
  const std::string net(test::network_yaml("Ring, Switch", "4, 2", "200, 50", "500, 1000"));
  auto result = run(data("symbolic_tensor_graph/dp2tp2pp2/workload"), sys, net,
                    data("symbolic_tensor_graph/dp2tp2pp2/workload.json"));
  ASSERT_TRUE(result) << result.error().message();
  ASSERT_EQ(result->rank_results.size(), 8u);
  for (const auto& rank : result->rank_results) {
    EXPECT_TRUE(rank.finished);
    EXPECT_EQ(rank.completed, rank.nodes);
    EXPECT_EQ(rank.collectives, 24u);
    EXPECT_EQ(rank.sends, 2u);
    EXPECT_EQ(rank.recvs, 2u);
    // The roofline gives every compute node a time; collectives and pipeline transfers add more.
    EXPECT_GT(rank.gpu_compute, SimTime::zero());
    EXPECT_GT(rank.finish, rank.gpu_compute);
    EXPECT_LE(rank.comm_exposed, rank.finish);
  }
  // Pipeline stage 1 (ranks 4-7) waits for stage 0's activations, so stage 0 (ranks 0-3), which
  // also waits for the gradients to come back, finishes last.
  EXPECT_EQ(result->rank_results[0].finish, result->end);
  // 4 groups of 2 for tensor parallelism and 4 for data parallelism, each collective counted once.
  EXPECT_EQ(result->collectives.size(), 96u);
}

TEST(RealTraces, stg_gpt_fsdp4_runs_all_gathers_and_reduce_scatters) {
  const std::string sys(roofline_system(1));
  const std::string net(test::network_yaml("Ring", "4", "50", "500"));
  auto result = run(data("symbolic_tensor_graph/fsdp4/workload"), sys, net,
                    data("symbolic_tensor_graph/fsdp4/workload.json"));
  ASSERT_TRUE(result) << result.error().message();
  std::map<std::string, int> types;
  for (const auto& record : result->collectives)
    ++types[std::string(sys::collective_name(record.type))];
  EXPECT_GT(types["all-gather"], 0);
  EXPECT_GT(types["reduce-scatter"], 0);
  for (const auto& rank : result->rank_results) EXPECT_TRUE(rank.finished);
}

TEST(RealTraces, the_custom_ring_graphs_run_as_a_workload_of_sends_and_receives) {
  // The same files ASTRA-sim runs as a custom collective, here as the workload itself: every send
  // completes when its message arrives, so 14 neighbour transfers of 128 KiB (2,941 ns each) and
  // 7 compute nodes of 7 us give the same 90,174 ns.
  auto result = run(data("astra-sim/custom_ring_allreduce/custom_allreduce"),
                    test::read_text(data("astra-sim/configs/Ring_4chunks.json")),
                    test::read_text(data("network/Ring_8npus.yml")), "", "congestion-aware");
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_EQ(test::common_finish_ns(*result), 90174);
  EXPECT_EQ(result->rank_results[0].sends, 14u);
}

TEST(RealTraces, text_converter_traces_run_with_replayed_compute) {
  const std::string sys(test::system_json("ring", 1));
  const std::string net(test::network_yaml("Ring", "4", "50", "500"));
  for (const char* name : {"Resnet50_DataParallel", "MLP_ModelParallel", "microAllReduce"}) {
    auto result = run(data(std::string("astra-sim/text_converter/") + name), sys, net);
    ASSERT_TRUE(result) << name << ": " << result.error().message();
    for (const auto& rank : result->rank_results) {
      EXPECT_TRUE(rank.finished) << name;
      EXPECT_GE(rank.finish, rank.gpu_compute) << name;
    }
  }
  // microAllReduce is one 1 MB all-reduce: 4 chunks x (10 + 6 x 1,730 + 3 x 120) ns.
  auto micro = run(data("astra-sim/text_converter/microAllReduce"), sys, net);
  ASSERT_TRUE(micro);
  EXPECT_EQ(test::common_finish_ns(*micro), 43000);
}

TEST(RealTraces, the_feeder_trace_runs_in_lenient_mode_and_is_refused_in_strict_mode) {
  const std::string sys(test::system_json("ring", 1));
  const std::string net(test::network_yaml("Ring", "2", "50", "500"));
  // A two-rank data-parallel job: the recorded rank twice.
  Expected<chakra::TraceGraph> feeder = chakra::load_trace(test::feeder_trace());
  ASSERT_TRUE(feeder) << feeder.error().message();
  std::vector<chakra::TraceGraph> graphs;
  graphs.push_back(std::move(*feeder));
  test::RunInputs inputs;
  inputs.traces = chakra::TraceSet::from_graphs("feeder", std::move(graphs), {0, 0});
  inputs.system = sys;
  inputs.network = net;
  std::vector<std::string> warnings;
  auto result = test::simulate(inputs, &warnings);
  ASSERT_TRUE(result) << result.error().message();
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings.front().find("1,277 control dependencies on nodes not in the file"),
            std::string::npos);
  for (const auto& rank : result->rank_results) {
    EXPECT_EQ(rank.completed, 3664u);
    // Replayed compute: the recorded GPU kernel and CPU op durations, all of them.
    EXPECT_GT(rank.gpu_compute, SimTime::zero());
    EXPECT_GT(rank.cpu_compute, SimTime::zero());
  }
  inputs.settings.mode = chakra::ValidationMode::kStrict;
  auto strict = test::simulate(inputs);
  ASSERT_FALSE(strict);
  EXPECT_NE(strict.error().message().find("cannot run in strict mode"), std::string::npos);
}

TEST(Determinism, two_runs_give_identical_results) {
  const std::string sys(roofline_system(2));
  const std::string net(test::network_yaml("Ring, Switch", "4, 2", "200, 50", "500, 1000"));
  auto first = run(data("symbolic_tensor_graph/dp2tp2pp2/workload"), sys, net,
                   data("symbolic_tensor_graph/dp2tp2pp2/workload.json"), "congestion-aware");
  auto second = run(data("symbolic_tensor_graph/dp2tp2pp2/workload"), sys, net,
                    data("symbolic_tensor_graph/dp2tp2pp2/workload.json"), "congestion-aware");
  ASSERT_TRUE(first && second);
  ASSERT_EQ(first->rank_results.size(), second->rank_results.size());
  for (size_t rank = 0; rank < first->rank_results.size(); ++rank) {
    EXPECT_EQ(first->rank_results[rank].finish, second->rank_results[rank].finish);
    EXPECT_EQ(first->rank_results[rank].comm_exposed, second->rank_results[rank].comm_exposed);
  }
  EXPECT_EQ(first->events, second->events);
  ASSERT_EQ(first->links.size(), second->links.size());
  for (size_t idx = 0; idx < first->links.size(); ++idx) {
    EXPECT_EQ(first->links[idx].bytes, second->links[idx].bytes);
    EXPECT_EQ(first->links[idx].busy, second->links[idx].busy);
  }
}

// ---- runs that cannot finish ----

ChakraProtoMsg::Node p2p(uint64_t id, bool send, int peer, int tag, int64_t bytes) {
  auto node =
      test::make_node(id, send ? ChakraProtoMsg::COMM_SEND_NODE : ChakraProtoMsg::COMM_RECV_NODE);
  test::add_attr(node, send ? "comm_dst" : "comm_src").set_int32_val(peer);
  test::add_attr(node, "comm_tag").set_int32_val(tag);
  test::add_attr(node, "comm_size").set_int64_val(bytes);
  return node;
}

class StuckRuns : public ::testing::Test {
 protected:
  static test::RunInputs inputs(const std::vector<std::vector<ChakraProtoMsg::Node>>& ranks) {
    test::RunInputs in;
    in.traces = test::traces_of(ranks);
    in.system = test::system_json("ring", 1);
    in.network = test::network_yaml("Ring", "2", "50", "500");
    return in;
  }
  Expected<RunResult> go(const std::vector<std::vector<ChakraProtoMsg::Node>>& ranks) {
    return test::simulate(inputs(ranks));
  }
};

TEST_F(StuckRuns, a_receive_without_a_send_names_the_rank_and_node) {
  auto result = go({{p2p(5, false, 1, 7, 64)}, {test::comp_node(1)}});
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().kind(), ErrorKind::kDeadlock);
  const std::string& message = result.error().message();
  EXPECT_NE(message.find("rank 0: 0 of 1 nodes done; waiting on node 5 (receive from rank 1)"),
            std::string::npos)
      << message;
  EXPECT_NE(
      message.find("rank 0 node 5: receive of 64 bytes from rank 1 (tag 7) has no matching send"),
      std::string::npos)
      << message;
}

TEST_F(StuckRuns, the_time_named_is_the_last_event_with_or_without_progress_reports) {
  // Rank 1 computes 10 us and finishes; rank 0 waits forever. The last event is at 10 us, also
  // when the run advances in slices of simulated time for progress reports.
  auto scenario = test::make_scenario(inputs({{p2p(5, false, 1, 7, 64)}, {test::comp_node(1)}}));
  ASSERT_TRUE(scenario) << scenario.error().message();
  const std::string expected = "no event is left at 10000 ns";
  auto plain = Simulation(*scenario).run();
  ASSERT_FALSE(plain);
  EXPECT_NE(plain.error().message().find(expected), std::string::npos) << plain.error().message();
  int reports = 0;
  Simulation reported(*scenario);
  reported.set_progress([&](SimTime, uint32_t, uint32_t) { ++reports; });
  auto sliced = reported.run();
  ASSERT_FALSE(sliced);
  EXPECT_GT(reports, 0);
  EXPECT_EQ(sliced.error().message(), plain.error().message());
}

TEST_F(StuckRuns, a_send_nobody_receives_is_named_too) {
  auto result = go({{p2p(3, true, 1, 2, 128), test::comp_node(4, {3})}, {test::comp_node(1)}});
  // The send completes on delivery, so rank 0 finishes; an unreceived message alone is no deadlock.
  ASSERT_TRUE(result) << result.error().message();
  auto stuck = go({{p2p(3, true, 1, 2, 128)}, {p2p(9, false, 0, 3, 128)}});
  ASSERT_FALSE(stuck);
  EXPECT_NE(stuck.error().message().find(
                "rank 0 node 3: send of 128 bytes to rank 1 (tag 2) has no matching receive"),
            std::string::npos)
      << stuck.error().message();
}

TEST_F(StuckRuns, a_collective_one_member_never_issues_names_the_missing_rank) {
  auto result =
      go({{test::coll_node(1, ChakraProtoMsg::ALL_REDUCE, 1 << 20)}, {test::comp_node(1)}});
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message().find(
                "all-reduce #0 of all ranks (1048576 bytes, first issued by rank 0 at node 1): "
                "1 of 2 ranks issued it; never issued by rank(s) 1"),
            std::string::npos)
      << result.error().message();
}

TEST_F(StuckRuns, collective_sizes_that_differ_across_a_group_are_an_error) {
  auto result = go({{test::coll_node(1, ChakraProtoMsg::ALL_REDUCE, 1 << 20)},
                    {test::coll_node(8, ChakraProtoMsg::ALL_REDUCE, 1 << 21)}});
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message().find(
                "collective #0 of communicator group 'all ranks' differs across its ranks: rank 0 "
                "issued all-reduce of 1048576 bytes (node 1) but rank 1 issued all-reduce of "
                "2097152 bytes (node 8)"),
            std::string::npos)
      << result.error().message();
}

TEST_F(StuckRuns, a_send_and_receive_of_different_sizes_are_an_error) {
  auto result = go({{p2p(1, true, 1, 0, 100)}, {p2p(2, false, 0, 0, 200)}});
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message().find(
                "rank 1 node 2 receives 200 bytes from rank 0 (tag 0), but the matching send "
                "(rank 0 node 1) carries 100 bytes"),
            std::string::npos)
      << result.error().message();
}

TEST_F(StuckRuns, a_dependency_cycle_is_refused_before_the_run) {
  auto result = go({{test::make_node(1, ChakraProtoMsg::COMP_NODE, {2}),
                     test::make_node(2, ChakraProtoMsg::COMP_NODE, {1})},
                    {test::comp_node(1)}});
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message().find("dependency cycle 1 -> 2 -> 1"), std::string::npos)
      << result.error().message();
}

TEST_F(StuckRuns, an_unknown_group_names_the_pg_name) {
  auto coll = test::coll_node(1, ChakraProtoMsg::ALL_REDUCE, 64);
  test::add_attr(coll, "pg_name").set_string_val("7");
  auto result = go({{coll}, {coll}});
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message().find("pg_name '7' names no communicator group"),
            std::string::npos)
      << result.error().message();
}

// ---- inputs that should not start ----

TEST(BadRunInputs, an_implementation_list_shorter_than_the_dimensions) {
  const std::string sys(test::system_json("ring", 1));
  const std::string net(test::network_yaml("Ring, Ring", "4, 2", "50, 50", "500, 500"));
  auto result = run(data("astra-sim/microbenchmarks/all_reduce/8npus_1MB/all_reduce"), sys, net);
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message().find(
                "key 'all-reduce-implementation' lists 1 implementation(s) but the network has 2 "
                "dimension(s)"),
            std::string::npos)
      << result.error().message();
}

TEST(BadRunInputs, a_missing_rank_file_is_named) {
  const std::string sys(test::system_json("ring", 1));
  const std::string net(test::network_yaml("Ring", "16", "50", "500"));
  auto result = run(data("astra-sim/microbenchmarks/all_reduce/8npus_1MB/all_reduce"), sys, net);
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message().find("has 16 ranks but the workload has 8 rank file(s)"),
            std::string::npos)
      << result.error().message();
  EXPECT_NE(result.error().message().find("all_reduce.8.et is missing"), std::string::npos);
}

TEST(BadRunInputs, an_unknown_algorithm_names_file_line_and_key) {
  const std::string sys(test::system_json("spiral", 1));
  const std::string net(test::network_yaml("Ring", "8", "50", "500"));
  auto result = run(data("astra-sim/microbenchmarks/all_reduce/8npus_1MB/all_reduce"), sys, net);
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message().find("sys.json:2: key 'all-reduce-implementation'"),
            std::string::npos)
      << result.error().message();
  EXPECT_NE(result.error().message().find("spiral"), std::string::npos);
}

}  // namespace run_test
}  // namespace orrery::sim
