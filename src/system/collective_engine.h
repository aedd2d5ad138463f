// system/collective_engine.h: collectives and point-to-point messages turned into timed network
// messages, as ASTRA-sim 2.x's system layer does (docs/models/system.md).
//
// A collective issued by a rank is cut into chunks (preferred-dataset-splits); each chunk is a
// stream that runs one phase per network dimension it uses (hierarchical execution), waiting in a
// per-dimension queue that runs at most active-chunks-per-dimension streams at once, ordered by the
// scheduling policy. A phase runs a CollectiveAlgorithm (collective_algorithm.h; ring, direct,
// halving-doubling, double binary tree, in-switch, ... one per file in system/algorithms/), a
// state machine that tells the engine what to send to whom and what a receive does; every
// received message costs the endpoint delay, and a reducing receive also 3 x bytes / local-mem-bw.
// Messages go where the PeerModel (peer_model.h) says: through the NetworkBackend to their
// destination when every rank is simulated, or mirrored when one rank stands for all.
// Ranks never share state: a message is matched at its destination by (collective, chunk, phase,
// source) whatever the arrival order, and collectives are matched across the ranks of a group by
// their issue order in that group.
//
// A collective type given as a custom graph (`*-implementation-custom`) runs that Chakra graph
// instead: every rank executes its own file (<prefix>.<position in group>.et) of sends, receives
// and compute, all ready nodes at once, and the collective completes with the graph's last node.
//
// Broadcast, reduce, gather, scatter and barrier, which ASTRA-sim rejects, run as flat algorithms
// over the group (a pipelined chain rooted at the group's first rank for broadcast and reduce,
// direct messages to or from it for gather and scatter, a dissemination barrier).
//
// One engine per simulation; it registers with the EventEngine and is the backend's delivery
// listener. Single-threaded, deterministic.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "chakra/dependency_graph.h"
#include "chakra/trace_graph.h"
#include "core/error.h"
#include "core/event_engine.h"
#include "core/slot_pool.h"
#include "core/time.h"
#include "network/network_backend.h"
#include "system/collective.h"
#include "system/collective_algorithm.h"
#include "system/match_table.h"
#include "system/mirror_traffic.h"
#include "system/peer_model.h"
#include "system/system_config.h"
#include "system/system_layer.h"

