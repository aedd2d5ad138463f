// The flow backend against hand-solved max-min fair allocations: one link shared, a parking lot,
// an incast and flows with different bottlenecks; completion times worked out phase by phase.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "network/flow_backend.h"
#include "network/generators.h"
#include "network/graph.h"
#include "network_test_support.h"

namespace orrery::net {
namespace flow_backend_test {

constexpr double kGiB = 1073741824.0;

// A switch `s` (node npus) with one cable per NPU; NPU i's cable has bandwidth gbps[i].
GraphSpec star(const std::vector<uint64_t>& gbps, SimTime latency = SimTime::zero()) {
  GraphSpec spec;
  spec.npus = static_cast<uint32_t>(gbps.size());
  spec.switch_names = {"s"};
  for (uint32_t npu = 0; npu < spec.npus; ++npu) {
    spec.links.push_back({npu, spec.npus, Bandwidth::from_gbps(gbps[npu]), latency, 0});
    spec.links.push_back({spec.npus, npu, Bandwidth::from_gbps(gbps[npu]), latency, 0});
  }
  return spec;
}

// NPUs 0..n-1 in a line (npu_forwarding), link i = i -> i+1 with bandwidth gbps[i].
GraphSpec line(const std::vector<uint64_t>& gbps) {
  GraphSpec spec;
  spec.npus = static_cast<uint32_t>(gbps.size() + 1);
  spec.npu_forwarding = true;
  for (uint32_t i = 0; i < gbps.size(); ++i) {
    spec.links.push_back({i, i + 1, Bandwidth::from_gbps(gbps[i]), SimTime::zero(), 0});
    spec.links.push_back({i + 1, i, Bandwidth::from_gbps(gbps[i]), SimTime::zero(), 0});
  }
  return spec;
}

struct FlowNet {
  explicit FlowNet(GraphSpec spec) : deliveries(engine) {
    Expected<Graph> made = Graph::create(std::move(spec));
    EXPECT_TRUE(made.has_value()) << (made ? "" : made.error().message());
    graph = std::make_shared<const Graph>(std::move(*made));
    backend = std::make_unique<FlowBackend>(engine, graph, *graph->logical_topology());
    backend->set_listener(deliveries);
  }
  EventEngine engine;
  std::shared_ptr<const Graph> graph;
  testing::Deliveries deliveries;
  std::unique_ptr<FlowBackend> backend;
};

// Time to send `bytes` at `gbps` GB/s, in ps (exact rational, for expectations).
double ps_at(double bytes, double gbps) { return bytes / (gbps * kGiB) * 1e12; }

void expect_ps(SimTime actual, double expected_ps) {
  EXPECT_NEAR(static_cast<double>(actual.ps()), expected_ps, 1.0);
}

TEST(FlowBackend, a_lone_flow_takes_latency_plus_bytes_over_the_bottleneck) {
  FlowNet net(star({50, 25}, SimTime::from_ns(500)));
  net.backend->send(0, 1, 1 << 20, 7);
  net.engine.run();
  // 2 x 500 ns + 1 MiB / 25 GB/s (the slower cable) = 1,000 + 39,062.5 ns.
  EXPECT_EQ(net.deliveries.time.at(7), SimTime::from_ps(1'000'000 + 39'062'500));
  const std::vector<LinkStats> stats = net.backend->link_stats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].bytes, 1u << 20);
  EXPECT_EQ(stats[0].busy, SimTime::from_ps(19'531'250));  // at the 50 GB/s link's full rate
  EXPECT_EQ(stats[1].busy, SimTime::from_ps(39'062'500));
  EXPECT_EQ(stats[1].peak_queue, 1u);
}

