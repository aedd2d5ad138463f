#include "network/graph_congestion_backend.h"

#include <algorithm>
#include <cassert>

#include "core/checked.h"
#include "core/slot_pool.h"

namespace orrery::net {

GraphCongestionBackend::GraphCongestionBackend(EventEngine& engine,
                                               std::shared_ptr<const Fabric> fabric,
                                               Topology logical, TimeRounding rounding,
                                               std::shared_ptr<const DimensionFailures> failures)
    : engine_(engine),
      fabric_(std::move(fabric)),
      logical_(std::move(logical)),
      rounding_(rounding),
      id_(engine.register_handler(*this)),
      links_(*fabric_),
      failures_(std::move(failures)) {}

GraphCongestionBackend::~GraphCongestionBackend() { engine_.unregister_handler(id_); }

void GraphCongestionBackend::set_listener(DeliveryListener& listener) {
  assert(listener_ == nullptr && "congestion-aware backend: listener set twice");
  listener_ = &listener;
}

uint32_t GraphCongestionBackend::take_message() {
  ++in_flight_;
  return take_slot(messages_, free_messages_);
}

void GraphCongestionBackend::send(Rank src, Rank dst, uint64_t bytes, uint64_t token) {
  assert(listener_ != nullptr && "congestion-aware backend: send before set_listener");
  assert(src < fabric_->npu_count() && dst < fabric_->npu_count());
  const uint32_t index = take_message();
  Message& message = messages_[index];
  message.token = token;
  message.bytes = bytes;
  message.dst = dst;
  message.stop = dst;
  message.next = src;
  if (src == dst) {
    // Delivered now, but from inside an event like every other delivery.
    (void)engine_.schedule_after(SimTime::zero(), id_, kArrive, index);
    return;
  }
  message.key = fabric_->route_key(src, dst, labels_.next(*fabric_, src, dst));
  const Hop hop = fabric_->next_hop(src, dst, message.key);
  message.link = hop.link;
  message.next = hop.next;
  enqueue(index);
}

void GraphCongestionBackend::send_switch(Rank rank, uint32_t dim, bool up, uint64_t bytes,
                                         uint64_t token) {
  assert(listener_ != nullptr && "congestion-aware backend: send before set_listener");
  const uint32_t index = take_message();
  Message& message = messages_[index];
  message.token = token;
  message.bytes = bytes;
  message.dst = rank;
  message.link = fabric_->edge_link(rank, dim, up);
  message.next = fabric_->link_info(message.link).dst;
  message.stop = message.next;  // the switch going up, the rank coming down
  enqueue(index);
}

void GraphCongestionBackend::enqueue(uint32_t index) {
  Message& message = messages_[index];
  const LinkId link = message.link;
  const uint32_t slot = links_.slot(link);
  if (slot == queues_.size()) {
    queues_.emplace_back();
    queues_.back().latency = fabric_->link_latency(link);
  }
  LinkQueue& queue = queues_[slot];
  LinkCounters& counters = links_.counters(slot);
  const SimTime now = engine_.now();
  if (queue.waiting == 0 && now >= queue.busy_until) {
    counters.peak = std::max(counters.peak, 1u);
    transmit(index, slot);
    return;
  }
  queue.queued.push_back(messages_, index, &Message::next_in_queue);
  ++queue.waiting;
  const uint32_t present = queue.waiting + (now < queue.busy_until ? 1u : 0u);
  counters.peak = std::max(counters.peak, present);
  if (queue.waiting == 1) {
    (void)engine_.schedule_at(queue.busy_until, id_, kLinkFree, slot);
  }
}

void GraphCongestionBackend::transmit(uint32_t index, uint32_t slot) {
  LinkQueue& queue = queues_[slot];
  const Message& message = messages_[index];
  const SimTime now = engine_.now();
  Bandwidth bandwidth = fabric_->link_bandwidth(message.link);
  if (failures_ != nullptr) {
    bandwidth = failures_->bandwidth(message.link, bandwidth, now);
    if (bandwidth.nano_gbps() == 0) {
      // Cut: held here for ever; the link stays free for the next message, which meets the same.
      undelivered_.push_back(Undelivered{kNoRank, message.dst, message.bytes, message.link,
                                         failures_->cut_by(message.link, now)});
      return;
    }
  }
  const SimTime serialization = bandwidth.serialization_time(message.bytes);
  // ASTRA-sim truncates the link's busy time and the arrival time separately.
  const bool astra = rounding_ == TimeRounding::kAstraSim;
  const SimTime busy = astra ? truncate_to_ns(serialization) : serialization;
  const SimTime arrival =
      astra ? truncate_to_ns(serialization + queue.latency) : serialization + queue.latency;
  queue.busy_until = now + busy;
  LinkCounters& counters = links_.counters(slot);
  counters.bytes = saturating_add(counters.bytes, message.bytes);
  counters.busy += busy;
  ++counters.messages;
  (void)engine_.schedule_at(now + arrival, id_, kArrive, index);
}

void GraphCongestionBackend::handle_event(const Event& event) {
  const auto index = static_cast<uint32_t>(event.arg);
  switch (event.kind) {
    case kArrive: {
      Message& message = messages_[index];
      if (message.next == message.stop) {
        const uint64_t token = message.token;
        free_messages_.push_back(index);
        --in_flight_;
        listener_->on_delivered(token);
      } else {
        const Hop hop = fabric_->next_hop(message.next, message.dst, message.key);
        message.link = hop.link;
        message.next = hop.next;
        enqueue(index);
      }
      return;
    }
    case kLinkFree: {
      const uint32_t slot = index;
      LinkQueue& queue = queues_[slot];
      assert(queue.waiting > 0 && !queue.queued.empty());
      const uint32_t head = queue.queued.pop_front(messages_, &Message::next_in_queue);
      --queue.waiting;
      transmit(head, slot);
      if (queue.waiting > 0) {
        (void)engine_.schedule_at(queue.busy_until, id_, kLinkFree, slot);
      }
      return;
    }
    default:
      assert(false && "congestion-aware backend: unknown event kind");
  }
}

size_t GraphCongestionBackend::memory_bytes() const {
  return sizeof(*this) + links_.memory_bytes() + labels_.memory_bytes() +
         queues_.capacity() * sizeof(LinkQueue) + messages_.capacity() * sizeof(Message) +
         free_messages_.capacity() * sizeof(uint32_t);
}

}  // namespace orrery::net
