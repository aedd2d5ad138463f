#include "replay/report.h"

#include <algorithm>
#include <cmath>

#include "core/markup.h"
#include "core/units.h"
#include "replay/op_cost.h"

namespace orrery::replay {

namespace {

using nlohmann::json;

double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double at = q * static_cast<double>(sorted.size() - 1);
  const size_t low = static_cast<size_t>(std::floor(at));
  const size_t high = std::min(low + 1, sorted.size() - 1);
  return sorted[low] + (sorted[high] - sorted[low]) * (at - static_cast<double>(low));
}

json spread_json(const Spread& spread) {
  return {{"median", spread.median}, {"mean", spread.mean}, {"min", spread.min},
          {"max", spread.max},       {"p25", spread.p25},   {"p75", spread.p75},
          {"count", spread.count}};
}

json optional_number(const std::optional<double>& value) {
  return value ? json(*value) : json(nullptr);
}

std::string us_text(double us) {
  if (us >= 10'000'000) return fmt::format("{:.2f} s", us / 1e6);
  if (us >= 100'000) return fmt::format("{:.1f} ms", us / 1000.0);
  if (us >= 1'000) return fmt::format("{:.2f} ms", us / 1000.0);
  return fmt::format("{:.1f} us", us);
}

std::string percent(double fraction) { return fmt::format("{:.1f}%", 100.0 * fraction); }

std::string signed_percent(double fraction) { return fmt::format("{:+.1f}%", 100.0 * fraction); }

const char* kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kCompute:
      return "compute";
    case OpKind::kComm:
      return "communication";
    case OpKind::kUnsupported:
      return "unsupported";
  }
  return "?";
}

// Time per operator name: measured medians summed, recorded times summed, count.
struct NameTotal {
  std::string name;
  double measured_us = 0;
  double recorded_us = 0;
  bool any_recorded = false;
  uint64_t count = 0;
  uint64_t skipped = 0;
};

std::vector<NameTotal> totals_by_name(const json& lines) {
  std::map<std::string, NameTotal> by_name;
  for (const json& line : lines) {
    NameTotal& total = by_name[line.at("name").get<std::string>()];
    total.name = line.at("name").get<std::string>();
    ++total.count;
    if (line.at("replayed").get<bool>()) {
      total.measured_us += line.at("measured_us").get<double>();
    } else {
      ++total.skipped;
    }
    if (!line.at("recorded_us").is_null()) {
      total.recorded_us += line.at("recorded_us").get<double>();
      total.any_recorded = true;
    }
  }
  std::vector<NameTotal> out;
  for (auto& [name, total] : by_name) out.push_back(std::move(total));
  std::stable_sort(out.begin(), out.end(), [](const NameTotal& a, const NameTotal& b) {
    return std::max(a.measured_us, a.recorded_us) > std::max(b.measured_us, b.recorded_us);
  });
  return out;
}

}  // namespace

Spread spread_of(std::vector<double> values) {
  Spread spread;
  spread.count = values.size();
  if (values.empty()) return spread;
  std::sort(values.begin(), values.end());
  double sum = 0;
  for (const double value : values) sum += value;
  spread.mean = sum / static_cast<double>(values.size());
  spread.median = quantile(values, 0.5);
  spread.min = values.front();
  spread.max = values.back();
  spread.p25 = quantile(values, 0.25);
  spread.p75 = quantile(values, 0.75);
  return spread;
}