TEST(FlowBackend, on_astra_sim_rings_a_lone_flow_matches_the_analytical_figure) {
  // ASTRA-sim's calibration message: 1 MiB, rank 1 to 4 of a 16-ring, 50 GB/s, 500 ns: 3 hops.
  testing::Network net(
      "flow", testing::topology_from_yaml(testing::one_dimension_yaml("Ring", 16, "50", "500")));
  net.backend->send(1, 4, 1 << 20, 1);
  net.engine.run();
  EXPECT_EQ(net.deliveries.time.at(1), SimTime::from_ps(21'031'250));
  EXPECT_EQ(net.backend->link_stats().size(), 3u);
}

TEST(FlowBackend, two_flows_on_one_link_share_it_equally) {
  FlowNet net(star({10, 10, 10}));
  const uint64_t bytes = 10 << 20;
  net.backend->send(0, 2, bytes, 1);
  net.backend->send(1, 2, bytes, 2);
  (void)net.engine.run_until(SimTime::from_ns(1));
  EXPECT_NEAR(net.backend->rate_of(1), 5 * kGiB, 1e-3);
  EXPECT_NEAR(net.backend->rate_of(2), 5 * kGiB, 1e-3);
  net.engine.run();
  expect_ps(net.deliveries.time.at(1), ps_at(2.0 * bytes, 10));
  expect_ps(net.deliveries.time.at(2), ps_at(2.0 * bytes, 10));
  const std::vector<LinkStats> stats = net.backend->link_stats();
  ASSERT_EQ(stats.size(), 3u);  // npu0 -> s, npu1 -> s, s -> npu2
  EXPECT_EQ(stats[2].link, 5u);
  EXPECT_EQ(stats[2].peak_queue, 2u);
  EXPECT_EQ(stats[2].bytes, 2 * bytes);
  EXPECT_EQ(stats[0].peak_queue, 1u);
}

TEST(FlowBackend, parking_lot) {
  // Links 0-1, 1-2, 2-3 of 30 GB/s. Long flow 0 -> 3; short flows: two on 0-1, one each on 1-2
  // and 2-3. Max-min: link 0-1 has 3 flows -> 10 each; the long flow is frozen at 10, so the short
  // flows of 1-2 and 2-3 get 30 - 10 = 20.
  FlowNet net(line({30, 30, 30}));
  net.backend->set_in_order(false);  // the two 0 -> 1 messages are two flows at once
  const uint64_t bytes = 30 << 20;
  net.backend->send(0, 3, bytes, 0);  // long
  net.backend->send(0, 1, bytes, 1);
  net.backend->send(0, 1, bytes, 2);
  net.backend->send(1, 2, bytes, 3);
  net.backend->send(2, 3, bytes, 4);
  (void)net.engine.run_until(SimTime::from_ns(1));
  EXPECT_NEAR(net.backend->rate_of(0), 10 * kGiB, 1e-3);
  EXPECT_NEAR(net.backend->rate_of(1), 10 * kGiB, 1e-3);
  EXPECT_NEAR(net.backend->rate_of(3), 20 * kGiB, 1e-3);
  EXPECT_NEAR(net.backend->rate_of(4), 20 * kGiB, 1e-3);
  net.engine.run();
  // Short flows 3 and 4 finish at B / 20. The flows on 0-1 stay at 10 (that link still has 3
  // flows) and finish together at 3B / 30.
  expect_ps(net.deliveries.time.at(3), ps_at(bytes, 20));
  expect_ps(net.deliveries.time.at(4), ps_at(bytes, 20));
  for (const uint64_t token : {uint64_t{0}, uint64_t{1}, uint64_t{2}})
    expect_ps(net.deliveries.time.at(token), ps_at(3.0 * bytes, 30));
}

