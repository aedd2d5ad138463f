#include "synth/graphs.h"

#include <cmath>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "core/text_file.h"
#include "synth/dag.h"
#include "synth/layers.h"

namespace orrery::synth {
namespace {

constexpr size_t kReasonsKept = 5;

// One graph of the file, checked; the reason it is not a graph otherwise.
Expected<LabelledGraph> parse_graph(const nlohmann::json& json, const GraphSet& set,
                                    uint32_t* duplicates) {
  auto fail = [](const std::string& what) { return Error::make(ErrorKind::kParse, "{}", what); };
  if (!json.is_object()) return fail("is not an object");
  LabelledGraph graph;
  const auto x = json.find("x");
  if (x == json.end() || !x->is_array()) return fail("has no array \"x\" of node categories");
  if (x->empty()) return fail("has no nodes");
  for (size_t node = 0; node < x->size(); ++node) {
    const nlohmann::json& value = (*x)[node];
    if (!value.is_number_unsigned() || value.get<uint64_t>() >= set.categories) {
      return fail(fmt::format("node {}: category {} is not an integer in 0 .. {}", node,
                              value.dump(), set.categories - 1));
    }
    graph.x.push_back(value.get<uint32_t>());
  }
  const uint32_t nodes = static_cast<uint32_t>(graph.x.size());
  const auto edges = json.find("edges");
  if (edges != json.end()) {
    if (!edges->is_array()) return fail("\"edges\" is not an array");
    for (size_t idx = 0; idx < edges->size(); ++idx) {
      const nlohmann::json& edge = (*edges)[idx];
      const bool pair = edge.is_array() && edge.size() == 2 && edge[0].is_number_unsigned() &&
                        edge[1].is_number_unsigned();
      if (!pair) {
        return fail(fmt::format("edge {} {} is not a pair [parent, child] of node positions", idx,
                                edge.dump()));
      }
      const uint64_t parent = edge[0].get<uint64_t>(), child = edge[1].get<uint64_t>();
      if (parent >= nodes || child >= nodes) {
        return fail(fmt::format("edge {} {} names node {} of {}", idx, edge.dump(),
                                parent >= nodes ? parent : child, nodes));
      }
      if (parent == child) return fail(fmt::format("edge {} {} is a self-loop", idx, edge.dump()));
      graph.edges.emplace_back(static_cast<uint32_t>(parent), static_cast<uint32_t>(child));
    }
  }
  Dag shape;
  shape.nodes.resize(nodes);
  shape.edges = graph.edges;
  normalize_edges(shape);
  *duplicates += static_cast<uint32_t>(graph.edges.size() - shape.edges.size());
  graph.edges = shape.edges;
  if (const std::optional<uint32_t> stuck = node_on_cycle(shape)) {
    return fail(fmt::format("node {} is on or behind a cycle; a graph set holds DAGs", *stuck));
  }
  if (!set.label.empty()) {
    const auto y = json.find("y");
    if (y == json.end() || !y->is_number() || !std::isfinite(y->get<double>())) {
      return fail(fmt::format("has no finite label \"y\" ({})", set.label));
    }
    graph.y = y->get<double>();
  }
  return graph;
}

}  // namespace

Expected<GraphSet> graph_set_from_json(const nlohmann::json& json, const std::string& source,
                                       GraphSetIssues* issues) {
  auto fail = [&](const std::string& what) {
    return Error::make(ErrorKind::kParse, "{}: {}", source, what);
  };
  const auto format = json.is_object() ? json.find("format") : json.end();
  if (format == json.end() || !format->is_string() ||
      format->get<std::string>() != kGraphSetFormat) {
    return fail(fmt::format("not a graph set (its \"format\" must be \"{}\")", kGraphSetFormat));
  }
  GraphSet set;
  set.source = source;
  const auto categories = json.find("categories");
  if (categories == json.end() || !categories->is_number_unsigned() ||
      categories->get<uint64_t>() == 0 || categories->get<uint64_t>() > 65535) {
    return fail("\"categories\" must be an integer in 1 .. 65535");
  }
  set.categories = categories->get<uint32_t>();
  if (const auto label = json.find("label"); label != json.end()) {
    if (!label->is_string()) return fail("\"label\" is not a string");
    set.label = label->get<std::string>();
  }
  const auto graphs = json.find("graphs");
  if (graphs == json.end() || !graphs->is_array()) return fail("has no array \"graphs\"");
  GraphSetIssues local;
  GraphSetIssues& found = issues != nullptr ? *issues : local;
  for (size_t idx = 0; idx < graphs->size(); ++idx) {
    Expected<LabelledGraph> graph = parse_graph((*graphs)[idx], set, &found.duplicate_edges);
    if (graph) {
      set.graphs.push_back(std::move(*graph));
      continue;
    }
    const std::string reason = fmt::format("{}: graph {} {}", source, idx, graph.error().message());
    if (issues == nullptr) return Error::make(ErrorKind::kParse, "{}", reason);
    ++found.invalid;
    if (found.reasons.size() < kReasonsKept) found.reasons.push_back(reason);
  }
  return set;
}

Expected<GraphSet> read_graph_set(const std::string& path, GraphSetIssues* issues) {
  Expected<std::string> text = read_text_file(path, "the graph set");
  if (!text) return text.error();
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::parse_error& error) {
    return Error::make(ErrorKind::kParse, "{}: not JSON (byte {}): {}", path, error.byte,
                       error.what());
  }
  return graph_set_from_json(json, path, issues);
}

