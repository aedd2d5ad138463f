// `orrery replay` as a user runs it (orrery execs orrery-replay): the recorded traces replayed with
// few iterations, the JSON, text and HTML reports, --emit-chakra then orrery run, and bad input
// answered with one message and exit code 1.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "chakra/trace_builder.h"
#include "e2e/run_command.h"

namespace orrery {
namespace replay_cli_test {

using test::TempDir;

std::string recorded(const std::string& model, const std::string& suffix) {
  return test::test_data("pytorch/recorded/" + model + "/" + model + suffix);
}

void expect_clean_failure(const CommandResult& result, const std::string& needle) {
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_EQ(result.err.rfind("orrery: error: ", 0), 0u) << result.err;
  EXPECT_NE(result.err.find(needle), std::string::npos) << result.err;
  EXPECT_TRUE(result.out.empty()) << result.out;
}

TEST(ReplayCli, help_names_every_option) {
  const CommandResult result = run_orrery({"replay", "--help"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const char* flag :
       {"--profile", "--dir", "--rank", "--iteration", "--warmup", "--iterations", "--threads",
        "--seed", "--sync-comm", "--emit-chakra", "--json", "--output", "--html", "--top",
        "--quiet", "--calibration-table", "--keep-subnormals", "--autograd"})
    EXPECT_NE(result.out.find(flag), std::string::npos) << flag;
  EXPECT_NE(run_orrery({"--help"}).out.find("replay"), std::string::npos);
}

// The MLP's inference: every operator replayed, the original iteration the median of the six
// ProfilerStep# events of its profiler trace (27,460 to 32,124 us; median 27,774.5 us).
TEST(ReplayCli, json_reports_times_and_coverage) {
  TempDir dir;
  const CommandResult result =
      run_orrery({"replay", recorded("mlp_infer", "_et.json.gz"), "--profile",
                  recorded("mlp_infer", "_trace.json.gz"), "--warmup", "0", "--iterations", "2",
                  "--threads", "1", "--json", "--html", dir.file("r.html")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json job = nlohmann::json::parse(result.out);
  EXPECT_GT(job.at("iteration_us").get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(job.at("original_us").get<double>(), 27774.5);
  EXPECT_EQ(job.at("coverage_by_count"), 1.0);
  EXPECT_EQ(job.at("coverage_by_time"), 1.0);
  EXPECT_TRUE(job.at("skipped").empty());
  EXPECT_EQ(job.at("ops"), 6);
  EXPECT_EQ(job.at("iterations"), 2);
  EXPECT_EQ(job.at("iteration_wall_us").at("count"), 2);
  EXPECT_EQ(job.at("ranks").size(), 1u);
  EXPECT_EQ(job.at("ranks")[0].at("operators").size(), 6u);
  EXPECT_EQ(job.at("ranks")[0].at("subnormals"), "flushed");
  const std::string html = read_whole_file(dir.file("r.html"));
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("aten::linear"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos) << "self-contained, no script";
}

// torch.compile's trace: the Triton kernel cannot be built and is named with its reason.
TEST(ReplayCli, text_names_what_is_skipped) {
  const CommandResult result = run_orrery(
      {"replay", test::test_data("pytorch/pt2_et.json.gz"), "--warmup", "0", "--iterations", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("coverage        50.0% by count (1 of 2)"), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("1 x triton_poi_fused_add_cos_neg_sin_0 (node 16): a compiled "
                            "kernel (triton"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("8 tensors on cuda:0 made cpu tensors"), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("; subnormals flushed to zero"), std::string::npos) << result.out;
  const CommandResult kept =
      run_orrery({"replay", test::test_data("pytorch/pt2_et.json.gz"), "--warmup", "0",
                  "--iterations", "1", "--keep-subnormals"});
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  EXPECT_NE(kept.out.find("; subnormals kept"), std::string::npos) << kept.out;
}

// Replay, write Chakra with the measured durations, simulate: the simulated iteration is the sum
// of the operators' mean times in whole microseconds, exactly, and no longer than the slowest
// replayed iteration (which also holds the gaps between operators). How close it comes to the
// median iteration on a quiet machine is measured by bench/replay_study.sh, not here.
TEST(ReplayCli, emitted_chakra_simulates_the_measured_iteration) {
  TempDir dir;
  const CommandResult replayed =
      run_orrery({"replay", recorded("cnn_infer", "_et.json.gz"), "--warmup", "1", "--iterations",
                  "3", "--threads", "1", "--emit-chakra", dir.file("out/cnn"), "--json"});
  ASSERT_EQ(replayed.exit_code, 0) << replayed.err;
  const nlohmann::json job = nlohmann::json::parse(replayed.out);
  uint64_t micros = 0;
  double ops = 0;
  for (const nlohmann::json& op : job.at("ranks")[0].at("operators")) {
    micros += static_cast<uint64_t>(std::llround(op.at("measured_mean_us").get<double>()));
    ops += 1;
  }
  ASSERT_TRUE(std::filesystem::exists(dir.file("out/cnn.0.et")));
  EXPECT_EQ(run_orrery({"trace", "validate", "--strict", dir.file("out/cnn.0.et")}).exit_code, 0);
  std::ofstream(dir.file("net.yml"))
      << "topology: [ Ring ]\nnpus_count: [ 2 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n";
  std::ofstream(dir.file("sys.json"))
      << R"({"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
             "preferred-dataset-splits": 4, "all-reduce-implementation": ["ring"],
             "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["ring"],
             "all-to-all-implementation": ["ring"], "collective-optimization": "localBWAware",
             "local-mem-bw": 50})";
  const CommandResult run =
      run_orrery({"run", "-w", dir.file("out/cnn"), "-s", dir.file("sys.json"), "-n",
                  dir.file("net.yml"), "--uniform", "--output", dir.file("run.json")});
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  const nlohmann::json simulated = nlohmann::json::parse(read_whole_file(dir.file("run.json")));
  const double simulated_ns = simulated.at("summary").at("simulated_ns").get<double>();
  EXPECT_EQ(simulated_ns, static_cast<double>(micros) * 1000.0);
  // The replay's operators are host ops (is_cpu_op): the summary says how long they took, as
  // neither compute nor communication does; on one chain without communication, the whole step.
  const std::string host_line = "host CPU ops per rank   ";
  const size_t at = run.out.find(host_line);
  ASSERT_NE(at, std::string::npos) << run.out;
  std::string digits;
  for (size_t i = at + host_line.size(); i < run.out.size() && run.out[i] != ' '; ++i)
    if (run.out[i] != ',') digits += run.out[i];
  EXPECT_EQ(std::stod(digits), simulated_ns) << run.out;
  EXPECT_LE(simulated_ns / 1000.0, job.at("iteration_wall_us").at("max").get<double>() + 0.5 * ops)
      << "each op's duration rounded to whole microseconds";
  EXPECT_GT(simulated_ns, 0.0);
}

// --autograd: the MLP's backward pass run by the engine (six parameters), said in the text and
// the JSON; every recorded backward op has its share of the pass, and the shares and the other
// ops stay within the slowest iteration.
TEST(ReplayCli, autograd_runs_the_backward_pass_through_the_engine) {
  const CommandResult result =
      run_orrery({"replay", recorded("mlp_train", "_et.json.gz"), "--warmup", "1", "--iterations",
                  "3", "--threads", "1", "--autograd", "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json job = nlohmann::json::parse(result.out);
  const nlohmann::json& rank = job.at("ranks")[0];
  EXPECT_EQ(rank.at("backward"), "autograd engine");
  bool said = false;
  for (const nlohmann::json& note : rank.at("notes"))
    said |=
        note.get<std::string>() == "1 backward passes run by the autograd engine (6 parameters)";
  EXPECT_TRUE(said) << rank.at("notes").dump();
  double sum_us = 0;
  size_t backward = 0;
  for (const nlohmann::json& op : rank.at("operators")) {
    const double mean = op.at("measured_mean_us").get<double>();
    const uint64_t node = op.at("node").get<uint64_t>();
    // The backward pass: nodes 119 (nll_loss_backward) to 233 (the last AccumulateGrad add_).
    if (node >= 119 && node <= 233) {
      ++backward;
      EXPECT_GT(mean, 0.0) << op.dump();
    }
    sum_us += mean;
  }
  EXPECT_EQ(backward, 32u);
  EXPECT_LE(sum_us, job.at("iteration_wall_us").at("max").get<double>());
  const CommandResult text = run_orrery({"replay", recorded("mlp_train", "_et.json.gz"), "--warmup",
                                         "0", "--iterations", "1", "--autograd"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("; 1 backward pass by the autograd engine"), std::string::npos)
      << text.out;
  const CommandResult ops = run_orrery({"replay", recorded("mlp_train", "_et.json.gz"), "--warmup",
                                        "0", "--iterations", "1", "--json"});
  ASSERT_EQ(ops.exit_code, 0) << ops.err;
  EXPECT_EQ(nlohmann::json::parse(ops.out).at("ranks")[0].at("backward"), "recorded ops");
}

// --calibration-table: a row per replayed matrix product with its recorded shape and per
// streaming op with its bytes, each with a measured time, in the table orrery calibrate reads.
TEST(ReplayCli, calibration_table_lists_the_measured_kernels_for_calibrate) {
  TempDir dir;
  const std::string table = dir.file("ops.tsv");
  const CommandResult replayed =
      run_orrery({"replay", recorded("mlp_train", "_et.json.gz"), "--warmup", "1", "--iterations",
                  "5", "--threads", "1", "--calibration-table", table});
  ASSERT_EQ(replayed.exit_code, 0) << replayed.err;
  EXPECT_NE(replayed.out.find("wrote " + table), std::string::npos) << replayed.out;
  std::istringstream in(read_whole_file(table));
  std::string line;
  std::vector<std::string> gemms;
  size_t relus = 0, memory = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("kind\t", 0) == 0) continue;
    std::vector<std::string> cells;
    std::istringstream row(line);
    for (std::string cell; std::getline(row, cell, '\t');) cells.push_back(cell);
    ASSERT_EQ(cells.size(), 9u) << line;
    EXPECT_GT(std::stod(cells[8]), 0.0) << line;
    if (cells[0] == "gemm") {
      const uint64_t m = std::stoull(cells[2]), n = std::stoull(cells[3]),
                     k = std::stoull(cells[4]);
      EXPECT_EQ(std::stoull(cells[6]), 2 * m * n * k) << line;
      gemms.push_back(fmt::format("{} {}x{}x{}", cells[1], m, n, k));
    } else {
      ASSERT_EQ(cells[0], "memory") << line;
      ++memory;
      // relu of a 32 x 512 float activation: read and written once.
      if (cells[1] == "aten::relu") {
        ++relus;
        EXPECT_EQ(cells[7], "131072") << line;
      }
    }
  }
  // The MLP 256 -> 512 -> 512 -> 10 on a batch of 32: three forward products, the input
  // gradients of layers 2 and 3 and the weight gradients of all three.
  EXPECT_EQ(gemms, (std::vector<std::string>{"aten::linear 32x512x256", "aten::linear 32x512x512",
                                             "aten::linear 32x10x512", "aten::mm 32x512x10",
                                             "aten::mm 10x512x32", "aten::mm 32x512x512",
                                             "aten::mm 512x512x32", "aten::mm 512x256x32"}));
  EXPECT_EQ(relus, 2u);
  EXPECT_GT(memory, 10u);
  // orrery calibrate reads every row. Whether this machine's noisy CPU times fit a GPU-shaped
  // curve is the fit's business: it either fits or refuses a fitted value, never the table.
  const CommandResult fit = run_orrery(
      {"calibrate", "--hardware", test::test_data("hardware/cpu_host.yaml"), "--table", table});
  if (fit.exit_code == 0) {
    EXPECT_NE(fit.out.find("gemm: 8 rows"), std::string::npos) << fit.out;
  } else {
    EXPECT_NE(fit.err.find("fitted"), std::string::npos) << fit.err;
  }
}

TEST(ReplayCli, bad_input_is_one_message) {
  TempDir dir;
  expect_clean_failure(run_orrery({"replay", dir.file("missing.json")}),
                       dir.file("missing.json") + ": cannot open");
  expect_clean_failure(run_orrery({"replay", dir.file("")}), ": is a folder, not a file");
  expect_clean_failure(run_orrery({"replay"}), "give a trace file or --dir (one of them)");
  expect_clean_failure(
      run_orrery({"replay", recorded("mlp_infer", "_et.json.gz"), "--iteration", "9"}),
      "--iteration 9: no ProfilerStep#9 in the trace (it has 2)");
  expect_clean_failure(run_orrery({"replay", recorded("mlp_infer", "_et.json.gz"), "--profile",
                                   recorded("mlp_infer", "_et.json.gz")}),
                       "not a Kineto trace: give it as the trace");
  expect_clean_failure(run_orrery({"replay", recorded("mlp_infer", "_et.json.gz"), "--rank", "1"}),
                       "--rank goes with --dir");
  expect_clean_failure(
      run_orrery({"replay", "--dir", test::test_data("pytorch/recorded/ddp"), "--rank", "2"}),
      "--rank 2: " + test::test_data("pytorch/recorded/ddp") + " has ranks 0 to 1");
  std::ofstream(dir.file("bad.json")) << R"J({"schema": "1.0.1", "nodes": [
    {"id": 1, "name": "aten::relu", "parent": 0, "op_schema": "aten::relu(Tensor self) -> Tensor",
     "inputs": [[1, 2, 0]], "input_types": ["Tensor(float)"]}]})J";
  expect_clean_failure(run_orrery({"replay", dir.file("bad.json")}),
                       "bad.json: node 1 'aten::relu': a Tensor(float) value is [1,2,0]");
  EXPECT_NE(
      run_orrery({"replay", recorded("mlp_infer", "_et.json.gz"), "--iterations", "0"}).exit_code,
      0);
}

// One rank of the DDP pair replayed alone: its all-reduces cannot run in one process and are
// skipped with the reason; its compute is replayed.
TEST(ReplayCli, one_rank_of_a_set_alone) {
  const CommandResult result =
      run_orrery({"replay", "--dir", test::test_data("pytorch/recorded/ddp"), "--rank", "1",
                  "--warmup", "0", "--iterations", "1", "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json job = nlohmann::json::parse(result.out);
  EXPECT_EQ(job.at("rank"), 1);
  ASSERT_EQ(job.at("skipped").size(), 1u);
  EXPECT_EQ(job.at("skipped")[0].at("name"), "c10d::allreduce_");
  EXPECT_EQ(job.at("skipped")[0].at("count"), 2);
  EXPECT_EQ(job.at("skipped")[0].at("reason"),
            "its group has 2 ranks (0,1) and the replay runs 1 process");
  EXPECT_NEAR(job.at("coverage_by_count").get<double>(), 88.0 / 90.0, 1e-12);
}

// A GPU trace set whose embedding tables only unbuildable operators read (fbgemm lookups): rank 0
// of the public DLRM set replays alone with those tables never allocated. Every storage was
// allocated before the operators were built until 5 December, and this replay held 5.2 GB; the
// storages the 459 replayed operators use take 9.2 MB.
TEST(ReplayCli, storages_only_unbuildable_operators_read_take_no_memory) {
  if (!test::shared_data_present()) GTEST_SKIP() << "no ../shared/data: the DLRM set is there";
  TempDir dir;
  ASSERT_TRUE(test::untar_dlrm_set(dir.file("in")));
  const CommandResult result =
      run_orrery({"replay", "--dir", dir.file("in"), "--rank", "0", "--warmup", "0", "--iterations",
                  "1", "--threads", "1", "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json job = nlohmann::json::parse(result.out);
  EXPECT_EQ(job.at("ops"), 488);
  EXPECT_EQ(job.at("replayed"), 459);
  EXPECT_LT(job.at("storage_bytes").get<uint64_t>(), uint64_t{16} << 20);
  bool lookup_named = false;
  for (const nlohmann::json& skipped : job.at("skipped")) {
    if (skipped.at("name") == "fbgemm::split_embedding_codegen_lookup_adagrad_function") {
      lookup_named = true;
      EXPECT_EQ(skipped.at("reason"),
                "no operator fbgemm::split_embedding_codegen_lookup_adagrad_function in libtorch "
                "1.13.0");
    }
  }
  EXPECT_TRUE(lookup_named) << job.at("skipped").dump();
}

}  // namespace replay_cli_test
}  // namespace orrery
