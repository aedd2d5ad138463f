// sim/simulation.h: one run of a Scenario (sim/scenario.h), and its results as data.
//
// A Simulation builds the event engine, the network backend (by name, network/backend_registry.h),
// the collective engine and the workload executor for its scenario, runs to completion, and returns
// what every rank, collective and link did. It owns all its state: several simulations, of the same
// scenario or of scenarios sharing a trace set, may run at once on different threads and give the
// results each gives alone. A run that cannot finish (a receive without a send, a collective some
// member never issues, a dependency cycle) is an Error of kind kDeadlock naming the stuck ranks and
// nodes. Where every rank provably behaves alike (sim/symmetry.h), one representative rank is
// simulated and stands for all, with identical results.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "chakra/dependency_graph.h"
#include "chakra/validation.h"
#include "core/error.h"
#include "network/network_backend.h"
#include "sim/goodput.h"
#include "sim/scenario.h"
#include "system/collective_engine.h"
#include "workload/executor.h"

namespace orrery::sim {

// The files and flags of `orrery run` in one value, for callers that start from files:
// run_simulation() loads the scenario and runs it.
struct RunConfig {
  std::string workload;       // trace prefix: <workload>.<rank>.et
  std::string system;         // ASTRA-sim system JSON
  std::string network;        // ASTRA-sim network YAML
  std::string remote_memory;  // ASTRA-sim remote memory JSON ("" = no memory expansion)
  std::string comm_groups;    // communicator-group JSON ("" = only METADATA groups)
  std::string backend = "analytical";
  // `roce` backend only: its configuration file (network/roce_config.h; "" = defaults) and a file
  // to write its statistics to as JSON ("" = none).
  std::string roce_config;
  std::string roce_stats;
  net::TimeRounding rounding = net::TimeRounding::kAstraSim;
  chakra::ValidationMode mode = chakra::ValidationMode::kLenient;
  chakra::DependencyKinds dependencies = chakra::DependencyKinds::kBoth;
  double compute_scale = 1.0;
  double comm_scale = 1.0;
  double injection_scale = 1.0;
  uint32_t queues_per_dim = 1;  // ASTRA-sim's --num-queues-per-dim (system/collective_engine.h)
  size_t threads = 0;           // for loading traces; 0 = one per core
  // Simulate one rank when every rank provably behaves alike (sim/symmetry.h); off forces the
  // full event-by-event simulation of every rank. Results are identical either way.
  bool fast_path = true;
  // Every rank runs <workload>.0.et (no other rank files are read): for clusters too large to
  // hold a file per rank.
  bool uniform = false;
  // Observers of every rank's activities (timelines, ...); they must outlive the run.
  std::vector<workload::RunObserver*> observers;
  // Accelerator memory per rank; a warning names the ranks whose peak exceeds it (0 = unchecked).
  uint64_t memory_capacity = 0;
  // Called now and then while the run goes (simulated time reached, ranks finished), for progress
  // displays; never called when empty. The run's results do not depend on it.
  std::function<void(SimTime now, uint32_t finished, uint32_t ranks)> progress;
  // In memory instead of the `system` and `network` files (`--hardware`), when set.
  std::shared_ptr<const sys::SystemConfig> system_config;
  std::shared_ptr<const net::NetworkDescription> network_description;
  std::string perturbation;  // `--perturb` file ("" = none; sim/perturbation.h)
  PresetLoader presets;      // for its hardware entries that name presets
  // `--message-dimension highest`: a message whose ranks differ in several dimensions is timed
  // on the highest (net::Topology::charged_dimension); ASTRA-sim networks only.
  bool charge_highest_dimension = false;
};

// Traffic of one network dimension over the whole run.
struct DimensionSummary {
  std::string topology;  // Ring, FullyConnected, Switch
  uint32_t size = 0;
  double bandwidth_gbps = 0;
  uint64_t links = 0;  // directed links in this dimension
  uint64_t links_used = 0;
  uint64_t bytes = 0;
  SimTime busy;  // summed over its links
  // Mean utilization of the dimension's links over the run: busy / (links x end).
  double utilization(SimTime end) const;
};

struct RunResult {
  uint32_t ranks = 0;
  std::vector<workload::RankResult> rank_results;
  std::vector<sys::CollectiveRecord> collectives;
  std::vector<net::LinkStats> links;
  std::vector<DimensionSummary> dimensions;
  std::vector<std::string> collective_group_names;  // by group id
  std::vector<uint64_t> peak_memory;                // by rank: peak bytes held (local_memory.h)
  SimTime end;                                      // the latest finish
  uint64_t events = 0;                              // events handled
  uint64_t messages = 0;                            // network messages sent
  bool symmetric = false;                           // one representative rank was simulated for all
  std::string symmetry_note;  // why the run was not symmetric, when it was not
  // Which simulation ran: "full" (every rank), "symmetric" (one rank for all, sim/symmetry.h) or
  // "classes" (one representative per class of alike ranks, sim/rank_classes.h); the ranks
  // simulated (1, the class count, or every rank); and, when it fell back to full simulation with
  // the fast path on, why (the symmetric path's reason, then the classes').
  std::string mode = "full";
  uint32_t simulated_ranks = 0;
  std::string fast_path_note;
  // Links were too many to list one by one (a symmetric run of a huge network): `links` is empty
  // and `dimensions` holds the totals.
  bool links_aggregated = false;
  std::string backend;
  std::vector<std::string> network_notes;  // backend-specific summary lines (roce)
  std::string network_stats_json;          // backend-specific statistics ("" when none: roce's)
  // What the run found that a user should hear (ranks over the memory capacity, untracked
  // memory); the scenario's own warnings are Scenario::warnings().
  std::vector<std::string> warnings;
  // What was run, for reports: the workload, network and system as named by the scenario.
  std::string workload;
  std::string network;
  std::string system;
  net::TimeRounding rounding = net::TimeRounding::kAstraSim;
  // The perturbation file the run followed ("" = none), and what its failures leave of a long
  // job of iterations as long as this run (sim/goodput.h), when it has a goodput section.
  std::string perturbation;
  std::optional<GoodputResult> goodput;
  // Why the run stopped before every rank finished (a rank's failure), "" when it did not.
  std::string stopped;
};

// Called now and then while a run goes (simulated time reached, ranks finished), for progress
// displays. The run's results do not depend on it.
using ProgressFn = std::function<void(SimTime now, uint32_t finished, uint32_t ranks)>;

class Simulation {
 public:
  explicit Simulation(Scenario scenario) : scenario_(std::move(scenario)) {}