// A pair is one connection sending in order: its second message starts when the first has left
// (B / 10 + latency, then 2B / 10 + latency), while another pair's message shares the link with
// whichever of them is transmitting. Out of order, both messages of the pair run at once.
TEST(FlowBackend, a_pairs_messages_are_sent_in_order) {
  const uint64_t bytes = 10 << 20;
  const double latency = 2 * 500'000;
  {
    FlowNet net(star({10, 10}, SimTime::from_ns(500)));
    net.backend->send(0, 1, bytes, 1);
    net.backend->send(0, 1, bytes, 2);
    EXPECT_EQ(net.backend->in_flight(), 2u);
    (void)net.engine.run_until(SimTime::from_ns(1));
    EXPECT_EQ(net.backend->active_flows(), 1u);
    EXPECT_NEAR(net.backend->rate_of(1), 10 * kGiB, 1e-3);
    EXPECT_EQ(net.backend->rate_of(2), 0.0);  // waiting
    net.engine.run();
    expect_ps(net.deliveries.time.at(1), ps_at(bytes, 10) + latency);
    expect_ps(net.deliveries.time.at(2), ps_at(2.0 * bytes, 10) + latency);
    EXPECT_EQ(net.backend->in_flight(), 0u);
  }
  {
    FlowNet net(star({10, 10}, SimTime::from_ns(500)));
    net.backend->set_in_order(false);
    net.backend->send(0, 1, bytes, 1);
    net.backend->send(0, 1, bytes, 2);
    net.engine.run();
    expect_ps(net.deliveries.time.at(1), ps_at(2.0 * bytes, 10) + latency);
    expect_ps(net.deliveries.time.at(2), ps_at(2.0 * bytes, 10) + latency);
  }
  {
    // Two pairs into one receiver: 0 -> 2 twice and 1 -> 2 once. The link into 2 is shared by
    // two flows: the first 0 -> 2 and the 1 -> 2 finish at 2B / 10, then the second 0 -> 2 has
    // the link alone: 3B / 10.
    FlowNet net(star({10, 10, 10}));
    net.backend->send(0, 2, bytes, 1);
    net.backend->send(0, 2, bytes, 2);
    net.backend->send(1, 2, bytes, 3);
    net.engine.run();
    expect_ps(net.deliveries.time.at(1), ps_at(2.0 * bytes, 10));
    expect_ps(net.deliveries.time.at(3), ps_at(2.0 * bytes, 10));
    expect_ps(net.deliveries.time.at(2), ps_at(3.0 * bytes, 10));
  }
}

TEST(FlowBackend, incast_splits_the_receiver_link_and_rates_rise_as_flows_leave) {
  // Four senders of 40 GB/s into one receiver of 40 GB/s; sizes B, 2B, 3B, 4B. Rates: 10 each
  // until the B flow ends at 4B/40; then 13.33 each for the remaining B of the others (3B at
  // 40), and so on: finishes at 4B/40, 7B/40, 9B/40, 10B/40.
  FlowNet net(star({40, 40, 40, 40, 40}));
  const double b = 4 << 20;
  for (uint64_t i = 0; i < 4; ++i)
    net.backend->send(static_cast<Rank>(i), 4, static_cast<uint64_t>(b) * (i + 1), i);
  net.engine.run();
  expect_ps(net.deliveries.time.at(0), ps_at(4 * b, 40));
  expect_ps(net.deliveries.time.at(1), ps_at(7 * b, 40));
  expect_ps(net.deliveries.time.at(2), ps_at(9 * b, 40));
  expect_ps(net.deliveries.time.at(3), ps_at(10 * b, 40));
  // One recomputation for the four arrivals (same instant), one per departure.
  EXPECT_EQ(net.backend->recomputations(), 5u);
}

