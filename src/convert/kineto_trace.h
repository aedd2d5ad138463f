// convert/kineto_trace.h: a Kineto (PyTorch profiler) trace, read into plain event records.
//
// Kineto writes Chrome-trace JSON: `{schemaVersion, deviceProperties, distributedInfo,
// traceEvents: [...]}`. The converter uses the complete ("ph": "X") events of these categories:
//   cpu_op, user_annotation     operators and annotations on CPU threads (args "External id")
//   cuda_runtime, cuda_driver   runtime calls; a launch carries the "correlation" of its GPU work
//   kernel, gpu_memcpy,         GPU work, on a "stream", with the "correlation" of the runtime call
//   gpu_memset                  that launched it
// Every other event (flows, metadata, Python frames, ...) is counted and otherwise ignored. The
// Chrome trace format's array form (a bare list of events) is read too: the PyTorch profiler
// writes it when it runs without Kineto, with complete events that have no category, all CPU
// functions (pid "CPU functions"), so they are read as cpu_op. Times
// are kept in integer nanoseconds (Kineto writes microseconds, sometimes with fractions).
// The file is read with a streaming (SAX) parser straight into these records: a Kineto trace holds
// hundreds of thousands of events, and a document tree of them would cost ten times the file.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace orrery::convert {

enum class KinetoCategory : uint8_t {
  kCpuOp,
  kUserAnnotation,
  kRuntime,  // cuda_runtime and cuda_driver
  kKernel,
  kMemcpy,
  kMemset,
};

struct KinetoEvent {
  KinetoCategory category = KinetoCategory::kCpuOp;
  std::string_view name;
  int64_t pid = 0;
  int64_t tid = 0;  // GPU events: the stream's row; non-numeric ids are numbered from -1 down
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  int64_t external_id = -1;
  int64_t correlation = -1;
  int64_t stream = -1;
  int64_t record_function_id = -1;  // "Record function id" (newer PyTorch): the host trace's rf_id
  // The communication fields of the event's args ("Collective name", "In msg nelems", "dtype",
  // "Process Group Name", ...), as an object; nullptr when it has none.
  const nlohmann::json* args = nullptr;

  bool is_cpu() const {
    return category == KinetoCategory::kCpuOp || category == KinetoCategory::kUserAnnotation;
  }
  bool is_gpu() const {
    return category == KinetoCategory::kKernel || category == KinetoCategory::kMemcpy ||
           category == KinetoCategory::kMemset;
  }
  int64_t end_ns() const { return ts_ns + dur_ns; }
};

class KinetoTrace {
 public:
  const std::string& path() const { return path_; }
  const std::vector<KinetoEvent>& events() const { return events_; }
  // distributedInfo.rank and world_size, when the trace has them.
  std::optional<int64_t> rank() const { return rank_; }
  std::optional<int64_t> world_size() const { return world_size_; }
  // distributedInfo.pg_config (a list of {pg_name, ranks, ...}), or nullptr.
  const nlohmann::json* pg_config() const;
  // Process ids of the CPU events that are numbers (ascending; empty when none is, as in the
  // array form's "CPU functions").
  const std::vector<int64_t>& cpu_pids() const { return cpu_pids_; }
  // The file is the array form of the Chrome trace format (the profiler without Kineto).
  bool array_form() const { return array_form_; }
  // Events not used, by category or phase ("ac2g", "python_function", "M"), with counts.
  const std::map<std::string, uint64_t>& ignored() const { return ignored_; }
  uint64_t total_events() const { return total_events_; }

 private:
  friend class KinetoReader;

  std::string path_;
  std::deque<std::string> names_;    // interned event names: events_ point into them
  std::deque<nlohmann::json> args_;  // communication args: events_ point into them
  std::vector<KinetoEvent> events_;
  nlohmann::json distributed_info_;
  std::optional<int64_t> rank_;
  std::optional<int64_t> world_size_;
  std::vector<int64_t> cpu_pids_;
  std::map<std::string, uint64_t> ignored_;
  uint64_t total_events_ = 0;
  bool array_form_ = false;
};

// Reads `path` (plain or gzip JSON): an object with traceEvents, or a bare list of events. Errors:
// not JSON (with the byte where it stops); a host trace given instead (nodes and schema); an object
// without a traceEvents list; a used event without a name, ts or dur,
// naming its position.
Expected<KinetoTrace> read_kineto_trace(const std::string& path);
// As read_kineto_trace, for the text of a file read as `path`.
Expected<KinetoTrace> parse_kineto_text(const std::string& path, const std::string& text);
// As read_kineto_trace, for a document already parsed (tests).
Expected<KinetoTrace> parse_kineto_trace(const std::string& path, const nlohmann::json& doc);

// A time as Kineto writes it (microseconds, integer or fractional) in nanoseconds.
std::optional<int64_t> kineto_time_ns(const nlohmann::json& value);

}  // namespace orrery::convert
