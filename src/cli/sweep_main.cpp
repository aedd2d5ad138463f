// orrery-sweep: the `orrery sweep` verb, cluster design-space exploration (COMET), on one machine
// or over MPI (orrery execs it; it alone links MPI).
//
//   orrery sweep FILE --db results.sqlite [--threads N] [--csv out.csv] [--progress auto|on|off]
//                [--count]
//   mpirun -np N orrery sweep FILE --db results.sqlite
//   orrery sweep report results.sqlite -o report.html
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <memory>
#include <string>

#include <fmt/core.h>

#include "cli/commands.h"
#include "cli/validators.h"
#include "core/text_file.h"
#include "core/units.h"
#include "design/sweep_answers.h"
#include "design/sweep_file.h"
#include "design/sweep_mpi.h"
#include "design/sweep_report.h"
#include "design/sweep_run.h"
#include "design/sweep_space.h"
#include "design/sweep_store.h"

#ifndef ORRERY_VERSION
#define ORRERY_VERSION "unknown"
#endif

namespace orrery::cli {

namespace {

struct SweepOptions {
  std::string file;
  std::string db;
  std::string csv;
  size_t threads = 0;
  std::string progress = "auto";
  bool count = false;
  // sweep report
  std::string report_db;
  std::string report_out;
  size_t top = 10;
};

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

std::string duration(double seconds) {
  if (!std::isfinite(seconds)) return "?";
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s / 60) % 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

int run_sweep_command(const SweepOptions& options) {
  // Every rank of an MPI job reads and expands the same file; rank 0 alone writes.
  std::unique_ptr<design::MpiWorld> world = design::MpiWorld::init_if_launched();
  const bool worker = world && world->rank() > 0;
  auto fail = [&](const Error& error) {
    const int code = report_error(
        world && world->size() > 1 ? error.with_context(fmt::format("MPI rank {}", world->rank()))
                                   : error);
    if (world && world->size() > 1) world->abort(code);
    return code;
  };
  Expected<design::SweepSpec> spec = design::load_sweep_file(options.file);
  if (!spec) return fail(spec.error());
  Expected<std::vector<design::SweepPoint>> points = design::expand_sweep(*spec);
  if (!points) return fail(points.error());
  const std::string hash = design::sweep_hash(spec->text);
  if (worker) {
    if (Status s = world->serve(*spec, *points, options.threads, hash); !s) return fail(s.error());
    return 0;
  }
  if (options.count) {
    uint64_t refused = 0;
    for (const design::SweepPoint& p : *points) refused += p.reason.empty() ? 0u : 1u;
    fmt::print("{}: {} points ({} refused by the rules)\n", spec->name,
               format_count(points->size()), format_count(refused));
    return 0;
  }
  if (options.db.empty()) {
    return fail(Error::make(ErrorKind::kInvalidArgument, "missing --db results.sqlite"));
  }
  Expected<std::unique_ptr<design::SweepStore>> store =
      design::SweepStore::open(options.db, *spec, points->size());
  if (!store) return fail(store.error());

  const bool show =
      options.progress == "on" || (options.progress == "auto" && isatty(STDERR_FILENO) != 0);
  bool shown = false;
  design::SweepRunOptions run;
  run.threads = options.threads;
  std::unique_ptr<design::RemoteWorkers> remote;
  if (world && world->size() > 1) {
    remote = world->coordinator(hash);
    run.remote = remote.get();
  }
  if (show) {
    run.progress = [&](const design::SweepProgress& p) {
      const double rate = p.seconds > 0 ? static_cast<double>(p.simulated) / p.seconds : 0;
      const double eta =
          rate > 0 ? static_cast<double>(p.to_simulate - p.simulated) / rate : std::nan("");
      const size_t width = 30;
      const size_t filled = p.total ? static_cast<size_t>(width * p.done / p.total) : width;
      fmt::print(stderr, "\r[{}{}] {}/{} points, {}/{} simulated, {:.2f} simulated/s, ETA {}   ",
                 std::string(filled, '#'), std::string(width - filled, '.'), format_count(p.done),
                 format_count(p.total), format_count(p.simulated), format_count(p.to_simulate),
                 rate, p.simulated == p.to_simulate ? "0s" : duration(eta));
      shown = true;
    };
  }
  const double cpu_before = cpu_seconds();
  Expected<design::SweepProgress> result = design::run_sweep(*spec, *points, **store, run);
  if (shown) fmt::print(stderr, "\n");
  if (!result) return fail(result.error());
  store->reset();  // closes the database before reading it back
  const double cpu = cpu_seconds() - cpu_before;
  const uint64_t evaluated = result->done - result->stored;
  fmt::print(
      "{}: {} points; {} stored before, {} evaluated now ({} ran, {} rejected, {} failed) in "
      "{:.1f} "
      "s wall, {:.1f} s CPU{}\n",
      spec->name, format_count(result->total), format_count(result->stored),
      format_count(evaluated), format_count(result->ok), format_count(result->rejected),
      format_count(result->failed), result->seconds, cpu,
      world && world->size() > 1 ? fmt::format(" on rank 0 of {}", world->size()) : "");
  if (result->seconds > 0 && evaluated > 0) {
    fmt::print("rate: {:.2f} points/s, {:.3f} simulated points/s ({} simulated)\n",
               static_cast<double>(evaluated) / result->seconds,
               static_cast<double>(result->simulated) / result->seconds,
               format_count(result->simulated));
  }
  Expected<design::StoredSweep> stored = design::read_sweep_db(options.db);
  if (!stored) return fail(stored.error());
  fmt::print("{}", design::format_answers(*stored, design::answer_sweep(*stored, options.top)));
  fmt::print("wrote {}\n", options.db);
  if (!options.csv.empty()) {
    if (Status s = design::write_sweep_csv(options.db, options.csv); !s) return fail(s.error());
    fmt::print("wrote {}\n", options.csv);
  }
  return 0;
}

int run_report_command(const SweepOptions& options) {
  Expected<design::StoredSweep> stored = design::read_sweep_db(options.report_db);
  if (!stored) return report_error(stored.error());
  const std::string html =
      design::sweep_report_html(*stored, design::answer_sweep(*stored, options.top));
  std::string output = options.report_out;
  if (output.empty()) output = options.report_db + ".html";
  if (Status written = write_text_file(output, html); !written) {
    return report_error(written.error());
  }
  fmt::print("wrote {}\n", output);
  return 0;
}

}  // namespace
}  // namespace orrery::cli

