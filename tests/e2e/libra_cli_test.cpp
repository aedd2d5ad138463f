// `orrery libra` as a user runs it: LIBRA's files, orrery's problem file, the JSON, the SVG, the
// simulation check, and bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "e2e/run_command.h"

// Some inputs are the public files in ../shared/data; without that folder these tests skip.
#define SKIP_WITHOUT_SHARED_DATA()                            \
  if (!std::filesystem::is_directory(ORRERY_SHARED_DATA_DIR)) \
  GTEST_SKIP() << "no " ORRERY_SHARED_DATA_DIR

namespace orrery {
namespace {

std::string libra_input(const std::string& relative) {
  return std::string(ORRERY_SHARED_DATA_DIR) + "/astra-sim+libra/inputs/" + relative;
}

std::string example(const std::string& name) {
  return (std::filesystem::path(ORRERY_TEST_DATA_DIR) / ".." / ".." / "examples" / "libra" / name)
      .string();
}

std::filesystem::path scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "orrery-libra-e2e";
  std::filesystem::create_directories(dir);
  return dir / name;
}

TEST(LibraCli, help_names_the_inputs_and_the_constraint_syntax) {
  CommandResult result = run_orrery({"libra", "--help"});
  EXPECT_EQ(result.exit_code, 0);
  for (const char* text : {"--network", "--workload", "--communicator", "--cost-model",
                           "--constraint", "--budget", "--pareto", "--simulate", "PerfPerCost"}) {
    EXPECT_NE(result.out.find(text), std::string::npos) << text;
  }
}

TEST(LibraCli, libra_files_give_a_certified_optimum_json_and_frontier_svg) {
  SKIP_WITHOUT_SHARED_DATA();
  const std::string json_path = scratch("msft.json").string();
  const std::string svg_path = scratch("msft.svg").string();
  CommandResult result =
      run_orrery({"libra", "--network", libra_input("network/3d_network.yml"), "--workload",
                  libra_input("workload/MSFT_1T.txt"), "--communicator",
                  libra_input("communicator/MSFT_1T_3d.yml"), "--cost-model",
                  libra_input("cost_model/3d_cost_model.yml"), "-c", "sum = 500", "-o", json_path,
                  "--pareto", svg_path, "--pareto-points", "8"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("LIBRA: MSFT_1T on 3 dimensions (4096 NPUs)"), std::string::npos)
      << result.out;
  const nlohmann::json json = nlohmann::json::parse(read_whole_file(json_path));
  const std::vector<double> bw = json["optimum"]["bandwidth_gbps"];
  ASSERT_EQ(bw.size(), 3u);
  EXPECT_NEAR(bw[0] + bw[1] + bw[2], 500.0, 1e-6);
  EXPECT_LT(json["certificate"]["gap"].get<double>(), 1e-6);
  EXPECT_GT(json["equal_split"]["speedup"].get<double>(), 1.2);  // 1.2121 measured
  EXPECT_EQ(json["frontier"].size(), 8u);
  const std::string svg = read_whole_file(svg_path);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_NE(svg.find("equal split"), std::string::npos);
}

TEST(LibraCli, problem_file_with_simulation_check_ranks_the_optimum_first) {
  const std::string json_path = scratch("example.json").string();
  CommandResult result = run_orrery(
      {"libra", example("tp_dp_3d.yml"), "--simulate", scratch("sim").string(), "-o", json_path});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json json = nlohmann::json::parse(read_whole_file(json_path));
  const double optimum = json["simulated"]["optimum"]["simulated_ns"];
  const double equal = json["simulated"]["equal"]["simulated_ns"];
  const double given = json["simulated"]["given"]["simulated_ns"];
  EXPECT_LT(optimum, equal);
  EXPECT_LT(optimum, given);
  EXPECT_LE(json["optimum"]["bandwidth_gbps"][2].get<double>(), 200 + 1e-6);  // B2 <= 200
}

TEST(LibraCli, bad_inputs_are_one_clear_message_and_exit_1) {
  SKIP_WITHOUT_SHARED_DATA();
  CommandResult bad_constraint = run_orrery({"libra", example("tp_dp_3d.yml"), "-c", "B7 <= 3"});
  EXPECT_EQ(bad_constraint.exit_code, 1);
  EXPECT_NE(bad_constraint.err.find("--constraint: constraint 'B7 <= 3': B7 but the network has 3"),
            std::string::npos)
      << bad_constraint.err;
  CommandResult infeasible =
      run_orrery({"libra", example("tp_dp_3d.yml"), "-c", "sum = 500", "-c", "B0 >= 600"});
  EXPECT_EQ(infeasible.exit_code, 1);
  EXPECT_NE(infeasible.err.find("infeasible"), std::string::npos) << infeasible.err;
  CommandResult objective = run_orrery({"libra", example("tp_dp_3d.yml"), "--objective", "fast"});
  EXPECT_EQ(objective.exit_code, 1);
  EXPECT_NE(objective.err.find("--objective: unknown objective 'fast'"), std::string::npos)
      << objective.err;
  CommandResult no_network = run_orrery({"libra", "--workload", libra_input("workload/GPT_3.txt")});
  EXPECT_EQ(no_network.exit_code, 1);
  EXPECT_NE(no_network.err.find("no network"), std::string::npos) << no_network.err;
  CommandResult partial =
      run_orrery({"libra", "--network", libra_input("network/4d_network.yml"), "--workload",
                  libra_input("workload/GPT_3.txt"), "--communicator",
                  libra_input("communicator/GPT_3_4d.yml"), "-c", "sum = 500", "--simulate",
                  scratch("partial").string()});
  EXPECT_EQ(partial.exit_code, 1);
  EXPECT_NE(partial.err.find("layer 'Q1': group size 4 in dimension 1 of size 8"),
            std::string::npos)
      << partial.err;
}

}  // namespace
}  // namespace orrery
