#include "network/graph.h"

#include <algorithm>
#include <cassert>
#include <deque>

namespace orrery::net {

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

namespace {
constexpr uint16_t kUnreachable = UINT16_MAX;

Error graph_error(const GraphSpec& spec, const std::string& what) {
  return Error(ErrorKind::kTopology,
               spec.name.empty() ? what : fmt::format("graph '{}': {}", spec.name, what));
}
}  // namespace

std::string Graph::node_name(NodeId node) const {
  if (node < spec_.npus) return fmt::format("npu{}", node);
  return spec_.switch_names[node - spec_.npus];
}

Expected<Graph> Graph::create(GraphSpec spec) {
  if (spec.npus < 2) {
    return graph_error(spec, fmt::format("{} NPUs; a network needs at least 2", spec.npus));
  }
  const uint64_t nodes = uint64_t{spec.npus} + spec.switch_names.size();
  if (nodes >= UINT32_MAX || spec.links.size() >= UINT32_MAX) {
    return graph_error(spec, "more than 2^32-1 nodes or links");
  }
  for (size_t idx = 0; idx < spec.links.size(); ++idx) {
    const GraphLink& link = spec.links[idx];
    if (link.src >= nodes || link.dst >= nodes) {
      return graph_error(spec, fmt::format("link {} joins node {} and node {} but there are only "
                                           "{} nodes",
                                           idx, link.src, link.dst, nodes));
    }
    if (link.src == link.dst) {
      return graph_error(spec, fmt::format("link {} goes from node {} to itself", idx, link.src));
    }
    if (link.bandwidth.nano_gbps() == 0) {
      return graph_error(spec, fmt::format("link {} has zero bandwidth", idx));
    }
    if (link.latency < SimTime::zero()) {
      return graph_error(spec, fmt::format("link {} has a negative latency", idx));
    }
  }
  if (spec.logical.empty()) spec.logical.push_back({TopologyKind::kSwitch, spec.npus});
  uint64_t product = 1;
  for (const LogicalDimension& dim : spec.logical) {
    if (dim.size < 2) {
      return graph_error(
          spec, fmt::format("logical dimension of size {}; each needs at least 2", dim.size));
    }
    product *= dim.size;
    if (product > spec.npus) break;
  }
  if (product != spec.npus) {
    return graph_error(spec, fmt::format("the logical dimensions multiply to {} but there are {} "
                                         "NPUs",
                                         product, spec.npus));
  }
  if (spec.routing == Routing::kDimensionOrder) {
    uint64_t torus = 1;
    for (uint32_t size : spec.torus) torus *= size;
    if (spec.torus.empty() || torus != spec.npus) {
      return graph_error(spec,
                         "dimension-order routing needs 'torus' sizes whose product is the "
                         "NPU count");
    }
  }

  Graph graph;
  graph.spec_ = std::move(spec);
  const GraphSpec& s = graph.spec_;
  const auto node_count = static_cast<uint32_t>(nodes);
  graph.out_begin_.assign(node_count + 1, 0);
  graph.in_begin_.assign(node_count + 1, 0);
  for (const GraphLink& link : s.links) {
    ++graph.out_begin_[link.src + 1];
    ++graph.in_begin_[link.dst + 1];
  }
  for (uint32_t node = 0; node < node_count; ++node) {
    graph.out_begin_[node + 1] += graph.out_begin_[node];
    graph.in_begin_[node + 1] += graph.in_begin_[node];
  }
  graph.out_.resize(s.links.size());
  graph.in_.resize(s.links.size());
  {
    std::vector<uint32_t> out_fill(graph.out_begin_.begin(), graph.out_begin_.end() - 1);
    std::vector<uint32_t> in_fill(graph.in_begin_.begin(), graph.in_begin_.end() - 1);
    for (uint32_t idx = 0; idx < s.links.size(); ++idx) {
      graph.out_[out_fill[s.links[idx].src]++] = idx;
      graph.in_[in_fill[s.links[idx].dst]++] = idx;
    }
  }
  graph.distance_cache_.resize(s.npus);

  // Every NPU must reach every other one; routing depends on it.
  if (s.routing == Routing::kDimensionOrder) {
    // Dimension-order routing needs the +1 and -1 neighbour links in every dimension.
    uint32_t stride = 1;
    for (uint32_t size : s.torus) {
      for (Rank npu = 0; npu < s.npus; ++npu) {
        const uint32_t coord = (npu / stride) % size;
        const Rank next = npu - coord * stride + ((coord + 1) % size) * stride;
        const Rank prev = npu - coord * stride + ((coord + size - 1) % size) * stride;
        if (graph.find_link(npu, next) == UINT64_MAX || graph.find_link(npu, prev) == UINT64_MAX) {
          return graph_error(
              s, fmt::format("torus routing: {} has no link to its neighbour {} or "
                             "{}",
                             graph.node_name(npu), graph.node_name(next), graph.node_name(prev)));
        }
      }
      stride *= size;
    }
  } else if (!graph.reaches_through_hub()) {
    // Some NPU does not reach the best-connected relay, or it does not reach them all: find the
    // pair to name (every destination of a small graph; one of a large graph).
    const uint32_t checked = s.npus < 4096 ? s.npus : 1;
    for (Rank dst = 0; dst < checked; ++dst) {
      const std::vector<uint16_t>& dist = graph.distances_to(dst);
      for (Rank src = 0; src < s.npus; ++src) {
        if (dist[src] == kUnreachable) {
          return graph_error(
              s, fmt::format("{} cannot reach {}", graph.node_name(src), graph.node_name(dst)));
        }
      }
      // Keep the cache only for small graphs; large ones recompute on demand.
      if (s.npus > 2048) graph.distance_cache_[dst].clear();
    }
  }
  return graph;
}

bool Graph::reaches_through_hub() const {
  // Every NPU reaches every other when all reach one node that relays and it reaches them all:
  // two searches instead of one per NPU (a 2,662-NPU fat tree cost 42 M steps, 100x more under
  // the sanitizers). The hub is the relaying node of most links.
  NodeId hub = UINT32_MAX;
  uint32_t best = 0;
  for (NodeId node = 0; node < node_count(); ++node) {
    const uint32_t degree = out_begin_[node + 1] - out_begin_[node];
    if (forwards(node) && (hub == UINT32_MAX || degree > best)) {
      hub = node;
      best = degree;
    }
  }
  if (hub == UINT32_MAX) return false;
  for (const bool forward : {true, false}) {
    std::vector<uint8_t> seen(node_count(), 0);
    std::vector<NodeId> queue{hub};
    seen[hub] = 1;
    for (size_t at = 0; at < queue.size(); ++at) {
      const NodeId node = queue[at];
      const std::vector<uint32_t>& links = forward ? out_ : in_;
      const std::vector<uint32_t>& begin = forward ? out_begin_ : in_begin_;
      for (uint32_t idx = begin[node]; idx < begin[node + 1]; ++idx) {
        const GraphLink& link = spec_.links[links[idx]];
        const NodeId next = forward ? link.dst : link.src;
        if (seen[next] != 0) continue;
        seen[next] = 1;
        // A node that does not relay ends a path (forward) or only starts one (backward).
        if (forwards(next)) queue.push_back(next);
      }
    }
    for (Rank npu = 0; npu < spec_.npus; ++npu) {
      if (seen[npu] == 0) return false;
    }
  }
  return true;
}

LinkInfo Graph::link_info(LinkId link) const {
  const GraphLink& l = spec_.links[link];
  return {l.src, l.dst, l.dimension};
}

const std::vector<uint16_t>& Graph::distances_to(Rank dst) const {
  std::vector<uint16_t>& dist = distance_cache_[dst];
  if (!dist.empty()) return dist;
  dist.assign(node_count(), kUnreachable);
  // Backwards breadth-first search over incoming links; only forwarding nodes relay.
  std::deque<NodeId> queue;
  dist[dst] = 0;
  queue.push_back(dst);
  while (!queue.empty()) {
    const NodeId node = queue.front();
    queue.pop_front();
    for (uint32_t idx = in_begin_[node]; idx < in_begin_[node + 1]; ++idx) {
      const NodeId from = spec_.links[in_[idx]].src;
      if (dist[from] != kUnreachable) continue;
      dist[from] = static_cast<uint16_t>(dist[node] + 1);
      // An NPU that does not forward can start a path but not relay one.
      if (forwards(from)) queue.push_back(from);
    }
  }
  return dist;
}

uint32_t Graph::distance(Rank src, Rank dst) const {
  if (src == dst) return 0;
  if (spec_.routing == Routing::kDimensionOrder) {
    Path path;
    route(src, dst, 0, path);
    return static_cast<uint32_t>(path.size());
  }
  return distances_to(dst)[src];
}

LinkId Graph::find_link(NodeId from, NodeId to) const {
  for (uint32_t link : out_links(from)) {
    if (spec_.links[link].dst == to) return link;
  }
  return UINT64_MAX;
}

uint64_t FlowLabels::next(Rank src, Rank dst) {
  if ((used_ + 1) * 2 > slots_.size()) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<size_t>(64, old.size() * 2), Slot{});
    used_ = 0;
    for (const Slot& slot : old) {
      if (slot.pair == 0) continue;
      size_t at = mix64(slot.pair) & (slots_.size() - 1);
      while (slots_[at].pair != 0) at = (at + 1) & (slots_.size() - 1);
      slots_[at] = slot;
      ++used_;
    }
  }
  const uint64_t pair = (uint64_t{src} + 1) << 32 | dst;
  size_t at = mix64(pair) & (slots_.size() - 1);
  while (slots_[at].pair != 0 && slots_[at].pair != pair) at = (at + 1) & (slots_.size() - 1);
  if (slots_[at].pair == 0) {
    slots_[at].pair = pair;
    ++used_;
  }
  return slots_[at].count++;
}

