// .et files that claim more than they hold, and traces whose numbers no run represents
// (docs/numbers.md): every one is a named error, and reading costs what was read.
#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>
#include <string>
#include <vector>

#include "chakra/json_codec.h"
#include "chakra/record_stream.h"
#include "chakra/trace_builder.h"
#include "chakra/trace_file.h"
#include "chakra/trace_set_loader.h"
#include "chakra/validation.h"
#include "core/checked.h"

namespace orrery::chakra {
namespace hostile_trace_test {

using test::add_attr;
using test::build_graph;
using test::make_node;
using test::TempDir;

void write_raw(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile file = gzopen(path.c_str(), "wb9");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  gzclose(file);
}

std::vector<std::string> messages(const ValidationReport& report, Check check) {
  std::vector<std::string> out;
  for (const Diagnostic& diagnostic : report.diagnostics()) {
    if (diagnostic.check == check) out.push_back(diagnostic.message);
  }
  return out;
}

// The 16-byte file: a record whose length prefix claims 1 GiB, then 11 bytes.
TEST(HostileTrace, a_length_claiming_a_gibibyte_costs_only_what_is_there) {
  TempDir dir;
  const std::string path = dir.file("claims.et");
  write_raw(path, std::string("\x80\x80\x80\x80\x04", 5) + std::string(11, 'x'));
  Expected<RecordReader> reader = RecordReader::open(path);
  ASSERT_TRUE(reader);
  std::string record;
  Expected<bool> got = reader->next(record);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().message(),
            path +
                ": record 0 at byte 0 is truncated: its length is 1073741824 bytes but the "
                "file ends after 11");
  // The buffer grew with the 11 bytes read, not with the 1 GiB claimed.
  EXPECT_LT(record.capacity(), size_t{1} << 20);
}

// The 51 KB file: gzip-compressed zero-length records, millions of empty nodes once.
TEST(HostileTrace, zero_length_records_are_refused_at_the_first) {
  TempDir dir;
  const std::string path = dir.file("zeros.et.gz");
  std::string metadata;
  ChakraProtoMsg::GlobalMetadata meta;
  meta.set_version("0.0.4");
  ASSERT_TRUE(meta.SerializeToString(&metadata));
  std::string bytes(1, static_cast<char>(metadata.size()));
  bytes += metadata;
  bytes += std::string(50'000'000, '\0');  // 50 million zero-length records
  write_gzip(path, bytes);
  Expected<TraceGraph> graph = load_trace(path);
  ASSERT_FALSE(graph);
  EXPECT_NE(graph.error().message().find("record 1 at byte 8 is empty (length 0)"),
            std::string::npos)
      << graph.error().message();
}

// The loader of trace sets reads records without decoding them; an empty one is still the error
// load_trace gives, in a plain file as in a compressed one.
TEST(HostileTrace, an_empty_record_is_the_same_error_through_the_trace_set_loader) {
  TempDir dir;
  std::string bytes;
  auto record = [&bytes](const google::protobuf::MessageLite& message) {
    const std::string body = message.SerializeAsString();
    bytes += static_cast<char>(body.size());
    bytes += body;
  };
  ChakraProtoMsg::GlobalMetadata meta;
  meta.set_version("0.0.4");
  record(meta);
  record(make_node(1, ChakraProtoMsg::COMP_NODE));
  bytes += '\0';  // record 2 (the metadata is record 0): empty
  record(make_node(2, ChakraProtoMsg::COMP_NODE));
  for (const std::string name : {"w.et", "w.et.gz"}) {
    const std::string path = dir.file(name);
    if (name.ends_with(".gz")) {
      write_gzip(path, bytes);
    } else {
      std::ofstream(path, std::ios::binary) << bytes;
    }
    Expected<TraceGraph> direct = load_trace(path);
    ASSERT_FALSE(direct);
    EXPECT_NE(direct.error().message().find("record 2 at byte"), std::string::npos);
    EXPECT_NE(direct.error().message().find("is empty (length 0)"), std::string::npos);
    TraceSetLoader loader;
    Expected<TraceGraph> loaded = loader.load(path);
    ASSERT_FALSE(loaded) << name;
    EXPECT_EQ(loaded.error().message(), direct.error().message());
  }
}

TEST(HostileTrace, sizes_durations_and_flops_beyond_the_limits_are_fatal_findings) {
  ChakraProtoMsg::Node comp = make_node(1, ChakraProtoMsg::COMP_NODE);
  comp.set_duration_micros(18'446'744'073'709'551ULL);  // the near-2^64 ps duration
  ChakraProtoMsg::Node coll = test::coll_node(2, ChakraProtoMsg::ALL_REDUCE, int64_t{1} << 59);
  ChakraProtoMsg::Node flops = make_node(3, ChakraProtoMsg::COMP_NODE);
  add_attr(flops, "num_ops").set_uint64_val(uint64_t{1} << 63);
  ChakraProtoMsg::Node load = make_node(4, ChakraProtoMsg::MEM_LOAD_NODE);
  add_attr(load, "tensor_size").set_uint64_val(UINT64_MAX);
  // At the limits exactly: allowed.
  ChakraProtoMsg::Node edge = test::coll_node(5, ChakraProtoMsg::ALL_GATHER, int64_t{1} << 50);
  edge.set_duration_micros(kMaxDurationMicros);
  const TraceGraph graph = build_graph({comp, coll, flops, load, edge});
  const ValidationReport report = validate_trace(graph);
  EXPECT_EQ(messages(report, Check::kOutOfRange),
            (std::vector<std::string>{
                "node 1: duration_micros 18,446,744,073,709,551 is more than 2,305,843,009,213 us "
                "(2^61 ps, about 26.7 days, the longest run orrery simulates)",
                "node 2: comm_size 576,460,752,303,423,488 is more than 2^50 bytes (1 PiB), the "
                "largest orrery simulates",
                "node 3: num_ops 9,223,372,036,854,775,808 is more than 2^62 FLOPs, the largest "
                "orrery simulates",
                "node 4: tensor_size 18,446,744,073,709,551,615 is more than 2^50 bytes (1 PiB), "
                "the largest orrery simulates"}));
  EXPECT_FALSE(report.passes(ValidationMode::kLenient));
  EXPECT_FALSE(is_repairable(Check::kOutOfRange));
  EXPECT_EQ(check_name(Check::kOutOfRange), "out_of_range");
}

TEST(HostileTrace, a_long_cycle_prints_its_ends_not_every_node) {
  // A cycle through 100,000 nodes: 1 -> 2 -> ... -> 100000 -> 1.
  constexpr uint64_t kNodes = 100'000;
  std::vector<ChakraProtoMsg::Node> nodes;
  nodes.reserve(kNodes);
  for (uint64_t id = 1; id <= kNodes; ++id) {
    nodes.push_back(make_node(id, ChakraProtoMsg::COMP_NODE, {id == 1 ? kNodes : id - 1}));
  }
  const ValidationReport report = validate_trace(build_graph(nodes));
  const std::vector<std::string> cycle = messages(report, Check::kCycle);
  ASSERT_EQ(cycle.size(), 1u);
  EXPECT_EQ(cycle.front(),
            "dependency cycle 1 -> 2 -> 3 -> 4 -> 5 -> 6 -> 7 -> 8 -> ... (99,985 more) ... -> "
            "99994 -> 99995 -> 99996 -> 99997 -> 99998 -> 99999 -> 100000 -> 1 of 100,000 nodes "
            "(100,000 nodes can never run)");
  // A short one is printed whole.
  const ValidationReport small =
      validate_trace(build_graph({make_node(1, ChakraProtoMsg::COMP_NODE, {2}),
                                  make_node(2, ChakraProtoMsg::COMP_NODE, {1})}));
  EXPECT_EQ(messages(small, Check::kCycle).front(),
            "dependency cycle 1 -> 2 -> 1 of 2 nodes (2 nodes can never run)");
}

// Found by fuzz_trace_json: nlohmann throws out_of_range, not parse_error, for a number beyond a
// double ("1e999"), which escaped as an uncaught exception (exit 134).
TEST(HostileTrace, a_json_number_beyond_a_double_is_an_error_not_a_crash) {
  TempDir dir;
  write_raw(dir.file("t.json"),
            "{\"format\": \"chakra-et-json/1\",\n \"global_metadata\": {\"attr\": [1e999]},\n"
            " \"nodes\": []}");
  const Status status = json_to_trace(dir.file("t.json"), dir.file("t.et"));
  ASSERT_FALSE(status);
  EXPECT_EQ(
      status.error().message(),
      dir.file("t.json") + ": number overflow parsing '1e999' (beyond the range of a double)");
}

}  // namespace hostile_trace_test
}  // namespace orrery::chakra
