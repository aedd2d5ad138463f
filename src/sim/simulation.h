// sim/simulation.h: one run = workload x system x network x memory, from ASTRA-sim's input files.
//
// run_simulation() reads the network (rank count), every rank's trace (in parallel), the system,
// remote-memory and communicator-group files; validates the traces in the chosen mode; builds the
// event engine, network backend, collective engine and workload executor; runs to completion; and
// returns what every rank, collective and link did. A run that cannot finish (a receive without a
// send, a collective some member never issues, a dependency cycle) is an Error of kind kDeadlock
// naming the stuck ranks and nodes. One Simulation owns all its state: runs can share a process.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "chakra/dependency_graph.h"
#include "chakra/validation.h"
#include "core/error.h"
#include "network/network_backend.h"
#include "system/collective_engine.h"
#include "workload/executor.h"

namespace orrery::sim {

struct RunConfig {
  std::string workload;       // trace prefix: <workload>.<rank>.et
  std::string system;         // ASTRA-sim system JSON
  std::string network;        // ASTRA-sim network YAML
  std::string remote_memory;  // ASTRA-sim remote memory JSON ("" = no memory expansion)
  std::string comm_groups;    // communicator-group JSON ("" = only METADATA groups)
  std::string backend = "analytical";
  net::TimeRounding rounding = net::TimeRounding::kAstraSim;
  chakra::ValidationMode mode = chakra::ValidationMode::kLenient;
  chakra::DependencyKinds dependencies = chakra::DependencyKinds::kBoth;
  double compute_scale = 1.0;
  double comm_scale = 1.0;
  double injection_scale = 1.0;
  size_t threads = 0;  // for loading traces; 0 = one per core
};

struct RunResult {
  uint32_t ranks = 0;
  std::vector<workload::RankResult> rank_results;
  std::vector<sys::CollectiveRecord> collectives;
  std::vector<net::LinkStats> links;
  std::vector<std::string> collective_group_names;  // by group id
  SimTime end;                                      // the latest finish
  uint64_t events = 0;                              // events handled
  uint64_t messages = 0;                            // network messages sent
  std::string backend;
};

// Warnings (lenient repairs, ignored configuration keys) are passed to `warn` as they are found.
Expected<RunResult> run_simulation(const RunConfig& config,
                                   const std::function<void(const std::string&)>& warn);

}  // namespace orrery::sim
