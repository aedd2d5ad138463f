#include "network/graph_summary.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>

namespace orrery::net {

namespace {

// Dinic's maximum flow on integer capacities.
class MaxFlow {
 public:
  explicit MaxFlow(uint32_t nodes) : head_(nodes, kNone), level_(nodes), next_edge_(nodes) {}

  void add(uint32_t from, uint32_t to, uint64_t capacity) {
    edges_.push_back({to, head_[from], capacity});
    head_[from] = static_cast<uint32_t>(edges_.size() - 1);
    edges_.push_back({from, head_[to], 0});
    head_[to] = static_cast<uint32_t>(edges_.size() - 1);
  }

  uint64_t run(uint32_t source, uint32_t sink) {
    uint64_t total = 0;
    while (bfs(source, sink)) {
      next_edge_ = head_;
      while (uint64_t pushed = push(source, sink, std::numeric_limits<uint64_t>::max())) {
        total += pushed;
      }
    }
    return total;
  }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  struct Edge {
    uint32_t to;
    uint32_t next;
    uint64_t capacity;
  };

  bool bfs(uint32_t source, uint32_t sink) {
    std::fill(level_.begin(), level_.end(), -1);
    std::deque<uint32_t> queue{source};
    level_[source] = 0;
    while (!queue.empty()) {
      const uint32_t node = queue.front();
      queue.pop_front();
      for (uint32_t e = head_[node]; e != kNone; e = edges_[e].next) {
        if (edges_[e].capacity > 0 && level_[edges_[e].to] < 0) {
          level_[edges_[e].to] = level_[node] + 1;
          queue.push_back(edges_[e].to);
        }
      }
    }
    return level_[sink] >= 0;
  }

  // Iterative depth-first augmentation along the level graph.
  uint64_t push(uint32_t source, uint32_t sink, uint64_t limit) {
    std::vector<uint32_t> path_edges;
    uint32_t node = source;
    while (true) {
      if (node == sink) {
        uint64_t flow = limit;
        for (uint32_t e : path_edges) flow = std::min(flow, edges_[e].capacity);
        for (uint32_t e : path_edges) {
          edges_[e].capacity -= flow;
          edges_[e ^ 1].capacity += flow;
        }
        return flow;
      }
      uint32_t& e = next_edge_[node];
      while (e != kNone && (edges_[e].capacity == 0 || level_[edges_[e].to] != level_[node] + 1)) {
        e = edges_[e].next;
      }
      if (e == kNone) {
        if (path_edges.empty()) return 0;
        level_[node] = -1;  // dead end
        const uint32_t back = path_edges.back();
        path_edges.pop_back();
        node = edges_[back ^ 1].to;
        next_edge_[node] = edges_[next_edge_[node]].next;
        continue;
      }
      path_edges.push_back(e);
      node = edges_[e].to;
    }
  }

