// Resolving dependencies and releasing nodes as their parents complete.
#include "chakra/dependency_graph.h"

#include <gtest/gtest.h>

#include "chakra/trace_builder.h"
#include "chakra/trace_file.h"

namespace orrery::chakra {
namespace dependency_graph_test {

using test::build_graph;
using test::make_node;

std::vector<uint64_t> ids(const TraceGraph& graph, const std::vector<NodeIndex>& nodes) {
  std::vector<uint64_t> out;
  for (NodeIndex node : nodes) out.push_back(graph.id(node));
  return out;
}

std::vector<uint64_t> child_ids(const TraceGraph& graph, const DependencyGraph& deps,
                                NodeIndex node) {
  const auto children = deps.children(node);
  return ids(graph, std::vector<NodeIndex>(children.begin(), children.end()));
}

TEST(DependencyTracker, ready_nodes_leave_in_ascending_id_order) {
  const TraceGraph graph = build_graph({make_node(30, ChakraProtoMsg::COMP_NODE),
                                        make_node(10, ChakraProtoMsg::COMP_NODE),
                                        make_node(20, ChakraProtoMsg::COMP_NODE)});
  const DependencyGraph deps = DependencyGraph::build(graph, DependencyKinds::kBoth);
  DependencyTracker tracker(graph, deps);
  EXPECT_EQ(ids(graph, tracker.ready_nodes()), (std::vector<uint64_t>{10, 20, 30}));
  EXPECT_EQ(graph.id(tracker.pop_ready()), 10u);
  EXPECT_EQ(graph.id(tracker.pop_ready()), 20u);
}

TEST(DependencyTracker, a_child_waits_for_its_last_parent) {
  // 1 -> 3 (data), 2 -> 3 (control), 3 -> 4
  const TraceGraph graph =
      build_graph({make_node(1, ChakraProtoMsg::COMP_NODE), make_node(2, ChakraProtoMsg::COMP_NODE),
                   make_node(3, ChakraProtoMsg::COMP_NODE, {1}, {2}),
                   make_node(4, ChakraProtoMsg::COMP_NODE, {3})});
  const DependencyGraph deps = DependencyGraph::build(graph, DependencyKinds::kBoth);
  DependencyTracker tracker(graph, deps);
  const NodeIndex first = tracker.pop_ready();
  tracker.complete(first);
  EXPECT_EQ(ids(graph, tracker.ready_nodes()), (std::vector<uint64_t>{2}));
  tracker.complete(tracker.pop_ready());
  EXPECT_EQ(ids(graph, tracker.ready_nodes()), (std::vector<uint64_t>{3}));
  tracker.complete(tracker.pop_ready());
  EXPECT_EQ(ids(graph, tracker.ready_nodes()), (std::vector<uint64_t>{4}));
  tracker.complete(tracker.pop_ready());
  EXPECT_FALSE(tracker.has_ready());
  EXPECT_EQ(tracker.completed_count(), 4u);
}

TEST(DependencyGraph, kinds_select_data_or_control_edges) {
  const TraceGraph graph = build_graph(
      {make_node(1, ChakraProtoMsg::COMP_NODE), make_node(2, ChakraProtoMsg::COMP_NODE, {}, {1})});
  EXPECT_EQ(DependencyGraph::build(graph, DependencyKinds::kData).edge_count(), 0u);
  EXPECT_EQ(DependencyGraph::build(graph, DependencyKinds::kControl).edge_count(), 1u);
  EXPECT_EQ(DependencyGraph::build(graph, DependencyKinds::kBoth).edge_count(), 1u);
}

TEST(DependencyGraph, a_parent_listed_twice_counts_once) {
  const TraceGraph graph = build_graph({make_node(1, ChakraProtoMsg::COMP_NODE),
                                        make_node(2, ChakraProtoMsg::COMP_NODE, {1, 1}, {1})});
  const DependencyGraph deps = DependencyGraph::build(graph, DependencyKinds::kBoth);
  EXPECT_EQ(deps.parent_count(1), 1u);
  DependencyTracker tracker(graph, deps);
  tracker.complete(tracker.pop_ready());
  EXPECT_EQ(ids(graph, tracker.ready_nodes()), (std::vector<uint64_t>{2}));
}

TEST(DependencyGraph, missing_and_self_references_make_no_edge) {
  const TraceGraph graph = build_graph({make_node(1, ChakraProtoMsg::COMP_NODE, {99}, {1})});
  const DependencyGraph deps = DependencyGraph::build(graph, DependencyKinds::kBoth);
  EXPECT_EQ(deps.parent_count(0), 0u);
  DependencyTracker tracker(graph, deps);
  EXPECT_EQ(tracker.ready_count(), 1u);
}

// Golden figures of the real PyTorch-converted trace (chakra-et.md).
class FeederTrace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = load_trace(test::feeder_trace());
    ASSERT_TRUE(loaded) << loaded.error().message();
    graph_ = new TraceGraph(std::move(*loaded));
  }
  static void TearDownTestSuite() {
    delete graph_;
    graph_ = nullptr;
  }
  static TraceGraph* graph_;
};
TraceGraph* FeederTrace::graph_ = nullptr;

TEST_F(FeederTrace, by_data_dependencies_five_nodes_are_ready_at_start) {
  const DependencyGraph deps = DependencyGraph::build(*graph_, DependencyKinds::kData);
  DependencyTracker tracker(*graph_, deps);
  EXPECT_EQ(ids(*graph_, tracker.ready_nodes()), (std::vector<uint64_t>{216, 432, 541, 619, 1634}));
}

