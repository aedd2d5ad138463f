// chakra/dot_writer.h: a trace as a Graphviz graph (`orrery trace dot`).
//
// Nodes are labelled with id, name and type and shaped by type; data dependencies are solid edges,
// control dependencies dashed. References to nodes outside the file are drawn to a grey "missing"
// placeholder so nothing is silently left out. Several ranks become one cluster each.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "chakra/trace_graph.h"

namespace orrery::chakra {

// Writes `graphs` (one per rank, in rank order) as one digraph.
void write_dot(const std::vector<const TraceGraph*>& graphs, std::ostream& out);

}  // namespace orrery::chakra
