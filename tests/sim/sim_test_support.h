// tests/sim/sim_test_support.h: scenarios built in memory (configuration texts, traces from node
// lists or generators), and runs of the whole simulator on them. No file is written: the texts
// are parsed as the files would be, under the names "sys.json", "net.yml", "groups.json" and
// "mem.json" that messages then show.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chakra/trace_builder.h"
#include "gen/microbench.h"
#include "sim/scenario.h"
#include "sim/simulation.h"
#include "system/compute_model.h"

namespace orrery::test {

// An ASTRA-sim system file with the calibration settings, one implementation name for every
// dimension and collective.
inline std::string system_json(const std::string& algorithm, uint32_t dims, int splits = 4,
                               int active = 1, int endpoint_delay = 10, double local_mem_bw = 1600,
                               const std::string& optimization = "localBWAware",
                               const std::string& extra = "") {
  std::string list = "[";
  for (uint32_t dim = 0; dim < dims; ++dim) list += (dim ? ", \"" : "\"") + algorithm + "\"";
  list += "]";
  return fmt::format(
      "{{\"scheduling-policy\": \"LIFO\", \"endpoint-delay\": {}, \"active-chunks-per-dimension\": "
      "{},\n"
      " \"preferred-dataset-splits\": {}, \"all-reduce-implementation\": {}, "
      "\"all-gather-implementation\": {},\n"
      " \"reduce-scatter-implementation\": {}, \"all-to-all-implementation\": {},\n"
      " \"collective-optimization\": \"{}\", \"local-mem-bw\": {}{}}}\n",
      endpoint_delay, active, splits, list, list, list, list, optimization, local_mem_bw, extra);
}

inline std::string network_yaml(const std::string& kinds, const std::string& sizes,
                                const std::string& bandwidths, const std::string& latencies) {
  return fmt::format("topology: [ {} ]\nnpus_count: [ {} ]\nbandwidth: [ {} ]\nlatency: [ {} ]\n",
                     kinds, sizes, bandwidths, latencies);
}

// A data file's text (a configuration under tests/data, say), failing the test when unreadable.
inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path << ": cannot read";
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// One trace per rank from node lists, named `name` (graphs "<name> rank <r>").
inline std::shared_ptr<const chakra::TraceSet> traces_of(
    const std::vector<std::vector<Node>>& ranks, const std::string& name = "w") {
  std::vector<chakra::TraceGraph> graphs;
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    graphs.push_back(build_graph(ranks[rank]));
    graphs.back().set_source(fmt::format("{} rank {}", name, rank));
  }
  return chakra::TraceSet::from_graphs(name, std::move(graphs));
}

// `ranks` ranks running one trace (as rank files that are byte-identical copies do).
inline std::shared_ptr<const chakra::TraceSet> same_trace(const std::vector<Node>& nodes,
                                                          uint32_t ranks,
                                                          const std::string& name = "w") {
  std::vector<chakra::TraceGraph> graphs;
  graphs.push_back(build_graph(nodes));
  graphs.back().set_source(name + " rank 0");
  return chakra::TraceSet::from_graphs(name, std::move(graphs), std::vector<uint32_t>(ranks, 0));
}

// The trace set at `path` (a file or a prefix), failing the test when it does not load.
inline std::shared_ptr<const chakra::TraceSet> load_traces(const std::string& path,
                                                           chakra::TraceSetOptions options = {}) {
  Expected<std::shared_ptr<const chakra::TraceSet>> traces = chakra::TraceSet::load(path, options);
  EXPECT_TRUE(traces) << traces.error().message();
  return traces ? *traces : nullptr;
}

// What a scenario is made of, as the files would say it.
struct RunInputs {
  std::shared_ptr<const chakra::TraceSet> traces;
  std::string system;         // system JSON
  std::string network;        // ASTRA-sim network YAML or a graph topology file
  std::string comm_groups;    // communicator-group JSON ("" = none)
  std::string remote_memory;  // remote memory JSON ("" = none)
  sim::RunSettings settings;
  // Communicator groups given as they are (a generator's), instead of comm_groups' text.
  std::shared_ptr<const chakra::CommGroups> groups;
  std::string perturbation;                  // perturbation YAML ("" = none), read as "perturb.yml"
  bool charge_highest = false;               // net::Topology::set_charge_highest on the network
  std::optional<sys::ComputeModel> compute;  // the system's per-operation compute (a preset's)
};

