// `orrery run`: simulate a workload on a system and network, from ASTRA-sim's input files.
//
// Accepts ASTRA-sim's flags unchanged (--workload-configuration=... and so on) and short forms of
// its own. Prints one line per rank in ASTRA-sim's form, then a summary; --output writes the same
// and more as JSON.
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/units.h"
#include "sim/simulation.h"
#include "system/collective.h"

namespace orrery::cli {

namespace {

struct RunOptions {
  sim::RunConfig config;
  std::string timing = "astra-sim";
  std::string dependencies = "both";
  std::string output;
  std::string logging_folder;
  uint32_t queues_per_dim = 1;
  bool strict = false;
  bool quiet = false;
};

std::string ns_text(SimTime time) {
  return format_count(static_cast<uint64_t>(time.ns_truncated()));
}

nlohmann::json result_to_json(const sim::RunResult& result, const sim::RunConfig& config,
                              double wall_seconds) {
  nlohmann::json out;
  out["workload"] = config.workload;
  out["network"] = config.network;
  out["system"] = config.system;
  out["backend"] = result.backend;
  out["ranks"] = nlohmann::json::array();
  for (const workload::RankResult& rank : result.rank_results) {
    out["ranks"].push_back({{"rank", rank.rank},
                            {"finish_ns", rank.finish.ns_truncated()},
                            {"exposed_comm_ns", rank.astra_exposed_comm().ns_truncated()},
                            {"compute_ns", rank.gpu_compute.ns_truncated()},
                            {"cpu_ns", rank.cpu_compute.ns_truncated()},
                            {"memory_ns", rank.memory.ns_truncated()},
                            {"comm_active_ns", rank.comm_active.ns_truncated()},
                            {"comm_not_overlapped_ns", rank.comm_exposed.ns_truncated()},
                            {"nodes", rank.nodes},
                            {"collectives", rank.collectives},
                            {"sends", rank.sends},
                            {"recvs", rank.recvs}});
  }
  out["collectives"] = nlohmann::json::array();
  for (const sys::CollectiveRecord& record : result.collectives) {
    const double seconds = (record.last_finish - record.first_issue).seconds();
    const double algbw = seconds > 0 ? static_cast<double>(record.bytes) / seconds / 1e9 : 0.0;
    out["collectives"].push_back(
        {{"type", sys::collective_name(record.type)},
         {"group", result.collective_group_names[record.group]},
         {"sequence", record.sequence},
         {"bytes", record.bytes},
         {"ranks", record.ranks},
         {"start_ns", record.first_issue.ns_truncated()},
         {"end_ns", record.last_finish.ns_truncated()},
         {"algbw_gbps", algbw},
         {"busbw_gbps", algbw * sys::bus_bandwidth_factor(record.type, record.ranks)},
         {"first_node", record.first_node}});
  }
  out["links"] = nlohmann::json::array();
  for (const net::LinkStats& link : result.links) {
    out["links"].push_back({{"src", link.src},
                            {"dst", link.dst},
                            {"dimension", link.dimension},
                            {"bytes", link.bytes},
                            {"busy_ns", link.busy.ns_truncated()},
                            {"messages", link.messages},
                            {"peak_queue", link.peak_queue}});
  }
  out["summary"] = {{"ranks", result.ranks},
                    {"simulated_ns", result.end.ns_truncated()},
                    {"events", result.events},
                    {"messages", result.messages},
                    {"wall_seconds", wall_seconds}};
  return out;
}

int run(RunOptions& options) {
  if (options.queues_per_dim != 1) {
    return report_error(Error::make(
        ErrorKind::kInvalidArgument,
        "--num-queues-per-dim {}: only 1 queue per dimension is modelled", options.queues_per_dim));
  }
  options.config.mode =
      options.strict ? chakra::ValidationMode::kStrict : chakra::ValidationMode::kLenient;
  options.config.rounding =
      options.timing == "exact" ? net::TimeRounding::kExact : net::TimeRounding::kAstraSim;
  options.config.dependencies = options.dependencies == "data" ? chakra::DependencyKinds::kData
                                : options.dependencies == "control"
                                    ? chakra::DependencyKinds::kControl
                                    : chakra::DependencyKinds::kBoth;
  const auto started = std::chrono::steady_clock::now();
  Expected<sim::RunResult> result = sim::run_simulation(
      options.config,
      [](const std::string& warning) { fmt::print(stderr, "orrery: warning: {}\n", warning); });
  if (!result) return report_error(result.error());
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  if (!options.quiet) {
    std::string lines;
    for (const workload::RankResult& rank : result->rank_results) {
      lines +=
          fmt::format("sys[{}] finished, {} cycles, exposed communication {} cycles.\n", rank.rank,
                      rank.finish.ns_truncated(), rank.astra_exposed_comm().ns_truncated());
    }
    std::cout << lines;
  }
  // The summary: one screen whatever the rank count.
  SimTime compute;
  SimTime comm;
  SimTime exposed;
  SimTime not_overlapped;
  workload::RankResult slowest;
  for (const workload::RankResult& rank : result->rank_results) {
    compute += rank.gpu_compute;
    comm += rank.comm_active;
    exposed += rank.astra_exposed_comm();
    not_overlapped += rank.comm_exposed;
    if (rank.finish > slowest.finish) slowest = rank;
  }
  const auto ranks = static_cast<int64_t>(std::max<uint32_t>(result->ranks, 1));
  auto mean = [&](SimTime total) { return SimTime::from_ps(total.ps() / ranks); };
  std::cout << fmt::format(
      "\norrery: {} ranks on {} ({} backend), workload {}\n"
      "  simulated time          {} ns  (slowest rank {})\n"
      "  compute per rank        {} ns mean\n"
      "  communication per rank  {} ns mean in flight, {} ns not overlapped with compute\n"
      "  exposed communication   {} ns mean (finish minus compute, as ASTRA-sim reports)\n"
      "  {} collectives, {} messages, {} events in {:.3f} s\n",
      result->ranks, options.config.network, result->backend, options.config.workload,
      ns_text(result->end), slowest.rank, ns_text(mean(compute)), ns_text(mean(comm)),
      ns_text(mean(not_overlapped)), ns_text(mean(exposed)),
      format_count(result->collectives.size()), format_count(result->messages),
      format_count(result->events), wall);

  if (!options.output.empty()) {
    std::ofstream out(options.output);
    out << result_to_json(*result, options.config, wall).dump(1) << "\n";
    if (!out) return report_error(Error::make(ErrorKind::kIo, "{}: cannot write", options.output));
  }
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* cmd =
      app.add_subcommand("run",
                         "Simulate a workload (Chakra traces, one per rank) on a system and "
                         "network. Takes ASTRA-sim's "
                         "flags unchanged\n  e.g. orrery run --workload-configuration=workload "
                         "--system-configuration=sys.json "
                         "--network-configuration=net.yml");
  sim::RunConfig& config = options->config;
  cmd->add_option("-w,--workload-configuration,--workload", config.workload,
                  "trace prefix P of rank files P.0.et, P.1.et, ...")
      ->required();
  cmd->add_option("-s,--system-configuration,--system", config.system, "ASTRA-sim system JSON")
      ->required();
  cmd->add_option("-n,--network-configuration,--network", config.network, "ASTRA-sim network YAML")
      ->required();
  cmd->add_option("-m,--remote-memory-configuration,--memory", config.remote_memory,
                  "ASTRA-sim remote memory JSON (default: no memory expansion)");
  cmd->add_option("-g,--comm-group-configuration,--comm-groups", config.comm_groups,
                  "communicator groups JSON {\"1\": [0, 1], ...} (pg_name -> ranks)");
  cmd->add_option("-b,--network-backend,--backend", config.backend,
                  "analytical or congestion-aware")
      ->check(CLI::IsMember({"analytical", "congestion-aware"}))
      ->default_str("analytical");
  cmd->add_option("--compute-scale", config.compute_scale,
                  "multiply compute times (ASTRA-sim 2.x ignores it)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--comm-scale", config.comm_scale,
                  "multiply communication sizes (ASTRA-sim 2.x ignores it)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--injection-scale", config.injection_scale,
                  "multiply the endpoint delay when the system file sets one (as ASTRA-sim)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--num-queues-per-dim", options->queues_per_dim,
                  "ASTRA-sim's queues per dimension (1)");
  cmd->add_option("--logging-folder", options->logging_folder,
                  "accepted for ASTRA-sim compatibility; unused");
  cmd->add_option(
         "--timing", options->timing,
         "astra-sim: whole nanoseconds truncated where ASTRA-sim truncates (reproduces its "
         "figures); exact: picoseconds")
      ->check(CLI::IsMember({"astra-sim", "exact"}))
      ->default_str("astra-sim");
  cmd->add_option("--dependencies", options->dependencies,
                  "which dependencies order nodes: both (default), data, control")
      ->check(CLI::IsMember({"both", "data", "control"}));
  cmd->add_flag("--strict", options->strict, "refuse traces with any validation finding");
  cmd->add_flag("-q,--quiet", options->quiet, "no per-rank lines, only the summary");
  cmd->add_option("-o,--output", options->output,
                  "write the results as JSON: ranks, collectives, links, summary");
  cmd->add_option("-j,--threads", config.threads, "threads for loading traces (0: one per core)");
  cmd->callback([options, &exit_code] { exit_code = run(*options); });
}

}  // namespace orrery::cli
