// `orrery trace`: read, check and inspect Chakra execution traces.
#include "cli/commands.h"

namespace orrery::cli {

void add_trace_command(CLI::App& app, int& exit_code) {
  (void)exit_code;
  app.add_subcommand("trace", "Read, validate, inspect and convert Chakra execution traces");
}

}  // namespace orrery::cli