inline Expected<sim::Scenario> make_scenario(const RunInputs& in) {
  if (!in.traces) return Error::make(ErrorKind::kInvalidArgument, "no traces");
  sim::Scenario::Inputs inputs;
  inputs.traces = in.traces;
  Expected<sys::SystemConfig> system = sys::parse_system_config("sys.json", in.system);
  if (!system) return system.error();
  if (in.compute) system->compute = in.compute;
  inputs.system = std::make_shared<const sys::SystemConfig>(std::move(*system));
  Expected<net::NetworkDescription> network = net::parse_network_yaml(in.network, "net.yml");
  if (!network) return network.error();
  network->logical.set_charge_highest(in.charge_highest);
  const uint32_t ranks = network->logical.rank_count();
  inputs.network = std::make_shared<const net::NetworkDescription>(std::move(*network));
  inputs.network_name = "net.yml";
  if (in.groups) inputs.comm_groups = in.groups;
  if (!in.comm_groups.empty()) {
    auto groups = std::make_shared<chakra::CommGroups>(ranks);
    if (Status status = chakra::parse_comm_group_text("groups.json", in.comm_groups, *groups);
        !status) {
      return status.error();
    }
    inputs.comm_groups = std::move(groups);
  }
  if (!in.remote_memory.empty()) {
    Expected<memory::RemoteMemoryConfig> memory =
        memory::parse_remote_memory_config("mem.json", in.remote_memory);
    if (!memory) return memory.error();
    inputs.memory = std::make_shared<const memory::RemoteMemoryConfig>(std::move(*memory));
  }
  inputs.settings = in.settings;
  if (!in.perturbation.empty()) {
    Expected<sim::Perturbation> perturbation =
        sim::parse_perturbation(in.perturbation, "perturb.yml");
    if (!perturbation) return perturbation.error();
    inputs.perturbation = std::make_shared<const sim::Perturbation>(std::move(*perturbation));
  }
  return sim::Scenario::create(std::move(inputs));
}

// Runs the scenario; its warnings and the run's go to `warnings` when given.
inline Expected<sim::RunResult> simulate(const RunInputs& in,
                                         std::vector<std::string>* warnings = nullptr) {
  Expected<sim::Scenario> scenario = make_scenario(in);
  if (!scenario) return scenario.error();
  if (warnings != nullptr) {
    warnings->insert(warnings->end(), scenario->warnings().begin(), scenario->warnings().end());
  }
  Expected<sim::RunResult> result = sim::simulate(*scenario);
  if (result && warnings != nullptr) {
    warnings->insert(warnings->end(), result->warnings.begin(), result->warnings.end());
  }
  return result;
}

// Runs the scenario, failing the test (and returning an empty result) when it does not run.
inline sim::RunResult run_ok(const RunInputs& in) {
  Expected<sim::RunResult> result = simulate(in);
  EXPECT_TRUE(result.has_value()) << (result ? "" : result.error().message());
  return result ? std::move(*result) : sim::RunResult{};
}

// Runs one microbenchmark collective and returns the run.
struct MicroRun {
  gen::MicrobenchKind kind = gen::MicrobenchKind::kAllReduce;
  uint64_t bytes = 1 << 20;
  std::string system;   // JSON text
  std::string network;  // YAML text
  uint32_t ranks = 8;
  std::string backend = "analytical";
  net::TimeRounding rounding = net::TimeRounding::kAstraSim;
  uint64_t compute_us = 0;
};

inline Expected<sim::RunResult> run_micro(const MicroRun& spec) {
  gen::MicrobenchSpec micro;
  micro.kind = spec.kind;
  micro.bytes = spec.bytes;
  micro.ranks = spec.ranks;
  micro.compute_us = spec.compute_us;
  Expected<std::shared_ptr<const chakra::TraceSet>> traces = gen::build_microbench(micro);
  if (!traces) return traces.error();
  RunInputs inputs;
  inputs.traces = *traces;
  inputs.system = spec.system;
  inputs.network = spec.network;
  inputs.settings.backend = spec.backend;
  inputs.settings.backend_options.rounding = spec.rounding;
  return simulate(inputs);
}

// The finish time every rank agrees on, in ns (fails the test when ranks differ).
inline int64_t common_finish_ns(const sim::RunResult& result) {
  const int64_t first = result.rank_results.front().finish.ns_truncated();
  for (const auto& rank : result.rank_results)
    EXPECT_EQ(rank.finish.ns_truncated(), first) << "rank " << rank.rank;
  return first;
}

}  // namespace orrery::test
