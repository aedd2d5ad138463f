// `orrery gen`: write synthetic Chakra traces.
//
//   orrery gen microbench --collective all-reduce --size 1MiB --ranks 8 [--compute-us N]
//                         [--pg-name NAME] -o PREFIX
#include <memory>
#include <string>

#include <fmt/core.h>

#include "cli/commands.h"
#include "core/units.h"
#include "gen/microbench.h"

namespace orrery::cli {

namespace {

struct MicrobenchOptions {
  std::string collective;
  std::string size;
  uint32_t ranks = 0;
  uint64_t compute_us = 0;
  std::string pg_name;
  std::string output;
};

int run_microbench(const MicrobenchOptions& options) {
  Expected<gen::MicrobenchKind> kind = gen::parse_microbench_kind(options.collective);
  if (!kind) return report_error(kind.error().with_context("--collective"));
  gen::MicrobenchSpec spec;
  spec.kind = *kind;
  spec.ranks = options.ranks;
  spec.compute_us = options.compute_us;
  spec.pg_name = options.pg_name;
  if (options.size.empty()) {
    if (spec.kind != gen::MicrobenchKind::kBarrier) {
      return report_error(Error::make(ErrorKind::kInvalidArgument,
                                      "missing --size BYTES (e.g. 1048576, 1MiB or 64KB)"));
    }
  } else {
    Expected<uint64_t> bytes = parse_bytes(options.size);
    if (!bytes) return report_error(bytes.error().with_context("--size"));
    spec.bytes = *bytes;
  }
  Expected<std::vector<std::string>> paths = gen::write_microbench(spec, options.output);
  if (!paths) return report_error(paths.error());
  fmt::print("wrote {} rank file{}: {}{}\n", paths->size(), paths->size() == 1 ? "" : "s",
             paths->front(), paths->size() == 1 ? "" : fmt::format(" .. {}", paths->back()));
  return 0;
}

}  // namespace

void add_gen_command(CLI::App& app, int& exit_code) {
  CLI::App* gen = app.add_subcommand(
      "gen", "Generate synthetic Chakra traces (one .et file per rank, as ASTRA-sim reads them)");
  gen->require_subcommand(1);

  auto options = std::make_shared<MicrobenchOptions>();
  CLI::App* microbench = gen->add_subcommand(
      "microbench",
      "One collective (or a send/receive ring) per rank, in the shape of ASTRA-sim's "
      "microbenchmarks\n  e.g. orrery gen microbench --collective all-reduce --size 1MiB --ranks 8 "
      "-o all_reduce");
  microbench
      ->add_option("--collective", options->collective,
                   "all-reduce, all-gather, reduce-scatter, all-to-all, broadcast, reduce, gather, "
                   "scatter, barrier or send-recv")
      ->required();
  microbench->add_option("--size", options->size,
                         "comm_size per rank: bytes, or with a unit (1MiB = 1,048,576 B; 1MB = "
                         "1,000,000 B); the per-rank input for all-gather");
  microbench->add_option("--ranks", options->ranks, "Number of ranks (rank files)")->required();
  microbench->add_option("--compute-us", options->compute_us,
                         "A compute node of this many microseconds before the communication");
  microbench->add_option("--pg-name", options->pg_name,
                         "Communicator group of the collective (its pg_name attribute)");
  microbench
      ->add_option("-o,--output", options->output,
                   "Output prefix: writes <prefix>.0.et .. <prefix>.<ranks-1>.et")
      ->required();
  microbench->callback([options, &exit_code] { exit_code = run_microbench(*options); });
}

}  // namespace orrery::cli
