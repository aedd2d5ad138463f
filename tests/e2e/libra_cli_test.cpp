// `orrery libra` as a user runs it: LIBRA's files, orrery's problem file, the JSON, the SVG, the
// simulation check, and bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "e2e/run_command.h"
#include "scratch_dir.h"

// Some inputs are the public files in ../shared/data; without that folder these tests skip.
#define SKIP_WITHOUT_SHARED_DATA()                            \
  if (!std::filesystem::is_directory(ORRERY_SHARED_DATA_DIR)) \
  GTEST_SKIP() << "no " ORRERY_SHARED_DATA_DIR

namespace orrery {
namespace libra_cli_test {

std::string libra_input(const std::string& relative) {
  return std::string(ORRERY_SHARED_DATA_DIR) + "/astra-sim+libra/inputs/" + relative;
}

std::string example(const std::string& name) {
  return (std::filesystem::path(ORRERY_TEST_DATA_DIR) / ".." / ".." / "examples" / "libra" / name)
      .string();
}

std::filesystem::path scratch(const std::string& name) {
  return test::scratch_dir("libra-e2e") / name;
}

void write_text(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

// A 4,096-NPU LIBRA network file when ../shared/data is there, else a 16-NPU one written here:
// either way not the 8 ranks of the plans below.
std::string libra_input_or_local() {
  const std::string shared = libra_input("network/3d_network.yml");
  if (std::filesystem::exists(shared)) return shared;
  const std::string path = scratch("net16.yml").string();
  write_text(path, "Topology: [ Ring, Switch ]\nNpusCount: [ 4, 4 ]\n");
  return path;
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
  const std::string html_path = scratch("msft.html").string();
  CommandResult result =
      run_orrery({"libra", "--network", libra_input("network/3d_network.yml"), "--workload",
                  libra_input("workload/MSFT_1T.txt"), "--communicator",
                  libra_input("communicator/MSFT_1T_3d.yml"), "--cost-model",
                  libra_input("cost_model/3d_cost_model.yml"), "-c", "sum = 500", "-o", json_path,
                  "--pareto", svg_path, "--pareto-html", html_path, "--pareto-points", "8"});
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
  // The page: the same chart inline, and one table row per budget with the JSON's times.
  const std::string html = read_whole_file(html_path);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find(svg), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  size_t rows = 0;
  for (size_t at = html.find("<tr><td>"); at != std::string::npos;
       at = html.find("<tr><td>", at + 1)) {
    ++rows;
  }
  EXPECT_EQ(rows, 8u);
  for (const nlohmann::json& point : json["frontier"]) {
    const std::string time = fmt::format("<td>{:.4f}</td>", point["time_ns"].get<double>() / 1e6);
    EXPECT_NE(html.find(time), std::string::npos) << time;
  }
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

TEST(LibraCli, the_check_runs_in_memory_and_its_inputs_written_on_request_run_the_same) {
  const std::string in_memory = scratch("memory.json").string();
  CommandResult plain =
      run_orrery({"libra", example("tp_dp_3d.yml"), "--simulate", "-o", in_memory});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out.find("inputs in"), std::string::npos) << plain.out;
  const std::filesystem::path dir = scratch("kept");
  std::filesystem::remove_all(dir);
  const std::string with_files = scratch("files.json").string();
  CommandResult kept =
      run_orrery({"libra", example("tp_dp_3d.yml"), "--simulate", dir.string(), "-o", with_files});
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  const nlohmann::json a = nlohmann::json::parse(read_whole_file(in_memory));
  const nlohmann::json b = nlohmann::json::parse(read_whole_file(with_files));
  EXPECT_EQ(a["simulated"], b["simulated"]);
  // The written inputs are what was simulated: orrery run on them gives the optimum's time.
  const std::string run_json = scratch("run.json").string();
  CommandResult run = run_orrery(
      {"run", "-q", "-w", (dir / "libra").string(), "-s", (dir / "system.json").string(), "-n",
       (dir / "optimum.yml").string(), "-g", (dir / "comm_groups.json").string(), "-o", run_json});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json simulated = nlohmann::json::parse(read_whole_file(run_json));
  EXPECT_EQ(simulated["summary"]["simulated_ns"].get<int64_t>(),
            static_cast<int64_t>(a["simulated"]["optimum"]["simulated_ns"].get<double>()));
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
  // A group of 2 of the 4 NPUs of dimension 1 that also spans dimensions 0 and 2: no sub-grid
  // of the simulated network holds it.
  const std::string straddle = scratch("straddle.yml").string();
  write_text(straddle,
             "network:\n"
             "  - {topology: Ring, size: 2}\n"
             "  - {topology: FullyConnected, size: 4}\n"
             "  - {topology: Switch, size: 2}\n"
             "workload:\n"
             "  - {name: x, forward: {compute_ns: 1000, collective: ALLREDUCE, bytes: 1e6,\n"
             "                        groups: [2, 2, 2]}}\n"
             "constraints: [sum = 300]\n");
  CommandResult partial = run_orrery({"libra", straddle, "--simulate", scratch("partial")});
  EXPECT_EQ(partial.exit_code, 1);
  EXPECT_NE(partial.err.find("--simulate: layer 'x', forward: the group uses 2 NPUs of dimension 1 "
                             "together with lower and higher dimensions"),
            std::string::npos)
      << partial.err;
}

// A small GPT (4 layers, h 256) with tp 2 x dp 2 x pp 2 on Ring 2 x FullyConnected 2 x Switch 2.
const char* const kPlan[] = {"--global-batch", "4", "--micro-batch", "1", "--tp", "2",
                             "--dp",           "2", "--pp",          "2"};

std::string small_model() {
  const std::string path = scratch("small.json").string();
  write_text(path, R"({"name": "small", "base": "gpt3-175b", "layers": 4, "hidden": 256,
                       "heads": 8, "kv_heads": 8, "ffn": 1024, "vocab": 1024, "seq": 256})");
  return path;
}

std::string roofline_system() {
  const std::string path = scratch("a100.json").string();
  write_text(path, R"({"all-reduce-implementation": ["ring"], "roofline-enabled": 1,
                       "peak-perf": 312, "local-mem-bw": 2039})");
  return path;
}

TEST(LibraCli, help_describes_the_derived_workload_flags) {
  CommandResult result = run_orrery({"libra", "--help"});
  EXPECT_EQ(result.exit_code, 0);
  for (const char* text : {"--trace", "--llm-plan", "--comm-groups", "--system", "--rank",
                           "roofline", "sub-grids", "--pareto-html"}) {
    EXPECT_NE(result.out.find(text), std::string::npos) << text;
  }
}

TEST(LibraCli, gen_llm_traces_and_the_same_plan_in_memory_give_the_same_optimum) {
  std::vector<std::string> gen = {"gen",         "llm", "--model",
                                  small_model(), "-o",  scratch("llm/w").string()};
  gen.insert(gen.end(), std::begin(kPlan), std::end(kPlan));
  CommandResult generated = run_orrery(gen);
  ASSERT_EQ(generated.exit_code, 0) << generated.err;
  const std::string problem = scratch("llm_problem.yml").string();
  write_text(problem,
             "network:\n"
             "  - {topology: Ring, size: 2}\n"
             "  - {topology: FullyConnected, size: 2}\n"
             "  - {topology: Switch, size: 2}\n"
             "workload: {trace: llm/w, system: a100.json}\n"
             "constraints: [sum = 300]\n");
  roofline_system();
  const std::string from_trace = scratch("llm_trace.json").string();
  CommandResult trace =
      run_orrery({"libra", problem, "-o", from_trace, "--simulate", scratch("llm_sim").string()});
  ASSERT_EQ(trace.exit_code, 0) << trace.err;
  EXPECT_NE(trace.out.find("workload     rank 0 of "), std::string::npos) << trace.out;
  EXPECT_NE(trace.out.find("by the roofline"), std::string::npos) << trace.out;
  EXPECT_NE(trace.out.find("point-to-point messages"), std::string::npos) << trace.out;
  const nlohmann::json a = nlohmann::json::parse(read_whole_file(from_trace));
  EXPECT_NE(a["derived_workload"].get<std::string>().find("rank 0 of "), std::string::npos);
  // The optimum also wins in simulation.
  EXPECT_LT(a["simulated"]["optimum"]["simulated_ns"].get<double>(),
            a["simulated"]["equal"]["simulated_ns"].get<double>());

  std::string plan = "--model " + small_model();
  for (size_t i = 0; i < std::size(kPlan); i += 2) {
    plan += fmt::format(" {} {}", kPlan[i], kPlan[i + 1]);
  }
  const std::string from_plan = scratch("llm_plan.json").string();
  // The problem file's system (its roofline) still times the plan given on the command line.
  CommandResult memory = run_orrery({"libra", problem, "--llm-plan", plan, "-o", from_plan});
  ASSERT_EQ(memory.exit_code, 0) << memory.err;
  const nlohmann::json b = nlohmann::json::parse(read_whole_file(from_plan));
  EXPECT_EQ(a["optimum"]["bandwidth_gbps"], b["optimum"]["bandwidth_gbps"]);
  EXPECT_EQ(a["optimum"]["time_ns"], b["optimum"]["time_ns"]);
}

TEST(LibraCli, bad_derived_workloads_are_one_clear_message) {
  const std::string problem = scratch("llm_bad.yml").string();
  write_text(problem,
             "network:\n"
             "  - {topology: Ring, size: 4}\n"
             "  - {topology: Switch, size: 2}\n"
             "workload:\n"
             "  llm: {model: gpt3-175b, tp: 4, dp: 2, global_batch: 2, pipeline: 2}\n"
             "constraints: [sum = 300]\n");
  CommandResult unknown = run_orrery({"libra", problem});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("llm_bad.yml:5: unknown option 'pipeline'"), std::string::npos)
      << unknown.err;
  CommandResult ranks = run_orrery({"libra", "--network", libra_input_or_local(), "--llm-plan",
                                    "--model gpt3-175b --tp 4 --dp 2 --global-batch 2", "--system",
                                    roofline_system()});
  EXPECT_EQ(ranks.exit_code, 1);
  EXPECT_NE(ranks.err.find("--llm-plan: the plan has 8 ranks"), std::string::npos) << ranks.err;
  const std::string no_system = scratch("llm_no_system.yml").string();
  write_text(no_system, fmt::format("network:\n"
                                    "  - {{topology: Ring, size: 4}}\n"
                                    "  - {{topology: Switch, size: 2}}\n"
                                    "workload:\n"
                                    "  llm: {{model: {}, tp: 4, dp: 2, global_batch: 2}}\n"
                                    "constraints: [sum = 300]\n",
                                    small_model()));
  CommandResult no_roofline = run_orrery({"libra", no_system});
  EXPECT_EQ(no_roofline.exit_code, 1);
  EXPECT_NE(no_roofline.err.find("FLOPs and no duration_micros"), std::string::npos)
      << no_roofline.err;
  CommandResult with_roofline = run_orrery({"libra", no_system, "--system", roofline_system()});
  EXPECT_EQ(with_roofline.exit_code, 0) << with_roofline.err;
  CommandResult stray = run_orrery({"libra", example("tp_dp_3d.yml"), "--rank", "2"});
  EXPECT_EQ(stray.exit_code, 1);
  EXPECT_NE(stray.err.find("apply to a workload derived from a trace"), std::string::npos)
      << stray.err;
}

}  // namespace libra_cli_test
}  // namespace orrery
