#include "system/mirror_traffic.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <set>
#include <tuple>

#include "core/checked.h"

namespace orrery::sys {

void MirrorTraffic::add(ClassKey key, uint32_t copies, uint64_t bytes, SimTime serialization,
                        SimTime start, SimTime end) {
  ClassTraffic& traffic = classes_[key];
  traffic.bytes = saturating_add(traffic.bytes, saturating_mul(copies, bytes));
  traffic.busy += serialization * copies;
  traffic.messages += copies;
  if (queue_peaks_) traffic.intervals.push_back({start, end, copies});
}

void MirrorTraffic::add_totals(RouteTotals& totals, uint64_t bytes) {
  if (totals.busy.empty()) totals.busy.resize(topology_->dimension_count());
  totals.bytes = saturating_add(totals.bytes, bytes);
  ++totals.messages;
  for (uint32_t dim = 0; dim < totals.busy.size(); ++dim)
    totals.busy[dim] += topology_->dimension(dim).bandwidth.serialization_time(bytes);
}

uint64_t MirrorTraffic::link_count() const {
  uint64_t count = 0;
  for (const auto& [key, traffic] : classes_) count += class_size(key.rank_class);
  for (const PartnerMessage& message : partner_messages_) count += class_size(message.rank_class);
  // Each distinct list of pairs once: its messages cross the same links every time.
  std::set<const RoutePairs*> lists;
  for (const RouteMessage& message : route_messages_) {
    if (lists.insert(message.pairs).second) count += message.pairs->size();
  }
  for (const auto& [pairs, totals] : route_totals_) {
    if (lists.insert(pairs).second) count += pairs->size();
  }
  for (const auto& [key, totals] : partner_totals_) count += class_size(std::get<0>(key));
  return count;
}

void MirrorTraffic::record_routes(const RoutePairs* pairs, uint64_t bytes, SimTime start,
                                  SimTime end) {
  if (queue_peaks_) {
    route_messages_.push_back({pairs, bytes, start, end});
    return;
  }
  // Consecutive messages mostly share a route (a collective's steps, a block of sends).
  if (pairs != last_pairs_) {
    last_pairs_ = pairs;
    last_totals_ = &route_totals_[pairs];
  }
  add_totals(*last_totals_, bytes);
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
  if (queue_peaks_) {
    partner_messages_.push_back({rank_class, dim, distance, bytes, start, end});
    return;
  }
  add_totals(partner_totals_[{rank_class, dim, distance}], bytes);
}

namespace {

// One link's queue as the analytical backend counts it (MirrorTraffic::peak), fed message by
// message in order of start: at each start the messages whose delivery is later, plus the one
// sent; a message of zero duration counts at its instant, once, after the instant's other starts.
// Holds only the messages in flight, not every message the link ever carried.
class RunningQueue {
 public:
  void arrive(SimTime start, SimTime end, uint32_t copies) {
    settle(start);
    while (!flight_.empty() && flight_.front().first <= start) {
      std::pop_heap(flight_.begin(), flight_.end(), std::greater<>());
      present_ -= flight_.back().second;
      flight_.pop_back();
    }
    if (end <= start) {
      instant_ = true;
      instant_at_ = start;
      return;
    }
    flight_.emplace_back(end, copies);
    std::push_heap(flight_.begin(), flight_.end(), std::greater<>());
    present_ += copies;
    peak_ = std::max(peak_, present_);
  }
  uint32_t finish() {
    settle(SimTime::max());
    return static_cast<uint32_t>(peak_);
  }

 private:
  // A zero-duration message's instant is over once a later start arrives.
  void settle(SimTime now) {
    if (instant_ && instant_at_ < now) {
      peak_ = std::max(peak_, present_ + 1);
      instant_ = false;
    }
  }
  std::vector<std::pair<SimTime, uint32_t>> flight_;  // (end, copies), a min-heap by end
  int64_t present_ = 0;
  int64_t peak_ = 0;
  bool instant_ = false;
  SimTime instant_at_;
};

}  // namespace

std::map<net::LinkId, MirrorTraffic::PartnerLink> MirrorTraffic::partner_links(
    const std::vector<std::pair<net::LinkId, uint32_t>>& class_uses,
    const std::vector<const std::vector<Interval>*>& class_intervals) const {
  // Partner and point-to-point messages in order of start (recorded as sent, so already nearly
  // in order; sorted stably to be sure).
  struct Message {
    SimTime start;
    bool route;
    uint32_t index;
  };
  std::vector<Message> order;
  order.reserve(partner_messages_.size() + route_messages_.size());
  for (uint32_t idx = 0; idx < partner_messages_.size(); ++idx) {
    order.push_back({partner_messages_[idx].start, false, idx});
  }
  for (uint32_t idx = 0; idx < route_messages_.size(); ++idx) {
    order.push_back({route_messages_[idx].start, true, idx});
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const Message& lhs, const Message& rhs) { return lhs.start < rhs.start; });