  // Observers of every rank's activities (timelines, ...); they must outlive run(). Before run().
  void add_observer(workload::RunObserver& observer) { observers_.push_back(&observer); }
  void set_progress(ProgressFn progress) { progress_ = std::move(progress); }

  // Runs the scenario to completion. Once per Simulation (asserted).
  Expected<RunResult> run();

  const Scenario& scenario() const { return scenario_; }

 private:
  Scenario scenario_;
  std::vector<workload::RunObserver*> observers_;
  ProgressFn progress_;
  bool ran_ = false;
};

// The system layer's group table of `groups`: "" (and "0" when it names every rank) is group 0,
// then the named groups in order, each with its ranks. `all_ranks_ids` holds the names of group 0.
struct GroupTable {
  std::map<std::string, uint32_t> ids;                                   // pg_name -> engine group
  std::vector<std::string> names{""};                                    // by engine group
  std::vector<std::pair<std::string, std::vector<net::Rank>>> declared;  // groups 1, 2, ...
  std::map<std::string, uint32_t> all_ranks_ids;
};
GroupTable group_table(const chakra::CommGroups& groups);

// The workload executor's options for `scenario`: its system's compute, the settings' scales and
// dependencies, its memory, its perturbation's factors, noise and hardware.
workload::ExecutorOptions executor_options(const Scenario& scenario);

// A Simulation of `scenario`, run.
Expected<RunResult> simulate(const Scenario& scenario);

// Loads the scenario of `config`'s files, runs it and writes --roce-stats when asked. Warnings
// (the scenario's, then the run's) are passed to `warn`.
Expected<RunResult> run_simulation(const RunConfig& config,
                                   const std::function<void(const std::string&)>& warn);

// The files and settings of `config` as a scenario's.
ScenarioFiles scenario_files(const RunConfig& config);
RunSettings run_settings(const RunConfig& config);

}  // namespace orrery::sim
