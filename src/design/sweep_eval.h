// design/sweep_eval.h: one sweep point evaluated: a generated workload on a scenario, simulated.
//
// A point is decided in this order, the cheap checks first: the rules (sweep_space.h), the cost
// budget, the memory (gen/memory_estimate.h with the offload set; docs/models/sweep.md), and only
// then the simulation: the workload generated in memory (gen::build_llm_traces or
// gen::build_dlrm_traces), a Scenario of that trace set on the point's network (ASTRA-sim
// dimensions, cut at the plan's groups: split_network below) and system (roofline at peak x
// efficiency with the HBM bandwidth), run by sim::simulate, which picks the fastest exact mode it
// can prove (one representative rank for symmetric runs; classes of ranks as sim/ learns them). The
// result depends on the point alone.
//
// Points that share a workload (the same model and plan on clusters that differ in anything but
// the accelerator count) form a *unit*: evaluate_unit generates the trace set once and builds one
// scenario per distinct network and system from it, sharing the trace set; points that differ
// only in what does not change the simulation (HBM capacity, the expansion tier, costs) share one
// simulation. evaluate_unit gives exactly what evaluate_point gives for each point.
//
// The breakdown is measured on the slowest rank of those watched (one rank per pipeline stage):
// its finish splits into compute, communication not hidden by compute per parallelism (tensor,
// context, expert, pipeline sends, data; when several are in flight at once the time goes to the
// first in that order), and bubble (waiting for a pipeline receive or idle). The offload time of
// the expansion tier (sweep_cost.h) comes on top: iteration = simulated time + offload.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "design/sweep_file.h"
#include "design/sweep_space.h"

namespace orrery::design {

enum class PointStatus : uint8_t { kOk, kRejected, kFailed };
std::string_view point_status_name(PointStatus status);

// Exposed communication is split by the parallelism of the group it ran on.
enum class CommKind : uint8_t { kTensor, kContext, kExpert, kPipeline, kData };
inline constexpr size_t kCommKinds = 5;
std::string_view comm_kind_name(CommKind kind);  // "tp", "cp", "ep", "pp", "dp"

struct PointResult {
  uint64_t id = 0;
  PointStatus status = PointStatus::kOk;
  std::string reason;     // rejected or failed: why
  std::string offloaded;  // the set moved to the expansion tier ("none", "optimizer+weights", ...)
  double iteration_ns = 0;  // simulated time + offload
  double compute_ns = 0;
  std::array<double, kCommKinds> exposed_ns{};
  double bubble_ns = 0;
  double offload_ns = 0;
  std::vector<double> dim_utilization;  // per network dimension, over the simulated time
  uint64_t hbm_bytes = 0;               // per accelerator at the fullest stage, after offload
  uint64_t need_bytes = 0;              // the same without offload
  uint64_t expansion_bytes = 0;         // per accelerator in the expansion tier
  double cost = 0;
  double throughput = 0;  // sequences (DLRM: samples) per second
  uint64_t events = 0;    // simulation events (0 when rejected)
  bool operator==(const PointResult&) const = default;
};

// The decision a point gets without simulating: a rejection (rules, budget, memory), else nothing
// (the point needs its simulation). Cheap: no trace is built.
std::optional<PointResult> precheck_point(const SweepSpec& spec, const SweepPoint& point);

// Points sharing a workload have the same key.
std::string workload_key(const SweepSpec& spec, const SweepPoint& point);

// Evaluates every point of `points` (one unit: equal workload keys, each passing precheck),
// generating the workload once. `threads` builds the trace set. Results in the order given.
std::vector<PointResult> evaluate_unit(const SweepSpec& spec,
                                       const std::vector<const SweepPoint*>& points,
                                       size_t threads = 1);

// One point alone: precheck, then its unit of one.
PointResult evaluate_point(const SweepSpec& spec, const SweepPoint& point, size_t threads = 1);

// A point's network as the simulation sees it: each Switch or FullyConnected dimension cut where
// a group of the plan ends inside it (`boundaries`: rank counts of the layout's nested groups,
// ascending: tp, tp x cp, tp x cp x ep, tp x cp x dp), into dimensions of the same kind,
// bandwidth and latency. A message keeps its delay (2 hops on a switch, 1 on a full mesh, in
// whichever part), and every group whose ranks the cuts align with becomes a sub-grid, so its
// collectives run dimension by dimension (the hierarchical algorithms) instead of as one ring.
// Why: ASTRA-sim's analytical model times a message whose ranks differ in several dimensions on
// the lowest (docs/network.md), so without the cuts a data-parallel ring with tp 4 on 8-GPU nodes
// would cross nodes in hops timed on the node's switch and never pay for the network between
// nodes. Rings are not cut (their hop counts would change); a cut that does not divide the
// dimension, or does not nest in the cut below it, is left out.
struct SplitNetwork {
  std::vector<DimensionPoint> dims;
  std::vector<size_t>
      original;  // per dimension of `dims`: the dimension of `network` it is part of
};
SplitNetwork split_network(const std::vector<DimensionPoint>& network,
                           const std::vector<uint64_t>& boundaries);

}  // namespace orrery::design
