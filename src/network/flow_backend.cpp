#include "network/flow_backend.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace orrery::net {

namespace {
// Bytes per picosecond of a bandwidth: GB/s x 2^30 bytes / 10^12 ps; nano-GB/s x 2^30 / 10^21.
double bytes_per_ps(Bandwidth bandwidth) {
  return static_cast<double>(bandwidth.nano_gbps()) * (1073741824.0 / 1e21);
}
}  // namespace

std::vector<LinkStats> FabricLinks::report() const {
  std::vector<LinkStats> out;
  out.reserve(table_.size());
  for (uint32_t slot = 0; slot < table_.size(); ++slot) {
    const LinkCounters& c = table_.counters(slot);
    const LinkInfo info = fabric_.link_info(table_.link(slot));
    out.push_back({table_.link(slot), info.src, info.dst, info.dimension, c.bytes, c.busy, c.peak,
                   c.messages});
  }
  std::sort(out.begin(), out.end(),
            [](const LinkStats& a, const LinkStats& b) { return a.link < b.link; });
  return out;
}

SimTime path_delay(const Fabric& fabric, const Path& path, uint64_t bytes) {
  SimTime latency;
  Bandwidth slowest;
  for (size_t idx = 0; idx < path.size(); ++idx) {
    latency += fabric.link_latency(path[idx]);
    const Bandwidth bw = fabric.link_bandwidth(path[idx]);
    if (idx == 0 || bw < slowest) slowest = bw;
  }
  if (path.empty()) return latency;
  return latency + slowest.serialization_time(bytes);
}

// ---------------------------------------------------------------------------------------------
// FlowBackend

FlowBackend::FlowBackend(EventEngine& engine, std::shared_ptr<const Fabric> fabric,
                         Topology logical)
    : engine_(engine),
      fabric_(std::move(fabric)),
      logical_(std::move(logical)),
      id_(engine.register_handler(*this)),
      links_(*fabric_) {}

FlowBackend::~FlowBackend() { engine_.unregister_handler(id_); }

void FlowBackend::set_listener(DeliveryListener& listener) {
  assert(listener_ == nullptr && "flow backend: listener set twice");
  listener_ = &listener;
}

uint32_t FlowBackend::take_flow() {
  uint32_t index = 0;
  if (free_flows_.empty()) {
    index = static_cast<uint32_t>(flows_.size());
    flows_.emplace_back();
  } else {
    index = free_flows_.back();
    free_flows_.pop_back();
  }
  Flow& flow = flows_[index];
  flow.slots.clear();  // keeps its capacity
  flow.rate = 0;
  flow.frozen = false;
  ++in_flight_;
  return index;
}

void FlowBackend::send(Rank src, Rank dst, uint64_t bytes, uint64_t token) {
  assert(listener_ != nullptr && "flow backend: send before set_listener");
  assert(src < fabric_->npu_count() && dst < fabric_->npu_count());
  path_.clear();
  if (src != dst) fabric_->route(src, dst, sequence_++, path_);
  start(take_flow(), path_, bytes, token);
}

void FlowBackend::send_switch(Rank rank, uint32_t dim, bool up, uint64_t bytes, uint64_t token) {
  assert(listener_ != nullptr && "flow backend: send before set_listener");
  path_.clear();
  path_.push_back(fabric_->edge_link(rank, dim, up));
  start(take_flow(), path_, bytes, token);
}

void FlowBackend::start(uint32_t index, const Path& path, uint64_t bytes, uint64_t token) {
  Flow& flow = flows_[index];
  flow.token = token;
  flow.bytes = bytes;
  flow.remaining = static_cast<double>(bytes);
  flow.latency = SimTime::zero();
  for (LinkId link : path) {
    const uint32_t slot = links_.slot(link);
    if (slot == slot_state_.size()) {
      slot_state_.emplace_back();
      slot_state_.back().capacity = bytes_per_ps(fabric_->link_bandwidth(link));
    }
    flow.latency += fabric_->link_latency(link);
    LinkCounters& counters = links_.counters(slot);
    counters.bytes += bytes;
    counters.busy += fabric_->link_bandwidth(link).serialization_time(bytes);
    ++counters.messages;
    if (bytes > 0) {
      ++counters.present;
      counters.peak = std::max(counters.peak, counters.present);
    }
    flow.slots.push_back(slot);
  }
  if (bytes == 0 || path.empty()) {
    // Nothing to share: delivered after the latency of its path (now, for a message to oneself).
    (void)engine_.schedule_after(flow.latency, id_, kDeliver, index);
    return;
  }
  flow.active_index = static_cast<uint32_t>(active_.size());
  active_.push_back(index);
  dirty_ = true;
  if (!recompute_pending_) {
    recompute_pending_ = true;
    (void)engine_.schedule_after(SimTime::zero(), id_, kRecompute, 0);
  }
}

