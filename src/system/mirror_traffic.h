// system/mirror_traffic.h: the link use of a symmetric run, from one rank's messages.
//
// In a symmetric run every rank sends what the representative sends, at the same times, to the
// peer at the same offset. So every link of one *class* carries the same traffic: in a Ring
// dimension, all clockwise links alike (a message k hops clockwise puts one copy on each of them,
// from k different senders), all anticlockwise links alike; in a FullyConnected dimension, all
// links to the member k positions on; in a Switch dimension, all uplinks alike and all downlinks
// alike. MirrorTraffic sums the representative's messages per class and expands them into the
// statistics the analytical backend would have kept for every link of the network.
//
// With rank classes (sim/rank_classes.h) each class's representative stands for the members of its
// class only: its messages are recorded under its class and expanded over that class's members
// (a collective's group lies inside one class, so the links of a Ring or Switch it uses carry only
// that class's copies); point-to-point messages between classes are recorded with every member's
// (sender, destination) pair and expanded route by route.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "core/time.h"
#include "network/network_backend.h"
#include "network/topology.h"

namespace orrery::sys {

class MirrorTraffic {
 public:
  explicit MirrorTraffic(const net::Topology& topology) : topology_(&topology) {}

  // The members of each rank class, ascending (default: one class of every rank). Before any
  // record_*; `members` must outlive this object.
  void set_classes(const std::vector<std::vector<net::Rank>>* members) { members_ = members; }
  // Off: links' peak queues are not counted (0), so no message's interval is kept: messages are
  // summed as they are recorded, per class and per route (point-to-point and partner alike), and
  // memory no longer grows with the messages. Bytes, busy time and message counts per link are
  // the same either way. Before any record_*.
  void set_queue_peaks(bool on) { queue_peaks_ = on; }
  // The (sender, destination) pairs of one point-to-point message of every member of a class.
  using RoutePairs = std::vector<std::pair<net::Rank, net::Rank>>;
  // Every pair of `pairs` (which must outlive this object) sent `bytes` over [start, end),
  // routed as the analytical backend routes it.
  void record_routes(const RoutePairs* pairs, uint64_t bytes, SimTime start, SimTime end);

  // The representative sent `bytes` from its coordinate `from` to `to` in dimension `dim`
  // (analytical routing: the shorter way round on a Ring), in flight over [start, end).
  void record_message(uint32_t dim, uint32_t from, uint32_t to, uint64_t bytes, SimTime start,
                      SimTime end, uint32_t rank_class = 0);
  // A halving-doubling step at distance `distance` in `dim`: every member whose block
  // (coordinate / distance) is even sends up to coordinate + distance, the others down. Not every
  // link carries the same, so these are expanded rank by rank.
  void record_partner_message(uint32_t dim, uint32_t distance, uint64_t bytes, SimTime start,
                              SimTime end, uint32_t rank_class = 0);
  // One in-network hop of `bytes` up to (or down from) the switch of `dim` over [start, end).
  void record_switch(uint32_t dim, bool up, uint64_t bytes, SimTime start, SimTime end,
                     uint32_t rank_class = 0);

  // Replaces each class's statistics with those a network backend kept for the representative's
  // (rank 0's) own link of that class. Exact when every link carries only its source rank's
  // messages (every message one hop, on a Ring or FullyConnected dimension): then every link of a
  // class saw what the representative's saw, queueing included. Links not leaving rank 0 are
  // ignored.
  void adopt_representative_links(const std::vector<net::LinkStats>& links);

  // Links of the whole network that carried traffic.
  // (An upper bound when halving-doubling steps were recorded: their links may repeat the
  // classes'.)
  uint64_t link_count() const;
  // Every such link's statistics, ordered by link id. O(link_count() log) time and memory.
  std::vector<net::LinkStats> expand() const;
  // Totals per dimension over all its links: bytes and busy time.
  void dimension_totals(uint32_t dim, uint64_t& links_used, uint64_t& bytes, SimTime& busy) const;

 private:
  struct ClassKey {
    uint32_t rank_class;
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
    uint32_t rank_class;
    uint32_t dim;
    uint32_t distance;
    uint64_t bytes;
    SimTime start;
    SimTime end;
  };
  // What the partner and point-to-point messages put on each link they crossed, keyed by link id
  // (ordered, so output is stable); the peak counts them together with the intervals of the
  // classes that share the link (`class_uses`: (link, class) sorted; `class_intervals`: each
  // class's intervals in order of start). Memory: the messages in flight, not every interval.
  struct PartnerLink {
    uint64_t bytes = 0;
    SimTime busy;
    uint64_t messages = 0;
    uint32_t peak_queue = 0;
  };
  std::map<net::LinkId, PartnerLink> partner_links(
      const std::vector<std::pair<net::LinkId, uint32_t>>& class_uses,
      const std::vector<const std::vector<Interval>*>& class_intervals) const;

  struct RouteMessage {
    const RoutePairs* pairs;
    uint64_t bytes;
    SimTime start;
    SimTime end;
  };
  // Without queue peaks: what the messages of one route put on each of its crossings.
  struct RouteTotals {
    uint64_t bytes = 0;
    uint64_t messages = 0;
    std::vector<SimTime> busy;  // per dimension: the serialization of every message there
  };
  void add_totals(RouteTotals& totals, uint64_t bytes);
  // Without queue peaks: per link, the totals of every route crossing it.
  std::map<net::LinkId, PartnerLink> route_totals_links() const;
  // Members of a rank class (every rank when no classes were set).
  uint64_t class_size(uint32_t rank_class) const {
    return members_ == nullptr ? topology_->rank_count() : (*members_)[rank_class].size();
  }
  net::Rank member(uint32_t rank_class, uint64_t index) const {
    return members_ == nullptr ? static_cast<net::Rank>(index)
                               : (*members_)[rank_class][static_cast<size_t>(index)];
  }

  const net::Topology* topology_;
  const std::vector<std::vector<net::Rank>>* members_ = nullptr;
  std::vector<RouteMessage> route_messages_;
  std::map<ClassKey, ClassTraffic> classes_;
  std::vector<PartnerMessage> partner_messages_;
  bool queue_peaks_ = true;
  std::map<const RoutePairs*, RouteTotals> route_totals_;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, RouteTotals> partner_totals_;
  const RoutePairs* last_pairs_ = nullptr;  // the route recorded last, and its totals
  RouteTotals* last_totals_ = nullptr;
};

}  // namespace orrery::sys
