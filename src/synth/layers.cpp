#include "synth/layers.h"

#include <algorithm>
#include <cassert>
#include <numeric>

namespace orrery::synth {

std::vector<uint32_t> kahn_levels(const Dag& dag) {
  const uint32_t count = dag.size();
  std::vector<uint32_t> indegree(count, 0);
  std::vector<uint32_t> child_start(count + 1, 0);
  for (const auto& [parent, child] : dag.edges) {
    ++indegree[child];
    ++child_start[parent + 1];
  }
  std::partial_sum(child_start.begin(), child_start.end(), child_start.begin());
  std::vector<uint32_t> children(dag.edges.size());
  std::vector<uint32_t> fill(child_start.begin(), child_start.end() - 1);
  for (const auto& [parent, child] : dag.edges) children[fill[parent]++] = child;

  std::vector<uint32_t> level(count, 0);
  std::vector<uint32_t> frontier;
  for (uint32_t node = 0; node < count; ++node) {
    if (indegree[node] == 0) frontier.push_back(node);
  }
  std::vector<uint32_t> next;
  uint32_t depth = 0;
  size_t seen = 0;
  while (!frontier.empty()) {
    next.clear();
    for (uint32_t node : frontier) {
      level[node] = depth;
      ++seen;
      for (uint32_t idx = child_start[node]; idx < child_start[node + 1]; ++idx) {
        if (--indegree[children[idx]] == 0) next.push_back(children[idx]);
      }
    }
    frontier.swap(next);
    ++depth;
  }
  assert(seen == count && "kahn_levels on a cyclic graph");
  (void)seen;
  return level;
}

uint32_t LayeredDag::layer_of(uint32_t node) const {
  const auto it = std::upper_bound(layer_start.begin(), layer_start.end(), node);
  return static_cast<uint32_t>(it - layer_start.begin()) - 1;
}

LayeredDag layer_dag(const Dag& dag) {
  const std::vector<uint32_t> level = kahn_levels(dag);
  std::vector<uint32_t> order(dag.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return level[a] < level[b]; });
  std::vector<uint32_t> position(dag.size());
  for (uint32_t idx = 0; idx < order.size(); ++idx) position[order[idx]] = idx;

  LayeredDag out;
  out.dag.ranks = dag.ranks;
  out.dag.source = dag.source;
  out.dag.nodes.reserve(dag.size());
  for (uint32_t node : order) out.dag.nodes.push_back(dag.nodes[node]);
  out.dag.edges.reserve(dag.edges.size());
  for (const auto& [parent, child] : dag.edges) {
    out.dag.edges.emplace_back(position[parent], position[child]);
  }
  normalize_edges(out.dag);
  out.layer_start.push_back(0);
  for (uint32_t idx = 0; idx < order.size(); ++idx) {
    if (idx > 0 && level[order[idx]] != level[order[idx - 1]]) out.layer_start.push_back(idx);
  }
  out.layer_start.push_back(dag.size());
  if (dag.size() == 0) out.layer_start = {0};
  return out;
}

Dag coarsen_compute_chains(const Dag& dag) {
  const LayeredDag layered = layer_dag(dag);
  const Dag& graph = layered.dag;
  const uint32_t count = graph.size();
  std::vector<uint32_t> indegree(count, 0), outdegree(count, 0), only_parent(count, 0);
  for (const auto& [parent, child] : graph.edges) {
    ++indegree[child];
    ++outdegree[parent];
    only_parent[child] = parent;
  }
  auto is_compute = [](NodeKind kind) {
    return kind == NodeKind::kCompute || kind == NodeKind::kCpuCompute;
  };
  // Nodes come in layer order, so a parent's representative is final before its child's.
  std::vector<uint32_t> rep(count);
  for (uint32_t node = 0; node < count; ++node) {
    rep[node] = node;
    if (indegree[node] != 1) continue;
    const uint32_t parent = only_parent[node];
    if (outdegree[parent] == 1 && is_compute(graph.nodes[node].kind) &&
        graph.nodes[node].kind == graph.nodes[parent].kind) {
      rep[node] = rep[parent];
    }
  }
  Dag out;
  out.ranks = dag.ranks;
  out.source = dag.source;
  std::vector<uint32_t> index(count, UINT32_MAX);
  for (uint32_t node = 0; node < count; ++node) {
    if (rep[node] == node) {
      index[node] = out.size();
      out.nodes.push_back(graph.nodes[node]);
    } else {
      DagNode& merged = out.nodes[index[rep[node]]];
      merged.flops += graph.nodes[node].flops;
      merged.tensor_bytes += graph.nodes[node].tensor_bytes;
      merged.duration_us += graph.nodes[node].duration_us;
    }
  }
  for (const auto& [parent, child] : graph.edges) {
    const uint32_t from = index[rep[parent]];
    const uint32_t to = index[rep[child]];
    if (from != to) out.edges.emplace_back(from, to);
  }
  normalize_edges(out);
  return out;
}

