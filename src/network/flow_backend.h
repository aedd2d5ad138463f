// network/flow_backend.h: flow-level network models over a Fabric (a physical graph or ASTRA-sim's
// multi-dimensional network seen as one).
//
// `flow`: every message is a flow on its route (ECMP by hash of source, destination and a per-send
// sequence number; dimension order on tori and ASTRA-sim networks). Flows that are transmitting
// share every link by max-min fairness, computed by progressive filling: all unfrozen rates rise
// together; the link whose capacity runs out first (smallest remaining capacity / unfrozen flows)
// freezes its flows at that share; repeat until every flow is frozen. Rates are recomputed at
// every arrival and departure (arrivals and departures at one instant are batched into one
// recomputation). A flow's last byte leaves its source when its bytes are sent at the rates it got;
// it is delivered the sum of its links' latencies later. A lone flow therefore takes
// sum(latency) + bytes / (smallest bandwidth on its path). Zero-byte messages take the latency
// alone; a message to oneself is delivered at once (through an event).
//
// `analytical` on a graph (GraphAnalyticalBackend): the same lone-flow time for every message,
// whatever else is on the network (no contention), with statistics on every link of its route.
//
// Statistics per directed link: bytes carried, messages, busy time = bytes / bandwidth summed
// over the messages (the time the link would need at full rate), and peak = the most flows
// transmitting on the link at once.
//
// Cost: one recomputation is O(P log L) for P (flow, link) pairs in flight over L busy links, plus
// O(flows) to advance remaining bytes; memory O(P + links used). Rates and remaining bytes are
// doubles, computed in a fixed order, so runs are bit-identical; finish times are rounded to the
// nearest picosecond.
#pragma once

#include <cstdint>
#include <memory>
#include <queue>
#include <vector>

#include "core/event_engine.h"
#include "network/graph.h"
#include "network/link_table.h"
#include "network/network_backend.h"

namespace orrery::net {

// Per-link counters over a Fabric; link ids are the fabric's.
class FabricLinks {
 public:
  explicit FabricLinks(const Fabric& fabric) : fabric_(fabric) {}
  uint32_t slot(LinkId link) { return table_.slot(link); }
  LinkCounters& counters(uint32_t slot) { return table_.counters(slot); }
  LinkId link(uint32_t slot) const { return table_.link(slot); }
  uint32_t size() const { return table_.size(); }
  std::vector<LinkStats> report() const;
  size_t memory_bytes() const { return table_.memory_bytes(); }

 private:
  const Fabric& fabric_;
  LinkTable table_;
};

class FlowBackend final : public NetworkBackend, private EventHandler {
 public:
  // `logical` is the topology the system layer sees (same rank count as the fabric).
  FlowBackend(EventEngine& engine, std::shared_ptr<const Fabric> fabric, Topology logical);
  ~FlowBackend() override;

  std::string_view name() const override { return "flow"; }
  const Topology& topology() const override { return logical_; }
  void set_listener(DeliveryListener& listener) override;
  void send(Rank src, Rank dst, uint64_t bytes, uint64_t token) override;
  // A one-link flow on the rank's link serving dimension `dim` (up: out of the rank, down: in).
  void send_switch(Rank rank, uint32_t dim, bool up, uint64_t bytes, uint64_t token) override;
  uint64_t in_flight() const override { return in_flight_; }
  std::vector<LinkStats> link_stats() const override { return links_.report(); }
  size_t memory_bytes() const override;

  // Flows transmitting now, and rate recomputations so far (for tests and benchmarks).
  size_t active_flows() const { return active_.size(); }
  uint64_t recomputations() const { return recomputations_; }
  // The current rate of the flow carrying `token`, in bytes per second (0 when not transmitting).
  double rate_of(uint64_t token) const;

 private:
  enum EventKind : uint16_t { kRecompute = 0, kComplete = 1, kDeliver = 2 };
  struct Flow {
    uint64_t token = 0;
    uint64_t bytes = 0;
    double remaining = 0;  // bytes not yet sent
    double rate = 0;       // bytes per ps
    int64_t finish_ps = 0;
    SimTime latency;
    uint32_t active_index = 0;
    bool frozen = false;
    std::vector<uint32_t> slots;  // link slots of the path
  };
  struct SlotState {
    double capacity = 0;  // bytes per ps
    double residual = 0;
    uint32_t unfrozen = 0;
    uint32_t flows = 0;  // transmitting flows on the link
    uint32_t list_begin = 0;
  };

  void handle_event(const Event& event) override;
  uint32_t take_flow();
  void start(uint32_t index, const Path& path, uint64_t bytes, uint64_t token);
  void advance();
  void recompute();
  void schedule_completion();

  EventEngine& engine_;
  std::shared_ptr<const Fabric> fabric_;
  Topology logical_;
  HandlerId id_;
  DeliveryListener* listener_ = nullptr;
  FabricLinks links_;
  std::vector<SlotState> slot_state_;
  std::vector<Flow> flows_;
  std::vector<uint32_t> free_flows_;
  std::vector<uint32_t> active_;
  // Scratch of recompute(): flows per link slot (CSR), busy slots, the heap.
  std::vector<uint32_t> list_;
  std::vector<uint32_t> busy_slots_;
  std::vector<std::pair<double, uint32_t>> heap_;
  Path path_;
  SimTime last_;
  uint64_t generation_ = 0;
  uint64_t sequence_ = 0;
  uint64_t recomputations_ = 0;
  uint64_t in_flight_ = 0;
  bool recompute_pending_ = false;
  bool dirty_ = false;
};

class GraphAnalyticalBackend final : public NetworkBackend, private EventHandler {
 public:
  GraphAnalyticalBackend(EventEngine& engine, std::shared_ptr<const Fabric> fabric,
                         Topology logical);
  ~GraphAnalyticalBackend() override;

  std::string_view name() const override { return "analytical"; }
  const Topology& topology() const override { return logical_; }
  void set_listener(DeliveryListener& listener) override;
  void send(Rank src, Rank dst, uint64_t bytes, uint64_t token) override;
  void send_switch(Rank rank, uint32_t dim, bool up, uint64_t bytes, uint64_t token) override;
  uint64_t in_flight() const override { return in_flight_; }
  std::vector<LinkStats> link_stats() const override { return links_.report(); }
  size_t memory_bytes() const override;

 private:
  void handle_event(const Event& event) override;
  void deliver_over(const Path& path, uint64_t bytes, uint64_t token);

  EventEngine& engine_;
  std::shared_ptr<const Fabric> fabric_;
  Topology logical_;
  HandlerId id_;
  DeliveryListener* listener_ = nullptr;
  FabricLinks links_;
  // Per link slot: finish times of messages on it, earliest first (dropped lazily).
  std::vector<std::priority_queue<SimTime, std::vector<SimTime>, std::greater<>>> on_link_;
  std::vector<uint64_t> tokens_;
  std::vector<uint32_t> free_tokens_;
  Path path_;
  uint64_t sequence_ = 0;
  uint64_t in_flight_ = 0;
};

// The lone-flow time of `bytes` over `path`: sum of latencies + bytes / smallest bandwidth.
SimTime path_delay(const Fabric& fabric, const Path& path, uint64_t bytes);

// Backends over a fabric: "flow" or "analytical". Error (kInvalidArgument) for other names.
Expected<std::unique_ptr<NetworkBackend>> make_fabric_backend(std::string_view name,
                                                              EventEngine& engine,
                                                              std::shared_ptr<const Fabric> fabric,
                                                              const Topology& logical);

}  // namespace orrery::net
