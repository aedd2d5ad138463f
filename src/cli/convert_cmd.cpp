// `orrery convert`: PyTorch execution traces (and Kineto traces) to Chakra traces.
//
//   orrery convert --host HOST.json[.gz] [--device KINETO.json[.gz]] -o OUT.et
//   orrery convert --dir DIR -o PREFIX      (writes PREFIX.<r>.et and PREFIX.json)
#include <iostream>
#include <memory>
#include <string>

#include <fmt/core.h>

#include "cli/commands.h"
#include "convert/pytorch_converter.h"
#include "convert/rank_directory.h"

namespace orrery::cli {

namespace {

struct ConvertCommandOptions {
  std::string host;
  std::string device;
  std::string dir;
  std::string output;
  bool allow_pid_mismatch = false;
  size_t examples = 3;
  bool quiet = false;
};

int run_convert(const ConvertCommandOptions& options) {
  convert::ConvertOptions convert_options;
  convert_options.allow_pid_mismatch = options.allow_pid_mismatch;
  if (!options.dir.empty()) {
    if (!options.host.empty() || !options.device.empty()) {
      return report_error(Error::make(ErrorKind::kInvalidArgument,
                                      "--dir converts a directory of ranks: give either --dir or "
                                      "--host (with --device), not both"));
    }
    Expected<convert::DirectoryReport> report =
        convert::convert_rank_directory(options.dir, options.output, convert_options, 0);
    if (!report) return report_error(report.error());
    if (!options.quiet) std::cout << convert::format_directory_report(*report, options.examples);
    return 0;
  }
  if (options.host.empty()) {
    return report_error(Error::make(ErrorKind::kInvalidArgument,
                                    "give a host trace with --host (and its Kineto trace with "
                                    "--device), or a directory of ranks with --dir"));
  }
  Expected<convert::ConversionReport> report =
      convert::convert_files(options.host, options.device, options.output, convert_options);
  if (!report) return report_error(report.error());
  if (!options.quiet)
    std::cout << convert::format_report(*report, options.output, options.examples);
  return 0;
}

}  // namespace

void add_convert_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<ConvertCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "convert",
      "Convert PyTorch execution traces (with their Kineto traces) to Chakra traces\n"
      "  e.g. orrery convert --host rank0_et.json.gz --device rank0_kineto.json -o rank0.et\n"
      "       orrery convert --dir traces/ -o workload   (workload.<r>.et and workload.json)");
  cmd->add_option("--host", options->host,
                  "PyTorch execution trace (schema 1.0.1 to 1.1.1, .json or .json.gz)");
  cmd->add_option("--device", options->device,
                  "the Kineto trace of the same run (.json or .json.gz): GPU kernels, copies and "
                  "measured durations");
  cmd->add_option("--dir", options->dir,
                  "a directory of per-rank host and Kineto traces, searched recursively; ranks "
                  "from Kineto's distributedInfo.rank or the number in the file name");
  cmd->add_option("-o,--output", options->output,
                  "output .et file (gzip for .gz); with --dir, a prefix: writes <prefix>.<r>.et "
                  "and the communicator groups <prefix>.json")
      ->required();
  cmd->add_flag("--allow-pid-mismatch", options->allow_pid_mismatch,
                "link a Kineto trace whose process id differs from the host trace's");
  cmd->add_option("--examples", options->examples, "examples shown per kind of dropped item")
      ->default_val(3);
  cmd->add_flag("-q,--quiet", options->quiet, "print nothing but errors");
  cmd->callback([options, &exit_code] { exit_code = run_convert(*options); });
}

}  // namespace orrery::cli