  // Every message follows a route: the links one message crosses, each with the dimension whose
  // bandwidth times it (a link once per crossing). A point-to-point message's route is its list of
  // pairs (found once per distinct list: the sends of one block of a class all stand for the same
  // pairs), each pair as the analytical backend walks it, within the lowest dimension in which
  // the endpoints differ; a partner message's is every member's step at its distance.
  using Hops = std::vector<std::pair<net::LinkId, uint32_t>>;
  std::vector<Hops> routes;
  std::map<RoutePairs, uint32_t> by_content;
  std::map<const RoutePairs*, uint32_t> by_pointer;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t> by_partner;
  // The links from `from` to coordinate `to` of its group in `dim`, as next_hop walks them.
  auto walk = [&](net::Rank from, uint32_t dim, uint32_t to, Hops& hops) {
    topology_->route_in_dimension(from, dim, to,
                                  [&](net::LinkId link) { hops.emplace_back(link, dim); });
  };
  auto pairs_route = [&](const RoutePairs* pairs) {
    auto [at, fresh] = by_pointer.try_emplace(pairs, 0);
    if (!fresh) return at->second;
    auto [content, added] = by_content.try_emplace(*pairs, static_cast<uint32_t>(routes.size()));
    if (added) {
      Hops hops;
      for (const auto& [src, dst] : *pairs) {
        const uint32_t dim = topology_->charged_dimension(src, dst);
        if (dim == net::kNoDimension) continue;
        walk(src, dim, topology_->coordinate(dst, dim), hops);
      }
      routes.push_back(std::move(hops));
    }
    at->second = content->second;
    return content->second;
  };
  auto partner_route = [&](const PartnerMessage& message) {
    auto [at, fresh] = by_partner.try_emplace({message.rank_class, message.dim, message.distance},
                                              static_cast<uint32_t>(routes.size()));
    if (!fresh) return at->second;
    Hops hops;
    const uint32_t n = topology_->dimension(message.dim).size;
    for (uint64_t index = 0; index < class_size(message.rank_class); ++index) {
      const net::Rank rank = member(message.rank_class, index);
      const uint32_t coord = topology_->coordinate(rank, message.dim);
      const bool up = ((coord / message.distance) % 2) == 0;
      walk(rank, message.dim,
           up ? (coord + message.distance) % n : (coord + n - message.distance) % n, hops);
    }
    routes.push_back(std::move(hops));
    return at->second;
  };
  std::vector<uint32_t> route_of(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    route_of[k] = order[k].route ? pairs_route(route_messages_[order[k].index].pairs)
                                 : partner_route(partner_messages_[order[k].index]);
  }

  // Links crossed by the same routes as often, in the same dimension, and shared with the same
  // classes see the same messages at the same times: one sweep per such group stands for all its
  // links. (A ring of pairs over thousands of members crosses thousands of links alike; sweeping
  // each was most of a class run of such a plan.)
  std::map<net::LinkId, std::vector<uint64_t>> signature;  // per link: route << 32 | dim, sorted
  for (uint32_t route = 0; route < routes.size(); ++route) {
    for (const auto& [id, dim] : routes[route]) {
      signature[id].push_back(uint64_t{route} << 32 | dim);
    }
  }
  struct Sweep {
    PartnerLink totals;
    RunningQueue queue;
    std::vector<std::pair<const std::vector<Interval>*, size_t>> classes;
    // Applies every class interval starting at or before `until`, in order of start.
    void advance(SimTime until) {
      while (true) {
        std::pair<const std::vector<Interval>*, size_t>* next = nullptr;
        for (auto& cursor : classes) {
          if (cursor.second < cursor.first->size() &&
              (*cursor.first)[cursor.second].start <= until &&
              (next == nullptr ||
               (*cursor.first)[cursor.second].start < (*next->first)[next->second].start)) {
            next = &cursor;
          }
        }
        if (next == nullptr) return;
        const Interval& interval = (*next->first)[next->second++];
        queue.arrive(interval.start, interval.end, interval.copies);
      }
    }
  };
  std::vector<Sweep> groups;
  std::map<std::vector<uint64_t>, uint32_t> group_of_signature;
  std::vector<std::pair<net::LinkId, uint32_t>> link_groups;  // ordered by link id
  // Per route, the groups it crosses: a group's first link's crossings, which every link of the
  // group has as often.
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> group_hops(routes.size());
  constexpr uint64_t kClassMark = uint64_t{1} << 63;
  for (auto& [id, crossings] : signature) {
    std::sort(crossings.begin(), crossings.end());
    auto first = std::lower_bound(class_uses.begin(), class_uses.end(), std::make_pair(id, 0u));
    const auto uses_begin = first;
    for (; first != class_uses.end() && first->first == id; ++first) {
      crossings.push_back(kClassMark | first->second);
    }
    auto [at, fresh] =
        group_of_signature.try_emplace(crossings, static_cast<uint32_t>(groups.size()));
    if (fresh) {
      Sweep& sweep = groups.emplace_back();
      for (auto use = uses_begin; use != first; ++use) {
        sweep.classes.emplace_back(class_intervals[use->second], 0);
      }
      for (const uint64_t crossing : crossings) {
        if ((crossing & kClassMark) != 0) continue;
        group_hops[crossing >> 32].emplace_back(at->second, static_cast<uint32_t>(crossing));
      }
    }
    link_groups.emplace_back(id, at->second);
  }

