#include "synth/simulate.h"

#include <filesystem>

#include "core/text_file.h"
#include "sim/simulation.h"
#include "synth/trace_writer.h"

namespace orrery::synth {
namespace {

namespace fs = std::filesystem;

// The built-in platform: an accelerator of 312 TFLOP/s and 2,039 GB/s with the roofline on (an
// A100's figures, as examples/gpt3_175b_1024), collectives by ring, on one switch of 100 GB/s
// links with 1 us latency.
constexpr const char* kSystem = R"({
  "scheduling-policy": "LIFO",
  "endpoint-delay": 10,
  "active-chunks-per-dimension": 1,
  "preferred-dataset-splits": 4,
  "all-reduce-implementation": ["ring"],
  "all-gather-implementation": ["ring"],
  "reduce-scatter-implementation": ["ring"],
  "all-to-all-implementation": ["direct"],
  "collective-optimization": "localBWAware",
  "local-mem-bw": 2039,
  "roofline-enabled": 1,
  "peak-perf": 312
}
)";

}  // namespace

Expected<SimulationBench> SimulationBench::create(const Platform& platform,
                                                  const std::string& scratch) {
  if (platform.ranks < 2) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "the evaluation job needs at least 2 ranks, not {}", platform.ranks);
  }
  std::error_code error;
  fs::create_directories(scratch, error);
  if (error) {
    return Error::make(ErrorKind::kIo, "{}: cannot create the folder: {}", scratch,
                       error.message());
  }
  SimulationBench bench;
  bench.platform_ = platform;
  bench.scratch_ = scratch;
  bench.system_file_ = platform.system;
  bench.network_file_ = platform.network;
  if (bench.system_file_.empty()) {
    bench.system_file_ = (fs::path(scratch) / "system.json").string();
    if (Status status = write_text_file(bench.system_file_, kSystem); !status)
      return status.error();
  }
  if (bench.network_file_.empty()) {
    bench.network_file_ = (fs::path(scratch) / "network.yml").string();
    const std::string text = fmt::format(
        "topology: [ Switch ]\nnpus_count: [ {} ]\nbandwidth: [ 100.0 ]  # GB/s\nlatency: [ "
        "1000.0 ]  # ns\n",
        platform.ranks);
    if (Status status = write_text_file(bench.network_file_, text); !status) return status.error();
  }
  return bench;
}

Expected<SimFigures> SimulationBench::simulate_trace_set(const std::string& prefix,
                                                         const std::string& group_file) const {
  sim::RunConfig config;
  config.workload = prefix;
  config.system = system_file_;
  config.network = network_file_;
  config.comm_groups = group_file;
  config.threads = 1;
  Expected<sim::RunResult> result = sim::run_simulation(config, [](const std::string&) {});
  if (!result) return result.error();
  SimFigures figures;
  figures.time_ns = static_cast<double>(result->end.ps()) / 1000.0;
  double fraction = 0;
  for (const auto& rank : result->rank_results) {
    if (rank.finish > SimTime::zero()) {
      fraction +=
          static_cast<double>(rank.comm_exposed.ps()) / static_cast<double>(rank.finish.ps());
    }
  }
  if (!result->rank_results.empty()) {
    figures.comm_fraction = fraction / static_cast<double>(result->rank_results.size());
  }
  return figures;
}

Expected<SimFigures> SimulationBench::simulate(const Dag& dag, const std::string& name) const {
  const std::string prefix = (fs::path(scratch_) / name).string();
  TraceSetOptions options;
  options.ranks = platform_.ranks;
  Expected<TraceSetReport> written = write_trace_set(dag, prefix, options);
  if (!written) return written.error();
  Expected<SimFigures> figures = simulate_trace_set(prefix, written->group_file);
  std::error_code ignored;
  for (const std::string& file : written->rank_files) fs::remove(file, ignored);
  fs::remove(written->group_file, ignored);
  if (!figures) return figures.error().with_context(dag.source.empty() ? name : dag.source);
  return figures;
}

}  // namespace orrery::synth