namespace orrery::sys {

using net::Rank;

// What one collective did, for reports (one record per collective instance of a group).
struct CollectiveRecord {
  CollectiveType type = CollectiveType::kAllReduce;
  uint32_t group = 0;
  uint64_t sequence = 0;  // issue order within the group
  uint64_t bytes = 0;
  uint32_t ranks = 0;
  SimTime first_issue;  // the earliest rank's issue
  SimTime last_finish;  // the latest rank's completion
  uint64_t first_node = 0;
};

// Queues per dimension above this buy nothing (each runs at least one chunk, and a collective
// has at most a few hundred) and cost a list per queue and rank.
inline constexpr uint32_t kMaxQueuesPerDim = 64;

struct EngineOptions {
  // Multiplies the endpoint delay when the configuration sets one (ASTRA-sim's --injection-scale).
  double injection_scale = 1.0;
  // Mirror mode (sim/symmetry.h): only rank 0 runs, standing for every rank of a symmetric run.
  // Its messages do not go through the network backend: each one it sends is timed by the
  // analytical model, and its mirror image (what the peer it receives from sends it) arrives then.
  bool mirror = false;
  // In mirror mode, send the representative's messages through the network backend instead (the
  // congestion-aware backend when every link carries only its own rank's messages, so the
  // representative's links see what every link of their class sees); the delivery of what it sends
  // stands for the arrival of what it receives.
  bool mirror_through_network = false;
  net::TimeRounding rounding = net::TimeRounding::kAstraSim;  // for mirror-mode delays
  // Who is simulated, when neither of the above: a model of the caller's (peer_model.h). Set, it
  // replaces `mirror` and `mirror_through_network`.
  std::shared_ptr<PeerModel> peers;
  // Queues per network dimension and rank (ASTRA-sim's --num-queues-per-dim): chunk c of a
  // collective waits in queue c mod n of its phase's dimension, each queue running
  // ceil(active-chunks-per-dimension / n) streams at once; the second half of the queues runs its
  // rings anticlockwise. Under localBWAware the reduce-scatter half of an all-reduce takes the
  // first half of the queues and the all-gather half the second, so that one chunk's all-gather
  // never waits behind the next chunk's reduce-scatter (with one queue both share it, as in
  // ASTRA-sim, and ranks that reach it at different times can order them differently: a
  // deadlock). ASTRA-sim's allocator continues from collective to collective on each rank; here
  // every collective starts at queue 0, so that ranks of different groups agree.
  uint32_t queues_per_dim = 1;
};

// The system layer of ASTRA-sim's model (system_layer.h).
class CollectiveEngine final : public SystemLayer,
                               private EventHandler,
                               private net::DeliveryListener {
 public:
  // Checks the configuration against the network (one implementation per dimension for every
  // collective type; local-mem-bw present) and registers with `engine`. Build phase.
  static Expected<std::unique_ptr<CollectiveEngine>> create(EventEngine& engine,
                                                            net::NetworkBackend& network,
                                                            const SystemConfig& config,
                                                            EngineOptions options,
                                                            SystemListener& listener);
  ~CollectiveEngine() override;
  CollectiveEngine(const CollectiveEngine&) = delete;
  CollectiveEngine& operator=(const CollectiveEngine&) = delete;

  // Declares a communicator group (ranks ascending, each below the rank count) and returns its id.
  // Group 0, every rank, exists from the start. Build phase.
  uint32_t add_group(std::vector<Rank> ranks, std::string name);
  uint32_t group_count() const { return static_cast<uint32_t>(groups_.size()); }

  // Starts a collective at `rank` now. Error when `rank` is not in the group, or when the group's
  // other ranks issued a different collective (type or size) at the same position of their order.
  // Any time, also inside events.
  Status issue_collective(Rank rank, const CollectiveRequest& request) override;

  // Point-to-point: a send completes when its message arrives at `dst`; a receive when its message
  // has arrived (at once if it came earlier). Messages match on (src, dst, tag) in issue order; a
  // size that differs between a send and its receive is an error reported by failure().
  void issue_send(Rank src, Rank dst, int64_t tag, uint64_t bytes, uint64_t cookie,
                  uint64_t node_id) override;
  void issue_recv(Rank dst, Rank src, int64_t tag, uint64_t bytes, uint64_t cookie,
                  uint64_t node_id) override;

  // The first error met inside an event (the run stopped there), if any.
  const std::optional<Error>& failure() const { return failure_; }

  // After a run that did not finish: one line per operation still waiting, at most `limit`.
  std::vector<std::string> describe_pending(size_t limit) const;

  // One record per collective instance, in issue order of first appearance.
  const std::vector<CollectiveRecord>& records() const { return records_; }

  uint64_t messages_sent() const { return messages_sent_; }
  // Mirror mode: the traffic of every rank, recorded from the representative's messages (empty
  // when every rank is simulated).
  const MirrorTraffic& mirror_traffic() const {
    const MirrorTraffic* traffic = peers_->traffic();
    return traffic != nullptr ? *traffic : no_traffic_;
  }

 private:
  friend class PhaseRun;

  // Events the engine schedules for itself; `arg` is a stream id unless noted.
  enum EventKind : uint16_t {
    kBundle = 1,         // endpoint delay over, no reduction: the algorithm continues
    kBundleReduce = 2,   // endpoint delay over, a reduction follows
    kReduced = 3,        // reduction over: the algorithm continues
    kReceived = 4,       // a receive posted after its message arrived
    kP2pRecvDone = 5,    // a point-to-point receive posted after its message arrived (arg: message)
    kDoneNow = 6,        // a collective with nothing to do (arg: RankCollective)
    kCustomWork = 7,     // a custom collective's compute node finished (arg: run << 32 | node)
    kMirrorArrival = 8,  // a message on the peer model's timer arrives (arg: message)
  };

  struct Group {
    std::string name;
    std::vector<Rank> ranks;
    std::unordered_map<Rank, uint32_t> position;  // empty for group 0 (position = rank)
    uint32_t aligned_dims = 0;     // dimensions the group spans exactly; 0 when not aligned
    uint32_t simulated = 0;        // members the peer model runs
    std::vector<uint64_t> issued;  // per position: collectives issued so far
  };

  // One phase of a collective: an algorithm over the members of one dimension (or of the whole
  // group). The same for every rank and chunk of the collective.
  enum class QueueHalf : uint8_t { kAll, kFirst, kLast };
  struct Phase {
    PhaseOp op = PhaseOp::kAllReduce;
    bool anticlockwise = false;
    uint32_t dim = 0;                  // network dimension, or kFlat
    uint32_t window = 0;               // the configured window (directN)
    QueueHalf half = QueueHalf::kAll;  // which of the dimension's queues its chunks take
    uint64_t size = 0;                 // input bytes of the phase
    const CollectiveAlgorithm* algorithm = nullptr;
  };

  struct Instance {
    uint32_t group = 0;
    uint64_t sequence = 0;
    CollectiveType type = CollectiveType::kAllReduce;
    uint64_t bytes = 0;
    uint32_t involved_dims = 0;
    uint32_t issued = 0;
    uint32_t finished = 0;
    Rank first_rank = 0;
    uint64_t first_node = 0;
    uint32_t record = 0;
    // Chunks and phases, planned once by the first rank to issue it.
    uint64_t chunks = 0;
    uint32_t first_phase = 0;  // into phases_
    uint32_t phase_count = 0;
  };

  // A collective at one rank: its chunks' streams count down to completion.
  struct RankCollective {
    uint32_t instance = 0;
    Rank rank = 0;
    uint32_t remaining = 0;
    uint64_t cookie = 0;
    uint64_t node_id = 0;
  };

  // One chunk of a collective at one rank, running its phases one after the other. Trivially
  // copyable: the running algorithm's state lives in `run.state`.
  struct Stream {
    Rank rank = 0;
    uint32_t owner = 0;  // RankCollective index
    uint32_t instance = 0;
    uint32_t position = 0;  // the rank's position in the group
    int64_t priority = 0;
    uint32_t queue = 0;
    bool running = false;
    uint8_t phase_index = 0;
    AlgorithmStream run;
  };

  // Messages of one in-network collective step gathering at one switch.
  struct SwitchKey {
    uint32_t instance;
    uint32_t chunk;
    uint32_t phase;
    uint32_t switch_node;
    bool operator==(const SwitchKey&) const = default;
  };
  struct SwitchKeyHash {
    size_t operator()(const SwitchKey& key) const;
  };
  // The source of a message sent down by a switch, in MatchKey.src.
  static constexpr Rank kFromSwitch = UINT32_MAX;

  // Point-to-point messages match within a scope: the workload's, or one custom collective's.
  static constexpr uint32_t kWorkloadScope = UINT32_MAX;
  static constexpr uint32_t kNoRun = UINT32_MAX;
  struct P2pKey {
    Rank src;
    Rank dst;
    int64_t tag;
    uint32_t scope;
    bool operator==(const P2pKey&) const = default;
  };
  struct P2pKeyHash {
    size_t operator()(const P2pKey& key) const;
  };
  struct P2pEndpoint {
    uint64_t bytes;
    uint64_t cookie;
    uint64_t node_id;
    uint32_t run;  // the custom run that waits for it, or kNoRun for the workload
  };
  struct P2pEntry {
    std::deque<P2pEndpoint> arrived;  // messages delivered before their receive was posted
    std::deque<P2pEndpoint> posted;   // receives waiting for their message
    std::deque<P2pEndpoint> sent;     // sends not yet delivered (for reports)
  };

  struct Message {
    bool p2p = false;
    // An in-network collective's hop: up to the switch of `dim`, or down from it.
    bool switch_up = false;
    bool switch_down = false;
    uint32_t dim = 0;
    uint64_t down_bytes = 0;  // switch_up: what the switch sends each member once all arrived
    Rank src = 0;
    Rank dst = 0;
    Rank sender = 0;  // point-to-point: the simulated rank whose send completes on delivery
    uint64_t bytes = 0;
    // collective
    uint32_t instance = 0;
    uint32_t chunk = 0;
    uint32_t phase = 0;
    // point-to-point
    int64_t tag = 0;
    uint64_t cookie = 0;
    uint64_t node_id = 0;
    uint32_t scope = kWorkloadScope;
    uint32_t run = kNoRun;  // the sending custom run (on delivery) or receiving one (kP2pRecvDone)
  };

  // A custom collective's graph for one group position, loaded once and shared by its runs.
  struct CustomGraph {
    chakra::TraceGraph graph;
    chakra::DependencyGraph deps;
  };
  // One rank running a custom collective.
  struct CustomRun {
    uint32_t owner = 0;  // RankCollective
    uint32_t instance = 0;
    const CustomGraph* graph = nullptr;
    std::unique_ptr<chakra::DependencyTracker> tracker;
    uint64_t remaining = 0;
  };

  static constexpr uint32_t kFlat = kFlatPhase;

  CollectiveEngine(EventEngine& engine, net::NetworkBackend& network, const SystemConfig& config,
                   EngineOptions options, SystemListener& listener);

  void handle_event(const Event& event) override;
  void on_delivered(uint64_t token) override;

  // Scheduling of streams in per-dimension queues.
  // The queue of `stream` for its current phase, and whether that queue runs anticlockwise.
  std::pair<uint32_t, bool> lane(const Stream& stream) const;
  void enqueue(uint32_t stream);
  void fill(uint32_t queue);
  void start_phase(uint32_t stream);
  void finish_phase(uint32_t stream);
  const Phase& phase_of(const Stream& stream) const {
    return phases_[instances_[stream.instance].first_phase + stream.phase_index];
  }
  PhaseRun run_of(uint32_t stream_id) {
    return PhaseRun(*this, stream_id, streams_[stream_id].run);
  }

  // What algorithms ask for (through PhaseRun).
  void bundle(uint32_t stream, bool reduce, uint64_t bytes);
  Rank member(const Stream& stream, uint32_t index) const;
  const NcclFabric& nccl_fabric_of(const Stream& stream);
  void send_message(uint32_t stream, uint32_t to_index, uint32_t mirror_from_index, uint64_t bytes,
                    MirrorPattern pattern);
  // A fresh Message slot; its index is the network token.
  uint32_t new_message() { return take_slot(messages_, free_messages_); }
  void post_receive(uint32_t stream, uint32_t from_index);
  void post_receive_from(uint32_t stream, Rank source);
  // In-network collectives: a member sends its data up; the switch answers every member once
  // all have arrived.
  void send_up(uint32_t stream, uint64_t up_bytes, uint64_t down_bytes);
  void on_switch_arrival(const Message& message);
  // Sends the switch hop in messages_[token] as the peer model says.
  void switch_hop(uint32_t token, Rank rank, bool up);

  // The phases of `instance` for chunks of `chunk_bytes`, appended to phases_.
  void plan_phases(Instance& instance, uint64_t chunk_bytes);

  // Custom collectives (collective_engine_custom.cpp).
  const std::vector<std::string>& custom_prefixes(CollectiveType type) const;
  Status start_custom(uint32_t owner, uint32_t position, const std::string& prefix);
  void custom_pump(uint32_t run);
  void custom_node_done(uint32_t run, chakra::NodeIndex node);
  void p2p_send(Rank src, Rank dst, int64_t tag, uint32_t scope, uint64_t bytes, uint64_t cookie,
                uint64_t node_id, uint32_t run);
  void p2p_recv(Rank dst, Rank src, int64_t tag, uint32_t scope, uint64_t bytes, uint64_t cookie,
                uint64_t node_id, uint32_t run);
  void p2p_completed(Rank rank, uint32_t run, uint64_t cookie, bool send);
  void collective_finished(uint32_t owner);
  const std::vector<Algorithm>& implementations(PhaseOp op) const;
  void fail(Error error);

  EventEngine& engine_;
  net::NetworkBackend& network_;
  const net::Topology& topology_;
  SystemConfig config_;
  SystemListener& listener_;
  HandlerId id_{};
  SimTime endpoint_delay_;
  double local_mem_bw_ = 0;  // bytes per ns
  int64_t priority_counter_ = 0;

  std::vector<Group> groups_;
  std::vector<Instance> instances_;
  std::vector<Phase> phases_;  // every instance's phases, in instance order
  std::unordered_map<uint64_t, uint32_t> instance_index_;  // (group, sequence) -> instance
  std::vector<RankCollective> rank_collectives_;
  std::vector<uint32_t> free_rank_collectives_;
  std::vector<Stream> streams_;
  std::vector<uint32_t> free_streams_;
  // Bytes of the reductions whose endpoint delay is running, in the order they were asked for:
  // every endpoint delay has the same length, so they end in that order too.
  std::deque<uint64_t> reductions_;
  // Per (simulated rank, queue): stream ids in order, and how many run. Queue q of the rank in
  // peer slot s is s * queues_per_rank_ + q; the last queue of a rank serves flat phases.
  uint32_t queues_per_rank_ = 0;
  std::vector<std::vector<uint32_t>> queues_;
  std::vector<uint32_t> running_;
  MatchTable matches_;
  std::unordered_map<SwitchKey, uint32_t, SwitchKeyHash> switch_arrivals_;
  std::unordered_map<P2pKey, P2pEntry, P2pKeyHash> p2p_;
  // nccl_fabric of each member list asked for: a flat phase's group (the key's top bit set) or a
  // dimension's members (the dimension and the first member's rank).
  std::unordered_map<uint64_t, NcclFabric> nccl_fabrics_;
  std::vector<Message> messages_;
  std::vector<uint32_t> free_messages_;
  std::vector<CollectiveRecord> records_;
  std::map<std::pair<std::string, uint32_t>, std::unique_ptr<CustomGraph>> custom_graphs_;
  std::vector<CustomRun> custom_runs_;
  std::vector<uint32_t> free_custom_runs_;
  std::optional<Error> failure_;
  uint64_t messages_sent_ = 0;
  EngineOptions options_;
  std::shared_ptr<PeerModel> peers_;
  MirrorTraffic no_traffic_;
};

}  // namespace orrery::sys
