// synth/layers.h: a DAG as a sequence of layers (Kahn's levels), and the window rule for large
// ones.
//
// Layer 0 holds the nodes without parents; remove it, and the nodes left without parents form the
// next layer, and so on: a node's layer is the length of its longest path from a source, so the
// partition is unique and every node past layer 0 has a parent in the layer just before it.
// layer_dag() renumbers a Dag layer by layer (within a layer the original order is kept), which is
// the order the generative model produces nodes in and the order decoded traces number them.
//
// The model sees at most `max_nodes` nodes of one graph (its window). fit_to_window() leaves a
// graph that fits alone; a larger one first has its chains of compute nodes contracted (a compute
// node whose only child is a compute node of the same kind whose only parent it is: the two
// become one node with the summed FLOPs, bytes and duration), and what still does not fit is cut
// into windows of consecutive layers, each a graph of its own (edges into a window from earlier
// layers are dropped). chain_dags() does the reverse for samples: windows joined in sequence
// through a METADATA node that waits for the sinks of one window and releases the sources of the
// next.
#pragma once

#include <cstdint>
#include <vector>

#include "synth/dag.h"

namespace orrery::synth {

// Kahn level of every node (0 for sources). The Dag must be acyclic.
std::vector<uint32_t> kahn_levels(const Dag& dag);

struct LayeredDag {
  Dag dag;                            // nodes in layer order
  std::vector<uint32_t> layer_start;  // layer l holds nodes [layer_start[l], layer_start[l + 1])

  uint32_t layers() const { return static_cast<uint32_t>(layer_start.size()) - 1; }
  uint32_t layer_size(uint32_t layer) const { return layer_start[layer + 1] - layer_start[layer]; }
  // The layer of node `node`. O(log layers).
  uint32_t layer_of(uint32_t node) const;
};

// Renumbers `dag` layer by layer. O(nodes + edges).
LayeredDag layer_dag(const Dag& dag);

// Contracts chains of compute nodes as described above. O(nodes + edges).
Dag coarsen_compute_chains(const Dag& dag);

struct WindowReport {
  uint32_t graphs_coarsened = 0;
  uint32_t nodes_merged = 0;  // nodes removed by contraction
  uint32_t graphs_split = 0;
  uint32_t windows = 0;  // windows made from split graphs
};

// The graph itself when it has at most `max_nodes` nodes; otherwise it coarsened and, if still too
// large, cut into layer windows of at most `max_nodes` nodes (a single layer wider than that is cut
// into pieces of `max_nodes`). Adds to `report` when given.
std::vector<Dag> fit_to_window(const Dag& dag, uint32_t max_nodes, WindowReport* report = nullptr);

// The windows one after another, joined through a METADATA node each (see above). Ranks and
// source come from the first.
Dag chain_dags(const std::vector<Dag>& windows);

}  // namespace orrery::synth
