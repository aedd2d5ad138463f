#include "convert/trace_linker.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>

namespace orrery::convert {

namespace {

// How far ahead in the Kineto sequence a host op's name is looked for.
constexpr size_t kWindow = 64;
// Candidate starting points tried per thread pair.
constexpr size_t kMaxStarts = 64;

using NameId = uint32_t;

// Dense ids for names, shared by both traces, so alignment compares integers.
class NameTable {
 public:
  NameId id(std::string_view name) {
    const auto [found, inserted] = ids_.emplace(name, static_cast<NameId>(ids_.size()));
    return found->second;
  }

 private:
  std::unordered_map<std::string_view, NameId> ids_;
};

// Greedy alignment of `host` against `kineto[start..]`: each host name is matched to the next equal
// name within the window. Returns the number of matches and, when `pairs` is given, the pairs
// (host position, kineto position).
size_t align(const std::vector<NameId>& host, const std::vector<NameId>& kineto, size_t start,
             std::vector<std::pair<size_t, size_t>>* pairs) {
  size_t next = start;
  size_t matches = 0;
  for (size_t index = 0; index < host.size(); ++index) {
    const size_t end = std::min(kineto.size(), next + kWindow);
    for (size_t at = next; at < end; ++at) {
      if (kineto[at] == host[index]) {
        ++matches;
        if (pairs != nullptr) pairs->emplace_back(index, at);
        next = at + 1;
        break;
      }
    }
    if (next >= kineto.size()) break;
  }
  return matches;
}

// Candidate starts for aligning `host` against `kineto` and the matches of each: (matches, start),
// best first (more matches, then earlier).
std::vector<std::pair<size_t, size_t>> alignments(const std::vector<NameId>& host,
                                                  const std::vector<NameId>& kineto) {
  std::vector<std::pair<size_t, size_t>> result;
  if (host.empty() || kineto.empty()) return result;
  std::vector<size_t> starts{0};
  for (size_t lead = 0; lead < std::min<size_t>(4, host.size()); ++lead) {
    for (size_t at = 0; at < kineto.size() && starts.size() < kMaxStarts; ++at) {
      if (kineto[at] == host[lead]) starts.push_back(at);
    }
  }
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  for (const size_t start : starts) result.emplace_back(align(host, kineto, start, nullptr), start);
  std::sort(result.begin(), result.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    return a.second < b.second;
  });
  return result;
}

// An upper bound on the matches between two name sequences: the size of their multiset
// intersection.
size_t overlap_bound(const std::vector<NameId>& host, const std::vector<NameId>& kineto) {
  std::unordered_map<NameId, int64_t> counts;
  for (const NameId name : kineto) ++counts[name];
  size_t bound = 0;
  for (const NameId name : host) {
    auto found = counts.find(name);
    if (found != counts.end() && found->second > 0) {
      --found->second;
      ++bound;
    }
  }
  return bound;
}

bool encloses(const KinetoEvent& outer, const KinetoEvent& inner) {
  return outer.ts_ns <= inner.ts_ns && inner.end_ns() <= outer.end_ns();
}

// Matches host ops to Kineto CPU events by record-function id.
void link_by_record_function(const HostTrace& host, const KinetoTrace& kineto,
                             const std::vector<size_t>& linkable, LinkResult& result) {
  std::unordered_map<int64_t, size_t> by_rf;
  for (size_t index = 0; index < kineto.events().size(); ++index) {
    const KinetoEvent& event = kineto.events()[index];
    if (event.is_cpu() && event.record_function_id >= 0)
      by_rf.emplace(event.record_function_id, index);
  }
  for (const size_t op_index : linkable) {
    const HostOp& op = host.ops()[op_index];
    if (!op.rf_id) continue;
    const auto found = by_rf.find(*op.rf_id);
    if (found == by_rf.end()) continue;
    if (kineto.events()[found->second].name != op.name) continue;
    result.host_to_kineto[op_index] = static_cast<int64_t>(found->second);
  }
}

// Matches host ops to Kineto CPU events by aligning names per thread.
void link_by_alignment(const HostTrace& host, const KinetoTrace& kineto,
                       const std::vector<size_t>& linkable, LinkResult& result) {
  NameTable names;
  // Host threads: ops in start order (rf_id, then id).
  std::map<int64_t, std::vector<size_t>> host_threads;
  for (const size_t op_index : linkable) host_threads[host.ops()[op_index].tid].push_back(op_index);
  for (auto& [tid, ops] : host_threads) {
    std::sort(ops.begin(), ops.end(), [&host](size_t a, size_t b) {
      const HostOp& x = host.ops()[a];
      const HostOp& y = host.ops()[b];
      const int64_t rx = x.rf_id.value_or(-1);
      const int64_t ry = y.rf_id.value_or(-1);
      if (rx != ry) return rx < ry;
      return x.id < y.id;
    });
  }
  // Kineto threads: CPU events in start order (External id, then time).
  std::map<int64_t, std::vector<size_t>> kineto_threads;
  for (size_t index = 0; index < kineto.events().size(); ++index) {
    if (kineto.events()[index].is_cpu())
      kineto_threads[kineto.events()[index].tid].push_back(index);
  }
  for (auto& [tid, events] : kineto_threads) {
    std::sort(events.begin(), events.end(), [&kineto](size_t a, size_t b) {
      const KinetoEvent& x = kineto.events()[a];
      const KinetoEvent& y = kineto.events()[b];
      return std::tie(x.external_id, x.ts_ns, a) < std::tie(y.external_id, y.ts_ns, b);
    });
  }
  std::map<int64_t, std::vector<NameId>> host_names;
  for (const auto& [tid, ops] : host_threads) {
    auto& list = host_names[tid];
    for (const size_t op_index : ops) list.push_back(names.id(host.ops()[op_index].name));
  }
  std::map<int64_t, std::vector<NameId>> kineto_names;
  for (const auto& [tid, events] : kineto_threads) {
    auto& list = kineto_names[tid];
    for (const size_t index : events) list.push_back(names.id(kineto.events()[index].name));
  }

  // Score every pair of threads; pair them greedily by score.
  struct Candidate {
    size_t matches;
    int64_t host_tid;
    int64_t kineto_tid;
    std::vector<std::pair<size_t, size_t>> starts;  // (matches, start), best first
  };
  std::vector<Candidate> candidates;
  for (const auto& [host_tid, host_list] : host_names) {
    size_t best_for_thread = 0;
    for (const auto& [kineto_tid, kineto_list] : kineto_names) {
      if (overlap_bound(host_list, kineto_list) <= best_for_thread / 2) continue;
      std::vector<std::pair<size_t, size_t>> starts = alignments(host_list, kineto_list);
      if (starts.empty() || starts.front().first == 0) continue;
      best_for_thread = std::max(best_for_thread, starts.front().first);
      candidates.push_back({starts.front().first, host_tid, kineto_tid, std::move(starts)});
    }
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.matches != b.matches) return a.matches > b.matches;
    return std::tie(a.host_tid, a.kineto_tid) < std::tie(b.host_tid, b.kineto_tid);
  });
  // Host ops already matched, by record-function id (the global start order), with their times:
  // a thread whose best alignment fits several iterations takes the one that fits in time between
  // the ops of the threads already placed.
  std::map<int64_t, int64_t> placed;  // rf_id -> Kineto start (ns)
  const auto order_of = [&host](size_t op_index) {
    const HostOp& op = host.ops()[op_index];
    return op.rf_id.value_or(static_cast<int64_t>(op.id));
  };
  std::set<int64_t> used_host;
  std::set<int64_t> used_kineto;
  for (const Candidate& candidate : candidates) {
    if (used_host.count(candidate.host_tid) != 0 || used_kineto.count(candidate.kineto_tid) != 0)
      continue;
    used_host.insert(candidate.host_tid);
    used_kineto.insert(candidate.kineto_tid);
    const std::vector<size_t>& ops = host_threads[candidate.host_tid];
    const std::vector<size_t>& events = kineto_threads[candidate.kineto_tid];
    size_t start = candidate.starts.front().second;
    if (!placed.empty()) {
      const int64_t first = order_of(ops.front());
      const auto above = placed.upper_bound(first);
      const std::optional<int64_t> after =
          above == placed.begin() ? std::nullopt : std::optional<int64_t>(std::prev(above)->second);
      const std::optional<int64_t> before =
          above == placed.end() ? std::nullopt : std::optional<int64_t>(above->second);
      // How far a window starting at `ts` is from where the placed threads say it should be.
      const auto distance = [&](int64_t ts) -> int64_t {
        constexpr int64_t kWrongSide = INT64_MAX / 4;
        if (after) return ts >= *after ? ts - *after : kWrongSide + (*after - ts) / 2;
        if (before) return ts <= *before ? *before - ts : kWrongSide + (ts - *before) / 2;
        return 0;
      };
      int64_t best = INT64_MAX;
      for (const auto& [matches, at] : candidate.starts) {
        if (matches < candidate.matches) break;
        const int64_t away = distance(kineto.events()[events[at]].ts_ns);
        if (away < best) {
          best = away;
          start = at;
        }
      }
    }
    std::vector<std::pair<size_t, size_t>> pairs;
    align(host_names[candidate.host_tid], kineto_names[candidate.kineto_tid], start, &pairs);
    for (const auto& [host_at, kineto_at] : pairs) {
      result.host_to_kineto[ops[host_at]] = static_cast<int64_t>(events[kineto_at]);
      placed.emplace(order_of(ops[host_at]), kineto.events()[events[kineto_at]].ts_ns);
    }
    result.threads.push_back({candidate.host_tid, candidate.kineto_tid, ops.size(), pairs.size()});
  }
  std::sort(result.threads.begin(), result.threads.end(),
            [](const ThreadPairing& a, const ThreadPairing& b) { return a.host_tid < b.host_tid; });
}

