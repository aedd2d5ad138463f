// orrery-replay: the `orrery replay` verb (orrery execs it; it links libtorch and MPI).
#include <cstdio>
#include <fstream>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "replay/replay.h"

#ifndef ORRERY_VERSION
#define ORRERY_VERSION "unknown"
#endif

namespace {

orrery::Status write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) {
    return orrery::Error::make(orrery::ErrorKind::kIo, "{}: cannot write", path);
  }
  return orrery::Status::ok();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace orrery;
  CLI::App app{
      "Replays a PyTorch execution trace as a benchmark: every outermost operator re-run by "
      "libtorch with tensors of the recorded shapes, communication as real collectives across "
      "processes (mpirun -np N, one process per rank), timed against the recorded run.\n"
      "  orrery replay TRACE.json[.gz] [--profile PROFILER_TRACE.json[.gz]]\n"
      "  mpirun -np 2 orrery replay --dir traces/"};
  app.name("orrery replay");
  app.set_version_flag("--version", std::string("orrery ") + ORRERY_VERSION);
  replay::ReplayOptions options;
  std::optional<uint32_t> rank;
  std::optional<int64_t> iteration;
  std::string json_path;
  std::string html_path;
  std::string calibration_path;
  bool json = false;
  bool quiet = false;
  bool sync_comm = false;
  size_t top = 10;
  app.add_option("trace", options.trace,
                 "PyTorch execution trace (schema 1.0.1 to 1.1.1, .json or .json.gz)");
  app.add_option("--profile", options.profile,
                 "the profiler trace of the same run (Kineto, or the Chrome trace the profiler "
                 "writes without Kineto): recorded times and the original iteration");
  app.add_option("--dir", options.dir,
                 "a directory of per-rank traces (as orrery convert --dir): under mpirun each "
                 "process replays its rank");
  app.add_option("--rank", rank, "with --dir in one process: the rank to replay alone");
  app.add_option("--iteration", iteration,
                 "the ProfilerStep#N to replay (default: the first marker; the whole trace when "
                 "it has none)");
  app.add_option("--warmup", options.warmup, "warm-up iterations, after the check pass")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  app.add_option("--iterations", options.iterations, "measured iterations")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--threads", options.threads,
                 "libtorch intra-op threads (default: libtorch's, OMP_NUM_THREADS)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--seed", options.seed, "seed of the tensor contents")->capture_default_str();
  bool keep_subnormals = false;
  app.add_flag("--keep-subnormals", keep_subnormals,
               "compute with subnormal floats (default: flushed to zero, as their slow arithmetic "
               "makes times depend on the random tensor contents)");
  app.add_flag("--sync-comm", sync_comm,
               "run each collective where it was issued, blocking (default: on a communication "
               "thread, waited for by the first operator that uses its tensors)");
  app.add_option("--emit-chakra", options.emit_chakra,
                 "write PREFIX.<rank>.et: the trace as Chakra with the measured durations, for "
                 "orrery run");
  app.add_option("--calibration-table", calibration_path,
                 "write the replayed matrix products and streaming ops with their measured times "
                 "as a table for orrery calibrate --table (rank 0's; docs/models/compute.md)");
  app.add_flag("--json", json,
               "print one JSON object (iteration_us, original_us, "
               "coverage_by_count, coverage_by_time, skipped, ...)");
  app.add_option("-o,--output", json_path, "also write the JSON object to this file");
  app.add_option("--html", html_path, "write a self-contained HTML report");
  app.add_option("--top", top, "operators shown in the tables")->capture_default_str();
  app.add_flag("-q,--quiet", quiet, "print nothing but errors");
  CLI11_PARSE(app, argc, argv);

  if (options.trace.empty() == options.dir.empty()) {
    return cli::report_error(
        Error::make(ErrorKind::kInvalidArgument, "give a trace file or --dir (one of them)"));
  }
  if (!options.dir.empty() && !options.profile.empty()) {
    return cli::report_error(Error::make(
        ErrorKind::kInvalidArgument,
        "--profile goes with a trace file; with --dir each rank's profiler trace is found in the "
        "directory"));
  }
  if (rank && options.dir.empty()) {
    return cli::report_error(Error::make(ErrorKind::kInvalidArgument, "--rank goes with --dir"));
  }
  options.rank = rank;
  options.iteration = iteration;
  options.async_comm = !sync_comm;
  options.flush_subnormals = !keep_subnormals;

  std::unique_ptr<replay::Communicator> communicator;
  if (replay::launched_by_mpi()) {
    Expected<std::unique_ptr<replay::Communicator>> mpi =
        replay::make_mpi_communicator(&argc, &argv);
    if (!mpi) return cli::report_error(mpi.error());
    communicator = std::move(*mpi);
  } else {
    communicator = replay::make_local_communicator();
  }
  const uint32_t world = communicator->size();
  const uint32_t me = communicator->rank();
  Expected<replay::ReplayOutcome> outcome = replay::replay(options, *communicator);
  if (!outcome) {
    const Error error =
        world > 1 ? outcome.error().with_context(fmt::format("rank {}", me)) : outcome.error();
    return cli::report_error(error);
  }
  if (me != 0) return 0;
  const nlohmann::json job = replay::job_json(outcome->ranks);
  if (!json_path.empty()) {
    if (Status written = write_text(json_path, job.dump(2) + "\n"); !written)
      return cli::report_error(written.error());
  }
  if (!html_path.empty()) {
    if (Status written = write_text(html_path, replay::format_html(job, top)); !written)
      return cli::report_error(written.error());
  }
  if (!calibration_path.empty()) {
    if (Status written = write_text(calibration_path, replay::calibration_table(outcome->report));
        !written)
      return cli::report_error(written.error());
  }
  if (json) {
    fmt::print("{}\n", job.dump(2));
  } else if (!quiet) {
    fmt::print("{}", replay::format_text(outcome->report, top));
    if (world > 1) fmt::print("{}", replay::format_ranks_text(outcome->ranks));
    if (!outcome->emitted.empty()) {
      fmt::print("wrote {}: {} nodes, the measured durations{}\n", outcome->emitted,
                 outcome->emitted_nodes, world > 1 ? " (every rank its own file)" : "");
    }
    if (!html_path.empty()) fmt::print("wrote {}\n", html_path);
    if (!calibration_path.empty()) fmt::print("wrote {}\n", calibration_path);
  }
  return 0;
}