TEST(FlowBackend, mixed_paths_with_different_bottlenecks) {
  // Star with cables a = 30, b = 10, c = 20, d = 100 GB/s. Flows a->c, b->c, a->d, b->d.
  // b's uplink (10, 2 flows) fills first: b->c = b->d = 5. Then c's downlink has 15 left for a->c
  // and a's uplink 30 for two flows: a->c = a->d = 15.
  FlowNet net(star({30, 10, 20, 100}));
  const uint64_t bytes = 15 << 20;
  net.backend->send(0, 2, bytes, 1);
  net.backend->send(1, 2, bytes, 2);
  net.backend->send(0, 3, bytes, 3);
  net.backend->send(1, 3, bytes, 4);
  (void)net.engine.run_until(SimTime::from_ns(1));
  EXPECT_NEAR(net.backend->rate_of(1), 15 * kGiB, 1e-3);
  EXPECT_NEAR(net.backend->rate_of(2), 5 * kGiB, 1e-3);
  EXPECT_NEAR(net.backend->rate_of(3), 15 * kGiB, 1e-3);
  EXPECT_NEAR(net.backend->rate_of(4), 5 * kGiB, 1e-3);
  net.engine.run();
  // a's flows end at B/15; b's stay limited by b's 10 GB/s uplink (5 each) to the end: B/5.
  expect_ps(net.deliveries.time.at(1), ps_at(bytes, 15));
  expect_ps(net.deliveries.time.at(3), ps_at(bytes, 15));
  expect_ps(net.deliveries.time.at(2), ps_at(bytes, 5));
  expect_ps(net.deliveries.time.at(4), ps_at(bytes, 5));
}

TEST(FlowBackend, a_late_arrival_slows_a_running_flow) {
  // One 10 GB/s link. Flow 1 (2B) starts at 0; flow 2 (B) at the time flow 1 is half done.
  // Then both get 5: flow 2 ends B/5 later, flow 1's last B goes at 5 too: both at B/10 + B/5.
  FlowNet net(star({10, 10, 10}));
  const uint64_t bytes = 10 << 20;
  struct Later : EventHandler {
    FlowBackend* backend = nullptr;
    uint64_t b = 0;
    void handle_event(const Event&) override { backend->send(1, 2, b, 2); }
  } later;
  later.backend = net.backend.get();
  later.b = bytes;
  const HandlerId id = net.engine.register_handler(later);
  net.backend->send(0, 2, 2 * bytes, 1);
  (void)net.engine.schedule_at(SimTime::from_ps(static_cast<int64_t>(ps_at(bytes, 10))), id, 0, 0);
  net.engine.run();
  expect_ps(net.deliveries.time.at(1), ps_at(bytes, 10) + ps_at(bytes, 5));
  expect_ps(net.deliveries.time.at(2), ps_at(bytes, 10) + ps_at(bytes, 5));
}

TEST(FlowBackend, zero_bytes_and_self_messages_and_determinism) {
  FlowNet net(star({10, 10}, SimTime::from_ns(100)));
  net.backend->send(0, 1, 0, 1);
  net.backend->send(1, 1, 1000, 2);
  net.engine.run();
  EXPECT_EQ(net.deliveries.time.at(1), SimTime::from_ns(200));
  EXPECT_EQ(net.deliveries.time.at(2), SimTime::zero());
  EXPECT_EQ(net.backend->in_flight(), 0u);

  // The same random-ish load twice gives the same times, bit for bit.
  auto run = [] {
    FlowNet fat(*make_fat_tree(4, {}));
    uint64_t token = 0;
    for (Rank src = 0; src < 16; ++src) {
      for (Rank dst = 0; dst < 16; ++dst) {
        if (src != dst) fat.backend->send(src, dst, 1000 + 37 * ((src * 16 + dst) % 11), token++);
      }
    }
    fat.engine.run();
    return fat.deliveries.time;
  };
  EXPECT_EQ(run(), run());
}

