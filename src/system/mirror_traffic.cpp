#include "system/mirror_traffic.h"

#include <algorithm>
#include <tuple>

#include "core/checked.h"

namespace orrery::sys {

void MirrorTraffic::add(ClassKey key, uint32_t copies, uint64_t bytes, SimTime serialization,
                        SimTime start, SimTime end) {
  ClassTraffic& traffic = classes_[key];
  traffic.bytes = saturating_add(traffic.bytes, saturating_mul(copies, bytes));
  traffic.busy += serialization * copies;
  traffic.messages += copies;
  traffic.intervals.push_back({start, end, copies});
}

uint64_t MirrorTraffic::link_count() const {
  uint64_t count = 0;
  for (const auto& [key, traffic] : classes_) count += class_size(key.rank_class);
  for (const PartnerMessage& message : partner_messages_) count += class_size(message.rank_class);
  for (const RouteMessage& message : route_messages_) count += message.pairs->size();
  return count;
}

void MirrorTraffic::record_routes(const RoutePairs* pairs, uint64_t bytes, SimTime start,
                                  SimTime end) {
  route_messages_.push_back({pairs, bytes, start, end});
}

void MirrorTraffic::record_message(uint32_t dim, uint32_t from, uint32_t to, uint64_t bytes,
                                   SimTime start, SimTime end, uint32_t rank_class) {
  const net::Dimension& spec = topology_->dimension(dim);
  const SimTime serialization = spec.bandwidth.serialization_time(bytes);
  const uint32_t n = spec.size;
  const uint32_t offset = (to + n - from) % n;
  switch (spec.kind) {
    case net::TopologyKind::kRing:
      // As the router: clockwise unless anticlockwise is strictly shorter. Each link of the
      // direction carries one copy per hop of the message, from as many senders.
      if (n - offset < offset) {
        add({rank_class, dim, 1}, n - offset, bytes, serialization, start, end);
      } else {
        add({rank_class, dim, 0}, offset, bytes, serialization, start, end);
      }
      return;
    case net::TopologyKind::kFullyConnected:
      add({rank_class, dim, offset}, 1, bytes, serialization, start, end);
      return;
    case net::TopologyKind::kSwitch:
      add({rank_class, dim, 0}, 1, bytes, serialization, start, end);
      add({rank_class, dim, 1}, 1, bytes, serialization, start, end);
      return;
  }
}

void MirrorTraffic::record_switch(uint32_t dim, bool up, uint64_t bytes, SimTime start, SimTime end,
                                  uint32_t rank_class) {
  add({rank_class, dim, up ? 0u : 1u}, 1, bytes,
      topology_->dimension(dim).bandwidth.serialization_time(bytes), start, end);
}

void MirrorTraffic::record_partner_message(uint32_t dim, uint32_t distance, uint64_t bytes,
                                           SimTime start, SimTime end, uint32_t rank_class) {
  partner_messages_.push_back({rank_class, dim, distance, bytes, start, end});
}

std::map<net::LinkId, MirrorTraffic::ClassTraffic> MirrorTraffic::partner_links() const {
  std::map<net::LinkId, ClassTraffic> links;
  // One message's use of every link on the analytical route from `from` to `target`.
  auto walk = [&](net::Rank from, net::Rank target, uint64_t bytes, SimTime serialization,
                  SimTime start, SimTime end) {
    for (net::NodeId at = from; at != target;) {
      const net::Hop hop = topology_->next_hop(at, target);
      ClassTraffic& traffic = links[hop.link];
      traffic.bytes = saturating_add(traffic.bytes, bytes);
      traffic.busy += serialization;
      ++traffic.messages;
      traffic.intervals.push_back({start, end, 1});
      at = hop.next;
    }
  };
  for (const PartnerMessage& message : partner_messages_) {
    const net::Dimension& spec = topology_->dimension(message.dim);
    const SimTime serialization = spec.bandwidth.serialization_time(message.bytes);
    const uint32_t n = spec.size;
    for (uint64_t index = 0; index < class_size(message.rank_class); ++index) {
      const net::Rank rank = member(message.rank_class, index);
      const uint32_t coord = topology_->coordinate(rank, message.dim);
      const bool up = ((coord / message.distance) % 2) == 0;
      const uint32_t target_coord =
          up ? (coord + message.distance) % n : (coord + n - message.distance) % n;
      const net::Rank target = topology_->peer(rank, message.dim, target_coord);
      walk(rank, target, message.bytes, serialization, message.start, message.end);
    }
  }
  // Point-to-point messages, pair by pair, as the analytical backend walks them: within the
  // lowest dimension in which the endpoints differ.
  for (const RouteMessage& message : route_messages_) {
    for (const auto& [src, dst] : *message.pairs) {
      const uint32_t dim = topology_->lowest_differing_dimension(src, dst);
      if (dim == net::kNoDimension) continue;
      const SimTime serialization =
          topology_->dimension(dim).bandwidth.serialization_time(message.bytes);
      const net::Rank target = topology_->peer(src, dim, topology_->coordinate(dst, dim));
      walk(src, target, message.bytes, serialization, message.start, message.end);
    }
  }
  return links;
}

void MirrorTraffic::adopt_representative_links(const std::vector<net::LinkStats>& links) {
  for (const net::LinkStats& link : links) {
    if (link.src != 0 || link.dst >= topology_->rank_count()) continue;
    const uint32_t dim = link.dimension;
    const net::Dimension& spec = topology_->dimension(dim);
    const uint32_t coord = topology_->coordinate(static_cast<net::Rank>(link.dst), dim);
    ClassKey key{0, dim, coord};
    if (spec.kind == net::TopologyKind::kRing) {
      key.kind = coord == 1 ? 0u : 1u;
    } else if (spec.kind == net::TopologyKind::kSwitch) {
      continue;  // a Switch link leads to the switch, not to a rank
    }
    ClassTraffic& traffic = classes_[key];
    traffic.bytes = link.bytes;
    traffic.busy = link.busy;
    traffic.messages = link.messages;
    traffic.intervals.clear();
    traffic.measured_peak = link.peak_queue;
    traffic.measured = true;
  }
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
  // What the analytical backend counts (network/analytical_backend.cpp): at each send, the
  // messages on the link whose delivery is later than now, plus the one sent. So a message leaving
  // at t does not overlap one arriving at t (ends sort before starts), and a message of zero
  // duration (its delay truncated to 0 ns) counts at its instant, once however many are sent then
  // (each send drops the one before). Counted after the instant's other sends: when the backend
  // saw it before a longer message sent in the same instant, the full run's peak is one lower.
  // (time, 0, +copies) at a start and (time, 0, -copies) at an end; (time, 1, 0) for a message
  // of zero duration, looked at once the starts and ends of its instant are counted.
  std::vector<std::tuple<SimTime, int, int64_t>> changes;
  changes.reserve(intervals.size() * 2);
  for (const Interval& interval : intervals) {
    if (interval.end <= interval.start) {
      changes.emplace_back(interval.start, 1, 0);
      continue;
    }
    changes.emplace_back(interval.start, 0, interval.copies);
    changes.emplace_back(interval.end, 0, -static_cast<int64_t>(interval.copies));
  }
  std::sort(changes.begin(), changes.end());
  int64_t present = 0;
  int64_t most = 0;
  for (const auto& [time, instant, delta] : changes) {
    present += delta;
    most = std::max(most, present + instant);
  }
  return static_cast<uint32_t>(most);
}

std::vector<net::LinkStats> MirrorTraffic::expand() const {
  // Every link's traffic: that of its classes (the same on every link of a class, so each class's
  // peak is computed once) plus the partner messages that crossed it.
  std::vector<const ClassTraffic*> sources;
  std::vector<uint32_t> class_peaks;
  for (const auto& [key, traffic] : classes_) {
    sources.push_back(&traffic);
    class_peaks.push_back(traffic.measured ? traffic.measured_peak : peak(traffic.intervals));
  }
  const std::map<net::LinkId, ClassTraffic> partners = partner_links();
  for (const auto& [id, traffic] : partners) {
    sources.push_back(&traffic);
    class_peaks.push_back(0);  // merged below: partner traffic differs from link to link
  }
  // (link, source) pairs, grouped by link.
  std::vector<std::pair<net::LinkId, uint32_t>> uses;
  uses.reserve(static_cast<size_t>(link_count()) + partners.size());
  uint32_t source = 0;
  for (const auto& [key, traffic] : classes_) {
    for (uint64_t index = 0; index < class_size(key.rank_class); ++index) {
      uses.emplace_back(link_of(member(key.rank_class, index), key).link, source);
    }
    ++source;
  }
  for (const auto& [id, traffic] : partners) uses.emplace_back(id, source++);
  std::sort(uses.begin(), uses.end());

  const auto partner_base = static_cast<uint32_t>(classes_.size());
  std::vector<net::LinkStats> out;
  out.reserve(uses.size());
  std::vector<Interval> merged;
  for (size_t begin = 0; begin < uses.size();) {
    size_t end = begin;
    while (end < uses.size() && uses[end].first == uses[begin].first) ++end;
    net::LinkStats stats;
    stats.link = uses[begin].first;
    const net::LinkInfo info = topology_->link_info(stats.link);
    stats.src = info.src;
    stats.dst = info.dst;
    stats.dimension = info.dimension;
    for (size_t idx = begin; idx < end; ++idx) {
      const ClassTraffic& traffic = *sources[uses[idx].second];
      stats.bytes = saturating_add(stats.bytes, traffic.bytes);
      stats.busy += traffic.busy;
      stats.messages += traffic.messages;
    }
    if (end - begin == 1 && uses[begin].second < partner_base) {
      stats.peak_queue = class_peaks[uses[begin].second];
    } else {
      merged.clear();
      for (size_t idx = begin; idx < end; ++idx) {
        const std::vector<Interval>& intervals = sources[uses[idx].second]->intervals;
        merged.insert(merged.end(), intervals.begin(), intervals.end());
      }
      stats.peak_queue = peak(merged);
    }
    out.push_back(stats);
    begin = end;
  }
  return out;
}

void MirrorTraffic::dimension_totals(uint32_t dim, uint64_t& links_used, uint64_t& bytes,
                                     SimTime& busy) const {
  links_used = 0;
  bytes = 0;
  busy = SimTime::zero();
  // Partner messages: every rank sends one, over as many links as the distance takes.
  for (const PartnerMessage& message : partner_messages_) {
    if (message.dim != dim) continue;
    const net::Dimension& spec = topology_->dimension(dim);
    const uint64_t hops = topology_->hops(dim, 0, message.distance % spec.size);
    const uint64_t senders = class_size(message.rank_class);
    bytes = saturating_add(bytes, saturating_mul(saturating_mul(message.bytes, hops), senders));
    busy += spec.bandwidth.serialization_time(message.bytes) * static_cast<int64_t>(hops * senders);
  }
  // (Partner messages alone leave at least one used link per rank; counted so.)
  bool partners = false;
  for (const PartnerMessage& message : partner_messages_) partners = partners || message.dim == dim;
  bool classes = false;
  for (const auto& [key, traffic] : classes_) {
    if (key.dim != dim) continue;
    classes = true;
    const uint64_t senders = class_size(key.rank_class);
    links_used += senders;
    bytes = saturating_add(bytes, saturating_mul(traffic.bytes, senders));
    busy += traffic.busy * static_cast<int64_t>(senders);
  }
  if (partners && !classes) links_used = topology_->rank_count();
}

}  // namespace orrery::sys