TEST_F(FeederTrace, node_216_has_331_children_and_releases_217_and_430) {
  const DependencyGraph deps = DependencyGraph::build(*graph_, DependencyKinds::kData);
  const NodeIndex node216 = *graph_->find(216);
  const auto children = child_ids(*graph_, deps, node216);
  ASSERT_EQ(children.size(), 331u);
  EXPECT_EQ(std::vector<uint64_t>(children.begin(), children.begin() + 3),
            (std::vector<uint64_t>{217, 430, 435}));

  DependencyTracker tracker(*graph_, deps);
  ASSERT_EQ(graph_->id(tracker.pop_ready()), 216u);
  tracker.complete(node216);
  EXPECT_EQ(ids(*graph_, tracker.ready_nodes()),
            (std::vector<uint64_t>{217, 430, 432, 541, 619, 1634}));
}

TEST(DependencyGraph, control_edges_that_agree_with_data_edges_are_kept) {
  const TraceGraph graph = build_graph({make_node(1, ChakraProtoMsg::COMP_NODE),
                                        make_node(2, ChakraProtoMsg::COMP_NODE, {1}, {1}),
                                        make_node(3, ChakraProtoMsg::COMP_NODE, {}, {2})});
  const DependencyGraph deps = DependencyGraph::build(graph, DependencyKinds::kBoth);
  EXPECT_TRUE(deps.dropped_control_edges().empty());
  EXPECT_EQ(deps.edge_count(), 2u);
}

TEST(DependencyGraph, a_cycle_of_data_edges_is_left_alone) {
  const TraceGraph graph = build_graph({make_node(1, ChakraProtoMsg::COMP_NODE, {2}),
                                        make_node(2, ChakraProtoMsg::COMP_NODE, {1}, {1})});
  const DependencyGraph deps = DependencyGraph::build(graph, DependencyKinds::kBoth);
  EXPECT_TRUE(deps.dropped_control_edges().empty());
  DependencyTracker tracker(graph, deps);
  EXPECT_FALSE(tracker.has_ready());
}

TEST(DependencyGraph, the_control_edge_of_a_mixed_cycle_is_dropped) {
  // 1 -data-> 2 -data-> 3, and 1 lists 3 as its control parent.
  const TraceGraph graph = build_graph({make_node(1, ChakraProtoMsg::COMP_NODE, {}, {3}),
                                        make_node(2, ChakraProtoMsg::COMP_NODE, {1}),
                                        make_node(3, ChakraProtoMsg::COMP_NODE, {2})});
  const DependencyGraph deps = DependencyGraph::build(graph, DependencyKinds::kBoth);
  ASSERT_EQ(deps.dropped_control_edges().size(), 1u);
  EXPECT_EQ(graph.id(deps.dropped_control_edges()[0].first), 1u);
  EXPECT_EQ(graph.id(deps.dropped_control_edges()[0].second), 3u);
  DependencyTracker tracker(graph, deps);
  size_t order = 0;
  while (tracker.has_ready()) {
    const NodeIndex node = tracker.pop_ready();
    EXPECT_EQ(graph.id(node), ++order);
    tracker.complete(node);
  }
  EXPECT_EQ(order, 3u);
}

// True when `to` can be reached from `from` along the trace's edges (both kinds), leaving out the
// single edge parent `skip_parent` -> child `skip_child`.
bool reachable(const TraceGraph& graph, NodeIndex from, NodeIndex to, NodeIndex skip_child,
               NodeIndex skip_parent) {
  const DependencyGraph all = DependencyGraph::build(graph, DependencyKinds::kData);
  const DependencyGraph ctrl = DependencyGraph::build(graph, DependencyKinds::kControl);
  std::vector<bool> seen(graph.size(), false);
  std::vector<NodeIndex> stack{from};
  seen[from] = true;
  while (!stack.empty()) {
    const NodeIndex node = stack.back();
    stack.pop_back();
    if (node == to) return true;
    for (const DependencyGraph* deps : {&all, &ctrl}) {
      for (NodeIndex child : deps->children(node)) {
        if (node == skip_parent && child == skip_child) continue;
        if (!seen[child]) {
          seen[child] = true;
          stack.push_back(child);
        }
      }
    }
  }
  return false;
}

TEST_F(FeederTrace, with_control_edges_every_node_completes_once_contradicting_ones_are_dropped) {
  const DependencyGraph deps = DependencyGraph::build(*graph_, DependencyKinds::kBoth);
  ASSERT_FALSE(deps.dropped_control_edges().empty());
  DependencyTracker tracker(*graph_, deps);
  while (tracker.has_ready()) tracker.complete(tracker.pop_ready());
  EXPECT_EQ(tracker.completed_count(), 3664u);
  // Each dropped edge parent -> child closed a cycle: the parent depends, through other edges,
  // on the child. Checked on a sample (each check is a graph search).
  const auto& dropped = deps.dropped_control_edges();
  for (size_t idx = 0; idx < dropped.size(); idx += 37) {
    const auto [child, parent] = dropped[idx];
    EXPECT_TRUE(reachable(*graph_, child, parent, child, parent))
        << "node " << graph_->id(child) << " <- " << graph_->id(parent);
  }
}

TEST_F(FeederTrace, every_node_completes_by_data_dependencies) {
  const DependencyGraph deps = DependencyGraph::build(*graph_, DependencyKinds::kData);
  DependencyTracker tracker(*graph_, deps);
  while (tracker.has_ready()) tracker.complete(tracker.pop_ready());
  EXPECT_EQ(tracker.completed_count(), 3664u);
}

}  // namespace dependency_graph_test
}  // namespace orrery::chakra
