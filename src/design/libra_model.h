// design/libra_model.h: the LIBRA bandwidth-allocation problem as plain data, and its time and
// cost model (docs/models/libra.md).
//
// A network of D dimensions (topology kind and size each) carries a training iteration of layers;
// each layer has three phases (forward, input gradient, weight gradient), each with a compute time
// and at most one collective over a communicator that uses a group of n_d ranks in dimension d (or
// none, -1). A collective of S bytes moves m_d bytes per NPU through dimension d (walking the
// dimensions in order, in reverse for all-gather, as LIBRA does) and takes max_d m_d / B_d; the
// iteration takes the sum of all compute times plus all collective times (no overlap). Bandwidths
// B_d are GB/s per NPU, so bytes / B is nanoseconds. The network cost is linear in B:
// N x sum_d unit_d x B_d, where unit_d is the link cost of the dimension, plus the NIC and switch
// costs for a Switch dimension (every building block's links add up to N x B per dimension).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace orrery::design {

enum class TopologyKind : uint8_t { kRing, kFullyConnected, kSwitch };
enum class CollectiveKind : uint8_t { kNone, kAllReduce, kReduceScatter, kAllGather, kAllToAll };
enum class Relation : uint8_t { kLessEqual, kGreaterEqual, kEqual };
enum class Objective : uint8_t { kPerfOpt, kPerfPerCost, kPerfOptBudget };

const char* topology_name(TopologyKind kind);
const char* collective_name(CollectiveKind kind);
const char* objective_name(Objective objective);
// Case-insensitive; "Ring", "FullyConnected" (also "FC"), "Switch".
Expected<TopologyKind> parse_topology(std::string_view name);
// Case-insensitive, hyphens and underscores ignored: "NONE", "ALLREDUCE", "all-reduce", ...
Expected<CollectiveKind> parse_collective(std::string_view name);
// "PerfOpt", "PerfPerCost", "PerfOptBudget" (case-insensitive, hyphens ignored).
Expected<Objective> parse_objective(std::string_view name);

struct Dimension {
  TopologyKind kind = TopologyKind::kRing;
  uint32_t size = 0;           // NPUs in one building block of this dimension (at least 2)
  std::string cost_dimension;  // the cost-model entry it is priced by ("" = unpriced)
};

// One phase of a layer: compute, then (optionally) a collective.
struct Phase {
  double compute_ns = 0;
  CollectiveKind collective = CollectiveKind::kNone;
  double bytes = 0;
  std::vector<int32_t> groups;  // per dimension: group size n_d, or -1 when unused
};

struct Layer {
  std::string name;
  std::array<Phase, 3> phases;  // forward, input gradient, weight gradient
};

// sum_d coefficients[d] x B_d  (relation)  rhs. `text` is how the user wrote it, for messages.
struct LinearConstraint {
  std::vector<double> coefficients;
  Relation relation = Relation::kEqual;
  double rhs = 0;
  std::string text;
};

// Unit cost ($ per GB/s) of each component of one cost dimension; 0 = not given.
struct UnitCosts {
  double link = 0;
  double switch_ = 0;
  double nic = 0;
};

// A workload to derive from a Chakra trace set or an `orrery gen llm` plan once the network is
// final (design/libra_workload.h); Problem::layers stays empty until then.
struct WorkloadSource {
  std::string trace;   // trace prefix (or one file); "" for a plan
  std::string groups;  // communicator-group file ("" = <prefix>.json when it exists)
  std::vector<std::pair<std::string, std::string>> llm;  // `orrery gen llm` options by name
  std::string system;  // system file whose roofline times compute ("" = durations only)
  uint32_t rank = 0;   // the rank whose trace stands for the iteration
  std::string where;   // where it was given ("problem.yml:7", "--trace"), for messages
};

struct Problem {
  std::vector<Dimension> dimensions;
  std::vector<Layer> layers;
  std::vector<LinearConstraint> constraints;
  std::vector<std::pair<std::string, UnitCosts>> cost_model;  // by cost dimension name
  Objective objective = Objective::kPerfOpt;
  double budget = 0;             // $, for kPerfOptBudget
  std::vector<double> baseline;  // a given network's bandwidths (empty = none)
  std::string workload_name;     // for reports
  std::optional<WorkloadSource> workload_source;
};

// The traffic of one collective: bytes per NPU through each dimension, and how many times it
// occurs in an iteration (identical collectives are merged).
struct CollectiveTraffic {
  std::vector<double> bytes_per_dim;
  double count = 0;
  std::string label;  // the first layer and phase it comes from
};

// The problem reduced to what the optimizer needs: total compute and the distinct collectives.
struct TrafficModel {
  double compute_ns = 0;
  std::vector<CollectiveTraffic> collectives;
  std::vector<double> unit_cost;  // $ per GB/s of B_d for the whole network (N x unit_d)
  uint64_t npus = 0;
};

// Bytes per NPU through each dimension for one collective of `bytes` over `groups` (LIBRA's
// walk; see the file comment). Group sizes 1 and -1 move nothing.
std::vector<double> dimension_traffic(CollectiveKind kind, double bytes,
                                      const std::vector<int32_t>& groups);

// Checks the problem (sizes, group sizes against dimensions, constraint widths, cost entries) and
// reduces it. Errors name the layer, phase, dimension or constraint.
Expected<TrafficModel> build_traffic_model(const Problem& problem);

// The time of one iteration at bandwidths `bw` (ns); +inf when a dimension that carries traffic
// has no bandwidth.
double iteration_time_ns(const TrafficModel& model, const std::vector<double>& bw);
// Communication part only (ns).
double communication_time_ns(const TrafficModel& model, const std::vector<double>& bw);
// Network cost ($) at bandwidths `bw`; 0 when no cost model was given.
double network_cost(const TrafficModel& model, const std::vector<double>& bw);
// Largest violation of the constraints at `bw` (0 when all hold), in GB/s.
double constraint_violation(const std::vector<LinearConstraint>& constraints,
                            const std::vector<double>& bw);

}  // namespace orrery::design
