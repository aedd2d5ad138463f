// design/libra_simulation.h: checks LIBRA allocations with the simulator, in memory.
//
// build_libra_workload turns a LIBRA problem into Chakra traces for every rank of its network: per
// layer in forward order, then in reverse for the backward pass (input gradient, then weight
// gradient), a COMP node (the phase's compute, rounded to whole microseconds) and the phase's
// collective over the group of ranks that share their coordinates in the unused dimensions; each
// node depends on the one before it (no overlap, as in LIBRA's model), with its communicator
// groups. Each group is a sub-grid of the simulated network (see simulated_dimensions), so the
// simulator runs the collective hierarchically, one phase per dimension it uses.
// simulate_allocation builds the network with the allocation's bandwidths and simulates the
// workload on it (analytical backend; ring on Ring and Switch dimensions, direct on
// FullyConnected ones, localBWAware (reduce-scatter up the dimensions, all-gather back down, as
// LIBRA counts traffic), with link bandwidths chosen so each algorithm moves B_d per NPU; no
// endpoint delay, and a local memory so fast that reductions take no time, so only the network
// differs between allocations). Nothing is written to disk unless asked: build_libra_workload can
// also write the same inputs as files `orrery run` reads, for users who want to look at them.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "chakra/comm_groups.h"
#include "chakra/trace_set.h"
#include "core/error.h"
#include "design/libra_model.h"
#include "system/system_config.h"

namespace orrery::design {

// One dimension of the simulated network: a LIBRA dimension, or a part of one that a group uses.
struct SimulatedDimension {
  size_t parent = 0;  // the LIBRA dimension
  uint32_t size = 0;
};

// How the simulated network divides LIBRA's dimensions. A dimension every group uses whole (or not
// at all) is simulated as it is. A dimension of n NPUs some groups use in part is split into
// sub-dimensions a x n/(a b) x b (sizes 1 left out; rank numbering unchanged): groups that also
// use lower dimensions (or no other) take the inner a coordinates, groups that also use higher
// dimensions the outer b. Each sub-dimension gets the whole dimension's bandwidth B_d per NPU: what
// LIBRA's model assumes for a group that uses part of a dimension (m_d / B_d with its own n_d).
// Only one collective runs at a time, so no two sub-dimensions carry traffic at once. Errors
// (naming the layer, phase and dimension): a group that uses a dimension in part together with
// lower and higher dimensions (no sub-grid takes it), groups of different sizes on the same side,
// sizes whose product does not divide n, and a dimension that one group uses whole and another in
// part (its sub-dimensions would pipeline and together exceed B_d).
Expected<std::vector<SimulatedDimension>> simulated_dimensions(const Problem& problem);

// The simulator's inputs for one LIBRA problem, shared by the simulation of every allocation.
struct LibraWorkload {
  std::shared_ptr<const chakra::TraceSet> traces;
  std::shared_ptr<const chakra::CommGroups> groups;
  std::shared_ptr<const sys::SystemConfig> system;
  std::string system_json;  // the system configuration as a file says it
  uint32_t ranks = 0;
  std::vector<SimulatedDimension> dimensions;  // of the simulated network
};

// `chunks`: preferred-dataset-splits; with more chunks the dimensions of a collective work in a
// pipeline, as LIBRA's max over dimensions assumes (one chunk runs them one after the other).
// `folder`, when not empty, also receives the inputs as files: libra.<rank>.et,
// comm_groups.json and system.json.
Expected<LibraWorkload> build_libra_workload(const Problem& problem, uint32_t chunks = 16,
                                             const std::string& folder = "");

// The simulated network at `bandwidth` (GB/s per dimension), with `latency_ns` per hop in every
// dimension, as an ASTRA-sim network file says it (what simulate_allocation runs on).
std::string libra_network_yaml(const Problem& problem, const LibraWorkload& workload,
                               const std::vector<double>& bandwidth, double latency_ns = 0);

// The simulated iteration time (ns) at `bandwidth` (GB/s per dimension), with `latency_ns` per
// hop in every dimension.
Expected<double> simulate_allocation(const Problem& problem, const LibraWorkload& workload,
                                     const std::vector<double>& bandwidth, double latency_ns = 0);

}  // namespace orrery::design
