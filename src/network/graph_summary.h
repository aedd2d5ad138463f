// network/graph_summary.h: what `orrery topo summarize` and `topo draw` report about a graph.
//
//  - diameter: the most hops on a route between two NPUs (routes as the graph routes them). Exact
//    up to 4,096 NPUs; above, the largest over 64 NPUs spread over the rank order (a lower bound,
//    flagged `diameter_sampled`).
//  - bisection bandwidth: the maximum flow (exact, integer capacities) from the first half of the
//    NPUs in rank order to the second half, i.e. the smallest cut separating them. In the
//    generators' layouts that split is the worst one (half the leaves, pods or torus planes).
//  - oversubscription: per switch with links on several tiers, the capacity of its lowest-tier
//    links over that of its highest-tier links; the largest over all switches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "network/graph.h"

namespace orrery::net {

struct TierSummary {
  uint32_t tier = 0;
  uint64_t links = 0;  // directed
  Bandwidth min_bandwidth;
  Bandwidth max_bandwidth;
  SimTime min_latency;
  SimTime max_latency;
};

struct GraphSummary {
  uint32_t npus = 0;
  uint32_t switches = 0;
  uint64_t links = 0;  // directed
  uint32_t diameter = 0;
  bool diameter_sampled = false;
  uint64_t bisection_nano_gbps = 0;  // one direction, first half -> second half
  double oversubscription = 1.0;     // 1 when no switch has several tiers
  std::vector<TierSummary> tiers;
};

GraphSummary summarize_graph(const Graph& graph);

// Graphviz (undirected edges for cable pairs, labelled with GB/s and latency; NPUs as boxes,
// grouped by node when npus_per_node > 1).
std::string graph_to_dot(const Graph& graph);

// ASTRA-sim's multi-dimensional network materialized as a graph (same link ids, switches named
// dim<d>_sw<group>), for summaries and drawings. Error above 2^22 links.
Expected<Graph> graph_from_topology(const Topology& topology);

}  // namespace orrery::net
