// `orrery gen llm` and `orrery gen inference` as a user runs them: the files validate and run with
// `orrery run`, the summary states the plan, FLOPs against the Megatron-LM formula and the memory
// per rank, and every bad flag gives one message naming it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chakra/trace_builder.h"
#include "e2e/run_command.h"

namespace orrery {
namespace gen_llm_cli_test {

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

// A system of ring collectives on three dimensions with a roofline (generated traces need one).
void write_ring_roofline_system(const std::string& path) {
  write(path, R"({"scheduling-policy": "LIFO", "endpoint-delay": 10,
    "active-chunks-per-dimension": 1, "preferred-dataset-splits": 4,
    "all-reduce-implementation": ["ring", "ring", "ring"], "all-gather-implementation": ["ring", "ring", "ring"],
    "reduce-scatter-implementation": ["ring", "ring", "ring"], "all-to-all-implementation": ["ring", "ring", "ring"],
    "collective-optimization": "localBWAware", "local-mem-bw": 2000, "roofline-enabled": 1, "peak-perf": 300})");
}

// Ring 2 x Switch 2 x Switch 2: the layout of a tp 2 x dp 2 x pp 2 plan.
void write_eight_rank_network(const std::string& path) {
  write(path,
        "topology: [ Ring, Switch, Switch ]\nnpus_count: [ 2, 2, 2 ]\nbandwidth: [ 200, 100, 50 ]\n"
        "latency: [ 500, 500, 1000 ]\n");
}

// A 4-layer model file small enough for a test run.
std::string small_model(const TempDir& dir) {
  const std::string path = dir.file("small.json");
  write(path, R"({"name": "small", "base": "gpt3-175b", "layers": 4, "hidden": 256, "heads": 8,
                  "kv_heads": 8, "ffn": 1024, "vocab": 1024, "seq": 256})");
  return path;
}

TEST(GenLlmCli, help_lists_every_generator_and_flag) {
  const CommandResult gen = run_orrery({"gen", "--help"});
  EXPECT_EQ(gen.exit_code, 0) << gen.err;
  for (const char* name : {"microbench", "llm", "inference"}) EXPECT_CONTAINS(gen.out, name);
  const CommandResult llm = run_orrery({"gen", "llm", "--help"});
  EXPECT_EQ(llm.exit_code, 0) << llm.err;
  for (const char* flag : {"--model",       "--global-batch",
                           "--micro-batch", "--seq",
                           "--dp",          "--tp",
                           "--pp",          "--sp",
                           "--cp",          "--ep",
                           "--zero",        "--recompute",
                           "--schedule",    "--virtual-stages",
                           "--bucket-size", "--device-memory",
                           "--list-models", "--gzip",
                           "--classes",     "-o"}) {
    EXPECT_CONTAINS(llm.out, flag);
  }
  const CommandResult inference = run_orrery({"gen", "inference", "--help"});
  EXPECT_EQ(inference.exit_code, 0) << inference.err;
  for (const char* flag :
       {"--prompt-lengths", "--output-lengths", "--requests", "--micro-batches"}) {
    EXPECT_CONTAINS(inference.out, flag);
  }
}

