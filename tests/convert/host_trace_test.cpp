// Reading PyTorch host traces: both node layouts, and every malformed input named precisely.
#include <gtest/gtest.h>

#include "convert/host_trace.h"
#include "convert/json_file.h"
#include "convert/kineto_trace.h"
#include "convert_test_support.h"

namespace orrery::convert {
namespace host_trace_test {

using test::TempDir;

Expected<HostTrace> parse(const std::string& text) {
  Expected<nlohmann::json> doc = parse_json_text("t.json", text);
  if (!doc) return doc.error();
  return parse_host_trace("t.json", std::move(*doc));
}

std::string error_of(const std::string& text) {
  Expected<HostTrace> trace = parse(text);
  EXPECT_FALSE(trace) << "expected an error for " << text;
  return trace ? "" : trace.error().message();
}

TEST(HostTrace, every_known_schema_has_a_layout) {
  EXPECT_EQ(HostTrace::layout_of_schema("1.0.1"), HostLayout::kFlat);
  for (const char* schema : {"1.0.2-chakra.0.0.4", "1.0.3-chakra.0.0.4", "1.1.0-chakra.0.0.4",
                             "1.1.1-chakra.0.0.4", "1.1.0"}) {
    EXPECT_EQ(HostTrace::layout_of_schema(schema), HostLayout::kAttrs) << schema;
  }
  for (const char* schema : {"", "1.0.0", "2.0.0", "1.2.0-chakra.0.0.4", "1.1.0-beta", "0.0.4"})
    EXPECT_FALSE(HostTrace::layout_of_schema(schema)) << schema;
}

TEST(HostTrace, reads_the_flat_layout_of_schema_1_0_1) {
  Expected<HostTrace> trace = parse(R"J({"schema": "1.0.1", "pid": 7, "nodes": [
    {"id": 1, "name": "[pytorch|profiler|execution_graph|process]", "parent": 1, "tid": 0},
    {"id": 4, "name": "nccl:all_reduce", "parent": 3, "rf_id": 9, "tid": 2,
     "inputs": [[5, 6, 0, 1024, 4, "cuda:0"]], "input_types": ["Tensor(float)"]}]})J");
  ASSERT_TRUE(trace) << trace.error().message();
  EXPECT_EQ(trace->layout(), HostLayout::kFlat);
  EXPECT_EQ(trace->pid(), 7);
  ASSERT_EQ(trace->ops().size(), 2u);
  EXPECT_EQ(trace->ops()[0].kind, HostOpKind::kAnnotation);
  const HostOp& op = trace->ops()[1];
  EXPECT_EQ(op.parent, 3u);
  EXPECT_EQ(op.rf_id, 9);
  EXPECT_EQ(op.tid, 2);
  EXPECT_EQ(tensor_bytes(op.inputs), 4096u);
}

TEST(HostTrace, reads_attrs_of_the_newer_layout) {
  Expected<HostTrace> trace = parse(R"({"schema": "1.1.0-chakra.0.0.4", "nodes": [
    {"id": 3, "name": "## process_group:init ##", "ctrl_deps": 2,
     "inputs": {"values": ["[]"], "shapes": [[]], "types": ["String"]},
     "outputs": {"values": [], "shapes": [], "types": []}, "attrs": []},
    {"id": 5, "name": "record_param_comms", "ctrl_deps": 4,
     "inputs": {"values": [[[1, 2, 0, 8, 2, "cuda:0"], [3, 4, 0, 8, 2, "cuda:0"]]], "shapes": [],
                "types": ["GenericList[Tensor(c10::BFloat16),Tensor(c10::BFloat16)]"]},
     "attrs": [{"name": "rf_id", "type": "uint64", "value": 11},
               {"name": "tid", "type": "uint64", "value": 1},
               {"name": "pg_name", "type": "string", "value": "3"}]}]})");
  ASSERT_TRUE(trace) << trace.error().message();
  EXPECT_EQ(trace->ops()[0].kind, HostOpKind::kProcessGroup);
  const HostOp& op = trace->ops()[1];
  EXPECT_EQ(op.rf_id, 11);
  EXPECT_EQ(trace->attr_string(op, "pg_name"), "3");
  EXPECT_EQ(tensor_bytes(op.inputs), 32u) << "a list of two tensors of 8 bf16 elements";
  EXPECT_EQ(trace->find(5), 1u);
  EXPECT_FALSE(trace->find(4));
}

TEST(HostTrace, an_unknown_schema_is_named) {
  const std::string message = error_of(R"({"schema": "2.0.0", "nodes": []})");
  EXPECT_NE(message.find("t.json: unknown schema '2.0.0'"), std::string::npos) << message;
  EXPECT_NE(message.find("1.0.1"), std::string::npos) << "lists the known ones: " << message;
}

TEST(HostTrace, a_missing_nodes_list_or_schema_is_named) {
  EXPECT_NE(error_of(R"({"schema": "1.0.1", "pid": 1})").find("no 'nodes' list"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"pid": 1, "nodes": []})").find("no 'schema'"), std::string::npos);
  EXPECT_NE(error_of(R"([1, 2])").find("expected a PyTorch execution trace"), std::string::npos);
}

