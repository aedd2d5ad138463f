// hardware/collective_bench.h: nccl-tests for the simulator (`orrery collective`).
//
// For every size from min to max (times `factor` each step, as nccl-tests' -b -e -f), one
// collective of that size is simulated on the machine: a one-collective trace set in memory
// (gen/microbench.h), a sim::Scenario and a sim::Simulation; its time is the run's end. Rows
// carry nccl-tests' columns: size (bytes, as nccl-tests counts them: the whole gathered or
// scattered buffer for all-gather and reduce-scatter, rounded down to a multiple of ranks x 4 bytes
// for those and all-to-all), count (floats), time (us), algbw = size / time and busbw = algbw x
// nccl-tests' factor (sys::nccl_bus_factor). The trace gives each rank its share: all-gather's per
// rank input is size / ranks; the others' size.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "gen/microbench.h"
#include "network/graph_yaml.h"
#include "network/network_backend.h"
#include "system/nccl_model.h"
#include "system/system_config.h"

namespace orrery::hw {

struct BenchMachine {
  std::shared_ptr<const sys::SystemConfig> system;
  std::shared_ptr<const net::NetworkDescription> network;
  std::string name;  // for messages
};

struct BenchOptions {
  gen::MicrobenchKind op = gen::MicrobenchKind::kAllReduce;
  uint64_t min_bytes = 8;
  uint64_t max_bytes = 8;
  uint64_t factor = 2;  // at least 2 unless min == max
  std::string backend = "analytical";
  net::TimeRounding rounding = net::TimeRounding::kAstraSim;
};

struct BenchRow {
  uint64_t size = 0;
  uint64_t count = 0;
  double time_us = 0;
  double algbw = 0;  // GB/s, 10^9 bytes per second
  double busbw = 0;
  // The algorithm and protocol the `nccl` model picks for the size, when the system runs the op
  // with it (what NCCL_DEBUG_SUBSYS=TUNING would say; nccl-tests itself does not print it).
  std::optional<sys::NcclEstimate> nccl;
};

// all-reduce, all-gather, reduce-scatter, all-to-all, broadcast, reduce; Error otherwise.
Expected<sys::NcclOp> bench_op(gen::MicrobenchKind kind);

// The sizes of a sweep (each rounded as nccl-tests does for the op; sizes that round to 0 are
// left out). Error (kInvalidArgument) for min > max, a factor below 2 with min < max, or more
// than 200 sizes.
Expected<std::vector<uint64_t>> bench_sizes(const BenchOptions& options, uint32_t ranks);

// One row per size. Errors are the scenario's or the run's (an algorithm the system file lists
// that cannot run the op, ...), with the size.
Expected<std::vector<BenchRow>> run_bench(const BenchMachine& machine, const BenchOptions& options,
                                          const std::vector<uint64_t>& sizes);

}  // namespace orrery::hw
