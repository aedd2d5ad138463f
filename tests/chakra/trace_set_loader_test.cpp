// TraceSetLoader: files equal up to scalar attribute values are built from a template and give the
// graph load_trace gives; any other difference parses the file whole; errors are load_trace's.
#include "chakra/trace_set_loader.h"

#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <thread>

#include "chakra/trace_builder.h"
#include "chakra/trace_set.h"
#include "chakra/validation.h"
#include "core/checked.h"

namespace orrery::chakra {
namespace trace_set_loader_test {

using test::TempDir;

// A small pipeline-stage-like rank: compute, a collective on `group`, a send to `peer`.
std::vector<ChakraProtoMsg::Node> rank_nodes(uint64_t peer, const std::string& group,
                                             int64_t bytes = 4096) {
  std::vector<ChakraProtoMsg::Node> nodes;
  ChakraProtoMsg::Node compute = test::comp_node(0);
  test::add_attr(compute, "num_ops").set_int64_val(1000);
  nodes.push_back(compute);
  ChakraProtoMsg::Node coll = test::coll_node(1, ChakraProtoMsg::ALL_REDUCE, bytes, {0});
  test::add_attr(coll, "pg_name").set_string_val(group);
  auto* dims = test::add_attr(coll, "involved_dim").mutable_bool_list()->mutable_values();
  dims->Add(true);
  dims->Add(false);
  nodes.push_back(coll);
  ChakraProtoMsg::Node send = test::make_node(2, ChakraProtoMsg::COMM_SEND_NODE, {1});
  test::add_attr(send, "comm_dst").set_int32_val(static_cast<int32_t>(peer));
  test::add_attr(send, "comm_size").set_int64_val(bytes);
  test::add_attr(send, "comm_tag").set_int32_val(7);
  nodes.push_back(send);
  nodes.push_back(test::comp_node(3, {2}));
  return nodes;
}

// Node for node and attribute for attribute the same.
void expect_same_graph(const TraceGraph& lhs, const TraceGraph& rhs) {
  ASSERT_EQ(lhs.size(), rhs.size());
  EXPECT_TRUE(lhs.same_work(rhs));
  EXPECT_TRUE(rhs.same_work(lhs));
  EXPECT_EQ(lhs.source(), rhs.source());
  for (NodeIndex node = 0; node < lhs.size(); ++node) {
    EXPECT_EQ(lhs.id(node), rhs.id(node));
    EXPECT_EQ(lhs.name(node), rhs.name(node));
    EXPECT_EQ(lhs.inputs_values(node), rhs.inputs_values(node));
    const auto left = lhs.attributes(node);
    const auto right = rhs.attributes(node);
    ASSERT_EQ(left.size(), right.size());
    for (size_t idx = 0; idx < left.size(); ++idx) {
      EXPECT_EQ(lhs.attribute_name(left[idx]), rhs.attribute_name(right[idx]));
    }
  }
}

TEST(TraceSetLoader, FilesDifferingInPeersAndGroupsShareTheFirstFilesTables) {
  TempDir dir;
  test::write_trace(dir.file("w.0.et"), rank_nodes(4, "1"));
  test::write_trace(dir.file("w.1.et"), rank_nodes(5, "2"));  // "2" is no string of rank 0's
  test::write_trace(dir.file("w.2.et"), rank_nodes(4, "1"));
  TraceSetLoader loader;
  Expected<TraceGraph> first = loader.load(dir.file("w.0.et"));
  Expected<TraceGraph> second = loader.load(dir.file("w.1.et"));
  Expected<TraceGraph> third = loader.load(dir.file("w.2.et"));
  ASSERT_TRUE(first && second && third);
  EXPECT_TRUE(second->shares_structure(*first));
  EXPECT_TRUE(third->shares_structure(*first));
  EXPECT_EQ(second->patched_count(), 2u);  // the collective and the send
  EXPECT_EQ(third->patched_count(), 0u);
  const TraceSetLoader::Stats stats = loader.stats();
  EXPECT_EQ(stats.parsed, 1u);
  EXPECT_EQ(stats.derived, 2u);
  EXPECT_EQ(stats.patched_nodes, 2u);
  EXPECT_EQ(stats.templates, 1u);

  Expected<TraceGraph> direct = load_trace(dir.file("w.1.et"));
  ASSERT_TRUE(direct);
  expect_same_graph(*second, *direct);
  EXPECT_EQ(**second->get_string(1, "pg_name"), "2");
  EXPECT_EQ(**second->get_uint(2, "comm_dst"), 5u);
  EXPECT_EQ(**first->get_uint(2, "comm_dst"), 4u);  // the template keeps its own values
  EXPECT_EQ(**first->get_string(1, "pg_name"), "1");
  EXPECT_EQ(*second->get_int_or(2, "comm_tag", 0), 7);
  EXPECT_EQ((**second->get_bool_list(1, "involved_dim")), (std::vector<bool>{true, false}));
  // A different size is a scalar too.
  test::write_trace(dir.file("w.3.et"), rank_nodes(4, "1", 8192));
  Expected<TraceGraph> fourth = loader.load(dir.file("w.3.et"));
  ASSERT_TRUE(fourth);
  EXPECT_TRUE(fourth->shares_structure(*first));
  EXPECT_EQ(**fourth->get_uint(1, "comm_size"), 8192u);

  // Graphs sharing tables are compared on the nodes either patched, and only there.
  constexpr std::array<std::string_view, 2> kPeers = {"comm_dst", "pg_name"};
  EXPECT_TRUE(third->same_work(*first));
  EXPECT_FALSE(second->same_work(*first));
  EXPECT_FALSE(first->same_work(*second));
  EXPECT_TRUE(second->same_work_except(*first, kPeers));
  EXPECT_TRUE(first->same_work_except(*second, kPeers));
  EXPECT_FALSE(fourth->same_work_except(*first, kPeers));   // the size differs
  EXPECT_FALSE(fourth->same_work_except(*second, kPeers));  // patched on both sides
  EXPECT_TRUE(second->same_work_except(*direct, kPeers));   // the same, not sharing tables
}

TEST(TraceSetLoader, AnyOtherDifferenceParsesTheFileWhole) {
  TempDir dir;
  test::write_trace(dir.file("base.et"), rank_nodes(4, "1"));
  std::vector<std::vector<ChakraProtoMsg::Node>> variants;
  {
    auto nodes = rank_nodes(4, "1");
    nodes[3].add_data_deps(0);  // a dependency
    variants.push_back(nodes);
  }
  {
    auto nodes = rank_nodes(4, "1");
    nodes[1].mutable_attr(4)->mutable_bool_list()->set_values(1, true);  // a list value
    variants.push_back(nodes);
  }
  {
    auto nodes = rank_nodes(4, "1");
    nodes[2].mutable_attr(0)->set_name("comm_dst_rank");  // an attribute name
    variants.push_back(nodes);
  }
  {
    auto nodes = rank_nodes(4, "1");
    nodes[2].mutable_attr(0)->set_int64_val(4);  // the kind of a value (int32 -> int64)
    variants.push_back(nodes);
  }
  {
    auto nodes = rank_nodes(4, "1");
    nodes[0].set_duration_micros(11);  // a duration
    variants.push_back(nodes);
  }
  {
    auto nodes = rank_nodes(4, "1");
    nodes.push_back(test::comp_node(4, {3}));  // one node more
    variants.push_back(nodes);
  }
  {
    auto nodes = rank_nodes(4, "1");
    nodes[3].set_name("other");  // a node name
    variants.push_back(nodes);
  }
  TraceSetLoader loader(/*max_templates=*/1);
  Expected<TraceGraph> base = loader.load(dir.file("base.et"));
  ASSERT_TRUE(base);
  for (size_t idx = 0; idx < variants.size(); ++idx) {
    const std::string path = dir.file("v" + std::to_string(idx) + ".et");
    test::write_trace(path, variants[idx]);
    Expected<TraceGraph> graph = loader.load(path);
    ASSERT_TRUE(graph) << idx;
    EXPECT_FALSE(graph->shares_structure(*base)) << idx;
    Expected<TraceGraph> direct = load_trace(path);
    ASSERT_TRUE(direct);
    expect_same_graph(*graph, *direct);
  }
  EXPECT_EQ(loader.stats().parsed, 1u + variants.size());
  EXPECT_EQ(loader.stats().derived, 0u);
  EXPECT_EQ(loader.stats().templates, 1u);  // the cap
}

TEST(TraceSetLoader, ErrorsAreLoadTracesOwn) {
  TempDir dir;
  test::write_trace(dir.file("w.0.et"), rank_nodes(4, "1"));
  // The same records, the last one cut short.
  std::ifstream in(dir.file("w.0.et"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(dir.file("w.1.et"), std::ios::binary) << bytes.substr(0, bytes.size() - 3);
  // A record whose bytes do not decode as a Node.
  std::string corrupt = bytes;
  corrupt[corrupt.size() - 2] = '\xff';
  corrupt[corrupt.size() - 1] = '\xff';
  std::ofstream(dir.file("w.2.et"), std::ios::binary) << corrupt;
  TraceSetLoader loader;
  ASSERT_TRUE(loader.load(dir.file("w.0.et")));
  for (const char* name : {"w.1.et", "w.2.et", "missing.et"}) {
    Expected<TraceGraph> loaded = loader.load(dir.file(name));
    Expected<TraceGraph> direct = load_trace(dir.file(name));
    ASSERT_FALSE(loaded) << name;
    ASSERT_FALSE(direct) << name;
    EXPECT_EQ(loaded.error().message(), direct.error().message());
  }
}

TEST(TraceSetLoader, ParallelLoadsOfManyRanks) {
  TempDir dir;
  constexpr uint32_t kRanks = 32;
  for (uint32_t rank = 0; rank < kRanks; ++rank) {
    // Two shapes: even ranks have one node more.
    auto nodes = rank_nodes(rank ^ 1, std::to_string(rank / 4));
    if (rank % 2 == 0) nodes.push_back(test::comp_node(4, {3}));
    test::write_trace(dir.file("w." + std::to_string(rank) + ".et"), nodes);
  }
  TraceSetLoader loader;
  std::vector<std::optional<TraceGraph>> graphs(kRanks);
  std::vector<std::thread> threads;
  for (uint32_t worker = 0; worker < 4; ++worker) {
    threads.emplace_back([&, worker] {
      for (uint32_t rank = worker; rank < kRanks; rank += 4) {
        Expected<TraceGraph> graph = loader.load(dir.file("w." + std::to_string(rank) + ".et"));
        if (graph) graphs[rank] = std::move(*graph);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (uint32_t rank = 0; rank < kRanks; ++rank) {
    ASSERT_TRUE(graphs[rank]) << rank;
    Expected<TraceGraph> direct = load_trace(dir.file("w." + std::to_string(rank) + ".et"));
    ASSERT_TRUE(direct);
    expect_same_graph(*graphs[rank], *direct);
    EXPECT_EQ(**graphs[rank]->get_uint(2, "comm_dst"), rank ^ 1);
  }
  const TraceSetLoader::Stats stats = loader.stats();
  EXPECT_EQ(stats.parsed + stats.derived, kRanks);
  EXPECT_GE(stats.parsed, 2u);  // each shape once, more when threads raced to the first of one
  EXPECT_LE(stats.parsed, 8u);
}

std::vector<std::string> messages(const ValidationReport& report) {
  std::vector<std::string> out;
  for (const Diagnostic& diagnostic : report.diagnostics()) out.push_back(diagnostic.message);
  return out;
}

// A rank file built from a clean template is validated by its patched nodes alone; the report is
// the one a whole validation gives, including what only the patched values get wrong.
TEST(TraceSetLoader, DerivedFilesAreValidatedByWhatTheyPatchedWithTheWholeReport) {
  TempDir dir;
  test::write_trace(dir.file("w.0.et"), rank_nodes(4, "1"));
  test::write_trace(dir.file("w.1.et"), rank_nodes(5, "2"));
  // 2^51 bytes: beyond the 2^50 orrery simulates, on the collective and the send.
  test::write_trace(dir.file("w.2.et"), rank_nodes(6, "3", int64_t{1} << 51));
  TraceSetLoader loader;
  Expected<TraceGraph> base = loader.load(dir.file("w.0.et"));
  Expected<TraceGraph> clean = loader.load(dir.file("w.1.et"));
  Expected<TraceGraph> bad = loader.load(dir.file("w.2.et"));
  ASSERT_TRUE(base && clean && bad);
  ASSERT_TRUE(bad->shares_structure(*base));
  const ValidationReport base_report = validate_trace(*base);
  EXPECT_TRUE(base_report.diagnostics().empty());
  EXPECT_TRUE(validate_trace(*clean, *base, base_report).diagnostics().empty());
  const ValidationReport quick = validate_trace(*bad, *base, base_report);
  const ValidationReport whole = validate_trace(*bad);
  ASSERT_EQ(quick.diagnostics().size(), 2u);
  EXPECT_EQ(messages(quick), messages(whole));
  EXPECT_EQ(quick.diagnostics()[0].node_id, 1u);
  EXPECT_EQ(quick.diagnostics()[1].node_id, 2u);
  EXPECT_EQ(quick.count(Check::kOutOfRange), 2u);

  // A template with a finding of its own on a node its derived files share (an out-of-range
  // duration on the compute node, which they do not patch): they are validated whole, so the
  // shared node's finding is theirs too.
  auto long_compute = [](uint64_t peer, const std::string& group) {
    std::vector<ChakraProtoMsg::Node> nodes = rank_nodes(peer, group);
    nodes[0].set_duration_micros(kMaxDurationMicros + 1);
    return nodes;
  };
  test::write_trace(dir.file("v.0.et"), long_compute(4, "1"));
  test::write_trace(dir.file("v.1.et"), long_compute(5, "2"));
  TraceSetLoader second_loader;
  Expected<TraceGraph> flawed = second_loader.load(dir.file("v.0.et"));
  Expected<TraceGraph> heir = second_loader.load(dir.file("v.1.et"));
  ASSERT_TRUE(flawed && heir);
  ASSERT_TRUE(heir->shares_structure(*flawed));
  const ValidationReport flawed_report = validate_trace(*flawed);
  ASSERT_EQ(flawed_report.count(Check::kOutOfRange), 1u);
  const ValidationReport heir_report = validate_trace(*heir, *flawed, flawed_report);
  EXPECT_EQ(heir_report.count(Check::kOutOfRange), 1u);
  EXPECT_EQ(messages(heir_report), messages(validate_trace(*heir)));

  // Through a trace set: every rank's report is its own file's.
  Expected<std::shared_ptr<const TraceSet>> set = TraceSet::load(dir.file("w"));
  ASSERT_TRUE(set);
  ASSERT_EQ((*set)->rank_count(), 3u);
  EXPECT_TRUE((*set)->report((*set)->graph_index(0)).diagnostics().empty());
  EXPECT_TRUE((*set)->report((*set)->graph_index(1)).diagnostics().empty());
  EXPECT_EQ(messages((*set)->report((*set)->graph_index(2))), messages(whole));
}

}  // namespace trace_set_loader_test
}  // namespace orrery::chakra
