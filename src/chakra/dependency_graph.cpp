#include "chakra/dependency_graph.h"

#include <algorithm>
#include <cassert>
#include <optional>

namespace orrery::chakra {

DependencyGraph DependencyGraph::build(const TraceGraph& graph, DependencyKinds kinds) {
  const NodeIndex count = graph.size();
  const bool use_data = (static_cast<uint8_t>(kinds) & 1) != 0;
  const bool use_ctrl = (static_cast<uint8_t>(kinds) & 2) != 0;

  DependencyGraph result;
  result.parent_counts_.assign(count, 0);
  result.parent_offsets_.assign(count + 1, 0);
  std::vector<uint8_t> is_control;  // per entry of parents_: 1 when only a control edge links them
  std::vector<std::pair<NodeIndex, uint8_t>> scratch;
  for (NodeIndex node = 0; node < count; ++node) {
    scratch.clear();
    auto add = [&](std::span<const uint64_t> ids, uint8_t control) {
      for (uint64_t parent_id : ids) {
        const std::optional<NodeIndex> parent = graph.find(parent_id);
        if (parent && *parent != node) scratch.emplace_back(*parent, control);
      }
    };
    if (use_data) add(graph.data_deps(node), 0);
    if (use_ctrl) add(graph.ctrl_deps(node), 1);
    // Sorted by parent, data (0) before control (1): unique keeps the data edge of a pair.
    std::sort(scratch.begin(), scratch.end());
    scratch.erase(
        std::unique(scratch.begin(), scratch.end(),
                    [](const auto& lhs, const auto& rhs) { return lhs.first == rhs.first; }),
        scratch.end());
    for (const auto& [parent, control] : scratch) {
      result.parents_.push_back(parent);
      is_control.push_back(control);
    }
    result.parent_offsets_[node + 1] = static_cast<uint32_t>(result.parents_.size());
    result.parent_counts_[node] = static_cast<uint32_t>(scratch.size());
  }
  if (use_data && use_ctrl) result.break_control_cycles(is_control);
  result.build_children(graph);
  return result;
}

void DependencyGraph::break_control_cycles(const std::vector<uint8_t>& is_control) {
  const auto count = static_cast<NodeIndex>(parent_counts_.size());
  // Kahn's algorithm over parent lists: children are found through a temporary reverse index.
  std::vector<uint32_t> child_offsets(count + 1, 0);
  for (NodeIndex parent : parents_) ++child_offsets[parent + 1];
  for (NodeIndex node = 0; node < count; ++node) child_offsets[node + 1] += child_offsets[node];
  std::vector<NodeIndex> children(parents_.size());
  {
    std::vector<uint32_t> cursor(child_offsets.begin(), child_offsets.end() - 1);
    for (NodeIndex node = 0; node < count; ++node) {
      for (uint32_t entry = parent_offsets_[node]; entry < parent_offsets_[node + 1]; ++entry) {
        children[cursor[parents_[entry]]++] = node;
      }
    }
  }
  std::vector<uint32_t> pending(parent_counts_);
  std::vector<uint8_t> done(count, 0);
  std::vector<uint8_t> dropped(parents_.size(), 0);
  std::vector<NodeIndex> ready;
  for (NodeIndex node = 0; node < count; ++node) {
    if (pending[node] == 0) ready.push_back(node);
  }
  size_t completed = 0;
  NodeIndex scan_from = 0;
  std::vector<int64_t> position(count, -1);
  std::vector<NodeIndex> walk;
  while (true) {
    while (!ready.empty()) {
      const NodeIndex node = ready.back();
      ready.pop_back();
      done[node] = 1;
      ++completed;
      for (uint32_t idx = child_offsets[node]; idx < child_offsets[node + 1]; ++idx) {
        if (--pending[children[idx]] == 0) ready.push_back(children[idx]);
      }
    }
    if (completed == count) break;

    // Stuck: every node left waits on a parent left. Walk first-pending parents until a node
    // repeats; the repeated stretch is a cycle.
    while (done[scan_from]) ++scan_from;
    walk.clear();
    NodeIndex node = scan_from;
    while (position[node] < 0) {
      position[node] = static_cast<int64_t>(walk.size());
      walk.push_back(node);
      for (uint32_t entry = parent_offsets_[node]; entry < parent_offsets_[node + 1]; ++entry) {
        if (!dropped[entry] && !done[parents_[entry]]) {
          node = parents_[entry];
          break;
        }
      }
    }
    // walk[position[node]..] runs child to parent; cut its first control edge.
    std::optional<std::pair<NodeIndex, uint32_t>> cut;  // (child, entry in parents_)
    for (size_t step = static_cast<size_t>(position[node]); step < walk.size() && !cut; ++step) {
      const NodeIndex child = walk[step];
      const NodeIndex parent = step + 1 < walk.size() ? walk[step + 1] : node;
      for (uint32_t entry = parent_offsets_[child]; entry < parent_offsets_[child + 1]; ++entry) {
        if (parents_[entry] == parent && !dropped[entry] && is_control[entry]) {
          cut = std::make_pair(child, entry);
          break;
        }
      }
    }
    for (NodeIndex visited : walk) position[visited] = -1;
    if (!cut) break;  // a cycle of data edges: nothing to repair
    const auto [child, entry] = *cut;
    dropped[entry] = 1;
    dropped_control_edges_.emplace_back(child, parents_[entry]);
    --parent_counts_[child];
    if (--pending[child] == 0) ready.push_back(child);
  }
  if (dropped_control_edges_.empty()) return;

  // Compact the parent lists without the dropped edges.
  std::vector<NodeIndex> kept;
  kept.reserve(parents_.size() - dropped_control_edges_.size());
  std::vector<uint32_t> offsets(count + 1, 0);
  for (NodeIndex node = 0; node < count; ++node) {
    for (uint32_t entry = parent_offsets_[node]; entry < parent_offsets_[node + 1]; ++entry) {
      if (!dropped[entry]) kept.push_back(parents_[entry]);
    }
    offsets[node + 1] = static_cast<uint32_t>(kept.size());
  }
  parents_ = std::move(kept);
  parent_offsets_ = std::move(offsets);
}

void DependencyGraph::build_children(const TraceGraph& graph) {
  const NodeIndex count = size();
  // Children by counting sort over parents, then each list sorted by child id.
  child_offsets_.assign(count + 1, 0);
  for (NodeIndex parent : parents_) ++child_offsets_[parent + 1];
  for (NodeIndex node = 0; node < count; ++node) child_offsets_[node + 1] += child_offsets_[node];
  children_.resize(parents_.size());
  std::vector<uint32_t> cursor(child_offsets_.begin(), child_offsets_.end() - 1);
  for (NodeIndex node = 0; node < count; ++node) {
    for (NodeIndex parent : parents(node)) children_[cursor[parent]++] = node;
  }
  for (NodeIndex node = 0; node < count; ++node) {
    auto begin = children_.begin() + child_offsets_[node];
    auto end = children_.begin() + child_offsets_[node + 1];
    std::sort(begin, end, [&graph](NodeIndex lhs, NodeIndex rhs) {
      return std::make_pair(graph.id(lhs), lhs) < std::make_pair(graph.id(rhs), rhs);
    });
  }
}

DependencyTracker::DependencyTracker(const TraceGraph& graph, const DependencyGraph& deps)
    : graph_(&graph), deps_(&deps) {
  assert(graph.size() == deps.size());
  pending_.resize(deps.size());
  std::vector<Entry> initial;
  for (NodeIndex node = 0; node < deps.size(); ++node) {
    pending_[node] = deps.parent_count(node);
    if (pending_[node] == 0) initial.emplace_back(graph.id(node), node);
  }
  ready_ = decltype(ready_)(std::greater<>(), std::move(initial));
}

NodeIndex DependencyTracker::pop_ready() {
  assert(!ready_.empty());
  const NodeIndex node = ready_.top().second;
  ready_.pop();
  return node;
}

std::vector<NodeIndex> DependencyTracker::ready_nodes() const {
  auto copy = ready_;
  std::vector<NodeIndex> nodes;
  nodes.reserve(copy.size());
  while (!copy.empty()) {
    nodes.push_back(copy.top().second);
    copy.pop();
  }
  return nodes;
}

void DependencyTracker::complete(NodeIndex node) {
  ++completed_;
  for (NodeIndex child : deps_->children(node)) {
    assert(pending_[child] > 0);
    if (--pending_[child] == 0) ready_.emplace(graph_->id(child), child);
  }
}

}  // namespace orrery::chakra
