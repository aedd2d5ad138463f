// Where the time went: communication overlapped by compute, per-link bytes, per-dimension use.
#include <gtest/gtest.h>

#include "sim/sim_test_support.h"

namespace orrery::sim {
namespace breakdown_test {

Expected<RunResult> run_ranks(const std::vector<std::vector<ChakraProtoMsg::Node>>& ranks,
                              const std::string& network) {
  test::RunInputs inputs;
  inputs.traces = test::traces_of(ranks);
  inputs.system = test::system_json("ring", 1);
  inputs.network = network;
  return test::simulate(inputs);
}

ChakraProtoMsg::Node kernel(uint64_t id, uint64_t micros) {
  auto node = test::make_node(id, ChakraProtoMsg::COMP_NODE);
  node.set_duration_micros(micros);
  return node;
}

// A 1 MiB all-reduce on Ring(2), 4 chunks: 4 x (10 + 2 x (2,941 + 10) + 243) = 24,620 ns.
constexpr int64_t kAllReduceNs = 24620;

TEST(Breakdown, communication_hidden_by_compute_is_not_exposed) {
  // The collective and a 10 us kernel start together: 10 us of the 24.62 us are hidden.
  const std::vector<ChakraProtoMsg::Node> rank{
      test::coll_node(1, ChakraProtoMsg::ALL_REDUCE, 1 << 20), kernel(2, 10)};
  auto result = run_ranks({rank, rank}, test::network_yaml("Ring", "2", "50", "500"));
  ASSERT_TRUE(result) << result.error().message();
  for (const auto& r : result->rank_results) {
    EXPECT_EQ(r.comm_active, SimTime::from_ns(kAllReduceNs));
    EXPECT_EQ(r.comm_exposed, SimTime::from_ns(kAllReduceNs - 10000));
    EXPECT_EQ(r.comm_exposed,
              r.comm_active - SimTime::from_us(10));  // total minus the overlapped part
    EXPECT_EQ(r.finish, SimTime::from_ns(kAllReduceNs));
    EXPECT_EQ(r.idle(), SimTime::zero());
  }
}

TEST(Breakdown, communication_shorter_than_compute_is_fully_hidden) {
  const std::vector<ChakraProtoMsg::Node> rank{
      test::coll_node(1, ChakraProtoMsg::ALL_REDUCE, 1 << 20), kernel(2, 30)};
  auto result = run_ranks({rank, rank}, test::network_yaml("Ring", "2", "50", "500"));
  ASSERT_TRUE(result) << result.error().message();
  for (const auto& r : result->rank_results) {
    EXPECT_EQ(r.comm_active, SimTime::from_ns(kAllReduceNs));
    EXPECT_EQ(r.comm_exposed, SimTime::zero());
    EXPECT_EQ(r.finish, SimTime::from_us(30));
    // ASTRA-sim's figure (finish minus compute) is zero here too.
    EXPECT_EQ(r.astra_exposed_comm(), SimTime::zero());
  }
}

TEST(Breakdown, communication_after_compute_is_all_exposed_and_nothing_is_idle) {
  const std::vector<ChakraProtoMsg::Node> rank{
      kernel(1, 10), test::coll_node(2, ChakraProtoMsg::ALL_REDUCE, 1 << 20, {1})};
  auto result = run_ranks({rank, rank}, test::network_yaml("Ring", "2", "50", "500"));
  ASSERT_TRUE(result) << result.error().message();
  for (const auto& r : result->rank_results) {
    EXPECT_EQ(r.comm_exposed, SimTime::from_ns(kAllReduceNs));
    EXPECT_EQ(r.finish, SimTime::from_ns(10000 + kAllReduceNs));
    EXPECT_EQ(r.busy, r.finish);
  }
}

TEST(Breakdown, a_rank_waiting_for_nothing_in_flight_is_idle) {
  // Rank 1 receives what rank 0 sends after 10 us of compute; rank 1's receive counts as
  // communication in flight, and rank 0 is never idle either.
  auto send = test::make_node(2, ChakraProtoMsg::COMM_SEND_NODE, {1});
  test::add_attr(send, "comm_dst").set_int32_val(1);
  test::add_attr(send, "comm_tag").set_int32_val(0);
  test::add_attr(send, "comm_size").set_int64_val(1024);
  auto recv = test::make_node(1, ChakraProtoMsg::COMM_RECV_NODE);
  test::add_attr(recv, "comm_src").set_int32_val(0);
  test::add_attr(recv, "comm_tag").set_int32_val(0);
  test::add_attr(recv, "comm_size").set_int64_val(1024);
  auto result =
      run_ranks({{kernel(1, 10), send}, {recv}}, test::network_yaml("Ring", "2", "50", "500"));
  ASSERT_TRUE(result) << result.error().message();
  const auto& receiver = result->rank_results[1];
  EXPECT_EQ(receiver.finish, result->rank_results[0].finish);
  EXPECT_EQ(receiver.comm_active, receiver.finish);
  EXPECT_EQ(receiver.idle(), SimTime::zero());
}

TEST(LinkBytes, a_ring_all_reduce_puts_2_s_n_minus_1_bytes_evenly_on_the_ring) {
  // 8 MiB on Ring(8): 4 chunks of 2 MiB, 14 steps of 256 KiB per rank and chunk, all clockwise.
  test::MicroRun run;
  run.bytes = 8 << 20;
  run.system = test::system_json("ring", 1);
  run.network = test::network_yaml("Ring", "8", "50", "500");
  auto result = test::run_micro(run);
  ASSERT_TRUE(result) << result.error().message();
  const uint64_t total = 2ull * (8 << 20) * 7;
  uint64_t sum = 0;
  ASSERT_EQ(result->links.size(), 8u) << "one clockwise link per rank";
  for (const auto& link : result->links) {
    EXPECT_EQ(link.dst, (link.src + 1) % 8);
    EXPECT_EQ(link.bytes, total / 8);
    EXPECT_EQ(link.messages, 4u * 14u);
    sum += link.bytes;
  }
  EXPECT_EQ(sum, total);
  ASSERT_EQ(result->dimensions.size(), 1u);
  EXPECT_EQ(result->dimensions[0].bytes, total);
  EXPECT_EQ(result->dimensions[0].links, 16u);
  EXPECT_EQ(result->dimensions[0].links_used, 8u);
  // Busy time per link: its bytes at 50 GiB/s; utilization = busy / (links x run time).
  const double busy_s = static_cast<double>(total) / (50.0 * (1ull << 30));
  EXPECT_NEAR(result->dimensions[0].busy.seconds(), busy_s, 1e-9);
  // (per-message serialization is rounded to the picosecond, hence the tolerance)
  EXPECT_NEAR(result->dimensions[0].utilization(result->end), busy_s / (16 * result->end.seconds()),
              1e-6);
}

}  // namespace breakdown_test
}  // namespace orrery::sim
