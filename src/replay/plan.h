// replay/plan.h: what `orrery replay` runs, read from a PyTorch execution trace (no libtorch here).
//
// build_plan() turns one rank's host trace (convert/host_trace.h, every schema orrery convert
// reads) into a ReplayPlan, as Mystique and PARAM's et_replay do:
//   - one iteration: the nodes from a ProfilerStep#N marker (the first, or --iteration N) up to the
//     next marker, on every thread; the whole trace when it has no marker;
//   - the outermost operators: a depth-first walk from each thread's root stops at the first node
//     with an op schema on each path; children of a replayed operator are not replayed (they run
//     inside it). Labels (record_function scopes, autograd nodes) are walked through. Data loading
//     subtrees ("enumerate(DataLoader)...") are dropped and counted;
//   - communication: a c10d call (c10d::allreduce_), a record_param_comms or a backend op
//     (nccl:*, gloo:*) found on the walk stands for its collective or send/receive, described by
//     convert/collectives.h (type, bytes, process group, peer);
//   - a leaf with no schema that is not communication (a Triton kernel, a Python-level record
//     function) is kept as an operator that cannot be built, with the reason;
//   - every argument is read from the recorded values, types, shapes and strides; every tensor is a
//     view (offset, shape, strides) of a storage. Storages are keyed by storage id and element
//     type, and sized to cover every view of them. The observer reuses storage ids when memory is
//     reused, so a storage id seen with two element types (an index tensor, later activations at
//     the same address) gets one buffer per type, and integer buffers keep their values in range.
// The plan is immutable input for the executor (replay/executor.h) and the session.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "convert/collectives.h"
#include "convert/host_trace.h"
#include "core/error.h"

