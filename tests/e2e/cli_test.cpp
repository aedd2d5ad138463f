// Runs the orrery executable and checks what a user sees: exit codes, messages, output.
#include <gtest/gtest.h>

#include "e2e/run_command.h"

namespace orrery {
namespace cli_test {

TEST(Cli, version_names_the_program) {
  const CommandResult result = run_orrery({"--version"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_NE(result.out.find("orrery "), std::string::npos);
}

TEST(Cli, help_lists_every_verb) {
  const CommandResult result = run_orrery({"--help"});
  EXPECT_EQ(result.exit_code, 0);
  for (const char* verb : {"trace", "net"}) {
    EXPECT_NE(result.out.find(verb), std::string::npos) << verb;
  }
}

TEST(Cli, unknown_verb_fails) {
  const CommandResult result = run_orrery({"frobnicate"});
  EXPECT_NE(result.exit_code, 0);
}

}  // namespace cli_test
}  // namespace orrery