RankReport make_rank_report(const ReportInputs& inputs) {
  const ReplayPlan& plan = *inputs.plan;
  const SessionResult& session = *inputs.session;
  const RecordedTimes* recorded = inputs.recorded;
  RankReport report;
  report.rank = session.rank;
  report.world = session.world;
  report.trace = plan.path;
  report.schema = plan.schema;
  report.iteration = plan.iteration;
  report.communicator = session.communicator;
  report.libtorch = inputs.libtorch;
  report.threads = inputs.threads;
  report.subnormals_flushed = inputs.subnormals_flushed;
  report.autograd_passes = inputs.autograd_passes;
  report.warmup = session.warmup;
  report.iterations = session.iterations;
  report.storage_bytes = inputs.storage_bytes;
  report.storages = plan.storages.size();
  const auto to_us = [](const std::vector<int64_t>& ns) {
    std::vector<double> us;
    us.reserve(ns.size());
    for (const int64_t value : ns) us.push_back(static_cast<double>(value) / 1000.0);
    return us;
  };
  report.iteration_us = spread_of(to_us(session.iteration_wall_ns));
  report.iteration_cpu_us = spread_of(to_us(session.iteration_cpu_ns));
  report.comm_wait_us = spread_of(to_us(session.comm_wait_ns));
  report.comms = session.comms.size();
  if (recorded != nullptr) {
    report.profile = recorded->source;
    report.original_us = recorded->iteration_us;
    report.original_samples_us = recorded->iteration_samples_us;
    report.traced_iteration_us = recorded->traced_iteration_us;
    report.recorded_gpu = recorded->has_gpu;
    report.profile_nodes_matched = recorded->nodes_matched;
    report.profile_nodes = recorded->nodes;
  }
  std::map<std::pair<std::string, std::string>, size_t> skipped_at;
  bool any_recorded = false;
  for (size_t index = 0; index < plan.ops.size(); ++index) {
    const ReplayOp& op = plan.ops[index];
    const OpResult& outcome = session.ops[index];
    OpLine line;
    line.index = index;
    line.node_id = op.node_id;
    line.name = op.name;
    line.kind = op.kind;
    line.replayed = outcome.replayed && !outcome.samples.empty();
    line.reason = outcome.reason;
    if (line.replayed) line.measured_us = spread_of(to_us(outcome.samples));
    if (op.comm) line.comm_bytes = op.comm->spec.bytes;
    if (const std::optional<OpCost> cost = op_cost(plan, op)) {
      line.flops = cost->flops;
      line.bytes = cost->bytes;
      line.gemm = cost->gemm;
    } else {
      line.streamed_bytes = streamed_bytes(plan, op);
    }
    if (recorded != nullptr) {
      line.recorded_us = recorded->cpu_us[index];
      if (recorded->has_gpu) line.recorded_gpu_us = recorded->gpu_us[index];
    }
    // The time an op stands for: its GPU work in GPU traces, its CPU time otherwise.
    const std::optional<double> weight =
        line.recorded_gpu_us && *line.recorded_gpu_us > 0 ? line.recorded_gpu_us : line.recorded_us;
    if (weight) {
      any_recorded = true;
      report.recorded_total_us += *weight;
      if (line.replayed) report.recorded_replayed_us += *weight;
    }
    ++report.ops;
    if (line.replayed) {
      ++report.replayed;
    } else {
      const std::string reason = line.reason.empty() ? "not run" : line.reason;
      const auto key = std::make_pair(op.name, reason);
      auto found = skipped_at.find(key);
      if (found == skipped_at.end()) {
        found = skipped_at.emplace(key, report.skipped.size()).first;
        report.skipped.push_back({op.name, reason, 0, {}});
      }
      SkippedGroup& group = report.skipped[found->second];
      ++group.count;
      if (group.nodes.size() < 5) group.nodes.push_back(op.node_id);
    }
    report.lines.push_back(std::move(line));
  }
  {
    std::map<std::string, Rate> by_name;
    Rate all;
    all.name = "all";
    for (const OpLine& line : report.lines) {
      if (!line.flops || !line.replayed) continue;
      for (Rate* rate : {&by_name[line.name], &all}) {
        ++rate->ops;
        rate->flops += *line.flops;
        rate->bytes += line.bytes;
        rate->us += line.measured_us->median;
      }
      by_name[line.name].name = line.name;
    }
    for (auto& [name, rate] : by_name) report.rates.push_back(rate);
    if (all.ops > 0) report.rates.push_back(all);
  }
  report.coverage_by_count =
      report.ops == 0 ? 0 : static_cast<double>(report.replayed) / static_cast<double>(report.ops);
  if (any_recorded && report.recorded_total_us > 0)
    report.coverage_by_time = report.recorded_replayed_us / report.recorded_total_us;
  for (const PlanNote& note : plan.notes) {
    report.notes.push_back(fmt::format("{} {}{}{}", format_count(note.count), note.what,
                                       note.examples.empty() ? "" : ": ",
                                       fmt::join(note.examples, ", ")));
  }
  for (const auto& [what, count] : inputs.adjustments)
    report.notes.push_back(fmt::format("{} {}", format_count(count), what));
  for (const std::string& note : session.notes) report.notes.push_back(note);
  return report;
}

