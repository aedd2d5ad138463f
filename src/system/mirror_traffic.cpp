#include "system/mirror_traffic.h"

#include <algorithm>

namespace orrery::sys {

void MirrorTraffic::add(ClassKey key, uint32_t copies, uint64_t bytes, SimTime serialization,
                        SimTime start, SimTime end) {
  ClassTraffic& traffic = classes_[key];
  traffic.bytes += uint64_t{copies} * bytes;
  traffic.busy += serialization * copies;
  traffic.messages += copies;
  traffic.intervals.push_back({start, end, copies});
}

void MirrorTraffic::record_message(uint32_t dim, uint32_t from, uint32_t to, uint64_t bytes,
                                   SimTime start, SimTime end) {
  const net::Dimension& spec = topology_->dimension(dim);
  const SimTime serialization = spec.bandwidth.serialization_time(bytes);
  const uint32_t n = spec.size;
  const uint32_t offset = (to + n - from) % n;
  switch (spec.kind) {
    case net::TopologyKind::kRing:
      // As the router: clockwise unless anticlockwise is strictly shorter. Each link of the
      // direction carries one copy per hop of the message, from as many senders.
      if (n - offset < offset) {
        add({dim, 1}, n - offset, bytes, serialization, start, end);
      } else {
        add({dim, 0}, offset, bytes, serialization, start, end);
      }
      return;
    case net::TopologyKind::kFullyConnected:
      add({dim, offset}, 1, bytes, serialization, start, end);
      return;
    case net::TopologyKind::kSwitch:
      add({dim, 0}, 1, bytes, serialization, start, end);
      add({dim, 1}, 1, bytes, serialization, start, end);
      return;
  }
}

void MirrorTraffic::record_switch(uint32_t dim, bool up, uint64_t bytes, SimTime start,
                                  SimTime end) {
  add({dim, up ? 0u : 1u}, 1, bytes, topology_->dimension(dim).bandwidth.serialization_time(bytes),
      start, end);
}

net::Hop MirrorTraffic::link_of(net::Rank rank, ClassKey key) const {
  const net::Dimension& spec = topology_->dimension(key.dim);
  const uint32_t n = spec.size;
  const uint32_t coord = topology_->coordinate(rank, key.dim);
  switch (spec.kind) {
    case net::TopologyKind::kRing:
      return topology_->next_hop(
          rank,
          topology_->peer(rank, key.dim, key.kind == 0 ? (coord + 1) % n : (coord + n - 1) % n));
    case net::TopologyKind::kFullyConnected:
      return topology_->next_hop(rank, topology_->peer(rank, key.dim, (coord + key.kind) % n));
    case net::TopologyKind::kSwitch:
      break;
  }
  return key.kind == 0 ? topology_->switch_uplink(rank, key.dim)
                       : topology_->switch_downlink(rank, key.dim);
}

uint32_t MirrorTraffic::peak(const std::vector<Interval>& intervals) {
  // A message leaving at t does not overlap one arriving at t: ends sort before starts.
  std::vector<std::pair<SimTime, int64_t>> changes;
  changes.reserve(intervals.size() * 2);
  for (const Interval& interval : intervals) {
    changes.emplace_back(interval.start, interval.copies);
    changes.emplace_back(interval.end, -static_cast<int64_t>(interval.copies));
  }
  std::sort(changes.begin(), changes.end());
  int64_t present = 0;
  int64_t most = 0;
  for (const auto& [time, delta] : changes) {
    present += delta;
    most = std::max(most, present);
  }
  return static_cast<uint32_t>(most);
}

std::vector<net::LinkStats> MirrorTraffic::expand() const {
  std::vector<net::LinkStats> links;
  links.reserve(static_cast<size_t>(link_count()));
  for (const auto& [key, traffic] : classes_) {
    const uint32_t most = peak(traffic.intervals);
    for (net::Rank rank = 0; rank < topology_->rank_count(); ++rank) {
      const net::Hop hop = link_of(rank, key);
      const net::LinkInfo info = topology_->link_info(hop.link);
      net::LinkStats stats;
      stats.link = hop.link;
      stats.src = info.src;
      stats.dst = info.dst;
      stats.dimension = info.dimension;
      stats.bytes = traffic.bytes;
      stats.busy = traffic.busy;
      stats.messages = traffic.messages;
      stats.peak_queue = most;
      links.push_back(stats);
    }
  }
  std::sort(links.begin(), links.end(), [](const net::LinkStats& lhs, const net::LinkStats& rhs) {
    return lhs.link < rhs.link;
  });
  return links;
}

void MirrorTraffic::dimension_totals(uint32_t dim, uint64_t& links_used, uint64_t& bytes,
                                     SimTime& busy) const {
  links_used = 0;
  bytes = 0;
  busy = SimTime::zero();
  for (const auto& [key, traffic] : classes_) {
    if (key.dim != dim) continue;
    links_used += topology_->rank_count();
    bytes += traffic.bytes * topology_->rank_count();
    busy += traffic.busy * topology_->rank_count();
  }
}

}  // namespace orrery::sys
