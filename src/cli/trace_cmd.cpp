// `orrery trace`: read, check, inspect and convert Chakra execution traces.
//
// Every verb takes one .et file or a <prefix> of rank files (<prefix>.<r>.et). Ranks are processed
// in parallel, one graph per rank at a time, and results are merged in rank order so output never
// depends on thread timing.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "chakra/dot_writer.h"
#include "chakra/json_codec.h"
#include "chakra/trace_file.h"
#include "chakra/trace_set.h"
#include "chakra/trace_stats.h"
#include "chakra/validation.h"
#include "cli/commands.h"
#include "cli/validators.h"
#include "core/parallel.h"
#include "core/units.h"
#include "gen/rescale.h"

namespace orrery::cli {

namespace {

using chakra::TraceGraph;
using chakra::ValidationMode;
using chakra::ValidationReport;

struct RankResult {
  std::optional<Error> error;
  uint64_t nodes = 0;
  ValidationReport report;
  chakra::TraceStats stats;
};

// Loads and validates every rank (in parallel); `per_rank` adds its own work on the loaded graph.
std::vector<RankResult> for_each_rank(
    const chakra::TraceFiles& files,
    const std::function<void(const TraceGraph&, RankResult&)>& per_rank) {
  std::vector<RankResult> results(files.paths.size());
  parallel_for(files.paths.size(), 0, [&](size_t rank) {
    Expected<TraceGraph> graph = chakra::load_trace(files.paths[rank]);
    if (!graph) {
      results[rank].error = graph.error();
      return;
    }
    results[rank].nodes = graph->size();
    results[rank].report = chakra::validate_trace(*graph);
    if (per_rank) per_rank(*graph, results[rank]);
  });
  return results;
}

// Prints the first load error, if any, and returns its exit code (0 when every rank loaded).
int report_load_errors(const std::vector<RankResult>& results) {
  for (const RankResult& result : results) {
    if (result.error) return report_error(*result.error);
  }
  return 0;
}

std::string mode_name(ValidationMode mode) {
  return mode == ValidationMode::kStrict ? "strict" : "lenient";
}

// ---- inspect ------------------------------------------------------------------------------------

struct InspectOptions {
  std::string target;
  bool json = false;
};

int run_inspect(const InspectOptions& options) {
  Expected<chakra::TraceFiles> files = chakra::resolve_trace_files(options.target);
  if (!files) return report_error(files.error());
  const std::vector<RankResult> results =
      for_each_rank(*files, [](const TraceGraph& graph, RankResult& result) {
        result.stats = chakra::compute_trace_stats(graph);
      });
  if (int code = report_load_errors(results); code != 0) return code;

  chakra::TraceStats total;
  size_t repairable = 0;
  size_t fatal = 0;
  for (const RankResult& result : results) {
    total.merge(result.stats);
    repairable += result.report.repairable_count();
    fatal += result.report.fatal_count();
  }
  if (options.json) {
    nlohmann::json out = chakra::trace_stats_to_json(total);
    out["source"] = options.target;
    out["findings"] = {{"repairable", repairable}, {"fatal", fatal}};
    if (files->from_prefix) {
      out["per_rank"] = nlohmann::json::array();
      for (const RankResult& result : results) {
        out["per_rank"].push_back(chakra::trace_stats_to_json(result.stats));
      }
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "{}{}\n", options.target,
      files->from_prefix ? fmt::format(" ({} rank files)", results.size()) : "");
  std::cout << chakra::format_trace_stats(total);
  if (repairable + fatal > 0) {
    std::cout << fmt::format("  {:<22}{} repairable, {} fatal (details: orrery trace validate)\n",
                             "findings", format_count(repairable), format_count(fatal));
  }
  return 0;
}

// ---- validate -----------------------------------------------------------------------------------

struct ValidateOptions {
  std::string target;
  bool strict = false;
  bool json = false;
  bool all = false;
  size_t examples = 3;
};

int run_validate(const ValidateOptions& options) {
  Expected<chakra::TraceFiles> files = chakra::resolve_trace_files(options.target);
  if (!files) return report_error(files.error());
  const ValidationMode mode = options.strict ? ValidationMode::kStrict : ValidationMode::kLenient;
  const std::vector<RankResult> results = for_each_rank(*files, nullptr);
  if (int code = report_load_errors(results); code != 0) return code;

  bool all_pass = true;
  for (const RankResult& result : results) all_pass = all_pass && result.report.passes(mode);

  if (options.json) {
    nlohmann::json out;
    out["mode"] = mode_name(mode);
    out["passes"] = all_pass;
    out["files"] = nlohmann::json::array();
    for (size_t rank = 0; rank < results.size(); ++rank) {
      const ValidationReport& report = results[rank].report;
      nlohmann::json file = {{"path", files->paths[rank]},
                             {"nodes", results[rank].nodes},
                             {"passes_lenient", report.passes(ValidationMode::kLenient)},
                             {"passes_strict", report.passes(ValidationMode::kStrict)}};
      file["counts"] = nlohmann::json::object();
      for (size_t check = 0; check < chakra::kCheckCount; ++check) {
        const auto which = static_cast<chakra::Check>(check);
        if (report.count(which) > 0)
          file["counts"][std::string(chakra::check_name(which))] = report.count(which);
      }
      file["diagnostics"] = nlohmann::json::array();
      for (const chakra::Diagnostic& diagnostic : report.diagnostics()) {
        file["diagnostics"].push_back({{"check", chakra::check_name(diagnostic.check)},
                                       {"node", diagnostic.node_id},
                                       {"repairable", chakra::is_repairable(diagnostic.check)},
                                       {"message", diagnostic.message}});
      }
      out["files"].push_back(std::move(file));
    }
    std::cout << out.dump(2) << "\n";
    return all_pass ? 0 : 1;
  }

  for (size_t rank = 0; rank < results.size(); ++rank) {
    const ValidationReport& report = results[rank].report;
    const bool passes = report.passes(mode);
    std::string verdict;
    if (report.diagnostics().empty()) {
      verdict = "valid";
    } else if (passes) {
      verdict =
          fmt::format("runs in lenient mode after repairs ({} findings); strict mode rejects it",
                      format_count(report.diagnostics().size()));
    } else {
      verdict =
          fmt::format("invalid in {} mode ({} fatal, {} repairable)", mode_name(mode),
                      format_count(report.fatal_count()), format_count(report.repairable_count()));
    }
    std::cout << fmt::format("{}: {} nodes: {}\n", files->paths[rank],
                             format_count(results[rank].nodes), verdict);
    if (options.all) {
      for (const chakra::Diagnostic& diagnostic : report.diagnostics()) {
        std::cout << fmt::format("  {}: {}\n",
                                 chakra::is_repairable(diagnostic.check) ? "warning" : "error",
                                 diagnostic.message);
      }
    } else {
      for (const std::string& line : report.summary_lines(options.examples))
        std::cout << "  " << line << "\n";
    }
  }
  if (results.size() > 1) {
    std::cout << fmt::format("{} rank files: {}\n", results.size(),
                             all_pass ? fmt::format("all pass in {} mode", mode_name(mode))
                                      : fmt::format("some fail in {} mode", mode_name(mode)));
  }
  return all_pass ? 0 : 1;
}

// ---- to-json / from-json
// -------------------------------------------------------------------------

struct ConvertOptions {
  std::string target;
  std::string output;
};

int run_to_json(const ConvertOptions& options) {
  Expected<chakra::TraceFiles> files = chakra::resolve_trace_files(options.target);
  if (!files) return report_error(files.error());
  if (!files->from_prefix) {
    if (options.output.empty() || options.output == "-") {
      Status status = chakra::trace_to_json(files->paths.front(), std::cout);
      return status ? 0 : report_error(status.error());
    }
    std::ofstream out(options.output, std::ios::binary);
    if (!out) return report_error(Error::make(ErrorKind::kIo, "{}: cannot create", options.output));
    Status status = chakra::trace_to_json(files->paths.front(), out);
    // A short document is still in the stream's buffer: a full disk shows only at the flush.
    if (status && out.flush()) return 0;
    if (!out) return report_error(Error::make(ErrorKind::kIo, "{}: cannot write", options.output));
    return report_error(status.error());
  }
  if (options.output.empty()) {
    return report_error(Error::make(ErrorKind::kInvalidArgument,
                                    "{} names {} rank files: give an output prefix with -o (writes "
                                    "<prefix>.<rank>.json)",
                                    options.target, files->paths.size()));
  }
  // The prefix's folder is made, as `gen` makes its output folder (json/workload.<r>.json).
  if (const std::filesystem::path folder = std::filesystem::path(options.output).parent_path();
      !folder.empty()) {
    std::error_code ignored;
    std::filesystem::create_directories(folder, ignored);
  }
  std::vector<std::optional<Error>> errors(files->paths.size());
  parallel_for(files->paths.size(), 0, [&](size_t rank) {
    const std::string path = fmt::format("{}.{}.json", options.output, rank);
    std::ofstream out(path, std::ios::binary);
    if (!out) {
      errors[rank] = Error::make(ErrorKind::kIo, "{}: cannot create", path);
      return;
    }
    Status status = chakra::trace_to_json(files->paths[rank], out);
    if (status && out.flush()) return;
    errors[rank] = !out ? Error::make(ErrorKind::kIo, "{}: cannot write", path) : status.error();
  });
  for (const auto& error : errors) {
    if (error) return report_error(*error);
  }
  return 0;
}

int run_from_json(const ConvertOptions& options) {
  Expected<chakra::TraceFiles> files =
      chakra::resolve_rank_files(options.target, {".json", ".json.gz"});
  if (!files) return report_error(files.error());
  if (!files->from_prefix) {
    Status status = chakra::json_to_trace(files->paths.front(), options.output);
    return status ? 0 : report_error(status.error());
  }
  std::vector<std::optional<Error>> errors(files->paths.size());
  parallel_for(files->paths.size(), 0, [&](size_t rank) {
    Status status =
        chakra::json_to_trace(files->paths[rank], chakra::rank_trace_path(options.output, rank));
    if (!status) errors[rank] = status.error();
  });
  for (const auto& error : errors) {
    if (error) return report_error(*error);
  }
  return 0;
}

// ---- dot ----------------------------------------------------------------------------------------

int run_dot(const ConvertOptions& options) {
  Expected<chakra::TraceFiles> files = chakra::resolve_trace_files(options.target);
  if (!files) return report_error(files.error());
  std::vector<TraceGraph> graphs;
  graphs.reserve(files->paths.size());
  for (const std::string& path : files->paths) {
    Expected<TraceGraph> graph = chakra::load_trace(path);
    if (!graph) return report_error(graph.error());
    graphs.push_back(std::move(*graph));
  }
  std::vector<const TraceGraph*> views;
  for (const TraceGraph& graph : graphs) views.push_back(&graph);
  if (options.output.empty() || options.output == "-") {
    chakra::write_dot(views, std::cout);
    return 0;
  }
  std::ofstream out(options.output);
  if (!out) return report_error(Error::make(ErrorKind::kIo, "{}: cannot create", options.output));
  chakra::write_dot(views, out);
  out.close();  // a full disk may show only at the final flush
  return out ? 0 : report_error(Error::make(ErrorKind::kIo, "{}: write failed", options.output));
}

// ---- orrery trace rescale
// ------------------------------------------------------------------------

struct RescaleOptions {
  std::string target;
  std::string groups;
  uint32_t from_dp = 0;
  uint32_t dp = 0;
  uint32_t stride = 0;
  std::string batch = "per-rank";
  bool gzip = false;
  size_t threads = 0;
  std::string output;
};

int run_rescale(const RescaleOptions& options) {
  gen::RescaleSpec spec;
  spec.workload = options.target;
  spec.comm_groups = options.groups;
  spec.from_dp = options.from_dp;
  spec.to_dp = options.dp;
  spec.stride = options.stride;
  Expected<gen::BatchScaling> batch = gen::parse_batch_scaling(options.batch);
  if (!batch) return report_error(batch.error().with_context("--batch"));
  spec.batch = *batch;
  spec.output = options.output;
  spec.gzip = options.gzip;
  spec.threads = options.threads;
  Expected<gen::RescaleResult> result = gen::rescale_traces(spec);
  if (!result) return report_error(result.error());
  fmt::print(
      "data parallelism {} -> {} (stride {}, {} batch): {} ranks -> {} ranks; {} replica "
      "group{} copied, {} data group{} resized\n",
      options.from_dp, options.dp, result->stride,
      spec.batch == gen::BatchScaling::kGlobal ? "fixed global" : "fixed per-rank",
      format_count(result->old_ranks), format_count(result->new_ranks), result->replica_groups,
      result->replica_groups == 1 ? "" : "s", result->data_groups,
      result->data_groups == 1 ? "" : "s");
  fmt::print("wrote {} rank files: {} .. {} ({} nodes)\n", format_count(result->new_ranks),
             result->rank_files.front(), result->rank_files.back(), format_count(result->nodes));
  fmt::print("wrote {}: {} communicator group{}\n", result->group_file,
             format_count(result->new_groups), result->new_groups == 1 ? "" : "s");
  // A larger set left under the same prefix would be read with this one.
  std::error_code ec;
  for (const char* suffix : {"", ".gz"}) {
    const std::string next = chakra::rank_trace_path(options.output, result->new_ranks) + suffix;
    if (std::filesystem::exists(next, ec)) {
      fmt::print(stderr,
                 "orrery: warning: {} is left from an earlier run; tools reading the prefix take "
                 "it as rank {}: remove it\n",
                 next, result->new_ranks);
    }
  }
  return 0;
}

constexpr const char* kTargetHelp = "a .et file, or a prefix P of rank files P.0.et, P.1.et, ...";

}  // namespace

void add_trace_command(CLI::App& app, int& exit_code) {
  CLI::App* trace =
      app.add_subcommand("trace", "Read, validate, inspect and convert Chakra execution traces");
  trace->require_subcommand(1);

  {
    auto options = std::make_shared<InspectOptions>();
    CLI::App* cmd = trace->add_subcommand(
        "inspect",
        "Summarize a trace: nodes by type, collectives with bytes, FLOPs, tensor bytes, dependency "
        "depth and width\n  e.g. orrery trace inspect workload (workload.0.et, workload.1.et, "
        "...)");
    cmd->add_option("trace", options->target, kTargetHelp)->required();
    cmd->add_flag("--json", options->json,
                  "print one JSON object (totals over ranks, and per_rank)");
    cmd->callback([options, &exit_code] { exit_code = run_inspect(*options); });
  }
  {
    auto options = std::make_shared<ValidateOptions>();
    CLI::App* cmd = trace->add_subcommand(
        "validate",
        "Check a trace: duplicate ids, missing parents, self-dependencies, cycles, required "
        "attributes, unknown enums. Exit 0 when it can run in the chosen mode");
    cmd->add_option("trace", options->target, kTargetHelp)->required();
    cmd->add_flag("--strict", options->strict,
                  "fail on any finding (default: lenient, which repairs what simulation survives)");
    cmd->add_flag("--json", options->json, "print every diagnostic as JSON");
    cmd->add_flag("--all", options->all, "list every diagnostic, not a summary");
    cmd->add_option("--examples", options->examples, "examples shown per kind of finding")
        ->default_val(3);
    cmd->callback([options, &exit_code] { exit_code = run_validate(*options); });
  }
  {
    auto options = std::make_shared<ConvertOptions>();
    CLI::App* cmd = trace->add_subcommand(
        "to-json", "Write a trace as one lossless JSON document (format chakra-et-json/1)");
    cmd->add_option("trace", options->target, kTargetHelp)->required();
    cmd->add_option("-o,--output", options->output,
                    "output file (default: standard output); for a prefix, an output prefix "
                    "(writes <output>.<rank>.json)");
    cmd->callback([options, &exit_code] { exit_code = run_to_json(*options); });
  }
  {
    auto options = std::make_shared<ConvertOptions>();
    CLI::App* cmd = trace->add_subcommand(
        "from-json", "Write a .et trace from a JSON document made by to-json (gzip for .gz names)");
    cmd->add_option("json", options->target,
                    "a .json file, or a prefix P of rank files P.0.json, P.1.json, ...")
        ->required();
    cmd->add_option("-o,--output", options->output,
                    "output .et file; for a prefix, an output prefix (writes <output>.<rank>.et)")
        ->required();
    cmd->callback([options, &exit_code] { exit_code = run_from_json(*options); });
  }
  {
    auto options = std::make_shared<ConvertOptions>();
    CLI::App* cmd = trace->add_subcommand(
        "dot", "Draw a trace as a Graphviz graph: data edges solid, control edges dashed");
    cmd->add_option("trace", options->target, kTargetHelp)->required();
    cmd->add_option("-o,--output", options->output, "output .dot file (default: standard output)");
    cmd->callback([options, &exit_code] { exit_code = run_dot(*options); });
  }
  {
    auto options = std::make_shared<RescaleOptions>();
    CLI::App* cmd = trace->add_subcommand(
        "rescale",
        "Change the data-parallel degree of a trace set: replicate ranks, resize data-parallel "
        "collectives and rewrite the communicator groups\n  e.g. orrery trace rescale w -g w.json "
        "--from-dp 8 --dp 1024 -o big/w");
    cmd->add_option("trace", options->target, "a prefix P of rank files P.0.et, P.1.et, ...")
        ->required();
    // --comm-groups as `orrery run` spells it; --comm-group kept for the scripts that use it.
    cmd->add_option("-g,--comm-groups,--comm-group", options->groups,
                    "communicator-group file of the input (pg_name -> ranks)");
    cmd->add_option("--from-dp", options->from_dp, "Data-parallel degree of the input")->required();
    cmd->add_option("--dp", options->dp, "Data-parallel degree to write")->required();
    cmd->add_option("--dp-stride", options->stride,
                    "Rank distance between data-parallel replicas (default: found from the "
                    "groups; tensor x context ranks in Megatron-LM's order)");
    cmd->add_option("--batch", options->batch,
                    "per-rank (default: each replica keeps its samples, exact) or global (the "
                    "global batch stays: per-replica work scales by from-dp / dp, linear "
                    "approximation)");
    cmd->add_flag("--gzip", options->gzip, "Write .et.gz rank files");
    cmd->add_option("--threads", options->threads, "Threads writing rank files (0: one per core)")
        ->check(thread_count());
    cmd->add_option("-o,--output", options->output,
                    "output prefix: <output>.<rank>.et and the groups <output>.json")
        ->required();
    cmd->callback([options, &exit_code] { exit_code = run_rescale(*options); });
  }
}

}  // namespace orrery::cli
