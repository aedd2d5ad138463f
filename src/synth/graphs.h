// synth/graphs.h: labelled DAGs that are not traces, as LayerDAG's public benchmark has them (the
// TPU Tile kernel graphs: one categorical attribute per node, one runtime per graph).
//
// A graph set is a JSON file:
//   {"format": "orrery graph set 1", "categories": 47, "label": "normalized runtime",
//    "graphs": [{"x": [18, 45, 29], "edges": [[0, 2], [1, 2]], "y": 2.08}, ...]}
// x is the category of every node (0 .. categories - 1), edges are [parent, child] node positions,
// y is the graph's label (a finite number; required when "label" is set, ignored otherwise).
// Duplicate edges are merged; a self-loop or a cycle is an error. scripts/tpu_tile_to_json.py
// writes LayerDAG's .pth files in this form.
//
// The generative model sees such a graph as an EncodedDag whose first attribute is the category and
// whose five others are constant (a single class each), so LayerDAG's networks, the baseline, the
// metrics and the surrogate serve both kinds of corpus unchanged.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "synth/codebook.h"
#include "synth/metrics.h"

namespace orrery::synth {

inline constexpr const char* kGraphSetFormat = "orrery graph set 1";

struct LabelledGraph {
  std::vector<uint32_t> x;                           // category per node
  std::vector<std::pair<uint32_t, uint32_t>> edges;  // (parent, child), sorted and unique
  double y = 0;
};

struct GraphSet {
  uint32_t categories = 0;
  std::string label;  // what y is ("": the graphs carry no label)
  std::vector<LabelledGraph> graphs;
  std::string source;  // the file, for messages
};

// What a lenient read skipped.
struct GraphSetIssues {
  uint32_t invalid = 0;              // graphs skipped
  std::vector<std::string> reasons;  // the first few, "FILE: graph 12: ..."
  uint32_t duplicate_edges = 0;      // merged
};

// Strict (issues == nullptr): the first bad graph is an Error "FILE: graph 12: edge 3 [5, 40]
// names node 40 of 37". Lenient: bad graphs are skipped and described in `issues`; only a file
// that is not a graph set at all is an Error.
Expected<GraphSet> read_graph_set(const std::string& path, GraphSetIssues* issues = nullptr);
Status write_graph_set(const std::string& path, const GraphSet& set);
// The same, on a parsed document (`source` names it in messages).
Expected<GraphSet> graph_set_from_json(const nlohmann::json& json, const std::string& source,
                                       GraphSetIssues* issues = nullptr);
nlohmann::json graph_set_to_json(const GraphSet& set);

// The graph in Kahn-layer order (within a layer, the file's order), its category in x[0].
EncodedDag encode_graph(const LabelledGraph& graph);
// Back: nodes in the encoded order, categories from x[0].
LabelledGraph decode_graph(const EncodedDag& graph, double y);

// The structural statistics of synth/metrics.h plus "category" (a histogram over `categories`).
std::map<std::string, Histogram> labelled_graph_statistics(const EncodedDag& graph,
                                                           uint32_t categories);

}  // namespace orrery::synth