void FlowBackend::advance() {
  const SimTime now = engine_.now();
  if (now == last_) return;
  const auto elapsed = static_cast<double>((now - last_).ps());
  for (uint32_t index : active_) {
    Flow& flow = flows_[index];
    flow.remaining = std::max(0.0, flow.remaining - flow.rate * elapsed);
  }
  last_ = now;
}

void FlowBackend::recompute() {
  ++recomputations_;
  dirty_ = false;
  // Flows per busy link, as compressed lists.
  busy_slots_.clear();
  for (uint32_t index : active_) {
    Flow& flow = flows_[index];
    flow.frozen = false;
    for (uint32_t slot : flow.slots) {
      if (slot_state_[slot].unfrozen++ == 0) busy_slots_.push_back(slot);
    }
  }
  // Busy links in slot order, so ties break the same way whatever order flows arrived in: sorted
  // when few, else by a scan of the used links (cheaper than sorting most of them).
  if (busy_slots_.size() * 16 < slot_state_.size()) {
    std::sort(busy_slots_.begin(), busy_slots_.end());
  } else {
    busy_slots_.clear();
    for (uint32_t slot = 0; slot < slot_state_.size(); ++slot) {
      if (slot_state_[slot].unfrozen > 0) busy_slots_.push_back(slot);
    }
  }
  uint32_t offset = 0;
  for (uint32_t slot : busy_slots_) {
    SlotState& state = slot_state_[slot];
    state.list_begin = offset;
    state.flows = 0;
    state.residual = state.capacity;
    offset += state.unfrozen;
  }
  list_.resize(offset);
  for (uint32_t index : active_) {
    for (uint32_t slot : flows_[index].slots) {
      SlotState& state = slot_state_[slot];
      list_[state.list_begin + state.flows++] = index;
    }
  }
  // Progressive filling with a lazy min-heap of (fair share, slot).
  heap_.clear();
  for (uint32_t slot : busy_slots_) {
    const SlotState& state = slot_state_[slot];
    heap_.emplace_back(state.residual / state.unfrozen, slot);
  }
  auto later = [](const std::pair<double, uint32_t>& a, const std::pair<double, uint32_t>& b) {
    return a > b;
  };
  std::make_heap(heap_.begin(), heap_.end(), later);
  // A link's fair share only rises as flows elsewhere freeze (they take at most the current
  // level, which is at most its share), so heap keys are lower bounds: a popped link whose share
  // has risen goes back with its new share; one whose share is still its key is the bottleneck.
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const auto [key, slot] = heap_.back();
    heap_.pop_back();
    SlotState& state = slot_state_[slot];
    if (state.unfrozen == 0) continue;
    const double share = std::max(0.0, state.residual) / state.unfrozen;
    if (share > key) {
      heap_.emplace_back(share, slot);
      std::push_heap(heap_.begin(), heap_.end(), later);
      continue;
    }
    for (uint32_t idx = state.list_begin; idx < state.list_begin + state.flows; ++idx) {
      Flow& flow = flows_[list_[idx]];
      if (flow.frozen) continue;
      flow.frozen = true;
      flow.rate = share;
      for (uint32_t other : flow.slots) {
        SlotState& o = slot_state_[other];
        o.residual -= share;
        --o.unfrozen;
      }
    }
  }
  schedule_completion();
}

void FlowBackend::schedule_completion() {
  ++generation_;
  if (active_.empty()) return;
  const int64_t now = engine_.now().ps();
  int64_t first = INT64_MAX;
  for (uint32_t index : active_) {
    Flow& flow = flows_[index];
    const double time = flow.rate > 0 ? flow.remaining / flow.rate : 1e18;
    flow.finish_ps = now + static_cast<int64_t>(std::llround(std::min(time, 1e18)));
    first = std::min(first, flow.finish_ps);
  }
  (void)engine_.schedule_at(SimTime::from_ps(first), id_, kComplete, generation_);
}

void FlowBackend::handle_event(const Event& event) {
  switch (event.kind) {
    case kRecompute:
      recompute_pending_ = false;
      if (!dirty_) return;
      advance();
      recompute();
      return;
    case kComplete: {
      if (event.arg != generation_) return;  // rates changed since it was scheduled
      advance();
      const int64_t now = engine_.now().ps();
      // Departures, in the order flows became active (swap-removal keeps it deterministic).
      for (size_t pos = 0; pos < active_.size();) {
        Flow& flow = flows_[active_[pos]];
        if (flow.finish_ps > now) {
          ++pos;
          continue;
        }
        const uint32_t index = active_[pos];
        for (uint32_t slot : flow.slots) {
          --links_.counters(slot).present;
          slot_state_[slot].unfrozen = 0;
        }
        active_[pos] = active_.back();
        flows_[active_[pos]].active_index = static_cast<uint32_t>(pos);
        active_.pop_back();
        flow.remaining = 0;
        flow.rate = 0;
        (void)engine_.schedule_after(flow.latency, id_, kDeliver, index);
      }
      for (uint32_t index : active_) {
        for (uint32_t slot : flows_[index].slots) slot_state_[slot].unfrozen = 0;
      }
      recompute();
      return;
    }
    case kDeliver: {
      const auto index = static_cast<uint32_t>(event.arg);
      const uint64_t token = flows_[index].token;
      free_flows_.push_back(index);
      --in_flight_;
      listener_->on_delivered(token);
      return;
    }
    default:
      assert(false && "flow backend: unknown event kind");
  }
}

