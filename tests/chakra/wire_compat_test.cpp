// A file orrery writes is decoded by an independent reader: protoc itself, once with the schema and
// once schema-free (--decode_raw, which shows the bare field numbers on the wire).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "chakra/record_stream.h"
#include "chakra/trace_builder.h"
#include "e2e/run_command.h"

namespace orrery::chakra {
namespace wire_compat_test {

std::string record_to_file(const std::string& trace, int index, const std::string& out) {
  auto reader = RecordReader::open(trace);
  EXPECT_TRUE(reader);
  std::string record;
  for (int idx = 0; idx <= index; ++idx) EXPECT_TRUE(*reader->next(record));
  std::ofstream file(out, std::ios::binary);
  file.write(record.data(), static_cast<std::streamsize>(record.size()));
  return out;
}

// Runs protoc with `input` on its standard input.
CommandResult protoc(const std::vector<std::string>& args, const std::string& input) {
  std::ostringstream command;
  command << shell_quote(PROTOC_BINARY);
  for (const std::string& arg : args) command << ' ' << shell_quote(arg);
  command << " < " << shell_quote(input);
  return run_program("/bin/sh", {"-c", command.str()});
}

TEST(WireCompat, protoc_decodes_a_node_orrery_wrote) {
  test::TempDir dir;
  auto node = test::coll_node(42, ChakraProtoMsg::ALL_GATHER, 1048576, {41});
  node.set_name("all_gather_1MiB");
  node.set_duration_micros(17);
  test::write_trace(dir.file("t.et"), {test::comp_node(41), node});
  const std::string record = record_to_file(dir.file("t.et"), 2, dir.file("node.bin"));

  const CommandResult typed = protoc(
      {"--proto_path=" ORRERY_PROTO_DIR, "--decode=ChakraProtoMsg.Node", "chakra/et_def.proto"},
      record);
  ASSERT_EQ(typed.exit_code, 0) << typed.err;
  EXPECT_NE(typed.out.find("id: 42"), std::string::npos) << typed.out;
  EXPECT_NE(typed.out.find("name: \"all_gather_1MiB\""), std::string::npos);
  EXPECT_NE(typed.out.find("type: COMM_COLL_NODE"), std::string::npos);
  EXPECT_NE(typed.out.find("data_deps: 41"), std::string::npos);
  EXPECT_NE(typed.out.find("duration_micros: 17"), std::string::npos);
  EXPECT_NE(typed.out.find("name: \"comm_size\"\n  int64_val: 1048576"), std::string::npos)
      << typed.out;

  // Field numbers as the Chakra table gives them: 1 id, 2 name, 3 type, 5 data_deps,
  // 7 duration_micros, 10 attr with 1 name and 9 int64_val.
  const CommandResult raw = protoc({"--decode_raw"}, record);
  ASSERT_EQ(raw.exit_code, 0) << raw.err;
  EXPECT_NE(raw.out.find("1: 42\n2: \"all_gather_1MiB\"\n3: 7\n"), std::string::npos) << raw.out;
  EXPECT_NE(raw.out.find("5: \")\""), std::string::npos) << "data_deps [41], packed as proto3 does";
  EXPECT_NE(raw.out.find("7: 17"), std::string::npos);
  EXPECT_NE(raw.out.find("10 {\n  1: \"comm_size\"\n  9: 1048576\n}"), std::string::npos)
      << raw.out;
}

TEST(WireCompat, protoc_decodes_the_metadata_record_with_its_version) {
  test::TempDir dir;
  test::write_trace(dir.file("t.et"), {test::comp_node(1)}, "");
  const std::string record = record_to_file(dir.file("t.et"), 0, dir.file("meta.bin"));
  const CommandResult typed =
      protoc({"--proto_path=" ORRERY_PROTO_DIR, "--decode=ChakraProtoMsg.GlobalMetadata",
              "chakra/et_def.proto"},
             record);
  ASSERT_EQ(typed.exit_code, 0) << typed.err;
  // An empty metadata would be a zero-length record; the writer sets a version instead.
  EXPECT_EQ(typed.out, "version: \"0.0.4\"\n");
}

}  // namespace wire_compat_test
}  // namespace orrery::chakra
