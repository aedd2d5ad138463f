// design/libra_simulation.h: checks LIBRA allocations with the simulator (`orrery run`).
//
// write_libra_traces turns a LIBRA problem into Chakra traces for every rank of its network: per
// layer in forward order, then in reverse for the backward pass (input gradient, then weight
// gradient), a COMP node (the phase's compute, rounded to whole microseconds) and the phase's
// collective over the group of ranks that share their coordinates in the unused dimensions; each
// node depends on the one before it (no overlap, as in LIBRA's model). Groups are written to a
// communicator-group file. Each group is a sub-grid of the simulated network (see
// simulated_dimensions), so the simulator runs the collective hierarchically, one phase per
// dimension it uses.
// simulate_allocation writes an ASTRA-sim network YAML with the allocation's bandwidths and runs
// run_simulation on the traces (analytical backend; ring on Ring and Switch dimensions, direct on
// FullyConnected ones, localBWAware (reduce-scatter up the dimensions, all-gather back down, as
// LIBRA counts traffic), with link bandwidths chosen so each algorithm moves B_d per NPU; no
// endpoint delay, and a local memory so fast that reductions take no time, so only the network
// differs between allocations).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/error.h"
#include "design/libra_model.h"

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

struct LibraTraces {
  std::string prefix;       // <prefix>.<rank>.et
  std::string comm_groups;  // communicator-group JSON
  std::string system;       // system JSON
  uint32_t ranks = 0;
  std::vector<SimulatedDimension> dimensions;  // of the simulated network
};

// `chunks`: preferred-dataset-splits; with more chunks the dimensions of a collective work in a
// pipeline, as LIBRA's max over dimensions assumes (one chunk runs them one after the other).
Expected<LibraTraces> write_libra_traces(const Problem& problem, const std::string& folder,
                                         uint32_t chunks = 16);

// The simulated iteration time (ns) at `bandwidth` (GB/s per dimension), with `latency_ns` per
// hop in every dimension.
Expected<double> simulate_allocation(const Problem& problem, const LibraTraces& traces,
                                     const std::vector<double>& bandwidth,
                                     const std::string& network_path, double latency_ns = 0);

}  // namespace orrery::design
