// `orrery partition` as a user runs it: the JSON it prints, the traces it writes (checked by
// `orrery trace validate --strict` and simulated by `orrery run`), and its errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "e2e/run_command.h"
#include "partition/reference.h"

namespace orrery::partition {
namespace partition_cli_test {

std::vector<std::string> small_model_args(int workers) {
  return {"partition",
          "--model",
          partition_data("digits_mlp_small_state.pt"),
          "--workers",
          std::to_string(workers),
          "--calibration",
          partition_data("calibration.csv"),
          "--data",
          partition_data("test.csv")};
}

std::filesystem::path scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("orrery-partition-cli-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(PartitionCli, json_compares_the_four_methods_at_a_fixed_budget) {
  std::vector<std::string> args = small_model_args(2);
  args.insert(args.end(), {"--budget", "0.25", "--json"});
  const CommandResult result = run_orrery(args);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json json = nlohmann::json::parse(result.out);
  EXPECT_DOUBLE_EQ(json["unpartitioned_accuracy"].get<double>(), 579.0 / 597.0);
  for (const char* name : {"repurpose", "contiguous", "random", "magnitude"}) {
    const nlohmann::json& m = json["methods"][name];
    EXPECT_GT(m["accuracy"].get<double>(), 0.5) << name;
    EXPECT_EQ(m["flops_per_worker"].size(), 2u) << name;
  }
  // 64-128-64-10 on two workers, every weight kept: the 64 and 32 activations each worker needs
  // from the other in layers 2 and 3, and outputs 5 to 9 to worker 0; 4 bytes each.
  EXPECT_EQ(json["methods"]["contiguous"]["traffic_bytes"], (128 + 64 + 5) * 4);
  EXPECT_EQ(
      json["methods"]["contiguous"]["flops_per_worker"],
      (std::vector<int64_t>{2 * (64 * 64 + 32 * 128 + 5 * 64), 2 * (64 * 64 + 32 * 128 + 5 * 64)}));
  // A quarter of the layers' traffic at most, and the gather.
  for (const char* name : {"repurpose", "random", "magnitude"}) {
    EXPECT_LE(json["methods"][name]["traffic_bytes"].get<int64_t>(), (48 + 16 + 5) * 4) << name;
  }
}

TEST(PartitionCli, emitted_traces_validate_strictly_and_simulate_with_orrery_run) {
  const auto dir = scratch("traces");
  write(dir / "network.yml",
        "topology: [ Ring ]\nnpus_count: [ 2 ]\nbandwidth: [ 25.0 ]\nlatency: [ 1000.0 ]\n");
  write(dir / "system.json",
        "{\"scheduling-policy\": \"LIFO\", \"endpoint-delay\": 10, "
        "\"active-chunks-per-dimension\": 1,"
        " \"preferred-dataset-splits\": 1, \"all-reduce-implementation\": [\"ring\"],"
        " \"all-gather-implementation\": [\"ring\"], \"reduce-scatter-implementation\": [\"ring\"],"
        " \"all-to-all-implementation\": [\"ring\"], \"collective-optimization\": \"baseline\","
        " \"local-mem-bw\": 50, \"roofline-enabled\": 1, \"peak-perf\": 1}\n");
  std::vector<std::string> args = small_model_args(2);
  const std::string prefix = (dir / "mlp").string();
  args.insert(args.end(), {"--budget", "0.1", "--methods", "repurpose,contiguous", "--emit-chakra",
                           prefix, "--batch", "8", "--system", (dir / "system.json").string(),
                           "--network", (dir / "network.yml").string(), "--json"});
  const CommandResult result = run_orrery(args);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json json = nlohmann::json::parse(result.out);
  const int64_t repurpose_ns = json["methods"]["repurpose"]["latency_ns"].get<int64_t>();
  const int64_t contiguous_ns = json["methods"]["contiguous"]["latency_ns"].get<int64_t>();
  EXPECT_GT(repurpose_ns, 0);
  // Fewer and smaller messages on a 25 GB/s, 1 us link: sooner done.
  EXPECT_LT(repurpose_ns, contiguous_ns);
  for (const char* method : {"repurpose", "contiguous"}) {
    const std::string set = prefix + "." + method;
    const CommandResult validate = run_orrery({"trace", "validate", "--strict", set});
    EXPECT_EQ(validate.exit_code, 0) << method << ": " << validate.out << validate.err;
    const CommandResult run =
        run_orrery({"run", "-q", "--workload-configuration=" + set,
                    "--system-configuration=" + (dir / "system.json").string(),
                    "--network-configuration=" + (dir / "network.yml").string()});
    EXPECT_EQ(run.exit_code, 0) << method << ": " << run.err;
  }
  std::filesystem::remove_all(dir);
}

TEST(PartitionCli, bad_inputs_exit_1_with_one_message_naming_the_file) {
  const auto dir = scratch("errors");
  std::vector<std::string> args = small_model_args(2);
  args[2] = (dir / "missing.pt").string();
  CommandResult result = run_orrery(args);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err,
            "orrery: error: " + args[2] + ": cannot open a model: No such file or directory\n");

