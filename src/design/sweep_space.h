// design/sweep_space.h: the points of a sweep, and the rules that refuse some of them.
//
// expand_sweep() enumerates the axes of a sweep file (design/sweep_file.h) in a fixed nested order,
// outermost first: accelerators, peak TFLOP/s, efficiency, HBM capacity, HBM bandwidth, each
// network dimension's size, bandwidth and latency, the expansion tier's capacity, bandwidth and
// latency; then the plan: tp, cp, pp, dp, ep, micro-batch, sp, zero, recompute, schedule,
// virtual stages, offload (DLRM: sharding). A point's id is its index in that order, so ids do not
// depend on threads, ranks or earlier runs.
//
// A listed value is taken as given: every combination is a point, and a combination the rules
// refuse is a point whose `reason` says which rule fails. `all` expands to the values the rules
// allow given the axes before it (Calculon's search space):
//   tp   divides the accelerators, the attention and key-value heads and the MLP size
//   cp   divides accelerators / tp and the sequence
//   pp   divides accelerators / (tp cp) and the layers
//   dp   accelerators / (tp cp pp)
//   ep   divides dp and the experts (1 for dense models)
//   micro_batch  divides the sequences per data-parallel replica, global batch / dp
//   sp   false, and true when tp >= 2
//   zero 0 to 3; recompute false, true
//   schedule     1f1b, and interleaved when pp >= 2 and pp divides the micro-batches
//   virtual_stages  1 (1F1B); v >= 2 with pp v dividing the layers (interleaved)
//   offload      every subset of {optimizer, activations, weights} when there is an expansion
//                tier, else none
//   sharding     table, row, column
// When `all` leaves no value (global batch 256 over dp 512), one point stands for the branch,
// with the reason. A size of `rest` is what the other network dimensions leave.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "design/sweep_file.h"
#include "gen/llm_plan.h"

namespace orrery::design {

struct DimensionPoint {
  std::string topology;
  uint32_t size = 0;
  double bandwidth_gbps = 0;
  double latency_ns = 0;
};

struct ClusterPoint {
  uint32_t accelerators = 0;
  double peak_tflops = 0;
  double efficiency = 1;
  uint64_t hbm_bytes = 0;
  double hbm_gbps = 0;
  std::vector<DimensionPoint> network;
  uint64_t expansion_bytes = 0;  // of one device shared by spec.expansion_shared_by accelerators
  double expansion_gbps = 0;
  double expansion_latency_ns = 0;
};

struct PlanPoint {
  uint32_t tp = 1, cp = 1, pp = 1, dp = 1, ep = 1;
  uint64_t micro_batch = 1;
  bool sp = false;
  uint32_t zero = 0;
  bool recompute = false;
  std::string schedule = "1f1b";
  uint32_t virtual_stages = 1;
  OffloadChoice offload;
  std::string sharding = "table";  // DLRM
};

struct SweepPoint {
  uint64_t id = 0;
  ClusterPoint cluster;
  PlanPoint plan;
  std::string reason;  // not empty: the rules refuse this point (and say why)
};

// Every point of `spec`, rules applied. Error when there would be more than `max_points`.
Expected<std::vector<SweepPoint>> expand_sweep(const SweepSpec& spec,
                                               uint64_t max_points = 10'000'000);

// The generator's plan of a transformer point (not validated).
gen::ParallelPlan llm_plan_of(const SweepSpec& spec, const SweepPoint& point);

// The columns that hold a point's axes in the results, in expansion order, and one point's values.
enum class ColumnType : uint8_t { kInteger, kReal, kText };
struct Column {
  std::string name;
  ColumnType type = ColumnType::kReal;
};
struct Value {
  double number = 0;
  std::string text;  // for kText columns
  bool operator==(const Value&) const = default;
};
std::vector<Column> axis_columns(const SweepSpec& spec);
std::vector<Value> axis_values(const SweepSpec& spec, const SweepPoint& point);

}  // namespace orrery::design
