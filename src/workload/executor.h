// workload/executor.h: every rank runs its Chakra trace, as ASTRA-sim's workload layer does.
//
// A node issues when its dependencies have completed (DependencyTracker) and its issue slot is
// free: each rank has one host-CPU slot, one accelerator-compute slot and one accelerator-
// communication slot (collectives and sends); receives, metadata and memory nodes take none. Ready
// nodes are considered in ascending id order whenever something completes. Compute is replayed
// from duration_micros or modelled by the roofline; collectives and point-to-point messages go to
// the system layer; memory nodes go to the remote memory (memory/remote_memory.h).
//
// One executor per simulation. It is the SystemListener of the system layer (bind() once).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <vector>

#include "chakra/dependency_graph.h"
#include "chakra/trace_graph.h"
#include "core/error.h"
#include "core/event_engine.h"
#include "memory/remote_memory.h"
#include "memory/remote_memory_config.h"
#include "system/compute_model.h"
#include "system/system_layer.h"

namespace orrery::workload {

using net::Rank;

// How a rank's accelerator computes: the roofline's ceiling, or a preset's compute model.
struct ComputeProfile {
  bool roofline = false;        // GPU compute from num_ops and tensor_size
  double peak_perf_tflops = 0;  // roofline ceiling
  double local_mem_bw = 0;      // bytes per ns (decimal GB/s)
  std::optional<sys::ComputeModel> compute_model;
};

struct ExecutorOptions {
  chakra::DependencyKinds dependencies = chakra::DependencyKinds::kBoth;
  bool roofline = false;        // GPU compute from num_ops and tensor_size
  double peak_perf_tflops = 0;  // roofline ceiling
  double local_mem_bw = 0;      // bytes per ns (decimal GB/s): roofline and local memory
  bool replay_only = false;     // every node takes its recorded duration, nothing is simulated
  double compute_scale = 1.0;   // multiplies compute times (--compute-scale)
  double comm_scale = 1.0;      // multiplies communication sizes (--comm-scale)
  // A hardware preset's per-operation compute model (system/compute_model.h). When set it times
  // GPU compute that has num_ops in place of the roofline; unset (ASTRA-sim system files), the
  // roofline above is exactly ASTRA-sim's.
  std::optional<sys::ComputeModel> compute_model;
  memory::RemoteMemoryConfig memory;
  // Perturbations (sim/perturbation.h): a factor on every compute node's time by rank (empty:
  // none), and noise: a factor exp(sigma z - sigma^2 / 2), z standard normal drawn per (seed,
  // rank, node id) (core/counter_random.h), mean 1 (sigma 0: none).
  std::vector<double> compute_factor;
  double noise_sigma = 0;
  uint64_t noise_seed = 1;
  // Mixed hardware: rank r computes by profiles[profile_of[r] - 1] when profile_of[r] > 0, by the
  // fields above otherwise (and when profile_of is shorter than the ranks).
  std::vector<ComputeProfile> profiles;
  std::vector<uint16_t> profile_of;
};

// The roofline time of a compute node: num_ops / min(peak, memory bandwidth x intensity), with
// intensity = num_ops / tensor_size, truncated to whole ns; zero when `bytes` is 0. `mem_bw` is in
// bytes per ns (decimal GB/s). The executor times GPU compute with it when the system enables the
// roofline; LIBRA's trace-derived workloads (design/libra_workload.h) use it too.
SimTime roofline_time(uint64_t flops, uint64_t bytes, double peak_tflops, double mem_bw);

// What a rank spends time on. Every issued node that takes time is one activity.
enum class Activity : uint8_t { kCompute, kCpu, kCollective, kSend, kRecv, kMemory };
inline constexpr size_t kActivityCount = 6;
std::string_view activity_name(Activity activity);

// One node's activity on one rank, reported when it ends.
struct ActivityRecord {
  Rank rank = 0;
  chakra::NodeIndex node = 0;
  Activity activity = Activity::kCompute;
  SimTime start;
  SimTime end;
};

// Hears every activity as it ends, and optionally as it starts (timelines, memory, statistics).
// Called from inside engine events; must not call back into the simulation.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  virtual void on_activity(const ActivityRecord& record, const chakra::TraceGraph& graph) = 0;
  // Called when an activity begins (record.end == record.start). Optional.
  // The ranks whose activities this observer reads; empty (the default): every rank, which keeps
  // a run out of class mode. An observer that names its ranks lets rank classes run: it is then
  // told, before the first activity, which simulated rank stands for each rank
  // (on_representatives), and hears a watched rank's activities as its representative's.
  virtual std::span<const Rank> watched_ranks() const { return {}; }
  // representative_of[r] is the rank whose activities stand for rank r's (called in class mode
  // only, once, before the run).
  virtual void on_representatives(const std::vector<Rank>& representative_of) {
    (void)representative_of;
  }
  virtual void on_activity_start(const ActivityRecord& record, const chakra::TraceGraph& graph) {
    (void)record;
    (void)graph;
  }

