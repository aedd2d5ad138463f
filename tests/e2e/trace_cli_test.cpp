// `orrery trace ...` as a user runs it: results on real traces, and bad input of every kind giving
// one clear message and a non-zero exit (never a crash: these also run under the sanitizers).
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "chakra/trace_builder.h"
#include "e2e/run_command.h"

namespace orrery {
namespace trace_cli_test {

using test::TempDir;

std::string feeder() { return test::feeder_trace(); }
std::string stg_prefix() { return test::test_data("symbolic_tensor_graph/dp2tp2pp2/workload"); }

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A failed run: exit code 1, nothing on stdout, one "orrery: error:" message containing `needle`.
void expect_clean_failure(const CommandResult& result, const std::string& needle) {
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_EQ(result.err.rfind("orrery: error: ", 0), 0u) << result.err;
  EXPECT_NE(result.err.find(needle), std::string::npos) << result.err;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
}

TEST(TraceCli, inspect_counts_the_feeder_trace) {
  const CommandResult result = run_orrery({"trace", "inspect", feeder()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("nodes                 3,664"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("COMP_NODE           3,643"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("COMM_COLL_NODE      21"), std::string::npos) << result.out;
}

TEST(TraceCli, inspect_json_has_the_documented_keys) {
  const CommandResult result = run_orrery({"trace", "inspect", "--json", feeder()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["nodes"], 3664);
  EXPECT_EQ(json["by_type"]["COMP_NODE"], 3643);
  EXPECT_EQ(json["by_type"]["COMM_COLL_NODE"], 21);
  EXPECT_EQ(json["ranks"], 1);
  EXPECT_TRUE(json["collectives"].contains("ALL_REDUCE"));
  EXPECT_TRUE(json["collectives"].contains("BROADCAST"));
  EXPECT_TRUE(json.contains("flops"));
  EXPECT_EQ(json["unreachable"], 0);
}

TEST(TraceCli, inspect_over_a_prefix_totals_all_ranks) {
  const CommandResult result = run_orrery({"trace", "inspect", "--json", stg_prefix()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["ranks"], 8);
  ASSERT_EQ(json["per_rank"].size(), 8u);
  uint64_t nodes = 0;
  uint64_t flops = 0;
  for (const auto& rank : json["per_rank"]) {
    nodes += rank["nodes"].get<uint64_t>();
    flops += rank["flops"].get<uint64_t>();
  }
  EXPECT_EQ(json["nodes"], nodes);
  EXPECT_EQ(json["flops"], flops);
  EXPECT_EQ(json["per_rank"][0]["nodes"], 96);
}

TEST(TraceCli, validate_is_lenient_by_default_and_strict_on_request) {
  const CommandResult lenient = run_orrery({"trace", "validate", feeder()});
  EXPECT_EQ(lenient.exit_code, 0) << lenient.err;
  EXPECT_NE(
      lenient.out.find("1,277 control dependencies on nodes not in the file [lenient: dropped]"),
      std::string::npos)
      << lenient.out;
  EXPECT_NE(lenient.out.find("383 nodes that list themselves as a control parent"),
            std::string::npos);
  const CommandResult strict = run_orrery({"trace", "validate", "--strict", feeder()});
  EXPECT_EQ(strict.exit_code, 1);
  const CommandResult json = run_orrery({"trace", "validate", "--json", feeder()});
  const auto parsed = nlohmann::json::parse(json.out);
  EXPECT_EQ(parsed["files"][0]["counts"]["missing_ctrl_parent"], 1277);
  EXPECT_EQ(parsed["files"][0]["counts"]["self_ctrl_dependency"], 383);
}

TEST(TraceCli, validate_passes_clean_real_traces_strictly) {
  const CommandResult result = run_orrery({"trace", "validate", "--strict", stg_prefix()});
  EXPECT_EQ(result.exit_code, 0) << result.out;
  EXPECT_NE(result.out.find("8 rank files: all pass in strict mode"), std::string::npos)
      << result.out;
}

TEST(TraceCli, json_round_trip_through_the_cli_is_byte_identical) {
  TempDir dir;
  const std::string original = test::test_data("symbolic_tensor_graph/dp2tp2pp2/workload.5.et");
  ASSERT_EQ(run_orrery({"trace", "to-json", original, "-o", dir.file("w.json")}).exit_code, 0);
  ASSERT_EQ(
      run_orrery({"trace", "from-json", dir.file("w.json"), "-o", dir.file("w.et")}).exit_code, 0);
  // STG writes canonical protobuf, so even a foreign file comes back byte for byte.
  EXPECT_EQ(read_bytes(original), read_bytes(dir.file("w.et")));
}

TEST(TraceCli, json_conversion_over_a_prefix_writes_one_file_per_rank) {
  TempDir dir;
  ASSERT_EQ(run_orrery({"trace", "to-json", stg_prefix(), "-o", dir.file("w")}).exit_code, 0);
  ASSERT_EQ(run_orrery({"trace", "from-json", dir.file("w"), "-o", dir.file("back")}).exit_code, 0);
  for (int rank = 0; rank < 8; ++rank) {
    EXPECT_EQ(read_bytes(stg_prefix() + "." + std::to_string(rank) + ".et"),
              read_bytes(dir.file("back." + std::to_string(rank) + ".et")))
        << rank;
  }
}

TEST(TraceCli, dot_draws_data_edges_solid_and_control_edges_dashed) {
  TempDir dir;
  test::write_trace(dir.file("t.et"), {test::comp_node(1),
                                       test::make_node(2, ChakraProtoMsg::COMP_NODE, {1}, {1, 9})});
  const CommandResult result = run_orrery({"trace", "dot", dir.file("t.et")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out.rfind("digraph chakra {", 0), 0u);
  EXPECT_NE(result.out.find("r0_n1 -> r0_n2 [style=solid];"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("r0_n1 -> r0_n2 [style=dashed];"), std::string::npos);
  EXPECT_NE(result.out.find("r0_missing -> r0_n2 [style=dashed];"), std::string::npos);
}

TEST(TraceCli, help_describes_every_trace_verb) {
  const CommandResult result = run_orrery({"trace", "--help"});
  EXPECT_EQ(result.exit_code, 0);
  for (const char* verb : {"inspect", "validate", "to-json", "from-json", "dot"}) {
    EXPECT_NE(result.out.find(verb), std::string::npos) << verb;
  }
}

// ---- bad input ----

// A full disk: the error names the file written, for a document larger than the stream's buffer
// (met while writing) and for a short one (met only when it is flushed).
TEST(TraceCliBadInput, a_full_disk_names_the_output) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  TempDir dir;
  test::write_trace(dir.file("one.et"), {test::comp_node(1)});
  for (const std::string& trace : {stg_prefix() + ".0.et", dir.file("one.et")}) {
    expect_clean_failure(run_orrery({"trace", "to-json", trace, "-o", "/dev/full"}),
                         "/dev/full: cannot write");
  }
  expect_clean_failure(run_orrery({"topo", "generate", "torus", "-o", "/dev/full"}),
                       "/dev/full: cannot write");
  // A run's outputs: its JSON and its timeline (written as a stream, closed before the check).
  const std::string example = test::test_data("../../examples/llama_dp2tp2pp2/");
  for (const char* flag : {"-o", "--timeline"}) {
    expect_clean_failure(
        run_orrery({"run", "-q", "-w", example + "workload", "-g", example + "workload.json", "-s",
                    example + "system.json", "-n", example + "network.yml", flag, "/dev/full"}),
        "/dev/full: ");
  }
}

TEST(TraceCliBadInput, a_missing_file) {
  expect_clean_failure(run_orrery({"trace", "inspect", "/no/such/trace.et"}),
                       "/no/such/trace.et: no such file, and no rank files");
}

TEST(TraceCliBadInput, an_empty_file) {
  TempDir dir;
  write_bytes(dir.file("empty.et"), "");
  expect_clean_failure(run_orrery({"trace", "validate", dir.file("empty.et")}),
                       "the file is empty; a Chakra trace starts with a GlobalMetadata record");
}

TEST(TraceCliBadInput, a_truncated_file) {
  TempDir dir;
  const std::string whole =
      read_bytes(test::test_data("symbolic_tensor_graph/fsdp4/workload.0.et"));
  write_bytes(dir.file("cut.et"), whole.substr(0, whole.size() - 100));
  expect_clean_failure(run_orrery({"trace", "inspect", dir.file("cut.et")}), "is truncated");
}

TEST(TraceCliBadInput, random_bytes) {
  TempDir dir;
  std::string noise;
  uint32_t state = 12345;
  for (int idx = 0; idx < 4096; ++idx) {
    state = state * 1664525u + 1013904223u;
    noise.push_back(static_cast<char>(state >> 24));
  }
  write_bytes(dir.file("noise.et"), noise);
  const CommandResult result = run_orrery({"trace", "validate", dir.file("noise.et")});
  EXPECT_EQ(result.exit_code, 1) << result.out;
  EXPECT_NE(result.err.find("noise.et: "), std::string::npos) << result.err;
}

TEST(TraceCliBadInput, an_unknown_enum_value) {
  TempDir dir;
  auto node = test::make_node(4, ChakraProtoMsg::COMP_NODE);
  node.set_type(static_cast<ChakraProtoMsg::NodeType>(99));
  test::write_trace(dir.file("enum.et"), {node});
  const CommandResult result = run_orrery({"trace", "validate", dir.file("enum.et")});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.out.find("node 4: type 99 is not a NodeType (0 to 7)"), std::string::npos)
      << result.out;
}

TEST(TraceCliBadInput, a_cycle) {
  TempDir dir;
  test::write_trace(dir.file("cycle.et"), {test::make_node(1, ChakraProtoMsg::COMP_NODE, {2}),
                                           test::make_node(2, ChakraProtoMsg::COMP_NODE, {1})});
  const CommandResult result = run_orrery({"trace", "validate", dir.file("cycle.et")});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.out.find("dependency cycle 1 -> 2 -> 1"), std::string::npos) << result.out;
}

TEST(TraceCliBadInput, an_old_schema_file) {
  TempDir dir;
  // A 2022-style file starts with a Node record: field 1 (id) as a varint, field 3 (node_type).
  write_bytes(dir.file("old.et"), std::string("\x06\x08\x05\x12\x00\x18\x04", 7));
  expect_clean_failure(run_orrery({"trace", "inspect", dir.file("old.et")}),
                       "before October 2023 (schema 0.0.1 to 0.0.3)");
}

TEST(TraceCliBadInput, a_prefix_with_a_rank_missing) {
  TempDir dir;
  for (int rank : {0, 1, 3})
    test::write_trace(dir.file("w." + std::to_string(rank) + ".et"), {test::comp_node(1)});
  expect_clean_failure(run_orrery({"trace", "inspect", dir.file("w")}),
                       "rank file " + dir.file("w") + ".2.et is missing");
}

TEST(TraceCliBadInput, a_json_file_that_is_not_a_trace) {
  TempDir dir;
  write_bytes(dir.file("x.json"), "[1, 2");
  const CommandResult result =
      run_orrery({"trace", "from-json", dir.file("x.json"), "-o", dir.file("x.et")});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("x.json: "), std::string::npos) << result.err;
}

TEST(TraceCliBadInput, a_json_file_given_as_a_trace_says_it_is_json) {
  TempDir dir;
  write_bytes(dir.file("host.json"), "{\"schema\": \"1.0.2-chakra.0.0.4\", \"nodes\": []}");
  expect_clean_failure(run_orrery({"trace", "inspect", dir.file("host.json")}),
                       "it looks like JSON");
}

TEST(TraceCliBadInput, an_unknown_flag) {
  const CommandResult result = run_orrery({"trace", "inspect", "--frobnicate", feeder()});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("frobnicate"), std::string::npos) << result.err;
}

}  // namespace trace_cli_test
}  // namespace orrery
