// system/mirror_traffic.h: the link use of a symmetric run, from one rank's messages.
//
// In a symmetric run every rank sends what the representative sends, at the same times, to the
// peer at the same offset. So every link of one *class* carries the same traffic: in a Ring
// dimension, all clockwise links alike (a message k hops clockwise puts one copy on each of them,
// from k different senders), all anticlockwise links alike; in a FullyConnected dimension, all
// links to the member k positions on; in a Switch dimension, all uplinks alike and all downlinks
// alike. MirrorTraffic sums the representative's messages per class and expands them into the
// statistics the analytical backend would have kept for every link of the network.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "core/time.h"
#include "network/network_backend.h"
#include "network/topology.h"

namespace orrery::sys {

class MirrorTraffic {
 public:
  explicit MirrorTraffic(const net::Topology& topology) : topology_(&topology) {}

  // The representative sent `bytes` from its coordinate `from` to `to` in dimension `dim`
  // (analytical routing: the shorter way round on a Ring), in flight over [start, end).
  void record_message(uint32_t dim, uint32_t from, uint32_t to, uint64_t bytes, SimTime start,
                      SimTime end);
  // A halving-doubling step at distance `distance` in `dim`: every member whose block
  // (coordinate / distance) is even sends up to coordinate + distance, the others down. Not every
  // link carries the same, so these are expanded rank by rank.
  void record_partner_message(uint32_t dim, uint32_t distance, uint64_t bytes, SimTime start,
                              SimTime end);
  // One in-network hop of `bytes` up to (or down from) the switch of `dim` over [start, end).
  void record_switch(uint32_t dim, bool up, uint64_t bytes, SimTime start, SimTime end);

  // Replaces each class's statistics with those a network backend kept for the representative's
  // (rank 0's) own link of that class. Exact when every link carries only its source rank's
  // messages (every message one hop, on a Ring or FullyConnected dimension): then every link of a
  // class saw what the representative's saw, queueing included. Links not leaving rank 0 are
  // ignored.
  void adopt_representative_links(const std::vector<net::LinkStats>& links);

  // Links of the whole network that carried traffic.
  // (An upper bound when halving-doubling steps were recorded: their links may repeat the
  // classes'.)
  uint64_t link_count() const {
    return uint64_t{topology_->rank_count()} * (classes_.size() + partner_messages_.size());
  }
  // Every such link's statistics, ordered by link id. O(link_count() log) time and memory.
  std::vector<net::LinkStats> expand() const;
  // Totals per dimension over all its links: bytes and busy time.
  void dimension_totals(uint32_t dim, uint64_t& links_used, uint64_t& bytes, SimTime& busy) const;

 private:
  struct ClassKey {
    uint32_t dim;
    uint32_t
        kind;  // Ring: 0 clockwise, 1 anticlockwise; FullyConnected: offset; Switch: 0 up, 1 down
    auto operator<=>(const ClassKey&) const = default;
  };
  struct Interval {
    SimTime start;
    SimTime end;
    uint32_t copies;
  };
  struct ClassTraffic {
    uint64_t bytes = 0;  // per link
    SimTime busy;
    uint64_t messages = 0;
    std::vector<Interval> intervals;
    uint32_t measured_peak = 0;  // from adopt_representative_links, when set
    bool measured = false;
  };
  void add(ClassKey key, uint32_t copies, uint64_t bytes, SimTime serialization, SimTime start,
           SimTime end);
  // The link of `rank` in class `key`.
  net::Hop link_of(net::Rank rank, ClassKey key) const;
  static uint32_t peak(const std::vector<Interval>& intervals);

  struct PartnerMessage {
    uint32_t dim;
    uint32_t distance;
    uint64_t bytes;
    SimTime start;
    SimTime end;
  };
  // Per-link traffic of the partner messages, keyed by link id (ordered, so output is stable).
  std::map<net::LinkId, ClassTraffic> partner_links() const;

  const net::Topology* topology_;
  std::map<ClassKey, ClassTraffic> classes_;
  std::vector<PartnerMessage> partner_messages_;
};

}  // namespace orrery::sys
