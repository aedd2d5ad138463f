#include "replay/recorded_times.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

namespace orrery::replay {

namespace {

using convert::HostOp;
using convert::HostOpKind;
using convert::KinetoCategory;
using convert::KinetoEvent;

// Alignments larger than this many cells (two bits each) fall back to a greedy match.
constexpr uint64_t kMaxCells = 400'000'000;
constexpr size_t kMaxWindows = 16;
constexpr size_t kGreedyWindow = 64;

bool is_marker(std::string_view name) { return name.substr(0, 13) == "ProfilerStep#"; }

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0;
}

// Greedy in-order match (each a to the next equal b within a window), for inputs too large to
// align exactly.
std::vector<std::pair<size_t, size_t>> greedy_match(const std::vector<uint32_t>& a,
                                                    const std::vector<uint32_t>& b) {
  std::vector<std::pair<size_t, size_t>> pairs;
  size_t next = 0;
  for (size_t at = 0; at < a.size() && next < b.size(); ++at) {
    const size_t end = std::min(b.size(), next + kGreedyWindow);
    for (size_t probe = next; probe < end; ++probe) {
      if (b[probe] == a[at]) {
        pairs.emplace_back(at, probe);
        next = probe + 1;
        break;
      }
    }
  }
  return pairs;
}

}  // namespace

std::vector<std::pair<size_t, size_t>> longest_common_subsequence(const std::vector<uint32_t>& a,
                                                                  const std::vector<uint32_t>& b) {
  const size_t n = a.size();
  const size_t m = b.size();
  if (n == 0 || m == 0) return {};
  if (static_cast<uint64_t>(n) * m > kMaxCells) return greedy_match(a, b);
  // Lengths row by row; the choice at each cell in two bits: 0 match, 1 skip a, 2 skip b.
  std::vector<uint32_t> previous(m + 1, 0);
  std::vector<uint32_t> current(m + 1, 0);
  std::vector<uint8_t> choice((n * m + 3) / 4, 0);
  const auto set_choice = [&choice, m](size_t i, size_t j, uint8_t value) {
    const size_t cell = i * m + j;
    choice[cell / 4] = static_cast<uint8_t>(choice[cell / 4] | (value << (2 * (cell % 4))));
  };
  const auto get_choice = [&choice, m](size_t i, size_t j) {
    const size_t cell = i * m + j;
    return static_cast<uint8_t>((choice[cell / 4] >> (2 * (cell % 4))) & 3);
  };
  for (size_t i = 0; i < n; ++i) {
    current[0] = 0;
    for (size_t j = 0; j < m; ++j) {
      if (a[i] == b[j]) {
        current[j + 1] = previous[j] + 1;
      } else if (previous[j + 1] >= current[j]) {
        current[j + 1] = previous[j + 1];
        set_choice(i, j, 1);
      } else {
        current[j + 1] = current[j];
        set_choice(i, j, 2);
      }
    }
    std::swap(previous, current);
  }
  std::vector<std::pair<size_t, size_t>> pairs;
  size_t i = n;
  size_t j = m;
  while (i > 0 && j > 0) {
    const uint8_t step = get_choice(i - 1, j - 1);
    if (step == 0) {
      pairs.emplace_back(i - 1, j - 1);
      --i;
      --j;
    } else if (step == 1) {
      --i;
    } else {
      --j;
    }
  }
  std::reverse(pairs.begin(), pairs.end());
  return pairs;
}

