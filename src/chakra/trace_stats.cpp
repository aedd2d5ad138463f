#include "chakra/trace_stats.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "chakra/dependency_graph.h"
#include "core/units.h"

namespace orrery::chakra {

void TraceStats::merge(const TraceStats& other) {
  ranks += other.ranks;
  nodes += other.nodes;
  for (const auto& [name, count] : other.by_type) by_type[name] += count;
  for (const auto& [name, coll] : other.collectives) {
    collectives[name].count += coll.count;
    collectives[name].bytes += coll.bytes;
  }
  sends.count += other.sends.count;
  sends.bytes += other.sends.bytes;
  recvs.count += other.recvs.count;
  recvs.bytes += other.recvs.bytes;
  cpu_ops += other.cpu_ops;
  flops += other.flops;
  tensor_bytes += other.tensor_bytes;
  duration_micros += other.duration_micros;
  data_edges += other.data_edges;
  ctrl_edges += other.ctrl_edges;
  depth = std::max(depth, other.depth);
  widest_level = std::max(widest_level, other.widest_level);
  unreachable += other.unreachable;
}

namespace {

uint64_t uint_or_zero(const TraceGraph& graph, NodeIndex node, std::string_view name) {
  Expected<std::optional<uint64_t>> value = graph.get_uint(node, name);
  return value && value->has_value() ? **value : 0;
}

uint64_t count_resolved(const TraceGraph& graph, NodeIndex node, std::span<const uint64_t> ids) {
  uint64_t resolved = 0;
  for (uint64_t id : ids) {
    if (id != graph.id(node) && graph.find(id)) ++resolved;
  }
  return resolved;
}

}  // namespace

TraceStats compute_trace_stats(const TraceGraph& graph) {
  TraceStats stats;
  stats.ranks = 1;
  stats.nodes = graph.size();
  for (NodeIndex node = 0; node < graph.size(); ++node) {
    const int32_t type = graph.type(node);
    ++stats.by_type[node_type_name(type)];
    Expected<bool> cpu = graph.get_bool_or(node, "is_cpu_op", false);
    if (cpu && *cpu) ++stats.cpu_ops;
    stats.flops += uint_or_zero(graph, node, "num_ops");
    stats.tensor_bytes += uint_or_zero(graph, node, "tensor_size");
    stats.duration_micros += graph.duration_micros(node);
    stats.data_edges += count_resolved(graph, node, graph.data_deps(node));
    stats.ctrl_edges += count_resolved(graph, node, graph.ctrl_deps(node));
    if (type == ChakraProtoMsg::COMM_COLL_NODE) {
      Expected<std::optional<int64_t>> comm_type = graph.get_int(node, "comm_type");
      if (!comm_type || !comm_type->has_value()) continue;
      CollectiveStats& coll = stats.collectives[comm_type_name(**comm_type)];
      ++coll.count;
      coll.bytes += uint_or_zero(graph, node, "comm_size");
    } else if (type == ChakraProtoMsg::COMM_SEND_NODE) {
      ++stats.sends.count;
      stats.sends.bytes += uint_or_zero(graph, node, "comm_size");
    } else if (type == ChakraProtoMsg::COMM_RECV_NODE) {
      ++stats.recvs.count;
      stats.recvs.bytes += uint_or_zero(graph, node, "comm_size");
    }
  }

  // Levels: a node's level is one more than its deepest parent's (Kahn order visits parents first).
  const DependencyGraph deps = DependencyGraph::build(graph, DependencyKinds::kBoth);
  DependencyTracker tracker(graph, deps);
  std::vector<uint32_t> level(graph.size(), 0);
  std::vector<uint64_t> width;
  while (tracker.has_ready()) {
    const NodeIndex node = tracker.pop_ready();
    if (width.size() <= level[node]) width.resize(level[node] + 1, 0);
    ++width[level[node]];
    for (NodeIndex child : deps.children(node))
      level[child] = std::max(level[child], level[node] + 1);
    tracker.complete(node);
  }
  stats.depth = width.size();
  stats.widest_level = width.empty() ? 0 : *std::max_element(width.begin(), width.end());
  stats.unreachable = graph.size() - tracker.completed_count();
  return stats;
}

nlohmann::json trace_stats_to_json(const TraceStats& stats) {
  nlohmann::json out;
  out["ranks"] = stats.ranks;
  out["nodes"] = stats.nodes;
  out["by_type"] = nlohmann::json::object();
  for (const auto& [name, count] : stats.by_type) out["by_type"][name] = count;
  out["collectives"] = nlohmann::json::object();
  for (const auto& [name, coll] : stats.collectives) {
    out["collectives"][name] = {{"count", coll.count}, {"bytes", coll.bytes}};
  }
  out["sends"] = {{"count", stats.sends.count}, {"bytes", stats.sends.bytes}};
  out["recvs"] = {{"count", stats.recvs.count}, {"bytes", stats.recvs.bytes}};
  out["cpu_ops"] = stats.cpu_ops;
  out["flops"] = stats.flops;
  out["tensor_bytes"] = stats.tensor_bytes;
  out["duration_micros"] = stats.duration_micros;
  out["data_edges"] = stats.data_edges;
  out["ctrl_edges"] = stats.ctrl_edges;
  out["depth"] = stats.depth;
  out["widest_level"] = stats.widest_level;
  out["unreachable"] = stats.unreachable;
  return out;
}

std::string format_trace_stats(const TraceStats& stats) {
  std::string out;
  auto line = [&out](std::string_view label, const std::string& value) {
    out += fmt::format("  {:<22}{}\n", label, value);
  };
  line("ranks", format_count(stats.ranks));
  line("nodes", format_count(stats.nodes));
  for (const auto& [name, count] : stats.by_type)
    line(fmt::format("  {}", name), format_count(count));
  if (!stats.collectives.empty()) {
    out += "  collectives\n";
    for (const auto& [name, coll] : stats.collectives) {
      line(fmt::format("  {}", name),
           fmt::format("{} x, {} ({} B)", format_count(coll.count), format_bytes(coll.bytes),
                       format_count(coll.bytes)));
    }
  }
  if (stats.sends.count + stats.recvs.count > 0) {
    line("sends",
         fmt::format("{} x, {}", format_count(stats.sends.count), format_bytes(stats.sends.bytes)));
    line("receives",
         fmt::format("{} x, {}", format_count(stats.recvs.count), format_bytes(stats.recvs.bytes)));
  }
  line("host CPU ops", format_count(stats.cpu_ops));
  line("FLOPs (num_ops)", format_count(stats.flops));
  line("tensor bytes", fmt::format("{} ({} B)", format_bytes(stats.tensor_bytes),
                                   format_count(stats.tensor_bytes)));
  line("recorded duration", fmt::format("{} us", format_count(stats.duration_micros)));
  line("edges", fmt::format("{} data, {} control", format_count(stats.data_edges),
                            format_count(stats.ctrl_edges)));
  line("dependency depth", format_count(stats.depth));
  line("widest level", format_count(stats.widest_level));
  if (stats.unreachable > 0) line("never ready (cycle)", format_count(stats.unreachable));
  return out;
}

}  // namespace orrery::chakra