nlohmann::json graph_set_to_json(const GraphSet& set) {
  nlohmann::json graphs = nlohmann::json::array();
  for (const LabelledGraph& graph : set.graphs) {
    nlohmann::json edges = nlohmann::json::array();
    for (const auto& [parent, child] : graph.edges) edges.push_back({parent, child});
    nlohmann::json entry = {{"x", graph.x}, {"edges", std::move(edges)}};
    if (!set.label.empty()) entry["y"] = graph.y;
    graphs.push_back(std::move(entry));
  }
  nlohmann::json json = {
      {"format", kGraphSetFormat}, {"categories", set.categories}, {"graphs", std::move(graphs)}};
  if (!set.label.empty()) json["label"] = set.label;
  return json;
}

Status write_graph_set(const std::string& path, const GraphSet& set) {
  return write_text_file(path, graph_set_to_json(set).dump() + "\n");
}

EncodedDag encode_graph(const LabelledGraph& graph) {
  // The category rides in a DagNode's flops only to reuse layer_dag's renumbering.
  Dag dag;
  dag.nodes.resize(graph.x.size());
  for (size_t node = 0; node < graph.x.size(); ++node) dag.nodes[node].flops = graph.x[node];
  dag.edges = graph.edges;
  const LayeredDag layered = layer_dag(dag);
  EncodedDag out;
  out.edges = layered.dag.edges;
  out.layer_start = layered.layer_start;
  out.x.reserve(graph.x.size());
  for (const DagNode& node : layered.dag.nodes) {
    NodeClasses classes{};
    classes[0] = static_cast<uint16_t>(node.flops);
    out.x.push_back(classes);
  }
  return out;
}

LabelledGraph decode_graph(const EncodedDag& graph, double y) {
  LabelledGraph out;
  out.y = y;
  for (const NodeClasses& node : graph.x) out.x.push_back(node[0]);
  out.edges = graph.edges;
  return out;
}

std::map<std::string, Histogram> labelled_graph_statistics(const EncodedDag& graph,
                                                           uint32_t categories) {
  std::map<std::string, Histogram> stats = structural_statistics(graph);
  stats["category"] = class_histogram(graph, 0, categories);
  return stats;
}

}  // namespace orrery::synth
