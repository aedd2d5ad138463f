// Every runnable example of README.md, run as a new user would (the docs are part of the product).
//
// The convention in README.md (follow it when you add an example):
//   - A fenced ```sh block right after a line `<!-- readme-test -->` is run; unmarked blocks are
//     not. `<!-- readme-test: needs shared-data -->` runs it only when ../shared/data is present,
//     `<!-- readme-test: needs dot -->` only when `dot` is on PATH, and `slow` (as in
//     `<!-- readme-test: slow -->` or `<!-- readme-test: slow, needs shared-data -->`) only in
//     builds without sanitizers. Skipped blocks are named in the test output.
//   - In a block with `$ ` lines, each `$ ` line (with its `\` continuations) is a command, and the
//     lines after it up to the next command are output it must print: each must be a line of its
//     stdout or stderr (trailing spaces ignored); a line holding `...` matches any line starting
//     with the text before the `...`; a line of only `...` matches anything. In a block without
//     `$ ` lines every line is a command and the output is not checked.
//   - Every command must exit 0. Commands run with sh, in README order, in one scratch folder
//     shared by all blocks, with `orrery` on PATH and the variables of earlier `NAME=value`
//     commands set. The folder holds examples/ (the repository's), Ring_8npus.yml and
//     Ring_16npus.yml (tests/data/network), system.json and sys.json (one dimension,
//     tests/data/astra-sim/configs/Ring_4chunks.json), feeder_tests_chakra.0.et
//     (tests/data/mlcommons-chakra), workload.<r>.et and workload.json (examples/llama_dp2tp2pp2),
//     ../shared (the shared data, when present) and, with the shared data, dlrm_pytorch_et/,
//     dlrm_kineto/ and dlrm/ (both) unpacked from PARAM's DLRM inputs.
//   - Write outputs as the binary prints them, eliding with `...` what depends on the machine (wall
//     time) or is too long to show.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "chakra/trace_builder.h"
#include "e2e/run_command.h"

namespace orrery {
namespace readme_examples_test {

namespace fs = std::filesystem;

const fs::path kRepository = fs::path(ORRERY_TEST_DATA_DIR).parent_path().parent_path();
const fs::path kShared = fs::path(ORRERY_SHARED_DATA_DIR);

bool sanitized() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

struct Command {
  std::string text;
  std::vector<std::string> expected;  // output lines
  int line = 0;                       // in README.md
};

struct Block {
  int line = 0;  // of the opening fence
  std::string tags;
  std::vector<Command> commands;
};

std::string trim_right(std::string text) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '\r')) text.pop_back();
  return text;
}

std::vector<Block> marked_blocks(const std::string& readme) {
  std::vector<Block> blocks;
  std::istringstream in(readme);
  std::string line;
  int number = 0;
  std::optional<std::string> tags;  // set by a marker, for the next fence
  while (std::getline(in, line)) {
    ++number;
    if (line.rfind("<!-- readme-test", 0) == 0) {
      const size_t colon = line.find(':');
      const size_t end = line.find("-->");
      tags = colon != std::string::npos && colon < end ? line.substr(colon + 1, end - colon - 1)
                                                       : std::string();
      continue;
    }
    if (line.rfind("```", 0) != 0) continue;
    // A fence: read the block to its end.
    std::vector<std::pair<int, std::string>> body;
    while (std::getline(in, line)) {
      ++number;
      if (line.rfind("```", 0) == 0) break;
      body.emplace_back(number, trim_right(line));
    }
    if (!tags) continue;
    Block block;
    block.line = number - static_cast<int>(body.size()) - 1;
    block.tags = *tags;
    tags.reset();
    const bool prompted = std::any_of(body.begin(), body.end(), [](const auto& entry) {
      return entry.second.rfind("$ ", 0) == 0;
    });
    for (size_t idx = 0; idx < body.size(); ++idx) {
      const auto& [at, text] = body[idx];
      if (prompted && text.rfind("$ ", 0) != 0) {
        if (!block.commands.empty()) block.commands.back().expected.push_back(text);
        continue;
      }
      if (text.empty()) continue;
      Command command;
      command.line = at;
      command.text = prompted ? text.substr(2) : text;
      // `\` continues a command on the next line.
      while (!command.text.empty() && command.text.back() == '\\' && idx + 1 < body.size()) {
        command.text.pop_back();
        command.text += " " + body[++idx].second;
      }
      block.commands.push_back(std::move(command));
    }
    blocks.push_back(std::move(block));
  }
  return blocks;
}

// Whether `expected` (one README output line) is printed by a command whose output is `output`.
bool printed(const std::string& output, const std::string& expected) {
  if (expected == "..." || expected.empty()) return true;
  const size_t dots = expected.find("...");
  const std::string prefix = dots == std::string::npos ? "" : trim_right(expected.substr(0, dots));
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    line = trim_right(line);
    if (dots == std::string::npos ? line == expected : line.rfind(prefix, 0) == 0) {
      return true;
    }
  }
  return false;
}

