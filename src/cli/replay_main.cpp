// orrery-replay: the `orrery replay` verb (orrery execs it; it links libtorch, MPI and Gloo).
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <tuple>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "convert/rank_directory.h"
#include "core/text_file.h"
#include "replay/replay.h"

#ifndef ORRERY_VERSION
#define ORRERY_VERSION "unknown"
#endif

namespace {

// The rank a launcher gave this process (torchrun, or `--backend gloo` itself): RANK and
// WORLD_SIZE, as torch.distributed reads them. nullopt when either is unset; an error when one is
// not a number.
using LauncherRank = std::optional<std::pair<uint32_t, uint32_t>>;
orrery::Expected<LauncherRank> launcher_rank() {
  const char* rank = std::getenv("RANK");
  const char* world = std::getenv("WORLD_SIZE");
  if (rank == nullptr || world == nullptr) return LauncherRank{};
  std::pair<uint32_t, uint32_t> given;
  for (const auto& [name, text, value] :
       {std::tuple{"RANK", rank, &given.first}, std::tuple{"WORLD_SIZE", world, &given.second}}) {
    const char* end = text + std::strlen(text);
    const auto [at, error] = std::from_chars(text, end, *value);
    if (error != std::errc() || at != end || at == text) {
      return orrery::Error::make(orrery::ErrorKind::kInvalidArgument,
                                 "--backend gloo: {}='{}' in the environment is not a rank count "
                                 "or number (a launcher sets RANK and WORLD_SIZE)",
                                 name, text);
    }
  }
  return LauncherRank{given};
}

extern "C" char** environ;

// `--backend gloo` with no launcher: one process per rank on this machine, each this program with
// the same arguments, RANK and WORLD_SIZE set and a fresh FileStore directory (--store), reached
// over the loopback. Rank 0 prints the job's output; every rank's errors reach stderr. When a rank
// fails, the others are stopped (they would wait for it) and its exit code is the command's.
int launch_local_ranks(uint32_t world, int argc, char** argv) {
  using namespace orrery;
  Expected<std::filesystem::path> temp = temp_folder();
  if (!temp) return cli::report_error(temp.error());
  std::string store = (*temp / "orrery-gloo-XXXXXX").string();
  if (::mkdtemp(store.data()) == nullptr) {
    return cli::report_error(Error::make(ErrorKind::kIo, "{}: cannot make the Gloo store: {}",
                                         store, std::strerror(errno)));
  }
  std::vector<std::string> args(argv, argv + argc);
  args.insert(args.end(), {"--store", store});
  std::vector<char*> arg_ptrs;
  for (std::string& arg : args) arg_ptrs.push_back(arg.data());
  arg_ptrs.push_back(nullptr);
  std::vector<std::string> base_env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    if (text.starts_with("RANK=") || text.starts_with("WORLD_SIZE=") ||
        text.starts_with("ORRERY_GLOO_HOST=")) {
      continue;
    }
    base_env.emplace_back(text);
  }
  std::vector<pid_t> children;
  int exit_code = 0;
  for (uint32_t rank = 0; rank < world && exit_code == 0; ++rank) {
    std::vector<std::string> env = base_env;
    env.push_back(fmt::format("RANK={}", rank));
    env.push_back(fmt::format("WORLD_SIZE={}", world));
    env.push_back("ORRERY_GLOO_HOST=127.0.0.1");
    std::vector<char*> env_ptrs;
    for (std::string& entry : env) env_ptrs.push_back(entry.data());
    env_ptrs.push_back(nullptr);
    pid_t pid = 0;
    const int code =
        ::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, arg_ptrs.data(), env_ptrs.data());
    if (code != 0) {
      fmt::print(stderr, "orrery replay: error: cannot start rank {}: {}\n", rank,
                 std::strerror(code));
      exit_code = 1;
      break;
    }
    children.push_back(pid);
  }
  size_t running = children.size();
  if (exit_code != 0) {
    for (const pid_t pid : children) ::kill(pid, SIGTERM);
  }
  while (running > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (std::find(children.begin(), children.end(), pid) == children.end()) continue;
    --running;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0 && exit_code == 0) {
      exit_code = code;
      for (const pid_t other : children) {
        if (other != pid) ::kill(other, SIGTERM);
      }
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(store, ignored);
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace orrery;
  CLI::App app{
      "Replays a PyTorch execution trace as a benchmark: every outermost operator re-run by "
      "libtorch with tensors of the recorded shapes, communication as real collectives across "
      "processes (one per rank, over MPI or Gloo), timed against the recorded run.\n"
      "  orrery replay TRACE.json[.gz] [--profile PROFILER_TRACE.json[.gz]]\n"
      "  mpirun -np 2 orrery replay --dir traces/\n"
      "  orrery replay --dir traces/ --backend gloo"};
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
                 "a directory of per-rank traces (as orrery convert --dir): under mpirun or with "
                 "--backend gloo each process replays its rank");
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
  app.add_flag("--autograd", options.autograd,
               "run each backward pass through libtorch's autograd engine from the recorded loss, "
               "as the recorded run did, rather than its recorded ops one by one (the engine's "
               "own time counts; each op of the pass gets its share of the measured whole)");
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
  std::string backend;
  std::string store;
  app.add_option("--backend", backend,
                 "how the rank processes communicate: mpi (under mpirun, the default there) or "
                 "gloo (Gloo over TCP: with --dir, starts one process per rank on this machine; "
                 "under a launcher that sets RANK and WORLD_SIZE, such as torchrun, joins them "
                 "through --store)")
      ->check(CLI::IsMember({"mpi", "gloo"}));
  app.add_option("--store", store,
                 "with --backend gloo under a launcher: the directory where the rank processes "
                 "meet (one every process can reach: a shared file system across machines); "
                 "each rank is reached at ORRERY_GLOO_HOST, else the machine's host name");
  if (const std::optional<int> stop = orrery::cli::parse_command_line(app, argc, argv))
    return *stop;

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
  const bool by_mpi = replay::launched_by_mpi();
  if (backend == "mpi" && !by_mpi) {
    return cli::report_error(Error::make(
        ErrorKind::kInvalidArgument,
        "--backend mpi needs an MPI launcher: mpirun -np N orrery replay --dir traces/ (or "
        "--backend gloo, which starts the processes itself)"));
  }
  if (backend == "gloo") {
    if (by_mpi) {
      return cli::report_error(Error::make(
          ErrorKind::kInvalidArgument,
          "--backend gloo starts its own processes (or joins a launcher's that sets RANK and "
          "WORLD_SIZE); under mpirun the replay runs over MPI: leave --backend out"));
    }
    if (options.dir.empty() || rank) {
      return cli::report_error(
          Error::make(ErrorKind::kInvalidArgument,
                      "--backend gloo replays every rank of --dir, one process each (without "
                      "--rank)"));
    }
    const orrery::Expected<std::optional<std::pair<uint32_t, uint32_t>>> launched = launcher_rank();
    if (!launched) return cli::report_error(launched.error());
    const std::optional<std::pair<uint32_t, uint32_t>>& given = *launched;
    if (!given) {
      if (!store.empty()) {
        return cli::report_error(Error::make(
            ErrorKind::kInvalidArgument,
            "--store goes with a launcher that sets RANK and WORLD_SIZE; without one, --backend "
            "gloo makes its own store"));
      }
      Expected<convert::DirectoryPlan> set = convert::plan_rank_directory(options.dir);
      if (!set) return cli::report_error(set.error());
      return launch_local_ranks(static_cast<uint32_t>(set->ranks.size()), argc, argv);
    }
    if (store.empty()) {
      return cli::report_error(Error::make(
          ErrorKind::kInvalidArgument,
          "--backend gloo under a launcher (RANK={}, WORLD_SIZE={}) needs --store DIR, a "
          "directory every rank process can reach",
          given->first, given->second));
    }
    const char* host = std::getenv("ORRERY_GLOO_HOST");
    Expected<std::unique_ptr<replay::Communicator>> gloo = replay::make_gloo_communicator(
        given->first, given->second, store, host != nullptr ? host : "");
    if (!gloo) return cli::report_error(gloo.error());
    communicator = std::move(*gloo);
  } else if (!store.empty()) {
    return cli::report_error(
        Error::make(ErrorKind::kInvalidArgument, "--store goes with --backend gloo"));
  } else if (by_mpi) {
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
    if (Status written = orrery::write_text_file(json_path, job.dump(2) + "\n"); !written)
      return cli::report_error(written.error());
  }
  if (!html_path.empty()) {
    if (Status written = orrery::write_text_file(html_path, replay::format_html(job, top));
        !written)
      return cli::report_error(written.error());
  }
  if (!calibration_path.empty()) {
    if (Status written =
            orrery::write_text_file(calibration_path, replay::calibration_table(outcome->report));
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
