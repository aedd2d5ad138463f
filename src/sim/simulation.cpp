#include "sim/simulation.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <map>
#include <optional>

#include "core/checked.h"
#include "core/event_engine.h"
#include "core/parallel.h"
#include "core/text_file.h"
#include "core/units.h"
#include "network/backend_registry.h"
#include "sim/rank_classes.h"
#include "sim/symmetry.h"
#include "workload/local_memory.h"

namespace orrery::sim {

namespace {

using chakra::TraceGraph;

// One warning per rank whose peak exceeds `capacity`, for the first few; then one for the rest.
void warn_over_capacity(const std::vector<uint64_t>& peaks, uint64_t capacity,
                        std::vector<std::string>& warnings) {
  constexpr size_t kNamed = 8;
  size_t over = 0;
  uint32_t highest = 0;
  for (uint32_t rank = 0; rank < peaks.size(); ++rank) {
    if (peaks[rank] <= capacity) continue;
    if (over++ < kNamed) {
      warnings.push_back(fmt::format("rank {}: peak memory {} exceeds the capacity of {}", rank,
                                     format_bytes(peaks[rank]), format_bytes(capacity)));
    }
    if (peaks[rank] > peaks[highest]) highest = rank;
  }
  if (over > kNamed) {
    warnings.push_back(fmt::format(
        "... and {} more ranks exceed the capacity of {} (the highest peak: rank {}, {})",
        over - kNamed, format_bytes(capacity), highest, format_bytes(peaks[highest])));
  }
}

// The run passed the 2^61 ps limit (core/checked.h): some input is out of proportion.
Error time_limit_error(const EventEngine& engine, const workload::WorkloadExecutor& executor) {
  std::string detail;
  for (const std::string& line : executor.describe_stuck(4)) detail += "\n  " + line;
  return Error::make(ErrorKind::kInvalidArgument,
                     "the simulated time passes {} ns (2^61 ps, about 26.7 days), the longest run "
                     "orrery simulates exactly (docs/numbers.md), after {} ns: a size, duration, "
                     "rate or scale in the inputs is out of proportion; work in flight:{}",
                     format_count(uint64_t{kSimTimeLimitPs} / 1000),
                     format_count(static_cast<uint64_t>(engine.last_event_time().ns_truncated())),
                     detail);
}

}  // namespace

GroupTable group_table(const chakra::CommGroups& groups) {
  GroupTable table;
  table.ids.emplace("", 0);
  if (groups.find("0") == &groups.all()) table.ids.emplace("0", 0);
  for (const auto& [name, group] : groups.named()) {
    std::vector<net::Rank> ranks(group.ranks.begin(), group.ranks.end());
    table.declared.emplace_back(name, std::move(ranks));
  }
  table.all_ranks_ids = table.ids;  // before the declared names
  for (size_t idx = 0; idx < table.declared.size(); ++idx) {
    table.ids[table.declared[idx].first] = static_cast<uint32_t>(idx + 1);
    table.names.push_back(table.declared[idx].first);
  }
  return table;
}

workload::ExecutorOptions executor_options(const Scenario& scenario) {
  const RunSettings& settings = scenario.settings();
  const sys::SystemConfig& system = scenario.system();
  const Perturbation& perturbation = scenario.perturbation();
  workload::ExecutorOptions options;
  options.dependencies = settings.dependencies;
  options.roofline = system.roofline_enabled;
  options.peak_perf_tflops = system.peak_perf_tflops.value_or(0);
  options.local_mem_bw = system.local_mem_bw_gbps.value_or(0);
  options.replay_only = system.replay_only;
  options.compute_model = system.compute;
  options.compute_scale = settings.compute_scale;
  options.comm_scale = settings.comm_scale;
  options.memory = scenario.memory();
  options.compute_factor = scenario.compute_factors();
  options.noise_sigma = perturbation.noise_sigma;
  options.noise_seed = perturbation.noise_seed;
  for (const HardwareEntry& entry : perturbation.hardware) {
    const sys::SystemConfig& other = *entry.system;
    options.profiles.push_back({other.roofline_enabled, other.peak_perf_tflops.value_or(0),
                                other.local_mem_bw_gbps.value_or(0), other.compute});
  }
  options.profile_of = scenario.hardware_of();
  return options;
}

double DimensionSummary::utilization(SimTime end) const {
  if (links == 0 || end <= SimTime::zero()) return 0.0;
  return busy.seconds() / (static_cast<double>(links) * end.seconds());
}

Expected<RunResult> Simulation::run() {
  assert(!ran_ && "Simulation::run: a simulation runs once");
  ran_ = true;
  const Scenario& scenario = scenario_;
  const RunSettings& settings = scenario.settings();
  const chakra::TraceSet& traces = scenario.traces();
  const net::NetworkDescription& network_description = scenario.network();
  const std::shared_ptr<const net::Graph>& physical = network_description.graph;
  const net::Topology& topology = network_description.logical;
  const sys::SystemConfig& system = scenario.system();
  const memory::RemoteMemoryConfig& remote = scenario.memory();
  const chakra::CommGroups& groups = scenario.groups();
  const uint32_t rank_count = scenario.rank_count();
  std::vector<std::string> warnings;

  // ---- the run ----
  EventEngine engine;
  net::BackendOptions backend_options = settings.backend_options;
  backend_options.failures = scenario.failures().links;
  backend_options.dimension_failures = scenario.failures().dimensions;
  Expected<std::unique_ptr<net::NetworkBackend>> network =
      net::make_backend(settings.backend, engine, network_description, backend_options);
  if (!network) return network.error();

  // The executor listens to the collective engine, which needs its groups before the run: build
  // the group table first, then both. (The fast paths read it too.)
  GroupTable table = group_table(groups);
  std::map<std::string, uint32_t>& group_ids = table.ids;
  std::vector<std::string>& group_names = table.names;
  std::vector<std::pair<std::string, std::vector<net::Rank>>>& declared = table.declared;
  const std::map<std::string, uint32_t>& all_ranks_ids = table.all_ranks_ids;

  // ---- a symmetric run simulates one representative rank ----
  bool symmetric = false;
  bool through_network = false;
  std::string symmetry_note = "the fast path is off";
  const chakra::TraceGraph& first = traces.rank_graph(0);
  // What a perturbation does to the argument: noise differs on every rank (no two are alike); a
  // compute factor makes ranks of different speeds different (classes split by it).
  const Perturbation& perturbation = scenario.perturbation();
  const std::vector<double>& factors = scenario.compute_factors();
  const std::vector<uint16_t>& hardware = scenario.hardware_of();
  std::string perturbation_note;
  if (perturbation.noise_sigma > 0) {
    perturbation_note =
        fmt::format("{}: operator noise differs from rank to rank", perturbation.file);
  } else if (!scenario.failures().dimensions.empty()) {
    perturbation_note =
        fmt::format("{} fails during the run", scenario.failures().dimensions.front().what);
  } else {
    for (uint32_t rank = 1; rank < hardware.size() && perturbation_note.empty(); ++rank) {
      if (hardware[rank] != hardware[0]) {
        auto name = [&](uint16_t entry) {
          return entry == 0 ? std::string("the run's system")
                            : perturbation.hardware[entry - 1].name;
        };
        perturbation_note =
            fmt::format("{}: rank {} computes as {}, rank 0 as {}", perturbation.file, rank,
                        name(hardware[rank]), name(hardware[0]));
      }
    }
    for (uint32_t rank = 1; rank < factors.size() && perturbation_note.empty(); ++rank) {
      if (factors[rank] != factors[0]) {
        perturbation_note = fmt::format("{}: rank {} computes at a factor of {:g}, rank 0 at {:g}",
                                        perturbation.file, rank, factors[rank], factors[0]);
      }
    }
  }

  if (settings.fast_path && !perturbation_note.empty()) {
    symmetry_note = perturbation_note;
  } else if (settings.fast_path && physical) {
    // Routes on a graph differ from rank to rank (ECMP, tiers): no proof of symmetry.
    symmetry_note = "the network is a graph topology, whose routes differ from rank to rank";
  } else if (settings.fast_path) {
    std::vector<std::string> all_ranks_groups{""};
    if (all_ranks_ids.count("0") != 0) all_ranks_groups.push_back("0");
    for (const auto& [name, group] : groups.named()) {
      if (group.ranks.size() == rank_count) all_ranks_groups.push_back(name);
    }
    const bool shared_pools =
        remote.type == memory::MemoryType::kPerNode || remote.type == memory::MemoryType::kPool;
    SymmetryVerdict verdict = check_symmetric_run(first, system, topology, settings.backend,
                                                  shared_pools, all_ranks_groups);
    if (verdict.symmetric && !traces.uniform()) {
      // Each distinct graph a rank runs is compared with rank 0's once.
      const uint32_t first_index = traces.graph_index(0);
      std::vector<uint8_t> same(traces.graph_count(), 1);
      parallel_for(traces.graph_count(), settings.threads, [&](size_t index) {
        if (index != first_index) {
          same[index] = first.same_work(traces.graph(static_cast<uint32_t>(index))) ? 1 : 0;
        }
      });
      for (uint32_t rank = 1; rank < rank_count && verdict.symmetric; ++rank) {
        if (!same[traces.graph_index(rank)]) {
          verdict = {false, fmt::format("rank {} runs a different trace than rank 0", rank)};
        }
      }
    }
    symmetric = verdict.symmetric;
    symmetry_note = verdict.reason;
    through_network = verdict.through_network;
  }

  // ---- otherwise, one representative per class of alike ranks ----
  RankClassVerdict classes;
  std::string class_note;
  if (settings.fast_path && !physical && !symmetric) {
    if (settings.backend != "analytical") {
      class_note = fmt::format(
          "rank classes need the analytical backend (links of the {} backend are shared across "
          "classes)",
          settings.backend);
    } else if (perturbation.noise_sigma > 0 || !scenario.failures().dimensions.empty()) {
      class_note = perturbation_note;  // every rank's own, or links that change during the run
    } else if (std::any_of(observers_.begin(), observers_.end(), [](const auto* observer) {
                 return observer->watched_ranks().empty();
               })) {
      class_note = "an observer (a timeline) watches every rank";
    } else {
      std::vector<std::vector<net::Rank>> group_ranks;
      group_ranks.emplace_back(rank_count);
      for (uint32_t rank = 0; rank < rank_count; ++rank) group_ranks[0][rank] = rank;
      for (const auto& [name, ranks] : declared) group_ranks.push_back(ranks);
      RankClassInputs inputs;
      inputs.traces = &traces;
      inputs.group_ranks = &group_ranks;
      inputs.group_ids = &group_ids;
      inputs.system = &system;
      inputs.topology = &topology;
      inputs.shared_memory_pools =
          remote.type == memory::MemoryType::kPerNode || remote.type == memory::MemoryType::kPool;
      inputs.threads = settings.threads;
      if (!factors.empty()) inputs.compute_factors = &factors;
      if (!hardware.empty()) inputs.hardware = &hardware;
      classes = decide_rank_classes(inputs);
      if (!classes.ok) class_note = classes.reason;
    }
  }
  const bool class_mode = classes.ok;
  if (class_mode) {
    // Observers hear each watched rank's activities as its representative's.
    std::vector<net::Rank> representative_of(rank_count);
    for (uint32_t rank = 0; rank < rank_count; ++rank) {
      representative_of[rank] = classes.plan->members[classes.plan->class_of[rank]].front();
    }
    for (workload::RunObserver* observer : observers_) {
      observer->on_representatives(representative_of);
    }
  }
  // Ranks a class mode does not simulate run an empty trace (they finish at once; their results
  // are their representative's).
  TraceGraph idle_graph;
  idle_graph.finish();

  std::vector<const TraceGraph*> graphs;
  if (symmetric) {
    graphs.push_back(&first);
  } else if (class_mode) {
    graphs.assign(rank_count, &idle_graph);
    for (const std::vector<net::Rank>& members : classes.plan->members) {
      graphs[members.front()] = &traces.rank_graph(members.front());
    }
  } else {
    graphs.reserve(rank_count);
    for (uint32_t rank = 0; rank < rank_count; ++rank) graphs.push_back(&traces.rank_graph(rank));
  }

  const workload::ExecutorOptions options = executor_options(scenario);

  sys::EngineOptions engine_options;
  engine_options.injection_scale = settings.injection_scale;
  engine_options.queues_per_dim = settings.queues_per_dim;
  engine_options.mirror = symmetric;
  engine_options.mirror_through_network = symmetric && through_network;
  engine_options.rounding = settings.backend_options.rounding;
  if (class_mode) {
    engine_options.peers = sys::make_class_peer_model(topology, settings.backend_options.rounding,
                                                      classes.plan, settings.link_queue_peaks);
  }

  workload::WorkloadExecutor executor(engine, graphs, group_ids, options);
  Expected<std::unique_ptr<sys::CollectiveEngine>> collectives =
      sys::CollectiveEngine::create(engine, **network, system, engine_options, executor);
  if (!collectives) return collectives.error();
  for (auto& [name, ranks] : declared) (*collectives)->add_group(std::move(ranks), name);
  executor.bind(**collectives);
  for (workload::RunObserver* observer : observers_) executor.add_observer(*observer);
  // Peak memory per rank, when the traces name their tensors, the system file asks for it
  // (track-local-mem) or a capacity is to be checked.
  std::optional<workload::LocalMemoryTracker> local_memory;
  {
    Expected<workload::LocalMemoryTracker> tracker =
        workload::LocalMemoryTracker::create(graphs, settings.threads);
    if (!tracker) {
      if (settings.memory_capacity > 0 || settings.mode == chakra::ValidationMode::kStrict) {
        return tracker.error();
      }
      warnings.push_back(fmt::format("{}; peak memory is not tracked", tracker.error().message()));
    } else if (tracker->has_tensor_attributes() || settings.memory_capacity > 0 ||
               system.track_local_mem) {
      local_memory.emplace(std::move(*tracker));
      executor.add_observer(*local_memory);
    }
  }

  // A rank's failure stops the run at its time (every rank with it: the job stops).
  const std::optional<RankFailure>& stop = scenario.failures().rank;
  executor.start();
  if (!executor.failure() && !(*collectives)->failure()) {
    if (stop) {
      (void)engine.run_until(stop->at);
    } else if (!progress_) {
      engine.run();
    } else {
      // Run in slices of simulated time sized to take about a tenth of a second each, reporting
      // between them. Slicing changes nothing: events run in the same order either way.
      SimTime slice = SimTime::from_us(1);
      while (!engine.empty() && !engine.time_limit_reached() && !executor.failure() &&
             !(*collectives)->failure()) {
        const auto started = std::chrono::steady_clock::now();
        (void)engine.run_until(engine.next_event_time() + slice);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        if (seconds < 0.05 && slice < SimTime::from_ps(int64_t{1} << 50)) slice = slice * 2;
        progress_(engine.now(), static_cast<uint32_t>(executor.finished_count()), rank_count);
      }
    }
  }
  if (executor.failure()) return *executor.failure();
  if ((*collectives)->failure()) return *(*collectives)->failure();
  if (engine.time_limit_reached()) return time_limit_error(engine, executor);
  const bool stopped = stop && !executor.all_finished() && !engine.empty();
  if (!executor.all_finished() && !stopped) {
    std::string detail;
    for (const std::string& line : executor.describe_stuck(8)) detail += "\n  " + line;
    const std::vector<std::string> pending = (*collectives)->describe_pending(8);
    for (const std::string& line : pending) detail += "\n  " + line;
    for (const std::string& line : (*network)->describe_undelivered(8)) detail += "\n  " + line;
    return Error::make(ErrorKind::kDeadlock,
                       "the run cannot finish: no event is left at {} ns but ranks still have work "
                       "(a receive without a send, a collective some member never issues, a "
                       "dependency on a node that cannot run, or a message a failure cut off):{}",
                       engine.last_event_time().ns_truncated(), detail);
  }

  RunResult result;
  result.ranks = rank_count;
  result.rank_results = executor.results();
  result.collectives = (*collectives)->records();
  result.symmetric = symmetric;
  result.symmetry_note = symmetric ? "" : symmetry_note;
  result.mode = symmetric ? "symmetric" : class_mode ? "classes" : "full";
  result.simulated_ranks = symmetric    ? 1
                           : class_mode ? static_cast<uint32_t>(classes.plan->members.size())
                                        : rank_count;
  if (!symmetric && !class_mode && settings.fast_path) {
    result.fast_path_note = class_note.empty() || class_note == symmetry_note
                                ? symmetry_note
                                : fmt::format("{}; no rank classes: {}", symmetry_note, class_note);
  }
  // A symmetric run lists every link unless there are more than this many.
  constexpr uint64_t kMaxExpandedLinks = uint64_t{1} << 22;
  std::optional<sys::MirrorTraffic> traffic;
  if (symmetric) {
    // Every rank did what the representative did.
    const workload::RankResult representative = result.rank_results.front();
    result.rank_results.assign(rank_count, representative);
    for (uint32_t rank = 0; rank < rank_count; ++rank) result.rank_results[rank].rank = rank;
    traffic.emplace((*collectives)->mirror_traffic());
    if (through_network) traffic->adopt_representative_links((*network)->link_stats());
    if (traffic->link_count() <= kMaxExpandedLinks) {
      result.links = traffic->expand();
    } else {
      result.links_aggregated = true;
    }
  } else if (class_mode) {
    // Every member did what its class's representative did; each group's collectives are those of
    // the representatives' group that stands for it.
    const sys::ClassPlan& plan = *classes.plan;
    const std::vector<workload::RankResult> simulated = std::move(result.rank_results);
    result.rank_results.resize(rank_count);
    for (uint32_t rank = 0; rank < rank_count; ++rank) {
      result.rank_results[rank] = simulated[plan.members[plan.class_of[rank]].front()];
      result.rank_results[rank].rank = rank;
    }
    std::vector<std::vector<uint32_t>> stands_for(group_names.size());
    for (uint32_t group = 0; group < classes.group_representative.size(); ++group) {
      if (classes.group_representative[group] != kNoGroupId) {
        stands_for[classes.group_representative[group]].push_back(group);
      }
    }
    std::vector<sys::CollectiveRecord> records;
    for (const sys::CollectiveRecord& record : result.collectives) {
      for (uint32_t group : stands_for[record.group]) {
        records.push_back(record);
        records.back().group = group;
      }
    }
    result.collectives = std::move(records);
    result.links = (*collectives)->mirror_traffic().expand();
  } else {
    result.links = (*network)->link_stats();
  }
  if (!settings.link_queue_peaks) {
    for (net::LinkStats& link : result.links) link.peak_queue = 0;  // the same in every mode
  }
  // In order of first issue, then group and sequence (unique): one order in every mode (the
  // engine lists them as first issued, ties by the order of events, which differs between a
  // full run and a class run).
  std::sort(result.collectives.begin(), result.collectives.end(),
            [](const sys::CollectiveRecord& lhs, const sys::CollectiveRecord& rhs) {
              return std::tie(lhs.first_issue, lhs.group, lhs.sequence) <
                     std::tie(rhs.first_issue, rhs.group, rhs.sequence);
            });
  for (uint32_t dim = 0; dim < topology.dimension_count(); ++dim) {
    DimensionSummary summary;
    summary.topology = std::string(net::topology_kind_name(topology.dimension(dim).kind));
    summary.size = topology.size(dim);
    summary.bandwidth_gbps = topology.dimension(dim).bandwidth.gbps();
    summary.links = physical ? 0 : topology.link_count(dim);
    result.dimensions.push_back(summary);
  }
  // A graph's link tiers are grouped under the logical dimensions, the outer tiers together
  // under the outermost.
  const auto dimension_of = [&](uint32_t tier) {
    return std::min(tier, topology.dimension_count() - 1);
  };
  if (physical) {
    for (net::LinkId link = 0; link < physical->link_count(); ++link) {
      ++result.dimensions[dimension_of(physical->link(link).dimension)].links;
    }
  }
  for (const net::LinkStats& link : result.links) {
    DimensionSummary& summary = result.dimensions[dimension_of(link.dimension)];
    ++summary.links_used;
    summary.bytes = saturating_add(summary.bytes, link.bytes);
    summary.busy += link.busy;
  }
  if (result.links_aggregated) {
    for (uint32_t dim = 0; dim < topology.dimension_count(); ++dim) {
      DimensionSummary& summary = result.dimensions[dim];
      traffic->dimension_totals(dim, summary.links_used, summary.bytes, summary.busy);
    }
  }
  result.collective_group_names = group_names;
  for (const workload::RankResult& rank : result.rank_results)
    result.end = std::max(result.end, rank.finish);
  result.events = engine.events_handled();
  result.messages = (*collectives)->messages_sent();
  result.backend = settings.backend;
  result.network_notes = (*network)->summary_lines();
  result.network_stats_json = (*network)->stats_json();
  if (local_memory) {
    result.peak_memory.resize(rank_count);
    for (uint32_t rank = 0; rank < rank_count; ++rank) {
      result.peak_memory[rank] = local_memory->peak(
          symmetric    ? 0
          : class_mode ? classes.plan->members[classes.plan->class_of[rank]].front()
                       : rank);
    }
    if (settings.memory_capacity > 0) {
      warn_over_capacity(result.peak_memory, settings.memory_capacity, warnings);
    }
  }
  result.warnings = std::move(warnings);
  result.workload = traces.name();
  result.network = scenario.inputs().network_name;
  result.system = system.path;
  result.rounding = settings.backend_options.rounding;
  result.perturbation = perturbation.file;
  if (stopped) {
    uint64_t done = 0, nodes = 0;
    uint32_t finished = 0;
    for (const workload::RankResult& rank : result.rank_results) {
      done += rank.completed;
      nodes += rank.nodes;
      finished += rank.finished ? 1 : 0;
    }
    result.end = stop->at;
    result.stopped = fmt::format(
        "rank {} failed at {} ns: the job stopped with {} of {} ranks finished and {} of {} nodes "
        "done ({})",
        stop->rank, format_count(static_cast<uint64_t>(stop->at.ns_truncated())),
        format_count(finished), format_count(rank_count), format_count(done), format_count(nodes),
        perturbation.file);
  }
  if (perturbation.goodput && !stopped) {
    Expected<GoodputResult> goodput =
        compute_goodput(*perturbation.goodput, result.end.seconds(), rank_count);
    if (!goodput) return goodput.error().with_context(perturbation.file);
    result.goodput = *goodput;
  }
  return result;
}

Expected<RunResult> simulate(const Scenario& scenario) { return Simulation(scenario).run(); }

ScenarioFiles scenario_files(const RunConfig& config) {
  ScenarioFiles files;
  files.workload = config.workload;
  files.system = config.system;
  files.network = config.network;
  files.remote_memory = config.remote_memory;
  files.comm_groups = config.comm_groups;
  files.roce_config = config.roce_config;
  files.uniform = config.uniform;
  files.threads = config.threads;
  files.system_config = config.system_config;
  files.network_description = config.network_description;
  files.perturbation = config.perturbation;
  files.presets = config.presets;
  files.charge_highest_dimension = config.charge_highest_dimension;
  return files;
}

RunSettings run_settings(const RunConfig& config) {
  RunSettings settings;
  settings.backend = config.backend;
  settings.backend_options.rounding = config.rounding;
  settings.mode = config.mode;
  settings.dependencies = config.dependencies;
  settings.compute_scale = config.compute_scale;
  settings.comm_scale = config.comm_scale;
  settings.injection_scale = config.injection_scale;
  settings.queues_per_dim = config.queues_per_dim;
  settings.fast_path = config.fast_path;
  settings.memory_capacity = config.memory_capacity;
  settings.threads = config.threads;
  return settings;
}

Expected<RunResult> run_simulation(const RunConfig& config,
                                   const std::function<void(const std::string&)>& warn) {
  if (config.backend != "roce" && (!config.roce_config.empty() || !config.roce_stats.empty())) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "--roce-config and --roce-stats need the roce backend (-b roce), not {}",
                       config.backend);
  }
  Expected<Scenario> scenario = load_scenario(scenario_files(config), run_settings(config));
  if (!scenario) return scenario.error();
  for (const std::string& warning : scenario->warnings()) warn(warning);
  Simulation simulation(std::move(*scenario));
  for (workload::RunObserver* observer : config.observers) simulation.add_observer(*observer);
  if (config.progress) simulation.set_progress(config.progress);
  Expected<RunResult> result = simulation.run();
  if (!result) return result;
  for (const std::string& warning : result->warnings) warn(warning);
  if (!config.roce_stats.empty()) {
    if (Status written = write_text_file(config.roce_stats, result->network_stats_json); !written) {
      return written.error();
    }
  }
  return result;
}

}  // namespace orrery::sim
