// `orrery gen` as a user runs it: ASTRA-sim's microbenchmarks reproduced byte for byte, and one
// clear message with exit code 1 for every bad flag.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "chakra/trace_builder.h"
#include "e2e/run_command.h"

namespace orrery {
namespace gen_cli_test {

using test::TempDir;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void expect_clean_failure(const CommandResult& result, const std::string& needle) {
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_EQ(result.err.rfind("orrery: error: ", 0), 0u) << result.err;
  EXPECT_NE(result.err.find(needle), std::string::npos) << result.err;
  EXPECT_TRUE(result.out.empty()) << result.out;
}

TEST(GenCli, help_lists_the_gen_verb_and_its_generators) {
  const CommandResult top = run_orrery({"--help"});
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_NE(top.out.find("gen"), std::string::npos) << top.out;
  const CommandResult gen = run_orrery({"gen", "--help"});
  EXPECT_EQ(gen.exit_code, 0) << gen.err;
  EXPECT_NE(gen.out.find("microbench"), std::string::npos) << gen.out;
  const CommandResult microbench = run_orrery({"gen", "microbench", "--help"});
  EXPECT_EQ(microbench.exit_code, 0) << microbench.err;
  for (const char* flag :
       {"--collective", "--size", "--ranks", "--compute-us", "--pg-name", "-o"}) {
    EXPECT_NE(microbench.out.find(flag), std::string::npos) << flag;
  }
}

TEST(GenCli, microbench_all_reduce_is_byte_identical_to_astra_sim_example) {
  TempDir dir;
  const std::string prefix = dir.file("out/all_reduce");
  const CommandResult result = run_orrery({"gen", "microbench", "--collective", "all-reduce",
                                           "--size", "1MiB", "--ranks", "8", "-o", prefix});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "wrote 8 rank files: " + prefix + ".0.et .. " + prefix + ".7.et\n");
  for (int rank = 0; rank < 8; ++rank) {
    const std::string name = "all_reduce." + std::to_string(rank) + ".et";
    EXPECT_EQ(read_bytes(prefix + "." + std::to_string(rank) + ".et"),
              read_bytes(test::test_data("astra-sim/microbenchmarks/all_reduce/8npus_1MB/" + name)))
        << name;
  }
  // And the files read back as a valid trace.
  const CommandResult validate = run_orrery({"trace", "validate", "--strict", prefix});
  EXPECT_EQ(validate.exit_code, 0) << validate.out << validate.err;
}

TEST(GenCli, microbench_with_compute_and_group_inspects_as_expected) {
  TempDir dir;
  const std::string prefix = dir.file("ag");
  const CommandResult result =
      run_orrery({"gen", "microbench", "--collective", "all_gather", "--size", "64KiB", "--ranks",
                  "4", "--compute-us", "10", "--pg-name", "1", "-o", prefix});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const CommandResult inspect = run_orrery({"trace", "inspect", prefix});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("(4 rank files)"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("COMP_NODE           4"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("ALL_GATHER"), std::string::npos) << inspect.out;
}

TEST(GenCli, microbench_barrier_needs_no_size) {
  TempDir dir;
  const CommandResult result = run_orrery(
      {"gen", "microbench", "--collective", "barrier", "--ranks", "2", "-o", dir.file("b")});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(std::filesystem::exists(dir.file("b.1.et")));
}

TEST(GenCli, microbench_bad_flags_fail_with_one_message) {
  TempDir dir;
  const std::string prefix = dir.file("x");
  expect_clean_failure(run_orrery({"gen", "microbench", "--collective", "allreduce", "--size",
                                   "1MiB", "--ranks", "8", "-o", prefix}),
                       "--collective: unknown microbenchmark 'allreduce' (expected all-reduce");
  expect_clean_failure(
      run_orrery({"gen", "microbench", "--collective", "all-reduce", "--ranks", "8", "-o", prefix}),
      "missing --size BYTES");
  expect_clean_failure(run_orrery({"gen", "microbench", "--collective", "all-reduce", "--size",
                                   "lots", "--ranks", "8", "-o", prefix}),
                       "--size: cannot read 'lots' as a size");
  expect_clean_failure(run_orrery({"gen", "microbench", "--collective", "all-reduce", "--size",
                                   "1MiB", "--ranks", "0", "-o", prefix}),
                       "0 ranks: expected 1 to 1048576");
  expect_clean_failure(run_orrery({"gen", "microbench", "--collective", "send-recv", "--size",
                                   "1KiB", "--ranks", "1", "-o", prefix}),
                       "send-recv needs at least 2 ranks");
  EXPECT_FALSE(std::filesystem::exists(prefix + ".0.et"));
}

TEST(GenCli, microbench_missing_required_flags_is_a_usage_error) {
  const CommandResult no_output = run_orrery(
      {"gen", "microbench", "--collective", "all-reduce", "--size", "1MiB", "--ranks", "8"});
  EXPECT_NE(no_output.exit_code, 0);
  EXPECT_NE(no_output.err.find("--output"), std::string::npos) << no_output.err;
  const CommandResult bad_ranks = run_orrery({"gen", "microbench", "--collective", "all-reduce",
                                              "--size", "1MiB", "--ranks", "-3", "-o", "x"});
  EXPECT_NE(bad_ranks.exit_code, 0);
  const CommandResult no_generator = run_orrery({"gen"});
  EXPECT_NE(no_generator.exit_code, 0);
}

}  // namespace gen_cli_test
}  // namespace orrery
