#include "network/congestion_aware_backend.h"

#include <algorithm>
#include <cassert>

namespace orrery::net {

CongestionAwareBackend::CongestionAwareBackend(EventEngine& engine, Topology topology,
                                               TimeRounding rounding)
    : engine_(engine),
      topology_(std::move(topology)),
      rounding_(rounding),
      id_(engine.register_handler(*this)) {}

CongestionAwareBackend::~CongestionAwareBackend() { engine_.unregister_handler(id_); }

void CongestionAwareBackend::set_listener(DeliveryListener& listener) {
  assert(listener_ == nullptr && "congestion-aware backend: listener set twice");
  listener_ = &listener;
}

uint32_t CongestionAwareBackend::take_message() {
  uint32_t index = 0;
  if (free_messages_.empty()) {
    index = static_cast<uint32_t>(messages_.size());
    messages_.emplace_back();
  } else {
    index = free_messages_.back();
    free_messages_.pop_back();
  }
  messages_[index] = Message{};
  ++in_flight_;
  return index;
}

void CongestionAwareBackend::send_switch(Rank rank, uint32_t dim, bool up, uint64_t bytes,
                                         uint64_t token) {
  assert(listener_ != nullptr && "congestion-aware backend: send before set_listener");
  const Hop hop = up ? topology_.switch_uplink(rank, dim) : topology_.switch_downlink(rank, dim);
  const uint32_t index = take_message();
  Message& message = messages_[index];
  message.token = token;
  message.bytes = bytes;
  message.dst = rank;
  message.stop = hop.next;
  message.at = up ? rank : topology_.switch_uplink(rank, dim).next;
  message.next = message.at;
  enqueue(index, hop);
}

void CongestionAwareBackend::send(Rank src, Rank dst, uint64_t bytes, uint64_t token) {
  assert(listener_ != nullptr && "congestion-aware backend: send before set_listener");
  assert(src < topology_.rank_count() && dst < topology_.rank_count());
  const uint32_t index = take_message();
  Message& message = messages_[index];
  message.token = token;
  message.bytes = bytes;
  message.dst = dst;
  message.stop = dst;
  message.at = src;
  message.next = src;
  if (src == dst) {
    // Delivered now, but from inside an event like every other delivery.
    (void)engine_.schedule_after(SimTime::zero(), id_, kArrive, index);
    return;
  }
  forward(index);
}

void CongestionAwareBackend::forward(uint32_t index) {
  enqueue(index, topology_.next_hop(messages_[index].at, messages_[index].dst));
}

void CongestionAwareBackend::enqueue(uint32_t index, const Hop& hop) {
  Message& message = messages_[index];
  message.next = hop.next;
  const uint32_t slot = links_.slot(hop.link);
  if (slot == queues_.size()) {
    queues_.emplace_back();
    queues_.back().dimension = hop.dimension;
  }
  LinkQueue& queue = queues_[slot];
  LinkCounters& counters = links_.counters(slot);
  const SimTime now = engine_.now();
  if (queue.waiting == 0 && now >= queue.busy_until) {
    counters.peak = std::max(counters.peak, 1u);
    transmit(index, slot);
    return;
  }
  message.next_in_queue = kNone;
  if (queue.tail == kNone) {
    queue.head = index;
  } else {
    messages_[queue.tail].next_in_queue = index;
  }
  queue.tail = index;
  ++queue.waiting;
  const uint32_t present = queue.waiting + (now < queue.busy_until ? 1u : 0u);
  counters.peak = std::max(counters.peak, present);
  if (queue.waiting == 1) {
    (void)engine_.schedule_at(queue.busy_until, id_, kLinkFree, slot);
  }
}

void CongestionAwareBackend::transmit(uint32_t index, uint32_t slot) {
  LinkQueue& queue = queues_[slot];
  const Dimension& dim = topology_.dimension(queue.dimension);
  const uint64_t bytes = messages_[index].bytes;
  const SimTime serialization = dim.bandwidth.serialization_time(bytes);
  const SimTime now = engine_.now();
  // ASTRA-sim keeps whole nanoseconds: the link frees after floor(serialization) and the message
  // arrives floor(latency + serialization) after it started, each truncated separately.
  const bool astra = rounding_ == TimeRounding::kAstraSim;
  const SimTime busy = astra ? truncate_to_ns(serialization) : serialization;
  const SimTime arrival =
      astra ? truncate_to_ns(serialization + dim.latency) : serialization + dim.latency;
  queue.busy_until = now + busy;
  LinkCounters& counters = links_.counters(slot);
  counters.bytes += bytes;
  counters.busy += busy;
  ++counters.messages;
  (void)engine_.schedule_at(now + arrival, id_, kArrive, index);
}

void CongestionAwareBackend::deliver(uint32_t index) {
  const uint64_t token = messages_[index].token;
  free_messages_.push_back(index);
  --in_flight_;
  listener_->on_delivered(token);
}

void CongestionAwareBackend::handle_event(const Event& event) {
  const auto index = static_cast<uint32_t>(event.arg);
  switch (event.kind) {
    case kArrive: {
      Message& message = messages_[index];
      message.at = message.next;
      if (message.at == message.stop) {
        deliver(index);
      } else {
        forward(index);
      }
      return;
    }
    case kLinkFree: {
      const uint32_t slot = index;
      LinkQueue& queue = queues_[slot];
      assert(queue.waiting > 0 && queue.head != kNone);
      const uint32_t head = queue.head;
      queue.head = messages_[head].next_in_queue;
      if (queue.head == kNone) queue.tail = kNone;
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

size_t CongestionAwareBackend::memory_bytes() const {
  return sizeof(*this) + links_.memory_bytes() + queues_.capacity() * sizeof(LinkQueue) +
         messages_.capacity() * sizeof(Message) + free_messages_.capacity() * sizeof(uint32_t);
}

}  // namespace orrery::net