namespace {

// The nodes [first, last) of a layered graph as a graph of their own.
Dag slice(const LayeredDag& layered, uint32_t first, uint32_t last) {
  Dag out;
  out.ranks = layered.dag.ranks;
  out.source = layered.dag.source;
  out.nodes.assign(layered.dag.nodes.begin() + first, layered.dag.nodes.begin() + last);
  for (const auto& [parent, child] : layered.dag.edges) {
    if (parent >= first && child < last && child >= first) {
      out.edges.emplace_back(parent - first, child - first);
    }
  }
  normalize_edges(out);
  return out;
}

}  // namespace

std::vector<Dag> fit_to_window(const Dag& dag, uint32_t max_nodes, WindowReport* report) {
  assert(max_nodes > 0);
  if (dag.size() <= max_nodes) return {dag};
  Dag coarse = coarsen_compute_chains(dag);
  if (report != nullptr) {
    ++report->graphs_coarsened;
    report->nodes_merged += dag.size() - coarse.size();
  }
  if (coarse.size() <= max_nodes) return {std::move(coarse)};
  const LayeredDag layered = layer_dag(coarse);
  std::vector<Dag> windows;
  uint32_t first = 0;
  for (uint32_t layer = 0; layer < layered.layers(); ++layer) {
    const uint32_t start = layered.layer_start[layer];
    const uint32_t end = layered.layer_start[layer + 1];
    if (end - first > max_nodes && start > first) {
      windows.push_back(slice(layered, first, start));
      first = start;
    }
    while (end - first > max_nodes) {  // one layer wider than the window: pieces of it
      windows.push_back(slice(layered, first, first + max_nodes));
      first += max_nodes;
    }
  }
  if (first < coarse.size()) windows.push_back(slice(layered, first, coarse.size()));
  if (report != nullptr) {
    ++report->graphs_split;
    report->windows += static_cast<uint32_t>(windows.size());
  }
  return windows;
}

Dag chain_dags(const std::vector<Dag>& windows) {
  Dag out;
  if (windows.empty()) return out;
  out.ranks = windows.front().ranks;
  out.source = windows.front().source;
  std::vector<uint32_t> previous_sinks;
  for (size_t idx = 0; idx < windows.size(); ++idx) {
    const Dag& window = windows[idx];
    uint32_t join = UINT32_MAX;
    if (idx > 0) {
      join = out.size();
      out.nodes.push_back(DagNode{NodeKind::kMetadata, {}, 0, 0, 0, 0});
      for (uint32_t sink : previous_sinks) out.edges.emplace_back(sink, join);
    }
    const uint32_t base = out.size();
    out.nodes.insert(out.nodes.end(), window.nodes.begin(), window.nodes.end());
    std::vector<uint8_t> has_parent(window.size(), 0), has_child(window.size(), 0);
    for (const auto& [parent, child] : window.edges) {
      out.edges.emplace_back(base + parent, base + child);
      has_parent[child] = 1;
      has_child[parent] = 1;
    }
    previous_sinks.clear();
    for (uint32_t node = 0; node < window.size(); ++node) {
      if (join != UINT32_MAX && !has_parent[node]) out.edges.emplace_back(join, base + node);
      if (!has_child[node]) previous_sinks.push_back(base + node);
    }
  }
  normalize_edges(out);
  return out;
}

}  // namespace orrery::synth
