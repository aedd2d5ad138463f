// chakra/validation.h: what is wrong with a trace, named node by node.
//
// validate_trace() checks one rank's graph against the Chakra rules that simulation relies on and
// returns every finding as a Diagnostic with the node id. Each check is either repairable (lenient
// mode can run the trace anyway, and the diagnostic says how) or fatal. Strict mode rejects any
// finding; lenient mode rejects only fatal ones.
//
// | check                      | lenient repair                                            |
// |----------------------------|-----------------------------------------------------------|
// | missing data/ctrl parent   | the reference is dropped                                  |
// | self data/ctrl dependency  | the reference is dropped                                  |
// | control edge closing cycle | the control edge is dropped (dependency_graph.h)          |
// | INVALID_NODE type          | the node runs as a no-op                                  |
// | CPU collective w/o type    | a COMM_COLL with is_cpu_op and no comm_type runs as CPU work |
// | unknown fields             | ignored                                                   |
// | duplicate id, cycle, unknown node or collective type, missing or mistyped attribute: fatal |
// | a duration, size or FLOP count beyond the limits of core/checked.h: fatal                  |
//
// Messages stay short whatever the trace: a cycle is printed by its first and last few nodes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "chakra/trace_graph.h"

namespace orrery::chakra {

enum class Check : uint8_t {
  kDuplicateId,
  kMissingDataParent,
  kMissingCtrlParent,
  kSelfDataDependency,
  kSelfCtrlDependency,
  kCycle,
  kControlCycle,
  kInvalidNodeType,
  kUnknownNodeType,
  kUnknownCommType,
  kMissingAttribute,
  kBadAttribute,
  kCpuCollectiveWithoutType,
  kUnknownFields,
  kOutOfRange,
};
inline constexpr size_t kCheckCount = 15;

enum class ValidationMode : uint8_t { kLenient, kStrict };

struct Diagnostic {
  Check check;
  uint64_t node_id;
  std::string message;  // "node 3511: lists itself as a control parent"
};

// Whether lenient mode survives `check`.
bool is_repairable(Check check);
// What lenient mode does about a repairable check ("dropped", "runs as a no-op").
std::string_view repair_description(Check check);
// A short plural description for summaries ("control dependencies on nodes not in the file").
std::string_view check_summary(Check check);
// A stable machine name ("missing_ctrl_parent"), used in JSON output.
std::string_view check_name(Check check);

class ValidationReport {
 public:
  void add(Check check, uint64_t node_id, std::string message);

  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }
  size_t count(Check check) const { return counts_[static_cast<size_t>(check)]; }
  size_t fatal_count() const;
  size_t repairable_count() const { return diagnostics_.size() - fatal_count(); }
  // Whether the trace may run in `mode`.
  bool passes(ValidationMode mode) const;

  // One line per check that fired: count, description, up to `examples` examples, the repair.
  std::vector<std::string> summary_lines(size_t examples = 3) const;

 private:
  std::vector<Diagnostic> diagnostics_;
  std::array<size_t, kCheckCount> counts_{};
};

// Checks `graph` (finished). Cost: O(nodes + edges) plus sorting the edges.
ValidationReport validate_trace(const TraceGraph& graph);
// The same report for a graph that shares its structure with `base` (TraceGraph::shares_structure,
// chakra/trace_set_loader.h), given base's report: when base holds no patches of its own and its
// report is clean, only the nodes `graph` patched can differ, so only they are checked (a rank
// file of a 1,024-rank set costs its patched nodes, not its whole graph). Otherwise the whole
// graph is validated. Equal to validate_trace(graph) in every case.
ValidationReport validate_trace(const TraceGraph& graph, const TraceGraph& base,
                                const ValidationReport& base_report);

}  // namespace orrery::chakra
