// workload/local_memory.h: how much accelerator memory each rank holds over a run.
//
// Tensor lifetimes come from the `inputs` and `outputs` attributes of the nodes (string lists of
// name, size pairs, as the symbolic tensor graph generator writes them; sizes may be written as
// floats, "32768.0"). The rules follow ASTRA-sim's local memory tracker (docs/models/memory.md):
// - a tensor that nodes write and read is allocated when the first node writing it starts and freed
//   when the last node naming it ends;
// - a tensor nodes read but none writes (a weight, or data a collective delivers without listing
//   its outputs) is held from the start of the run until its last reader ends;
// - a tensor nodes write but none reads (a weight gradient, an output of the step) is held from its
//   first writer's start to the end of the run.
// A node without either attribute holds the bytes it touches while it runs: tensor_size for compute
// and memory nodes, comm_size for collectives, sends and receives. Zero-sized tensors and nodes
// that take no time (metadata, compute with neither a duration nor FLOPs) are not counted. Changes
// at one instant are applied together; the peak is the largest amount held at the end of an
// instant.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "chakra/trace_graph.h"
#include "core/error.h"
#include "core/time.h"
#include "workload/executor.h"

namespace orrery::workload {

// Follows every rank's tensors through a run and keeps each rank's peak. Attach it to the executor
// as a RunObserver before the run; read peak() after it.
class LocalMemoryTracker final : public RunObserver {
 public:
  // Prepares the lifetimes of every rank's tensors (graphs indexed by rank; they must outlive the
  // tracker), on up to `threads` threads (0: one per core). O(nodes + tensors) per distinct graph
  // (ranks that share a TraceGraph share its preparation), plus O(tensors) per rank. Error on an
  // inputs/outputs attribute that is not a list of name, size pairs, naming the trace, node and
  // attribute.
  static Expected<LocalMemoryTracker> create(const std::vector<const chakra::TraceGraph*>& graphs,
                                             size_t threads = 1);

  // Whether any node of any rank has an inputs or outputs attribute (without them the peak only
  // counts the bytes of the nodes running at each instant).
  bool has_tensor_attributes() const { return has_tensor_attributes_; }

  // RunObserver: called by the executor inside events. O(tensors the node names).
  void on_activity_start(const ActivityRecord& record, const chakra::TraceGraph& graph) override;
  void on_activity(const ActivityRecord& record, const chakra::TraceGraph& graph) override;

  // Peak bytes held by `rank` during the run. After the run.
  uint64_t peak(uint32_t rank) const;
  // Bytes `rank` holds now (during or after the run).
  uint64_t held(uint32_t rank) const { return ranks_[rank].held; }
  uint32_t rank_count() const { return static_cast<uint32_t>(ranks_.size()); }

 private:
  // What create() prepares once per distinct trace (ranks running the same TraceGraph share it):
  // the tensors, which nodes name them, and what each node holds by itself.
  struct Plan {
    // Per tensor.
    std::vector<uint64_t> size;
    std::vector<uint32_t> uses;     // running nodes naming it
    std::vector<uint8_t> lifetime;  // a Lifetime (local_memory.cpp)
    // Per node, in CSR form: node n names named[first[n] .. first[n + 1]), each (tensor << 1 |
    // writes).
    std::vector<uint32_t> first{0};
    std::vector<uint32_t> named;
    std::vector<uint64_t>
        own_bytes;          // per node: bytes held while it runs (nodes without attributes)
    uint64_t resident = 0;  // bytes of the tensors held from the start
  };
  // One rank's run.
  struct RankState {
    const Plan* plan = nullptr;
    std::vector<uint32_t> pending;  // per tensor: running nodes naming it that have not ended
    std::vector<uint8_t> live;      // per tensor: held now
    uint64_t held = 0;
    uint64_t peak = 0;
    SimTime last_change;
  };

  LocalMemoryTracker() = default;
  // Brings the peak up to date before a change at `now`.
  static void advance(RankState& rank, SimTime now);

  std::vector<std::unique_ptr<Plan>> plans_;
  std::vector<RankState> ranks_;
  bool has_tensor_attributes_ = false;
};

}  // namespace orrery::workload
