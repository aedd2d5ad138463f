// tests/sim/sim_test_support.h: configuration files and microbenchmark traces written on the spot,
// and a run of the whole simulator on them.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "chakra/trace_builder.h"
#include "gen/microbench.h"
#include "sim/simulation.h"

namespace orrery::test {

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

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

// Runs one microbenchmark collective and returns the run (asserting it succeeded).
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

inline Expected<sim::RunResult> run_micro(const MicroRun& spec, const TempDir& dir) {
  write_text(dir.file("sys.json"), spec.system);
  write_text(dir.file("net.yml"), spec.network);
  gen::MicrobenchSpec micro;
  micro.kind = spec.kind;
  micro.bytes = spec.bytes;
  micro.ranks = spec.ranks;
  micro.compute_us = spec.compute_us;
  auto written = gen::write_microbench(micro, dir.file("micro/w"));
  if (!written) return written.error();
  sim::RunConfig config;
  config.workload = dir.file("micro/w");
  config.system = dir.file("sys.json");
  config.network = dir.file("net.yml");
  config.backend = spec.backend;
  config.rounding = spec.rounding;
  return sim::run_simulation(config, [](const std::string&) {});
}

// The finish time every rank agrees on, in ns (fails the test when ranks differ).
inline int64_t common_finish_ns(const sim::RunResult& result) {
  const int64_t first = result.rank_results.front().finish.ns_truncated();
  for (const auto& rank : result.rank_results)
    EXPECT_EQ(rank.finish.ns_truncated(), first) << "rank " << rank.rank;
  return first;
}

}  // namespace orrery::test
