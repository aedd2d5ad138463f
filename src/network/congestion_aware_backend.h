// network/congestion_aware_backend.h: ASTRA-sim's congestion-aware analytical model. Every
// directed link has a FIFO queue; a message is stored and forwarded whole at every hop.
//
// A link sends one message at a time: it is busy for bytes / bandwidth, and the message reaches the
// next node `latency` after its last byte left (so a link may start the next message while the
// previous one is still propagating, as in ASTRA-sim). A Switch is a node of its own: a message
// through a switch crosses an up link and a down link. A message whose coordinates differ in
// several dimensions is routed one dimension at a time, lowest first (see Topology::next_hop).
// A lone message therefore takes sum over its route of (latency + bytes / bandwidth).
//
// Events: one arrival per message per hop, and at most one pending "link free" event per link,
// only while messages wait on it. Messages live in a pooled array; nothing is allocated per
// message once the pool has grown.
#pragma once

#include <cstdint>
#include <vector>

#include "core/event_engine.h"
#include "network/link_table.h"
#include "network/network_backend.h"
#include "network/topology.h"

namespace orrery::net {

class CongestionAwareBackend final : public NetworkBackend, private EventHandler {
 public:
  // Registers with `engine`, which must outlive this backend. Build phase.
  CongestionAwareBackend(EventEngine& engine, Topology topology,
                         TimeRounding rounding = TimeRounding::kExact);
  ~CongestionAwareBackend() override;

  std::string_view name() const override { return "congestion-aware"; }
  const Topology& topology() const override { return topology_; }
  void set_listener(DeliveryListener& listener) override;
  // One event per hop (plus link-free events while queues are non-empty).
  void send(Rank src, Rank dst, uint64_t bytes, uint64_t token) override;
  // One hop through the switch's up or down link queue.
  void send_switch(Rank rank, uint32_t dim, bool up, uint64_t bytes, uint64_t token) override;
  uint64_t in_flight() const override { return in_flight_; }
  std::vector<LinkStats> link_stats() const override { return links_.report(topology_); }
  size_t memory_bytes() const override;

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  enum EventKind : uint16_t { kArrive = 0, kLinkFree = 1 };

  struct Message {
    uint64_t token = 0;
    uint64_t bytes = 0;
    Rank dst = 0;
    NodeId stop = 0;  // where it is delivered: dst, or a switch for an in-network hop up
    NodeId at = 0;    // where the message is stored now
    NodeId next = 0;  // where the link it is on leads
    uint32_t next_in_queue = kNone;
  };
  struct LinkQueue {
    SimTime busy_until;  // when the message in service has left entirely
    uint32_t head = kNone;
    uint32_t tail = kNone;
    uint32_t waiting = 0;  // messages queued behind the one in service
    uint32_t dimension = 0;
  };

  void handle_event(const Event& event) override;
  // Puts message `index` (stored at its `at` node) on the first link towards its destination.
  void forward(uint32_t index);
  // Puts the message on `hop`'s link queue (sending it at once when the link is free).
  void enqueue(uint32_t index, const Hop& hop);
  uint32_t take_message();
  // Starts sending message `index` on the link in `slot` now.
  void transmit(uint32_t index, uint32_t slot);
  void deliver(uint32_t index);

  EventEngine& engine_;
  Topology topology_;
  TimeRounding rounding_;
  HandlerId id_;
  DeliveryListener* listener_ = nullptr;
  LinkTable links_;
  std::vector<LinkQueue> queues_;  // by link slot
  std::vector<Message> messages_;
  std::vector<uint32_t> free_messages_;
  uint64_t in_flight_ = 0;
};

}  // namespace orrery::net