// For each runtime call in `calls` (indices of runtime events), the innermost CPU event on its
// thread that encloses it. Properly nested CPU events are assumed (as on one thread).
std::unordered_map<size_t, size_t> innermost_enclosing(const KinetoTrace& kineto,
                                                       const std::vector<size_t>& calls) {
  const std::vector<KinetoEvent>& events = kineto.events();
  std::map<int64_t, std::vector<size_t>> cpu_by_tid;
  for (size_t index = 0; index < events.size(); ++index) {
    if (events[index].is_cpu()) cpu_by_tid[events[index].tid].push_back(index);
  }
  std::map<int64_t, std::vector<size_t>> calls_by_tid;
  for (const size_t call : calls) calls_by_tid[events[call].tid].push_back(call);

  std::unordered_map<size_t, size_t> result;
  for (auto& [tid, thread_calls] : calls_by_tid) {
    auto found = cpu_by_tid.find(tid);
    if (found == cpu_by_tid.end()) continue;
    std::vector<size_t>& ops = found->second;
    // Outer ops first: earlier start, then longer.
    std::sort(ops.begin(), ops.end(), [&events](size_t a, size_t b) {
      const KinetoEvent& x = events[a];
      const KinetoEvent& y = events[b];
      if (x.ts_ns != y.ts_ns) return x.ts_ns < y.ts_ns;
      if (x.dur_ns != y.dur_ns) return x.dur_ns > y.dur_ns;
      return a < b;
    });
    std::sort(thread_calls.begin(), thread_calls.end(), [&events](size_t a, size_t b) {
      return std::tie(events[a].ts_ns, a) < std::tie(events[b].ts_ns, b);
    });
    std::vector<size_t> stack;
    size_t next_op = 0;
    for (const size_t call : thread_calls) {
      const KinetoEvent& runtime = events[call];
      while (next_op < ops.size() && events[ops[next_op]].ts_ns <= runtime.ts_ns) {
        const KinetoEvent& op = events[ops[next_op]];
        while (!stack.empty() && events[stack.back()].end_ns() < op.ts_ns) stack.pop_back();
        stack.push_back(ops[next_op]);
        ++next_op;
      }
      while (!stack.empty() && events[stack.back()].end_ns() < runtime.ts_ns) stack.pop_back();
      for (size_t depth = stack.size(); depth > 0; --depth) {
        if (encloses(events[stack[depth - 1]], runtime)) {
          result.emplace(call, stack[depth - 1]);
          break;
        }
      }
    }
  }
  return result;
}

