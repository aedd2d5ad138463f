// convert/pytorch_converter.h: one rank's PyTorch host trace (and Kineto trace) to a Chakra trace.
//
// The mapping (docs/formats/pytorch.md):
//   - every operator of the host trace becomes a COMP node with is_cpu_op set; thread and process
//     annotations are structure only and are dropped;
//   - "## process_group:init ##" becomes a METADATA node whose inputs.values holds the process
//     groups as JSON text (the form chakra/comm_groups.h reads);
//   - with a Kineto trace, every GPU kernel, memcpy and memset launched by a host op becomes a COMP
//     node (is_cpu_op false, its measured duration, its stream);
//   - every NCCL communication op (`nccl:all_reduce`, `nccl:send`, ...) becomes one device-side
//     node: COMM_COLL with comm_type, comm_size (bytes of its tensors) and pg_name, or
//     COMM_SEND / COMM_RECV with the peer, tag and size. With Kineto its NCCL kernel is that node
//     (with the kernel's duration); without, the node stands for the collective alone.
// Dependencies (data_deps only): host ops run one after another in the order they started (node
// id), across threads, as the single host-CPU slot of the simulator runs them anyway; a device node
// follows the op that launched it; device nodes on one stream keep their GPU order; collectives of
// one process group keep their launch order; a collective waits for the compute kernels launched
// before it on other streams (ProcessGroupNCCL's stream synchronisation). Host ops keep their ids;
// device nodes are numbered after them in launch order, so every edge goes from a lower id to a
// higher one and the graph has no cycle.
// What cannot be converted is counted in the report with examples, never dropped silently.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "convert/host_trace.h"
#include "convert/kineto_trace.h"
#include "core/error.h"
#include "et_def.pb.h"

namespace orrery::convert {

struct ConvertOptions {
  // Link a Kineto trace whose process id differs from the host trace's (normally a sign that the
  // two files come from different runs, which is an error).
  bool allow_pid_mismatch = false;
  // The job's rank count when known (directory conversion); bounds the ranks of process groups.
  uint32_t world_size = 0;
};

// Something the conversion dropped or changed, with how many and a few examples.
struct ConversionNote {
  std::string what;     // "thread and process annotation nodes (structure only)"
  bool dropped = true;  // false: kept, but differently from the rest ("kept as compute")
  uint64_t count = 0;
  std::vector<std::string> examples;  // "node 2 '[pytorch|profiler|execution_trace|thread]'"
};

// One communication node of the output, in id order.
struct CommRecord {
  uint64_t node_id = 0;
  uint64_t host_id = 0;  // the nccl op it comes from
  int32_t node_type = 0;
  int32_t comm_type = 0;  // collectives
  uint64_t bytes = 0;
  std::string pg_name;
  int64_t peer = -1;  // send and receive
  // The host op that waits for it: the first later op, outside the communication's own call, that
  // reads or writes one of its tensors' storages; it depends on the communication node.
  std::optional<uint64_t> waiter_id;
};

struct ConversionReport {
  std::string host_path;
  std::string device_path;  // "" when converted from the host trace alone
  std::string schema;
  uint64_t host_nodes = 0;
  uint64_t kineto_events = 0;
  bool device_array_form = false;  // the profiler trace is the Chrome array form (no Kineto)
  std::optional<int64_t> kineto_rank;
  std::optional<int64_t> kineto_world_size;

  uint64_t output_nodes = 0;
  std::map<int32_t, uint64_t> nodes_by_type;  // NodeType -> count
  uint64_t host_ops = 0;
  uint64_t kernels = 0;
  uint64_t memory_ops = 0;  // memcpy and memset
  std::vector<CommRecord> comms;
  std::string durations;  // where durations come from, in words

  // Linking (with a Kineto trace).
  std::string link_method;
  uint64_t host_ops_linkable = 0;
  uint64_t host_ops_linked = 0;
  uint64_t gpu_events = 0;
  uint64_t gpu_events_linked = 0;
  std::vector<std::string> thread_pairs;  // "host thread 1 -> Kineto thread 59811 (988 of 988)"

  std::vector<ConversionNote> notes;
  // The process groups, as the METADATA nodes carry them (JSON text), for the comm-group file.
  std::vector<std::string> process_group_texts;
};

struct Conversion {
  ChakraProtoMsg::GlobalMetadata metadata;
  std::vector<ChakraProtoMsg::Node> nodes;  // ascending id
  ConversionReport report;
};

// Converts one rank. `kineto` may be null (host trace alone). Errors: a Kineto trace from another
// process (unless allowed), process groups that do not read, a send or receive without a peer.
Expected<Conversion> convert_pytorch_trace(const HostTrace& host, const KinetoTrace* kineto,
                                           const ConvertOptions& options);

// Writes `conversion` as a Chakra trace (gzip when `path` ends in ".gz").
Status write_conversion(const Conversion& conversion, const std::string& path);

// Reads, converts and writes one rank; returns the report.
Expected<ConversionReport> convert_files(const std::string& host_path,
                                         const std::string& device_path,
                                         const std::string& output_path,
                                         const ConvertOptions& options);

// The report as people read it: what was read, what was written (nodes by type, collectives),
// linking, durations, and every note with up to `examples` examples.
std::string format_report(const ConversionReport& report, const std::string& output_path,
                          size_t examples);

}  // namespace orrery::convert