  const uint32_t dims = topology_->dimension_count();
  std::vector<SimTime> per_dim(dims);  // a message's serialization in each dimension
  for (size_t k = 0; k < order.size(); ++k) {
    const Message& entry = order[k];
    const uint64_t bytes =
        entry.route ? route_messages_[entry.index].bytes : partner_messages_[entry.index].bytes;
    const SimTime end =
        entry.route ? route_messages_[entry.index].end : partner_messages_[entry.index].end;
    for (uint32_t dim = 0; dim < dims; ++dim) {
      per_dim[dim] = topology_->dimension(dim).bandwidth.serialization_time(bytes);
    }
    for (const auto& [group, dim] : group_hops[route_of[k]]) {
      Sweep& sweep = groups[group];
      sweep.totals.bytes = saturating_add(sweep.totals.bytes, bytes);
      sweep.totals.busy += per_dim[dim];
      ++sweep.totals.messages;
      sweep.advance(entry.start);
      sweep.queue.arrive(entry.start, end, 1);
    }
  }
  for (Sweep& sweep : groups) {
    sweep.advance(SimTime::max());
    sweep.totals.peak_queue = sweep.queue.finish();
  }
  std::map<net::LinkId, PartnerLink> out;
  for (const auto& [id, group] : link_groups) out.emplace_hint(out.end(), id, groups[group].totals);
  return out;
}

std::map<net::LinkId, MirrorTraffic::PartnerLink> MirrorTraffic::route_totals_links() const {
  // Each route's links as partner_links walks them (a link once per crossing), charged its
  // messages' totals in the crossing's dimension: the same sums as message by message.
  std::map<net::LinkId, PartnerLink> out;
  auto charge = [&](const RouteTotals& totals, net::Rank from, uint32_t dim, uint32_t to) {
    topology_->route_in_dimension(from, dim, to, [&](net::LinkId link) {
      PartnerLink& stats = out[link];
      stats.bytes = saturating_add(stats.bytes, totals.bytes);
      stats.busy += totals.busy[dim];
      stats.messages += totals.messages;
    });
  };
  for (const auto& [pairs, totals] : route_totals_) {
    for (const auto& [src, dst] : *pairs) {
      const uint32_t dim = topology_->charged_dimension(src, dst);
      if (dim != net::kNoDimension) charge(totals, src, dim, topology_->coordinate(dst, dim));
    }
  }
  for (const auto& [key, totals] : partner_totals_) {
    const auto [rank_class, dim, distance] = key;
    const uint32_t n = topology_->dimension(dim).size;
    for (uint64_t index = 0; index < class_size(rank_class); ++index) {
      const net::Rank rank = member(rank_class, index);
      const uint32_t coord = topology_->coordinate(rank, dim);
      const bool up = ((coord / distance) % 2) == 0;
      charge(totals, rank, dim, up ? (coord + distance) % n : (coord + n - distance) % n);
    }
  }
  return out;
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
  // Swept in order of start with a heap of the ends in flight (a sort of every start and end took
  // a twentieth of a class run): at each start time, the ends up to it leave first, then the
  // instant's messages join, and the instant counts once more if a message of zero duration was
  // sent then.
  std::vector<uint32_t> order(intervals.size());
  for (uint32_t k = 0; k < order.size(); ++k) order[k] = k;
  const auto by_start = [&](uint32_t lhs, uint32_t rhs) {
    return intervals[lhs].start < intervals[rhs].start;
  };
  if (!std::is_sorted(order.begin(), order.end(), by_start)) {
    std::sort(order.begin(), order.end(), by_start);
  }
  using End = std::pair<SimTime, int64_t>;  // when, copies
  std::priority_queue<End, std::vector<End>, std::greater<>> ends;
  int64_t present = 0;
  int64_t most = 0;
  for (size_t k = 0; k < order.size();) {
    const SimTime now = intervals[order[k]].start;
    while (!ends.empty() && ends.top().first <= now) {
      present -= ends.top().second;
      ends.pop();
    }
    bool instant = false;
    for (; k < order.size() && intervals[order[k]].start == now; ++k) {
      const Interval& interval = intervals[order[k]];
      if (interval.end <= interval.start) {
        instant = true;
        continue;
      }
      present += interval.copies;
      ends.emplace(interval.end, interval.copies);
    }
    most = std::max(most, present + (instant ? 1 : 0));
  }
  return static_cast<uint32_t>(most);
}

