// The orrery executable: parses the command line and dispatches to one verb.
#include <cstdio>

#include <fmt/core.h>

#include "cli/commands.h"

#ifndef ORRERY_VERSION
#define ORRERY_VERSION "unknown"
#endif

namespace orrery::cli {

int report_error(const Error& error) {
  fmt::print(stderr, "orrery: error: {}\n", error.message());
  return 1;
}

}  // namespace orrery::cli

int main(int argc, char** argv) {
  CLI::App app{
      "orrery: design distributed AI systems from their workload traces.\n"
      "Reads, checks and simulates Chakra execution traces on modelled networks."};
  app.name("orrery");
  app.set_version_flag("--version", std::string("orrery ") + ORRERY_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);

  int exit_code = 0;
  orrery::cli::add_trace_command(app, exit_code);
  orrery::cli::add_net_command(app, exit_code);
  orrery::cli::add_gen_command(app, exit_code);
  orrery::cli::add_run_command(app, exit_code);
  orrery::cli::add_convert_command(app, exit_code);
  orrery::cli::add_report_command(app, exit_code);
  orrery::cli::add_topo_command(app, exit_code);
  orrery::cli::add_libra_command(app, exit_code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  return exit_code;
}
