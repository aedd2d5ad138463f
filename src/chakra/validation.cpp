#include "chakra/validation.h"

#include <algorithm>
#include <optional>

#include "chakra/dependency_graph.h"
#include "core/checked.h"
#include "core/units.h"

namespace orrery::chakra {

namespace {

struct CheckInfo {
  std::string_view name;
  std::string_view summary;
  std::string_view repair;  // empty: fatal
};

constexpr std::array<CheckInfo, kCheckCount> kChecks = {{
    {"duplicate_id", "node ids used more than once", ""},
    {"missing_data_parent", "data dependencies on nodes not in the file", "dropped"},
    {"missing_ctrl_parent", "control dependencies on nodes not in the file", "dropped"},
    {"self_data_dependency", "nodes that list themselves as a data parent", "dropped"},
    {"self_ctrl_dependency", "nodes that list themselves as a control parent", "dropped"},
    {"cycle", "dependency cycle(s)", ""},
    {"control_cycle", "control dependencies that close a dependency cycle", "dropped"},
    {"invalid_node_type", "nodes of type INVALID_NODE", "run as no-ops"},
    {"unknown_node_type", "nodes of an unknown type", ""},
    {"unknown_comm_type", "collectives of an unknown comm_type", ""},
    {"missing_attribute", "nodes missing a required attribute", ""},
    {"bad_attribute", "attributes holding the wrong kind of value", ""},
    {"cpu_collective_without_type",
     "COMM_COLL nodes marked is_cpu_op without comm_type (host-side collective calls)",
     "run as host CPU work for their duration"},
    {"unknown_fields", "nodes with fields this schema does not define", "ignored"},
    {"out_of_range",
     "sizes, durations or FLOP counts beyond what orrery simulates exactly (docs/numbers.md)", ""},
}};

const CheckInfo& info(Check check) { return kChecks[static_cast<size_t>(check)]; }

// Attributes the simulator reads as integers, with the node types that require them.
struct IntegerAttribute {
  std::string_view name;
  bool sign_allowed;
};
constexpr std::array<IntegerAttribute, 9> kIntegerAttributes = {{
    {"is_cpu_op", false},
    {"num_ops", false},
    {"tensor_size", false},
    {"comm_type", false},
    {"comm_size", false},
    {"comm_src", false},
    {"comm_dst", false},
    {"comm_tag", true},
    {"comm_priority", true},
}};

// The limits of core/checked.h for the values a node carries.
struct AttributeLimit {
  std::string_view name;
  uint64_t max;
  std::string_view limit_text;
};
constexpr std::array<AttributeLimit, 3> kAttributeLimits = {{
    {"comm_size", kMaxBytes, "2^50 bytes (1 PiB)"},
    {"tensor_size", kMaxBytes, "2^50 bytes (1 PiB)"},
    {"num_ops", kMaxFlops, "2^62 FLOPs"},
}};

// Index of `name` in kIntegerAttributes, for the names `require` asks for (at compile time).
constexpr size_t integer_index(std::string_view name) {
  for (size_t idx = 0; idx < kIntegerAttributes.size(); ++idx) {
    if (kIntegerAttributes[idx].name == name) return idx;
  }
  return kIntegerAttributes.size();
}

// The attribute names the checks read, resolved once per graph: a lookup by name hashes the
// name, and every node is asked for a dozen of them.
struct Keys {
  explicit Keys(const TraceGraph& graph) {
    for (size_t idx = 0; idx < kIntegerAttributes.size(); ++idx) {
      integer[idx] = graph.key(kIntegerAttributes[idx].name);
    }
    for (size_t idx = 0; idx < kAttributeLimits.size(); ++idx) {
      limit[idx] = graph.key(kAttributeLimits[idx].name);
    }
  }
  static constexpr size_t kIsCpuOp = integer_index("is_cpu_op");
  static constexpr size_t kTensorSize = integer_index("tensor_size");
  static constexpr size_t kCommType = integer_index("comm_type");
  static constexpr size_t kCommSize = integer_index("comm_size");
  static constexpr size_t kCommSrc = integer_index("comm_src");
  static constexpr size_t kCommDst = integer_index("comm_dst");
  static constexpr size_t kCommTag = integer_index("comm_tag");
  static_assert(std::max({kIsCpuOp, kTensorSize, kCommType, kCommSize, kCommSrc, kCommDst,
                          kCommTag}) < kIntegerAttributes.size());