json rank_json(const RankReport& report) {
  json skipped = json::array();
  for (const SkippedGroup& group : report.skipped) {
    skipped.push_back({{"name", group.name},
                       {"reason", group.reason},
                       {"count", group.count},
                       {"nodes", group.nodes}});
  }
  json ops = json::array();
  for (const OpLine& line : report.lines) {
    json entry = {
        {"node", line.node_id},
        {"name", line.name},
        {"kind", kind_name(line.kind)},
        {"replayed", line.replayed},
        {"measured_us", line.measured_us ? json(line.measured_us->median) : json(nullptr)},
        {"recorded_us", optional_number(line.recorded_us)}};
    if (line.measured_us) {
      entry["measured_mean_us"] = line.measured_us->mean;
      entry["measured_min_us"] = line.measured_us->min;
      entry["measured_max_us"] = line.measured_us->max;
    }
    if (line.recorded_gpu_us) entry["recorded_gpu_us"] = *line.recorded_gpu_us;
    if (line.kind == OpKind::kComm) entry["bytes"] = line.comm_bytes;
    if (line.flops) {
      entry["flops"] = *line.flops;
      entry["bytes"] = line.bytes;
    }
    if (!line.replayed) entry["reason"] = line.reason;
    ops.push_back(std::move(entry));
  }
  json rates = json::array();
  for (const Rate& rate : report.rates) {
    rates.push_back({{"name", rate.name},
                     {"ops", rate.ops},
                     {"flops", rate.flops},
                     {"bytes", rate.bytes},
                     {"measured_us", rate.us},
                     {"gflops", rate.gflops()}});
  }
  return {{"rank", report.rank},
          {"world", report.world},
          {"trace", report.trace},
          {"schema", report.schema},
          {"iteration", report.iteration},
          {"profile", report.profile.empty() ? json(nullptr) : json(report.profile)},
          {"device", report.device},
          {"libtorch", report.libtorch},
          {"threads", report.threads},
          {"subnormals", report.subnormals_flushed ? "flushed" : "kept"},
          {"backward", report.autograd_passes > 0 ? "autograd engine" : "recorded ops"},
          {"communicator", report.communicator},
          {"warmup", report.warmup},
          {"iterations", report.iterations},
          {"iteration_us", report.iteration_us.median},
          {"iteration_wall_us", spread_json(report.iteration_us)},
          {"iteration_cpu_us", spread_json(report.iteration_cpu_us)},
          {"comm_wait_us", spread_json(report.comm_wait_us)},
          {"communication_ops", report.comms},
          {"original_us", optional_number(report.original_us)},
          {"original_samples_us", report.original_samples_us},
          {"traced_iteration_us", optional_number(report.traced_iteration_us)},
          {"ops", report.ops},
          {"replayed", report.replayed},
          {"coverage_by_count", report.coverage_by_count},
          {"coverage_by_time", optional_number(report.coverage_by_time)},
          {"recorded_replayed_us", report.recorded_replayed_us},
          {"recorded_total_us", report.recorded_total_us},
          {"recorded_gpu", report.recorded_gpu},
          {"profile_nodes_matched", report.profile_nodes_matched},
          {"profile_nodes", report.profile_nodes},
          {"storages", report.storages},
          {"storage_bytes", report.storage_bytes},
          {"skipped", skipped},
          {"rates", rates},
          {"notes", report.notes},
          {"operators", ops}};
}

json job_json(const std::vector<json>& ranks) {
  json job = ranks.empty() ? json::object() : ranks.front();
  job.erase("operators");
  double slowest = 0;
  for (const json& rank : ranks) slowest = std::max(slowest, rank.at("iteration_us").get<double>());
  job["iteration_us"] = slowest;
  job["ranks"] = ranks;
  return job;
}

std::string calibration_table(const RankReport& report) {
  std::string out =
      fmt::format("# orrery replay of {}: measured kernels for orrery calibrate\n", report.trace);
  out += "kind\tname\tm\tn\tk\tbatch\tflops\tbytes\ttime_us\n";
  for (const OpLine& line : report.lines) {
    if (!line.replayed || !line.measured_us || line.measured_us->median <= 0) continue;
    if (line.gemm && line.flops && line.gemm->m > 0 && line.gemm->n > 0 && line.gemm->k > 0) {
      out += fmt::format("gemm\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{:.17g}\n", line.name, line.gemm->m,
                         line.gemm->n, line.gemm->k, line.gemm->batch, *line.flops, line.bytes,
                         line.measured_us->median);
    } else if (line.streamed_bytes) {
      out += fmt::format("memory\t{}\t\t\t\t\t0\t{}\t{:.17g}\n", line.name, *line.streamed_bytes,
                         line.measured_us->median);
    }
  }
  return out;
}

