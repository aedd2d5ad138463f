// network/flow_backend.h: flow-level network models over a Fabric (a physical graph or ASTRA-sim's
// multi-dimensional network seen as one).
//
// `flow`: every message is a flow on its route (ECMP by hash of source, destination and the
// message's number among that pair's messages; dimension order on tori and ASTRA-sim networks).
// A pair of NPUs is one connection that sends its messages in order: a message starts when the
// last byte of the pair's previous one has left, as on an RDMA reliable connection or a TCP stream
// (`set_in_order(false)`: every message is a flow from the moment it is sent). Concurrent messages
// of one pair sharing their path equally instead would finish late and together, and in pipelined
// collectives such bunches grow (docs/models/roce.md).
// Flows that are transmitting share every link by max-min fairness, computed by progressive
// filling: all unfrozen rates rise together; the link whose capacity runs out first (smallest
// remaining capacity / unfrozen flows, ties to the lower link slot) freezes its flows at that
// share; repeat until every flow is frozen. Rates are recomputed at every arrival and departure
// (arrivals and departures at one instant are batched into one recomputation). A flow's last byte
// leaves its source when its bytes are sent at the rates it got; it is delivered the sum of its
// links' latencies later. A lone flow therefore takes sum(latency) + bytes / (smallest bandwidth on
// its path). Zero-byte messages take the latency alone; a message to oneself is delivered at once
// (through an event).
//
// Incremental recomputation (why it scales): rates are integers (1/4096 of 10^-9 GB/s) and filling
// floors every share, so the allocation is exact and the same whatever order it is computed in.
// Progressive filling below a level L never saturates a link of a flow whose rate is at least L.
// So when flows leave (L = the smallest rate among them) or arrive (L = a lower bound of their new
// rates: the smallest capacity / flows over their links), every flow below L keeps its rate, and
// only flows at L or above that are connected to the changed flows through shared links can
// change. A recomputation visits those flows and their links (a breadth-first search over the
// links' flow lists), takes the other flows' rates as fixed, and refills from there; the result is
// bit-identical to refilling everything (`set_incremental(false)`, tested). Completion times sit
// in a heap and remaining bytes are advanced only for flows whose rate changes.
//
// Statistics per directed link: bytes carried, messages, busy time = bytes / bandwidth summed
// over the messages (the time the link would need at full rate), and peak = the most flows
// transmitting on the link at once.
//
// Cost of one recomputation: O(V + A log L) for V (flow, link) pairs on the visited links, A
// affected pairs and L visited links; memory O(flows in flight x path length + links used). Runs
// are bit-identical; finish times are rounded to the nearest picosecond.
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
#include <unordered_map>
#include <vector>

