#include "network/analytical_backend.h"

#include <algorithm>
#include <cassert>

#include "core/checked.h"

namespace orrery::net {

namespace {

// hops x latency + serialization within dimension `dim`, from coordinate `from` to `to`.
SimTime delay_in(const Topology& topology, uint32_t dim, uint32_t from, uint32_t to,
                 SimTime serialization) {
  return topology.dimension(dim).latency * topology.hops(dim, from, to) + serialization;
}

}  // namespace

SimTime analytical_delay(const Topology& topology, Rank src, Rank dst, uint64_t bytes) {
  const uint32_t dim = topology.charged_dimension(src, dst);
  if (dim == kNoDimension) return SimTime::zero();
  return delay_in(topology, dim, topology.coordinate(src, dim), topology.coordinate(dst, dim),
                  topology.dimension(dim).bandwidth.serialization_time(bytes));
}

AnalyticalBackend::AnalyticalBackend(EventEngine& engine, Topology topology, TimeRounding rounding,
                                     std::shared_ptr<const DimensionFailures> failures)
    : engine_(engine),
      topology_(std::move(topology)),
      rounding_(rounding),
      id_(engine.register_handler(*this)),
      failures_(std::move(failures)) {}

AnalyticalBackend::~AnalyticalBackend() { engine_.unregister_handler(id_); }

void AnalyticalBackend::set_listener(DeliveryListener& listener) {
  assert(listener_ == nullptr && "analytical backend: listener set twice");
  listener_ = &listener;
}

void AnalyticalBackend::occupy(uint32_t slot, uint64_t bytes, SimTime serialization,
                               SimTime delivery) {
  LinkCounters& counters = links_.counters(slot);
  counters.bytes = saturating_add(counters.bytes, bytes);
  counters.busy += serialization;
  ++counters.messages;
  if (slot >= on_link_.size()) on_link_.resize(slot + 1);
  auto& present = on_link_[slot];
  const SimTime now = engine_.now();
  while (!present.empty() && present.top() <= now) present.pop();
  present.push(delivery);
  counters.present = static_cast<uint32_t>(present.size());
  counters.peak = std::max(counters.peak, counters.present);
}

Bandwidth AnalyticalBackend::degraded(uint32_t dim, std::span<const LinkId> links,
                                      const DimensionFailure*& cut, LinkId& cut_link) const {
  const SimTime now = engine_.now();
  double left = 1.0;
  for (LinkId link : links) {
    if (const DimensionFailure* failure = failures_->cut_by(link, now)) {
      cut = failure;
      cut_link = link;
      return Bandwidth::from_nano_gbps(0);
    }
    left = std::min(left, failures_->surviving(link, now));
  }
  const Bandwidth bandwidth = topology_.dimension(dim).bandwidth;
  return left == 1.0 ? bandwidth : bandwidth.scaled(left);
}

uint32_t AnalyticalBackend::take_pending() {
  uint32_t index = 0;
  if (free_pending_.empty()) {
    index = static_cast<uint32_t>(pending_.size());
    pending_.emplace_back();
  } else {
    index = free_pending_.back();
    free_pending_.pop_back();
  }
  ++in_flight_;
  return index;
}

void AnalyticalBackend::send_switch(Rank rank, uint32_t dim, bool up, uint64_t bytes,
                                    uint64_t token) {
  assert(listener_ != nullptr && "analytical backend: send before set_listener");
  const Hop hop = up ? topology_.switch_uplink(rank, dim) : topology_.switch_downlink(rank, dim);
  const uint32_t index = take_pending();
  pending_[index] = Pending{token, rank, rank};
  const Dimension& spec = topology_.dimension(dim);
  Bandwidth bandwidth = spec.bandwidth;
  if (failures_ != nullptr) {
    const DimensionFailure* cut = nullptr;
    LinkId cut_link = 0;
    bandwidth = degraded(dim, std::span<const LinkId>(&hop.link, 1), cut, cut_link);
    if (cut != nullptr) {
      undelivered_.push_back(Undelivered{rank, rank, bytes, cut_link, cut});
      return;  // held: in flight for ever
    }
  }
  const SimTime serialization = bandwidth.serialization_time(bytes);
  SimTime delay = spec.latency + serialization;
  if (rounding_ == TimeRounding::kAstraSim) delay = truncate_to_ns(delay);
  occupy(links_.slot(hop.link), bytes, serialization, engine_.now() + delay);
  (void)engine_.schedule_after(delay, id_, 0, index);
}

void AnalyticalBackend::send(Rank src, Rank dst, uint64_t bytes, uint64_t token) {
  assert(listener_ != nullptr && "analytical backend: send before set_listener");
  assert(src < topology_.rank_count() && dst < topology_.rank_count());
  const uint32_t index = take_pending();
  pending_[index] = Pending{token, src, dst};

  // The delay and the route from one look at the coordinates (analytical_delay's figure).
  SimTime delay = SimTime::zero();
  const uint32_t dim = topology_.charged_dimension(src, dst);
  if (dim != kNoDimension) {
    const uint32_t to = topology_.coordinate(dst, dim);
    Bandwidth bandwidth = topology_.dimension(dim).bandwidth;
    if (failures_ != nullptr) {
      // A failure may slow the route or cut it.
      route_.clear();
      topology_.route_in_dimension(src, dim, to, [&](LinkId link) { route_.push_back(link); });
      const DimensionFailure* cut = nullptr;
      LinkId cut_link = 0;
      bandwidth = degraded(dim, route_, cut, cut_link);
      if (cut != nullptr) {
        undelivered_.push_back(Undelivered{src, dst, bytes, cut_link, cut});
        return;  // held: in flight for ever
      }
    }
    const SimTime serialization = bandwidth.serialization_time(bytes);
    delay = delay_in(topology_, dim, topology_.coordinate(src, dim), to, serialization);
    if (rounding_ == TimeRounding::kAstraSim) delay = truncate_to_ns(delay);
    const SimTime delivery = engine_.now() + delay;
    topology_.route_in_dimension(src, dim, to, [&](LinkId link) {
      occupy(links_.slot(link), bytes, serialization, delivery);
    });
  }
  (void)engine_.schedule_after(delay, id_, 0, index);
}

void AnalyticalBackend::handle_event(const Event& event) {
  const auto index = static_cast<uint32_t>(event.arg);
  const Pending message = pending_[index];
  free_pending_.push_back(index);
  --in_flight_;
  listener_->on_delivered(message.token);
}

size_t AnalyticalBackend::memory_bytes() const {
  size_t queued = 0;
  for (const auto& present : on_link_) queued += present.size() * sizeof(SimTime);
  return sizeof(*this) + links_.memory_bytes() + pending_.capacity() * sizeof(Pending) +
         free_pending_.capacity() * sizeof(uint32_t) + on_link_.capacity() * sizeof(on_link_[0]) +
         queued;
}

}  // namespace orrery::net
