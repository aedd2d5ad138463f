// The congestion-aware backend on ASTRA-sim's networks: ASTRA-sim's figures, store-and-forward,
// FIFO queues, contention.
#include <gtest/gtest.h>

#include <memory>

#include "network/analytical_backend.h"
#include "network/network_test_support.h"

namespace orrery::net {
namespace congestion_aware_backend_test {

using testing::Network;
using testing::one_dimension_yaml;
using testing::topology_from_yaml;

constexpr uint64_t kMiB = 1 << 20;
constexpr int64_t kMiBAt50Ps = 19'531'250;  // 2^20 B / (50 * 2^30 B/s)
constexpr int64_t k500NsPs = 500'000;

// astra-sim-compat.md: 16 ranks in one dimension, 50 GB/s, 500 ns, 1 MiB from rank 1 to rank 4.
TEST(CongestionAwareBackend, reproduces_astra_sim_single_message_figures) {
  const struct {
    const char* kind;
    int64_t ns;
  } cases[] = {{"Ring", 60'093}, {"FullyConnected", 20'031}, {"Switch", 40'062}};
  for (const auto& c : cases) {
    const Topology topology = topology_from_yaml(one_dimension_yaml(c.kind, 16, "50.0", "500.0"));
    EXPECT_EQ(testing::lone_message_time("congestion-aware", topology, 1, 4, kMiB).ns_truncated(),
              c.ns)
        << c.kind;
  }
}

TEST(CongestionAwareBackend, a_message_is_stored_and_forwarded_whole_at_every_hop) {
  // Ring 1 -> 4: three hops, each latency + serialization.
  const Topology topology = topology_from_yaml(one_dimension_yaml("Ring", 16, "50", "500"));
  EXPECT_EQ(testing::lone_message_time("congestion-aware", topology, 1, 4, kMiB).ps(),
            3 * (k500NsPs + kMiBAt50Ps));
}

TEST(CongestionAwareBackend, a_switch_is_a_node_of_its_own) {
  const Topology topology = topology_from_yaml(one_dimension_yaml("Switch", 8, "50", "500"));
  Network network("congestion-aware", topology);
  network.backend->send(3, 6, kMiB, 0);
  (void)network.engine.run();
  EXPECT_EQ(network.deliveries.time.at(0).ps(), 2 * (k500NsPs + kMiBAt50Ps));
  const std::vector<LinkStats> stats = network.backend->link_stats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].src, 3u);
  EXPECT_EQ(stats[0].dst, 8u);  // the switch is node 8, after the 8 ranks
  EXPECT_EQ(stats[1].src, 8u);
  EXPECT_EQ(stats[1].dst, 6u);
}

TEST(CongestionAwareBackend, several_dimensions_are_crossed_lowest_first) {
  // [0,0] -> [1,1] on Ring(4) x Switch(2): ring hop 0 -> 1, then up and down through the switch.
  const Topology topology = topology_from_yaml(
      "topology: [ Ring, Switch ]\nnpus_count: [ 4, 2 ]\nbandwidth: [ 100, 25 ]\n"
      "latency: [ 10, 1000 ]\n");
  Network network("congestion-aware", topology);
  network.backend->send(0, 5, 4096, 0);
  (void)network.engine.run();
  const SimTime ring_hop =
      SimTime::from_ns(10) + Bandwidth::from_gbps(100).serialization_time(4096);
  const SimTime switch_hop =
      SimTime::from_ns(1000) + Bandwidth::from_gbps(25).serialization_time(4096);
  EXPECT_EQ(network.deliveries.time.at(0), ring_hop + switch_hop * 2);
  const std::vector<LinkStats> stats = network.backend->link_stats();
  ASSERT_EQ(stats.size(), 3u);
  EXPECT_EQ(stats[0].dimension, 0u);
  EXPECT_EQ(stats[0].src, 0u);
  EXPECT_EQ(stats[0].dst, 1u);
  EXPECT_EQ(stats[1].dimension, 1u);
  EXPECT_EQ(stats[1].src, 1u);  // up from [1,0] = rank 1
  EXPECT_EQ(stats[2].dst, 5u);  // down to [1,1] = rank 5
}

TEST(CongestionAwareBackend, n_messages_into_one_link_take_n_serializations) {
  const Topology topology =
      topology_from_yaml(one_dimension_yaml("FullyConnected", 4, "50", "500"));
  constexpr int kMessages = 6;
  Network network("congestion-aware", topology);
  for (uint64_t token = 0; token < kMessages; ++token) network.backend->send(0, 1, kMiB, token);
  (void)network.engine.run();
  // FIFO: the k-th waits for k earlier ones, then crosses.
  for (uint64_t token = 0; token < kMessages; ++token) {
    EXPECT_EQ(network.deliveries.time.at(token).ps(),
              static_cast<int64_t>(token + 1) * kMiBAt50Ps + k500NsPs);
  }
  EXPECT_EQ(network.deliveries.order, (std::vector<uint64_t>{0, 1, 2, 3, 4, 5}));
  const std::vector<LinkStats> stats = network.backend->link_stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].busy.ps(), kMessages * kMiBAt50Ps);
  EXPECT_EQ(stats[0].bytes, kMessages * kMiB);
  EXPECT_EQ(stats[0].peak_queue, static_cast<uint32_t>(kMessages));
}

