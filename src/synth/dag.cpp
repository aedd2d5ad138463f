#include "synth/dag.h"

#include <algorithm>
#include <array>

#include "chakra/dependency_graph.h"

namespace orrery::synth {

bool is_collective(NodeKind kind) { return kind >= NodeKind::kAllReduce; }

bool is_point_to_point(NodeKind kind) { return kind == NodeKind::kSend || kind == NodeKind::kRecv; }

std::string_view node_kind_name(NodeKind kind) {
  static constexpr std::array<std::string_view, kNodeKindCount> kNames = {
      "COMP",      "CPU_COMP",   "MEM_LOAD",       "MEM_STORE",
      "METADATA",  "SEND",       "RECV",           "ALL_REDUCE",
      "REDUCE",    "ALL_GATHER", "GATHER",         "SCATTER",
      "BROADCAST", "ALL_TO_ALL", "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK",
      "BARRIER"};
  return kNames[static_cast<size_t>(kind)];
}

int32_t comm_type_of(NodeKind kind) {
  return static_cast<int32_t>(kind) - static_cast<int32_t>(NodeKind::kAllReduce);
}

void normalize_edges(Dag& dag) {
  auto& edges = dag.edges;
  std::erase_if(edges, [](const auto& edge) { return edge.first == edge.second; });
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
}

namespace {

GroupShape shape_of(const chakra::CommGroup& group, uint32_t ranks) {
  const auto& members = group.ranks;
  if (members.size() >= ranks || members.empty()) return {};
  GroupShape shape{static_cast<uint32_t>(members.size()), 0};
  if (members.size() == 1) {
    shape.stride = 1;
    return shape;
  }
  const uint32_t stride = members[1] - members[0];
  for (size_t idx = 1; idx < members.size(); ++idx) {
    if (members[idx] - members[idx - 1] != stride) return shape;  // irregular
  }
  shape.stride = stride;
  return shape;
}

}  // namespace

Expected<Dag> dag_from_trace(const chakra::TraceGraph& graph, const chakra::CommGroups& groups,
                             uint32_t ranks, uint32_t* unknown_groups) {
  Dag dag;
  dag.ranks = std::max<uint32_t>(ranks, 1);
  dag.source = graph.source();
  dag.nodes.resize(graph.size());
  for (chakra::NodeIndex index = 0; index < graph.size(); ++index) {
    DagNode& node = dag.nodes[index];
    node.duration_us = graph.duration_micros(index);
    auto uint_attr = [&](std::string_view name) -> uint64_t {
      Expected<std::optional<uint64_t>> value = graph.get_uint(index, name);
      return value && value->has_value() ? **value : 0;
    };
    Expected<bool> cpu = graph.get_bool_or(index, "is_cpu_op", false);
    const bool is_cpu = cpu && *cpu;
    switch (graph.type(index)) {
      case ChakraProtoMsg::COMP_NODE:
        node.kind = is_cpu ? NodeKind::kCpuCompute : NodeKind::kCompute;
        node.flops = uint_attr("num_ops");
        node.tensor_bytes = uint_attr("tensor_size");
        break;
      case ChakraProtoMsg::MEM_LOAD_NODE:
      case ChakraProtoMsg::MEM_STORE_NODE:
        node.kind = graph.type(index) == ChakraProtoMsg::MEM_LOAD_NODE ? NodeKind::kMemLoad
                                                                       : NodeKind::kMemStore;
        node.tensor_bytes = uint_attr("tensor_size");
        break;
      case ChakraProtoMsg::COMM_SEND_NODE:
      case ChakraProtoMsg::COMM_RECV_NODE:
        node.kind =
            graph.type(index) == ChakraProtoMsg::COMM_SEND_NODE ? NodeKind::kSend : NodeKind::kRecv;
        node.comm_bytes = uint_attr("comm_size");
        break;
      case ChakraProtoMsg::COMM_COLL_NODE: {
        Expected<std::optional<int64_t>> type = graph.get_int(index, "comm_type");
        if (!type || !type->has_value()) {
          // A host-side collective op without a type runs as CPU work (lenient mode).
          node.kind = NodeKind::kCpuCompute;
          break;
        }
        if (**type < 0 || **type > ChakraProtoMsg::BARRIER) {
          return Error::make(ErrorKind::kTrace, "{}: node {}: comm_type {} is not a collective",
                             graph.source(), graph.id(index), **type);
        }
        node.kind = static_cast<NodeKind>(static_cast<int64_t>(NodeKind::kAllReduce) + **type);
        node.comm_bytes = uint_attr("comm_size");
        Expected<std::optional<std::string_view>> pg = graph.get_string(index, "pg_name");
        if (pg && pg->has_value()) {
          const chakra::CommGroup* group = groups.find(std::string(**pg));
          if (group != nullptr) {
            node.group = shape_of(*group, dag.ranks);
          } else if (unknown_groups != nullptr) {
            ++*unknown_groups;
          }
        }
        break;
      }
      default:  // METADATA, INVALID (a no-op in lenient mode) and unknown types take no time
        node.kind = NodeKind::kMetadata;
        node.duration_us = 0;
        break;
    }
  }
  const chakra::DependencyGraph deps =
      chakra::DependencyGraph::build(graph, chakra::DependencyKinds::kBoth);
  dag.edges.reserve(deps.edge_count());
  for (chakra::NodeIndex child = 0; child < graph.size(); ++child) {
    for (chakra::NodeIndex parent : deps.parents(child)) dag.edges.emplace_back(parent, child);
  }
  normalize_edges(dag);
  // A cycle of data edges survives DependencyGraph.
  if (const std::optional<uint32_t> stuck = node_on_cycle(dag)) {
    return Error::make(ErrorKind::kTrace,
                       "{}: node {} is on or behind a cycle of data dependencies; a trace with a "
                       "cycle cannot be learned",
                       graph.source(), graph.id(*stuck));
  }
  return dag;
}

std::optional<uint32_t> node_on_cycle(const Dag& dag) {
  // Kahn's algorithm: what it never reaches is on a cycle or behind one.
  std::vector<uint32_t> indegree(dag.size(), 0);
  std::vector<std::vector<uint32_t>> children(dag.size());
  for (const auto& [parent, child] : dag.edges) {
    ++indegree[child];
    children[parent].push_back(child);
  }
  std::vector<uint32_t> ready;
  for (uint32_t node = 0; node < dag.size(); ++node) {
    if (indegree[node] == 0) ready.push_back(node);
  }
  size_t done = 0;
  while (!ready.empty()) {
    const uint32_t node = ready.back();
    ready.pop_back();
    ++done;
    for (uint32_t child : children[node]) {
      if (--indegree[child] == 0) ready.push_back(child);
    }
  }
  if (done == dag.size()) return std::nullopt;
  uint32_t stuck = 0;
  while (indegree[stuck] == 0) ++stuck;
  return stuck;
}

DagTotals dag_totals(const Dag& dag) {
  DagTotals totals;
  for (const DagNode& node : dag.nodes) {
    totals.flops += node.flops;
    totals.comm_bytes += node.comm_bytes;
    totals.duration_us += node.duration_us;
    if (is_collective(node.kind)) ++totals.collectives;
    if (is_point_to_point(node.kind)) ++totals.point_to_point;
  }
  return totals;
}

}  // namespace orrery::synth