TEST(FlowBackend, paths_and_times_do_not_depend_on_the_order_pairs_send_in) {
  // ECMP labels count messages per pair, so the same messages issued in another order (as
  // simultaneous events may be) take the same paths and finish at the same times.
  auto run = [](bool reversed) {
    FlowNet fat(*make_fat_tree(4, {}));
    std::vector<std::pair<Rank, Rank>> pairs;
    for (Rank src = 0; src < 16; ++src) {
      for (Rank dst = 0; dst < 16; ++dst) {
        if (src != dst) pairs.emplace_back(src, dst);
      }
    }
    if (reversed) std::reverse(pairs.begin(), pairs.end());
    for (const auto& [src, dst] : pairs) {
      for (uint64_t k = 0; k < 3; ++k) {
        fat.backend->send(src, dst, 5000 + 1000 * k + 37 * src, (src * 16 + dst) * 4 + k);
      }
    }
    fat.engine.run();
    return std::make_pair(fat.deliveries.time, fat.backend->link_stats());
  };
  const auto [times, links] = run(false);
  const auto [times_reversed, links_reversed] = run(true);
  EXPECT_EQ(times, times_reversed);
  ASSERT_EQ(links.size(), links_reversed.size());
  for (size_t i = 0; i < links.size(); ++i) {
    EXPECT_EQ(links[i].link, links_reversed[i].link);
    EXPECT_EQ(links[i].bytes, links_reversed[i].bytes);
  }
}

// Random flows arriving over time on a k = 8 fat-tree, with the delivery of each flow starting
// another (so arrivals and departures interleave): the incremental recomputation must give the
// same delivery times, bit for bit, as refilling every flow at every change, while re-rating
// fewer flows.
struct Churn final : public DeliveryListener {
  void on_delivered(uint64_t token) override {
    time.emplace(token, engine->now());
    if (next < total) send_next();
  }
  void send_next() {
    const auto src = static_cast<Rank>(lcg() % npus);
    auto dst = static_cast<Rank>(lcg() % npus);
    if (dst == src) dst = (dst + 1) % npus;
    backend->send(src, dst, 1000 + lcg() % 200000, next++);
  }
  uint64_t lcg() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  }
  EventEngine* engine = nullptr;
  FlowBackend* backend = nullptr;
  std::map<uint64_t, SimTime> time;
  uint64_t state = 99;
  uint64_t next = 0;
  uint64_t total = 0;
  uint32_t npus = 0;
};

std::pair<std::map<uint64_t, SimTime>, uint64_t> churn(bool incremental, uint32_t spines_cut) {
  GraphSpec spec = *make_fat_tree(8, {});
  // Thinner core links on some switches, so rates differ between paths.
  for (GraphLink& link : spec.links) {
    if (link.src % spines_cut == 0 && link.src >= spec.npus && link.dst >= spec.npus) {
      link.bandwidth = Bandwidth::from_gbps(13);
    }
  }
  EventEngine engine;
  const auto graph = std::make_shared<const Graph>(std::move(*Graph::create(std::move(spec))));
  FlowBackend backend(engine, graph, *graph->logical_topology());
  backend.set_incremental(incremental);
  Churn load;
  load.engine = &engine;
  load.backend = &backend;
  load.total = 1200;
  load.npus = graph->npu_count();
  backend.set_listener(load);
  for (int i = 0; i < 200; ++i) load.send_next();
  engine.run();
  EXPECT_EQ(load.time.size(), load.total);
  return {load.time, backend.flows_visited()};
}

TEST(FlowBackend, incremental_recomputation_equals_refilling_everything) {
  for (uint32_t cut : {3u, 5u}) {
    const auto [incremental, visited_incremental] = churn(true, cut);
    const auto [full, visited_full] = churn(false, cut);
    EXPECT_EQ(incremental, full);
    EXPECT_LT(visited_incremental, visited_full);
    std::printf("spine cut %u: flows re-rated %llu incremental vs %llu refilling\n", cut,
                static_cast<unsigned long long>(visited_incremental),
                static_cast<unsigned long long>(visited_full));
  }
}

