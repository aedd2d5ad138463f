// Closed-form properties over random multi-dimensional topologies, rank pairs and sizes from 1 B to
// 16 GiB. The expected values are computed here from the definitions:
//   analytical:        hops_d x latency_d + bytes / bandwidth_d, d = lowest differing dimension
//   congestion-aware:  sum over differing dimensions d of hops_d x (latency_d + bytes /
//   bandwidth_d)
//                      for a lone message (store and forward on every link of the route)
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "network/analytical_backend.h"
#include "network/backend_registry.h"
#include "network/network_test_support.h"

namespace orrery::net {
namespace backend_properties_test {

using testing::expected_coordinates;
using testing::expected_hops;
using testing::expected_serialization_ps;

struct RandomNetwork {
  std::string yaml;
  std::vector<TopologyKind> kinds;
  std::vector<uint32_t> sizes;
  std::vector<uint64_t> nano_gbps;
  std::vector<int64_t> latency_ps;
};

RandomNetwork random_network(std::mt19937_64& rng, const std::vector<TopologyKind>& allowed) {
  static const char* kNames[] = {"Ring", "FullyConnected", "Switch"};
  static const std::pair<const char*, uint64_t> kBandwidths[] = {
      {"50", 50'000'000'000ULL},          {"12.5", 12'500'000'000ULL},
      {"400.0", 400'000'000'000ULL},      {"0.75", 750'000'000ULL},
      {"3.3", 3'300'000'000ULL},          {"1e2", 100'000'000'000ULL},
      {"33.333333333", 33'333'333'333ULL}};
  static const std::pair<const char*, int64_t> kLatencies[] = {
      {"0", 0},     {"1.5", 1500},     {"500", 500'000}, {"936.25", 936'250},
      {"0.001", 1}, {"2e3", 2'000'000}};
  RandomNetwork network;
  const int dims = 1 + static_cast<int>(rng() % 4);
  std::string topology = "topology: [";
  std::string npus = "npus_count: [";
  std::string bandwidth = "bandwidth: [";
  std::string latency = "latency: [";
  for (int d = 0; d < dims; ++d) {
    const TopologyKind kind = allowed[rng() % allowed.size()];
    const auto size = static_cast<uint32_t>(2 + rng() % (dims == 1 ? 15 : 6));
    const auto& bw = kBandwidths[rng() % std::size(kBandwidths)];
    const auto& lat = kLatencies[rng() % std::size(kLatencies)];
    const std::string_view sep = d == 0 ? " " : ", ";
    for (std::string* list : {&topology, &npus, &bandwidth, &latency}) list->append(sep);
    topology.append(kNames[static_cast<int>(kind)]);
    npus.append(std::to_string(size));
    bandwidth.append(bw.first);
    latency.append(lat.first);
    network.kinds.push_back(kind);
    network.sizes.push_back(size);
    network.nano_gbps.push_back(bw.second);
    network.latency_ps.push_back(lat.second);
  }
  network.yaml = topology + " ]\n" + npus + " ]\n" + bandwidth + " ]\n" + latency + " ]\n";
  return network;
}

uint64_t random_size(std::mt19937_64& rng) {
  // Log-uniform from 1 B to 16 GiB.
  const int bits = static_cast<int>(rng() % 35);
  const uint64_t base = uint64_t{1} << bits;
  return std::min<uint64_t>(16ULL << 30, base + rng() % base);
}

int64_t expected_analytical_ps(const RandomNetwork& network, uint64_t src, uint64_t dst,
                               uint64_t bytes) {
  const std::vector<uint32_t> a = expected_coordinates(src, network.sizes);
  const std::vector<uint32_t> b = expected_coordinates(dst, network.sizes);
  for (size_t d = 0; d < a.size(); ++d) {
    if (a[d] == b[d]) continue;
    return expected_hops(network.kinds[d], network.sizes[d], a[d], b[d]) * network.latency_ps[d] +
           expected_serialization_ps(bytes, network.nano_gbps[d]);
  }
  return 0;
}

int64_t expected_store_and_forward_ps(const RandomNetwork& network, uint64_t src, uint64_t dst,
                                      uint64_t bytes) {
  const std::vector<uint32_t> a = expected_coordinates(src, network.sizes);
  const std::vector<uint32_t> b = expected_coordinates(dst, network.sizes);
  int64_t total = 0;
  for (size_t d = 0; d < a.size(); ++d) {
    total += expected_hops(network.kinds[d], network.sizes[d], a[d], b[d]) *
             (network.latency_ps[d] + expected_serialization_ps(bytes, network.nano_gbps[d]));
  }
  return total;
}

constexpr int kTopologies = 200;
constexpr int kMessagesPerTopology = 40;

TEST(BackendProperties, analytical_delay_equals_the_closed_form_exactly) {
  std::mt19937_64 rng(2024);
  const std::vector<TopologyKind> all = {TopologyKind::kRing, TopologyKind::kFullyConnected,
                                         TopologyKind::kSwitch};
  for (int t = 0; t < kTopologies; ++t) {
    const RandomNetwork network = random_network(rng, all);
    const Topology topology = testing::topology_from_yaml(network.yaml);
    testing::Network sim("analytical", topology);
    std::vector<int64_t> expected;
    for (int m = 0; m < kMessagesPerTopology; ++m) {
      const Rank src = static_cast<Rank>(rng() % topology.rank_count());
      const Rank dst = static_cast<Rank>(rng() % topology.rank_count());
      const uint64_t bytes = random_size(rng);
      expected.push_back(expected_analytical_ps(network, src, dst, bytes));
      EXPECT_EQ(analytical_delay(topology, src, dst, bytes).ps(), expected.back());
      sim.backend->send(src, dst, bytes, static_cast<uint64_t>(m));  // all at once: no effect
    }
    (void)sim.engine.run();
    for (int m = 0; m < kMessagesPerTopology; ++m) {
      EXPECT_EQ(sim.deliveries.time.at(static_cast<uint64_t>(m)).ps(),
                expected[static_cast<size_t>(m)])
          << network.yaml;
    }
  }
}

TEST(BackendProperties, congestion_aware_lone_message_is_store_and_forward_on_every_topology) {
  std::mt19937_64 rng(77);
  const std::vector<TopologyKind> all = {TopologyKind::kRing, TopologyKind::kFullyConnected,
                                         TopologyKind::kSwitch};
  for (int t = 0; t < kTopologies; ++t) {
    const RandomNetwork network = random_network(rng, all);
    const Topology topology = testing::topology_from_yaml(network.yaml);
    for (int m = 0; m < kMessagesPerTopology; ++m) {
      const Rank src = static_cast<Rank>(rng() % topology.rank_count());
      const Rank dst = static_cast<Rank>(rng() % topology.rank_count());
      const uint64_t bytes = random_size(rng);
      EXPECT_EQ(testing::lone_message_time("congestion-aware", topology, src, dst, bytes).ps(),
                expected_store_and_forward_ps(network, src, dst, bytes))
          << network.yaml << src << " -> " << dst << ", " << bytes << " B";
    }
  }
}

TEST(BackendProperties,
     congestion_aware_equals_analytical_for_one_hop_on_fully_connected_and_ring) {
  std::mt19937_64 rng(5);
  const std::vector<TopologyKind> allowed = {TopologyKind::kRing, TopologyKind::kFullyConnected};
  for (int t = 0; t < kTopologies; ++t) {
    const RandomNetwork network = random_network(rng, allowed);
    const Topology topology = testing::topology_from_yaml(network.yaml);
    for (int m = 0; m < kMessagesPerTopology; ++m) {
      const Rank src = static_cast<Rank>(rng() % topology.rank_count());
      const uint32_t d = static_cast<uint32_t>(rng() % topology.dimension_count());
      const uint32_t from = topology.coordinate(src, d);
      // A neighbour: one hop on a Ring, any member on FullyConnected.
      const uint32_t to = network.kinds[d] == TopologyKind::kRing
                              ? (from + 1) % network.sizes[d]
                              : (from + 1 + static_cast<uint32_t>(rng() % (network.sizes[d] - 1))) %
                                    network.sizes[d];
      const Rank dst = topology.peer(src, d, to);
      const uint64_t bytes = random_size(rng);
      EXPECT_EQ(testing::lone_message_time("congestion-aware", topology, src, dst, bytes),
                testing::lone_message_time("analytical", topology, src, dst, bytes))
          << network.yaml;
    }
  }
}

TEST(BackendProperties, congestion_aware_is_never_faster_than_analytical) {
  std::mt19937_64 rng(99);
  const std::vector<TopologyKind> all = {TopologyKind::kRing, TopologyKind::kFullyConnected,
                                         TopologyKind::kSwitch};
  for (int t = 0; t < kTopologies; ++t) {
    const RandomNetwork network = random_network(rng, all);
    const Topology topology = testing::topology_from_yaml(network.yaml);
    // Many messages at once, so queues form: each still takes at least its analytical time.
    testing::Network aware("congestion-aware", topology);
    std::vector<int64_t> floor;
    for (int m = 0; m < kMessagesPerTopology; ++m) {
      const Rank src = static_cast<Rank>(rng() % topology.rank_count());
      const Rank dst = static_cast<Rank>(rng() % topology.rank_count());
      const uint64_t bytes = random_size(rng);
      floor.push_back(expected_analytical_ps(network, src, dst, bytes));
      aware.backend->send(src, dst, bytes, static_cast<uint64_t>(m));
    }
    (void)aware.engine.run();
    for (int m = 0; m < kMessagesPerTopology; ++m) {
      EXPECT_GE(aware.deliveries.time.at(static_cast<uint64_t>(m)).ps(),
                floor[static_cast<size_t>(m)])
          << network.yaml;
    }
  }
}

TEST(BackendProperties, the_same_sends_give_the_same_deliveries) {
  auto run = [](const char* backend) {
    std::mt19937_64 rng(11);
    const Topology topology = testing::topology_from_yaml(
        "topology: [ Ring, Switch, FullyConnected ]\nnpus_count: [ 4, 3, 3 ]\n"
        "bandwidth: [ 50, 25, 12.5 ]\nlatency: [ 500, 700, 900 ]\n");
    testing::Network sim(backend, topology);
    for (uint64_t m = 0; m < 500; ++m) {
      sim.backend->send(static_cast<Rank>(rng() % 36), static_cast<Rank>(rng() % 36),
                        1 + rng() % (1 << 20), m);
    }
    (void)sim.engine.run();
    std::vector<std::pair<uint64_t, int64_t>> trace;
    for (const uint64_t token : sim.deliveries.order) {
      trace.emplace_back(token, sim.deliveries.time.at(token).ps());
    }
    std::vector<std::tuple<LinkId, uint64_t, int64_t, uint32_t>> links;
    for (const LinkStats& link : sim.backend->link_stats()) {
      links.emplace_back(link.link, link.bytes, link.busy.ps(), link.peak_queue);
    }
    return std::make_pair(trace, links);
  };
  for (const char* backend : {"analytical", "congestion-aware"}) {
    EXPECT_EQ(run(backend), run(backend)) << backend;
  }
}

TEST(NetworkBackendFactory, unknown_backend_names_are_refused) {
  EventEngine engine;
  const Topology topology =
      testing::topology_from_yaml(testing::one_dimension_yaml("Ring", 4, "1", "1"));
  const auto made = make_network_backend("garnet", engine, topology);
  ASSERT_FALSE(made.has_value());
  EXPECT_EQ(made.error().message(),
            "backend 'garnet' does not run on an ASTRA-sim network (expected analytical, "
            "congestion-aware or flow)");
  const auto unknown = make_backend("garnet", engine, NetworkDescription{topology, nullptr, {}});
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().message(),
            "unknown network backend 'garnet' (expected analytical, congestion-aware, flow, roce)");
  const auto roce = make_backend("roce", engine, NetworkDescription{topology, nullptr, {}});
  ASSERT_FALSE(roce.has_value());
  EXPECT_EQ(roce.error().message(),
            "the roce backend needs a graph topology file (docs/formats/topology.md), not an "
            "ASTRA-sim network");
  // Every backend of the registry that runs on ASTRA-sim files is made by its name.
  size_t on_astra = 0;
  for (const BackendInfo& info : backends()) {
    if (!info.on_astra_networks) continue;
    ++on_astra;
    const auto backend = make_backend(info.name, engine, NetworkDescription{topology, nullptr, {}});
    ASSERT_TRUE(backend.has_value()) << info.name;
    EXPECT_EQ((*backend)->name(), info.name);
  }
  EXPECT_EQ(on_astra, 3u);
}

}  // namespace backend_properties_test
}  // namespace orrery::net
