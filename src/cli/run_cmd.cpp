// `orrery run`: simulate a workload on a system and network, from ASTRA-sim's input files.
//
// Accepts ASTRA-sim's flags unchanged (--workload-configuration=... and so on) and short forms of
// its own. Prints one line per rank in ASTRA-sim's form, then a summary; --output writes the same
// and more as JSON.
#include <chrono>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <optional>

#include "cli/commands.h"
#include "cli/validators.h"
#include "core/rank_set.h"
#include "core/text_file.h"
#include "core/units.h"
#include "hardware/preset.h"
#include "network/backend_registry.h"
#include "report/run_report.h"
#include "report/timeline.h"
#include "sim/simulation.h"
#include "system/collective.h"
#include "system/collective_engine.h"
#include "system/nccl_model.h"

namespace orrery::cli {

namespace {

struct RunOptions {
  sim::RunConfig config;
  std::string csv_dir;
  std::string timeline;
  std::string timeline_ranks;
  std::string memory_capacity;
  std::string progress = "auto";
  std::string fast_path = "auto";
  std::string timing = "astra-sim";
  std::string dependencies = "both";
  std::string output;
  std::string logging_folder;
  bool strict = false;
  bool quiet = false;
  std::string hardware;
  uint32_t nodes = 1;
  std::string nic;
  NcclFlags nccl;
  std::string jobs;
};

std::string ns_text(SimTime time) {
  return format_count(static_cast<uint64_t>(time.ns_truncated()));
}

// --nccl-algo and --nccl-proto: the system, loaded here, with its nccl tuning restricted.
Status restrict_nccl(RunOptions& options) {
  if (!options.nccl.given()) return Status::ok();
  sim::RunConfig& config = options.config;
  Expected<sys::SystemConfig> system = config.system_config
                                           ? Expected<sys::SystemConfig>(*config.system_config)
                                           : sys::load_system_config(config.system);
  if (!system) return system.error();
  Expected<std::shared_ptr<const sys::SystemConfig>> restricted =
      options.nccl.restricted(std::move(*system));
  if (!restricted) return restricted.error();
  config.system_config = std::move(*restricted);
  return Status::ok();
}

// --hardware NAME_OR_FILE [--nodes N] [--nic KIND] in place of -s and -n.
Status resolve_machine(RunOptions& options) {
  sim::RunConfig& config = options.config;
  if (options.hardware.empty()) {
    if (config.system.empty() || config.network.empty()) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "give --hardware NAME_OR_FILE, or both -s (system) and -n (network)");
    }
    if (options.nodes != 1 || !options.nic.empty()) {
      return Error::make(ErrorKind::kInvalidArgument, "--nodes and --nic need --hardware");
    }
    return Status::ok();
  }
  if (!config.system.empty() || !config.network.empty()) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "--hardware replaces -s and -n: give one or the other");
  }
  Expected<hw::HardwarePreset> preset = hw::load_preset(options.hardware);
  if (!preset) return preset.error();
  Expected<hw::Hardware> machine = hw::build_hardware(*preset, options.nodes, options.nic);
  if (!machine) return machine.error();
  config.system = preset->source;
  config.network = machine->description;
  config.system_config = machine->system;
  config.network_description = machine->network;
  return Status::ok();
}

