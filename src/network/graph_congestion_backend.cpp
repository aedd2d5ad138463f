#include "network/graph_congestion_backend.h"

#include <algorithm>
#include <cassert>

namespace orrery::net {

GraphCongestionBackend::GraphCongestionBackend(EventEngine& engine,
                                               std::shared_ptr<const Fabric> fabric,
                                               Topology logical)
    : engine_(engine),
      fabric_(std::move(fabric)),
      logical_(std::move(logical)),
      id_(engine.register_handler(*this)),
      links_(*fabric_) {}

GraphCongestionBackend::~GraphCongestionBackend() { engine_.unregister_handler(id_); }

void GraphCongestionBackend::set_listener(DeliveryListener& listener) {
  assert(listener_ == nullptr && "congestion-aware backend: listener set twice");
  listener_ = &listener;
}

uint32_t GraphCongestionBackend::take_message() {
  uint32_t index = 0;
  if (free_messages_.empty()) {
    index = static_cast<uint32_t>(messages_.size());
    messages_.emplace_back();
  } else {
    index = free_messages_.back();
    free_messages_.pop_back();
  }
  Message& message = messages_[index];
  message.path.clear();  // keeps its capacity
  message.hop = 0;
  message.next_in_queue = kNone;
  ++in_flight_;
  return index;
}

void GraphCongestionBackend::send(Rank src, Rank dst, uint64_t bytes, uint64_t token) {
  assert(listener_ != nullptr && "congestion-aware backend: send before set_listener");
  assert(src < fabric_->npu_count() && dst < fabric_->npu_count());
  const uint32_t index = take_message();
  Message& message = messages_[index];
  message.token = token;
  message.bytes = bytes;
  if (src != dst) fabric_->route(src, dst, labels_.next(src, dst), message.path);
  start(index);
}

void GraphCongestionBackend::send_switch(Rank rank, uint32_t dim, bool up, uint64_t bytes,
                                         uint64_t token) {
  assert(listener_ != nullptr && "congestion-aware backend: send before set_listener");
  const uint32_t index = take_message();
  Message& message = messages_[index];
  message.token = token;
  message.bytes = bytes;
  message.path.push_back(fabric_->edge_link(rank, dim, up));
  start(index);
}

void GraphCongestionBackend::start(uint32_t index) {
  if (messages_[index].path.empty()) {
    // A message to oneself: delivered now, but from inside an event like every other delivery.
    (void)engine_.schedule_after(SimTime::zero(), id_, kArrive, index);
    return;
  }
  enqueue(index);
}

void GraphCongestionBackend::enqueue(uint32_t index) {
  Message& message = messages_[index];
  const LinkId link = message.path[message.hop];
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

void GraphCongestionBackend::transmit(uint32_t index, uint32_t slot) {
  LinkQueue& queue = queues_[slot];
  const Message& message = messages_[index];
  const SimTime serialization =
      fabric_->link_bandwidth(message.path[message.hop]).serialization_time(message.bytes);
  const SimTime now = engine_.now();
  queue.busy_until = now + serialization;
  LinkCounters& counters = links_.counters(slot);
  counters.bytes += message.bytes;
  counters.busy += serialization;
  ++counters.messages;
  (void)engine_.schedule_at(now + serialization + queue.latency, id_, kArrive, index);
}

void GraphCongestionBackend::handle_event(const Event& event) {
  const auto index = static_cast<uint32_t>(event.arg);
  switch (event.kind) {
    case kArrive: {
      Message& message = messages_[index];
      if (message.path.empty() || ++message.hop == message.path.size()) {
        const uint64_t token = message.token;
        free_messages_.push_back(index);
        --in_flight_;
        listener_->on_delivered(token);
      } else {
        enqueue(index);
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

size_t GraphCongestionBackend::memory_bytes() const {
  size_t bytes = sizeof(*this) + links_.memory_bytes() + labels_.memory_bytes() +
                 queues_.capacity() * sizeof(LinkQueue) + messages_.capacity() * sizeof(Message) +
                 free_messages_.capacity() * sizeof(uint32_t);
  for (const Message& message : messages_) bytes += message.path.capacity() * sizeof(LinkId);
  return bytes;
}

}  // namespace orrery::net
