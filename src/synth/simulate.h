// synth/simulate.h: a rank program's simulated iteration time, the figure samples are judged by.
//
// A Dag is written as an SPMD trace set of N ranks (synth/trace_writer.h) into a scratch folder
// and simulated by orrery's simulator on a fixed evaluation platform: a system file (default: the
// built-in one below, roofline on) and a network (default: one switch of N ranks). Real and
// synthetic graphs go through the same function, so their figures compare. simulate_trace_set()
// is the only call into the simulator in this library (sim::run_simulation today).
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"
#include "synth/dag.h"

namespace orrery::synth {

struct Platform {
  std::string system;   // ASTRA-sim system JSON; "" = the built-in one
  std::string network;  // ASTRA-sim network YAML; "" = the built-in switch of `ranks` ranks
  uint32_t ranks = 8;   // ranks of the job every graph runs as (at least 2)
};

struct SimFigures {
  double time_ns = 0;        // the slowest rank's finish
  double comm_fraction = 0;  // communication not overlapped with compute / finish, rank mean
};

// A folder with the platform's files written once (the built-in system and network when not
// given), and unique scratch prefixes under it for concurrent simulations.
class SimulationBench {
 public:
  // Creates `scratch` (a folder that may exist) and writes the built-in files into it.
  static Expected<SimulationBench> create(const Platform& platform, const std::string& scratch);

  const Platform& platform() const { return platform_; }
  // Writes `dag` as a trace set at <scratch>/<name> and simulates it; the files are removed
  // afterwards. Thread-safe for distinct names.
  Expected<SimFigures> simulate(const Dag& dag, const std::string& name) const;
  // Simulates an existing trace set (prefix) with its group file ("" for none).
  Expected<SimFigures> simulate_trace_set(const std::string& prefix,
                                          const std::string& group_file) const;

 private:
  Platform platform_;
  std::string scratch_;
  std::string system_file_;
  std::string network_file_;
};

}  // namespace orrery::synth
