// tests/network/network_test_support.h: building topologies from YAML text, recording deliveries,
// and the closed forms the backends are checked against (written here from the definitions, not
// by calling the code under test).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/event_engine.h"
#include "network/network_backend.h"
#include "network/topology.h"
#include "network/topology_yaml.h"

namespace orrery::net::testing {

__extension__ typedef unsigned __int128 uint128;

inline Topology topology_from_yaml(const std::string& text) {
  Expected<Topology> topology = parse_topology_yaml(text, "test.yml");
  EXPECT_TRUE(topology.has_value()) << (topology ? "" : topology.error().message());
  return std::move(topology).value();
}

// A one-dimension network file in ASTRA-sim's format.
inline std::string one_dimension_yaml(const std::string& kind, int ranks, const std::string& gbps,
                                      const std::string& latency_ns) {
  return "topology: [ " + kind + " ]\nnpus_count: [ " + std::to_string(ranks) +
         " ]\nbandwidth: [ " + gbps + " ]\nlatency: [ " + latency_ns + " ]\n";
}

// Records when each token was delivered, in delivery order.
class Deliveries final : public DeliveryListener {
 public:
  explicit Deliveries(EventEngine& engine) : engine_(engine) {}
  void on_delivered(uint64_t token) override {
    EXPECT_EQ(time.count(token), 0u) << "token " << token << " delivered twice";
    time[token] = engine_.now();
    order.push_back(token);
  }
  std::map<uint64_t, SimTime> time;
  std::vector<uint64_t> order;

 private:
  EventEngine& engine_;
};

// A backend with its own engine and listener.
struct Network {
  Network(const std::string& backend_name, const Topology& topology) : deliveries(engine) {
    Expected<std::unique_ptr<NetworkBackend>> made =
        make_network_backend(backend_name, engine, topology);
    EXPECT_TRUE(made.has_value());
    backend = std::move(made).value();
    backend->set_listener(deliveries);
  }
  EventEngine engine;
  Deliveries deliveries;
  std::unique_ptr<NetworkBackend> backend;
};

// Time of one message alone on the network.
inline SimTime lone_message_time(const std::string& backend_name, const Topology& topology,
                                 Rank src, Rank dst, uint64_t bytes) {
  Network network(backend_name, topology);
  network.backend->send(src, dst, bytes, 1);
  (void)network.engine.run();
  EXPECT_EQ(network.deliveries.time.count(1), 1u);
  return network.deliveries.time[1];
}

// bytes / (nano_gbps * 1e-9 * 2^30 B/s) in ps, rounded to nearest (halves up):
// bytes * 10^21 / (nano_gbps * 2^30). Valid for bytes below 2^57.
inline int64_t expected_serialization_ps(uint64_t bytes, uint64_t nano_gbps) {
  uint128 ten_pow_21 = 1;
  for (int idx = 0; idx < 21; ++idx) ten_pow_21 *= 10;
  const uint128 numerator = static_cast<uint128>(bytes) * ten_pow_21;
  const uint128 denominator = static_cast<uint128>(nano_gbps) << 30;
  return static_cast<int64_t>((2 * numerator + denominator) / (2 * denominator));
}

// Coordinates by repeated division, dimension 0 fastest.
inline std::vector<uint32_t> expected_coordinates(uint64_t rank,
                                                  const std::vector<uint32_t>& sizes) {
  std::vector<uint32_t> coords;
  for (const uint32_t size : sizes) {
    coords.push_back(static_cast<uint32_t>(rank % size));
    rank /= size;
  }
  return coords;
}

inline uint32_t expected_hops(TopologyKind kind, uint32_t size, uint32_t from, uint32_t to) {
  if (from == to) return 0;
  switch (kind) {
    case TopologyKind::kRing: {
      const uint32_t forward = (to + size - from) % size;
      return std::min(forward, size - forward);
    }
    case TopologyKind::kFullyConnected:
      return 1;
    case TopologyKind::kSwitch:
      return 2;
  }
  return 0;
}

}  // namespace orrery::net::testing
