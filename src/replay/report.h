// replay/report.h: what a replay measured, as text, JSON and a self-contained HTML page.
//
// make_rank_report() gathers one rank's plan, recorded times and session into a RankReport:
// iteration times (median, min, max, quartiles of the measured iterations, wall and CPU), the
// original iteration (the profiler trace's ProfilerStep# median), coverage by count (replayed ops
// over all ops of the plan) and by recorded time (the recorded time of the replayed ops over that
// of all ops with a recorded time; absent without a profiler trace), every skipped op with its
// reason (grouped by operator and reason), and per operator the measured median next to the
// recorded time. job_json() is the object `orrery replay --json` prints: rank 0's fields at the
// top, `iteration_us` the slowest rank's median, and every rank under "ranks". The HTML page has no
// script and loads nothing: where the time goes (per operator name), the largest differences from
// the recording, what was skipped and why.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "replay/op_cost.h"
#include "replay/plan.h"
#include "replay/recorded_times.h"
#include "replay/session.h"

namespace orrery::replay {

struct Spread {
  double median = 0;
  double mean = 0;
  double min = 0;
  double max = 0;
  double p25 = 0;
  double p75 = 0;
  size_t count = 0;
};
Spread spread_of(std::vector<double> values);

struct OpLine {
  size_t index = 0;
  uint64_t node_id = 0;
  std::string name;
  OpKind kind = OpKind::kCompute;
  bool replayed = false;
  std::string reason;
  std::optional<Spread> measured_us;
  std::optional<double> recorded_us;      // CPU, inclusive
  std::optional<double> recorded_gpu_us;  // GPU work it launched (GPU traces)
  uint64_t comm_bytes = 0;
  std::optional<uint64_t> flops;  // matrix products and convolutions (replay/op_cost.h)
  uint64_t bytes = 0;
  std::optional<MatrixShape> gemm;         // matrix products
  std::optional<uint64_t> streamed_bytes;  // element-wise and normalizing ops (streamed_bytes)
};

// The achieved rate of one kind of operator: FLOPs of its replayed ops over their median times.
struct Rate {
  std::string name;
  uint64_t ops = 0;
  uint64_t flops = 0;
  uint64_t bytes = 0;
  double us = 0;
  double gflops() const { return us > 0 ? static_cast<double>(flops) / us / 1000.0 : 0; }
};

struct SkippedGroup {
  std::string name;
  std::string reason;
  uint64_t count = 0;
  std::vector<uint64_t> nodes;  // the first few node ids
};

struct RankReport {
  uint32_t rank = 0;
  uint32_t world = 1;
  std::string trace;
  std::string schema;
  std::string iteration;
  std::string profile;  // "" without a profiler trace
  std::string communicator;
  std::string device = "cpu";
  std::string libtorch;
  int threads = 0;
  bool subnormals_flushed = true;
  uint64_t autograd_passes = 0;  // backward passes the autograd engine ran (--autograd)
  int warmup = 0;
  int iterations = 0;
  Spread iteration_us;
  Spread iteration_cpu_us;
  Spread comm_wait_us;
  uint64_t comms = 0;  // communication ops run
  std::optional<double> original_us;
  std::vector<double> original_samples_us;
  std::optional<double> traced_iteration_us;
  uint64_t ops = 0;
  uint64_t replayed = 0;
  double coverage_by_count = 0;
  std::optional<double> coverage_by_time;
  double recorded_replayed_us = 0;
  double recorded_total_us = 0;
  bool recorded_gpu = false;
  uint64_t profile_nodes_matched = 0;
  uint64_t profile_nodes = 0;
  std::vector<OpLine> lines;  // per plan op
  std::vector<SkippedGroup> skipped;
  std::vector<Rate> rates;  // per operator name, then "all" last
  std::vector<std::string> notes;
  uint64_t storage_bytes = 0;
  uint64_t storages = 0;
};

struct ReportInputs {
  const ReplayPlan* plan = nullptr;
  const RecordedTimes* recorded = nullptr;  // may be null
  const SessionResult* session = nullptr;
  std::string libtorch;
  int threads = 0;
  bool subnormals_flushed = true;
  uint64_t autograd_passes = 0;
  std::map<std::string, uint64_t> adjustments;
  uint64_t storage_bytes = 0;
};
RankReport make_rank_report(const ReportInputs& inputs);

nlohmann::json rank_json(const RankReport& report);
// One object for the job from every rank's rank_json (index = rank).
nlohmann::json job_json(const std::vector<nlohmann::json>& ranks);
// The report people read; `top` operators in the tables.
std::string format_text(const RankReport& report, size_t top);
// A line per rank after rank 0's report, for multi-rank runs.
std::string format_ranks_text(const std::vector<nlohmann::json>& ranks);
// The self-contained page, from job_json().
std::string format_html(const nlohmann::json& job, size_t top);
// The replayed kernels as `orrery calibrate --table` reads them (docs/models/compute.md): a TSV
// row per replayed matrix product (kind gemm, its m, n, k, batch, FLOPs and bytes) and per
// replayed streaming op (kind memory, its bytes), with the median measured time of one.
std::string calibration_table(const RankReport& report);

}  // namespace orrery::replay