  std::array<AttributeKey, kIntegerAttributes.size()> integer;
  std::array<AttributeKey, kAttributeLimits.size()> limit;
};

void check_ranges(const TraceGraph& graph, const Keys& keys, NodeIndex node,
                  ValidationReport& report) {
  const uint64_t id = graph.id(node);
  if (graph.duration_micros(node) > kMaxDurationMicros) {
    report.add(Check::kOutOfRange, id,
               fmt::format("node {}: duration_micros {} is more than {} us (2^61 ps, about 26.7 "
                           "days, the longest run orrery simulates)",
                           id, format_count(graph.duration_micros(node)),
                           format_count(kMaxDurationMicros)));
  }
  for (size_t idx = 0; idx < kAttributeLimits.size(); ++idx) {
    const AttributeLimit& limit = kAttributeLimits[idx];
    const Attribute* attribute = graph.find_attribute(node, keys.limit[idx].id);
    if (attribute == nullptr) continue;
    // Read as unsigned: a uint64 above 2^63 is a size, not a negative number.
    const bool is_unsigned = attribute->value_case == ValueCase::kUint64Val ||
                             attribute->value_case == ValueCase::kUint32Val ||
                             attribute->value_case == ValueCase::kFixed64Val ||
                             attribute->value_case == ValueCase::kFixed32Val;
    uint64_t value = 0;
    if (is_unsigned) {
      value = attribute->u;
    } else {
      Expected<int64_t> signed_value = graph.as_int(node, *attribute);
      if (!signed_value || *signed_value < 0) continue;  // reported by check_attributes
      value = static_cast<uint64_t>(*signed_value);
    }
    if (value > limit.max) {
      report.add(Check::kOutOfRange, id,
                 fmt::format("node {}: {} {} is more than {}, the largest orrery simulates", id,
                             limit.name, format_count(value), limit.limit_text));
    }
  }
}

void check_attributes(const TraceGraph& graph, const Keys& keys, const AttributeKey& pg_name,
                      const AttributeKey& involved_dim, NodeIndex node, ValidationReport& report) {
  const uint64_t id = graph.id(node);
  for (size_t idx = 0; idx < kIntegerAttributes.size(); ++idx) {
    const IntegerAttribute& wanted = kIntegerAttributes[idx];
    const Attribute* attribute = graph.find_attribute(node, keys.integer[idx].id);
    if (attribute == nullptr) continue;
    Expected<int64_t> value = graph.as_int(node, *attribute);
    if (!value) {
      report.add(Check::kBadAttribute, id, value.error().message());
    } else if (!wanted.sign_allowed && *value < 0) {
      report.add(Check::kBadAttribute, id,
                 fmt::format("node {}: attribute '{}' is {}, expected a value >= 0", id,
                             wanted.name, *value));
    }
  }
  if (Expected<std::optional<std::string_view>> text = graph.get_string(node, pg_name); !text) {
    report.add(Check::kBadAttribute, id, text.error().message());
  }
  if (auto dims = graph.get_bool_list(node, involved_dim); !dims) {
    report.add(Check::kBadAttribute, id, dims.error().message());
  }
}

// The attribute kIntegerAttributes[index] must be present.
void require(const TraceGraph& graph, const Keys& keys, NodeIndex node, size_t index,
             ValidationReport& report) {
  if (graph.find_attribute(node, keys.integer[index].id) != nullptr) return;
  report.add(Check::kMissingAttribute, graph.id(node),
             fmt::format("node {}: {} has no '{}' attribute", graph.id(node),
                         node_type_name(graph.type(node)), kIntegerAttributes[index].name));
}

void check_node_type(const TraceGraph& graph, const Keys& keys, NodeIndex node,
                     ValidationReport& report) {
  const uint64_t id = graph.id(node);
  const int32_t type = graph.type(node);
  switch (type) {
    case ChakraProtoMsg::INVALID_NODE:
      report.add(Check::kInvalidNodeType, id,
                 fmt::format("node {}: type is INVALID_NODE (not set)", id));
      return;
    case ChakraProtoMsg::METADATA_NODE:
    case ChakraProtoMsg::COMP_NODE:
      return;
    case ChakraProtoMsg::MEM_LOAD_NODE:
    case ChakraProtoMsg::MEM_STORE_NODE:
      require(graph, keys, node, Keys::kTensorSize, report);
      return;
    case ChakraProtoMsg::COMM_SEND_NODE:
      require(graph, keys, node, Keys::kCommDst, report);
      require(graph, keys, node, Keys::kCommSize, report);
      require(graph, keys, node, Keys::kCommTag, report);
      return;
    case ChakraProtoMsg::COMM_RECV_NODE:
      require(graph, keys, node, Keys::kCommSrc, report);
      require(graph, keys, node, Keys::kCommSize, report);
      require(graph, keys, node, Keys::kCommTag, report);
      return;
    case ChakraProtoMsg::COMM_COLL_NODE: {
      const Attribute* comm_type = graph.find_attribute(node, keys.integer[Keys::kCommType].id);
      if (comm_type == nullptr) {
        Expected<bool> cpu = graph.get_bool_or(node, keys.integer[Keys::kIsCpuOp], false);
        if (cpu && *cpu) {
          report.add(Check::kCpuCollectiveWithoutType, id,
                     fmt::format("node {}: COMM_COLL_NODE '{}' has is_cpu_op set and no "
                                 "'comm_type'",
                                 id, graph.name(node)));
        } else {
          require(graph, keys, node, Keys::kCommType, report);
        }
        return;
      }
      Expected<int64_t> value = graph.as_int(node, *comm_type);
      if (!value) return;  // reported by check_attributes
      if (*value < 0 || *value > INT32_MAX ||
          !ChakraProtoMsg::CollectiveCommType_IsValid(static_cast<int>(*value))) {
        report.add(
            Check::kUnknownCommType, id,
            fmt::format("node {}: comm_type {} is not a CollectiveCommType (0 to 9)", id, *value));
        return;
      }
      if (*value != ChakraProtoMsg::BARRIER) require(graph, keys, node, Keys::kCommSize, report);
      return;
    }
    default:
      report.add(Check::kUnknownNodeType, id,
                 fmt::format("node {}: type {} is not a NodeType (0 to 7)", id, type));
  }
}

// Every check of one node on its own (type, attribute kinds, ranges), in the order
// validate_trace reports them.
class NodeChecks {
 public:
  explicit NodeChecks(const TraceGraph& graph)
      : graph_(graph),
        keys_(graph),
        pg_name_(graph.key("pg_name")),
        involved_dim_(graph.key("involved_dim")) {}
  void operator()(NodeIndex node, ValidationReport& report) const {
    check_node_type(graph_, keys_, node, report);
    check_attributes(graph_, keys_, pg_name_, involved_dim_, node, report);
    check_ranges(graph_, keys_, node, report);
  }

