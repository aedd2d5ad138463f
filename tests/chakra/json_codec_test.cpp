// Lossless .et <-> JSON conversion.
#include "chakra/json_codec.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <google/protobuf/util/message_differencer.h>

#include "chakra/trace_builder.h"

namespace orrery::chakra {
namespace json_codec_test {

using test::TempDir;

std::string read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_raw(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::vector<ChakraProtoMsg::Node> read_nodes(const std::string& path,
                                             ChakraProtoMsg::GlobalMetadata* metadata) {
  auto reader = TraceReader::open(path);
  EXPECT_TRUE(reader) << reader.error().message();
  if (metadata != nullptr) *metadata = reader->metadata();
  std::vector<ChakraProtoMsg::Node> nodes;
  ChakraProtoMsg::Node node;
  while (*reader->next(node)) nodes.push_back(node);
  return nodes;
}

// Converts `et` to JSON and back, and checks every message survives unchanged.
void expect_message_round_trip(const std::string& et, const TempDir& dir) {
  const std::string json = dir.file("trace.json");
  const std::string back = dir.file("back.et");
  {
    std::ofstream out(json, std::ios::binary);
    Status status = trace_to_json(et, out);
    ASSERT_TRUE(status) << status.error().message();
  }
  Status status = json_to_trace(json, back);
  ASSERT_TRUE(status) << status.error().message();
  ChakraProtoMsg::GlobalMetadata before_meta;
  ChakraProtoMsg::GlobalMetadata after_meta;
  const auto before = read_nodes(et, &before_meta);
  const auto after = read_nodes(back, &after_meta);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(before_meta, after_meta));
  ASSERT_EQ(before.size(), after.size()) << et;
  for (size_t idx = 0; idx < before.size(); ++idx) {
    ASSERT_TRUE(google::protobuf::util::MessageDifferencer::Equals(before[idx], after[idx]))
        << et << ": node " << before[idx].id() << " changed";
  }
}

TEST(JsonCodec, files_orrery_wrote_come_back_byte_identical) {
  TempDir dir;
  auto send = test::make_node(0, ChakraProtoMsg::COMM_SEND_NODE);  // id 0 is not on the wire
  test::add_attr(send, "comm_dst").set_int32_val(3);
  test::add_attr(send, "comm_tag").set_int32_val(-1);
  test::add_attr(send, "comm_size").set_uint64_val(UINT64_MAX);
  test::add_attr(send, "ratio").set_float_val(0.1f);
  test::add_attr(send, "dims").mutable_bool_list()->add_values(true);
  test::add_attr(send, "zero").set_int64_val(0);  // a oneof member at its default is still written
  send.mutable_inputs()->set_values("[[1, 2, 0, 64, 4, 'cuda:0']]");
  auto odd = test::make_node(7, static_cast<ChakraProtoMsg::NodeType>(99), {0}, {5});
  const std::string et = dir.file("orig.et");
  test::write_trace(et, {send, odd, test::comp_node(9)});

  std::ostringstream json;
  ASSERT_TRUE(trace_to_json(et, json));
  EXPECT_NE(json.str().find("\"format\":\"chakra-et-json/1\""), std::string::npos);
  EXPECT_NE(json.str().find("\"type\":99"), std::string::npos) << "unknown enums keep their number";
  write_raw(dir.file("orig.json"), json.str());
  ASSERT_TRUE(json_to_trace(dir.file("orig.json"), dir.file("back.et")));
  EXPECT_EQ(read_raw(et), read_raw(dir.file("back.et")));
}

TEST(JsonCodec, the_feeder_trace_survives_message_for_message) {
  TempDir dir;
  expect_message_round_trip(test::feeder_trace(), dir);
}

TEST(JsonCodec, gz_output_names_write_compressed_traces) {
  TempDir dir;
  const std::string et = dir.file("orig.et");
  test::write_trace(et, {test::comp_node(1), test::comp_node(2, {1})});
  {
    std::ofstream out(dir.file("t.json"), std::ios::binary);
    ASSERT_TRUE(trace_to_json(et, out));
  }
  ASSERT_TRUE(json_to_trace(dir.file("t.json"), dir.file("t.et.gz")));
  const std::string compressed = read_raw(dir.file("t.et.gz"));
  ASSERT_GE(compressed.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(compressed[0]), 0x1f);
  EXPECT_EQ(read_nodes(dir.file("t.et.gz"), nullptr).size(), 2u);
}

TEST(JsonCodec, a_syntax_error_names_line_and_column) {
  TempDir dir;
  write_raw(
      dir.file("bad.json"),
      "{\"format\":\"chakra-et-json/1\",\n\"global_metadata\":{},\n\"nodes\":[{\"id\": oops}]}");
  Status status = json_to_trace(dir.file("bad.json"), dir.file("out.et"));
  ASSERT_FALSE(status);
  EXPECT_NE(status.error().message().find("line 3, column"), std::string::npos)
      << status.error().message();
}

TEST(JsonCodec, a_node_that_does_not_convert_is_named_by_index) {
  TempDir dir;
  write_raw(dir.file("bad.json"),
            "{\"format\":\"chakra-et-json/1\",\"global_metadata\":{\"version\":\"0.0.4\"},\n"
            "\"nodes\":[{\"id\":\"1\"},{\"id\":\"2\",\"colour\":\"red\"}]}");
  Status status = json_to_trace(dir.file("bad.json"), dir.file("out.et"));
  ASSERT_FALSE(status);
  EXPECT_NE(status.error().message().find("nodes[1]"), std::string::npos)
      << status.error().message();
  EXPECT_NE(status.error().message().find("colour"), std::string::npos) << status.error().message();
}

TEST(JsonCodec, other_json_is_not_taken_for_a_trace) {
  TempDir dir;
  write_raw(dir.file("other.json"), "{\"1\": [0, 1, 2, 3]}");
  Status status = json_to_trace(dir.file("other.json"), dir.file("out.et"));
  ASSERT_FALSE(status);
  EXPECT_NE(status.error().message().find("not a Chakra JSON document"), std::string::npos);
}

}  // namespace json_codec_test
}  // namespace orrery::chakra
