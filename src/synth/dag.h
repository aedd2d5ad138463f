// synth/dag.h: one rank's trace as the generative model sees it: a DAG of typed nodes.
//
// A Dag keeps what a synthetic trace may carry and nothing else: per node its kind (compute, host
// compute, memory, metadata, send, receive, or the collective type), the shape of the communicator
// group a collective runs over, and four magnitudes (FLOPs, tensor bytes, communication bytes,
// recorded microseconds); and the dependencies (data and control alike) as parent -> child pairs.
// Operator names, node ids, tensor names and shapes, timestamps and every other attribute are
// dropped on the way in (docs/models/synth.md, "Privacy").
//
// dag_from_trace() builds it from a loaded TraceGraph: ids are resolved to edges (missing parents
// and self-references dropped, duplicates merged, control edges that close a cycle dropped as the
// simulator does); a cycle of data edges is an Error naming a node on it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chakra/comm_groups.h"
#include "chakra/trace_graph.h"
#include "core/error.h"

namespace orrery::synth {

// What a node does. The collective kinds follow Chakra's CollectiveCommType order from kAllReduce.
enum class NodeKind : uint8_t {
  kCompute,     // COMP_NODE on the accelerator
  kCpuCompute,  // COMP_NODE with is_cpu_op (timed by its recorded duration)
  kMemLoad,
  kMemStore,
  kMetadata,  // METADATA_NODE (and INVALID_NODE): takes no time
  kSend,
  kRecv,
  kAllReduce,
  kReduce,
  kAllGather,
  kGather,
  kScatter,
  kBroadcast,
  kAllToAll,
  kReduceScatter,
  kReduceScatterBlock,
  kBarrier,
};
inline constexpr uint32_t kNodeKindCount = 17;

bool is_collective(NodeKind kind);
bool is_point_to_point(NodeKind kind);
// "COMP", "CPU_COMP", "MEM_LOAD", ..., "ALL_REDUCE" (the collective's Chakra name).
std::string_view node_kind_name(NodeKind kind);
// The CollectiveCommType value of a collective kind.
int32_t comm_type_of(NodeKind kind);

// The ranks a collective runs over, independent of which rank runs it: `size` ranks `stride` apart
// (a tensor-parallel group of 4 is {4, 1}, a data-parallel group of 2 over 8 ranks with tp 4 is
// {2, 4}). {0, 0}: every rank of the job. stride 0 with a size: ranks that are not evenly spaced.
struct GroupShape {
  uint32_t size = 0;
  uint32_t stride = 0;
  bool whole_job() const { return size == 0; }
  friend bool operator==(const GroupShape&, const GroupShape&) = default;
  friend auto operator<=>(const GroupShape&, const GroupShape&) = default;
};

struct DagNode {
  NodeKind kind = NodeKind::kCompute;
  GroupShape group;           // collectives only
  uint64_t flops = 0;         // num_ops (compute)
  uint64_t tensor_bytes = 0;  // tensor_size (compute, memory)
  uint64_t comm_bytes = 0;    // comm_size (collectives, sends, receives)
  uint64_t duration_us = 0;   // duration_micros (recorded time)
  friend bool operator==(const DagNode&, const DagNode&) = default;
};

struct Dag {
  std::vector<DagNode> nodes;
  // (parent, child) node positions, sorted and unique; no self-loops.
  std::vector<std::pair<uint32_t, uint32_t>> edges;
  uint32_t ranks = 1;  // ranks of the job this graph came from (or is decoded for)
  std::string source;  // where it came from, for messages ("" for samples)

  uint32_t size() const { return static_cast<uint32_t>(nodes.size()); }
  // Same nodes and edges (source and ranks ignored).
  bool same_graph(const Dag& other) const { return nodes == other.nodes && edges == other.edges; }
};

// Sorts and deduplicates `dag.edges`, dropping self-loops.
void normalize_edges(Dag& dag);

// The learning view of rank `rank` of a job of `ranks` ranks. `groups` resolves pg_names (a name
// it does not know counts as the whole job and is counted in `unknown_groups` when given).
Expected<Dag> dag_from_trace(const chakra::TraceGraph& graph, const chakra::CommGroups& groups,
                             uint32_t ranks, uint32_t* unknown_groups = nullptr);

// A node on or behind a cycle of `dag.edges` (the lowest position Kahn's algorithm never reaches);
// nullopt when the graph is acyclic. O(nodes + edges).
std::optional<uint32_t> node_on_cycle(const Dag& dag);

// Totals over the nodes, for labels and reports.
struct DagTotals {
  uint64_t flops = 0;
  uint64_t comm_bytes = 0;
  uint64_t duration_us = 0;
  uint32_t collectives = 0;
  uint32_t point_to_point = 0;
};
DagTotals dag_totals(const Dag& dag);

}  // namespace orrery::synth