 protected:
  RunObserver() = default;
  RunObserver(const RunObserver&) = default;
  RunObserver& operator=(const RunObserver&) = default;
};

// What one rank did.
struct RankResult {
  Rank rank = 0;
  bool finished = false;
  SimTime finish;        // when its last node completed
  SimTime gpu_compute;   // sum of accelerator compute node times
  SimTime cpu_compute;   // sum of host CPU node times
  SimTime memory;        // sum of memory node times
  SimTime comm_active;   // time with at least one communication operation in flight
  SimTime comm_exposed;  // ... while no compute ran (communication not hidden by compute)
  SimTime busy;          // time with anything in flight; idle = finish - busy
  uint64_t nodes = 0;
  uint64_t completed = 0;
  uint64_t collectives = 0;
  uint64_t sends = 0;
  uint64_t recvs = 0;
  // ASTRA-sim's "exposed communication": finish minus accelerator compute.
  SimTime astra_exposed_comm() const { return finish - gpu_compute; }
  SimTime idle() const { return finish - busy; }
};

class WorkloadExecutor final : public sys::SystemListener, private EventHandler {
 public:
  // `graphs` (one per rank, index = rank) must outlive the executor; `groups` maps a pg_name to a
  // system-layer group id ("" is group 0). Registers with `engine`. Build phase.
  WorkloadExecutor(EventEngine& engine, std::vector<const chakra::TraceGraph*> graphs,
                   std::map<std::string, uint32_t> groups, ExecutorOptions options);
  ~WorkloadExecutor() override;
  WorkloadExecutor(const WorkloadExecutor&) = delete;
  WorkloadExecutor& operator=(const WorkloadExecutor&) = delete;

  // Connects the system layer. Once, before start().
  void bind(sys::SystemLayer& system) { system_ = &system; }
  // Adds an observer of activities (optional; several may be added). Before start().
  void add_observer(RunObserver& observer) { observers_.push_back(&observer); }
  // Issues every rank's first ready nodes at time zero (rank order). Call once, outside events.
  void start();

  // The first error met while running (a bad attribute, an unknown group, ...), if any.
  const std::optional<Error>& failure() const { return failure_; }
  bool all_finished() const { return finished_ranks_ == ranks_.size(); }
  size_t finished_count() const { return finished_ranks_; }
  // After the run: one entry per rank.
  std::vector<RankResult> results() const;
  // After a run that did not finish: what each stuck rank waits for, at most `limit` lines.
  std::vector<std::string> describe_stuck(size_t limit) const;

  // sys::SystemListener
  void on_collective_done(Rank rank, uint64_t cookie) override;
  void on_send_done(Rank rank, uint64_t cookie) override;
  void on_recv_done(Rank rank, uint64_t cookie) override;

 private:
  enum class Slot : uint8_t { kCpu, kCompute, kComm, kNone };
  using Waiting =
      std::priority_queue<std::pair<uint64_t, chakra::NodeIndex>,
                          std::vector<std::pair<uint64_t, chakra::NodeIndex>>, std::greater<>>;

