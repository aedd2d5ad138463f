// The congestion-aware model on graphs: store and forward per hop, FIFO queues, and ASTRA-sim's
// networks timed the same on the topology and on the graph it materializes into.
#include <gtest/gtest.h>

#include <memory>

#include "network/generators.h"
#include "network/graph.h"
#include "network/graph_congestion_backend.h"
#include "network/graph_summary.h"
#include "network_test_support.h"

namespace orrery::net {
namespace graph_congestion_backend_test {

struct CaNet {
  explicit CaNet(std::shared_ptr<const Fabric> fabric, const Topology& logical)
      : deliveries(engine) {
    backend = std::make_unique<GraphCongestionBackend>(engine, std::move(fabric), logical);
    backend->set_listener(deliveries);
  }
  EventEngine engine;
  testing::Deliveries deliveries;
  std::unique_ptr<GraphCongestionBackend> backend;
};

std::shared_ptr<const Graph> clos(uint32_t spines) {
  ClosParams c;
  c.leaves = 2;
  c.npus_per_leaf = 2;
  c.spines = spines;
  c.npu_link = {Bandwidth::from_gbps(50), SimTime::from_ns(100)};
  c.uplink = {Bandwidth::from_gbps(25), SimTime::from_ns(300)};
  return std::make_shared<const Graph>(std::move(*Graph::create(std::move(*make_clos2(c)))));
}

TEST(GraphCongestion, a_lone_message_serializes_again_at_every_hop) {
  const auto graph = clos(1);
  CaNet net(graph, *graph->logical_topology());
  const uint64_t bytes = 1 << 20;
  net.backend->send(0, 3, bytes, 1);  // npu - leaf - spine - leaf - npu
  net.backend->send(0, 1, bytes, 2);  // npu - leaf - npu, behind message 1 on npu0's cable
  net.engine.run();
  const int64_t nic = testing::expected_serialization_ps(bytes, 50'000'000'000);
  const int64_t up = testing::expected_serialization_ps(bytes, 25'000'000'000);
  EXPECT_EQ(net.deliveries.time.at(1).ps(), 2 * (nic + 100'000) + 2 * (up + 300'000));
  // Message 2 waits for message 1 to leave npu0's cable, then takes its two hops.
  EXPECT_EQ(net.deliveries.time.at(2).ps(), nic + 2 * (nic + 100'000));
  const std::vector<LinkStats> stats = net.backend->link_stats();
  ASSERT_EQ(stats.size(), 5u);
  EXPECT_EQ(stats[0].bytes, 2 * bytes);  // npu0 -> leaf0 carried both
  EXPECT_EQ(stats[0].peak_queue, 2u);
  EXPECT_EQ(stats[0].busy.ps(), 2 * nic);
}

TEST(GraphCongestion, astra_sim_networks_give_the_same_times_as_their_materialized_graphs) {
  // Random traffic on ASTRA-sim networks whose routes are unique (FullyConnected, Switch, odd
  // Rings in one dimension): run on the topology itself (what `congestion-aware` does with
  // ASTRA-sim's files) and on the same network materialized as a graph (ECMP over a graph with
  // the same link ids); every delivery and every link statistic must agree.
  const char* files[] = {
      "topology: [Ring]\nnpus_count: [9]\nbandwidth: [50]\nlatency: [500]\n",
      "topology: [FullyConnected]\nnpus_count: [6]\nbandwidth: [100]\nlatency: [100]\n",
      "topology: [Switch]\nnpus_count: [8]\nbandwidth: [12.5]\nlatency: [2000]\n"};
  for (const char* text : files) {
    const Topology topology = testing::topology_from_yaml(text);
    CaNet on_topology(std::make_shared<const TopologyFabric>(topology), topology);
    CaNet on_graph(std::make_shared<const Graph>(std::move(*graph_from_topology(topology))),
                   topology);
    uint64_t state = 7;
    const uint32_t n = topology.rank_count();
    for (uint64_t token = 0; token < 400; ++token) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      const auto src = static_cast<Rank>((state >> 33) % n);
      const auto dst = static_cast<Rank>((state >> 13) % n);
      const uint64_t bytes = 1 + (state >> 40) % 300'000;
      on_topology.backend->send(src, dst, bytes, token);
      on_graph.backend->send(src, dst, bytes, token);
    }
    on_topology.engine.run();
    on_graph.engine.run();
    EXPECT_EQ(on_topology.deliveries.time, on_graph.deliveries.time) << text;
    const std::vector<LinkStats> a = on_topology.backend->link_stats();
    const std::vector<LinkStats> b = on_graph.backend->link_stats();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].link, b[i].link);
      EXPECT_EQ(a[i].bytes, b[i].bytes);
      EXPECT_EQ(a[i].busy, b[i].busy);
      EXPECT_EQ(a[i].peak_queue, b[i].peak_queue);
    }
  }
}

}  // namespace graph_congestion_backend_test
}  // namespace orrery::net
