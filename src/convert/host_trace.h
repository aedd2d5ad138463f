// convert/host_trace.h: a PyTorch execution trace (the "host trace"), read into plain records.
//
// PyTorch's ExecutionTraceObserver writes one JSON document per rank:
// `{schema, pid, time, start_ts, finish_ts, nodes: [...]}`. Two node layouts exist:
//   - schema 1.0.1 (flat): id, name, parent, inputs, input_shapes, input_types, outputs, ...,
//     rf_id, tid, op_schema as members of the node;
//   - schemas 1.0.2, 1.0.3, 1.1.0, 1.1.1 (with or without the "-chakra.0.0.4" suffix): id, name,
//     ctrl_deps (the parent), inputs/outputs as {values, shapes, types}, and `attrs`, a list of
//     {name, type, value} holding rf_id, tid, op_schema and, on record_param_comms nodes, the
//     collective's name, sizes and process group.
// read_host_trace() checks the schema and the fields every node must have (id, name, parent) and
// reports what is wrong with the file name and node id.
//
// The file is read with a streaming (SAX) parser into compact records: each node's inputs and
// outputs are kept as compact JSON text (what the converter writes into IOInfo), and parsed into
// values only for the ops whose tensors and arguments matter (nccl:*, c10d::*, record_param_comms,
// process_group:init, GPU entries). A host trace of a large job runs to gigabytes; a document tree
// of it would cost ten times that.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/checked.h"
#include "core/error.h"

namespace orrery::convert {

enum class HostLayout : uint8_t { kFlat, kAttrs };

// One tensor as the host trace records it: [tensor_id, storage_id, offset, num_elem, elem_bytes,
// device].
struct HostTensor {
  uint64_t num_elem = 0;
  uint64_t elem_bytes = 0;
  std::optional<int64_t> storage;  // absent when the trace writes no integer there
  std::optional<int64_t> id;       // the tensor id, likewise
  // Saturates (a forged count must not wrap to a small size); validation refuses what passes
  // 2^50 bytes.
  uint64_t bytes() const { return saturating_mul(num_elem, elem_bytes); }
};

// Values, shapes and types of a node's inputs or outputs: compact JSON text ("" when absent), and
// the values and types parsed, for the ops whose arguments the converter reads (else null).
struct HostIo {
  std::string values_text;
  std::string shapes_text;
  std::string types_text;
  std::string strides_text;  // schema 1.1.1 and later: each tensor's strides ("" when absent)
  const nlohmann::json* values = nullptr;
  const nlohmann::json* types = nullptr;
};

enum class HostOpKind : uint8_t {
  kAnnotation,    // "[pytorch|profiler|execution_trace|thread]" and "...|process]": structure only
  kProcessGroup,  // "## process_group:init ##": the process groups, as JSON text
  kCpuOp,         // every other operator or label the observer recorded on a CPU thread
  kGpuOp,         // a GPU entry of a linked trace (a node with a Kineto "cat", as trace_link adds)
};

struct HostOp {
  uint64_t id = 0;
  std::string_view name;
  std::optional<uint64_t> parent;  // the call-tree parent (parent / ctrl_deps)
  std::optional<int64_t> rf_id;    // record-function id, what Kineto knows the op by
  // The operator's schema as the observer wrote it ("aten::mm(Tensor self, Tensor mat2) ->
  // Tensor"); empty for labels (record_function scopes, autograd nodes) and for ops it has none.
  std::string_view op_schema;
  int64_t tid = 0;  // the observer's thread number (not the OS thread id)
  HostOpKind kind = HostOpKind::kCpuOp;
  HostIo inputs;
  HostIo outputs;
  // Durations and start carried by traces that were already linked (Chakra's trace_link writes
  // exclusive_dur, inclusive_dur and ts, in microseconds). Absent in what PyTorch writes.
  std::optional<double> exclusive_dur_us;
  std::optional<double> ts_us;
  std::optional<int64_t> stream;  // GPU entries of linked traces
  // This op's attributes in HostTrace's attribute table: [attrs_begin, attrs_end).
  uint32_t attrs_begin = 0;
  uint32_t attrs_end = 0;
};

class HostTrace {
 public:
  // Known schemas: "1.0.1" (flat), "1.0.2", "1.0.3", "1.1.0", "1.1.1" (attrs), each optionally
  // followed by a "-chakra.<version>" suffix. nullopt for anything else.
  static std::optional<HostLayout> layout_of_schema(std::string_view schema);

  const std::string& path() const { return path_; }
  const std::string& schema() const { return schema_; }
  HostLayout layout() const { return layout_; }
  std::optional<int64_t> pid() const { return pid_; }
  // The top-level scalars of the file (schema, pid, time, start_ts, finish_ts, ...).
  const nlohmann::json& header() const { return header_; }
  // Every node, in the order of the file.
  const std::vector<HostOp>& ops() const { return ops_; }
  // The index in ops() of the node with this id.
  std::optional<size_t> find(uint64_t id) const;

  // An attribute of a node: a member of the node (flat layout) or the value of the `attrs` entry
  // with that name (attrs layout). nullptr when absent. Kept: rf_id, tid, tensor_range,
  // kernel_backend and kernel_file (compiled kernels, schema 1.1.1), and the
  // attributes of record_param_comms (collective_name, dtype, in/out_msg_nelems, pg_name, pg_size,
  // global_rank_start, global_rank_stride).
  const nlohmann::json* attr(const HostOp& op, std::string_view name) const;
  std::optional<std::string> attr_string(const HostOp& op, std::string_view name) const;
  std::optional<int64_t> attr_int(const HostOp& op, std::string_view name) const;

 private:
  friend class HostReader;

  struct AttrValue {
    std::string_view name;
    nlohmann::json value;
  };

  std::string path_;
  std::string schema_;
  HostLayout layout_ = HostLayout::kAttrs;
  std::optional<int64_t> pid_;
  nlohmann::json header_ = nlohmann::json::object();
  std::deque<std::string> names_;      // interned op names and schemas: ops_ point into them
  std::deque<nlohmann::json> parsed_;  // parsed inputs of some ops: ops_ point into them
  std::vector<AttrValue> attrs_;
  std::vector<HostOp> ops_;
  std::vector<std::pair<uint64_t, size_t>> by_id_;  // sorted by id
};

// Reads `path` (plain or gzip JSON). Errors: the file cannot be read or is not JSON (with the byte
// where it stops); it is a Kineto trace (traceEvents) or has no `schema` or `nodes`; the schema is
// not one of the known ones; a node lacks its id, name or parent, has them of the wrong type, or
// repeats an id.
Expected<HostTrace> read_host_trace(const std::string& path);
// As read_host_trace, for the text of a file read as `path`.
Expected<HostTrace> parse_host_text(const std::string& path, const std::string& text);
// As read_host_trace, for a document already parsed (tests).
Expected<HostTrace> parse_host_trace(const std::string& path, const nlohmann::json& doc);

// The tensors in a value of the trace: a tensor is a list [id, storage, offset, num_elem,
// elem_bytes, device]; lists (of lists) of tensors are searched too.
void collect_tensors(const nlohmann::json& value, std::vector<HostTensor>& out);
// The bytes of every tensor among `io`'s values whose type names a Tensor (0 when the values were
// not parsed).
uint64_t tensor_bytes(const HostIo& io);

// Integer value of a JSON number (integers only), nullopt otherwise.
std::optional<int64_t> json_int(const nlohmann::json& value);

}  // namespace orrery::convert
