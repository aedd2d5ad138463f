// `orrery net`: time messages on a modelled network (issue #3 fills this in).
#include "cli/commands.h"

namespace orrery::cli {

void add_net_command(CLI::App& app, int& exit_code) {
  (void)exit_code;
  app.add_subcommand("net", "Inspect networks and time single messages on them");
}

}  // namespace orrery::cli
