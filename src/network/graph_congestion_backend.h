// network/graph_congestion_backend.h: the congestion-aware model over any Fabric (a physical
// graph, or ASTRA-sim's multi-dimensional network seen as one).
//
// The same model as CongestionAwareBackend, on routes from the fabric: every directed link has a
// FIFO queue, a message is stored and forwarded whole at every hop, a link sends one message at a
// time (busy for bytes / bandwidth) and the message reaches the next node the link's latency
// after its last byte left. A lone message takes sum over its route of (latency + bytes /
// bandwidth): unlike `flow`, which is cut-through, every hop serializes again. On ASTRA-sim's
// networks (TopologyFabric) it gives the congestion-aware backend's times exactly (kExact
// rounding; tested message by message). Routes are picked when a message is sent (ECMP labels
// per pair, as the flow backend).
//
// Events: one arrival per message per hop, and at most one pending "link free" event per link
// while messages wait on it. Messages and their paths are pooled.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/event_engine.h"
#include "network/flow_backend.h"
#include "network/graph.h"
#include "network/network_backend.h"

namespace orrery::net {

class GraphCongestionBackend final : public NetworkBackend, private EventHandler {
 public:
  // `logical` is the topology the system layer sees (same rank count as the fabric).
  GraphCongestionBackend(EventEngine& engine, std::shared_ptr<const Fabric> fabric,
                         Topology logical);
  ~GraphCongestionBackend() override;

  std::string_view name() const override { return "congestion-aware"; }
  const Topology& topology() const override { return logical_; }
  void set_listener(DeliveryListener& listener) override;
  void send(Rank src, Rank dst, uint64_t bytes, uint64_t token) override;
  // One hop on the rank's link serving dimension `dim` (up: out of the rank, down: into it).
  void send_switch(Rank rank, uint32_t dim, bool up, uint64_t bytes, uint64_t token) override;
  uint64_t in_flight() const override { return in_flight_; }
  std::vector<LinkStats> link_stats() const override { return links_.report(); }
  size_t memory_bytes() const override;

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  enum EventKind : uint16_t { kArrive = 0, kLinkFree = 1 };

  struct Message {
    uint64_t token = 0;
    uint64_t bytes = 0;
    uint32_t hop = 0;  // index in `path` of the link it is on (or queued for)
    uint32_t next_in_queue = kNone;
    Path path;
  };
  struct LinkQueue {
    SimTime busy_until;  // when the message in service has left entirely
    SimTime latency;
    uint32_t head = kNone;
    uint32_t tail = kNone;
    uint32_t waiting = 0;  // messages queued behind the one in service
  };

  void handle_event(const Event& event) override;
  uint32_t take_message();
  void start(uint32_t index);
  void enqueue(uint32_t index);
  void transmit(uint32_t index, uint32_t slot);

  EventEngine& engine_;
  std::shared_ptr<const Fabric> fabric_;
  Topology logical_;
  HandlerId id_;
  DeliveryListener* listener_ = nullptr;
  FabricLinks links_;
  FlowLabels labels_;
  std::vector<LinkQueue> queues_;  // by link slot
  std::vector<Message> messages_;
  std::vector<uint32_t> free_messages_;
  uint64_t in_flight_ = 0;
};

}  // namespace orrery::net
