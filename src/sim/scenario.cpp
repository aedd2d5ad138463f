#include "sim/scenario.h"

#include <fmt/format.h>

#include "network/roce_config.h"

namespace orrery::sim {

namespace {

// Repaired ranks are named up to this many; identical ranks would repeat the same lines.
constexpr size_t kRepairWarnings = 3;

Status check_traces(const Scenario::Inputs& inputs, uint32_t ranks,
                    std::vector<std::string>& warnings) {
  const chakra::TraceSet& traces = *inputs.traces;
  if (!traces.uniform() && traces.rank_count() < ranks) {
    const std::string missing = traces.rank_path(0).empty()
                                    ? fmt::format("rank {}", traces.rank_count())
                                    : chakra::rank_trace_path(traces.name(), traces.rank_count());
    return Error::make(ErrorKind::kIo,
                       "{}: the network ({}) has {} ranks but the workload has {} rank file(s); "
                       "{} is missing",
                       traces.name(), inputs.network_name, ranks, traces.rank_count(), missing);
  }
  const uint32_t extra =
      traces.uniform() ? 0 : traces.rank_count() - ranks + traces.ranks_left_out();
  if (extra > 0) {
    warnings.push_back(fmt::format(
        "{}: {} rank files but the network has {} ranks; ranks {} and above are not run",
        traces.name(), ranks + extra, ranks, ranks));
  }
  const uint32_t running = traces.uniform() ? 1 : ranks;
  size_t repaired = 0;
  for (uint32_t rank = 0; rank < running; ++rank) {
    const uint32_t index = traces.graph_index(rank);
    const chakra::ValidationReport& report = traces.report(index);
    const std::string& where = !traces.rank_path(rank).empty() ? traces.rank_path(rank)
                               : !traces.source(index).empty() ? traces.source(index)
                                                               : traces.name();
    if (!report.passes(inputs.settings.mode)) {
      std::string lines;
      for (const std::string& line : report.summary_lines(3)) lines += "\n  " + line;
      return Error::make(
          ErrorKind::kTrace, "{}: the trace cannot run in {} mode:{}", where,
          inputs.settings.mode == chakra::ValidationMode::kStrict ? "strict" : "lenient", lines);
    }
    if (!report.diagnostics().empty() && repaired++ < kRepairWarnings) {
      std::string lines;
      for (const std::string& line : report.summary_lines(1)) lines += "\n  " + line;
      warnings.push_back(fmt::format("{}: repaired in lenient mode:{}", where, lines));
    }
  }
  if (repaired > kRepairWarnings) {
    warnings.push_back(fmt::format("... and {} more ranks repaired", repaired - kRepairWarnings));
  }
  return Status::ok();
}

// The file's groups (re-checked against the rank count), then every running rank's METADATA
// groups in rank order: a later definition of a name replaces an earlier one.
Expected<std::shared_ptr<const chakra::CommGroups>> resolve_groups(const Scenario::Inputs& inputs,
                                                                   uint32_t ranks) {
  auto groups = std::make_shared<chakra::CommGroups>(ranks);
  if (inputs.comm_groups) {
    for (const auto& [name, group] : inputs.comm_groups->named()) {
      if (Status status = groups->add(name, group.ranks, "communicator groups"); !status) {
        return status.error();
      }
    }
  }
  const chakra::TraceSet& traces = *inputs.traces;
  const uint32_t running = traces.uniform() ? 1 : ranks;
  for (uint32_t rank = 0; rank < running; ++rank) {
    const uint32_t index = traces.graph_index(rank);
    // METADATA nodes' ids and IOInfo are structure: a graph kept renamed reads its base's.
    const chakra::TraceGraph& graph = traces.graph(traces.base(index));
    const std::string& source = traces.source(index);
    for (const chakra::NodeIndex node : traces.metadata_nodes(index)) {
      const std::string where =
          fmt::format("{} node {}", source.empty() ? traces.name() : source, graph.id(node));
      if (Status status =
              chakra::add_groups_from_metadata(graph.inputs_values(node), where, *groups);
          !status) {
        return status.error();
      }
    }
  }
  return std::shared_ptr<const chakra::CommGroups>(std::move(groups));
}

}  // namespace

const memory::RemoteMemoryConfig& Scenario::memory() const {
  static const memory::RemoteMemoryConfig kNone;
  return inputs_.memory ? *inputs_.memory : kNone;
}

const Perturbation& Scenario::perturbation() const {
  static const Perturbation kNone;
  return inputs_.perturbation ? *inputs_.perturbation : kNone;
}

Expected<Scenario> Scenario::create(Inputs inputs) {
  if (!inputs.traces || !inputs.network || !inputs.system) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "a scenario needs a workload, a network and a system");
  }
  const net::BackendInfo* backend = net::find_backend(inputs.settings.backend);
  if (backend == nullptr) {
    return Error::make(ErrorKind::kInvalidArgument, "unknown network backend '{}' (expected {})",
                       inputs.settings.backend, net::backend_names_text());
  }
  if (inputs.network->graph == nullptr && !backend->on_astra_networks) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "{}: the {} backend needs a graph topology file (docs/formats/topology.md), "
                       "not an ASTRA-sim network",
                       inputs.network_name, backend->name);
  }
  if (inputs.network->graph != nullptr && !backend->on_graphs) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "{}: the {} backend runs on ASTRA-sim networks, not graph topologies",
                       inputs.network_name, backend->name);
  }
  const uint32_t ranks = inputs.network->logical.rank_count();

  Scenario scenario;
  scenario.network_ = inputs.network;
  if (inputs.perturbation) {
    Expected<std::shared_ptr<const net::NetworkDescription>> degraded =
        degrade_links(*inputs.perturbation, inputs.network);
    if (!degraded) return degraded.error();
    scenario.network_ = std::move(*degraded);
    if (!inputs.perturbation->compute.empty()) {
      Expected<std::vector<double>> factors = sim::compute_factors(*inputs.perturbation, ranks);
      if (!factors) return factors.error();
      scenario.compute_factors_ = std::make_shared<const std::vector<double>>(std::move(*factors));
    }
    if (!inputs.perturbation->failures.empty()) {
      Expected<ResolvedFailures> failures =
          resolve_failures(*inputs.perturbation, *scenario.network_, ranks);
      if (!failures) return failures.error();
      scenario.failures_ = std::make_shared<const ResolvedFailures>(std::move(*failures));
    }
    if (!inputs.perturbation->hardware.empty()) {
      Expected<std::vector<uint16_t>> hardware = sim::hardware_of(*inputs.perturbation, ranks);
      if (!hardware) return hardware.error();
      scenario.hardware_of_ = std::make_shared<const std::vector<uint16_t>>(std::move(*hardware));
    }
  }
  std::vector<std::string>& warnings = scenario.warnings_;
  warnings.insert(warnings.end(), inputs.network->warnings.begin(), inputs.network->warnings.end());
  warnings.insert(warnings.end(), inputs.system->warnings.begin(), inputs.system->warnings.end());
  for (const std::string& key : inputs.system->unknown_keys) {
    warnings.push_back(fmt::format("{}: key '{}' is not an ASTRA-sim system key; ignored",
                                   inputs.system->path, key));
  }
  if (inputs.memory) {
    const memory::RemoteMemoryConfig& remote = *inputs.memory;
    for (const std::string& key : remote.unknown_keys) {
      warnings.push_back(fmt::format("{}: key '{}' is not an ASTRA-sim remote memory key; ignored",
                                     remote.path, key));
    }
    const uint64_t covered = uint64_t{remote.num_nodes} * remote.num_npus_per_node;
    if (remote.type == memory::MemoryType::kPerNode && covered < ranks) {
      warnings.push_back(fmt::format(
          "{}: num-nodes x num-npus-per-node = {} x {} covers {} NPUs but the network has {} "
          "ranks; ranks {} and above form further nodes of {} (ASTRA-sim would index past its "
          "node table)",
          remote.path, remote.num_nodes, remote.num_npus_per_node, covered, ranks, covered,
          remote.num_npus_per_node));
    }
  }
  if (Status status = check_traces(inputs, ranks, warnings); !status) return status.error();
  Expected<std::shared_ptr<const chakra::CommGroups>> groups = resolve_groups(inputs, ranks);
  if (!groups) return groups.error();
  scenario.groups_ = std::move(*groups);
  scenario.inputs_ = std::move(inputs);
  return scenario;
}