TEST(CongestionAwareBackend, incast_through_a_switch_queues_on_the_down_link) {
  // 7 ranks send to rank 0 at once: the up links work in parallel, the down link to 0 serializes.
  const Topology topology = topology_from_yaml(one_dimension_yaml("Switch", 8, "50", "500"));
  Network network("congestion-aware", topology);
  for (Rank src = 1; src < 8; ++src) network.backend->send(src, 0, kMiB, src);
  (void)network.engine.run();
  SimTime last;
  for (const auto& [token, time] : network.deliveries.time) last = std::max(last, time);
  EXPECT_EQ(last.ps(), 2 * k500NsPs + 8 * kMiBAt50Ps);  // 1 up + 7 down serializations
  const std::vector<LinkStats> stats = network.backend->link_stats();
  uint32_t peak = 0;
  for (const LinkStats& link : stats) {
    if (link.dst == 0u) {
      EXPECT_EQ(link.busy.ps(), 7 * kMiBAt50Ps);
      EXPECT_EQ(link.messages, 7u);
      peak = link.peak_queue;
    } else {
      EXPECT_EQ(link.messages, 1u);
      EXPECT_EQ(link.peak_queue, 1u);
    }
  }
  EXPECT_EQ(peak, 7u);
}

TEST(CongestionAwareBackend, messages_on_disjoint_links_do_not_slow_each_other) {
  const Topology topology = topology_from_yaml(one_dimension_yaml("Ring", 16, "50", "500"));
  Network network("congestion-aware", topology);
  for (Rank src = 0; src < 16; ++src) {
    network.backend->send(src, (src + 1) % 16, kMiB, src);         // clockwise neighbours
    network.backend->send(src, (src + 15) % 16, kMiB, 100 + src);  // counter-clockwise
  }
  (void)network.engine.run();
  ASSERT_EQ(network.deliveries.time.size(), 32u);
  for (const auto& [token, time] : network.deliveries.time) {
    EXPECT_EQ(time.ps(), k500NsPs + kMiBAt50Ps) << "token " << token;
  }
  for (const LinkStats& link : network.backend->link_stats()) EXPECT_EQ(link.peak_queue, 1u);
}

TEST(CongestionAwareBackend, a_link_sends_the_next_message_while_the_last_one_propagates) {
  // Busy for serialization only: with a latency far above the serialization time, two messages
  // on one link arrive one serialization apart.
  const Topology topology =
      topology_from_yaml(one_dimension_yaml("FullyConnected", 2, "1024", "1000000"));
  Network network("congestion-aware", topology);
  network.backend->send(0, 1, 1 << 20, 0);
  network.backend->send(0, 1, 1 << 20, 1);
  (void)network.engine.run();
  const SimTime serialization = Bandwidth::from_gbps(1024).serialization_time(1 << 20);
  EXPECT_EQ(network.deliveries.time.at(1) - network.deliveries.time.at(0), serialization);
}

