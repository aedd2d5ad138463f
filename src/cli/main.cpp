// The orrery executable: parses the command line and dispatches to one verb.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "cli/commands.h"

#ifndef ORRERY_VERSION
#define ORRERY_VERSION "unknown"
#endif

namespace orrery::cli {
namespace {

// Verbs built on libtorch run as their own executables beside this one (orrery-replay, ...), as
// git runs git-<verb>: a program linked with libtorch spends about a second and 160 MB at every
// start registering its operators, which `orrery run` and the other verbs should not pay.
struct ExternalVerb {
  const char* name;
  const char* description;
};
constexpr ExternalVerb kExternalVerbs[] = {
    {"replay", "Replay a PyTorch execution trace as a runnable benchmark (libtorch; MPI or Gloo)"},
    {"synth", "Train a generative model of traces (LayerDAG) and sample synthetic traces"},
    {"partition", "Partition a trained network over workers for parallel inference (RePurpose)"},
    {"sweep",
     "Explore cluster designs (COMET): sweep models, clusters and plans into SQLite (MPI)"},
};

// Runs orrery-<verb> from this executable's folder with the remaining arguments; returns only
// when that fails.
int exec_external(const ExternalVerb& verb, int argc, char** argv) {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  const std::filesystem::path program =
      (error ? std::filesystem::path(argv[0]).parent_path() : self.parent_path()) /
      (std::string("orrery-") + verb.name);
  const std::string shown = std::string("orrery ") + verb.name;
  std::vector<char*> args;
  args.push_back(const_cast<char*>(shown.c_str()));
  for (int idx = 2; idx < argc; ++idx) args.push_back(argv[idx]);
  args.push_back(nullptr);
  ::execv(program.c_str(), args.data());
  fmt::print(stderr, "orrery: error: {} needs {}, which cannot be run: {}\n", shown,
             program.string(), std::strerror(errno));
  return 1;
}

// An argument where a verb (or a sub-verb) is expected that names none: CLI11 would answer
// "A subcommand is required", which hides the typo. Returns the message, or "" when the verbs
// given are all known (or the first argument is an option, for CLI11 to handle).
std::string unknown_verb(CLI::App& app, int argc, char** argv) {
  CLI::App* level = &app;
  std::string path = "orrery";
  for (int idx = 1; idx < argc; ++idx) {
    const std::vector<CLI::App*> verbs = level->get_subcommands({});
    if (verbs.empty() || argv[idx][0] == '-') return "";
    CLI::App* next = nullptr;
    std::vector<std::string> names;
    for (CLI::App* verb : verbs) {
      names.push_back(verb->get_name());
      if (verb->check_name(argv[idx])) next = verb;
    }
    if (next == nullptr) {
      return fmt::format("unknown verb '{}' for {} (expected one of: {}); see {} --help", argv[idx],
                         path, fmt::join(names, ", "), path);
    }
    path += " " + next->get_name();
    level = next;
  }
  return "";
}

}  // namespace
}  // namespace orrery::cli

int main(int argc, char** argv) {
  if (argc >= 2) {
    for (const orrery::cli::ExternalVerb& verb : orrery::cli::kExternalVerbs) {
      if (std::strcmp(argv[1], verb.name) == 0) return orrery::cli::exec_external(verb, argc, argv);
    }
  }
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
  orrery::cli::add_shard_command(app, exit_code);
  orrery::cli::add_collective_command(app, exit_code);
  orrery::cli::add_calibrate_command(app, exit_code);
  // Listed in --help; never parsed here (main execs them first).
  for (const orrery::cli::ExternalVerb& verb : orrery::cli::kExternalVerbs) {
    app.add_subcommand(verb.name, verb.description)->allow_extras()->prefix_command();
  }

  if (const std::string unknown = orrery::cli::unknown_verb(app, argc, argv); !unknown.empty()) {
    fmt::print(stderr, "orrery: error: {}\n", unknown);
    return 1;
  }
  if (const std::optional<int> stop = orrery::cli::parse_command_line(app, argc, argv))
    return *stop;
  return exit_code;
}
