#include "network/flow_backend.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "core/checked.h"
#include "core/slot_pool.h"
#include "network/graph_congestion_backend.h"

namespace orrery::net {

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

namespace {
// Rates are integers in units of 2^-12 x 10^-9 GB/s: exact sums, and fine enough (2.6e-4 bytes/s)
// for a million flows sharing a link. Bandwidths up to 2^50 x 10^-9 GB/s (about 1.1 PB/s) fit
// int64 with room for sums.
constexpr int kRateShift = 12;
constexpr uint64_t kMaxNanoGbps = uint64_t{1} << 50;
constexpr double kBytesPerPsPerUnit = 1073741824.0 / 1e21 / 4096.0;

int64_t rate_units(Bandwidth bandwidth) {
  return static_cast<int64_t>(std::min(bandwidth.nano_gbps(), kMaxNanoGbps) << kRateShift);
}
}  // namespace

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
  flow.where.clear();
  flow.pair = kNoPair;
  flow.rate = 0;
  flow.frozen = false;
  ++in_flight_;
  return index;
}

void FlowBackend::send(Rank src, Rank dst, uint64_t bytes, uint64_t token) {
  assert(listener_ != nullptr && "flow backend: send before set_listener");
  assert(src < fabric_->npu_count() && dst < fabric_->npu_count());
  // Messages to oneself and empty ones take no link time: nothing to wait for.
  if (!in_order_ || src == dst || bytes == 0) {
    send_now(src, dst, bytes, token, kNoPair);
    return;
  }
  const uint64_t pair = (uint64_t{src} << 32) | dst;
  const auto [it, idle] = connections_.try_emplace(pair);
  if (idle) {
    send_now(src, dst, bytes, token, pair);
    return;
  }
  const uint32_t w = take_slot(waiting_, free_waiting_);
  waiting_[w].bytes = bytes;
  waiting_[w].token = token;
  it->second.waiting.push_back(waiting_, w, &Waiting::next);
  ++waiting_count_;
}

void FlowBackend::send_now(Rank src, Rank dst, uint64_t bytes, uint64_t token, uint64_t pair) {
  path_.clear();
  if (src != dst) fabric_->route(src, dst, labels_.next(*fabric_, src, dst), path_);
  const uint32_t index = take_flow();
  flows_[index].pair = pair;
  start(index, path_, bytes, token);
}

void FlowBackend::start_waiting() {
  for (const uint64_t pair : left_pairs_) {
    const auto it = connections_.find(pair);
    assert(it != connections_.end());
    IndexFifo& waiting = it->second.waiting;
    if (waiting.empty()) {
      connections_.erase(it);
      continue;
    }
    const uint32_t w = waiting.pop_front(waiting_, &Waiting::next);
    const Waiting next = waiting_[w];
    free_waiting_.push_back(w);
    --waiting_count_;
    send_now(static_cast<Rank>(pair >> 32), static_cast<Rank>(pair & 0xffffffffu), next.bytes,
             next.token, pair);
  }
  left_pairs_.clear();
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
  flow.since_ps = engine_.now().ps();
  flow.latency = SimTime::zero();
  const bool transmits = bytes > 0 && !path.empty();
  for (LinkId link : path) {
    const uint32_t slot = links_.slot(link);
    if (slot == slot_state_.size()) {
      slot_state_.emplace_back();
      slot_state_.back().capacity = rate_units(fabric_->link_bandwidth(link));
    }
    flow.latency += fabric_->link_latency(link);
    LinkCounters& counters = links_.counters(slot);
    counters.bytes = saturating_add(counters.bytes, bytes);
    counters.busy += fabric_->link_bandwidth(link).serialization_time(bytes);
    ++counters.messages;
    if (transmits) {
      ++counters.present;
      counters.peak = std::max(counters.peak, counters.present);
      SlotState& state = slot_state_[slot];
      flow.where.push_back(static_cast<uint32_t>(state.flows.size()));
      state.flows.push_back(index);
    }
    flow.slots.push_back(slot);
  }
  if (!transmits) {
    // Nothing to share: delivered after the latency of its path (now, for a message to oneself).
    (void)engine_.schedule_after(flow.latency, id_, kDeliver, index);
    return;
  }
  flow.active_index = static_cast<uint32_t>(active_.size());
  active_.push_back(index);
  arrived_.push_back(index);
  for (uint32_t slot : flow.slots) seeds_.push_back(slot);
  dirty_ = true;
  if (!recompute_pending_) {
    recompute_pending_ = true;
    (void)engine_.schedule_after(SimTime::zero(), id_, kRecompute, 0);
  }
}

