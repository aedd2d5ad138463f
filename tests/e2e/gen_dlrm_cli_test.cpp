// `orrery gen dlrm` and `orrery trace rescale` as a user runs them: the summary states the model,
// the plan and the communication per rank, the files validate and run with `orrery run`, rescaled
// trace sets validate and run, and bad flags give one message naming what to change.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "chakra/trace_builder.h"
#include "e2e/run_command.h"

namespace orrery {
namespace gen_dlrm_cli_test {

using test::TempDir;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

void expect_clean_failure(const CommandResult& result, const std::string& needle) {
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_EQ(result.err.rfind("orrery: error: ", 0), 0u) << result.err;
  EXPECT_CONTAINS(result.err, needle);
}

// A roofline system and a 2 x 2 x 2 network for 8 ranks (or [2, 8, 2] for 32).
void write_configs(const TempDir& dir, const std::string& sizes) {
  write(dir.file("sys.json"), R"({"scheduling-policy": "LIFO", "endpoint-delay": 10,
    "active-chunks-per-dimension": 1, "preferred-dataset-splits": 4,
    "all-reduce-implementation": ["ring", "ring", "ring"], "all-gather-implementation": ["ring", "ring", "ring"],
    "reduce-scatter-implementation": ["ring", "ring", "ring"], "all-to-all-implementation": ["ring", "ring", "ring"],
    "collective-optimization": "localBWAware", "local-mem-bw": 2000, "roofline-enabled": 1, "peak-perf": 300})");
  write(dir.file("net.yml"), "topology: [ Ring, Ring, Switch ]\nnpus_count: [ " + sizes +
                                 " ]\nbandwidth: [ 200, 100, 50 ]\nlatency: [ 500, 500, 1000 ]\n");
}

CommandResult run_traces(const TempDir& dir, const std::string& prefix) {
  return run_orrery({"run", "-q", "-w", prefix, "-g", prefix + ".json", "-s", dir.file("sys.json"),
                     "-n", dir.file("net.yml")});
}

TEST(GenDlrmCli, help_and_list_models) {
  const CommandResult help = run_orrery({"gen", "dlrm", "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  for (const char* flag :
       {"--model", "--ranks", "--global-batch", "--sharding", "--tables", "--rows", "--dim",
        "--pooling", "--bottom-mlp", "--top-mlp", "--device-memory", "--list-models", "-o"}) {
    EXPECT_CONTAINS(help.out, flag);
  }
  const CommandResult list = run_orrery({"gen", "dlrm", "--list-models"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_CONTAINS(list.out, "dlrm-mlperf");
  EXPECT_CONTAINS(list.out, "187,767,399");
  EXPECT_CONTAINS(list.out, "479-1024-1024-512-256-1");
  EXPECT_CONTAINS(list.out, "dlrm-kaggle");
}

TEST(GenDlrmCli, row_wise_traces_validate_and_run) {
  TempDir dir;
  const std::string prefix = dir.file("out/d");
  // 8 tables of 10,000 rows, d = 32, pooling 4; b = 128 per rank.
  const CommandResult gen = run_orrery(
      {"gen",        "dlrm", "--model",   "dlrm-kaggle", "--tables", "8", "--rows",         "10000",
       "--dim",      "32",   "--pooling", "4",           "--ranks",  "8", "--global-batch", "1024",
       "--sharding", "row",  "-o",        prefix});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  EXPECT_CONTAINS(gen.out, "bottom MLP 13-512-256-64-32, 8 embedding tables of dimension 32");
  EXPECT_CONTAINS(gen.out, "plan: 8 ranks, row-wise tables, MLPs data-parallel; batch 1,024");
  // Indices 128 x 32 x 8 B = 32 KiB; partial sums 1,024 x 8 x 32 x 4 B = 1 MiB; gradients
  // 128 x 8 x 32 x 4 B = 128 KiB.
  EXPECT_CONTAINS(gen.out,
                  "indices all-to-all 32.00 KiB, pooled embeddings reduce-scatter 1.00 MiB, their "
                  "gradients all-gather 128.00 KiB");
  EXPECT_CONTAINS(gen.out, "wrote 8 rank files");
  EXPECT_CONTAINS(gen.out, "memory per rank (estimate, GiB)");
  const CommandResult validate = run_orrery({"trace", "validate", "--strict", prefix});
  EXPECT_EQ(validate.exit_code, 0) << validate.out << validate.err;
  write_configs(dir, "2, 2, 2");
  const CommandResult run = run_traces(dir, prefix);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
}

TEST(GenDlrmCli, bad_flags_fail_with_one_message) {
  TempDir dir;
  const std::string out = dir.file("x");
  expect_clean_failure(run_orrery({"gen", "dlrm", "--model", "dlrm-kaggle", "--ranks", "3",
                                   "--global-batch", "1000", "-o", out}),
                       "--global-batch 1000 is not a multiple of --ranks 3");
  expect_clean_failure(run_orrery({"gen", "dlrm", "--model", "dlrm-kaggle", "--ranks", "32",
                                   "--global-batch", "1024", "--sharding", "column", "-o", out}),
                       "does not divide the embedding dimension 16");
  expect_clean_failure(run_orrery({"gen", "dlrm", "--model", "dlrm-kaggle", "--ranks", "4",
                                   "--global-batch", "64", "--sharding", "diagonal", "-o", out}),
                       "--sharding: unknown sharding 'diagonal'");
  expect_clean_failure(run_orrery({"gen", "dlrm", "--model", "dlrm-kaggle", "--tables", "4",
                                   "--ranks", "4", "--global-batch", "64", "-o", out}),
                       "--tables 4 needs --rows");
  expect_clean_failure(run_orrery({"gen", "dlrm", "--model", "dlrm-kaggle", "--bottom-mlp", "64,8",
                                   "--ranks", "4", "--global-batch", "64", "-o", out}),
                       "bottom_mlp ends in 8 but dim is 16");
  expect_clean_failure(run_orrery({"gen", "dlrm", "--model", "nope", "--ranks", "4",
                                   "--global-batch", "64", "-o", out}),
                       "unknown model 'nope'");
  expect_clean_failure(
      run_orrery({"gen", "dlrm", "--model", "dlrm-kaggle", "--global-batch", "64", "-o", out}),
      "missing --ranks");
}

TEST(TraceRescaleCli, llm_traces_rescaled_from_dp_2_to_8_validate_and_run) {
  TempDir dir;
  write(dir.file("small.json"),
        R"({"name": "small", "base": "gpt3-175b", "layers": 4, "hidden": 256, "heads": 8,
            "kv_heads": 8, "ffn": 1024, "vocab": 1024, "seq": 256})");
  const std::string in = dir.file("in/w");
  const CommandResult gen =
      run_orrery({"gen", "llm", "--model", dir.file("small.json"), "--global-batch", "8", "--dp",
                  "2", "--tp", "2", "--pp", "2", "--zero", "1", "-o", in});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  const std::string out = dir.file("out/w");
  const CommandResult ambiguous = run_orrery(
      {"trace", "rescale", in, "-g", in + ".json", "--from-dp", "2", "--dp", "8", "-o", out});
  expect_clean_failure(ambiguous, "give --dp-stride");
  const CommandResult rescale = run_orrery({"trace", "rescale", in, "-g", in + ".json", "--from-dp",
                                            "2", "--dp", "8", "--dp-stride", "2", "-o", out});
  ASSERT_EQ(rescale.exit_code, 0) << rescale.err;
  EXPECT_CONTAINS(rescale.out,
                  "data parallelism 2 -> 8 (stride 2, fixed per-rank batch): 8 ranks "
                  "-> 32 ranks; 8 replica groups copied, 4 data groups resized");
  EXPECT_CONTAINS(rescale.out, "wrote " + out + ".json: 36 communicator groups");
  const CommandResult validate = run_orrery({"trace", "validate", "--strict", out});
  EXPECT_EQ(validate.exit_code, 0) << validate.out << validate.err;
  write_configs(dir, "2, 8, 2");
  const CommandResult run = run_traces(dir, out);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  expect_clean_failure(run_orrery({"trace", "rescale", in, "-g", in + ".json", "--from-dp", "2",
                                   "--dp", "8", "--dp-stride", "2", "--batch", "weak", "-o", out}),
                       "--batch: unknown batch scaling 'weak'");
  expect_clean_failure(run_orrery({"trace", "rescale", in, "-g", in + ".json", "--from-dp", "3",
                                   "--dp", "6", "-o", out}),
                       "--from-dp 3 does not divide the 8 ranks");
}

}  // namespace gen_dlrm_cli_test
}  // namespace orrery