std::string format_text(const RankReport& report, size_t top) {
  std::string out;
  out += fmt::format("{}: PyTorch execution trace, schema {}, {} ops in {} ({} replayed)\n",
                     report.trace, report.schema, format_count(report.ops), report.iteration,
                     format_count(report.replayed));
  out += fmt::format("  replay          {} on {} ({} intra-op thread{}), libtorch {}; {}\n",
                     report.world > 1 ? fmt::format("rank {} of {}", report.rank, report.world)
                                      : std::string("one rank"),
                     report.device, report.threads, report.threads == 1 ? "" : "s", report.libtorch,
                     report.communicator);
  out += fmt::format(
      "  iterations      {} warm-up, {} measured (after a check pass); subnormals {}{}\n",
      report.warmup, report.iterations, report.subnormals_flushed ? "flushed to zero" : "kept",
      report.autograd_passes > 0
          ? fmt::format("; {} backward pass{} by the autograd engine", report.autograd_passes,
                        report.autograd_passes == 1 ? "" : "es")
          : std::string());
  const Spread& wall = report.iteration_us;
  out += fmt::format("  iteration       {} median (min {}, max {}, quartiles {} to {}); CPU {}\n",
                     us_text(wall.median), us_text(wall.min), us_text(wall.max), us_text(wall.p25),
                     us_text(wall.p75), us_text(report.iteration_cpu_us.median));
  if (report.original_us) {
    out += fmt::format("  original        {} median of {} ProfilerStep# in {} (replay {})\n",
                       us_text(*report.original_us), report.original_samples_us.size(),
                       report.profile, signed_percent(wall.median / *report.original_us - 1.0));
  } else if (!report.profile.empty()) {
    out += fmt::format("  original        {} has no ProfilerStep# events\n", report.profile);
  }
  if (!report.profile.empty()) {
    out +=
        fmt::format("  linked          {} of {} nodes of the iteration to profiler events\n",
                    format_count(report.profile_nodes_matched), format_count(report.profile_nodes));
  }
  out += fmt::format("  coverage        {} by count ({} of {})", percent(report.coverage_by_count),
                     format_count(report.replayed), format_count(report.ops));
  if (report.coverage_by_time) {
    out += fmt::format(", {} by recorded {}time ({} of {})", percent(*report.coverage_by_time),
                       report.recorded_gpu ? "GPU or CPU " : "",
                       us_text(report.recorded_replayed_us), us_text(report.recorded_total_us));
  } else {
    out += ", by time: no recorded times (give the profiler trace with --profile)";
  }
  out += "\n";
  if (report.comms > 0) {
    out += fmt::format("  communication   compute waited {} per iteration (median)\n",
                       us_text(report.comm_wait_us.median));
  }
  if (!report.rates.empty()) {
    const Rate& all = report.rates.back();
    std::vector<std::string> parts;
    for (size_t at = 0; at + 1 < report.rates.size(); ++at) {
      parts.push_back(
          fmt::format("{} {:.2f}", report.rates[at].name.substr(6), report.rates[at].gflops()));
    }
    out += fmt::format(
        "  achieved        {:.2f} GFLOP/s over {} matrix and convolution ops ({:.3f} "
        "GFLOP in {}; {})\n",
        all.gflops(), all.ops, static_cast<double>(all.flops) / 1e9, us_text(all.us),
        fmt::join(parts, ", "));
  }
  json lines = json::array();
  for (const OpLine& line : report.lines) {
    lines.push_back({{"name", line.name},
                     {"replayed", line.replayed},
                     {"measured_us", line.measured_us ? line.measured_us->median : 0.0},
                     {"recorded_us", optional_number(line.recorded_us)}});
  }
  const std::vector<NameTotal> totals = totals_by_name(lines);
  out += "  where the time goes (replayed median, recorded, per operator name)\n";
  for (size_t at = 0; at < totals.size() && at < top; ++at) {
    const NameTotal& total = totals[at];
    out += fmt::format("    {:<44} {:>5} x {:>11} {:>11}{}\n", total.name.substr(0, 44),
                       total.count, us_text(total.measured_us),
                       total.any_recorded ? us_text(total.recorded_us) : "-",
                       total.skipped > 0 ? fmt::format("  ({} skipped)", total.skipped) : "");
  }
  std::vector<const OpLine*> differing;
  for (const OpLine& line : report.lines) {
    if (line.replayed && line.recorded_us && line.kind == OpKind::kCompute)
      differing.push_back(&line);
  }
  std::stable_sort(differing.begin(), differing.end(), [](const OpLine* a, const OpLine* b) {
    return std::fabs(a->measured_us->median - *a->recorded_us) >
           std::fabs(b->measured_us->median - *b->recorded_us);
  });
  if (!differing.empty()) {
    out += "  largest differences from the recording (replayed median vs recorded)\n";
    for (size_t at = 0; at < differing.size() && at < top; ++at) {
      const OpLine& line = *differing[at];
      out += fmt::format(
          "    node {:<7} {:<36} {:>11} {:>11}  {}\n", line.node_id, line.name.substr(0, 36),
          us_text(line.measured_us->median), us_text(*line.recorded_us),
          *line.recorded_us > 0 ? signed_percent(line.measured_us->median / *line.recorded_us - 1.0)
                                : "");
    }
  }
  if (!report.skipped.empty()) {
    out += fmt::format("  skipped         {} ops\n", format_count(report.ops - report.replayed));
    for (const SkippedGroup& group : report.skipped) {
      out += fmt::format("    {} x {} (node {}): {}\n", group.count, group.name,
                         fmt::join(group.nodes, ", "), group.reason);
    }
  }
  if (!report.notes.empty()) {
    out += "  notes\n";
    for (const std::string& note : report.notes) out += fmt::format("    {}\n", note);
  }
  return out;
}

