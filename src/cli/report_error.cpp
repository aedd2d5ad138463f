// cli::report_error, shared by the orrery executable and the orrery-<verb> executables.
#include <cstdio>

#include <fmt/core.h>

#include "cli/commands.h"

namespace orrery::cli {

int report_error(const Error& error) {
  fmt::print(stderr, "orrery: error: {}\n", error.message());
  return 1;
}

}  // namespace orrery::cli
