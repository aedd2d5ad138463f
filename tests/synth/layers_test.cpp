#include <gtest/gtest.h>

#include "synth/layers.h"
#include "synth_test_support.h"

namespace orrery::synth {
namespace layers_test {

using test::compute;
using test::make_dag;

// 0 -> 2, 1 -> 2, 2 -> 3, 0 -> 3, 4 alone: levels 0 0 1 2 0 (3's longest path is via 2).
Dag diamond() {
  return make_dag({compute(1, 1), compute(2, 1), compute(3, 1), compute(4, 1), compute(5, 1)},
                  {{0, 2}, {1, 2}, {2, 3}, {0, 3}});
}

TEST(Layers, a_nodes_layer_is_its_longest_path_from_a_source) {
  EXPECT_EQ(kahn_levels(diamond()), (std::vector<uint32_t>{0, 0, 1, 2, 0}));
}

TEST(Layers, layer_order_keeps_file_order_within_a_layer_and_renumbers_edges) {
  const LayeredDag layered = layer_dag(diamond());
  EXPECT_EQ(layered.layer_start, (std::vector<uint32_t>{0, 3, 4, 5}));
  // Layer 0: old 0, 1, 4; layer 1: old 2; layer 2: old 3.
  std::vector<uint64_t> flops;
  for (const DagNode& node : layered.dag.nodes) flops.push_back(node.flops);
  EXPECT_EQ(flops, (std::vector<uint64_t>{1, 2, 5, 3, 4}));
  EXPECT_EQ(layered.dag.edges,
            (std::vector<std::pair<uint32_t, uint32_t>>{{0, 3}, {0, 4}, {1, 3}, {3, 4}}));
  EXPECT_EQ(layered.layer_of(2), 0u);
  EXPECT_EQ(layered.layer_of(3), 1u);
  EXPECT_EQ(layered.layer_of(4), 2u);
}

TEST(Layers, compute_chains_contract_into_one_node_with_summed_work) {
  // c0 -> c1 -> c2 -> all-reduce -> c4: the chain c0..c2 becomes one node; c4 stays (its parent
  // is a collective).
  Dag dag = test::chain_with_all_reduce(3);
  dag.nodes.push_back(compute(7, 8));
  dag.edges.emplace_back(3, 4);
  const Dag coarse = coarsen_compute_chains(dag);
  ASSERT_EQ(coarse.size(), 3u);
  EXPECT_EQ(coarse.nodes[0].flops, 3'000'000'000u);
  EXPECT_EQ(coarse.nodes[0].tensor_bytes, 3'000'000u);
  EXPECT_EQ(coarse.nodes[1].kind, NodeKind::kAllReduce);
  EXPECT_EQ(coarse.nodes[2].flops, 7u);
  EXPECT_EQ(coarse.edges, (std::vector<std::pair<uint32_t, uint32_t>>{{0, 1}, {1, 2}}));
}

TEST(Layers, a_branching_node_is_not_contracted) {
  // 0 -> 1, 0 -> 2: node 0 has two children; nothing merges.
  const Dag dag = make_dag({compute(1, 1), compute(2, 1), compute(3, 1)}, {{0, 1}, {0, 2}});
  EXPECT_EQ(coarsen_compute_chains(dag).size(), 3u);
}

TEST(Layers, a_graph_that_fits_is_left_alone) {
  WindowReport report;
  const std::vector<Dag> windows = fit_to_window(diamond(), 5, &report);
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_TRUE(windows[0].same_graph(diamond()));
  EXPECT_EQ(report.graphs_coarsened, 0u);
}

TEST(Layers, a_large_graph_is_coarsened_then_cut_into_layer_windows) {
  // Ten (compute -> all-reduce) pairs in sequence: 20 nodes, nothing to contract (every compute's
  // child is a collective); windows of at most 6 nodes cut between layers.
  Dag dag;
  for (uint32_t idx = 0; idx < 10; ++idx) {
    dag.nodes.push_back(compute(1, 1));
    dag.nodes.push_back(test::collective(NodeKind::kAllReduce, 64));
    dag.edges.emplace_back(2 * idx, 2 * idx + 1);
    if (idx > 0) dag.edges.emplace_back(2 * idx - 1, 2 * idx);
  }
  WindowReport report;
  const std::vector<Dag> windows = fit_to_window(dag, 6, &report);
  ASSERT_EQ(windows.size(), 4u);  // 6 + 6 + 6 + 2 nodes
  EXPECT_EQ(windows[0].size(), 6u);
  EXPECT_EQ(windows[3].size(), 2u);
  for (const Dag& window : windows) {
    EXPECT_EQ(window.edges.size(), window.size() - 1);  // a chain inside every window
  }
  EXPECT_EQ(report.graphs_coarsened, 1u);
  EXPECT_EQ(report.nodes_merged, 0u);
  EXPECT_EQ(report.graphs_split, 1u);
  EXPECT_EQ(report.windows, 4u);
}

TEST(Layers, a_layer_wider_than_the_window_is_cut_into_pieces) {
  Dag dag;
  for (uint32_t idx = 0; idx < 7; ++idx)
    dag.nodes.push_back(test::collective(NodeKind::kBarrier, 0));
  const std::vector<Dag> windows = fit_to_window(dag, 3);
  ASSERT_EQ(windows.size(), 3u);
  EXPECT_EQ(windows[0].size(), 3u);
  EXPECT_EQ(windows[2].size(), 1u);
}

TEST(Layers, chained_windows_meet_at_a_metadata_node) {
  const Dag a = make_dag({compute(1, 1), compute(2, 1)}, {});        // two sinks
  const Dag b = make_dag({compute(3, 1), compute(4, 1)}, {{0, 1}});  // one source
  const Dag chained = chain_dags({a, b});
  ASSERT_EQ(chained.size(), 5u);
  EXPECT_EQ(chained.nodes[2].kind, NodeKind::kMetadata);
  EXPECT_EQ(chained.edges,
            (std::vector<std::pair<uint32_t, uint32_t>>{{0, 2}, {1, 2}, {2, 3}, {3, 4}}));
  EXPECT_EQ(kahn_levels(chained), (std::vector<uint32_t>{0, 0, 1, 2, 3}));
}

}  // namespace layers_test
}  // namespace orrery::synth
