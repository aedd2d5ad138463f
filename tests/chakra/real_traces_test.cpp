// Every real trace we have reads, validates as expected, inspects and round-trips through JSON.
// The bundled copies (tests/data) always run; ../shared/data runs too when it is present.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <google/protobuf/util/message_differencer.h>

#include "chakra/json_codec.h"
#include "chakra/trace_builder.h"
#include "chakra/trace_file.h"
#include "chakra/trace_set.h"
#include "chakra/trace_stats.h"
#include "chakra/validation.h"

namespace orrery::chakra {
namespace real_traces_test {

namespace fs = std::filesystem;

std::vector<std::string> traces_under(const std::string& root) {
  std::vector<std::string> paths;
  if (!fs::is_directory(root)) return paths;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string path = entry.path().string();
    if (entry.is_regular_file() && (path.ends_with(".et") || path.ends_with(".et.gz"))) {
      paths.push_back(path);
    }
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

bool is_feeder(const std::string& path) {
  return path.find("feeder_tests_chakra") != std::string::npos;
}

void check_trace(const std::string& path) {
  SCOPED_TRACE(path);
  auto graph = load_trace(path);
  ASSERT_TRUE(graph) << graph.error().message();
  ASSERT_GT(graph->size(), 0u);

  const ValidationReport report = validate_trace(*graph);
  EXPECT_TRUE(report.passes(ValidationMode::kLenient));
  if (is_feeder(path)) {
    EXPECT_FALSE(report.passes(ValidationMode::kStrict));
  } else {
    EXPECT_TRUE(report.passes(ValidationMode::kStrict))
        << (report.diagnostics().empty() ? "" : report.diagnostics().front().message);
  }

  const TraceStats stats = compute_trace_stats(*graph);
  EXPECT_EQ(stats.nodes, graph->size());
  EXPECT_EQ(stats.unreachable, 0u);
  EXPECT_GE(stats.depth, 1u);

  // JSON round trip: the same messages come back.
  test::TempDir dir;
  {
    std::ofstream out(dir.file("t.json"), std::ios::binary);
    ASSERT_TRUE(trace_to_json(path, out));
  }
  ASSERT_TRUE(json_to_trace(dir.file("t.json"), dir.file("t.et")));
  auto before = TraceReader::open(path);
  auto after = TraceReader::open(dir.file("t.et"));
  ASSERT_TRUE(before && after);
  EXPECT_TRUE(
      google::protobuf::util::MessageDifferencer::Equals(before->metadata(), after->metadata()));
  ChakraProtoMsg::Node lhs;
  ChakraProtoMsg::Node rhs;
  size_t nodes = 0;
  while (*before->next(lhs)) {
    ASSERT_TRUE(*after->next(rhs));
    ASSERT_TRUE(google::protobuf::util::MessageDifferencer::Equals(lhs, rhs))
        << "node " << lhs.id();
    ++nodes;
  }
  EXPECT_FALSE(*after->next(rhs));
  EXPECT_EQ(nodes, graph->size());
}

TEST(RealTraces, every_bundled_trace_reads_validates_inspects_and_round_trips) {
  const auto paths = traces_under(ORRERY_TEST_DATA_DIR);
  ASSERT_GE(paths.size(), 65u);
  for (const std::string& path : paths) check_trace(path);
}

TEST(RealTraces, every_shared_trace_reads_validates_inspects_and_round_trips) {
  if (!test::shared_data_present()) GTEST_SKIP() << "../shared/data is absent on this checkout";
  const auto paths = traces_under(ORRERY_SHARED_DATA_DIR);
  ASSERT_GE(paths.size(), 65u);
  for (const std::string& path : paths) check_trace(path);
}

TEST(RealTraces, feeder_trace_counts) {
  auto graph = load_trace(test::feeder_trace());
  ASSERT_TRUE(graph);
  const TraceStats stats = compute_trace_stats(*graph);
  EXPECT_EQ(stats.nodes, 3664u);
  EXPECT_EQ(stats.by_type.at("COMP_NODE"), 3643u);
  EXPECT_EQ(stats.by_type.at("COMM_COLL_NODE"), 21u);
  EXPECT_EQ(graph->id(0), 216u);
  uint64_t max_id = 0;
  for (NodeIndex node = 0; node < graph->size(); ++node) max_id = std::max(max_id, graph->id(node));
  EXPECT_EQ(max_id, 7022u);
  // Its metadata has attributes but no version.
  EXPECT_TRUE(graph->metadata().version().empty());
  EXPECT_EQ(graph->metadata().attr(0).name(), "schema");
}

TEST(RealTraces, microbenchmark_collectives_carry_their_type_and_size) {
  struct Case {
    const char* folder;
    const char* name;
  };
  for (const Case& c :
       {Case{"all_reduce", "ALL_REDUCE"}, Case{"all_gather", "ALL_GATHER"},
        Case{"reduce_scatter", "REDUCE_SCATTER"}, Case{"all_to_all", "ALL_TO_ALL"}}) {
    const std::string prefix = test::test_data(std::string("astra-sim/microbenchmarks/") +
                                               c.folder + "/8npus_1MB/" + c.folder);
    auto files = resolve_trace_files(prefix);
    ASSERT_TRUE(files) << files.error().message();
    ASSERT_EQ(files->paths.size(), 8u);
    for (const std::string& path : files->paths) {
      auto graph = load_trace(path);
      ASSERT_TRUE(graph);
      const TraceStats stats = compute_trace_stats(*graph);
      ASSERT_EQ(stats.collectives.size(), 1u) << path;
      EXPECT_EQ(stats.collectives.begin()->first, c.name);
      EXPECT_EQ(stats.collectives.begin()->second.bytes, 1048576u);
    }
  }
}

TEST(RealTraces, stg_traces_read_is_cpu_op_as_int32_and_sizes_as_uint64) {
  auto graph = load_trace(test::test_data("symbolic_tensor_graph/dp2tp2pp2/workload.0.et"));
  ASSERT_TRUE(graph);
  const TraceStats stats = compute_trace_stats(*graph);
  EXPECT_EQ(stats.by_type.at("COMP_NODE"), 68u);
  EXPECT_EQ(stats.by_type.at("COMM_COLL_NODE"), 24u);
  EXPECT_EQ(stats.by_type.at("COMM_SEND_NODE"), 2u);
  EXPECT_EQ(stats.by_type.at("COMM_RECV_NODE"), 2u);
  EXPECT_GT(stats.flops, 0u);
  EXPECT_GT(stats.tensor_bytes, 0u);
  EXPECT_EQ(stats.cpu_ops, 0u);
}

}  // namespace real_traces_test
}  // namespace orrery::chakra