int main(int argc, char** argv) {
  using namespace orrery;
  using namespace orrery::cli;
  auto options = std::make_shared<SweepOptions>();
  int exit_code = 0;
  CLI::App app{
      "Explore cluster designs (COMET): every point of a sweep file (model; accelerators, FLOP/s,\n"
      "HBM, network bandwidth per dimension, memory expansion; tp, pp, dp, ZeRO, recompute,\n"
      "micro-batch, schedule, offload) is a generated workload simulated on its cluster, unless\n"
      "the rules, the budget or the memory reject it first. Results go to SQLite, one row per\n"
      "point; a killed sweep continues where it stopped. Under mpirun, rank 0 deals the points to\n"
      "every rank and writes the same database. See docs/formats/sweep.md, docs/models/sweep.md\n"
      "  e.g. orrery sweep examples/sweep/gpt3_175b_1024.yml --db gpt3.sqlite --csv gpt3.csv\n"
      "       mpirun -np 4 orrery sweep sweep.yml --db results.sqlite\n"
      "       orrery sweep report gpt3.sqlite -o gpt3.html"};
  app.name("orrery sweep");
  app.set_version_flag("--version", std::string("orrery ") + ORRERY_VERSION);
  CLI::App* cmd = &app;
  cmd->add_option("file", options->file, "sweep file (YAML, docs/formats/sweep.md)");
  cmd->add_option("--db", options->db, "SQLite database of the results (created, or resumed)");
  cmd->add_option("--threads", options->threads, "worker threads (per MPI rank); 0 = one per core")
      ->check(cli::thread_count());
  cmd->add_option("--csv", options->csv, "also write the points table as CSV");
  cmd->add_option("--progress", options->progress,
                  "progress bar on stderr: auto (when a terminal), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  cmd->add_flag("--count", options->count, "only count the points (no database, no simulation)");
  cmd->add_option("--top", options->top, "best points to list")->check(CLI::PositiveNumber);
  CLI::App* report = cmd->add_subcommand(
      "report",
      "Render a sweep database as one self-contained HTML page (best points and their\n"
      "breakdown, time against cost with the Pareto frontier, best per budget, sensitivity of\n"
      "every axis, rejections by reason)\n"
      "  e.g. orrery sweep report gpt3.sqlite -o gpt3.html");
  report->add_option("db", options->report_db, "SQLite database of `orrery sweep`")->required();
  report->add_option("-o,--output", options->report_out,
                     "HTML file to write (default: the database's name with .html)");
  report->add_option("--top", options->top, "best points to list")->check(CLI::PositiveNumber);
  report->callback([options, &exit_code]() { exit_code = run_report_command(*options); });
  cmd->callback([options, cmd, &exit_code]() {
    if (cmd->got_subcommand("report")) return;
    if (options->file.empty()) {
      exit_code = report_error(Error::make(ErrorKind::kInvalidArgument,
                                           "sweep: give a sweep file (or `sweep report DB`)"));
      return;
    }
    exit_code = run_sweep_command(*options);
  });
  if (const std::optional<int> stop = orrery::cli::parse_command_line(app, argc, argv))
    return *stop;
  return exit_code;
}