void Fabric::route(Rank src, Rank dst, uint64_t flow, Path& out) const {
  assert(src != dst && src < npu_count() && dst < npu_count());
  const uint64_t key = route_key(src, dst, flow);
  NodeId at = src;
  while (at != dst) {
    const Hop hop = next_hop(at, dst, key);
    out.push_back(hop.link);
    at = hop.next;
  }
}

uint64_t Graph::route_key(Rank src, Rank dst, uint64_t flow) const {
  return mix64(mix64((uint64_t{src} << 32) | dst) ^ flow);
}

Hop Graph::next_hop(NodeId at, Rank dst, uint64_t key) const {
  assert(at != dst && dst < spec_.npus);
  Hop hop;
  if (spec_.routing == Routing::kDimensionOrder) {
    // The lowest differing coordinate, the shorter way round (clockwise at exactly half way);
    // deciding again at every hop keeps the direction chosen at the first one.
    uint32_t stride = 1;
    for (uint32_t size : spec_.torus) {
      const uint32_t coord = (at / stride) % size;
      const uint32_t to = (dst / stride) % size;
      if (coord != to) {
        const uint32_t forward = (to + size - coord) % size;
        const bool clockwise = forward <= size - forward;
        const uint32_t next_coord = clockwise ? (coord + 1) % size : (coord + size - 1) % size;
        hop.next = at - coord * stride + next_coord * stride;
        hop.link = find_link(at, hop.next);
        assert(hop.link != UINT64_MAX);
        hop.dimension = spec_.links[hop.link].dimension;
        return hop;
      }
      stride *= size;
    }
    assert(false && "dimension-order routing: no coordinate differs");
    return hop;
  }
  const std::vector<uint16_t>& dist = distances_to(dst);
  const uint16_t here = dist[at];
  // Candidates: links to a node one hop closer that may relay (or is the destination).
  uint32_t candidates = 0;
  for (uint32_t link : out_links(at)) {
    const NodeId next = spec_.links[link].dst;
    if (dist[next] + 1 == here && (next == dst || forwards(next))) ++candidates;
  }
  assert(candidates > 0);
  uint64_t pick =
      candidates == 1 ? 0 : mix64(key ^ (uint64_t{at} * 0x9e3779b97f4a7c15ULL)) % candidates;
  for (uint32_t link : out_links(at)) {
    const NodeId next = spec_.links[link].dst;
    if (dist[next] + 1 == here && (next == dst || forwards(next))) {
      if (pick == 0) {
        hop.link = link;
        hop.next = next;
        hop.dimension = spec_.links[link].dimension;
        return hop;
      }
      --pick;
    }
  }
  return hop;
}

LinkId Graph::edge_link(Rank rank, uint32_t dim, bool up) const {
  const uint32_t begin = up ? out_begin_[rank] : in_begin_[rank];
  const uint32_t end = up ? out_begin_[rank + 1] : in_begin_[rank + 1];
  const std::vector<uint32_t>& list = up ? out_ : in_;
  for (uint32_t idx = begin; idx < end; ++idx) {
    if (spec_.links[list[idx]].dimension == dim) return list[idx];
  }
  return list[begin];
}

Expected<Topology> Graph::logical_topology() const {
  std::vector<Dimension> dims;
  for (uint32_t d = 0; d < spec_.logical.size(); ++d) {
    const GraphLink& link = spec_.links[edge_link(0, d, true)];
    dims.push_back({spec_.logical[d].kind, spec_.logical[d].size, link.bandwidth, link.latency});
  }
  return Topology::create(std::move(dims));
}

LinkId TopologyFabric::edge_link(Rank rank, uint32_t dim, bool up) const {
  return up ? topology_.switch_uplink(rank, dim).link : topology_.switch_downlink(rank, dim).link;
}

}  // namespace orrery::net
