// `orrery run` as a user runs it: ASTRA-sim's flags unchanged, ASTRA-sim's output lines, the JSON
// result, byte-identical repeats, and clean failures.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "chakra/trace_builder.h"
#include "e2e/run_command.h"

namespace orrery {
namespace run_cli_test {

using test::TempDir;

std::string example(const std::string& file) {
  return std::string(ORRERY_TEST_DATA_DIR) + "/../../examples/llama_dp2tp2pp2/" + file;
}

std::vector<std::string> example_flags() {
  return {"--workload-configuration=" + example("workload"),
          "--comm-group-configuration=" + example("workload.json"),
          "--system-configuration=" + example("system.json"),
          "--network-configuration=" + example("network.yml")};
}

std::string micro(const std::string& name) {
  return test::test_data("astra-sim/microbenchmarks/" + name + "/8npus_1MB/" + name);
}

void expect_failure(const CommandResult& result, const std::string& needle) {
  EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
  EXPECT_NE(result.err.find("orrery: error: "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(needle), std::string::npos) << result.err;
}

TEST(RunCli, astra_sim_flags_and_output_lines) {
  const CommandResult result = run_orrery(
      {"run", "--workload-configuration=" + micro("all_reduce"),
       "--system-configuration=" + test::test_data("astra-sim/configs/HGX-H100-validated.json"),
       "--network-configuration=" + test::test_data("network/HGX-H100-validated.yml"),
       "--remote-memory-configuration=" +
           test::test_data("astra-sim/configs/no_memory_expansion.json"),
       "--network-backend", "congestion-aware"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (int rank = 0; rank < 8; ++rank) {
    EXPECT_NE(result.out.find(fmt::format(
                  "sys[{}] finished, 57426 cycles, exposed communication 57426 cycles.", rank)),
              std::string::npos)
        << result.out;
  }
  EXPECT_NE(result.out.find("simulated time          57,426 ns"), std::string::npos) << result.out;
}

TEST(RunCli, short_flags_and_json_output) {
  TempDir dir;
  std::vector<std::string> args{"run", "-q", "-o", dir.file("r.json")};
  for (const std::string& flag : example_flags()) args.push_back(flag);
  const CommandResult result = run_orrery(args);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out.find("sys[0]"), std::string::npos) << "--quiet drops the per-rank lines";
  std::ifstream in(dir.file("r.json"));
  const auto json = nlohmann::json::parse(in);
  ASSERT_EQ(json["ranks"].size(), 8u);
  for (const auto& rank : json["ranks"]) {
    EXPECT_GT(rank["finish_ns"].get<int64_t>(), 0);
    EXPECT_LE(rank["exposed_comm_ns"].get<int64_t>(), rank["finish_ns"].get<int64_t>());
    EXPECT_EQ(rank["finish_ns"].get<int64_t>() - rank["compute_ns"].get<int64_t>(),
              rank["exposed_comm_ns"].get<int64_t>());
  }
  EXPECT_EQ(json["collectives"].size(), 96u);
  ASSERT_FALSE(json["links"].empty());
  for (const char* key : {"src", "dst", "bytes", "busy_ns"})
    EXPECT_TRUE(json["links"][0].contains(key)) << key;
  EXPECT_EQ(json["summary"]["ranks"], 8);
}

TEST(RunCli, two_runs_write_byte_identical_json_apart_from_wall_time) {
  TempDir dir;
  std::string texts[2];
  for (int idx = 0; idx < 2; ++idx) {
    std::vector<std::string> args{"run", "-q", "-b", "congestion-aware", "-o", dir.file("r.json")};
    for (const std::string& flag : example_flags()) args.push_back(flag);
    ASSERT_EQ(run_orrery(args).exit_code, 0);
    std::ifstream in(dir.file("r.json"));
    auto json = nlohmann::json::parse(in);
    json["summary"].erase("wall_seconds");
    texts[idx] = json.dump(1);
  }
  EXPECT_EQ(texts[0], texts[1]);
}

TEST(RunCli, help_lists_the_astra_sim_flags) {
  const CommandResult result = run_orrery({"run", "--help"});
  EXPECT_EQ(result.exit_code, 0);
  for (const char* flag :
       {"--workload-configuration", "--system-configuration", "--network-configuration",
        "--remote-memory-configuration", "--comm-group-configuration", "--compute-scale",
        "--comm-scale", "--injection-scale", "--network-backend", "--output"}) {
    EXPECT_NE(result.out.find(flag), std::string::npos) << flag;
  }
}

// ---- failures: one message, non-zero exit, never a crash ----

TEST(RunCliBadInput, a_missing_rank_file) {
  TempDir dir;
  std::ofstream(dir.file("net.yml"))
      << "topology: [ Ring ]\nnpus_count: [ 16 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n";
  expect_failure(run_orrery({"run", "-w", micro("all_reduce"), "-s",
                             test::test_data("astra-sim/configs/Ring_4chunks.json"), "-n",
                             dir.file("net.yml")}),
                 "all_reduce.8.et is missing");
}

TEST(RunCliBadInput, an_unmatched_receive_names_the_stuck_rank_and_node) {
  TempDir dir;
  auto recv = test::make_node(11, ChakraProtoMsg::COMM_RECV_NODE);
  test::add_attr(recv, "comm_src").set_int32_val(1);
  test::add_attr(recv, "comm_tag").set_int32_val(4);
  test::add_attr(recv, "comm_size").set_int64_val(1024);
  test::write_trace(dir.file("w.0.et"), {recv});
  test::write_trace(dir.file("w.1.et"), {test::comp_node(1)});
  std::ofstream(dir.file("net.yml"))
      << "topology: [ Ring ]\nnpus_count: [ 2 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n";
  const CommandResult result = run_orrery({"run", "-w", dir.file("w"), "-s",
                                           test::test_data("astra-sim/configs/Ring_4chunks.json"),
                                           "-n", dir.file("net.yml")});
  expect_failure(result, "the run cannot finish");
  EXPECT_NE(result.err.find(
                "rank 0 node 11: receive of 1024 bytes from rank 1 (tag 4) has no matching send"),
            std::string::npos)
      << result.err;
  EXPECT_EQ(result.out.find("finished"), std::string::npos) << "no rank may be reported finished";
}

TEST(RunCliBadInput, an_unknown_backend_is_a_usage_error) {
  const CommandResult result =
      run_orrery({"run", "-w", micro("all_reduce"), "-s", "x.json", "-n", "y.yml", "-b", "garnet"});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("garnet"), std::string::npos) << result.err;
}

TEST(RunCliBadInput, a_missing_system_file) {
  expect_failure(run_orrery({"run", "-w", micro("all_reduce"), "-s", "/no/such/sys.json", "-n",
                             test::test_data("network/Ring_8npus.yml")}),
                 "/no/such/sys.json");
}

TEST(RunCli, perturb_slows_the_ranks_it_names_and_reports_goodput) {
  TempDir dir;
  // The file, as a user writes it, with failures added.
  std::ofstream(dir.file("perturb.yml"))
      << "compute:                 # a factor on every compute node's time of these ranks\n"
         "  - ranks: \"3\"           # rank list as --timeline-ranks takes it\n"
         "    factor: 2.0\n"
         "goodput:\n  mtbf_hours: 20000\n  checkpoint_s: 20\n  restart_s: 300\n";
  // gen llm's traces order every group's collectives by their dependencies.
  const CommandResult gen =
      run_orrery({"gen", "llm", "--model", "gpt3-6.7b", "--global-batch", "8", "--dp", "2", "--tp",
                  "2", "--pp", "2", "-o", dir.file("w")});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  std::vector<std::string> args{"run", "-q",
                                "-o",  dir.file("healthy.json"),
                                "-w",  dir.file("w"),
                                "-g",  dir.file("w.json"),
                                "-s",  example("system.json"),
                                "-n",  example("network.yml")};
  ASSERT_EQ(run_orrery(args).exit_code, 0);
  args[3] = dir.file("slow.json");
  args.push_back("--perturb");
  args.push_back(dir.file("perturb.yml"));
  const CommandResult result = run_orrery(args);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("fast path: off (" + dir.file("perturb.yml") +
                            ": rank 3 computes at a factor of 2, rank 0 at 1"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("goodput                 0."), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("Daly's closed form"), std::string::npos) << result.out;
  const auto healthy = nlohmann::json::parse(std::ifstream(dir.file("healthy.json")));
  const auto slow = nlohmann::json::parse(std::ifstream(dir.file("slow.json")));
  EXPECT_GT(slow["summary"]["simulated_ns"], healthy["summary"]["simulated_ns"]);
  EXPECT_EQ(slow["ranks"][3]["compute_ns"].get<int64_t>(),
            2 * healthy["ranks"][3]["compute_ns"].get<int64_t>());
  EXPECT_EQ(slow["ranks"][2]["compute_ns"], healthy["ranks"][2]["compute_ns"]);
  EXPECT_EQ(slow["perturbation"], dir.file("perturb.yml"));
  EXPECT_EQ(slow["goodput"]["components"], 8);
  EXPECT_GT(slow["goodput"]["simulated"].get<double>(), 0.9);
  EXPECT_FALSE(healthy.contains("goodput"));

  // The bundled example's traces leave two collectives of a group unordered: slowing rank 3
  // makes it issue them the other way round, which is refused, saying so.
  std::vector<std::string> example_args{"run", "-q", "--perturb", dir.file("perturb.yml")};
  for (const std::string& flag : example_flags()) example_args.push_back(flag);
  expect_failure(run_orrery(example_args), "leave this order to timing");
}

TEST(RunCliBadInput, a_bad_perturbation_file_names_its_line) {
  TempDir dir;
  std::ofstream(dir.file("perturb.yml")) << "compute:\n  - ranks: \"3-99\"\n    factor: 2\n";
  std::vector<std::string> args{"run", "-q", "--perturb", dir.file("perturb.yml")};
  for (const std::string& flag : example_flags()) args.push_back(flag);
  expect_failure(run_orrery(args), dir.file("perturb.yml") +
                                       ":2: compute entry: rank 99 is beyond the job's 8 ranks");
  args[3] = dir.file("missing.yml");
  expect_failure(run_orrery(args), "missing.yml: cannot open the perturbation file");
  // A folder opens on Linux and reads as nothing, which is a valid (empty) perturbation file:
  // the run must not go on as if the flag had not been given.
  std::filesystem::create_directory(dir.file("folder"));
  args[3] = dir.file("folder");
  expect_failure(run_orrery(args), dir.file("folder") + ": is a folder, not the perturbation file");
}

TEST(RunCli, jobs_share_a_network_and_report_their_slowdown_and_shared_links) {
  TempDir dir;
  // The 128-NPU two-tier Clos of the generator (16 NPUs per leaf); two 64-rank jobs on its
  // halves.
  std::ofstream(dir.file("clos128.yml")) << "generator: clos2\n";
  std::ofstream(dir.file("sys.json"))
      << "{\"scheduling-policy\": \"LIFO\", "
         "\"endpoint-delay\": 10, \"active-chunks-per-dimension\": 1, "
         "\"preferred-dataset-splits\": 4, "
         "\"all-reduce-implementation\": [\"ring\", \"ring\"], "
         "\"all-gather-implementation\": [\"ring\", \"ring\"], "
         "\"reduce-scatter-implementation\": [\"ring\", \"ring\"], "
         "\"all-to-all-implementation\": [\"ring\", \"ring\"], "
         "\"collective-optimization\": \"localBWAware\", "
         "\"local-mem-bw\": 1600}\n";
  const CommandResult gen = run_orrery({"gen", "microbench", "--collective", "all-reduce", "--size",
                                        "16MiB", "--ranks", "64", "-o", dir.file("a/w")});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  std::ofstream(dir.file("jobs.yaml"))
      << "network: clos128.yml\nbackend: flow\njobs:\n"
         "  - name: a\n    workload: a/w\n    system: sys.json\n    placement: \"0-63\"\n"
         "    start_ns: 0\n"
         "  - name: b\n    workload: a/w\n    system: sys.json\n"
         "    placement: \"64-127\"\n";
  const CommandResult result =
      run_orrery({"run", "--jobs", dir.file("jobs.yaml"), "-o", dir.file("jobs.json")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("orrery: 2 jobs on " + dir.file("clos128.yml") + " (flow backend)"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("  job a: 64 ranks from 0 ns: iteration "), std::string::npos)
      << result.out;
  const auto json = nlohmann::json::parse(std::ifstream(dir.file("jobs.json")));
  EXPECT_EQ(json["format"], "orrery-jobs/1");
  ASSERT_EQ(json["jobs"].size(), 2u);
  EXPECT_EQ(json["jobs"][1]["rank_results"][0]["npu"], 64);
  // Disjoint halves of the Clos share no link: each runs as it does alone.
  for (const auto& job : json["jobs"]) EXPECT_EQ(job["iteration_ns"], job["alone_ns"]);
  for (const auto& link : json["links"]) EXPECT_EQ(link["jobs"].size(), 1u) << link.dump();
  // -w is not for --jobs.
  expect_failure(run_orrery({"run", "--jobs", dir.file("jobs.yaml"), "-w", dir.file("a/w")}),
                 "give none of -w, -s, -n, --hardware, --perturb, --nccl-algo or --nccl-proto "
                 "with it");
  // Nor are the nccl model's restrictions: each job's system carries its own.
  expect_failure(
      run_orrery({"run", "--jobs", dir.file("jobs.yaml"), "--nccl-proto", "LL"}),
      "give none of -w, -s, -n, --hardware, --perturb, --nccl-algo or --nccl-proto with it");
  expect_failure(run_orrery({"run", "-s", "sys.json", "-n", "net.yml"}),
                 "give the workload (-w PREFIX), or --jobs FILE");
}

}  // namespace run_cli_test
}  // namespace orrery