RecordedTimes recorded_times(const ReplayPlan& plan, const convert::HostTrace& host,
                             const convert::KinetoTrace& profile) {
  RecordedTimes result;
  result.source = profile.path();
  result.cpu_us.assign(plan.ops.size(), std::nullopt);
  result.gpu_us.assign(plan.ops.size(), std::nullopt);
  const std::vector<KinetoEvent>& events = profile.events();

  std::unordered_map<std::string_view, uint32_t> names;
  const auto name_id = [&names](std::string_view name) {
    return names.emplace(name, static_cast<uint32_t>(names.size())).first->second;
  };

  // The iteration's host nodes per thread, in start order.
  std::map<int64_t, std::vector<size_t>> host_threads;
  for (size_t index = 0; index < host.ops().size(); ++index) {
    const HostOp& op = host.ops()[index];
    if (op.kind != HostOpKind::kCpuOp) continue;
    if (op.id < plan.iteration_begin || op.id >= plan.iteration_end) continue;
    host_threads[op.tid].push_back(index);
    ++result.nodes;
  }
  for (auto& [tid, list] : host_threads) {
    std::sort(list.begin(), list.end(),
              [&host](size_t x, size_t y) { return host.ops()[x].id < host.ops()[y].id; });
  }

  // The profile's iterations.
  std::vector<size_t> markers;
  for (size_t index = 0; index < events.size(); ++index) {
    if (events[index].is_cpu() && is_marker(events[index].name)) markers.push_back(index);
  }
  std::sort(markers.begin(), markers.end(), [&events](size_t x, size_t y) {
    return std::tie(events[x].ts_ns, x) < std::tie(events[y].ts_ns, y);
  });
  for (const size_t index : markers)
    result.iteration_samples_us.push_back(static_cast<double>(events[index].dur_ns) / 1000.0);
  if (!result.iteration_samples_us.empty())
    result.iteration_us = median_of(result.iteration_samples_us);

  // Candidate windows: the marker of the same name, else every marker, else the whole trace.
  std::vector<std::optional<size_t>> windows;
  for (const size_t index : markers) {
    if (events[index].name == plan.iteration) windows.emplace_back(index);
  }
  if (windows.empty()) {
    for (const size_t index : markers) {
      if (windows.size() < kMaxWindows) windows.emplace_back(index);
    }
  }
  if (windows.empty()) windows.emplace_back(std::nullopt);

  struct Match {
    std::vector<std::pair<size_t, size_t>> pairs;  // (host op index, event index)
    std::optional<size_t> window;
  };
  Match best;
  for (const std::optional<size_t>& window : windows) {
    const int64_t begin = window ? events[*window].ts_ns : INT64_MIN;
    const int64_t end = window ? events[*window].end_ns() : INT64_MAX;
    std::map<int64_t, std::vector<size_t>> kineto_threads;
    for (size_t index = 0; index < events.size(); ++index) {
      const KinetoEvent& event = events[index];
      if (!event.is_cpu() || event.ts_ns < begin || event.end_ns() > end) continue;
      kineto_threads[event.tid].push_back(index);
    }
    for (auto& [tid, list] : kineto_threads) {
      std::sort(list.begin(), list.end(), [&events](size_t x, size_t y) {
        return std::tie(events[x].ts_ns, x) < std::tie(events[y].ts_ns, y);
      });
    }
    // Threads paired greedily, the busiest host thread first, each to the profile thread it
    // matches best.
    std::vector<std::pair<size_t, int64_t>> order;
    for (const auto& [tid, list] : host_threads) order.emplace_back(list.size(), tid);
    std::sort(order.begin(), order.end(), [](const auto& x, const auto& y) {
      return x.first != y.first ? x.first > y.first : x.second < y.second;
    });
    std::set<int64_t> used;
    Match match;
    match.window = window;
    for (const auto& [count, host_tid] : order) {
      const std::vector<size_t>& ops = host_threads[host_tid];
      std::vector<uint32_t> a;
      a.reserve(ops.size());
      for (const size_t index : ops) a.push_back(name_id(host.ops()[index].name));
      std::vector<std::pair<size_t, size_t>> chosen;
      int64_t chosen_tid = 0;
      for (const auto& [kineto_tid, list] : kineto_threads) {
        if (used.count(kineto_tid) != 0) continue;
        std::vector<uint32_t> b;
        b.reserve(list.size());
        for (const size_t index : list) b.push_back(name_id(events[index].name));
        std::vector<std::pair<size_t, size_t>> pairs = longest_common_subsequence(a, b);
        if (pairs.size() > chosen.size()) {
          for (auto& pair : pairs) pair = {ops[pair.first], list[pair.second]};
          chosen = std::move(pairs);
          chosen_tid = kineto_tid;
        }
      }
      if (chosen.empty()) continue;
      used.insert(chosen_tid);
      match.pairs.insert(match.pairs.end(), chosen.begin(), chosen.end());
    }
    if (match.pairs.size() > best.pairs.size()) best = std::move(match);
  }
  result.nodes_matched = best.pairs.size();
  if (best.window) {
    result.traced_iteration_us = static_cast<double>(events[*best.window].dur_ns) / 1000.0;
  }

  // GPU time launched from inside an event: runtime calls on its thread within its span, and the
  // GPU work of their correlations.
  std::unordered_map<int64_t, int64_t> gpu_ns_of;  // correlation -> GPU time
  for (const KinetoEvent& event : events) {
    if (event.is_gpu() && event.correlation >= 0) {
      gpu_ns_of[event.correlation] += event.dur_ns;
      result.has_gpu = true;
    }
  }
  std::map<int64_t, std::vector<size_t>> runtime_by_tid;
  if (result.has_gpu) {
    for (size_t index = 0; index < events.size(); ++index) {
      if (events[index].category == KinetoCategory::kRuntime)
        runtime_by_tid[events[index].tid].push_back(index);
    }
    for (auto& [tid, list] : runtime_by_tid) {
      std::sort(list.begin(), list.end(), [&events](size_t x, size_t y) {
        return std::tie(events[x].ts_ns, x) < std::tie(events[y].ts_ns, y);
      });
    }
  }

  std::unordered_map<uint64_t, size_t> event_of_node;
  for (const auto& [op_index, event] : best.pairs) event_of_node[host.ops()[op_index].id] = event;
  for (size_t index = 0; index < plan.ops.size(); ++index) {
    const auto found = event_of_node.find(plan.ops[index].node_id);
    if (found == event_of_node.end()) continue;
    const KinetoEvent& event = events[found->second];
    result.cpu_us[index] = static_cast<double>(event.dur_ns) / 1000.0;
    ++result.ops_matched;
    if (!result.has_gpu) continue;
    int64_t gpu_ns = 0;
    const auto runtime = runtime_by_tid.find(event.tid);
    if (runtime != runtime_by_tid.end()) {
      const std::vector<size_t>& list = runtime->second;
      auto at = std::lower_bound(list.begin(), list.end(), event.ts_ns,
                                 [&events](size_t x, int64_t ts) { return events[x].ts_ns < ts; });
      for (; at != list.end() && events[*at].ts_ns <= event.end_ns(); ++at) {
        const auto gpu = gpu_ns_of.find(events[*at].correlation);
        if (gpu != gpu_ns_of.end()) gpu_ns += gpu->second;
      }
    }
    result.gpu_us[index] = static_cast<double>(gpu_ns) / 1000.0;
  }
  return result;
}

}  // namespace orrery::replay