TEST(GenLlmCli, list_models_names_every_preset) {
  const CommandResult result = run_orrery({"gen", "llm", "--list-models"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  for (const char* name : {"gpt3-175b", "llama2-7b", "llama2-70b", "llama3-405b", "mixtral-8x7b"}) {
    EXPECT_CONTAINS(result.out, name);
  }
  EXPECT_CONTAINS(result.out, "174.6B");
  EXPECT_CONTAINS(result.out, "8 experts, top 2");
}

TEST(GenLlmCli, generated_traces_validate_and_run) {
  TempDir dir;
  const std::string prefix = dir.file("out/small");
  const CommandResult gen =
      run_orrery({"gen", "llm", "--model", small_model(dir), "--global-batch", "8", "--micro-batch",
                  "1", "--dp", "2", "--tp", "2", "--pp", "2", "--sp", "--zero", "1", "-o", prefix});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  EXPECT_CONTAINS(gen.out, "plan: 8 ranks = tp 2 x cp 1 x dp 2 x pp 2");
  EXPECT_CONTAINS(gen.out, "4 micro-batches of 1 per pipeline; pipeline bubble 20.0%");
  EXPECT_CONTAINS(gen.out, "wrote 8 rank files: " + prefix + ".0.et .. " + prefix + ".7.et");
  EXPECT_CONTAINS(gen.out, "wrote " + prefix + ".json: ");
  EXPECT_CONTAINS(gen.out, "Megatron-LM formula");
  EXPECT_CONTAINS(gen.out, "memory per rank (estimate, GiB)");
  EXPECT_TRUE(gen.err.empty()) << gen.err;

  const CommandResult validate = run_orrery({"trace", "validate", "--strict", prefix});
  EXPECT_EQ(validate.exit_code, 0) << validate.out << validate.err;

  write_ring_roofline_system(dir.file("sys.json"));
  write(dir.file("net.yml"),
        "topology: [ Ring, Ring, Switch ]\nnpus_count: [ 2, 2, 2 ]\nbandwidth: [ 200, 100, 50 ]\n"
        "latency: [ 500, 500, 1000 ]\n");
  const CommandResult run = run_orrery({"run", "-q", "-w", prefix, "-g", prefix + ".json", "-s",
                                        dir.file("sys.json"), "-n", dir.file("net.yml")});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
}

// `gen llm --classes`: a class file per pipeline stage and a rank map, which `orrery run` reads
// with results identical to the rank files' (every figure but the wall time); a prefix left
// holding both forms is warned of by gen and refused by run.
TEST(GenLlmCli, class_files_run_as_the_rank_files) {
  TempDir dir;
  const std::string prefix = dir.file("w");
  const std::vector<std::string> gen = {"gen",
                                        "llm",
                                        "--model",
                                        small_model(dir),
                                        "--global-batch",
                                        "8",
                                        "--dp",
                                        "2",
                                        "--tp",
                                        "2",
                                        "--pp",
                                        "2",
                                        "--zero",
                                        "1",
                                        "-o",
                                        prefix};
  write_ring_roofline_system(dir.file("sys.json"));
  write_eight_rank_network(dir.file("net.yml"));
  auto run = [&](const std::string& output, const std::string& fast_path) {
    return run_orrery({"run", "-q", "-w", prefix, "-g", prefix + ".json", "-s",
                       dir.file("sys.json"), "-n", dir.file("net.yml"), "--fast-path", fast_path,
                       "--output", output});
  };
  auto results = [&](const std::string& path) {
    nlohmann::json doc = nlohmann::json::parse(read_whole_file(path));
    doc["summary"].erase("wall_seconds");
    return doc;
  };
  const CommandResult by_rank = run_orrery(gen);
  ASSERT_EQ(by_rank.exit_code, 0) << by_rank.err;
  for (const char* mode : {"auto", "off"}) {
    ASSERT_EQ(run(dir.file(std::string("ranks-") + mode + ".json"), mode).exit_code, 0);
  }

  std::vector<std::string> classes = gen;
  classes.push_back("--classes");
  const CommandResult mixed = run_orrery(classes);
  ASSERT_EQ(mixed.exit_code, 0) << mixed.err;
  EXPECT_CONTAINS(mixed.err, prefix + ".0.et is left from an earlier run");
  const CommandResult refused = run(dir.file("x.json"), "auto");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_CONTAINS(refused.err, "both rank files");

  for (int rank = 0; rank < 8; ++rank)
    std::filesystem::remove(prefix + "." + std::to_string(rank) + ".et");
  const CommandResult by_class = run_orrery(classes);
  ASSERT_EQ(by_class.exit_code, 0) << by_class.err;
  EXPECT_TRUE(by_class.err.empty()) << by_class.err;
  EXPECT_CONTAINS(by_class.out,
                  "wrote 2 class files: " + prefix + ".class.0.et .. " + prefix + ".class.1.et");
  EXPECT_CONTAINS(by_class.out, "wrote " + prefix + ".ranks.json: 8 ranks");
  for (const char* mode : {"auto", "off"}) {
    SCOPED_TRACE(mode);
    const std::string output = dir.file(std::string("classes-") + mode + ".json");
    const CommandResult result = run(output, mode);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(results(output), results(dir.file(std::string("ranks-") + mode + ".json")));
  }
  // The trace verbs read rank files; they point at the map and a class file.
  const CommandResult inspect = run_orrery({"trace", "validate", prefix});
  EXPECT_EQ(inspect.exit_code, 1);
  EXPECT_CONTAINS(inspect.err, "holds a rank map");
}

// A rank map edited by hand: a rank of a clean class is kept as its class and renaming until a run
// needs it, so what its renaming breaks must still be found, with the same message whether the run
// decides classes (--fast-path auto) or simulates every rank (off).
TEST(GenLlmCli, a_hand_edited_rank_map_is_refused_by_rank_and_node_in_every_mode) {
  TempDir dir;
  const std::string prefix = dir.file("w");
  const CommandResult gen =
      run_orrery({"gen", "llm", "--model", small_model(dir), "--global-batch", "8", "--dp", "2",
                  "--tp", "2", "--pp", "2", "--classes", "-o", prefix});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  write_ring_roofline_system(dir.file("sys.json"));
  write_eight_rank_network(dir.file("net.yml"));
  const nlohmann::json map = nlohmann::json::parse(read_whole_file(prefix + ".ranks.json"));
  // Rank 3 (tp 1, dp 1 of stage 0) renames the first stage's groups 1 and 5 (its tensor and data
  // groups) and 9 (the embedding group); rank 1 sends to the next stage's rank 5 as peer 4.
  ASSERT_EQ(map["ranks"][3]["groups"][0], nlohmann::json::array({"1", "2"}));
  ASSERT_EQ(map["ranks"][1]["peers"][1], nlohmann::json::array({4, 5}));
  auto run_edited = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& mode) {
    nlohmann::json edited = map;
    edit(edited);
    write(prefix + ".ranks.json", edited.dump());
    return run_orrery({"run", "-q", "-w", prefix, "-g", prefix + ".json", "-s",
                       dir.file("sys.json"), "-n", dir.file("net.yml"), "--fast-path", mode});
  };
  const std::string rank3 = prefix + ".class.0.et as rank 3: rank 3 node ";
  for (const char* mode : {"auto", "off"}) {
    SCOPED_TRACE(mode);
    // A group that the group file does not have.
    const CommandResult unknown =
        run_edited([](nlohmann::json& m) { m["ranks"][3]["groups"][0][1] = "99"; }, mode);
    expect_clean_failure(unknown, rank3);
    EXPECT_CONTAINS(unknown.err, "pg_name '99' names no communicator group");
    // A group that exists but does not hold the rank.
    const CommandResult foreign =
        run_edited([](nlohmann::json& m) { m["ranks"][3]["groups"][0][1] = "3"; }, mode);
    expect_clean_failure(foreign, rank3);
    EXPECT_CONTAINS(foreign.err, "communicator group '3', which does not contain rank 3");
    // A send turned to the wrong rank of the next stage: both ends are named, none deadlocks.
    const CommandResult astray =
        run_edited([](nlohmann::json& m) { m["ranks"][1]["peers"][1][1] = 6; }, mode);
    EXPECT_EQ(astray.exit_code, 1) << astray.err;
    EXPECT_CONTAINS(astray.err, "the run cannot finish");
    EXPECT_CONTAINS(astray.err, "send of 131072 bytes to rank 6 (tag 1) has no matching receive");
    EXPECT_CONTAINS(astray.err,
                    "rank 5 node 0: receive of 131072 bytes from rank 1 (tag 1) has no "
                    "matching send");
  }
}

TEST(GenLlmCli, gpt3_flops_agree_with_megatron_and_memory_warns_beyond_the_device) {
  TempDir dir;
  const CommandResult result = run_orrery(
      {"gen", "llm", "--model", "gpt3-175b", "--global-batch", "2", "--dp", "1", "--tp", "8",
       "--pp", "2", "--recompute", "--device-memory", "80GiB", "--gzip", "-o", dir.file("gpt3")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_CONTAINS(result.out, "model gpt3-175b: 96 layers, hidden 12,288, 96 heads");
  EXPECT_CONTAINS(result.out, "recomputation full");
  EXPECT_CONTAINS(result.out, ".15.et.gz");
  // With 2 pipeline stages each rank holds 87 B / 8 parameters and their Adam states.
  EXPECT_CONTAINS(result.err, "orrery: warning: pipeline stages 0, 1 need up to");
  EXPECT_CONTAINS(result.err, "more than --device-memory 80GiB (80.00 GiB)");
  const size_t at = result.out.find("formula");
  ASSERT_NE(at, std::string::npos);
  const double percent = std::stod(result.out.substr(result.out.find(": ", at) + 2));
  EXPECT_LT(std::abs(percent), 2.0) << result.out;
}

TEST(GenLlmCli, bad_plans_fail_with_one_message_naming_the_flag) {
  TempDir dir;
  const std::string prefix = dir.file("x");
  expect_clean_failure(run_orrery({"gen", "llm", "--model", "gpt3-175b", "--global-batch", "8",
                                   "--tp", "5", "-o", prefix}),
                       "--tp 5 does not divide the 96 attention heads of gpt3-175b");
  expect_clean_failure(
      run_orrery({"gen", "llm", "--model", "gpt-9", "--global-batch", "8", "-o", prefix}),
      "--model: unknown model 'gpt-9'");
  expect_clean_failure(run_orrery({"gen", "llm", "--global-batch", "8", "-o", prefix}),
                       "missing --model");
  expect_clean_failure(run_orrery({"gen", "llm", "--model", "llama2-7b", "-o", prefix}),
                       "missing --global-batch");
  expect_clean_failure(run_orrery({"gen", "llm", "--model", "llama2-7b", "--global-batch", "8",
                                   "--schedule", "gpipe", "-o", prefix}),
                       "--schedule: unknown pipeline schedule 'gpipe'");
  expect_clean_failure(run_orrery({"gen", "llm", "--model", "llama2-7b", "--global-batch", "8",
                                   "--device-memory", "lots", "-o", prefix}),
                       "--device-memory: cannot read 'lots'");
  expect_clean_failure(run_orrery({"gen", "inference", "--model", "llama2-7b", "-o", prefix}),
                       "missing --prompt-lengths");
  EXPECT_FALSE(std::filesystem::exists(prefix + ".0.et"));
}

TEST(GenLlmCli, inference_traces_validate_and_report_the_kv_cache) {
  TempDir dir;
  const std::string prefix = dir.file("serve");
  const CommandResult result =
      run_orrery({"gen", "inference", "--model", small_model(dir), "--tp", "2", "--pp", "2",
                  "--prompt-lengths", "64,128,32", "--output-lengths", "4", "-o", prefix});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_CONTAINS(result.out,
                  "plan: 4 ranks = tp 2 x pp 2; 3 requests (224 prompt tokens, 12 "
                  "generated), prefill and 3 decode steps");
  EXPECT_CONTAINS(result.out, "KV cache");
  const CommandResult validate = run_orrery({"trace", "validate", "--strict", prefix});
  EXPECT_EQ(validate.exit_code, 0) << validate.out << validate.err;
}

}  // namespace gen_llm_cli_test
}  // namespace orrery