std::vector<net::LinkStats> MirrorTraffic::expand() const {
  // Every link's traffic: that of its classes (the same on every link of a class, so each class's
  // peak is computed once) plus the partner and point-to-point messages that crossed it, whose
  // queue is counted together with the classes' (partner_links).
  std::vector<const ClassTraffic*> sources;
  std::vector<uint32_t> class_peaks;
  // Each class's intervals in order of start (recorded as sent: copied only when not).
  std::vector<std::vector<Interval>> resorted;
  std::vector<const std::vector<Interval>*> ordered;
  for (const auto& [key, traffic] : classes_) {
    sources.push_back(&traffic);
    class_peaks.push_back(traffic.measured ? traffic.measured_peak
                          : queue_peaks_   ? peak(traffic.intervals)
                                           : 0);
    const auto by_start = [](const Interval& lhs, const Interval& rhs) {
      return lhs.start < rhs.start;
    };
    if (std::is_sorted(traffic.intervals.begin(), traffic.intervals.end(), by_start)) {
      ordered.push_back(&traffic.intervals);
    } else {
      resorted.emplace_back(traffic.intervals);
      std::stable_sort(resorted.back().begin(), resorted.back().end(), by_start);
      ordered.push_back(nullptr);  // set below, once `resorted` stops growing
    }
  }
  for (size_t idx = 0, next = 0; idx < ordered.size(); ++idx) {
    if (ordered[idx] == nullptr) ordered[idx] = &resorted[next++];
  }
  // (link, class) pairs, grouped by link.
  std::vector<std::pair<net::LinkId, uint32_t>> uses;
  uint64_t class_links = 0;
  for (const auto& [key, traffic] : classes_) class_links += class_size(key.rank_class);
  uses.reserve(static_cast<size_t>(class_links));
  uint32_t source = 0;
  for (const auto& [key, traffic] : classes_) {
    for (uint64_t index = 0; index < class_size(key.rank_class); ++index) {
      uses.emplace_back(link_of(member(key.rank_class, index), key).link, source);
    }
    ++source;
  }
  std::sort(uses.begin(), uses.end());
  const std::map<net::LinkId, PartnerLink> partners =
      queue_peaks_ ? partner_links(uses, ordered) : route_totals_links();

  std::vector<net::LinkStats> out;
  out.reserve(uses.size() + partners.size());
  std::vector<Interval> merged;
  auto partner = partners.begin();
  for (size_t begin = 0; begin < uses.size() || partner != partners.end();) {
    net::LinkStats stats;
    if (begin < uses.size() && (partner == partners.end() || uses[begin].first <= partner->first)) {
      stats.link = uses[begin].first;
    } else {
      stats.link = partner->first;
    }
    size_t end = begin;
    while (end < uses.size() && uses[end].first == stats.link) ++end;
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
    if (partner != partners.end() && partner->first == stats.link) {
      stats.bytes = saturating_add(stats.bytes, partner->second.bytes);
      stats.busy += partner->second.busy;
      stats.messages += partner->second.messages;
      stats.peak_queue = partner->second.peak_queue;  // the classes' copies included
      ++partner;
    } else if (end - begin == 1) {
      stats.peak_queue = class_peaks[uses[begin].second];
    } else if (queue_peaks_) {
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
  bool partners = false;
  for (const auto& [key, totals] : partner_totals_) {
    const auto [rank_class, message_dim, distance] = key;
    if (message_dim != dim) continue;
    partners = true;
    const uint64_t hops = topology_->hops(dim, 0, distance % topology_->dimension(dim).size);
    const uint64_t senders = class_size(rank_class);
    bytes = saturating_add(bytes, saturating_mul(saturating_mul(totals.bytes, hops), senders));
    busy += totals.busy[dim] * static_cast<int64_t>(hops * senders);
  }
  // (Partner messages alone leave at least one used link per rank; counted so.)
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
