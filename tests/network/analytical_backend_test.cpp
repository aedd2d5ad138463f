// The congestion-unaware backend: ASTRA-sim's figures, the closed form, and its link statistics.
#include "network/analytical_backend.h"

#include <gtest/gtest.h>

#include "network/network_test_support.h"

namespace orrery::net {
namespace analytical_backend_test {

using testing::Network;
using testing::one_dimension_yaml;
using testing::topology_from_yaml;

constexpr uint64_t kMiB = 1 << 20;

// astra-sim-compat.md: 16 ranks in one dimension, 50 GB/s, 500 ns, 1 MiB from rank 1 to rank 4.
TEST(AnalyticalBackend, reproduces_astra_sim_single_message_figures) {
  const struct {
    const char* kind;
    int64_t ns;
  } cases[] = {{"Ring", 21'031}, {"FullyConnected", 20'031}, {"Switch", 20'531}};
  for (const auto& c : cases) {
    const Topology topology = topology_from_yaml(one_dimension_yaml(c.kind, 16, "50.0", "500.0"));
    EXPECT_EQ(testing::lone_message_time("analytical", topology, 1, 4, kMiB).ns_truncated(), c.ns)
        << c.kind;
    EXPECT_EQ(analytical_delay(topology, 1, 4, kMiB).ns_truncated(), c.ns) << c.kind;
  }
}

TEST(AnalyticalBackend, delay_is_hops_times_latency_plus_serialization) {
  // Ring of 16, 1 -> 4: 3 hops; 19,531.25 ns of serialization.
  const Topology topology = topology_from_yaml(one_dimension_yaml("Ring", 16, "50", "500"));
  EXPECT_EQ(analytical_delay(topology, 1, 4, kMiB).ps(), 3 * 500'000 + 19'531'250);
  // Going the other way round is shorter for 1 -> 14: 3 hops too.
  EXPECT_EQ(analytical_delay(topology, 1, 14, kMiB).ps(), 3 * 500'000 + 19'531'250);
}

TEST(AnalyticalBackend, a_message_to_oneself_takes_no_time) {
  const Topology topology = topology_from_yaml(one_dimension_yaml("Ring", 4, "50", "500"));
  Network network("analytical", topology);
  (void)network.engine.run_until(SimTime::from_ns(7));
  network.backend->send(2, 2, kMiB, 9);
  EXPECT_EQ(network.backend->in_flight(), 1u);
  EXPECT_TRUE(network.deliveries.time.empty()) << "delivered from an event, not inside send";
  (void)network.engine.run();
  EXPECT_EQ(network.deliveries.time.at(9), SimTime::from_ns(7));
  EXPECT_TRUE(network.backend->link_stats().empty());
  EXPECT_EQ(network.backend->in_flight(), 0u);
}

TEST(AnalyticalBackend, several_differing_dimensions_are_timed_on_the_lowest_one) {
  // ASTRA-sim's congestion-unaware backend times a message on the lowest dimension in which the
  // ranks differ. 0 -> 5 on Ring(4) x Switch(2): coordinates [0,0] -> [1,1]; Ring, 1 hop.
  const Topology topology = topology_from_yaml(
      "topology: [ Ring, Switch ]\nnpus_count: [ 4, 2 ]\nbandwidth: [ 100, 25 ]\n"
      "latency: [ 10, 1000 ]\n");
  const SimTime expected =
      SimTime::from_ns(10) + Bandwidth::from_gbps(100).serialization_time(4096);
  EXPECT_EQ(testing::lone_message_time("analytical", topology, 0, 5, 4096), expected);
}

TEST(AnalyticalBackend, messages_sharing_a_link_do_not_slow_each_other) {
  const Topology topology =
      topology_from_yaml(one_dimension_yaml("FullyConnected", 4, "50", "500"));
  Network network("analytical", topology);
  for (uint64_t token = 0; token < 5; ++token) network.backend->send(0, 1, kMiB, token);
  (void)network.engine.run();
  for (uint64_t token = 0; token < 5; ++token) {
    EXPECT_EQ(network.deliveries.time.at(token).ps(), 500'000 + 19'531'250);
  }
  // ... but the statistics show the overlap the congestion-aware model would have queued.
  const std::vector<LinkStats> stats = network.backend->link_stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].src, 0u);
  EXPECT_EQ(stats[0].dst, 1u);
  EXPECT_EQ(stats[0].bytes, 5 * kMiB);
  EXPECT_EQ(stats[0].messages, 5u);
  EXPECT_EQ(stats[0].busy.ps(), 5 * 19'531'250);
  EXPECT_EQ(stats[0].peak_queue, 5u);
}

TEST(AnalyticalBackend, statistics_follow_the_route_within_the_dimension) {
  const Topology topology = topology_from_yaml(one_dimension_yaml("Ring", 8, "50", "500"));
  Network network("analytical", topology);
  network.backend->send(6, 1, 1000, 0);  // 6 -> 7 -> 0 -> 1, clockwise
  (void)network.engine.run();
  const std::vector<LinkStats> stats = network.backend->link_stats();
  ASSERT_EQ(stats.size(), 3u);
  // Ordered by link id: links 0->1, 6->7, 7->0.
  EXPECT_EQ(stats[0].src, 0u);
  EXPECT_EQ(stats[0].dst, 1u);
  EXPECT_EQ(stats[1].src, 6u);
  EXPECT_EQ(stats[2].src, 7u);
  for (const LinkStats& link : stats) {
    EXPECT_EQ(link.bytes, 1000u);
    EXPECT_EQ(link.peak_queue, 1u);
    EXPECT_EQ(link.dimension, 0u);
  }
}

}  // namespace analytical_backend_test
}  // namespace orrery::net