// Time given to each event: every instant goes to the most recently started running event.
std::vector<int64_t> attribute_time(const KinetoTrace& kineto,
                                    const std::vector<size_t>& cpu_events) {
  const std::vector<KinetoEvent>& events = kineto.events();
  // Order of "more recent": later start, then shorter (the inner op), then later in the file.
  std::vector<size_t> rank_of(cpu_events.size());
  std::vector<size_t> order(cpu_events.size());
  for (size_t slot = 0; slot < order.size(); ++slot) order[slot] = slot;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const KinetoEvent& x = events[cpu_events[a]];
    const KinetoEvent& y = events[cpu_events[b]];
    if (x.ts_ns != y.ts_ns) return x.ts_ns < y.ts_ns;
    if (x.dur_ns != y.dur_ns) return x.dur_ns > y.dur_ns;
    return cpu_events[a] < cpu_events[b];
  });
  for (size_t position = 0; position < order.size(); ++position)
    rank_of[order[position]] = position;

  struct Boundary {
    int64_t time;
    bool start;
    size_t slot;
  };
  std::vector<Boundary> boundaries;
  boundaries.reserve(cpu_events.size() * 2);
  for (size_t slot = 0; slot < cpu_events.size(); ++slot) {
    const KinetoEvent& event = events[cpu_events[slot]];
    boundaries.push_back({event.ts_ns, true, slot});
    boundaries.push_back({event.end_ns(), false, slot});
  }
  std::sort(boundaries.begin(), boundaries.end(), [&rank_of](const Boundary& a, const Boundary& b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.start != b.start) return a.start;  // starts first, so zero-length events come and go
    return rank_of[a.slot] < rank_of[b.slot];
  });
  std::vector<int64_t> given(cpu_events.size(), 0);
  std::set<size_t> running;  // ranks of running events
  int64_t previous = boundaries.empty() ? 0 : boundaries.front().time;
  for (const Boundary& boundary : boundaries) {
    if (boundary.time > previous && !running.empty()) {
      given[order[*running.rbegin()]] += boundary.time - previous;
    }
    previous = boundary.time;
    if (boundary.start) {
      running.insert(rank_of[boundary.slot]);
    } else {
      running.erase(rank_of[boundary.slot]);
    }
  }
  return given;
}

}  // namespace

