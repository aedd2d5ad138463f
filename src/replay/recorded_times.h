// replay/recorded_times.h: what the original run measured, from its profiler trace.
//
// A host trace records no times; the profiler trace of the same run does (a Kineto trace, or the
// Chrome trace array form the profiler writes without Kineto: convert/kineto_trace.h). The
// operators of the replayed iteration are matched to the profiler's CPU events by name, in start
// order, per thread: the longest common subsequence of the iteration's host-trace nodes and the
// events inside the iteration's ProfilerStep# window (every window tried when the host trace has
// no marker; the one with most matches wins). Unlike a greedy match, a node the profiler did not
// record (or an event the observer did not) costs only itself. A replayed op's recorded time is its
// event's duration (inclusive, CPU), plus, when the trace has GPU events, the time of the kernels
// and copies its runtime calls launched. The original iteration is the median duration of the
// profiler trace's ProfilerStep# events.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "convert/host_trace.h"
#include "convert/kineto_trace.h"
#include "replay/plan.h"

namespace orrery::replay {

struct RecordedTimes {
  std::string source;                         // the profiler trace's path
  std::vector<std::optional<double>> cpu_us;  // per plan op
  std::vector<std::optional<double>> gpu_us;  // per plan op, when the trace has GPU events
  bool has_gpu = false;
  std::vector<double> iteration_samples_us;   // every ProfilerStep# event, in time order
  std::optional<double> iteration_us;         // their median
  std::optional<double> traced_iteration_us;  // the replayed iteration's own marker
  uint64_t nodes_matched = 0;                 // host-trace nodes of the iteration matched to events
  uint64_t nodes = 0;                         // host-trace nodes of the iteration
  uint64_t ops_matched = 0;                   // replayed ops with a recorded time
};

// Matches `plan` (built from `host`) to `profile`. Cost: the alignment is O(nodes x events) per
// candidate window in time and bits of memory (at most 16 windows).
RecordedTimes recorded_times(const ReplayPlan& plan, const convert::HostTrace& host,
                             const convert::KinetoTrace& profile);

// The longest common subsequence of two sequences of ids: the matched pairs (a position, b
// position), in order. Exposed for tests.
std::vector<std::pair<size_t, size_t>> longest_common_subsequence(const std::vector<uint32_t>& a,
                                                                  const std::vector<uint32_t>& b);

}  // namespace orrery::replay