void FlowBackend::depart(uint32_t index) {
  Flow& flow = flows_[index];
  for (size_t hop = 0; hop < flow.slots.size(); ++hop) {
    const uint32_t slot = flow.slots[hop];
    --links_.counters(slot).present;
    // Swap-remove from the link's list; the moved flow learns its new position.
    std::vector<uint32_t>& list = slot_state_[slot].flows;
    const uint32_t pos = flow.where[hop];
    const uint32_t moved = list.back();
    list[pos] = moved;
    list.pop_back();
    if (moved != index) {
      Flow& other = flows_[moved];
      for (size_t h = 0; h < other.slots.size(); ++h) {
        if (other.slots[h] == slot) other.where[h] = pos;
      }
    }
    seeds_.push_back(slot);
  }
  departed_level_ = std::min(departed_level_, flow.rate);
  active_[flow.active_index] = active_.back();
  flows_[active_[flow.active_index]].active_index = flow.active_index;
  active_.pop_back();
  flow.remaining = 0;
  flow.rate = 0;
  ++flow.version;
  dirty_ = true;
  (void)engine_.schedule_after(flow.latency, id_, kDeliver, index);
  if (flow.pair != kNoPair) left_pairs_.push_back(flow.pair);
}

void FlowBackend::seed(uint32_t slot) {
  SlotState& state = slot_state_[slot];
  if (state.mark == epoch_) return;
  state.mark = epoch_;
  visited_.push_back(slot);
}

void FlowBackend::recompute() {
  ++recomputations_;
  dirty_ = false;
  ++epoch_;
  // The level below which nothing changes (see the header); 0 = refill everything.
  int64_t level = 0;
  visited_.clear();
  if (incremental_) {
    level = departed_level_;
    for (uint32_t index : arrived_) {
      for (uint32_t slot : flows_[index].slots) {
        const SlotState& state = slot_state_[slot];
        level = std::min(level, state.capacity / static_cast<int64_t>(state.flows.size()));
      }
    }
    for (uint32_t slot : seeds_) seed(slot);
  } else {
    for (uint32_t index : active_) {
      for (uint32_t slot : flows_[index].slots) seed(slot);
    }
  }
  seeds_.clear();
  arrived_.clear();
  departed_level_ = INT64_MAX;
  fill(level);
  schedule_completion();
}

void FlowBackend::fill(int64_t level) {
  // Breadth-first over links: on each visited link, flows at `level` or above (or new) are
  // affected; the others keep their rates and take their share of the capacity out.
  affected_.clear();
  list_.clear();
  for (size_t next = 0; next < visited_.size(); ++next) {
    const uint32_t slot = visited_[next];
    SlotState& state = slot_state_[slot];
    state.list_begin = static_cast<uint32_t>(list_.size());
    state.residual = state.capacity;
    for (uint32_t index : state.flows) {
      Flow& flow = flows_[index];
      // Rate 0: arrived since the last filling.
      if (flow.rate < level && flow.mark != epoch_ && flow.rate != 0) {
        state.residual -= flow.rate;
        continue;
      }
      list_.push_back(index);
      if (flow.mark == epoch_) continue;
      flow.mark = epoch_;
      flow.frozen = false;
      affected_.push_back(index);
      for (uint32_t other : flow.slots) seed(other);
    }
    state.list_size = static_cast<uint32_t>(list_.size()) - state.list_begin;
    state.unfrozen = state.list_size;
  }
  flows_visited_ += affected_.size();
  // Progressive filling over the visited links with a lazy min-heap of (fair share, slot).
  heap_.clear();
  for (uint32_t slot : visited_) {
    const SlotState& state = slot_state_[slot];
    if (state.unfrozen > 0) heap_.emplace_back(state.residual / state.unfrozen, slot);
  }
  auto later = [](const std::pair<int64_t, uint32_t>& a, const std::pair<int64_t, uint32_t>& b) {
    return a > b;
  };
  std::make_heap(heap_.begin(), heap_.end(), later);
  // A link's fair share only rises as flows elsewhere freeze (they take at most the current
  // level, which is at most its share), so heap keys are lower bounds: a popped link whose share
  // has risen goes back with its new share; one whose share is still its key is the bottleneck.
  // Links therefore freeze in (share, slot) order whichever of them were visited.
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const auto [key, slot] = heap_.back();
    heap_.pop_back();
    SlotState& state = slot_state_[slot];
    if (state.unfrozen == 0) continue;
    const int64_t share = std::max<int64_t>(1, state.residual / state.unfrozen);
    if (share > key) {
      heap_.emplace_back(share, slot);
      std::push_heap(heap_.begin(), heap_.end(), later);
      continue;
    }
    for (uint32_t idx = state.list_begin; idx < state.list_begin + state.list_size; ++idx) {
      Flow& flow = flows_[list_[idx]];
      if (flow.frozen) continue;
      flow.frozen = true;
      for (uint32_t other : flow.slots) {
        SlotState& o = slot_state_[other];
        o.residual -= share;
        --o.unfrozen;
      }
      if (flow.rate == share) continue;
      // The rate changes: bytes sent so far at the old rate, then the new finish time.
      const int64_t now = engine_.now().ps();
      flow.remaining =
          std::max(0.0, flow.remaining - static_cast<double>(flow.rate) * kBytesPerPsPerUnit *
                                             static_cast<double>(now - flow.since_ps));
      flow.since_ps = now;
      flow.rate = share;
      const double time = flow.remaining / (static_cast<double>(share) * kBytesPerPsPerUnit);
      flow.finish_ps = now + static_cast<int64_t>(std::llround(std::min(time, 1e18)));
      ++flow.version;
      completions_.push_back({flow.finish_ps, list_[idx], flow.version});
      std::push_heap(completions_.begin(), completions_.end(), std::greater<>());
    }
  }
}

