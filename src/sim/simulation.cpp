#include "sim/simulation.h"

#include <chrono>
#include <fstream>
#include <map>
#include <optional>

#include "chakra/trace_file.h"
#include "chakra/trace_set.h"
#include "core/checked.h"
#include "core/event_engine.h"
#include "core/parallel.h"
#include "core/same_file.h"
#include "core/units.h"
#include "memory/remote_memory_config.h"
#include "network/flow_backend.h"
#include "network/graph_yaml.h"
#include "network/roce_backend.h"
#include "sim/symmetry.h"
#include "system/system_config.h"
#include "workload/comm_groups.h"
#include "workload/local_memory.h"

namespace orrery::sim {

namespace {

using chakra::TraceGraph;

struct LoadedRank {
  std::optional<Error> error;
  std::optional<TraceGraph> graph;  // empty for a copy of rank 0
  chakra::ValidationReport report;
  bool copy_of_first = false;  // the file has rank 0's bytes: the rank shares rank 0's graph
};

// One warning per rank whose peak exceeds `capacity`, for the first few; then one for the rest.
void warn_over_capacity(const std::vector<uint64_t>& peaks, uint64_t capacity,
                        const std::function<void(const std::string&)>& warn) {
  constexpr size_t kNamed = 8;
  size_t over = 0;
  uint32_t highest = 0;
  for (uint32_t rank = 0; rank < peaks.size(); ++rank) {
    if (peaks[rank] <= capacity) continue;
    if (over++ < kNamed) {
      warn(fmt::format("rank {}: peak memory {} exceeds the capacity of {}", rank,
                       format_bytes(peaks[rank]), format_bytes(capacity)));
    }
    if (peaks[rank] > peaks[highest]) highest = rank;
  }
  if (over > kNamed) {
    warn(fmt::format(
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

double DimensionSummary::utilization(SimTime end) const {
  if (links == 0 || end <= SimTime::zero()) return 0.0;
  return busy.seconds() / (static_cast<double>(links) * end.seconds());
}

Expected<RunResult> run_simulation(const RunConfig& config,
                                   const std::function<void(const std::string&)>& warn) {
  // ---- inputs ----
  // ASTRA-sim's multi-dimensional YAML or a graph topology file (network/graph_yaml.h); a graph
  // gives the system layer its logical layout and the backend its physical links.
  Expected<net::NetworkDescription> described = net::load_network_file(config.network);
  if (!described) return described.error();
  const std::shared_ptr<const net::Graph> physical = described->graph;
  std::optional<net::Topology> topology(std::move(described->logical));
  const uint32_t rank_count = topology->rank_count();
  for (const std::string& warning : described->warnings) warn(warning);

  Expected<sys::SystemConfig> system = sys::load_system_config(config.system);
  if (!system) return system.error();
  for (const std::string& key : system->unknown_keys) {
    warn(fmt::format("{}: key '{}' is not an ASTRA-sim system key; ignored", config.system, key));
  }
  for (const std::string& warning : system->warnings) warn(warning);

  memory::RemoteMemoryConfig remote;
  if (!config.remote_memory.empty()) {
    Expected<memory::RemoteMemoryConfig> loaded =
        memory::load_remote_memory_config(config.remote_memory);
    if (!loaded) return loaded.error();
    remote = std::move(*loaded);
  }
  for (const std::string& key : remote.unknown_keys) {
    warn(fmt::format("{}: key '{}' is not an ASTRA-sim remote memory key; ignored", remote.path,
                     key));
  }
  if (remote.type == memory::MemoryType::kPerNode &&
      uint64_t{remote.num_nodes} * remote.num_npus_per_node < rank_count) {
    const uint64_t covered = uint64_t{remote.num_nodes} * remote.num_npus_per_node;
    warn(
        fmt::format("{}: num-nodes x num-npus-per-node = {} x {} covers {} NPUs but the network "
                    "has {} ranks; ranks {} and above form further nodes of {} (ASTRA-sim would "
                    "index past its node table)",
                    remote.path, remote.num_nodes, remote.num_npus_per_node, covered, rank_count,
                    covered, remote.num_npus_per_node));
  }

  Expected<chakra::TraceFiles> files = chakra::resolve_trace_files(config.workload);
  if (!files) return files.error();
  if (config.uniform) {
    // Every rank runs rank 0's trace: read it once.
    files->paths.resize(1);
  } else if (files->paths.size() < rank_count) {
    return Error::make(ErrorKind::kIo,
                       "{}: the network ({}) has {} ranks but the workload has {} rank file(s); "
                       "{} is missing",
                       config.workload, config.network, rank_count, files->paths.size(),
                       chakra::rank_trace_path(config.workload, files->paths.size()));
  }
  if (files->paths.size() > rank_count) {
    warn(fmt::format(
        "{}: {} rank files but the network has {} ranks; ranks {} and above are not run",
        config.workload, files->paths.size(), rank_count, rank_count));
    files->paths.resize(rank_count);
  }

  // ---- traces, loaded and validated in parallel ----
  const auto trace_count = static_cast<uint32_t>(files->paths.size());
  std::vector<LoadedRank> loaded(trace_count);
  std::optional<SameFileChecker> first_file;
  if (trace_count > 1) first_file.emplace(files->paths[0]);
  parallel_for(trace_count, config.threads, [&](size_t rank) {
    if (rank > 0 && first_file->matches(files->paths[rank])) {
      loaded[rank].copy_of_first = true;
      return;
    }
    Expected<TraceGraph> graph = chakra::load_trace(files->paths[rank]);
    if (!graph) {
      loaded[rank].error = graph.error();
      return;
    }
    loaded[rank].report = chakra::validate_trace(*graph);
    loaded[rank].graph = std::move(*graph);
  });
  size_t repaired_ranks = 0;
  for (uint32_t rank = 0; rank < trace_count; ++rank) {
    const LoadedRank& trace = loaded[loaded[rank].copy_of_first ? 0 : rank];
    if (trace.error) return *trace.error;
    const chakra::ValidationReport& report = trace.report;
    if (!report.passes(config.mode)) {
      std::string lines;
      for (const std::string& line : report.summary_lines(3)) lines += "\n  " + line;
      return Error::make(
          ErrorKind::kTrace, "{}: the trace cannot run in {} mode:{}", files->paths[rank],
          config.mode == chakra::ValidationMode::kStrict ? "strict" : "lenient", lines);
    }
    if (!report.diagnostics().empty()) {
      // One warning per repaired rank is enough to read; identical ranks would repeat it.
      if (repaired_ranks++ < 3) {
        std::string lines;
        for (const std::string& line : report.summary_lines(1)) lines += "\n  " + line;
        warn(fmt::format("{}: repaired in lenient mode:{}", files->paths[rank], lines));
      }
    }
  }
  if (repaired_ranks > 3) warn(fmt::format("... and {} more ranks repaired", repaired_ranks - 3));

  // ---- communicator groups ----
  workload::CommGroups groups(rank_count);
  if (!config.comm_groups.empty()) {
    if (Status status = workload::load_comm_group_file(config.comm_groups, groups); !status) {
      return status.error();
    }
  }
  // Groups are applied rank by rank (a later definition of a name replaces an earlier one); a
  // copy of rank 0 re-applies rank 0's metadata without scanning its graph again.
  std::vector<chakra::NodeIndex> first_metadata;
  for (uint32_t rank = 0; rank < trace_count; ++rank) {
    const TraceGraph& graph = *loaded[loaded[rank].copy_of_first ? 0 : rank].graph;
    auto apply = [&](chakra::NodeIndex node) -> Status {
      const std::string where = fmt::format("{} node {}", graph.source(), graph.id(node));
      return workload::add_groups_from_metadata(graph.inputs_values(node), where, groups);
    };
    if (loaded[rank].copy_of_first) {
      for (const chakra::NodeIndex node : first_metadata) {
        if (Status status = apply(node); !status) return status.error();
      }
      continue;
    }
    for (chakra::NodeIndex node = 0; node < graph.size(); ++node) {
      if (graph.type(node) != ChakraProtoMsg::METADATA_NODE) continue;
      if (rank == 0) first_metadata.push_back(node);
      if (Status status = apply(node); !status) return status.error();
    }
  }

  // ---- the run ----
  EventEngine engine;
  const bool roce = config.backend == "roce";
  if (!roce && (!config.roce_config.empty() || !config.roce_stats.empty())) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "--roce-config and --roce-stats need the roce backend (-b roce), not {}",
                       config.backend);
  }
  if (roce && !physical) {
    return Error::make(
        ErrorKind::kInvalidArgument,
        "{}: the roce backend needs a graph topology file (docs/formats/topology.md), "
        "not an ASTRA-sim network",
        config.network);
  }
  net::RoceConfig roce_config;
  if (roce && !config.roce_config.empty()) {
    Expected<net::RoceConfig> loaded_roce = net::load_roce_config(config.roce_config);
    if (!loaded_roce) return loaded_roce.error();
    roce_config = *loaded_roce;
  }
  Expected<std::unique_ptr<net::NetworkBackend>> network =
      roce       ? net::make_roce_backend(engine, physical, *topology, roce_config)
      : physical ? net::make_fabric_backend(config.backend, engine, physical, *topology)
                 : net::make_network_backend(config.backend, engine, *topology, config.rounding);
  if (!network) return network.error();

  std::map<std::string, uint32_t> group_ids;
  std::vector<std::string> group_names{""};
  group_ids.emplace("", 0);
  if (groups.find("0") == &groups.all()) group_ids.emplace("0", 0);

  // ---- a symmetric run simulates one representative rank ----
  bool symmetric = false;
  bool through_network = false;
  std::string symmetry_note = "the fast path is off";
  if (config.fast_path && physical) {
    // Routes on a graph differ from rank to rank (ECMP, tiers): no proof of symmetry.
    symmetry_note = "the network is a graph topology, whose routes differ from rank to rank";
  } else if (config.fast_path) {
    std::vector<std::string> all_ranks_groups{""};
    if (group_ids.count("0") != 0) all_ranks_groups.push_back("0");
    for (const auto& [name, group] : groups.named()) {
      if (group.ranks.size() == rank_count) all_ranks_groups.push_back(name);
    }
    const bool shared_pools =
        remote.type == memory::MemoryType::kPerNode || remote.type == memory::MemoryType::kPool;
    SymmetryVerdict verdict = check_symmetric_run(*loaded[0].graph, *system, *topology,
                                                  config.backend, shared_pools, all_ranks_groups);
    if (verdict.symmetric && trace_count > 1) {
      std::vector<uint8_t> same(trace_count, 1);
      parallel_for(trace_count, config.threads, [&](size_t rank) {
        same[rank] =
            loaded[rank].copy_of_first || loaded[0].graph->same_work(*loaded[rank].graph) ? 1 : 0;
      });
      for (uint32_t rank = 1; rank < trace_count && verdict.symmetric; ++rank) {
        if (!same[rank]) {
          verdict = {false, fmt::format("rank {} runs a different trace than rank 0", rank)};
        }
      }
    }
    symmetric = verdict.symmetric;
    symmetry_note = verdict.reason;
    through_network = verdict.through_network;
  }

  std::vector<const TraceGraph*> graphs;
  if (symmetric) {
    graphs.push_back(&*loaded[0].graph);
  } else {
    graphs.reserve(rank_count);
    for (uint32_t rank = 0; rank < rank_count; ++rank) {
      const bool first = config.uniform || loaded[rank].copy_of_first;
      graphs.push_back(&*loaded[first ? 0 : rank].graph);
    }
  }

  workload::ExecutorOptions options;
  options.dependencies = config.dependencies;
  options.roofline = system->roofline_enabled;
  options.peak_perf_tflops = system->peak_perf_tflops.value_or(0);
  options.local_mem_bw = system->local_mem_bw_gbps.value_or(0);
  options.replay_only = system->replay_only;
  options.compute_scale = config.compute_scale;
  options.comm_scale = config.comm_scale;
  options.memory = remote;

  sys::EngineOptions engine_options;
  engine_options.injection_scale = config.injection_scale;
  engine_options.mirror = symmetric;
  engine_options.mirror_through_network = symmetric && through_network;
  engine_options.rounding = config.rounding;

  // The executor listens to the collective engine, which needs its groups before the run: build
  // the group table first, then both.
  std::vector<std::pair<std::string, std::vector<net::Rank>>> declared;
  for (const auto& [name, group] : groups.named()) {
    std::vector<net::Rank> ranks(group.ranks.begin(), group.ranks.end());
    declared.emplace_back(name, std::move(ranks));
  }
  for (size_t idx = 0; idx < declared.size(); ++idx) {
    group_ids[declared[idx].first] = static_cast<uint32_t>(idx + 1);
    group_names.push_back(declared[idx].first);
  }
  workload::WorkloadExecutor executor(engine, graphs, group_ids, options);
  Expected<std::unique_ptr<sys::CollectiveEngine>> collectives =
      sys::CollectiveEngine::create(engine, **network, *system, engine_options, executor);
  if (!collectives) return collectives.error();
  for (auto& [name, ranks] : declared) (*collectives)->add_group(std::move(ranks), name);
  executor.bind(**collectives);
  for (workload::RunObserver* observer : config.observers) executor.add_observer(*observer);
  // Peak memory per rank, when the traces name their tensors, the system file asks for it
  // (track-local-mem) or a capacity is to be checked.
  std::optional<workload::LocalMemoryTracker> local_memory;
  {
    Expected<workload::LocalMemoryTracker> tracker =
        workload::LocalMemoryTracker::create(graphs, config.threads);
    if (!tracker) {
      if (config.memory_capacity > 0 || config.mode == chakra::ValidationMode::kStrict) {
        return tracker.error();
      }
      warn(fmt::format("{}; peak memory is not tracked", tracker.error().message()));
    } else if (tracker->has_tensor_attributes() || config.memory_capacity > 0 ||
               system->track_local_mem) {
      local_memory.emplace(std::move(*tracker));
      executor.add_observer(*local_memory);
    }
  }

  executor.start();
  if (!executor.failure() && !(*collectives)->failure()) {
    if (!config.progress) {
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
        config.progress(engine.now(), static_cast<uint32_t>(executor.finished_count()), rank_count);
      }
    }
  }
  if (executor.failure()) return *executor.failure();
  if ((*collectives)->failure()) return *(*collectives)->failure();
  if (engine.time_limit_reached()) return time_limit_error(engine, executor);
  if (!executor.all_finished()) {
    std::string detail;
    for (const std::string& line : executor.describe_stuck(8)) detail += "\n  " + line;
    const std::vector<std::string> pending = (*collectives)->describe_pending(8);
    for (const std::string& line : pending) detail += "\n  " + line;
    return Error::make(ErrorKind::kDeadlock,
                       "the run cannot finish: no event is left at {} ns but ranks still have work "
                       "(a receive without a send, a collective some member never issues, or a "
                       "dependency on a node that cannot run):{}",
                       engine.last_event_time().ns_truncated(), detail);
  }

  RunResult result;
  result.ranks = rank_count;
  result.rank_results = executor.results();
  result.collectives = (*collectives)->records();
  result.symmetric = symmetric;
  result.symmetry_note = symmetric ? "" : symmetry_note;
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
  } else {
    result.links = (*network)->link_stats();
  }
  for (uint32_t dim = 0; dim < topology->dimension_count(); ++dim) {
    DimensionSummary summary;
    summary.topology = std::string(net::topology_kind_name(topology->dimension(dim).kind));
    summary.size = topology->size(dim);
    summary.bandwidth_gbps = topology->dimension(dim).bandwidth.gbps();
    summary.links = physical ? 0 : topology->link_count(dim);
    result.dimensions.push_back(summary);
  }
  // A graph's link tiers are grouped under the logical dimensions, the outer tiers together
  // under the outermost.
  const auto dimension_of = [&](uint32_t tier) {
    return std::min(tier, topology->dimension_count() - 1);
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
    for (uint32_t dim = 0; dim < topology->dimension_count(); ++dim) {
      DimensionSummary& summary = result.dimensions[dim];
      traffic->dimension_totals(dim, summary.links_used, summary.bytes, summary.busy);
    }
  }
  result.collective_group_names = group_names;
  for (const workload::RankResult& rank : result.rank_results)
    result.end = std::max(result.end, rank.finish);
  result.events = engine.events_handled();
  result.messages = (*collectives)->messages_sent();
  result.backend = config.backend;
  if (const auto* roce_backend = dynamic_cast<const net::RoceBackend*>(network->get())) {
    result.network_notes = roce_backend->summary_lines();
    if (!config.roce_stats.empty()) {
      std::ofstream out(config.roce_stats, std::ios::binary);
      out << roce_backend->stats_json();
      if (!out) return Error::make(ErrorKind::kIo, "{}: cannot write", config.roce_stats);
    }
  }
  if (local_memory) {
    result.peak_memory.resize(rank_count);
    for (uint32_t rank = 0; rank < rank_count; ++rank) {
      result.peak_memory[rank] = local_memory->peak(symmetric ? 0 : rank);
    }
    if (config.memory_capacity > 0) {
      warn_over_capacity(result.peak_memory, config.memory_capacity, warn);
    }
  }
  return result;
}

}  // namespace orrery::sim
