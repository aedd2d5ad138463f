// cli/commands.h: the verbs of the orrery executable.
//
// Each add_*_command registers one verb (with its sub-verbs) on the application. Verb callbacks run
// while CLI11 parses; they report their outcome through `exit_code` (0 success, 1 bad input or a
// run that could not finish) and never throw for user errors.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "system/system_config.h"

namespace orrery::cli {

void add_trace_command(CLI::App& app, int& exit_code);
void add_net_command(CLI::App& app, int& exit_code);
void add_gen_command(CLI::App& app, int& exit_code);
void add_run_command(CLI::App& app, int& exit_code);
void add_convert_command(CLI::App& app, int& exit_code);
void add_report_command(CLI::App& app, int& exit_code);
void add_topo_command(CLI::App& app, int& exit_code);
void add_libra_command(CLI::App& app, int& exit_code);
void add_shard_command(CLI::App& app, int& exit_code);
void add_collective_command(CLI::App& app, int& exit_code);
void add_calibrate_command(CLI::App& app, int& exit_code);

// --nccl-algo and --nccl-proto (`orrery collective`, `orrery run`): NCCL_ALGO's and NCCL_PROTO's
// lists for the nccl model.
struct NcclFlags {
  std::string algo;
  std::string proto;
  bool given() const { return !algo.empty() || !proto.empty(); }
  void add_to(CLI::App& cmd);
  // `system` restricted to them (sys::restrict_nccl), to share.
  Expected<std::shared_ptr<const sys::SystemConfig>> restricted(sys::SystemConfig system) const;
};

// Prints "orrery: error: <message>" on stderr and returns the exit code for it (1). Also linked
// into the orrery-<verb> executables (cli/CMakeLists.txt).
int report_error(const Error& error);

// Parses the command line into `app` as every orrery executable does: an option of an unsigned
// type refuses "-1" (refuse_wrapped_whole_numbers), a usage error prints "orrery: error: ..."
// and exits 1 like every other error (CLI11's own codes would be 104 to 114), --help and
// --version exit 0. Returns the exit code when the program stops there, nothing when it parsed
// (and the chosen subcommand's callback has run).
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv);

}  // namespace orrery::cli
