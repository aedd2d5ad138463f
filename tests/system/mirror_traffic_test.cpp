// Link statistics expanded from a class run's records: mirrored class traffic and point-to-point
// routes sharing links, counted as the analytical backend counts them.
#include "system/mirror_traffic.h"

#include <gtest/gtest.h>

#include <map>
#include <utility>
#include <vector>

namespace orrery::sys {
namespace mirror_traffic_test {

net::Topology ring(uint32_t size) {
  Expected<net::Topology> topology = net::Topology::create({net::Dimension{
      net::TopologyKind::kRing, size, net::Bandwidth::from_gbps(50), SimTime::from_ns(500)}});
  EXPECT_TRUE(topology.has_value());
  return std::move(topology).value();
}

// (src, dst) -> the link's statistics.
std::map<std::pair<net::NodeId, net::NodeId>, net::LinkStats> by_ends(
    const std::vector<net::LinkStats>& links) {
  std::map<std::pair<net::NodeId, net::NodeId>, net::LinkStats> out;
  for (const net::LinkStats& link : links) out[{link.src, link.dst}] = link;
  return out;
}

// Ring(4), classes {0, 2} and {1, 3}. Class 0's representative sends one hop clockwise over
// [0, 1000 ns): links 0->1 and 2->3 carry a copy each. A ring of pairs around every rank
// (0->1, 1->2, 2->3, 3->0) crosses every clockwise link once, over the same interval, twice.
// The four links see the same routes, but only two of them also carry class 0's copies: those
// peak at 2 messages at once, the other two at 1 (a link's queue counts the classes sharing it).
TEST(MirrorTraffic, links_crossed_alike_but_shared_with_other_classes_keep_their_own_queue) {
  const net::Topology topology = ring(4);
  const std::vector<std::vector<net::Rank>> members = {{0, 2}, {1, 3}};
  MirrorTraffic traffic(topology);
  traffic.set_classes(&members);
  const MirrorTraffic::RoutePairs pairs = {{0, 1}, {1, 2}, {2, 3}, {3, 0}};
  const uint64_t bytes = 50000;
  const SimTime serialization = topology.dimension(0).bandwidth.serialization_time(bytes);
  traffic.record_message(0, 0, 1, bytes, SimTime::zero(), SimTime::from_ns(1000), 0);
  traffic.record_routes(&pairs, bytes, SimTime::zero(), SimTime::from_ns(1000));
  traffic.record_routes(&pairs, bytes, SimTime::from_ns(2000), SimTime::from_ns(3000));
  const auto links = by_ends(traffic.expand());
  ASSERT_EQ(links.size(), 4u);
  for (const auto& [ends, peak, messages] :
       {std::tuple{std::pair<net::NodeId, net::NodeId>{0, 1}, 2u, 3u},
        {{2, 3}, 2u, 3u},
        {{1, 2}, 1u, 2u},
        {{3, 0}, 1u, 2u}}) {
    const net::LinkStats& link = links.at(ends);
    EXPECT_EQ(link.peak_queue, peak) << ends.first << "->" << ends.second;
    EXPECT_EQ(link.messages, messages) << ends.first << "->" << ends.second;
    EXPECT_EQ(link.bytes, messages * bytes) << ends.first << "->" << ends.second;
    EXPECT_EQ(link.busy, serialization * messages) << ends.first << "->" << ends.second;
  }
}

// A pair list that crosses one link twice per message puts both copies in its queue at once.
TEST(MirrorTraffic, a_route_crossing_a_link_twice_queues_both_copies) {
  const net::Topology topology = ring(4);
  const std::vector<std::vector<net::Rank>> members = {{0}, {1}, {2}, {3}};
  MirrorTraffic traffic(topology);
  traffic.set_classes(&members);
  // 0 -> 2 goes 0->1->2 (clockwise on a tie); 1 -> 2 crosses 1->2 too.
  const MirrorTraffic::RoutePairs pairs = {{0, 2}, {1, 2}};
  traffic.record_routes(&pairs, 50000, SimTime::zero(), SimTime::from_ns(1000));
  const auto links = by_ends(traffic.expand());
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(links.at({0, 1}).peak_queue, 1u);
  EXPECT_EQ(links.at({0, 1}).messages, 1u);
  EXPECT_EQ(links.at({1, 2}).peak_queue, 2u);
  EXPECT_EQ(links.at({1, 2}).messages, 2u);
}

// A class of 4,096 ranks sends a ring of pairs a million times (a 32-way tensor-parallel ring
// over ranks that are not a sub-grid, every micro-batch): the links are the ring's 4,096, each
// carrying every message. Counting a link per pair per message once reserved 4 x 10^9 entries
// and ended the run in std::bad_alloc.
TEST(MirrorTraffic, a_million_messages_over_one_ring_of_pairs_expand_to_its_links) {
  constexpr uint32_t kRanks = 4096;
  constexpr uint32_t kMessages = 1000000;
  const net::Topology topology = ring(kRanks);
  std::vector<std::vector<net::Rank>> members(1);
  MirrorTraffic::RoutePairs pairs;
  for (net::Rank rank = 0; rank < kRanks; ++rank) {
    members[0].push_back(rank);
    pairs.emplace_back(rank, (rank + 1) % kRanks);
  }
  MirrorTraffic traffic(topology);
  traffic.set_classes(&members);
  for (uint32_t k = 0; k < kMessages; ++k) {
    traffic.record_routes(&pairs, 1024, SimTime::from_ns(2 * k), SimTime::from_ns(2 * k + 1));
  }
  EXPECT_EQ(traffic.link_count(), kRanks);
  const std::vector<net::LinkStats> links = traffic.expand();
  ASSERT_EQ(links.size(), kRanks);
  for (const net::LinkStats& link : {links.front(), links.back()}) {
    EXPECT_EQ(link.messages, kMessages);
    EXPECT_EQ(link.bytes, uint64_t{kMessages} * 1024);
    EXPECT_EQ(link.peak_queue, 1u);
  }
}

}  // namespace mirror_traffic_test
}  // namespace orrery::sys