void FlowBackend::schedule_completion() {
  while (!completions_.empty()) {
    const Completion& top = completions_.front();
    if (top.version == flows_[top.flow].version) break;
    std::pop_heap(completions_.begin(), completions_.end(), std::greater<>());
    completions_.pop_back();
  }
  if (completions_.empty() || completions_.front().finish_ps == scheduled_ps_) return;
  scheduled_ps_ = completions_.front().finish_ps;
  (void)engine_.schedule_at(SimTime::from_ps(scheduled_ps_), id_, kComplete, ++generation_);
}

void FlowBackend::handle_event(const Event& event) {
  switch (event.kind) {
    case kRecompute:
      recompute_pending_ = false;
      if (!dirty_) return;
      recompute();
      return;
    case kComplete: {
      if (event.arg != generation_) return;  // superseded by an earlier completion
      scheduled_ps_ = -1;
      const int64_t now = engine_.now().ps();
      // Departures in (finish, flow slot) order.
      while (!completions_.empty() && completions_.front().finish_ps <= now) {
        const Completion top = completions_.front();
        std::pop_heap(completions_.begin(), completions_.end(), std::greater<>());
        completions_.pop_back();
        if (top.version == flows_[top.flow].version) depart(top.flow);
      }
      // The connections' next messages join the same recomputation as the departures.
      start_waiting();
      if (dirty_) recompute();
      schedule_completion();
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
    if (flows_[index].token == token) {
      return static_cast<double>(flows_[index].rate) * kBytesPerPsPerUnit * 1e12;
    }
  }
  return 0;
}

size_t FlowBackend::memory_bytes() const {
  size_t bytes =
      sizeof(*this) + links_.memory_bytes() + labels_.memory_bytes() +
      slot_state_.capacity() * sizeof(SlotState) + flows_.capacity() * sizeof(Flow) +
      (free_flows_.capacity() + active_.capacity() + seeds_.capacity() + arrived_.capacity() +
       visited_.capacity() + affected_.capacity() + list_.capacity()) *
          sizeof(uint32_t) +
      heap_.capacity() * sizeof(std::pair<int64_t, uint32_t>) +
      completions_.capacity() * sizeof(Completion) + waiting_.capacity() * sizeof(Waiting) +
      connections_.size() * (sizeof(uint64_t) + sizeof(Connection) + 2 * sizeof(void*));
  for (const SlotState& state : slot_state_) bytes += state.flows.capacity() * sizeof(uint32_t);
  for (const Flow& flow : flows_) {
    bytes += (flow.slots.capacity() + flow.where.capacity()) * sizeof(uint32_t);
  }
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
  if (src != dst) fabric_->route(src, dst, labels_.next(*fabric_, src, dst), path_);
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
    counters.bytes = saturating_add(counters.bytes, bytes);
    counters.busy += fabric_->link_bandwidth(link).serialization_time(bytes);
    ++counters.messages;
    auto& present = on_link_[slot];
    while (!present.empty() && present.top() <= now) present.pop();
    present.push(delivery);
    counters.peak = std::max(counters.peak, static_cast<uint32_t>(present.size()));
  }
  const uint32_t index = take_slot(tokens_, free_tokens_);
  tokens_[index] = token;
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
  size_t bytes = sizeof(*this) + links_.memory_bytes() + labels_.memory_bytes() +
                 tokens_.capacity() * sizeof(uint64_t) + free_tokens_.capacity() * sizeof(uint32_t);
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
  if (name == "congestion-aware") {
    return std::unique_ptr<NetworkBackend>(
        std::make_unique<GraphCongestionBackend>(engine, std::move(fabric), logical));
  }
  return Error::make(ErrorKind::kInvalidArgument,
                     "backend '{}' does not run on a graph topology (expected flow, "
                     "congestion-aware or analytical)",
                     name);
}

}  // namespace orrery::net