std::string format_ranks_text(const std::vector<json>& ranks) {
  std::string out = "  ranks\n";
  for (const json& rank : ranks) {
    out += fmt::format(
        "    rank {:<4} iteration {:>11}  original {:>11}  coverage {} by count{}\n",
        rank.at("rank").get<uint32_t>(), us_text(rank.at("iteration_us").get<double>()),
        rank.at("original_us").is_null() ? std::string("-")
                                         : us_text(rank.at("original_us").get<double>()),
        percent(rank.at("coverage_by_count").get<double>()),
        rank.at("coverage_by_time").is_null()
            ? std::string()
            : ", " + percent(rank.at("coverage_by_time").get<double>()) + " by time");
  }
  return out;
}

std::string format_html(const json& job, size_t top) {
  const json& rank0 = job.at("ranks").at(0);
  std::string out;
  out += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  out +=
      "<title>orrery replay: " + escape_markup(rank0.at("trace").get<std::string>()) + "</title>\n";
  out +=
      "<style>body{font:14px sans-serif;margin:2em;max-width:70em}table{border-collapse:"
      "collapse;margin:1em 0}td,th{border-bottom:1px solid #ddd;padding:3px 8px;text-align:"
      "right}td:first-child,th:first-child{text-align:left}.bad{color:#a00}.bar{fill:#4a7ab5}"
      ".rec{fill:#c9a34a}</style></head><body>\n";
  out += "<h1>orrery replay</h1>\n<table>\n";
  const auto row = [&out](const std::string& key, const std::string& value) {
    out += "<tr><th>" + escape_markup(key) + "</th><td>" + escape_markup(value) + "</td></tr>\n";
  };
  row("trace", rank0.at("trace").get<std::string>() + " (schema " +
                   rank0.at("schema").get<std::string>() + ", " +
                   rank0.at("iteration").get<std::string>() + ")");
  row("replay", fmt::format("{} rank{} on {}, {} thread(s), libtorch {}; {}",
                            rank0.at("world").get<uint32_t>(),
                            rank0.at("world").get<uint32_t>() == 1 ? "" : "s",
                            rank0.at("device").get<std::string>(), rank0.at("threads").get<int>(),
                            rank0.at("libtorch").get<std::string>(),
                            rank0.at("communicator").get<std::string>()));
  row("iterations", fmt::format("{} warm-up, {} measured", rank0.at("warmup").get<int>(),
                                rank0.at("iterations").get<int>()));
  row("replayed iteration",
      us_text(job.at("iteration_us").get<double>()) + " (median; slowest rank)");
  if (!job.at("original_us").is_null()) {
    row("original iteration",
        us_text(job.at("original_us").get<double>()) + " (median of the profiler's ProfilerStep#)");
  }
  for (const json& rank : job.at("ranks")) {
    row(fmt::format("rank {} coverage", rank.at("rank").get<uint32_t>()),
        fmt::format("{} by count{}", percent(rank.at("coverage_by_count").get<double>()),
                    rank.at("coverage_by_time").is_null()
                        ? std::string()
                        : ", " + percent(rank.at("coverage_by_time").get<double>()) + " by time"));
  }
  out += "</table>\n";

  // Where the time goes: bars per operator name, replayed and recorded.
  const std::vector<NameTotal> totals = totals_by_name(rank0.at("operators"));
  const size_t shown = std::min(top, totals.size());
  double scale = 0;
  for (size_t at = 0; at < shown; ++at)
    scale = std::max({scale, totals[at].measured_us, totals[at].recorded_us});
  out +=
      "<h2>Where the time goes (rank 0)</h2>\n<p>Per operator name: the replayed medians "
      "summed (blue) and the recorded times summed (gold).</p>\n";
  const int bar_height = 9;
  const int row_height = 2 * bar_height + 6;
  out += fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"{}\">\n",
                     static_cast<int>(shown) * row_height + 10);
  for (size_t at = 0; at < shown; ++at) {
    const NameTotal& total = totals[at];
    const int y = static_cast<int>(at) * row_height + 5;
    const double width_measured = scale > 0 ? 520.0 * total.measured_us / scale : 0;
    const double width_recorded = scale > 0 ? 520.0 * total.recorded_us / scale : 0;
    out += fmt::format("<text x=\"0\" y=\"{}\" font-size=\"12\">{}</text>\n", y + bar_height + 4,
                       escape_markup(total.name.substr(0, 40)));
    out += fmt::format(
        "<rect class=\"bar\" x=\"300\" y=\"{}\" width=\"{:.1f}\" height=\"{}\"/>"
        "<text x=\"{:.1f}\" y=\"{}\" font-size=\"10\">{}</text>\n",
        y, width_measured, bar_height, 304 + width_measured, y + bar_height - 1,
        escape_markup(us_text(total.measured_us)));
    if (total.any_recorded) {
      out += fmt::format(
          "<rect class=\"rec\" x=\"300\" y=\"{}\" width=\"{:.1f}\" height=\"{}\"/>"
          "<text x=\"{:.1f}\" y=\"{}\" font-size=\"10\">{}</text>\n",
          y + bar_height + 1, width_recorded, bar_height, 304 + width_recorded, y + 2 * bar_height,
          escape_markup(us_text(total.recorded_us)));
    }
  }
  out += "</svg>\n";

  // The largest differences.
  std::vector<const json*> differing;
  for (const json& line : rank0.at("operators")) {
    if (line.at("replayed").get<bool>() && !line.at("recorded_us").is_null() &&
        line.at("kind") == "compute")
      differing.push_back(&line);
  }
  const auto gap = [](const json* line) {
    return std::fabs(line->at("measured_us").get<double>() - line->at("recorded_us").get<double>());
  };
  std::stable_sort(differing.begin(), differing.end(),
                   [&gap](const json* a, const json* b) { return gap(a) > gap(b); });
  if (!differing.empty()) {
    out +=
        "<h2>Largest differences from the recording</h2>\n<table><tr><th>operator</th>"
        "<th>node</th><th>replayed</th><th>recorded</th><th>difference</th></tr>\n";
    for (size_t at = 0; at < differing.size() && at < top; ++at) {
      const json& line = *differing[at];
      const double measured = line.at("measured_us").get<double>();
      const double recorded = line.at("recorded_us").get<double>();
      out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                         escape_markup(line.at("name").get<std::string>()),
                         line.at("node").get<uint64_t>(), escape_markup(us_text(measured)),
                         escape_markup(us_text(recorded)),
                         recorded > 0 ? signed_percent(measured / recorded - 1.0) : "");
    }
    out += "</table>\n";
  }
  out += "<h2>Skipped operators</h2>\n";
  if (rank0.at("skipped").empty()) {
    out += "<p>None: every operator was replayed.</p>\n";
  } else {
    out += "<table><tr><th>operator</th><th>count</th><th>reason</th></tr>\n";
    for (const json& group : rank0.at("skipped")) {
      out += fmt::format(
          "<tr><td>{}</td><td>{}</td><td class=\"bad\" style=\"text-align:left\">"
          "{}</td></tr>\n",
          escape_markup(group.at("name").get<std::string>()), group.at("count").get<uint64_t>(),
          escape_markup(group.at("reason").get<std::string>()));
    }
    out += "</table>\n";
  }
  if (!rank0.at("notes").empty()) {
    out += "<h2>Notes</h2>\n<ul>\n";
    for (const json& note : rank0.at("notes"))
      out += "<li>" + escape_markup(note.get<std::string>()) + "</li>\n";
    out += "</ul>\n";
  }
  out += "</body></html>\n";
  return out;
}

}  // namespace orrery::replay