Expected<Scenario> load_scenario(const ScenarioFiles& files, RunSettings settings) {
  // ASTRA-sim's multi-dimensional YAML or a graph topology file (network/graph_yaml.h); a graph
  // gives the system layer its logical layout and the backend its physical links.
  Expected<net::NetworkDescription> network =
      files.network_description ? Expected<net::NetworkDescription>(*files.network_description)
                                : net::load_network_file(files.network);
  if (!network) return network.error();
  const uint32_t ranks = network->logical.rank_count();
  if (files.charge_highest_dimension) {
    if (network->graph != nullptr) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "{}: --message-dimension applies to ASTRA-sim networks; a graph topology "
                         "routes every message over its own links",
                         files.network);
    }
    network->logical.set_charge_highest(true);
  }

  Expected<sys::SystemConfig> system = files.system_config
                                           ? Expected<sys::SystemConfig>(*files.system_config)
                                           : sys::load_system_config(files.system);
  if (!system) return system.error();

  Scenario::Inputs inputs;
  if (!files.perturbation.empty()) {  // read before the traces: a bad file fails at once
    Expected<Perturbation> perturbation = load_perturbation(files.perturbation, files.presets);
    if (!perturbation) return perturbation.error();
    inputs.perturbation = std::make_shared<const Perturbation>(std::move(*perturbation));
  }
  if (!files.remote_memory.empty()) {
    Expected<memory::RemoteMemoryConfig> remote =
        memory::load_remote_memory_config(files.remote_memory);
    if (!remote) return remote.error();
    inputs.memory = std::make_shared<const memory::RemoteMemoryConfig>(std::move(*remote));
  }
  if (!files.roce_config.empty()) {
    Expected<net::RoceConfig> roce = net::load_roce_config(files.roce_config);
    if (!roce) return roce.error();
    settings.backend_options.roce = std::move(*roce);
  }

  chakra::TraceSetOptions trace_options;
  trace_options.threads = files.threads;
  trace_options.uniform = files.uniform;
  trace_options.max_ranks = ranks;
  Expected<std::shared_ptr<const chakra::TraceSet>> traces =
      chakra::TraceSet::load(files.workload, trace_options);
  if (!traces) return traces.error();

  if (!files.comm_groups.empty()) {
    auto groups = std::make_shared<chakra::CommGroups>(ranks);
    if (Status status = chakra::load_comm_group_file(files.comm_groups, *groups); !status) {
      return status.error();
    }
    inputs.comm_groups = std::move(groups);
  }
  inputs.traces = std::move(*traces);
  inputs.network = std::make_shared<const net::NetworkDescription>(std::move(*network));
  inputs.system = std::make_shared<const sys::SystemConfig>(std::move(*system));
  inputs.network_name = files.network;
  inputs.settings = std::move(settings);
  return Scenario::create(std::move(inputs));
}

}  // namespace orrery::sim