#include "core/event_engine.h"
#include "core/index_fifo.h"
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
  uint64_t in_flight() const override { return in_flight_ + waiting_count_; }
  std::vector<LinkStats> link_stats() const override { return links_.report(); }
  size_t memory_bytes() const override;

  // On (the default): a pair's messages are sent in order, one at a time. Off: each message is a
  // flow at once. Set before the first send.
  void set_in_order(bool on) { in_order_ = on; }
  // Flows transmitting now, rate recomputations so far and the flows they re-rated (for tests and
  // benchmarks).
  size_t active_flows() const { return active_.size(); }
  uint64_t recomputations() const { return recomputations_; }
  uint64_t flows_visited() const { return flows_visited_; }
  // The current rate of the flow carrying `token`, in bytes per second (0 when not transmitting).
  double rate_of(uint64_t token) const;
  // Off: every recomputation refills all flows in flight (the reference the incremental one must
  // equal bit for bit). On by default.
  void set_incremental(bool on) { incremental_ = on; }

 private:
  enum EventKind : uint16_t { kRecompute = 0, kComplete = 1, kDeliver = 2 };
  static constexpr uint32_t kNil = UINT32_MAX;
  static constexpr uint64_t kNoPair = UINT64_MAX;
  struct Flow {
    uint64_t token = 0;
    uint64_t pair = kNoPair;  // its connection (src << 32 | dst) when sent in order
    uint64_t bytes = 0;
    double remaining = 0;  // bytes not yet sent at `since_ps`
    int64_t since_ps = 0;
    int64_t rate = 0;  // rate units (see flow_backend.cpp); 0 until the first filling
    int64_t finish_ps = 0;
    SimTime latency;
    uint32_t version = 0;  // completion-heap entries of other versions are stale
    uint32_t active_index = 0;
    uint64_t mark = 0;  // recomputation that took it in
    bool frozen = false;
    std::vector<uint32_t> slots;  // link slots of the path
    std::vector<uint32_t> where;  // its position in each slot's flow list
  };
  struct SlotState {
    int64_t capacity = 0;  // rate units
    int64_t residual = 0;
    uint32_t unfrozen = 0;
    uint32_t list_begin = 0;  // this recomputation's affected flows on the link, in list_
    uint32_t list_size = 0;
    uint64_t mark = 0;
    std::vector<uint32_t> flows;  // flows transmitting on the link
  };
  struct Completion {
    int64_t finish_ps;
    uint32_t flow;
    uint32_t version;
    bool operator>(const Completion& o) const {
      return finish_ps != o.finish_ps ? finish_ps > o.finish_ps : flow > o.flow;
    }
  };

  // A message sent in order waiting for its pair's previous one to leave.
  struct Waiting {
    uint64_t bytes = 0;
    uint64_t token = 0;
    uint32_t next = kNil;
  };
  struct Connection {   // a pair with a message transmitting
    IndexFifo waiting;  // its waiting messages, oldest first (through Waiting::next)
  };

  void handle_event(const Event& event) override;
  void send_now(Rank src, Rank dst, uint64_t bytes, uint64_t token, uint64_t pair);
  // Starts the next message of every connection whose message left in this batch.
  void start_waiting();
  uint32_t take_flow();
  void start(uint32_t index, const Path& path, uint64_t bytes, uint64_t token);
  void seed(uint32_t slot);
  void depart(uint32_t index);
  void recompute();
  void fill(int64_t level);
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
  // Changes since the last recomputation: links to start the search from, flows that arrived,
  // and the smallest rate of the flows that left.
  std::vector<uint32_t> seeds_;
  std::vector<uint32_t> arrived_;
  int64_t departed_level_ = INT64_MAX;
  // Scratch of recompute(): visited links, affected flows, affected flows per link, the heap.
  std::vector<uint32_t> visited_;
  std::vector<uint32_t> affected_;
  std::vector<uint32_t> list_;
  std::vector<std::pair<int64_t, uint32_t>> heap_;
  std::vector<Completion> completions_;  // min-heap, stale entries dropped lazily
  int64_t scheduled_ps_ = -1;            // the kComplete event pending, -1 = none
  Path path_;
  uint64_t epoch_ = 0;
  uint64_t generation_ = 0;
  FlowLabels labels_;
  uint64_t recomputations_ = 0;
  uint64_t flows_visited_ = 0;
  uint64_t in_flight_ = 0;
  // In-order connections: pairs with a message transmitting, waiting messages (pooled), and the
  // pairs whose message left in the current batch of departures.
  std::unordered_map<uint64_t, Connection> connections_;
  std::vector<Waiting> waiting_;
  std::vector<uint32_t> free_waiting_;
  std::vector<uint64_t> left_pairs_;
  uint64_t waiting_count_ = 0;
  bool recompute_pending_ = false;
  bool dirty_ = false;
  bool incremental_ = true;
  bool in_order_ = true;
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
  FlowLabels labels_;
  uint64_t in_flight_ = 0;
};

// The lone-flow time of `bytes` over `path`: sum of latencies + bytes / smallest bandwidth.
SimTime path_delay(const Fabric& fabric, const Path& path, uint64_t bytes);

// Backends over a fabric: "flow", "congestion-aware" (graph_congestion_backend.h) or
// "analytical". Error (kInvalidArgument) for other names.
Expected<std::unique_ptr<NetworkBackend>> make_fabric_backend(std::string_view name,
                                                              EventEngine& engine,
                                                              std::shared_ptr<const Fabric> fabric,
                                                              const Topology& logical);

}  // namespace orrery::net