  // What the ranks whose graphs share a structure share: attribute names resolved once (no
  // hashing of names on the hot path), and what a node's attribute values decide (its slot, its
  // compute time) worked out once for every rank that does not patch the node. The ranks of a
  // pipeline stage run one program: without this, each looked up the same attributes of the same
  // nodes again, a tenth of a full simulation of the 1,024-rank example.
  struct Keys {
    explicit Keys(const chakra::TraceGraph& graph);
    chakra::AttributeKey is_cpu_op, num_ops, tensor_size, comm_type, comm_size, pg_name,
        involved_dim, comm_priority, comm_dst, comm_src, comm_tag, gemm_m, gemm_n, gemm_k,
        gemm_batch;
    std::vector<uint8_t> slots;       // per node: its Slot, kSlotUnknown until first asked
    std::vector<int64_t> compute_ps;  // per node: its compute time in ps, -1 until first asked
    // The same beside communication (compute model comm_sms); empty until first asked.
    std::vector<int64_t> communicating_ps;
  };
  // Per node, one byte: issue state (2 bits), slot (3 bits, kSlotUnknown until first asked),
  // activity while in flight (3 bits, kNoActivity otherwise).
  struct NodeFlags {
    uint8_t issued : 2;
    uint8_t slot : 3;
    uint8_t activity : 3;
  };
  struct RankState {
    const chakra::TraceGraph* graph = nullptr;
    Keys* keys = nullptr;  // shared with the ranks of the same structure and compute profile
    const ComputeProfile* profile = nullptr;
    std::shared_ptr<const chakra::DependencyGraph> deps;
    std::unique_ptr<chakra::DependencyTracker> tracker;
    bool busy[3] = {false, false, false};
    Waiting waiting[3];
    std::vector<NodeFlags> flags;
    // Nodes with an activity in flight and when it began (a handful at a time).
    std::vector<std::pair<chakra::NodeIndex, SimTime>> started;
    // pg_name string ids of this rank's graph already resolved to engine groups.
    std::vector<std::pair<chakra::StringId, uint32_t>> group_cache;
    RankResult result;
    uint32_t active[kActivityCount] = {};
    SimTime last_change;
    // The GPU kernel in flight whose time depends on communication (compute model comm_sms; one
    // at a time: the compute slot). Its work goes at the rate of `fast` or, while the rank
    // communicates, of `slow`; each change of that retimes the rest of it.
    struct Kernel {
      chakra::NodeIndex node = 0;
      bool tracked = false;
      bool slowed = false;  // running beside communication now
      double left = 1;      // fraction of its work left at `since`
      SimTime start, since, end;
      SimTime fast, slow;  // the whole kernel alone and beside communication
      SimTime counted;     // what gpu_compute got at issue
    } kernel;
  };

  void handle_event(const Event& event) override;
  void pump(Rank rank);
  Slot slot_of(RankState& state, chakra::NodeIndex node) const;
  Slot compute_slot(const RankState& state, chakra::NodeIndex node) const;
  // The engine group of the collective `node` (its pg_name), or an error naming the node.
  Expected<uint32_t> group_of(RankState& state, chakra::NodeIndex node);
  // Issues `node`; returns false (and records failure_) on an error.
  bool issue(Rank rank, chakra::NodeIndex node, Slot slot);
  void complete(Rank rank, chakra::NodeIndex node);
  // Brings the rank's time accounting up to now; call before any change of what runs.
  void account(RankState& state);
  void begin(RankState& state, chakra::NodeIndex node, Activity activity);
  // Ends the node's activity (if it has one) and tells the observers.
  void end(Rank rank, chakra::NodeIndex node);
  void fail(Error error);
  // `communicating`: the time beside communication (the compute model with comm_sms held).
  Expected<SimTime> compute_time(const RankState& state, chakra::NodeIndex node, bool cpu,
                                 bool communicating = false) const;
  // `time` of `node` on `rank` with the rank's compute factor and the node's noise.
  SimTime perturbed(Rank rank, chakra::NodeIndex node, SimTime time) const;
  // `model`: the compute model to time by instead of the profile's (nullptr: the profile's).
  Expected<SimTime> unscaled_compute_time(const RankState& state, chakra::NodeIndex node, bool cpu,
                                          const sys::ComputeModel* model = nullptr) const;
  static bool communicating(const RankState& state);
  // The rank's communication started or stopped: the tracked kernel's rest goes at the other rate.
  void retime_kernel(RankState& state);
  // comm_size x --comm-scale; an Error when it passes kMaxBytes (core/checked.h), to which the
  // caller adds the node's place.
  Expected<uint64_t> scaled_bytes(uint64_t bytes) const;

  EventEngine& engine_;
  HandlerId id_{};
  sys::SystemLayer* system_ = nullptr;
  std::vector<RankState> ranks_;
  std::vector<std::unique_ptr<Keys>> keys_;  // one per distinct graph structure and profile
  std::vector<ComputeProfile> profiles_;     // 0: the options' own fields, then options_.profiles
  std::vector<std::pair<uint64_t, chakra::NodeIndex>> candidates_;  // pump's scratch
  std::vector<RunObserver*> observers_;
  std::map<std::string, uint32_t> groups_;
  ExecutorOptions options_;
  memory::RemoteMemory remote_memory_;  // built from options_.memory: declared after it
  std::optional<Error> failure_;
  size_t finished_ranks_ = 0;
  bool perturbed_ = false;   // a compute factor is not 1, or there is noise
  bool comm_slows_ = false;  // a profile's compute model holds SMs while communicating
};

}  // namespace orrery::workload