// --jobs: several jobs on one network, each also alone.
int run_jobs(RunOptions& options) {
  const sim::RunConfig& config = options.config;
  if (!config.workload.empty() || !config.system.empty() || !config.network.empty() ||
      !options.hardware.empty() || !config.perturbation.empty() || options.nccl.given()) {
    return report_error(Error::make(ErrorKind::kInvalidArgument,
                                    "--jobs names each job's workload and system and the network: "
                                    "give none of -w, -s, -n, --hardware, --perturb, --nccl-algo "
                                    "or --nccl-proto with it"));
  }
  const auto started = std::chrono::steady_clock::now();
  sim::RunSettings settings;
  settings.backend_options.rounding =
      options.timing == "exact" ? net::TimeRounding::kExact : net::TimeRounding::kAstraSim;
  settings.threads = config.threads;
  Expected<sim::Jobs> jobs = sim::load_jobs(options.jobs, settings);
  if (!jobs) return report_error(jobs.error());
  for (const sim::Job& job : jobs->jobs) {
    for (const std::string& warning : job.scenario->warnings())
      fmt::print(stderr, "orrery: warning: job {}: {}\n", job.spec.name, warning);
  }
  Expected<sim::JobsResult> result = sim::run_jobs(*jobs);
  if (!result) return report_error(result.error());
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << fmt::format("orrery: {} jobs on {} ({} backend)\n", jobs->jobs.size(),
                           jobs->network_name, jobs->backend);
  for (const sim::JobResult& job : result->jobs) {
    std::cout << fmt::format(
        "  job {}: {} ranks from {} ns: iteration {} ns, alone {} ns, slowdown {:.3f}x; compute "
        "{} ns, exposed communication {} ns per rank (mean)\n",
        job.name, job.ranks, ns_text(job.start), ns_text(job.iteration), ns_text(job.alone),
        job.slowdown, ns_text(job.compute_mean), ns_text(job.exposed_mean));
  }
  size_t shared_links = 0;
  for (const sim::JobLink& link : result->links) {
    if (link.jobs.size() > 1) ++shared_links;
  }
  std::cout << fmt::format(
      "  links: {} used, {} of them by more than one job; {} messages, {} events in {:.3f} s\n",
      format_count(result->links.size()), format_count(shared_links),
      format_count(result->messages), format_count(result->events), wall);
  if (!options.output.empty()) {
    if (Status written =
            write_text_file(options.output, report::jobs_result_json_text(*jobs, *result, wall));
        !written) {
      return report_error(written.error());
    }
  }
  return 0;
}

