// chakra/dependency_graph.h: a trace's dependencies resolved into edges, and the tracker that
// releases nodes as their parents complete.
//
// DependencyGraph turns the parent ids of a TraceGraph into parent counts and sorted child lists,
// for data dependencies, control dependencies or both. A reference to a node that is not in the
// file, or to the node itself, has no edge: validation reports such references and lenient mode
// accepts them; a parent listed twice counts once.
//
// Data dependencies are hard: a consumer cannot run before its producer. Control dependencies are
// ordering hints, and converters get them wrong (the PyTorch converter makes a CPU op the control
// child of the GPU kernel it launched). With both kinds, a control edge that closes a cycle with
// the others is dropped and recorded in dropped_control_edges(); cycles made of data edges alone
// stay, and the nodes on and behind them never become ready.
//
// DependencyTracker runs the graph: ready nodes leave in ascending id order, and completing a node
// readies every child whose parents have all completed.
#pragma once

#include <cstdint>
#include <queue>
#include <span>
#include <utility>
#include <vector>

#include "chakra/trace_graph.h"

namespace orrery::chakra {

enum class DependencyKinds : uint8_t { kData = 1, kControl = 2, kBoth = 3 };

class DependencyGraph {
 public:
  // Resolves the edges of `graph` (which must be finished). Cost: O(edges log edges).
  static DependencyGraph build(const TraceGraph& graph, DependencyKinds kinds);

  NodeIndex size() const { return static_cast<NodeIndex>(parent_counts_.size()); }
  uint32_t parent_count(NodeIndex node) const { return parent_counts_[node]; }
  // Children of `node`, in ascending id order.
  std::span<const NodeIndex> children(NodeIndex node) const {
    return {children_.data() + child_offsets_[node],
            child_offsets_[node + 1] - child_offsets_[node]};
  }
  // Parents of `node` that are in the file, in ascending index order.
  std::span<const NodeIndex> parents(NodeIndex node) const {
    return {parents_.data() + parent_offsets_[node],
            parent_offsets_[node + 1] - parent_offsets_[node]};
  }
  uint64_t edge_count() const { return children_.size(); }
  // Control edges (child, parent) removed because they closed a cycle, in the order removed.
  const std::vector<std::pair<NodeIndex, NodeIndex>>& dropped_control_edges() const {
    return dropped_control_edges_;
  }

 private:
  // Removes, one cycle at a time, a control edge from every cycle that has one.
  void break_control_cycles(const std::vector<uint8_t>& is_control);
  void build_children(const TraceGraph& graph);

  std::vector<uint32_t> parent_counts_;
  std::vector<uint32_t> parent_offsets_;
  std::vector<NodeIndex> parents_;
  std::vector<uint32_t> child_offsets_;
  std::vector<NodeIndex> children_;
  std::vector<std::pair<NodeIndex, NodeIndex>> dropped_control_edges_;
};

class DependencyTracker {
 public:
  // Starts with every parentless node ready. Both references must outlive the tracker.
  DependencyTracker(const TraceGraph& graph, const DependencyGraph& deps);

  bool has_ready() const { return !ready_.empty(); }
  size_t ready_count() const { return ready_.size(); }
  // The ready node with the smallest id, removed from the ready set. Cost: O(log ready).
  NodeIndex pop_ready();
  // The ready set in ascending id order, without changing it. Cost: O(ready log ready).
  std::vector<NodeIndex> ready_nodes() const;
  // Marks `node` (popped earlier) complete and readies the children it was the last parent of.
  void complete(NodeIndex node);
  size_t completed_count() const { return completed_; }
  // Parents of `node` not yet completed.
  uint32_t pending_parents(NodeIndex node) const { return pending_[node]; }

 private:
  using Entry = std::pair<uint64_t, NodeIndex>;  // (id, index): ties between equal ids by index
  const TraceGraph* graph_;
  const DependencyGraph* deps_;
  std::vector<uint32_t> pending_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready_;
  size_t completed_ = 0;
};

}  // namespace orrery::chakra