namespace orrery::replay {

// Element types as PyTorch names them; the executor maps them to at::ScalarType.
enum class DType : uint8_t {
  kFloat,
  kDouble,
  kHalf,
  kBFloat16,
  kComplexFloat,
  kComplexDouble,
  kInt8,
  kUInt8,
  kInt16,
  kInt32,
  kInt64,
  kBool,
};

// The element type a recorded type names: "Tensor(float)", "Tensor(long int)",
// "Tensor(c10::Half)", or the bare C++ name ("float", "long int", "c10::BFloat16"). nullopt when
// unknown.
std::optional<DType> dtype_from_trace(std::string_view type);
uint64_t dtype_bytes(DType type);
bool is_integral(DType type);  // integers (not bool)
const char* dtype_name(DType type);

struct Storage {
  uint64_t id = 0;  // the trace's storage id
  DType dtype = DType::kFloat;
  uint64_t bytes = 0;  // covers every view
  std::string device;  // as recorded ("cpu", "cuda:0")
  // Values of an integer storage as the trace recorded them (tensor_range), inclusive.
  std::optional<std::pair<int64_t, int64_t>> recorded_range;
};

struct TensorView {
  uint64_t tensor_id = 0;
  uint32_t storage = 0;  // index in ReplayPlan::storages
  int64_t offset = 0;    // in elements
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // recorded, or contiguous for traces without strides
  bool recorded_strides = false;
  DType dtype = DType::kFloat;
  std::string device;
  int64_t numel() const;
};

// One recorded argument (input or output), in the order of the op's schema.
struct Arg {
  enum class Kind : uint8_t {
    kNone,             // "<None>"
    kTensor,           // a view: `tensor`
    kUndefinedTensor,  // a tensor argument with no data ("Tensor(nullptr (uninitialized))")
    kList,             // `items` (GenericList[...])
    kInt,
    kDouble,
    kBool,
    kString,
    kDevice,  // `text` ("cpu", "cuda:0")
    kObject,  // an object the trace does not describe (a ProcessGroup, a Stream)
    kOther,   // anything else, as JSON text in `text`
  };
  Kind kind = Kind::kNone;
  std::string type;  // the recorded type ("Tensor(float)", "GenericList[Int,Int]", "Device")
  int64_t int_value = 0;
  double double_value = 0;
  bool bool_value = false;
  std::string text;
  uint32_t tensor = 0;  // kTensor: index in ReplayPlan::tensors
  std::vector<Arg> items;
};

enum class OpKind : uint8_t {
  kCompute,      // built from its schema and run by libtorch
  kComm,         // a collective or a send/receive, run across processes
  kUnsupported,  // cannot be built from the trace (no schema): skipped, with the reason
};

struct CommOp {
  convert::CommSpec spec;  // type, bytes (per rank), process group, peer
  DType dtype = DType::kFloat;
  // The tensors the communication reads and writes (views), for ordering against later ops.
  std::vector<uint32_t> tensors;
  int64_t root = 0;  // broadcast, reduce, gather, scatter: the root's rank in the group
  // all_to_all with recorded splits (rows per peer) and the bytes of one row; empty: equal parts.
  std::vector<int64_t> input_splits;
  std::vector<int64_t> output_splits;
  uint64_t row_bytes = 0;
  std::string described_by;  // the node that gave the description ("node 211 'gloo:all_reduce'")
  uint64_t described_node = 0;
  // The group's size as record_param_comms records it (pg_size), 0 when it does not: says how
  // many ranks a job had when its process groups list none.
  uint32_t group_size = 0;
};

// Where an op ran in a training step, from the labels above it in the trace: the autograd
// engine's (`autograd::engine::evaluate_function: XBackward0`) or an optimizer's
// (`Optimizer.step#SGD.step`, `Optimizer.zero_grad#...`); forward is everything else.
enum class Pass : uint8_t { kForward, kBackward, kOptimizer };

struct ReplayOp {
  uint64_t node_id = 0;
  std::string name;
  std::string schema;  // the op schema as recorded ("" when none)
  int64_t tid = 0;
  OpKind kind = OpKind::kCompute;
  std::vector<Arg> inputs;
  std::vector<Arg> outputs;
  std::optional<CommOp> comm;
  std::string reason;   // kUnsupported: why it cannot be built
  size_t children = 0;  // nodes under it in the trace (run inside it, not replayed)
  Pass pass = Pass::kForward;
  // The nearest label above the op ("torch::autograd::AccumulateGrad", "MulBackward0",
  // "Optimizer.step#SGD.step"), "" when its parent is the iteration's marker or none.
  std::string scope;
};

// Something the plan left out or changed, counted, with examples.
struct PlanNote {
  std::string what;
  uint64_t count = 0;
  std::vector<std::string> examples;
};

struct ReplayPlan {
  std::string path;
  std::string schema;
  std::string iteration;  // "ProfilerStep#2", or "the whole trace"
  // The node ids of the iteration: [iteration_begin, iteration_end).
  uint64_t iteration_begin = 0;
  uint64_t iteration_end = UINT64_MAX;
  std::vector<ReplayOp> ops;  // in start order
  std::vector<TensorView> tensors;
  std::vector<Storage> storages;
  // The process groups the trace lists (process_group:init), as JSON text; empty when none.
  std::vector<std::string> process_group_texts;
  // The devices the trace's tensors were on, with their tensor counts ("cuda:0": 1234).
  std::map<std::string, uint64_t> devices;
  std::vector<PlanNote> notes;
  uint64_t trace_nodes = 0;      // nodes of the trace
  uint64_t iteration_nodes = 0;  // nodes in the selected iteration
};

struct PlanOptions {
  // The ProfilerStep#N marker to replay; nullopt: the first marker in the trace.
  std::optional<int64_t> iteration;
};

// Builds the plan of `trace`. Errors: --iteration names a marker the trace does not have (the
// message lists those it has); a tensor value that does not read ([id, storage, offset, numel,
// elem_bytes, device]), naming the node.
Expected<ReplayPlan> build_plan(const convert::HostTrace& trace, const PlanOptions& options);

// The storage bytes a view needs: (offset + the farthest element + 1) x element size; 0 for an
// empty view.
uint64_t view_extent_bytes(const TensorView& view);

// The storages an op reads or writes (its tensors, a communication's too), ascending, unique.
std::vector<uint32_t> op_storages(const ReplayPlan& plan, const ReplayOp& op);
// Whether two ascending lists of storages share one.
bool share_storage(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b);

}  // namespace orrery::replay
