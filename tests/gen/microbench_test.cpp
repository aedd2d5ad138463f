// Microbenchmark traces: byte-identical to ASTRA-sim's own examples, valid Chakra for every kind,
// and clear errors for specs that cannot be written.
#include "gen/microbench.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "chakra/trace_builder.h"
#include "chakra/trace_file.h"
#include "chakra/validation.h"

namespace orrery::gen {
namespace microbench_test {

namespace fs = std::filesystem;
using chakra::TraceGraph;
using test::TempDir;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TraceGraph load(const std::string& path) {
  Expected<TraceGraph> graph = chakra::load_trace(path);
  EXPECT_TRUE(graph) << graph.error().message();
  return graph ? std::move(*graph) : TraceGraph();
}

int64_t int_attr(const TraceGraph& graph, chakra::NodeIndex node, const char* name) {
  Expected<std::optional<int64_t>> value = graph.get_int(node, name);
  EXPECT_TRUE(value && value->has_value()) << name;
  return value && value->has_value() ? **value : -1;
}

MicrobenchSpec spec_of(MicrobenchKind kind, uint64_t bytes, uint32_t ranks) {
  MicrobenchSpec spec;
  spec.kind = kind;
  spec.bytes = bytes;
  spec.ranks = ranks;
  return spec;
}

TEST(Microbench, files_are_byte_identical_to_astra_sim_microbenchmarks) {
  const std::pair<MicrobenchKind, const char*> kinds[] = {
      {MicrobenchKind::kAllReduce, "all_reduce"},
      {MicrobenchKind::kAllGather, "all_gather"},
      {MicrobenchKind::kReduceScatter, "reduce_scatter"},
      {MicrobenchKind::kAllToAll, "all_to_all"}};
  TempDir dir;
  for (const auto& [kind, name] : kinds) {
    for (uint32_t ranks : {4U, 8U}) {
      const std::string prefix = dir.file(std::string(name) + std::to_string(ranks) + "/" + name);
      Expected<std::vector<std::string>> paths =
          write_microbench(spec_of(kind, 1 << 20, ranks), prefix);
      ASSERT_TRUE(paths) << paths.error().message();
      ASSERT_EQ(paths->size(), ranks);
      for (uint32_t rank = 0; rank < ranks; ++rank) {
        const std::string expected = test::test_data(fmt::format(
            "astra-sim/microbenchmarks/{}/{}npus_1MB/{}.{}.et", name, ranks, name, rank));
        EXPECT_EQ((*paths)[rank], fmt::format("{}.{}.et", prefix, rank));
        const std::string bytes = read_bytes((*paths)[rank]);
        ASSERT_FALSE(bytes.empty());
        EXPECT_EQ(bytes, read_bytes(expected)) << name << " rank " << rank << " of " << ranks;
      }
    }
  }
}

TEST(Microbench, every_collective_kind_writes_its_comm_type_and_validates_strictly) {
  const std::pair<MicrobenchKind, ChakraProtoMsg::CollectiveCommType> kinds[] = {
      {MicrobenchKind::kAllReduce, ChakraProtoMsg::ALL_REDUCE},
      {MicrobenchKind::kAllGather, ChakraProtoMsg::ALL_GATHER},
      {MicrobenchKind::kReduceScatter, ChakraProtoMsg::REDUCE_SCATTER},
      {MicrobenchKind::kAllToAll, ChakraProtoMsg::ALL_TO_ALL},
      {MicrobenchKind::kBroadcast, ChakraProtoMsg::BROADCAST},
      {MicrobenchKind::kReduce, ChakraProtoMsg::REDUCE},
      {MicrobenchKind::kGather, ChakraProtoMsg::GATHER},
      {MicrobenchKind::kScatter, ChakraProtoMsg::SCATTER},
      {MicrobenchKind::kBarrier, ChakraProtoMsg::BARRIER}};
  TempDir dir;
  for (const auto& [kind, comm_type] : kinds) {
    const std::string prefix = dir.file("kind" + std::to_string(comm_type));
    Expected<std::vector<std::string>> paths = write_microbench(spec_of(kind, 4096, 3), prefix);
    ASSERT_TRUE(paths) << paths.error().message();
    for (uint32_t rank = 0; rank < 3; ++rank) {
      const TraceGraph graph = load((*paths)[rank]);
      ASSERT_EQ(graph.size(), 1u);
      EXPECT_EQ(graph.id(0), rank);
      EXPECT_EQ(graph.type(0), ChakraProtoMsg::COMM_COLL_NODE);
      EXPECT_EQ(int_attr(graph, 0, "comm_type"), comm_type);
      EXPECT_EQ(int_attr(graph, 0, "comm_size"), 4096);
      EXPECT_TRUE(chakra::validate_trace(graph).passes(chakra::ValidationMode::kStrict));
    }
  }
}

TEST(Microbench, node_names_follow_astra_sim_generator) {
  const struct {
    MicrobenchKind kind;
    uint64_t bytes;
    uint32_t ranks;
    const char* name;
  } cases[] = {{MicrobenchKind::kAllReduce, 1 << 20, 8, "all_reduce_8npus_1MB"},
               {MicrobenchKind::kAllGather, 64ULL << 20, 16, "all_gather_16npus_64MB"},
               {MicrobenchKind::kAllToAll, 1ULL << 30, 4, "all_to_all_4npus_1024MB"},
               {MicrobenchKind::kReduceScatter, 64 << 10, 2, "reduce_scatter_2npus_64KB"},
               {MicrobenchKind::kBroadcast, 1000, 2, "broadcast_2npus_1000B"},
               {MicrobenchKind::kBarrier, 0, 4, "barrier_4npus"}};
  TempDir dir;
  for (const auto& c : cases) {
    Expected<std::vector<std::string>> paths =
        write_microbench(spec_of(c.kind, c.bytes, c.ranks), dir.file(c.name));
    ASSERT_TRUE(paths) << paths.error().message();
    EXPECT_EQ(load(paths->back()).name(0), c.name);
  }
}

TEST(Microbench, compute_time_adds_a_comp_node_the_collective_depends_on) {
  TempDir dir;
  MicrobenchSpec spec = spec_of(MicrobenchKind::kAllReduce, 1 << 20, 4);
  spec.compute_us = 25;
  Expected<std::vector<std::string>> paths = write_microbench(spec, dir.file("ar"));
  ASSERT_TRUE(paths) << paths.error().message();
  for (uint32_t rank = 0; rank < 4; ++rank) {
    const TraceGraph graph = load((*paths)[rank]);
    ASSERT_EQ(graph.size(), 2u);
    EXPECT_EQ(graph.id(0), 2 * rank);
    EXPECT_EQ(graph.type(0), ChakraProtoMsg::COMP_NODE);
    EXPECT_EQ(graph.duration_micros(0), 25u);
    EXPECT_EQ(graph.name(0), "compute_25us");
    EXPECT_EQ(graph.id(1), 2 * rank + 1);
    EXPECT_EQ(graph.type(1), ChakraProtoMsg::COMM_COLL_NODE);
    ASSERT_EQ(graph.data_deps(1).size(), 1u);
    EXPECT_EQ(graph.data_deps(1)[0], 2 * rank);
    EXPECT_TRUE(chakra::validate_trace(graph).passes(chakra::ValidationMode::kStrict));
  }
}

TEST(Microbench, pg_name_is_written_after_comm_size) {
  TempDir dir;
  MicrobenchSpec spec = spec_of(MicrobenchKind::kAllGather, 1024, 2);
  spec.pg_name = "5";
  Expected<std::vector<std::string>> paths = write_microbench(spec, dir.file("ag"));
  ASSERT_TRUE(paths) << paths.error().message();
  const TraceGraph graph = load(paths->front());
  const auto attributes = graph.attributes(0);
  ASSERT_EQ(attributes.size(), 4u);
  EXPECT_EQ(graph.attribute_name(attributes[3]), "pg_name");
  Expected<std::optional<std::string_view>> pg_name = graph.get_string(0, "pg_name");
  ASSERT_TRUE(pg_name && pg_name->has_value());
  EXPECT_EQ(**pg_name, "5");
}

TEST(Microbench, send_recv_is_a_ring_exchange) {
  TempDir dir;
  MicrobenchSpec spec = spec_of(MicrobenchKind::kSendRecv, 64 << 10, 4);
  Expected<std::vector<std::string>> paths = write_microbench(spec, dir.file("sr"));
  ASSERT_TRUE(paths) << paths.error().message();
  for (uint32_t rank = 0; rank < 4; ++rank) {
    const TraceGraph graph = load((*paths)[rank]);
    ASSERT_EQ(graph.size(), 2u);
    EXPECT_EQ(graph.type(0), ChakraProtoMsg::COMM_SEND_NODE);
    EXPECT_EQ(graph.id(0), 2 * rank);
    EXPECT_EQ(int_attr(graph, 0, "comm_src"), rank);
    EXPECT_EQ(int_attr(graph, 0, "comm_dst"), (rank + 1) % 4);
    EXPECT_EQ(int_attr(graph, 0, "comm_tag"), 0);
    EXPECT_EQ(int_attr(graph, 0, "comm_size"), 65536);
    EXPECT_EQ(graph.name(0), "send_recv_4npus_64KB_send");
    EXPECT_EQ(graph.type(1), ChakraProtoMsg::COMM_RECV_NODE);
    EXPECT_EQ(int_attr(graph, 1, "comm_src"), (rank + 3) % 4);
    EXPECT_EQ(int_attr(graph, 1, "comm_dst"), rank);
    EXPECT_EQ(int_attr(graph, 1, "comm_tag"), 0);
    EXPECT_TRUE(graph.data_deps(0).empty());
    EXPECT_TRUE(chakra::validate_trace(graph).passes(chakra::ValidationMode::kStrict));
  }
}

TEST(Microbench, send_recv_after_compute_depends_on_it) {
  TempDir dir;
  MicrobenchSpec spec = spec_of(MicrobenchKind::kSendRecv, 100, 2);
  spec.compute_us = 3;
  Expected<std::vector<std::string>> paths = write_microbench(spec, dir.file("sr"));
  ASSERT_TRUE(paths) << paths.error().message();
  const TraceGraph graph = load((*paths)[1]);
  ASSERT_EQ(graph.size(), 3u);
  EXPECT_EQ(graph.id(0), 3u);
  EXPECT_EQ(graph.data_deps(1)[0], 3u);
  EXPECT_EQ(graph.data_deps(2)[0], 3u);
}

TEST(Microbench, creates_the_folder_of_the_prefix) {
  TempDir dir;
  Expected<std::vector<std::string>> paths =
      write_microbench(spec_of(MicrobenchKind::kAllReduce, 8, 1), dir.file("a/b/c/ar"));
  ASSERT_TRUE(paths) << paths.error().message();
  EXPECT_TRUE(fs::exists(dir.file("a/b/c/ar.0.et")));
}

TEST(Microbench, kind_names_with_dashes_or_underscores) {
  EXPECT_EQ(*parse_microbench_kind("all-reduce"), MicrobenchKind::kAllReduce);
  EXPECT_EQ(*parse_microbench_kind("all_reduce"), MicrobenchKind::kAllReduce);
  EXPECT_EQ(*parse_microbench_kind("reduce-scatter"), MicrobenchKind::kReduceScatter);
  EXPECT_EQ(*parse_microbench_kind("all_to_all"), MicrobenchKind::kAllToAll);
  EXPECT_EQ(*parse_microbench_kind("send-recv"), MicrobenchKind::kSendRecv);
  EXPECT_EQ(*parse_microbench_kind("barrier"), MicrobenchKind::kBarrier);
  Expected<MicrobenchKind> unknown = parse_microbench_kind("allreduce");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().message(),
            "unknown microbenchmark 'allreduce' (expected all-reduce, all-gather, reduce-scatter, "
            "all-to-all, broadcast, reduce, gather, scatter, barrier, send-recv)");
}

TEST(Microbench, specs_that_cannot_be_written_are_errors) {
  TempDir dir;
  const std::string prefix = dir.file("x");
  const auto error_of = [&](const MicrobenchSpec& spec, const std::string& where) {
    Expected<std::vector<std::string>> paths = write_microbench(spec, where);
    EXPECT_FALSE(paths);
    return paths ? std::string() : paths.error().message();
  };
  EXPECT_EQ(error_of(spec_of(MicrobenchKind::kAllReduce, 8, 0), prefix),
            "0 ranks: expected 1 to 1048576");
  EXPECT_EQ(error_of(spec_of(MicrobenchKind::kAllReduce, 8, 2'000'000), prefix),
            "2000000 ranks: expected 1 to 1048576");
  EXPECT_EQ(error_of(spec_of(MicrobenchKind::kSendRecv, 8, 1), prefix),
            "send-recv needs at least 2 ranks (rank r sends to r+1), found 1");
  EXPECT_EQ(error_of(spec_of(MicrobenchKind::kAllGather, 0, 4), prefix),
            "all-gather of 0 bytes: give a size of 1 byte or more");
  EXPECT_EQ(
      error_of(spec_of(MicrobenchKind::kAllGather, 1ULL << 63, 4), prefix),
      "--size 9,223,372,036,854,775,808 bytes: more than 2^50 bytes (1 PiB), the largest size "
      "orrery simulates");
  MicrobenchSpec with_group = spec_of(MicrobenchKind::kSendRecv, 8, 2);
  with_group.pg_name = "1";
  EXPECT_EQ(error_of(with_group, prefix), "pg_name '1' applies to collectives, not to send-recv");
  EXPECT_EQ(error_of(spec_of(MicrobenchKind::kAllReduce, 8, 2), ""),
            "empty output prefix (rank files are written as <prefix>.<rank>.et)");
  // A folder that cannot be made: a file is in the way.
  std::ofstream(dir.file("file")) << "x";
  EXPECT_CONTAINS(error_of(spec_of(MicrobenchKind::kAllReduce, 8, 2), dir.file("file/sub/ar")),
                  dir.file("file/sub") + ": cannot create the folder");
  EXPECT_FALSE(fs::exists(prefix + ".0.et"));
}

}  // namespace microbench_test
}  // namespace orrery::gen
