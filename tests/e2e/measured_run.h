// tests/e2e/measured_run.h: run the orrery executable in a child and measure its peak memory
// (wait4's ru_maxrss), for the tests that promise bounded memory on hostile inputs.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "e2e/run_command.h"

namespace orrery {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr long kMemoryLimitKb = 700 * 1024;  // ASan's shadow and quarantine add their share
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr long kMemoryLimitKb = 700 * 1024;
#else
inline constexpr long kMemoryLimitKb = 200 * 1024;
#endif
#else
inline constexpr long kMemoryLimitKb = 200 * 1024;
#endif

struct Measured {
  int exit_code = -1;
  std::string out;
  std::string err;
  long max_rss_kb = 0;
};

// Runs orrery with `args` in a child (posix_spawn: the child starts small, whatever this test
// process holds), output captured in `dir`, and its peak memory measured.
inline Measured run_measured(const std::vector<std::string>& args, const std::string& dir) {
  const std::string out_path = dir + "/stdout";
  const std::string err_path = dir + "/stderr";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  std::string program = ORRERY_BINARY;
  std::vector<std::string> copies = args;
  std::vector<char*> argv;
  argv.push_back(program.data());
  for (std::string& arg : copies) argv.push_back(arg.data());
  argv.push_back(nullptr);
  Measured result;
  pid_t child = 0;
  if (posix_spawn(&child, program.c_str(), &actions, nullptr, argv.data(), environ) != 0) {
    posix_spawn_file_actions_destroy(&actions);
    return result;
  }
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  struct rusage usage {};
  ::wait4(child, &status, 0, &usage);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.max_rss_kb = usage.ru_maxrss;
  result.out = read_whole_file(out_path);
  result.err = read_whole_file(err_path);
  return result;
}

}  // namespace orrery
