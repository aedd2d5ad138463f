// cli::report_error and cli::parse_command_line, shared by the orrery executable and the
// orrery-<verb> executables.
#include <cstdio>

#include <fmt/core.h>

#include "cli/commands.h"
#include "cli/validators.h"

namespace orrery::cli {

int report_error(const Error& error) {
  fmt::print(stderr, "orrery: error: {}\n", error.message());
  return 1;
}

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  refuse_wrapped_whole_numbers(app);
  app.failure_message([](const CLI::App* /*app*/, const CLI::Error& error) {
    return fmt::format("orrery: error: {}\nRun with --help for more information.\n", error.what());
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : 1;
  }
  return std::nullopt;
}

}  // namespace orrery::cli