  write(dir / "bad.csv", "1,2,3\n1,2\n");
  args = small_model_args(2);
  args[6] = (dir / "bad.csv").string();
  result = run_orrery(args);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, "orrery: error: " + args[6] + ":2: 2 fields, the rows before have 3\n");

  write(dir / "narrow.csv", "1,2,3\n");
  args = small_model_args(2);
  args[8] = (dir / "narrow.csv").string();
  result = run_orrery(args);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("2 features per row, the model"), std::string::npos) << result.err;

  // A calibration row labelled beyond the model's 10 classes (the refit ignores labels, but the
  // file is not for this model).
  std::string row;
  for (int feature = 0; feature < 64; ++feature) row += "0,";
  write(dir / "labels.csv", row + "3\n" + row + "12\n");
  args = small_model_args(2);
  args[6] = (dir / "labels.csv").string();
  result = run_orrery(args);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, "orrery: error: " + args[6] +
                            ":2: label 12, but the model has 10 outputs (classes 0 to 9)\n");

  args = small_model_args(2);
  args.insert(args.end(), {"--methods", "repurpose,best"});
  result = run_orrery(args);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err,
            "orrery: error: --methods: unknown method \"best\" (repurpose, contiguous, "
            "random, magnitude, refit)\n");

  // Flags checked before anything is read. A typed --budget -1 was the "not given" sentinel (the
  // search ran instead), an infinite ridge never finished, 4097 grid points ran for minutes.
  for (const auto& [flag, value, message] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"--budget", "nan", "--budget: expected a number from 0 to 1, found nan"},
           {"--budget", "-1", "--budget: expected a number from 0 to 1, found -1"},
           {"--ridge", "-1", "--ridge: expected a number from 0 to 1e+09, found -1"},
           {"--ridge", "inf", "--ridge: expected a number from 0 to 1e+09, found inf"},
           {"--max-accuracy-drop", "inf",
            "--max-accuracy-drop: expected a number from 0 to 100, found inf"},
           {"--grid-points", "4097",
            "--grid-points: expected a whole number from 2 to 130, found '4097'"},
           {"--workers", "0", "--workers: expected 1 or more, found 0"}}) {
    args = small_model_args(2);
    args.insert(args.end(), {flag, value});
    result = run_orrery(args);
    EXPECT_EQ(result.exit_code, 1) << flag;
    EXPECT_EQ(result.err.rfind("orrery: error: " + message + "\n", 0), 0u) << result.err;
  }
  // More workers than the widest layer (128 units) has: refused at once (4,097 ran for 55 s).
  result = run_orrery(small_model_args(129));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, "orrery: error: 129 workers but the widest layer of " +
                            partition_data("digits_mlp_small_state.pt") +
                            " has 128 units: some worker would hold nothing in any layer\n");
  std::filesystem::remove_all(dir);
}

}  // namespace partition_cli_test
}  // namespace orrery::partition
