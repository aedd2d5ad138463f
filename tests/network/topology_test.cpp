// Topology arithmetic: coordinates, peers, hop counts, link numbering and routes.
#include "network/topology.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <vector>

#include "network/network_test_support.h"

namespace orrery::net {
namespace topology_test {

using testing::expected_coordinates;
using testing::expected_hops;
using testing::topology_from_yaml;

Dimension dim(TopologyKind kind, uint32_t size) {
  return Dimension{kind, size, Bandwidth::from_gbps(50), SimTime::from_ns(500)};
}

Topology make(std::vector<Dimension> dims) {
  Expected<Topology> topology = Topology::create(std::move(dims));
  EXPECT_TRUE(topology.has_value());
  return std::move(topology).value();
}

TEST(Topology, ranks_are_mixed_radix_with_dimension_0_fastest) {
  // ASTRA-sim's own example: sizes [2, 8, 4], rank 47 is at [1, 7, 2].
  const Topology topology =
      make({dim(TopologyKind::kRing, 2), dim(TopologyKind::kFullyConnected, 8),
            dim(TopologyKind::kSwitch, 4)});
  EXPECT_EQ(topology.rank_count(), 64u);
  EXPECT_EQ(topology.coordinates(47), (std::vector<uint32_t>{1, 7, 2}));
  const std::vector<uint32_t> coords = {1, 7, 2};
  EXPECT_EQ(topology.rank_at(coords), 47u);
  EXPECT_EQ(topology.stride(0), 1u);
  EXPECT_EQ(topology.stride(1), 2u);
  EXPECT_EQ(topology.stride(2), 16u);
  for (Rank rank = 0; rank < topology.rank_count(); ++rank) {
    const std::vector<uint32_t> expected = expected_coordinates(rank, {2, 8, 4});
    EXPECT_EQ(topology.coordinates(rank), expected);
    EXPECT_EQ(topology.rank_at(expected), rank);
    for (uint32_t d = 0; d < 3; ++d) EXPECT_EQ(topology.coordinate(rank, d), expected[d]);
  }
}

TEST(Topology, peer_replaces_one_coordinate) {
  const Topology topology =
      make({dim(TopologyKind::kRing, 3), dim(TopologyKind::kRing, 5), dim(TopologyKind::kRing, 2)});
  for (Rank rank = 0; rank < topology.rank_count(); ++rank) {
    for (uint32_t d = 0; d < 3; ++d) {
      for (uint32_t k = 0; k < topology.size(d); ++k) {
        std::vector<uint32_t> coords = topology.coordinates(rank);
        coords[d] = k;
        EXPECT_EQ(topology.peer(rank, d, k), topology.rank_at(coords));
      }
    }
  }
}

TEST(Topology, lowest_differing_dimension_is_the_first_coordinate_that_differs) {
  const Topology topology = make({dim(TopologyKind::kRing, 4), dim(TopologyKind::kSwitch, 3),
                                  dim(TopologyKind::kFullyConnected, 2)});
  EXPECT_EQ(topology.lowest_differing_dimension(5, 5), kNoDimension);
  EXPECT_EQ(topology.lowest_differing_dimension(0, 1), 0u);
  EXPECT_EQ(topology.lowest_differing_dimension(0, 4), 1u);
  EXPECT_EQ(topology.lowest_differing_dimension(0, 12), 2u);
  EXPECT_EQ(topology.lowest_differing_dimension(0, 13), 0u);
}

TEST(Topology, ring_delay_takes_the_shorter_way_round) {
  const Topology topology = make({dim(TopologyKind::kRing, 16)});
  EXPECT_EQ(topology.hops(0, 1, 4), 3u);
  EXPECT_EQ(topology.hops(0, 4, 1), 3u);
  EXPECT_EQ(topology.hops(0, 1, 15), 2u);
  EXPECT_EQ(topology.hops(0, 15, 1), 2u);
  EXPECT_EQ(topology.hops(0, 0, 8), 8u);
  // The route agrees: 1 -> 15 goes counter-clockwise through 0.
  Hop hop = topology.next_hop(1, 15);
  EXPECT_EQ(hop.next, 0u);
  hop = topology.next_hop(hop.next, 15);
  EXPECT_EQ(hop.next, 15u);
}

TEST(Topology, ring_at_exactly_half_way_goes_clockwise) {
  // ASTRA-sim's congestion-aware Ring turns anticlockwise only when that is strictly shorter.
  const Topology topology = make({dim(TopologyKind::kRing, 8)});
  NodeId at = 6;
  std::vector<NodeId> visited;
  while (at != 2) {
    at = topology.next_hop(at, 2).next;
    visited.push_back(at);
  }
  EXPECT_EQ(visited, (std::vector<NodeId>{7, 0, 1, 2}));
}

TEST(Topology, hop_counts_follow_each_dimension_kind) {
  const Topology topology =
      make({dim(TopologyKind::kRing, 7), dim(TopologyKind::kFullyConnected, 5),
            dim(TopologyKind::kSwitch, 4)});
  for (uint32_t d = 0; d < 3; ++d) {
    for (uint32_t from = 0; from < topology.size(d); ++from) {
      for (uint32_t to = 0; to < topology.size(d); ++to) {
        EXPECT_EQ(topology.hops(d, from, to),
                  expected_hops(topology.dimension(d).kind, topology.size(d), from, to));
      }
    }
  }
}

TEST(Topology, link_counts_follow_each_dimension_kind) {
  // 3 x 5 x 4 = 60 ranks. Ring(3): 20 groups x 6; FC(5): 12 groups x 20; Switch(4): 15 x 8.
  const Topology topology =
      make({dim(TopologyKind::kRing, 3), dim(TopologyKind::kFullyConnected, 5),
            dim(TopologyKind::kSwitch, 4)});
  EXPECT_EQ(topology.link_count(0), 120u);
  EXPECT_EQ(topology.link_count(1), 240u);
  EXPECT_EQ(topology.link_count(2), 120u);
  EXPECT_EQ(topology.link_count(), 480u);
  EXPECT_EQ(topology.switch_count(), 15u);
  EXPECT_EQ(topology.node_count(), 75u);
}

// Walks every route of a topology and checks each hop against the link it claims to use.
void check_every_route(const Topology& topology) {
  const std::vector<uint32_t> sizes = [&] {
    std::vector<uint32_t> out;
    for (uint32_t d = 0; d < topology.dimension_count(); ++d) out.push_back(topology.size(d));
    return out;
  }();
  for (Rank src = 0; src < topology.rank_count(); ++src) {
    for (Rank dst = 0; dst < topology.rank_count(); ++dst) {
      if (src == dst) continue;
      const std::vector<uint32_t> from = expected_coordinates(src, sizes);
      const std::vector<uint32_t> to = expected_coordinates(dst, sizes);
      uint32_t expected_hop_count = 0;
      for (uint32_t d = 0; d < sizes.size(); ++d) {
        expected_hop_count += expected_hops(topology.dimension(d).kind, sizes[d], from[d], to[d]);
      }
      uint32_t hop_count = 0;
      uint32_t last_dimension = 0;
      for (NodeId at = src; at != dst; ++hop_count) {
        ASSERT_LE(hop_count, expected_hop_count) << src << " -> " << dst;
        const Hop hop = topology.next_hop(at, dst);
        ASSERT_LT(hop.link, topology.link_count());
        const LinkInfo info = topology.link_info(hop.link);
        EXPECT_EQ(info.src, at);
        EXPECT_EQ(info.dst, hop.next);
        EXPECT_EQ(info.dimension, hop.dimension);
        EXPECT_GE(hop.dimension, last_dimension) << "dimensions are routed lowest first";
        last_dimension = hop.dimension;
        at = hop.next;
      }
      EXPECT_EQ(hop_count, expected_hop_count) << src << " -> " << dst;

      // route_in_dimension lists the links of the route's first dimension as next_hop walks them.
      const uint32_t first = topology.lowest_differing_dimension(src, dst);
      const Rank turn = topology.peer(src, first, to[first]);
      std::vector<LinkId> walked;
      for (NodeId at = src; at != turn;) {
        const Hop hop = topology.next_hop(at, turn);
        walked.push_back(hop.link);
        at = hop.next;
      }
      std::vector<LinkId> listed;
      topology.route_in_dimension(src, first, to[first],
                                  [&](LinkId link) { listed.push_back(link); });
      EXPECT_EQ(listed, walked) << src << " -> " << dst;
    }
  }
}

TEST(Topology, routes_use_the_links_they_name_one_dimension_at_a_time) {
  check_every_route(make({dim(TopologyKind::kRing, 4), dim(TopologyKind::kFullyConnected, 3),
                          dim(TopologyKind::kSwitch, 3)}));
  check_every_route(make({dim(TopologyKind::kSwitch, 2), dim(TopologyKind::kRing, 5)}));
  check_every_route(make({dim(TopologyKind::kFullyConnected, 4), dim(TopologyKind::kRing, 2),
                          dim(TopologyKind::kSwitch, 2)}));
}

TEST(Topology, every_link_id_names_a_real_link_once) {
  const Topology topology =
      make({dim(TopologyKind::kRing, 4), dim(TopologyKind::kFullyConnected, 3),
            dim(TopologyKind::kSwitch, 3)});
  std::set<std::pair<NodeId, NodeId>> seen;
  for (LinkId link = 0; link < topology.link_count(); ++link) {
    const LinkInfo info = topology.link_info(link);
    EXPECT_TRUE(seen.emplace(info.src, info.dst).second) << "link " << link << " duplicated";
    EXPECT_NE(info.src, info.dst);
    const bool src_switch = topology.is_switch(info.src);
    const bool dst_switch = topology.is_switch(info.dst);
    if (src_switch || dst_switch) {
      EXPECT_NE(src_switch, dst_switch) << "no switch-to-switch links";
      EXPECT_EQ(topology.dimension(info.dimension).kind, TopologyKind::kSwitch);
      uint32_t switch_dim = 0;
      uint32_t group = 0;
      topology.switch_position(src_switch ? info.src : info.dst, switch_dim, group);
      EXPECT_EQ(switch_dim, info.dimension);
    } else {
      EXPECT_EQ(topology.lowest_differing_dimension(info.src, info.dst), info.dimension);
      EXPECT_EQ(
          topology.peer(info.src, info.dimension, topology.coordinate(info.dst, info.dimension)),
          info.dst)
          << "the endpoints differ in one coordinate only";
      EXPECT_EQ(topology.hops(info.dimension, topology.coordinate(info.src, info.dimension),
                              topology.coordinate(info.dst, info.dimension)),
                1u);
    }
  }
}

TEST(Topology, switch_nodes_come_after_the_ranks) {
  const Topology topology = make({dim(TopologyKind::kSwitch, 4), dim(TopologyKind::kSwitch, 2)});
  EXPECT_EQ(topology.switch_count(), 2u + 4u);
  const Hop up = topology.next_hop(0, 3);
  EXPECT_TRUE(topology.is_switch(up.next));
  EXPECT_GE(up.next, topology.rank_count());
  EXPECT_EQ(topology.next_hop(up.next, 3).next, 3u);
}

TEST(Topology, create_rejects_impossible_dimensions) {
  EXPECT_FALSE(Topology::create({}).has_value());
  EXPECT_FALSE(Topology::create({dim(TopologyKind::kRing, 1)}).has_value());
  Dimension no_bandwidth = dim(TopologyKind::kRing, 4);
  no_bandwidth.bandwidth = Bandwidth::from_nano_gbps(0);
  EXPECT_FALSE(Topology::create({no_bandwidth}).has_value());
  Dimension negative_latency = dim(TopologyKind::kRing, 4);
  negative_latency.latency = SimTime::from_ps(-1);
  EXPECT_FALSE(Topology::create({negative_latency}).has_value());
  Dimension slow = dim(TopologyKind::kRing, 1 << 20);
  slow.latency = SimTime::from_ps(int64_t{1} << 50);  // 2^19 hops x 2^50 ps overflows 2^61
  EXPECT_FALSE(Topology::create({slow}).has_value());
  const Expected<Topology> too_many =
      Topology::create({dim(TopologyKind::kRing, 65536), dim(TopologyKind::kRing, 65536)});
  ASSERT_FALSE(too_many.has_value());
  EXPECT_NE(too_many.error().message().find("ranks"), std::string::npos);
}

TEST(Topology, a_million_rank_topology_builds_in_well_under_a_second_and_a_few_bytes) {
  const auto start = std::chrono::steady_clock::now();
  const Topology topology = topology_from_yaml(
      "topology: [ FullyConnected, Ring, Switch ]\n"
      "npus_count: [ 64, 128, 128 ]\n"
      "bandwidth: [ 400, 200, 50 ]\n"
      "latency: [ 100, 500, 1000 ]\n");
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, std::chrono::seconds(1));
  EXPECT_EQ(topology.rank_count(), 1u << 20);
  // FC(64): 64 * 63 links per group of 64; Ring(128) and Switch(128): 2 per rank each.
  EXPECT_EQ(topology.link_count(),
            (1ULL << 20) / 64 * 64 * 63 + 2 * (1ULL << 20) + 2 * (1ULL << 20));
  EXPECT_EQ(topology.switch_count(), (1u << 20) / 128);
  EXPECT_LT(topology.memory_bytes(), 1024u) << "nothing is stored per rank or per link";
  // And routes still work at the far corners.
  const Rank last = topology.rank_count() - 1;
  NodeId at = 0;
  int hops = 0;
  while (at != last) {
    at = topology.next_hop(at, last).next;
    ++hops;
  }
  EXPECT_EQ(hops, 1 + 1 + 2);  // FC 0 -> 63, Ring 0 -> 127 (one step back), Switch up and down
}

}  // namespace topology_test
}  // namespace orrery::net