TEST(HostTrace, a_kineto_trace_given_as_host_trace_is_recognised) {
  const std::string message = error_of(R"({"schemaVersion": 1, "traceEvents": []})");
  EXPECT_NE(message.find("Kineto trace"), std::string::npos) << message;
  EXPECT_NE(message.find("--device"), std::string::npos) << message;
}

TEST(HostTrace, missing_node_fields_name_the_node) {
  EXPECT_NE(error_of(R"({"schema": "1.0.1", "nodes": [{"id": 4, "parent": 1}]})")
                .find("node 4: has no 'name'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"schema": "1.0.1", "nodes": [{"id": 4, "name": "aten::mm"}]})")
                .find("node 4: has no 'parent'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"schema": "1.1.0-chakra.0.0.4", "nodes": [{"id": 4, "name": "x"}]})")
                .find("node 4: has no 'ctrl_deps'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"schema": "1.0.1", "nodes": [{"id": 1, "name": "a", "parent": 0},
                                                     {"name": "b", "parent": 1}]})")
                .find("node #1 of the nodes list: has no 'id'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"schema": "1.0.1", "nodes": [{"id": "x", "name": "a", "parent": 0}]})")
                .find("'id' is \"x\""),
            std::string::npos);
}

TEST(HostTrace, a_repeated_id_is_an_error) {
  const std::string message = error_of(R"({"schema": "1.0.1", "nodes": [
    {"id": 6, "name": "a", "parent": 1}, {"id": 6, "name": "b", "parent": 1}]})");
  EXPECT_NE(message.find("node 6: the id is used more than once"), std::string::npos) << message;
}

TEST(HostTrace, truncated_json_names_the_file_and_byte) {
  TempDir dir;
  test::write_file(dir.file("cut.json"), R"({"schema": "1.0.1", "nodes": [{"id": 1, "na)");
  Expected<HostTrace> trace = read_host_trace(dir.file("cut.json"));
  ASSERT_FALSE(trace);
  EXPECT_NE(trace.error().message().find("cut.json: not a complete JSON document, it ends too "
                                         "early (byte"),
            std::string::npos)
      << trace.error().message();
  EXPECT_FALSE(read_host_trace(dir.file("absent.json")));
}

TEST(HostTrace, reads_gzip_and_plain_files_alike) {
  Expected<HostTrace> gz = read_host_trace(test::pytorch_data("chakra_1.0.2-chakra.0.0.4.json.gz"));
  ASSERT_TRUE(gz) << gz.error().message();
  EXPECT_EQ(gz->schema(), "1.0.2-chakra.0.0.4");
  EXPECT_EQ(gz->ops().size(), 263u);
}

TEST(KinetoTrace, a_host_trace_given_as_kineto_trace_is_recognised) {
  Expected<nlohmann::json> doc = parse_json_text("h.json", R"({"schema": "1.0.1", "nodes": []})");
  ASSERT_TRUE(doc);
  Expected<KinetoTrace> trace = parse_kineto_trace("h.json", std::move(*doc));
  ASSERT_FALSE(trace);
  EXPECT_NE(trace.error().message().find("--host"), std::string::npos);
}

TEST(KinetoTrace, keeps_times_in_nanoseconds_and_counts_what_it_ignores) {
  Expected<nlohmann::json> doc = parse_json_text("k.json", R"({
    "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8},
    "traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.5, "dur": 2.25,
       "args": {"stream": 7, "correlation": 4, "External id": 4}},
      {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 4},
      {"ph": "X", "cat": "python_function", "name": "f", "ts": 1, "dur": 1}]})");
  ASSERT_TRUE(doc);
  Expected<KinetoTrace> trace = parse_kineto_trace("k.json", std::move(*doc));
  ASSERT_TRUE(trace) << trace.error().message();
  EXPECT_EQ(trace->rank(), 3);
  EXPECT_EQ(trace->world_size(), 8);
  ASSERT_EQ(trace->events().size(), 1u);
  EXPECT_EQ(trace->events()[0].ts_ns, 10500);
  EXPECT_EQ(trace->events()[0].dur_ns, 2250);
  EXPECT_EQ(trace->events()[0].stream, 7);
  EXPECT_EQ(trace->ignored().at("ac2g"), 1u);
  EXPECT_EQ(trace->ignored().at("python_function"), 1u);
}

TEST(KinetoTrace, an_event_without_time_is_named) {
  Expected<nlohmann::json> doc = parse_json_text(
      "k.json", R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 3}]})");
  ASSERT_TRUE(doc);
  Expected<KinetoTrace> trace = parse_kineto_trace("k.json", std::move(*doc));
  ASSERT_FALSE(trace);
  EXPECT_NE(trace.error().message().find("traceEvents[0] (cpu_op 'aten::mm'): no usable 'dur'"),
            std::string::npos)
      << trace.error().message();
}

}  // namespace host_trace_test
}  // namespace orrery::convert