TEST(CongestionAwareBackend, a_later_message_waits_behind_the_one_in_service) {
  // Ring 0 -> 2 (via 1) and 1 -> 2 sent when the first reaches 1: the second must queue.
  const Topology topology = topology_from_yaml(one_dimension_yaml("Ring", 8, "50", "0"));
  Network network("congestion-aware", topology);
  network.backend->send(0, 2, kMiB, 0);
  (void)network.engine.run_until(SimTime::from_ps(kMiBAt50Ps));  // message 0 now leaves rank 1
  network.backend->send(1, 2, kMiB, 1);
  (void)network.engine.run();
  EXPECT_EQ(network.deliveries.time.at(0).ps(), 2 * kMiBAt50Ps);
  EXPECT_EQ(network.deliveries.time.at(1).ps(), 3 * kMiBAt50Ps);
}

TEST(CongestionAwareBackend, a_message_to_oneself_takes_no_time) {
  const Topology topology = topology_from_yaml(one_dimension_yaml("Switch", 4, "50", "500"));
  Network network("congestion-aware", topology);
  (void)network.engine.run_until(SimTime::from_ns(3));
  network.backend->send(1, 1, kMiB, 5);
  EXPECT_TRUE(network.deliveries.time.empty());
  (void)network.engine.run();
  EXPECT_EQ(network.deliveries.time.at(5), SimTime::from_ns(3));
  EXPECT_TRUE(network.backend->link_stats().empty());
}

// Delivers, then sends the next message from inside on_delivered: a chain of relays.
class Relay final : public DeliveryListener {
 public:
  explicit Relay(EventEngine& engine) : engine_(engine) {}
  void on_delivered(uint64_t token) override {
    times.push_back(engine_.now());
    if (token + 1 < 4)
      backend->send(static_cast<Rank>(token + 1), static_cast<Rank>(token + 2), kMiB, token + 1);
  }
  NetworkBackend* backend = nullptr;
  std::vector<SimTime> times;

 private:
  EventEngine& engine_;
};

TEST(CongestionAwareBackend, listeners_may_send_from_inside_a_delivery) {
  const Topology topology = topology_from_yaml(one_dimension_yaml("Ring", 8, "50", "500"));
  EventEngine engine;
  std::unique_ptr<NetworkBackend> backend =
      std::move(make_network_backend("congestion-aware", engine, topology)).value();
  Relay relay(engine);
  relay.backend = backend.get();
  backend->set_listener(relay);
  backend->send(0, 1, kMiB, 0);
  (void)engine.run();
  ASSERT_EQ(relay.times.size(), 4u);
  EXPECT_EQ(relay.times.back().ps(), 4 * (k500NsPs + kMiBAt50Ps));
  EXPECT_EQ(backend->in_flight(), 0u);
}

TEST(CongestionAwareBackend, two_networks_in_one_process_are_independent) {
  const Topology topology =
      topology_from_yaml(one_dimension_yaml("FullyConnected", 4, "50", "500"));
  Network first("congestion-aware", topology);
  Network second("congestion-aware", topology);
  first.backend->send(0, 1, kMiB, 0);
  first.backend->send(0, 1, kMiB, 1);
  second.backend->send(0, 1, kMiB, 0);
  (void)first.engine.run();
  (void)second.engine.run();
  EXPECT_EQ(first.deliveries.time.at(1).ps(), 2 * kMiBAt50Ps + k500NsPs);
  EXPECT_EQ(second.deliveries.time.at(0).ps(), kMiBAt50Ps + k500NsPs);
  EXPECT_EQ(second.deliveries.time.size(), 1u);
}

}  // namespace congestion_aware_backend_test
}  // namespace orrery::net
