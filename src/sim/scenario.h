// sim/scenario.h: the validated inputs of one run, in memory.
//
// A Scenario is a workload (a TraceSet and its communicator groups) on a system (the system
// layer's configuration), a network (ASTRA-sim's dimensions or a graph topology), a remote memory,
// and the settings of the run (backend, timing, validation mode, scales). Its inputs are shared
// read-only through shared_ptr: a trace set loaded once serves every scenario made from it, so a
// sweep that changes a bandwidth or an algorithm makes new scenarios without reading any trace
// again. Scenario::create checks the inputs against each other and resolves the groups; a Scenario
// that exists is runnable (sim/simulation.h), any number of times, from any thread.
//
// load_scenario() builds one from ASTRA-sim's files exactly as `orrery run` reads them; tests,
// LIBRA and the Python module build the inputs in code.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "chakra/comm_groups.h"
#include "chakra/dependency_graph.h"
#include "chakra/trace_set.h"
#include "chakra/validation.h"
#include "core/error.h"
#include "memory/remote_memory_config.h"
#include "network/backend_registry.h"
#include "network/graph_yaml.h"
#include "sim/perturbation.h"
#include "system/system_config.h"

namespace orrery::sim {

// How a run is timed and checked, apart from its inputs.
struct RunSettings {
  std::string backend = "analytical";  // a name of network/backend_registry.h
  // Timing defaults to ASTRA-sim's integer nanoseconds (`--timing astra-sim`).
  net::BackendOptions backend_options = [] {
    net::BackendOptions options;
    options.rounding = net::TimeRounding::kAstraSim;
    return options;
  }();
  // Off: links' peak queues are not counted (peak_queue 0 on every link, in every mode), so a
  // class run keeps totals per route instead of every message's interval (sweeps, which need
  // times and totals only).
  bool link_queue_peaks = true;
  chakra::ValidationMode mode = chakra::ValidationMode::kLenient;
  chakra::DependencyKinds dependencies = chakra::DependencyKinds::kBoth;
  double compute_scale = 1.0;    // multiplies compute times (--compute-scale)
  double comm_scale = 1.0;       // multiplies communication sizes (--comm-scale)
  double injection_scale = 1.0;  // multiplies the endpoint delay when the system sets one
  uint32_t queues_per_dim = 1;   // ASTRA-sim's --num-queues-per-dim (system/collective_engine.h)
  // Simulate one rank when every rank provably behaves alike (sim/symmetry.h); false forces the
  // event-by-event simulation of every rank. Results are identical either way.
  bool fast_path = true;
  // Accelerator memory per rank; a warning names the ranks whose peak exceeds it (0 = unchecked).
  uint64_t memory_capacity = 0;
  size_t threads = 0;  // for per-rank set-up work (dependency graphs, memory); 0 = one per core
};

// The files of `orrery run` (ASTRA-sim's flags).
struct ScenarioFiles {
  std::string workload;       // trace prefix: <workload>.<rank>.et, or one .et file
  std::string system;         // ASTRA-sim system JSON
  std::string network;        // ASTRA-sim network YAML or a graph topology file
  std::string remote_memory;  // ASTRA-sim remote memory JSON ("" = no memory expansion)
  std::string comm_groups;    // communicator-group JSON ("" = only METADATA groups)
  std::string roce_config;    // the roce backend's YAML ("" = its defaults)
  bool uniform = false;       // every rank runs <workload>.0.et (--uniform)
  size_t threads = 0;         // for reading traces; 0 = one per core
  // Already in memory (a hardware preset, `--hardware`): used instead of reading `system` and
  // `network`, which then only name them.
  std::shared_ptr<const sys::SystemConfig> system_config;
  std::shared_ptr<const net::NetworkDescription> network_description;
  std::string perturbation;  // `--perturb` file ("" = none; sim/perturbation.h)
  PresetLoader presets;      // for its hardware entries that name presets
  // Time a message whose ranks differ in several dimensions on the highest of them
  // (net::Topology::charged_dimension), not the lowest as ASTRA-sim does. ASTRA-sim networks only.
  bool charge_highest_dimension = false;
};

class Scenario {
 public:
  struct Inputs {
    std::shared_ptr<const chakra::TraceSet> traces;
    std::shared_ptr<const net::NetworkDescription> network;
    std::shared_ptr<const sys::SystemConfig> system;
    // nullptr: no memory expansion.
    std::shared_ptr<const memory::RemoteMemoryConfig> memory;
    // Groups from a communicator-group file (nullptr: none); groups declared by METADATA nodes
    // are added to them. They are checked against the network's rank count.
    std::shared_ptr<const chakra::CommGroups> comm_groups;
    std::string network_name;  // the network's file, or a description, for reports
    RunSettings settings;
    // Slow ranks, noise, degraded links, failures (nullptr: none). Its links are applied when
    // the scenario is created: network() is the degraded network, inputs().network the given
    // one (so inputs copied into a new scenario are degraded once).
    std::shared_ptr<const Perturbation> perturbation;
  };

  // Checks the inputs against each other: every part present, a backend that runs on this kind of
  // network, at least as many traces as the network has ranks (more: a warning, the rest unused),
  // traces that pass validation in the settings' mode, groups within the rank count; then applies
  // the METADATA groups of every rank's trace in rank order. Errors name the file and what is
  // wrong; a perturbation is resolved against the ranks and the network (errors name its file and
  // line). Cost: O(ranks + groups), no trace is read.
  static Expected<Scenario> create(Inputs inputs);

  const Inputs& inputs() const { return inputs_; }
  const RunSettings& settings() const { return inputs_.settings; }
  const chakra::TraceSet& traces() const { return *inputs_.traces; }
  const net::NetworkDescription& network() const { return *network_; }
  const sys::SystemConfig& system() const { return *inputs_.system; }
  // The remote memory (a no-expansion default when none was given).
  const memory::RemoteMemoryConfig& memory() const;
  // Every group: the file's, then those METADATA nodes declare.
  const chakra::CommGroups& groups() const { return *groups_; }
  // Each rank's compute factor from the perturbation (empty: every rank at 1).
  const std::vector<double>& compute_factors() const { return *compute_factors_; }
  // The perturbation's failures: links of the graph, and the rank whose failure stops the run.
  const ResolvedFailures& failures() const { return *failures_; }
  // Each rank's hardware entry of the perturbation (0: the run's system; empty: 0 for all).
  const std::vector<uint16_t>& hardware_of() const { return *hardware_of_; }
  // The perturbation (an empty one when none was given).
  const Perturbation& perturbation() const;
  // The network's ranks: the ranks that run.
  uint32_t rank_count() const { return inputs_.network->logical.rank_count(); }
  // What the inputs say that a user should hear (ignored keys, lenient repairs, unused ranks).
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  Scenario() = default;

  Inputs inputs_;
  std::shared_ptr<const chakra::CommGroups> groups_;
  std::shared_ptr<const net::NetworkDescription> network_;  // inputs_.network, degraded
  std::shared_ptr<const std::vector<double>> compute_factors_ =
      std::make_shared<const std::vector<double>>();
  std::shared_ptr<const ResolvedFailures> failures_ = std::make_shared<const ResolvedFailures>();
  std::shared_ptr<const std::vector<uint16_t>> hardware_of_ =
      std::make_shared<const std::vector<uint16_t>>();
  std::vector<std::string> warnings_;
};

// Reads ASTRA-sim's files as `orrery run` does and creates the scenario.
Expected<Scenario> load_scenario(const ScenarioFiles& files, RunSettings settings = {});

}  // namespace orrery::sim
