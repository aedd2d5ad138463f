// network/graph_congestion_backend.h: ASTRA-sim's congestion-aware model over any Fabric: a
// physical graph, or ASTRA-sim's multi-dimensional network seen as one (TopologyFabric, which is
// how `congestion-aware` runs on ASTRA-sim's files).
//
// Every directed link has a FIFO queue; a message is stored and forwarded whole at every hop. A
// link sends one message at a time: it is busy for bytes / bandwidth, and the message reaches the
// next node the link's latency after its last byte left (so a link may start the next message
// while the previous one still propagates, as in ASTRA-sim). A lone message therefore takes sum
// over its route of (latency + bytes / bandwidth): unlike `flow`, which is cut-through, every hop
// serializes again. On ASTRA-sim's networks a Switch is a node of its own (a message through it
// crosses an up link and a down link) and routes go one dimension at a time, lowest first
// (Topology::next_hop); on graphs routes are ECMP with labels per pair, as the flow backend's.
// TimeRounding::kAstraSim keeps whole nanoseconds as ASTRA-sim does: a link frees after
// floor(serialization) and a message arrives floor(serialization + latency) after it started.
//
// Events: one arrival per message per hop, and at most one pending "link free" event per link
// while messages wait on it. Routes are taken hop by hop (Fabric::next_hop), so a message is 48
// bytes whatever its path; messages are pooled.
//
// With dimension failures (ASTRA-sim's networks, network/dimension_failures.h) a link sends at
// the bandwidth it has left when a message starts on it; a message reaching a cut link is held
// there, never delivered, and listed by describe_undelivered.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/event_engine.h"
#include "core/index_fifo.h"
#include "network/dimension_failures.h"
#include "network/flow_backend.h"
#include "network/graph.h"
#include "network/network_backend.h"

namespace orrery::net {

class GraphCongestionBackend final : public NetworkBackend, private EventHandler {
 public:
  // `logical` is the topology the system layer sees (same rank count as the fabric).
  GraphCongestionBackend(EventEngine& engine, std::shared_ptr<const Fabric> fabric,
                         Topology logical, TimeRounding rounding = TimeRounding::kExact,
                         std::shared_ptr<const DimensionFailures> failures = nullptr);
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
  std::vector<std::string> describe_undelivered(size_t most) const override {
    return net::describe_undelivered(undelivered_, most);
  }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  enum EventKind : uint16_t { kArrive = 0, kLinkFree = 1 };

  struct Message {
    uint64_t token = 0;
    uint64_t bytes = 0;
    uint64_t key = 0;  // routing key
    LinkId link = 0;   // the link it is on, or queued for
    Rank dst = 0;
    NodeId stop = 0;  // where it is delivered: dst, or a switch for an in-network hop up
    NodeId next = 0;  // where `link` leads
    uint32_t next_in_queue = kNone;
  };
  struct LinkQueue {
    SimTime busy_until;  // when the message in service has left entirely
    SimTime latency;
    IndexFifo queued;      // messages behind the one in service (through next_in_queue)
    uint32_t waiting = 0;  // how many
  };

  void handle_event(const Event& event) override;
  uint32_t take_message();
  void enqueue(uint32_t index);
  void transmit(uint32_t index, uint32_t slot);

  EventEngine& engine_;
  std::shared_ptr<const Fabric> fabric_;
  Topology logical_;
  TimeRounding rounding_;
  HandlerId id_;
  DeliveryListener* listener_ = nullptr;
  FabricLinks links_;
  FlowLabels labels_;
  std::vector<LinkQueue> queues_;  // by link slot
  std::vector<Message> messages_;
  std::vector<uint32_t> free_messages_;
  uint64_t in_flight_ = 0;
  std::shared_ptr<const DimensionFailures> failures_;
  std::vector<Undelivered> undelivered_;
};

}  // namespace orrery::net
