// `orrery convert` as a user runs it: PyTorch host traces with and without their Kineto traces, a
// directory of ranks that then runs in `orrery run`, and malformed input giving one clear message
// and a non-zero exit.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "chakra/trace_builder.h"
#include "e2e/run_command.h"

namespace orrery {
namespace convert_cli_test {

using test::TempDir;

std::string pytorch(const std::string& name) { return test::test_data("pytorch/" + name); }

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

void expect_clean_failure(const CommandResult& result, const std::string& needle) {
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_EQ(result.err.rfind("orrery: error: ", 0), 0u) << result.err;
  EXPECT_NE(result.err.find(needle), std::string::npos) << result.err;
  EXPECT_TRUE(result.out.empty()) << result.out;
}

TEST(ConvertCli, help_names_every_input) {
  const CommandResult result = run_orrery({"convert", "--help"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const char* flag :
       {"--host", "--device", "--dir", "--output", "--allow-pid-mismatch", "--examples", "--quiet"})
    EXPECT_NE(result.out.find(flag), std::string::npos) << flag;
  const CommandResult verbs = run_orrery({"--help"});
  EXPECT_NE(verbs.out.find("convert"), std::string::npos) << verbs.out;
}

TEST(ConvertCli, host_and_kineto_pair_converts_and_validates_strictly) {
  TempDir dir;
  const CommandResult result =
      run_orrery({"convert", "--host", pytorch("benchmark_simple_add_et.json.gz"), "--device",
                  pytorch("benchmark_simple_add_trace.json.gz"), "-o", dir.file("add.et")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("wrote " + dir.file("add.et") + ": 40 nodes"), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("(36 host ops, 4 GPU kernels, 0 GPU copies and sets)"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("36 of 36 host ops"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("thread and process annotation nodes"), std::string::npos)
      << "what is dropped is named: " << result.out;
  const CommandResult check = run_orrery({"trace", "validate", "--strict", dir.file("add.et")});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("40 nodes: valid"), std::string::npos) << check.out;
}

TEST(ConvertCli, host_trace_alone_keeps_its_collectives) {
  TempDir dir;
  const CommandResult result =
      run_orrery({"convert", "--host", pytorch("chakra_1.0.2-chakra.0.0.4.json.gz"), "-o",
                  dir.file("ag.et.gz")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("ALL_GATHER        10 x, 40 B (40 B)"), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("METADATA_NODE       1"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("durations           none in the host trace"), std::string::npos)
      << result.out;
  EXPECT_EQ(run_orrery({"trace", "validate", "--strict", dir.file("ag.et.gz")}).exit_code, 0);
}

TEST(ConvertCli, malformed_inputs_fail_with_the_file_named) {
  TempDir dir;
  write_text(dir.file("schema.json"), R"({"schema": "9.9.9", "nodes": []})");
  write_text(dir.file("nonodes.json"), R"({"schema": "1.0.1", "pid": 3})");
  write_text(dir.file("cut.json"), R"({"schema": "1.0.1", "nodes": [{"id": 1, "name": "aten::m)");
  write_text(dir.file("noparent.json"),
             R"({"schema": "1.1.0-chakra.0.0.4", "nodes": [{"id": 8, "name": "aten::mm"}]})");
  const auto convert = [&](const std::string& host) {
    return run_orrery({"convert", "--host", host, "-o", dir.file("out.et")});
  };
  expect_clean_failure(convert(dir.file("schema.json")), "schema.json: unknown schema '9.9.9'");
  expect_clean_failure(convert(dir.file("nonodes.json")), "nonodes.json: no 'nodes' list");
  expect_clean_failure(convert(dir.file("cut.json")),
                       "cut.json: not a complete JSON document, it ends too early");
  expect_clean_failure(convert(dir.file("noparent.json")),
                       "noparent.json: node 8: has no "
                       "'ctrl_deps'");
  expect_clean_failure(convert(pytorch("benchmark_simple_add_trace.json.gz")),
                       "is a Kineto trace (it has 'traceEvents'), not a PyTorch execution trace: "
                       "give it with --device");
  expect_clean_failure(
      run_orrery({"convert", "--host", pytorch("benchmark_simple_add_et.json.gz"), "--device",
                  pytorch("linear_et.json.gz"), "-o", dir.file("out.et")}),
      "not a Kineto trace: give it with --host");
  expect_clean_failure(convert(dir.file("absent.json")), "absent.json: cannot open");
  // A folder seeks to a meaningless end; sized from it, the read used to abort the process.
  std::filesystem::create_directory(dir.file("folder.json"));
  expect_clean_failure(convert(dir.file("folder.json")), "folder.json: is a folder, not a file");
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.et"))) << "nothing written on failure";
  expect_clean_failure(run_orrery({"convert", "-o", dir.file("out.et")}), "--host");
  expect_clean_failure(run_orrery({"convert", "--dir", dir.file("nowhere"), "-o", dir.file("w")}),
                       "nowhere: not a directory");
  expect_clean_failure(run_orrery({"convert", "--dir", dir.file(""), "--host",
                                   dir.file("schema.json"), "-o", dir.file("w")}),
                       "give either --dir or --host");
  std::filesystem::create_directories(dir.file("gap"));
  std::filesystem::copy_file(pytorch("benchmark_simple_add_et.json.gz"),
                             dir.file("gap/et_rank1.json.gz"));
  expect_clean_failure(run_orrery({"convert", "--dir", dir.file("gap"), "-o", dir.file("w")}),
                       "none for rank 0 (ranks must be 0 to n-1)");
  EXPECT_NE(run_orrery({"convert", "--host", dir.file("schema.json")}).exit_code, 0)
      << "-o is required";
}

TEST(ConvertCli, a_kineto_event_without_its_fields_is_named) {
  TempDir dir;
  write_text(dir.file("k.json"), R"({"traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "sgemm", "ts": 5, "dur": 3, "args": {"correlation": 1}},
      {"ph": "X", "cat": "kernel", "ts": 9, "dur": 3}]})");
  expect_clean_failure(run_orrery({"convert", "--host", pytorch("benchmark_simple_add_et.json.gz"),
                                   "--device", dir.file("k.json"), "-o", dir.file("out.et")}),
                       "k.json: traceEvents[1]");
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.et")));
}

// The ResNet traces of the issue, and the other real inputs: converted by the CLI, each validates
// in strict mode (no finding at all).
TEST(ConvertCli, real_traces_convert_and_validate_strictly) {
  if (!test::shared_data_present())
    GTEST_SKIP() << "no ../shared/data: the ResNet traces are there";
  TempDir dir;
  const std::string inputs =
      std::string(ORRERY_SHARED_DATA_DIR) + "/facebookresearch+param/et_replay/tests/inputs/";
  const CommandResult resnet =
      run_orrery({"convert", "--host", inputs + "1.1.0-chakra.0.0.4/resnet_2gpu_et.json.gz", "-o",
                  dir.file("resnet2.et")});
  ASSERT_EQ(resnet.exit_code, 0) << resnet.err;
  EXPECT_NE(resnet.out.find("COMM_COLL_NODE      21\n"), std::string::npos) << resnet.out;
  EXPECT_NE(resnet.out.find("ALL_REDUCE (pg 0) 15 x, 292.48 MiB (306,684,384 B)"),
            std::string::npos)
      << resnet.out;
  EXPECT_NE(resnet.out.find("BROADCAST (pg 0)  6 x, 623.74 KiB (638,712 B)"), std::string::npos)
      << resnet.out;
  EXPECT_NE(resnet.out.find("6 record_param_comms that move no data"), std::string::npos)
      << resnet.out;
  const std::vector<std::vector<std::string>> others = {
      {"--host", inputs + "1.0.3-chakra.0.0.4/resnet_1gpu_et.json.gz"},
      {"--host", pytorch("linear_et.json.gz"), "--device", pytorch("linear_kineto.json.gz")},
      {"--host", pytorch("pt2_et.json.gz")}};
  std::vector<std::string> outputs = {dir.file("resnet2.et")};
  for (size_t at = 0; at < others.size(); ++at) {
    std::vector<std::string> args = {"convert", "-q"};
    args.insert(args.end(), others[at].begin(), others[at].end());
    outputs.push_back(dir.file("t" + std::to_string(at) + ".et"));
    args.insert(args.end(), {"-o", outputs.back()});
    const CommandResult converted = run_orrery(args);
    ASSERT_EQ(converted.exit_code, 0) << converted.err;
    EXPECT_TRUE(converted.out.empty()) << "-q prints nothing: " << converted.out;
  }
  for (const std::string& output : outputs) {
    const CommandResult check = run_orrery({"trace", "validate", "--strict", output});
    EXPECT_EQ(check.exit_code, 0) << output << ": " << check.out << check.err;
    EXPECT_NE(check.out.find(": valid"), std::string::npos) << check.out;
  }
}

TEST(ConvertCli, kineto_trace_of_another_run_is_refused) {
  if (!test::shared_data_present()) GTEST_SKIP() << "no ../shared/data: the ResNet pair is there";
  TempDir dir;
  const std::string inputs =
      std::string(ORRERY_SHARED_DATA_DIR) + "/facebookresearch+param/et_replay/tests/inputs/";
  expect_clean_failure(run_orrery({"convert", "--host", inputs + "resnet_et.json.gz", "--device",
                                   inputs + "resnet_kineto.json.gz", "-o", dir.file("r.et")}),
                       "they are not the same run");
}

TEST(ConvertCli, dlrm_ranks_convert_and_run_to_completion) {
  if (!test::shared_data_present()) GTEST_SKIP() << "no ../shared/data: the DLRM set is there";
  TempDir dir;
  ASSERT_TRUE(test::untar_dlrm_set(dir.file("in")));
  const CommandResult converted =
      run_orrery({"convert", "--dir", dir.file("in"), "-o", dir.file("out/dlrm")});
  ASSERT_EQ(converted.exit_code, 0) << converted.err;
  EXPECT_NE(converted.out.find("8 ranks: 8 with a Kineto trace"), std::string::npos)
      << converted.out;
  EXPECT_NE(converted.out.find("ALL_TO_ALL        40 x"), std::string::npos) << converted.out;
  EXPECT_NE(converted.out.find("ALL_REDUCE        24 x"), std::string::npos) << converted.out;
  EXPECT_EQ(converted.out.find("warning"), std::string::npos) << converted.out;
  EXPECT_EQ(run_orrery({"trace", "validate", "--strict", dir.file("out/dlrm")}).exit_code, 0);

  // An 8-rank ring to run it on.
  write_text(dir.file("net.yml"),
             "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n");
  write_text(dir.file("sys.json"),
             R"({"scheduling-policy": "LIFO", "endpoint-delay": 10,
                 "active-chunks-per-dimension": 1, "preferred-dataset-splits": 4,
                 "all-reduce-implementation": ["ring"], "all-gather-implementation": ["ring"],
                 "reduce-scatter-implementation": ["ring"], "all-to-all-implementation": ["ring"],
                 "collective-optimization": "localBWAware", "local-mem-bw": 50})");
  const CommandResult run = run_orrery({"run", "--workload-configuration=" + dir.file("out/dlrm"),
                                        "--comm-group-configuration=" + dir.file("out/dlrm.json"),
                                        "--system-configuration=" + dir.file("sys.json"),
                                        "--network-configuration=" + dir.file("net.yml")});
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  for (int rank = 0; rank < 8; ++rank) {
    EXPECT_NE(run.out.find("sys[" + std::to_string(rank) + "] finished"), std::string::npos)
        << run.out;
  }
  EXPECT_NE(run.out.find("8 collectives"), std::string::npos) << run.out;
}

// The two defects found while recording the replay's traces (Debian's torch 1.13 on the CPU): the
// profiler's Chrome trace in its array form is a device trace like Kineto's, and DDP's Gloo
// all-reduces become collectives, in a directory of ranks as well.
TEST(ConvertCli, profiler_array_form_and_gloo_all_reduces_convert) {
  TempDir dir;
  const std::string ddp = pytorch("recorded/ddp/");
  const CommandResult one = run_orrery({"convert", "--host", ddp + "rank0_et.json.gz", "--device",
                                        ddp + "rank0_trace.json.gz", "-o", dir.file("r0.et")});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out.find("profiler trace (Chrome trace array form, no Kineto), 1,614 events"),
            std::string::npos)
      << one.out;
  EXPECT_NE(one.out.find("ALL_REDUCE        2 x, 1.52 MiB (1,597,480 B)"), std::string::npos)
      << one.out;
  EXPECT_NE(one.out.find("COMM_COLL_NODE      2"), std::string::npos) << one.out;
  const CommandResult set = run_orrery({"convert", "--dir", ddp, "-o", dir.file("out/ddp")});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_NE(set.out.find("2 ranks: 2 with a Kineto trace"), std::string::npos) << set.out;
  EXPECT_NE(set.out.find("ALL_REDUCE        4 x"), std::string::npos) << set.out;
  EXPECT_EQ(set.out.find("warning"), std::string::npos) << "the ranks agree: " << set.out;
  EXPECT_EQ(run_orrery({"trace", "validate", "--strict", dir.file("out/ddp")}).exit_code, 0);
}

}  // namespace convert_cli_test
}  // namespace orrery