void copy_over(const fs::path& from, const fs::path& to) {
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
}

// The scratch folder every block runs in; see the convention above.
fs::path make_scratch() {
  const fs::path root = fs::temp_directory_path() / ("orrery-readme-" + std::to_string(::getpid()));
  fs::remove_all(root);
  const fs::path work = root / "work";
  fs::create_directories(work);
  fs::create_directory_symlink(kRepository / "examples", work / "examples");
  const fs::path data = kRepository / "tests" / "data";
  copy_over(data / "network" / "Ring_8npus.yml", work / "Ring_8npus.yml");
  copy_over(data / "network" / "Ring_16npus.yml", work / "Ring_16npus.yml");
  copy_over(data / "astra-sim" / "configs" / "Ring_4chunks.json", work / "system.json");
  copy_over(data / "astra-sim" / "configs" / "Ring_4chunks.json", work / "sys.json");
  copy_over(data / "mlcommons-chakra" / "feeder_tests_chakra.0.et.gz",
            work / "feeder_tests_chakra.0.et");
  for (int rank = 0; rank < 8; ++rank) {
    const std::string name = "workload." + std::to_string(rank) + ".et";
    copy_over(kRepository / "examples" / "llama_dp2tp2pp2" / name, work / name);
  }
  copy_over(kRepository / "examples" / "llama_dp2tp2pp2" / "workload.json", work / "workload.json");
  if (fs::exists(kShared)) {
    fs::create_directory_symlink(fs::absolute(kShared).parent_path(), root / "shared");
    EXPECT_TRUE(test::untar_dlrm_set(work.string()));
    fs::create_directories(work / "dlrm");
    for (const char* folder : {"dlrm_pytorch_et", "dlrm_kineto"}) {
      if (!fs::exists(work / folder)) continue;
      for (const fs::directory_entry& entry : fs::directory_iterator(work / folder)) {
        copy_over(entry.path(), work / "dlrm" / entry.path().filename());
      }
    }
  }
  return work;
}

bool on_path(const std::string& program) {
  return std::system(("command -v " + program + " >/dev/null 2>&1").c_str()) == 0;
}

// Why a block is skipped here ("" when it runs).
std::string skip_reason(const Block& block) {
  if (block.tags.find("slow") != std::string::npos && sanitized()) return "slow, sanitizer build";
  if (block.tags.find("needs shared-data") != std::string::npos && !fs::exists(kShared)) {
    return "needs ../shared/data";
  }
  if (block.tags.find("needs dot") != std::string::npos && !on_path("dot")) return "needs dot";
  return "";
}

TEST(ReadmeExamples, every_marked_example_runs_and_prints_what_the_readme_says) {
  std::ifstream in(kRepository / "README.md");
  ASSERT_TRUE(in);
  std::stringstream text;
  text << in.rdbuf();
  const std::vector<Block> blocks = marked_blocks(text.str());
  ASSERT_GE(blocks.size(), 10u) << "README.md has lost its marked examples";
  const fs::path work = make_scratch();
  const std::string path =
      fs::absolute(fs::path(ORRERY_BINARY)).parent_path().string() + ":" + std::getenv("PATH");
  std::string variables;  // NAME=value commands so far, replayed before each command
  size_t ran = 0;
  for (const Block& block : blocks) {
    if (const std::string why = skip_reason(block); !why.empty()) {
      std::cout << "README.md:" << block.line << ": skipped (" << why << ")\n";
      continue;
    }
    for (const Command& command : block.commands) {
      // NAME=value, maybe followed by a comment: kept for the commands after it.
      const std::string first_word = command.text.substr(0, command.text.find(' '));
      const size_t rest = command.text.find_first_not_of(' ', first_word.size());
      const bool assignment = first_word.find('=') != std::string::npos &&
                              first_word.find('=') > 0 &&
                              first_word.find('/') > first_word.find('=') &&
                              (rest == std::string::npos || command.text[rest] == '#');
      if (assignment) {
        variables += first_word + "; ";
        continue;
      }
      const std::string script =
          "cd '" + work.string() + "' && PATH='" + path + "'; " + variables + command.text;
      const CommandResult result = run_program("/bin/sh", {"-c", script});
      ++ran;
      EXPECT_EQ(result.exit_code, 0) << "README.md:" << command.line << ": " << command.text << "\n"
                                     << result.out << result.err;
      const std::string output = result.out + "\n" + result.err;
      for (const std::string& expected : command.expected) {
        EXPECT_TRUE(printed(output, expected))
            << "README.md:" << command.line << ": " << command.text << "\ndoes not print\n  "
            << expected << "\nit printed:\n"
            << output;
      }
    }
  }
  EXPECT_GE(ran, 10u);
  fs::remove_all(work.parent_path());
}

}  // namespace readme_examples_test
}  // namespace orrery
