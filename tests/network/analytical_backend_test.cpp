// The congestion-unaware backend: ASTRA-sim's figures, the closed form, and its link statistics.
#include "network/analytical_backend.h"

#include <gtest/gtest.h>

#include "network/dimension_failures.h"
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

// Dimension failures (network/dimension_failures.h): a Ring of 16, 1 -> 4 crosses 1-2, 2-3 and
// 3-4; NPU 3 keeps a quarter of its bandwidth from 100 us on, NPU 2 nothing from 1 ms on.
TEST(DimensionFailures, a_message_goes_at_what_survives_on_its_route_or_is_held) {
  const Topology topology = topology_from_yaml(one_dimension_yaml("Ring", 16, "50", "500"));
  std::vector<DimensionFailure> failures(3);
  failures[0] = {SimTime::from_us(100), 0, *RankSet::parse("3", 16), 0.25, "slow 3"};
  failures[1] = {SimTime::from_ns(0), 0, *RankSet::parse("9", 16), 0.5, "slow 9"};
  failures[2] = {SimTime::from_us(1000), 0, *RankSet::parse("2", 16), 0.0, "cut 2"};
  const auto shared = std::make_shared<const DimensionFailures>(topology, failures);
  const int64_t us = 1'000'000, hop_ps = 500'000, full_ps = 19'531'250;  // 1 MiB at 50 GB/s
  for (const char* backend : {"analytical", "congestion-aware"}) {
    SCOPED_TRACE(backend);
    EventEngine engine;
    testing::Deliveries deliveries(engine);
    Expected<std::unique_ptr<NetworkBackend>> made =
        make_network_backend(backend, engine, topology, TimeRounding::kExact, shared);
    ASSERT_TRUE(made.has_value());
    std::unique_ptr<NetworkBackend> network = std::move(made).value();
    network->set_listener(deliveries);
    network->send(1, 4, kMiB, 1);  // NPU 9's failure is not on the route
    (void)engine.run_until(SimTime::from_us(95));
    network->send(1, 4, kMiB, 2);  // under way when NPU 3 fails
    (void)engine.run_until(SimTime::from_us(400));
    network->send(1, 4, kMiB, 3);
    (void)engine.run_until(SimTime::from_us(2000));
    network->send(1, 4, kMiB, 4);  // NPU 2's links are cut
    (void)engine.run();
    const bool store_and_forward = std::string_view(backend) == "congestion-aware";
    // Analytical: the whole message at the route's lowest bandwidth when it starts. Store and
    // forward: each hop at its link's when it starts there; 2-3 and 3-4 touch NPU 3.
    const int64_t healthy = 3 * hop_ps + (store_and_forward ? 3 : 1) * full_ps;
    const int64_t slowed =
        3 * hop_ps + (store_and_forward ? full_ps + 2 * 4 * full_ps : 4 * full_ps);
    EXPECT_EQ(deliveries.time.at(1).ps(), healthy);
    // Store and forward: its first hop ends after the failure, so its next two are slowed.
    EXPECT_EQ(deliveries.time.at(2).ps(), 95 * us + (store_and_forward ? slowed : healthy));
    EXPECT_EQ(deliveries.time.at(3).ps(), 400 * us + slowed);
    EXPECT_EQ(deliveries.time.count(4), 0u);
    EXPECT_EQ(network->in_flight(), 1u);
    const std::vector<std::string> held = network->describe_undelivered(8);
    ASSERT_EQ(held.size(), 1u);
    EXPECT_NE(held[0].find("-> rank 4, 1,048,576 bytes: cut 2 failed at 1,000,000 ns with nothing "
                           "surviving"),
              std::string::npos)
        << held[0];
  }
  EXPECT_EQ(shared->surviving(0, SimTime::zero()), 1.0);
  EXPECT_EQ(Bandwidth::from_gbps(50).scaled(0.25), Bandwidth::from_nano_gbps(12'500'000'000));
  EXPECT_EQ(Bandwidth::from_gbps(50).scaled(1e-30), Bandwidth::from_nano_gbps(1));
  EXPECT_EQ(Bandwidth::from_gbps(50).scaled(0), Bandwidth::from_nano_gbps(0));
}

TEST(AnalyticalBackend, with_the_highest_rule_a_message_leaving_the_node_pays_the_network) {
  // 0 -> 5 on Ring(4) x Switch(2): [0,0] -> [1,1]. ASTRA-sim's rule times it on the Ring; the
  // highest rule on the Switch: 2 hops of 1,000 ns and 4 KiB at 25 GB/s.
  Topology topology = topology_from_yaml(
      "topology: [ Ring, Switch ]\nnpus_count: [ 4, 2 ]\nbandwidth: [ 100, 25 ]\n"
      "latency: [ 10, 1000 ]\n");
  EXPECT_EQ(topology.charged_dimension(0, 5), 0u);
  topology.set_charge_highest(true);
  EXPECT_EQ(topology.charged_dimension(0, 5), 1u);
  EXPECT_EQ(topology.charged_dimension(0, 1), 0u);  // inside the node either way
  EXPECT_EQ(topology.charged_dimension(3, 3), kNoDimension);
  const SimTime expected =
      SimTime::from_ns(2 * 1000) + Bandwidth::from_gbps(25).serialization_time(4096);
  EXPECT_EQ(analytical_delay(topology, 0, 5, 4096), expected);
  EXPECT_EQ(testing::lone_message_time("analytical", topology, 0, 5, 4096), expected);
  // Its link statistics are the source's links in that dimension: up to and down from switch.
  Network network("analytical", topology);
  network.backend->send(0, 5, 4096, 1);
  (void)network.engine.run();
  const std::vector<LinkStats> stats = network.backend->link_stats();
  ASSERT_EQ(stats.size(), 2u);
  for (const LinkStats& link : stats) EXPECT_EQ(link.dimension, 1u);
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