int run(RunOptions& options) {
  if (!options.jobs.empty()) return run_jobs(options);
  if (options.config.workload.empty()) {
    return report_error(
        Error::make(ErrorKind::kInvalidArgument, "give the workload (-w PREFIX), or --jobs FILE"));
  }
  if (Status status = resolve_machine(options); !status) return report_error(status.error());
  if (Status status = restrict_nccl(options); !status) return report_error(status.error());
  // Hardware entries of --perturb may name presets: one node's system of each.
  options.config.presets = [](const std::string& name) -> Expected<sys::SystemConfig> {
    Expected<hw::HardwarePreset> preset = hw::load_preset(name);
    if (!preset) return preset.error();
    Expected<hw::Hardware> machine = hw::build_hardware(*preset, 1, "");
    if (!machine) return machine.error();
    return *machine->system;
  };
  options.config.mode =
      options.strict ? chakra::ValidationMode::kStrict : chakra::ValidationMode::kLenient;
  options.config.rounding =
      options.timing == "exact" ? net::TimeRounding::kExact : net::TimeRounding::kAstraSim;
  options.config.dependencies = options.dependencies == "data" ? chakra::DependencyKinds::kData
                                : options.dependencies == "control"
                                    ? chakra::DependencyKinds::kControl
                                    : chakra::DependencyKinds::kBoth;
  options.config.fast_path = options.fast_path != "off";
  if (!options.memory_capacity.empty()) {
    Expected<uint64_t> capacity = parse_bytes(options.memory_capacity);
    if (!capacity) return report_error(capacity.error().with_context("--memory-capacity"));
    options.config.memory_capacity = *capacity;
  }
  std::optional<report::TimelineRecorder> timeline;
  if (!options.timeline.empty()) {
    RankSet ranks = RankSet::all();
    if (!options.timeline_ranks.empty()) {
      Expected<RankSet> parsed = RankSet::parse(options.timeline_ranks, UINT32_MAX);
      if (!parsed) return report_error(parsed.error().with_context("--timeline-ranks"));
      ranks = std::move(*parsed);
    }
    timeline.emplace(std::move(ranks));
    options.config.observers.push_back(&*timeline);
  }
  // Progress on stderr for runs longer than a couple of seconds, when stderr is a terminal.
  const bool progress =
      options.progress == "on" || (options.progress == "auto" && isatty(STDERR_FILENO) != 0);
  bool progress_shown = false;
  const auto started = std::chrono::steady_clock::now();
  if (progress) {
    options.config.progress = [&](SimTime now, uint32_t finished, uint32_t ranks) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (seconds < 2.0) return;
      fmt::print(stderr, "\rorrery: simulated {} ns, {} of {} ranks finished, {:.0f} s  ",
                 ns_text(now), format_count(finished), format_count(ranks), seconds);
      progress_shown = true;
    };
  }
  // Under --strict a warning is an error: the first is kept and reported once the run returns
  // (run_simulation reports warnings as it goes and cannot be stopped from here).
  std::optional<std::string> strict_failure;
  Expected<sim::RunResult> result =
      sim::run_simulation(options.config, [&](const std::string& warning) {
        if (options.strict) {
          if (!strict_failure) strict_failure = warning;
          return;
        }
        fmt::print(stderr, "orrery: warning: {}\n", warning);
      });
  if (progress_shown) fmt::print(stderr, "\n");
  if (!result) return report_error(result.error());
  if (strict_failure) {
    return report_error(
        Error::make(ErrorKind::kConfig, "{} (--strict: warnings are errors)", *strict_failure));
  }
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
  SimTime host;
  SimTime comm;
  SimTime exposed;
  SimTime not_overlapped;
  workload::RankResult slowest;
  for (const workload::RankResult& rank : result->rank_results) {
    compute += rank.gpu_compute;
    host += rank.cpu_compute;
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
      "  compute per rank        {} ns mean\n{}"
      "  communication per rank  {} ns mean in flight, {} ns not overlapped with compute\n"
      "  exposed communication   {} ns mean (finish minus compute, as ASTRA-sim reports)\n"
      "  {} collectives, {} messages, {} events in {:.3f} s{}\n",
      result->ranks, options.config.network, result->backend, options.config.workload,
      ns_text(result->end), slowest.rank, ns_text(mean(compute)),
      // Host ops (is_cpu_op) are neither compute nor communication in ASTRA-sim's accounting, so
      // a trace of CPU work alone (a CPU replay's) showed compute 0 and its whole step exposed.
      host.ps() > 0 ? fmt::format("  host CPU ops per rank   {} ns mean (is_cpu_op: not counted "
                                  "as compute)\n",
                                  ns_text(mean(host)))
                    : std::string(),
      ns_text(mean(comm)), ns_text(mean(not_overlapped)), ns_text(mean(exposed)),
      format_count(result->collectives.size()), format_count(result->messages),
      format_count(result->events), wall,
      result->symmetric
          ? fmt::format("\n  fast path: all {} ranks alike, one simulated", result->ranks)
      : result->mode == "classes"
          ? fmt::format("\n  fast path: {} classes of alike ranks, one simulated per class",
                        result->simulated_ranks)
          : "");
  if (!result->perturbation.empty() && result->mode == "full" && !result->fast_path_note.empty()) {
    std::cout << fmt::format("  fast path: off ({})\n", result->fast_path_note);
  }
  if (!result->stopped.empty()) std::cout << "  stopped: " << result->stopped << "\n";
  if (result->goodput) {
    const sim::GoodputResult& g = *result->goodput;
    std::cout << fmt::format(
        "  goodput                 {:.4f} simulated over {:.0f} h ({} failures, system MTBF {:.3g} "
        "h); Daly's closed form {:.4f}, Young's first order {:.4f}\n"
        "  checkpoint interval     {:.4g} s ({} iterations; Daly's optimum {:.4g} s, Young's "
        "{:.4g} "
        "s)\n",
        g.simulated, g.horizon_s / 3600, format_count(g.failures), g.system_mtbf_s / 3600, g.daly,
        g.young, g.interval_s, format_count(g.iterations_per_checkpoint), g.daly_interval_s,
        g.young_interval_s);
  }
  for (const std::string& note : result->network_notes) std::cout << "  " << note << "\n";
  if (!result->peak_memory.empty()) {
    size_t top = 0;
    for (size_t rank = 1; rank < result->peak_memory.size(); ++rank) {
      if (result->peak_memory[rank] > result->peak_memory[top]) top = rank;
    }
    std::cout << fmt::format("  peak memory             {} (rank {}, the highest)\n",
                             format_bytes(result->peak_memory[top]), top);
  }

  if (!options.output.empty()) {
    if (Status written =
            write_text_file(options.output, report::run_result_json_text(*result, wall));
        !written) {
      return report_error(written.error());
    }
  }
  if (!options.csv_dir.empty()) {
    if (Status status = report::write_run_csv(*result, options.csv_dir); !status)
      return report_error(status.error());
  }
  if (timeline) {
    if (result->symmetric) timeline->replicate_representative(result->ranks);
    if (Status status = timeline->write(options.timeline); !status)
      return report_error(status.error());
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
                  "trace prefix P of rank files P.0.et, P.1.et, ... (or of gen --classes files: "
                  "P.class.<k>.et and the rank map P.ranks.json); required unless --jobs");
  cmd->add_option("-s,--system-configuration,--system", config.system,
                  "ASTRA-sim system JSON (or --hardware)");
  cmd->add_option("-n,--network-configuration,--network", config.network,
                  "ASTRA-sim network YAML, or an orrery graph topology file "
                  "(docs/formats/topology.md); or --hardware");
  cmd->add_option("--hardware", options->hardware,
                  "a hardware preset (dgx-a100, dgx-h100, hgx-h200, hgx-b200) or a preset YAML "
                  "file, in place of -s and -n (docs/hardware.md)");
  cmd->add_option("--nodes", options->nodes, "--hardware: nodes (default 1)")
      ->check(CLI::Range(1, 65536));
  options->nccl.add_to(*cmd);
  cmd->add_option("--nic", options->nic,
                  "--hardware: NIC kind (hdr200x8, ndr400x8, roce400x8, efa100x32, tcpxo200x8; "
                  "default: the preset's)");
  cmd->add_option("-m,--remote-memory-configuration,--memory", config.remote_memory,
                  "ASTRA-sim remote memory JSON (default: no memory expansion)");
  cmd->add_option("-g,--comm-group-configuration,--comm-groups", config.comm_groups,
                  "communicator groups JSON {\"1\": [0, 1], ...} (pg_name -> ranks)");
  std::string backend_help = "the network model:";
  std::vector<std::string> backend_names;
  for (const net::BackendInfo& info : net::backends()) {
    backend_help += fmt::format("\n  {}: {}{}", info.name, info.description,
                                info.on_astra_networks ? "" : " (graph topologies only)");
    backend_names.emplace_back(info.name);
  }
  cmd->add_option("-b,--network-backend,--backend", config.backend, backend_help)
      ->check(CLI::IsMember(backend_names))
      ->default_str("analytical");
  cmd->add_option("--roce-config", config.roce_config,
                  "roce backend: YAML with cc (none, dcqcn, dctcp, timely, hpcc), qp (pair, "
                  "message), qps_per_pair, mtu, buffer, ecn, pfc and per-scheme parameters "
                  "(default: PFC only, a QP per pair, documented defaults)");
  cmd->add_option("--roce-stats", config.roce_stats,
                  "roce backend: write per-flow completion times, per-port queue peaks, PAUSE and "
                  "ECN counts and queue samples as JSON");
  cmd->add_option("--compute-scale", config.compute_scale,
                  "multiply compute times, 1e-9 to 1e9 (ASTRA-sim 2.x ignores it)")
      ->check(scale_number());
  cmd->add_option("--comm-scale", config.comm_scale,
                  "multiply communication sizes, 1e-9 to 1e9 (ASTRA-sim 2.x ignores it); a scaled "
                  "size above 2^50 bytes is an error")
      ->check(scale_number());
  cmd->add_option("--injection-scale", config.injection_scale,
                  "multiply the endpoint delay when the system file sets one (as ASTRA-sim), 1e-9 "
                  "to 1e9")
      ->check(scale_number());
  cmd->add_option("--num-queues-per-dim", config.queues_per_dim,
                  "queues per network dimension, 1 to 64 (as ASTRA-sim; default 1): chunk c of a "
                  "collective waits in queue c mod n, each running ceil(active-chunks / n) "
                  "chunks, the second half anticlockwise; localBWAware gives an all-reduce's "
                  "all-gather half its own queues (2 avoids its race between chunks)")
      ->check(CLI::Range(1u, sys::kMaxQueuesPerDim));
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
  cmd->add_flag("--strict", options->strict,
                "refuse traces with any validation finding, and every warning (an ignored "
                "configuration key, a slow setting) as an error");
  cmd->add_flag("-q,--quiet", options->quiet, "no per-rank lines, only the summary");
  cmd->add_option("-o,--output", options->output,
                  "write the results as JSON: ranks, collectives, links, summary");
  cmd->add_option("-j,--threads", config.threads, "threads for loading traces (0: one per core)")
      ->check(thread_count());
  cmd->add_option(
      "--csv-dir", options->csv_dir,
      "write ranks.csv, collectives.csv, links.csv and dimensions.csv into this folder");
  CLI::Option* timeline = cmd->add_option(
      "--timeline", options->timeline,
      "write a Chrome/Perfetto trace (ui.perfetto.dev, chrome://tracing): a process per rank");
  // Alone it would be ignored: the flag says a timeline is wanted, so ask for the file.
  cmd->add_option("--timeline-ranks", options->timeline_ranks,
                  "ranks to put in the timeline, e.g. 0-15,1024 (default: all)")
      ->needs(timeline);
  cmd->add_option("--memory-capacity", options->memory_capacity,
                  "accelerator memory per rank, e.g. 80GiB: warn when a rank's peak exceeds it");
  cmd->add_option(
         "--fast-path", options->fast_path,
         "auto: simulate one rank when all ranks provably behave alike, or one per class of "
         "alike ranks (identical results; the summary says which ran and why not); off: "
         "simulate every rank")
      ->check(CLI::IsMember({"auto", "off"}));
  cmd->add_option_function<std::string>(
         "--message-dimension",
         [options](const std::string& rule) {
           options->config.charge_highest_dimension = rule == "highest";
         },
         "Which dimension times a message whose ranks differ in several (analytical models): "
         "lowest (default, ASTRA-sim's rule) or highest (the network between nodes, where such "
         "a message must go; docs/network.md)")
      ->check(CLI::IsMember({"lowest", "highest"}));
  cmd->add_option("--perturb", config.perturbation,
                  "YAML of what real clusters do (docs/formats/perturb.md): compute factors per "
                  "rank list (fixed, lognormal, uniform, a tail of slow ranks), operator-time "
                  "noise, link bandwidth factors, ranks of other hardware (presets or system "
                  "files), cables, switches, ranks or a dimension's bandwidth at some NPUs "
                  "failing at given times, and goodput under failure rates with checkpoints");
  cmd->add_option("--jobs", options->jobs,
                  "YAML of several jobs on one graph topology (docs/formats/jobs.md): each its "
                  "workload, system, groups, placement on NPUs and start time; per job the "
                  "iteration and slowdown against running alone, per link the jobs sharing it");
  cmd->add_flag("--uniform", config.uniform,
                "every rank runs <workload>.0.et (for clusters too big for a file per rank)");
  cmd->add_option("--progress", options->progress,
                  "progress on stderr: auto (when a terminal), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  cmd->callback([options, &exit_code] { exit_code = run(*options); });
}

}  // namespace orrery::cli
