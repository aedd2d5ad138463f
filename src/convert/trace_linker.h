// convert/trace_linker.h: which Kineto events belong to which host-trace operators.
//
// Linking answers three questions for one rank:
//  1. Which Kineto CPU event is each host op? With "Record function id" in the Kineto args (newer
//     PyTorch) it equals the host op's rf_id. Older traces lack it, and their "External id"
//     drifts from rf_id, so the ops are aligned by name: for each pair of a host-trace thread and a
//     Kineto thread, the host ops in start order (rf_id) are matched greedily against the Kineto
//     ops in start order (External id), each to the next event of the same name within a window;
//     the start point with most matches wins (a Kineto trace often spans several iterations while
//     the host trace holds one), and threads are paired by most matches.
//  2. Which host op launched each GPU event? The event's "correlation" names the runtime call
//     (cudaLaunchKernel, cudaMemcpyAsync, ...) that launched it; the launching CPU op is the one
//     whose "External id" the runtime call carries, when that op encloses the call, else the
//     innermost CPU op on the call's thread that encloses it in time.
//  3. How long did each host op run? Each instant of the CPU timeline is given to the op that
//     started most recently among those running, on any thread; an op's duration is the time it
//     was given (its exclusive time on one thread; on several, time the main thread spent
//     waiting on another thread's work goes to that work). The sum equals the busy CPU time.
// Everything that could not be linked is returned with the reason, for the report.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "convert/host_trace.h"
#include "convert/kineto_trace.h"

namespace orrery::convert {

struct GpuLaunch {
  size_t event = 0;    // index in KinetoTrace::events()
  size_t host_op = 0;  // index in HostTrace::ops() of the launching op
  int64_t launch_ns = 0;
};

enum class GpuDropReason : uint8_t {
  kNoRuntimeCall,      // no runtime call carries the event's correlation
  kOutsideCpuOp,       // the runtime call lies inside no CPU op
  kLauncherNotInHost,  // the launching CPU op is not in the host trace (another iteration)
};

struct DroppedGpuEvent {
  size_t event = 0;
  GpuDropReason reason = GpuDropReason::kNoRuntimeCall;
  std::optional<size_t> launcher;  // the Kineto CPU event that launched it, when known
};

struct ThreadPairing {
  int64_t host_tid = 0;
  int64_t kineto_tid = 0;
  size_t host_ops = 0;
  size_t matched = 0;
};

struct LinkResult {
  std::string method;  // "record function ids" or "operator names in start order"
  // Per host op (index in HostTrace::ops()): the Kineto CPU event, or -1.
  std::vector<int64_t> host_to_kineto;
  // Per host op: the time attributed to it (nanoseconds), when it has a Kineto event.
  std::vector<std::optional<int64_t>> host_duration_ns;
  // Per host op: its start (Kineto ts, nanoseconds), when it has a Kineto event.
  std::vector<std::optional<int64_t>> host_start_ns;
  std::vector<GpuLaunch> launches;  // ordered by (host op id, launch time, correlation)
  std::vector<DroppedGpuEvent> dropped;
  std::vector<ThreadPairing> threads;
  uint64_t kineto_cpu_events = 0;
  uint64_t kineto_cpu_matched = 0;
  uint64_t kineto_gpu_events = 0;
  uint64_t host_ops_linkable = 0;
  uint64_t host_ops_matched = 0;
  int64_t first_ns = 0;  // earliest start among linked events, for relative start times
};

// Links `host` and `kineto` (one rank). Cost: O(n log n) in the events, plus the alignment,
// O(ops x window) per candidate start and thread pair.
LinkResult link_traces(const HostTrace& host, const KinetoTrace& kineto);

}  // namespace orrery::convert