  std::vector<uint32_t> head_;
  std::vector<int32_t> level_;
  std::vector<uint32_t> next_edge_;
  std::vector<Edge> edges_;
};

std::string gbps_label(Bandwidth bw) { return fmt::format("{:.4g} GB/s", bw.gbps()); }

}  // namespace

GraphSummary summarize_graph(const Graph& graph) {
  GraphSummary out;
  out.npus = graph.npu_count();
  out.switches = graph.switch_count();
  out.links = graph.link_count();

  // Diameter over NPU pairs.
  std::vector<Rank> sources;
  if (graph.npu_count() <= 4096) {
    for (Rank r = 0; r < graph.npu_count(); ++r) sources.push_back(r);
  } else {
    out.diameter_sampled = true;
    for (uint32_t i = 0; i < 64; ++i) {
      sources.push_back(static_cast<Rank>(uint64_t{i} * graph.npu_count() / 64));
    }
  }
  for (Rank dst : sources) {
    for (Rank src = 0; src < graph.npu_count(); ++src) {
      out.diameter = std::max(out.diameter, graph.distance(src, dst));
    }
  }

  // Bisection: first half -> second half.
  const uint32_t nodes = graph.node_count();
  MaxFlow flow(nodes + 2);
  for (LinkId id = 0; id < graph.link_count(); ++id) {
    const GraphLink& link = graph.link(id);
    flow.add(link.src, link.dst, link.bandwidth.nano_gbps());
  }
  const uint64_t infinite = uint64_t{1} << 62;
  const uint32_t half = graph.npu_count() / 2;
  for (Rank r = 0; r < graph.npu_count(); ++r) {
    if (r < half) {
      flow.add(nodes, r, infinite);
    } else {
      flow.add(r, nodes + 1, infinite);
    }
  }
  out.bisection_nano_gbps = flow.run(nodes, nodes + 1);

  // Oversubscription per switch.
  for (NodeId node = graph.npu_count(); node < nodes; ++node) {
    uint32_t low = UINT32_MAX;
    uint32_t high = 0;
    for (uint32_t id : graph.out_links(node)) {
      low = std::min(low, graph.link(id).dimension);
      high = std::max(high, graph.link(id).dimension);
    }
    if (low == UINT32_MAX || low == high) continue;
    double down = 0;
    double up = 0;
    for (uint32_t id : graph.out_links(node)) {
      const double bw = static_cast<double>(graph.link(id).bandwidth.nano_gbps());
      if (graph.link(id).dimension == low) down += bw;
      if (graph.link(id).dimension == high) up += bw;
    }
    out.oversubscription = std::max(out.oversubscription, down / up);
  }

  std::map<uint32_t, TierSummary> tiers;
  for (LinkId id = 0; id < graph.link_count(); ++id) {
    const GraphLink& link = graph.link(id);
    auto [it, fresh] = tiers.try_emplace(link.dimension);
    TierSummary& t = it->second;
    if (fresh) {
      t = {link.dimension, 0, link.bandwidth, link.bandwidth, link.latency, link.latency};
    }
    ++t.links;
    t.min_bandwidth = std::min(t.min_bandwidth, link.bandwidth);
    t.max_bandwidth = std::max(t.max_bandwidth, link.bandwidth);
    t.min_latency = std::min(t.min_latency, link.latency);
    t.max_latency = std::max(t.max_latency, link.latency);
  }
  for (const auto& [tier, summary] : tiers) out.tiers.push_back(summary);
  return out;
}

std::string graph_to_dot(const Graph& graph) {
  std::string out = fmt::format("graph \"{}\" {{\n  layout=dot; rankdir=BT;\n",
                                graph.name().empty() ? "graph" : graph.name());
  const uint32_t per_node = graph.spec().npus_per_node;
  for (uint32_t node = 0; per_node > 1 && node * per_node < graph.npu_count(); ++node) {
    out += fmt::format("  subgraph cluster_node{} {{ label=\"node {}\";", node, node);
    for (uint32_t g = 0; g < per_node; ++g) out += fmt::format(" npu{};", node * per_node + g);
    out += " }\n";
  }
  for (Rank r = 0; r < graph.npu_count(); ++r) out += fmt::format("  npu{} [shape=box];\n", r);
  for (NodeId s = graph.npu_count(); s < graph.node_count(); ++s) {
    out += fmt::format("  \"{}\" [shape=ellipse];\n", graph.node_name(s));
  }
  for (LinkId id = 0; id < graph.link_count(); ++id) {
    const GraphLink& l = graph.link(id);
    const bool pair = id + 1 < graph.link_count() && graph.link(id + 1).src == l.dst &&
                      graph.link(id + 1).dst == l.src;
    out += fmt::format("  \"{}\" -- \"{}\" [label=\"{}, {} ns\"{}];\n", graph.node_name(l.src),
                       graph.node_name(l.dst), gbps_label(l.bandwidth),
                       static_cast<double>(l.latency.ps()) / 1000.0, pair ? "" : ", dir=forward");
    if (pair) ++id;
  }
  out += "}\n";
  return out;
}

Expected<Graph> graph_from_topology(const Topology& topology) {
  if (topology.link_count() > (uint64_t{1} << 22)) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "the network has {} links; graphs of at most 4,194,304 links are built",
                       topology.link_count());
  }
  GraphSpec spec;
  spec.name = "astra-sim";
  spec.npus = topology.rank_count();
  for (uint32_t d = 0; d < topology.dimension_count(); ++d) {
    spec.logical.push_back({topology.dimension(d).kind, topology.size(d)});
    if (topology.dimension(d).kind != TopologyKind::kSwitch) spec.npu_forwarding = true;
    if (topology.dimension(d).kind == TopologyKind::kSwitch) {
      for (uint32_t g = 0; g < topology.group_count(d); ++g) {
        spec.switch_names.push_back(fmt::format("dim{}_sw{}", d, g));
      }
    }
  }
  for (LinkId id = 0; id < topology.link_count(); ++id) {
    const LinkInfo info = topology.link_info(id);
    const Dimension& dim = topology.dimension(info.dimension);
    spec.links.push_back({info.src, info.dst, dim.bandwidth, dim.latency, info.dimension});
  }
  return Graph::create(std::move(spec));
}

}  // namespace orrery::net