double FlowBackend::rate_of(uint64_t token) const {
  for (uint32_t index : active_) {
    if (flows_[index].token == token) return flows_[index].rate * 1e12;
  }
  return 0;
}

size_t FlowBackend::memory_bytes() const {
  size_t bytes = sizeof(*this) + links_.memory_bytes() +
                 slot_state_.capacity() * sizeof(SlotState) + flows_.capacity() * sizeof(Flow) +
                 free_flows_.capacity() * sizeof(uint32_t) + active_.capacity() * sizeof(uint32_t) +
                 list_.capacity() * sizeof(uint32_t) + busy_slots_.capacity() * sizeof(uint32_t) +
                 heap_.capacity() * sizeof(std::pair<double, uint32_t>);
  for (const Flow& flow : flows_) bytes += flow.slots.capacity() * sizeof(uint32_t);
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// GraphAnalyticalBackend

GraphAnalyticalBackend::GraphAnalyticalBackend(EventEngine& engine,
                                               std::shared_ptr<const Fabric> fabric,
                                               Topology logical)
    : engine_(engine),
      fabric_(std::move(fabric)),
      logical_(std::move(logical)),
      id_(engine.register_handler(*this)),
      links_(*fabric_) {}

GraphAnalyticalBackend::~GraphAnalyticalBackend() { engine_.unregister_handler(id_); }

void GraphAnalyticalBackend::set_listener(DeliveryListener& listener) {
  assert(listener_ == nullptr && "analytical backend: listener set twice");
  listener_ = &listener;
}

void GraphAnalyticalBackend::send(Rank src, Rank dst, uint64_t bytes, uint64_t token) {
  assert(listener_ != nullptr && src < fabric_->npu_count() && dst < fabric_->npu_count());
  path_.clear();
  if (src != dst) fabric_->route(src, dst, sequence_++, path_);
  deliver_over(path_, bytes, token);
}

void GraphAnalyticalBackend::send_switch(Rank rank, uint32_t dim, bool up, uint64_t bytes,
                                         uint64_t token) {
  path_.clear();
  path_.push_back(fabric_->edge_link(rank, dim, up));
  deliver_over(path_, bytes, token);
}

void GraphAnalyticalBackend::deliver_over(const Path& path, uint64_t bytes, uint64_t token) {
  const SimTime now = engine_.now();
  const SimTime delivery = now + path_delay(*fabric_, path, bytes);
  for (LinkId link : path) {
    const uint32_t slot = links_.slot(link);
    if (slot == on_link_.size()) on_link_.emplace_back();
    LinkCounters& counters = links_.counters(slot);
    counters.bytes += bytes;
    counters.busy += fabric_->link_bandwidth(link).serialization_time(bytes);
    ++counters.messages;
    auto& present = on_link_[slot];
    while (!present.empty() && present.top() <= now) present.pop();
    present.push(delivery);
    counters.peak = std::max(counters.peak, static_cast<uint32_t>(present.size()));
  }
  uint32_t index = 0;
  if (free_tokens_.empty()) {
    index = static_cast<uint32_t>(tokens_.size());
    tokens_.push_back(token);
  } else {
    index = free_tokens_.back();
    free_tokens_.pop_back();
    tokens_[index] = token;
  }
  ++in_flight_;
  (void)engine_.schedule_at(delivery, id_, 0, index);
}

void GraphAnalyticalBackend::handle_event(const Event& event) {
  const auto index = static_cast<uint32_t>(event.arg);
  const uint64_t token = tokens_[index];
  free_tokens_.push_back(index);
  --in_flight_;
  listener_->on_delivered(token);
}

size_t GraphAnalyticalBackend::memory_bytes() const {
  size_t bytes = sizeof(*this) + links_.memory_bytes() + tokens_.capacity() * sizeof(uint64_t) +
                 free_tokens_.capacity() * sizeof(uint32_t);
  for (const auto& queue : on_link_) bytes += queue.size() * sizeof(SimTime);
  return bytes;
}

Expected<std::unique_ptr<NetworkBackend>> make_fabric_backend(std::string_view name,
                                                              EventEngine& engine,
                                                              std::shared_ptr<const Fabric> fabric,
                                                              const Topology& logical) {
  if (name == "flow") {
    return std::unique_ptr<NetworkBackend>(
        std::make_unique<FlowBackend>(engine, std::move(fabric), logical));
  }
  if (name == "analytical") {
    return std::unique_ptr<NetworkBackend>(
        std::make_unique<GraphAnalyticalBackend>(engine, std::move(fabric), logical));
  }
  return Error::make(ErrorKind::kInvalidArgument,
                     "backend '{}' does not run on a graph topology (expected flow or analytical)",
                     name);
}

}  // namespace orrery::net