 private:
  const TraceGraph& graph_;
  Keys keys_;
  AttributeKey pg_name_;
  AttributeKey involved_dim_;
};

void check_dependencies(const TraceGraph& graph, ValidationReport& report) {
  for (NodeIndex node = 0; node < graph.size(); ++node) {
    const uint64_t id = graph.id(node);
    for (uint64_t parent : graph.data_deps(node)) {
      if (parent == id) {
        report.add(Check::kSelfDataDependency, id,
                   fmt::format("node {}: lists itself as a data parent", id));
      } else if (!graph.find(parent)) {
        report.add(Check::kMissingDataParent, id,
                   fmt::format("node {}: data parent {} is not in the file", id, parent));
      }
    }
    for (uint64_t parent : graph.ctrl_deps(node)) {
      if (parent == id) {
        report.add(Check::kSelfCtrlDependency, id,
                   fmt::format("node {}: lists itself as a control parent", id));
      } else if (!graph.find(parent)) {
        report.add(Check::kMissingCtrlParent, id,
                   fmt::format("node {}: control parent {} is not in the file", id, parent));
      }
    }
  }
}

// Runs the dependencies to exhaustion: control edges that close cycles were dropped by the build
// and are reported as repairs; nodes still left lie on or behind a cycle of data edges.
void check_cycles(const TraceGraph& graph, ValidationReport& report) {
  const DependencyGraph deps = DependencyGraph::build(graph, DependencyKinds::kBoth);
  for (const auto& [child, parent] : deps.dropped_control_edges()) {
    report.add(Check::kControlCycle, graph.id(child),
               fmt::format("node {}: control parent {} closes a dependency cycle", graph.id(child),
                           graph.id(parent)));
  }
  DependencyTracker tracker(graph, deps);
  std::vector<bool> done(graph.size(), false);
  while (tracker.has_ready()) {
    const NodeIndex node = tracker.pop_ready();
    done[node] = true;
    tracker.complete(node);
  }
  if (tracker.completed_count() == graph.size()) return;

  // Every node left has a parent left: walk parents until one repeats.
  NodeIndex start = 0;
  while (done[start]) ++start;
  std::vector<int64_t> position(graph.size(), -1);
  std::vector<NodeIndex> walk;
  NodeIndex node = start;
  while (position[node] < 0) {
    position[node] = static_cast<int64_t>(walk.size());
    walk.push_back(node);
    for (NodeIndex parent : deps.parents(node)) {
      if (!done[parent]) {
        node = parent;
        break;
      }
    }
  }
  // walk[position[node]..] is the cycle, child to parent; print it parent to child.
  std::vector<uint64_t> cycle;
  for (size_t idx = walk.size(); idx-- > static_cast<size_t>(position[node]);) {
    cycle.push_back(graph.id(walk[idx]));
  }
  // Start from the smallest id, so the same cycle always prints the same way.
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
  cycle.push_back(cycle.front());
  const size_t stuck = graph.size() - tracker.completed_count();
  // A long cycle is shown by its ends: a million-node cycle must not print as a 10 MB line.
  constexpr size_t kShownEnds = 8;
  std::string shown;
  if (cycle.size() <= 2 * kShownEnds + 1) {
    shown = fmt::format("{}", fmt::join(cycle, " -> "));
  } else {
    shown = fmt::format("{} -> ... ({} more) ... -> {}",
                        fmt::join(cycle.begin(), cycle.begin() + kShownEnds, " -> "),
                        format_count(cycle.size() - 2 * kShownEnds),
                        fmt::join(cycle.end() - kShownEnds, cycle.end(), " -> "));
  }
  report.add(Check::kCycle, cycle.front(),
             fmt::format("dependency cycle {} of {} nodes ({} nodes can never run)", shown,
                         format_count(cycle.size() - 1), format_count(stuck)));
}

}  // namespace

bool is_repairable(Check check) { return !info(check).repair.empty(); }
std::string_view repair_description(Check check) { return info(check).repair; }
std::string_view check_summary(Check check) { return info(check).summary; }
std::string_view check_name(Check check) { return info(check).name; }

void ValidationReport::add(Check check, uint64_t node_id, std::string message) {
  ++counts_[static_cast<size_t>(check)];
  diagnostics_.push_back({check, node_id, std::move(message)});
}

size_t ValidationReport::fatal_count() const {
  size_t fatal = 0;
  for (size_t idx = 0; idx < kCheckCount; ++idx) {
    if (!is_repairable(static_cast<Check>(idx))) fatal += counts_[idx];
  }
  return fatal;
}

bool ValidationReport::passes(ValidationMode mode) const {
  return mode == ValidationMode::kStrict ? diagnostics_.empty() : fatal_count() == 0;
}

std::vector<std::string> ValidationReport::summary_lines(size_t examples) const {
  std::vector<std::string> lines;
  for (size_t idx = 0; idx < kCheckCount; ++idx) {
    if (counts_[idx] == 0) continue;
    const auto check = static_cast<Check>(idx);
    std::vector<std::string_view> shown;
    for (const Diagnostic& diagnostic : diagnostics_) {
      if (diagnostic.check != check) continue;
      if (shown.size() == examples) break;
      shown.push_back(diagnostic.message);
    }
    std::string line = fmt::format("{}: {} {}", is_repairable(check) ? "warning" : "error",
                                   format_count(counts_[idx]), check_summary(check));
    if (is_repairable(check)) line += fmt::format(" [lenient: {}]", repair_description(check));
    for (std::string_view example : shown) line += fmt::format("\n    {}", example);
    if (counts_[idx] > shown.size()) {
      line += fmt::format("\n    ... and {} more", format_count(counts_[idx] - shown.size()));
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

ValidationReport validate_trace(const TraceGraph& graph) {
  ValidationReport report;
  for (uint64_t id : graph.duplicate_ids()) {
    report.add(Check::kDuplicateId, id, fmt::format("node {}: the id is used more than once", id));
  }
  for (NodeIndex node : graph.unknown_field_nodes()) {
    report.add(Check::kUnknownFields, graph.id(node),
               fmt::format("node {}: carries fields this schema does not define", graph.id(node)));
  }
  const NodeChecks check_node(graph);
  for (NodeIndex node = 0; node < graph.size(); ++node) check_node(node, report);
  check_dependencies(graph, report);
  check_cycles(graph, report);
  return report;
}

ValidationReport validate_trace(const TraceGraph& graph, const TraceGraph& base,
                                const ValidationReport& base_report) {
  // Sharing the tables means the same ids, types, dependencies and unknown-field marks
  // (TraceGraph::patch_node refuses anything else), so the structural checks would say what they
  // said of base: nothing. Unpatched nodes are base's nodes, which passed.
  if (!graph.shares_structure(base) || base.patched_count() != 0 ||
      !base_report.diagnostics().empty()) {
    return validate_trace(graph);
  }
  ValidationReport report;
  const NodeChecks check_node(graph);
  for (size_t k = 0; k < graph.patched_count(); ++k) check_node(graph.patched_node(k), report);
  return report;
}

}  // namespace orrery::chakra