LinkResult link_traces(const HostTrace& host, const KinetoTrace& kineto) {
  LinkResult result;
  const std::vector<HostOp>& ops = host.ops();
  const std::vector<KinetoEvent>& events = kineto.events();
  result.host_to_kineto.assign(ops.size(), -1);
  result.host_duration_ns.assign(ops.size(), std::nullopt);
  result.host_start_ns.assign(ops.size(), std::nullopt);

  std::vector<size_t> linkable;
  for (size_t index = 0; index < ops.size(); ++index) {
    if (ops[index].kind == HostOpKind::kCpuOp || ops[index].kind == HostOpKind::kProcessGroup)
      linkable.push_back(index);
  }
  result.host_ops_linkable = linkable.size();
  bool have_rf = false;
  for (const KinetoEvent& event : events) {
    if (event.is_cpu()) {
      ++result.kineto_cpu_events;
      have_rf = have_rf || event.record_function_id >= 0;
    }
    if (event.is_gpu()) ++result.kineto_gpu_events;
  }
  if (have_rf) {
    result.method = "record function ids";
    link_by_record_function(host, kineto, linkable, result);
  } else {
    result.method = "operator names in start order, per thread";
    link_by_alignment(host, kineto, linkable, result);
  }

  // Kineto event -> host op, and the matched events' times.
  std::unordered_map<size_t, size_t> kineto_to_host;
  std::vector<size_t> matched_events;
  for (size_t index = 0; index < ops.size(); ++index) {
    if (result.host_to_kineto[index] < 0) continue;
    const auto event = static_cast<size_t>(result.host_to_kineto[index]);
    kineto_to_host.emplace(event, index);
    matched_events.push_back(event);
  }
  result.host_ops_matched = matched_events.size();
  result.kineto_cpu_matched = matched_events.size();
  const std::vector<int64_t> given = attribute_time(kineto, matched_events);
  result.first_ns = INT64_MAX;
  for (size_t slot = 0; slot < matched_events.size(); ++slot) {
    const size_t op_index = kineto_to_host.at(matched_events[slot]);
    result.host_duration_ns[op_index] = given[slot];
    result.host_start_ns[op_index] = events[matched_events[slot]].ts_ns;
    result.first_ns = std::min(result.first_ns, events[matched_events[slot]].ts_ns);
  }

  // GPU events -> runtime calls -> launching CPU events -> host ops.
  std::unordered_map<int64_t, size_t> runtime_by_correlation;
  std::unordered_map<int64_t, size_t> cpu_by_external;
  for (size_t index = 0; index < events.size(); ++index) {
    const KinetoEvent& event = events[index];
    if (event.category == KinetoCategory::kRuntime && event.correlation >= 0)
      runtime_by_correlation.emplace(event.correlation, index);
    if (event.is_cpu() && event.external_id >= 0) cpu_by_external.emplace(event.external_id, index);
  }
  std::vector<size_t> calls;
  std::vector<std::pair<size_t, size_t>> gpu_calls;  // (gpu event, runtime call)
  for (size_t index = 0; index < events.size(); ++index) {
    if (!events[index].is_gpu()) continue;
    const auto found = runtime_by_correlation.find(events[index].correlation);
    if (found == runtime_by_correlation.end()) {
      result.dropped.push_back({index, GpuDropReason::kNoRuntimeCall, std::nullopt});
      continue;
    }
    gpu_calls.emplace_back(index, found->second);
    calls.push_back(found->second);
  }
  std::sort(calls.begin(), calls.end());
  calls.erase(std::unique(calls.begin(), calls.end()), calls.end());
  const std::unordered_map<size_t, size_t> enclosing = innermost_enclosing(kineto, calls);
  for (const auto& [gpu, call] : gpu_calls) {
    const KinetoEvent& runtime = events[call];
    std::optional<size_t> launcher;
    if (runtime.external_id >= 0) {
      const auto by_external = cpu_by_external.find(runtime.external_id);
      if (by_external != cpu_by_external.end()) {
        const KinetoEvent& op = events[by_external->second];
        if (op.tid == runtime.tid && encloses(op, runtime)) launcher = by_external->second;
      }
    }
    if (!launcher) {
      const auto found = enclosing.find(call);
      if (found != enclosing.end()) launcher = found->second;
    }
    if (!launcher) {
      result.dropped.push_back({gpu, GpuDropReason::kOutsideCpuOp, std::nullopt});
      continue;
    }
    const auto host_op = kineto_to_host.find(*launcher);
    if (host_op == kineto_to_host.end()) {
      result.dropped.push_back({gpu, GpuDropReason::kLauncherNotInHost, launcher});
      continue;
    }
    result.launches.push_back({gpu, host_op->second, runtime.ts_ns});
    result.first_ns = std::min(result.first_ns, events[gpu].ts_ns);
  }
  std::sort(
      result.launches.begin(), result.launches.end(), [&](const GpuLaunch& a, const GpuLaunch& b) {
        return std::tie(ops[a.host_op].id, a.launch_ns, events[a.event].correlation, a.event) <
               std::tie(ops[b.host_op].id, b.launch_ns, events[b.event].correlation, b.event);
      });
  if (result.first_ns == INT64_MAX) result.first_ns = 0;
  return result;
}

}  // namespace orrery::convert
