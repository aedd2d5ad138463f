// chakra/trace_stats.h: what a trace contains, in numbers (behind `orrery trace inspect`).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "chakra/trace_graph.h"

namespace orrery::chakra {

struct CollectiveStats {
  uint64_t count = 0;
  uint64_t bytes = 0;  // sum of comm_size
};

struct TraceStats {
  uint64_t ranks = 0;
  uint64_t nodes = 0;
  std::map<std::string, uint64_t> by_type;             // NodeType name -> nodes
  std::map<std::string, CollectiveStats> collectives;  // CollectiveCommType name -> totals
  CollectiveStats sends;
  CollectiveStats recvs;
  uint64_t cpu_ops = 0;          // nodes with is_cpu_op set
  uint64_t flops = 0;            // sum of num_ops
  uint64_t tensor_bytes = 0;     // sum of tensor_size
  uint64_t duration_micros = 0;  // sum of duration_micros
  uint64_t data_edges = 0;       // data dependencies that resolve to a node in the file
  uint64_t ctrl_edges = 0;       // control dependencies that resolve to a node in the file
  uint64_t depth = 0;            // nodes on the longest dependency chain (data and control)
  uint64_t widest_level = 0;     // most nodes at one depth
  uint64_t unreachable = 0;      // nodes on or behind a cycle, outside the levels

  // Adds the numbers of another rank; depth and widest level take the maximum.
  void merge(const TraceStats& other);
};

// Counts everything in one rank's graph. Attributes of the wrong kind are skipped here (validation
// reports them). Cost: O(nodes + edges).
TraceStats compute_trace_stats(const TraceGraph& graph);

// The JSON form printed by `orrery trace inspect --json`.
nlohmann::json trace_stats_to_json(const TraceStats& stats);

// The text form printed by `orrery trace inspect`.
std::string format_trace_stats(const TraceStats& stats);

}  // namespace orrery::chakra
