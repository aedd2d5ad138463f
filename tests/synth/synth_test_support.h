// tests/synth/synth_test_support.h: small DAGs for the synth tests.
#pragma once

#include <initializer_list>
#include <utility>
#include <vector>

#include "synth/dag.h"
#include "synth/layerdag.h"

namespace orrery::test {

inline synth::DagNode compute(uint64_t flops, uint64_t bytes) {
  synth::DagNode node;
  node.kind = synth::NodeKind::kCompute;
  node.flops = flops;
  node.tensor_bytes = bytes;
  return node;
}

inline synth::DagNode collective(synth::NodeKind kind, uint64_t bytes,
                                 synth::GroupShape group = {}) {
  synth::DagNode node;
  node.kind = kind;
  node.comm_bytes = bytes;
  node.group = group;
  return node;
}

inline synth::DagNode p2p(synth::NodeKind kind, uint64_t bytes) {
  synth::DagNode node;
  node.kind = kind;
  node.comm_bytes = bytes;
  return node;
}

inline synth::Dag make_dag(std::vector<synth::DagNode> nodes,
                           std::initializer_list<std::pair<uint32_t, uint32_t>> edges,
                           uint32_t ranks = 1) {
  synth::Dag dag;
  dag.nodes = std::move(nodes);
  dag.edges = edges;
  dag.ranks = ranks;
  synth::normalize_edges(dag);
  return dag;
}

// A chain of `length` compute nodes of 1e9 FLOPs and 1 MB each, then one all-reduce of 1 MiB.
inline synth::Dag chain_with_all_reduce(uint32_t length) {
  synth::Dag dag;
  for (uint32_t idx = 0; idx < length; ++idx) {
    dag.nodes.push_back(compute(1'000'000'000, 1'000'000));
    if (idx > 0) dag.edges.emplace_back(idx - 1, idx);
  }
  dag.nodes.push_back(collective(synth::NodeKind::kAllReduce, 1 << 20));
  dag.edges.emplace_back(length - 1, length);
  return dag;
}

// Network sizes small enough for a test to train in a second.
inline synth::LayerDagConfig tiny_sizes() {
  synth::LayerDagConfig sizes;
  sizes.hidden = 16;
  sizes.mpnn_layers = 1;
  sizes.attr_embed = 4;
  sizes.level_embed = 4;
  sizes.label_embed = 4;
  sizes.time_embed = 4;
  sizes.heads = 2;
  sizes.node_steps = 4;
  sizes.edge_steps = 2;
  return sizes;
}

}  // namespace orrery::test