// Every GPU of a rail-optimized fat-tree sends 1 MiB to each other GPU on its rail at once (the
// inter-node phase of a hierarchical all-to-all).
SimTime rail_exchange(const RailParams& params) {
  FlowNet net(*make_rail_optimized(params));
  const uint32_t gpus = params.nodes * params.gpus_per_node;
  uint64_t token = 0;
  for (Rank src = 0; src < gpus; ++src) {
    for (Rank dst = src % params.gpus_per_node; dst < gpus; dst += params.gpus_per_node) {
      if (dst != src) net.backend->send(src, dst, 1 << 20, token++);
    }
  }
  net.engine.run();
  EXPECT_EQ(net.deliveries.time.size(), uint64_t{gpus} * (params.nodes - 1));
  SimTime end;
  for (const auto& [t, time] : net.deliveries.time) end = std::max(end, time);
  return end;
}

TEST(FlowBackend, rail_exchange_on_1024_gpus_is_within_2_percent_of_the_nic_bound) {
  // 128 nodes x 8 GPUs, NIC 50 GB/s, 32 nodes per leaf, 16 spines, full bisection: 130,048
  // flows. Each GPU's NIC carries 127 MiB: the bound is 127 MiB / 50 GB/s (plus latency).
  const double nic_bound = ps_at(127.0 * (1 << 20), 50);
  const SimTime full = rail_exchange(RailParams{});
  EXPECT_GE(static_cast<double>(full.ps()), nic_bound);
  EXPECT_LE(static_cast<double>(full.ps()), 1.02 * nic_bound);
  std::printf("1,024-GPU rail exchange: %.1f us, NIC bound %.1f us\n",
              static_cast<double>(full.ps()) / 1e6, nic_bound / 1e6);
}

TEST(FlowBackend, an_oversubscribed_rail_exchange_is_limited_by_the_leaf_uplinks) {
  // 32 nodes x 8 GPUs, 8 nodes per leaf, 4 spines, 4:1: uplinks of 8 x 50 / (4 x 4) = 25 GB/s.
  // A leaf's 8 GPUs send 24 MiB each to the other 3 leaves of their rail over 4 x 25 GB/s: the
  // bound is 192 MiB / 100 GB/s, 3.1 times the NIC bound (31 MiB / 50 GB/s). ECMP hashing
  // loads some uplinks more than others, so the time is above the bound.
  RailParams params;
  params.nodes = 32;
  params.nodes_per_leaf = 8;
  params.spines = 4;
  params.oversubscription = 4;
  const double uplink_bound = ps_at(192.0 * (1 << 20), 100);
  const SimTime over = rail_exchange(params);
  EXPECT_GE(static_cast<double>(over.ps()), uplink_bound);
  EXPECT_LE(static_cast<double>(over.ps()), 1.5 * uplink_bound);
  std::printf("256-GPU 4:1 rail exchange: %.1f us, uplink bound %.1f us\n",
              static_cast<double>(over.ps()) / 1e6, uplink_bound / 1e6);
}

TEST(GraphAnalyticalBackend, messages_do_not_slow_each_other) {
  EventEngine engine;
  testing::Deliveries deliveries(engine);
  auto graph = std::make_shared<const Graph>(*Graph::create(star({10, 10, 10})));
  GraphAnalyticalBackend backend(engine, graph, *graph->logical_topology());
  backend.set_listener(deliveries);
  backend.send(0, 2, 10 << 20, 1);
  backend.send(1, 2, 10 << 20, 2);
  engine.run();
  expect_ps(deliveries.time.at(1), ps_at(10 << 20, 10));
  expect_ps(deliveries.time.at(2), ps_at(10 << 20, 10));
  const std::vector<LinkStats> stats = backend.link_stats();
  ASSERT_EQ(stats.size(), 3u);
  EXPECT_EQ(stats[2].link, 5u);
  EXPECT_EQ(stats[2].peak_queue, 2u);
  EXPECT_EQ(stats[2].messages, 2u);
}

}  // namespace flow_backend_test
}  // namespace orrery::net
