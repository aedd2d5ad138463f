// tests/e2e/run_command.h: run the orrery executable and capture its exit code and output.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace orrery {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string shell_quote(const std::string& arg) {
  std::string quoted = "'";
  for (char c : arg) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

inline std::string read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Runs `program args...` through the shell, with stdout and stderr captured in temporary files.
inline CommandResult run_program(const std::string& program, const std::vector<std::string>& args) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("orrery-e2e-" + std::to_string(::getpid()) + "-" +
                                                std::to_string(reinterpret_cast<uintptr_t>(&args)));
  std::filesystem::create_directories(dir);
  std::ostringstream command;
  command << shell_quote(program);
  for (const std::string& arg : args) command << ' ' << shell_quote(arg);
  command << " >" << shell_quote((dir / "out").string()) << " 2>"
          << shell_quote((dir / "err").string());
  const int status = std::system(command.str().c_str());
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_whole_file(dir / "out");
  result.err = read_whole_file(dir / "err");
  std::filesystem::remove_all(dir);
  return result;
}

inline CommandResult run_orrery(const std::vector<std::string>& args) {
  return run_program(ORRERY_BINARY, args);
}

}  // namespace orrery
