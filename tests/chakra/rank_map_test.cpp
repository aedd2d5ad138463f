// Class trace sets (chakra/rank_map.h): a rank map and its class files read as the rank files they
// stand for, and every malformed map is refused with one message naming the file and the rank.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chakra/rank_map.h"
#include "chakra/trace_builder.h"
#include "chakra/trace_set.h"
#include "chakra/validation.h"

namespace orrery::chakra {
namespace rank_map_test {

using test::TempDir;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

// A send to `peer` and an all-reduce on group `group`, after a compute node.
std::vector<ChakraProtoMsg::Node> program(int64_t peer, const std::string& group) {
  ChakraProtoMsg::Node send = test::make_node(2, ChakraProtoMsg::COMM_SEND_NODE, {1});
  test::add_attr(send, "is_cpu_op").set_bool_val(false);
  test::add_attr(send, "comm_dst").set_int64_val(peer);
  test::add_attr(send, "comm_tag").set_int64_val(7);
  test::add_attr(send, "comm_size").set_int64_val(4096);
  ChakraProtoMsg::Node reduce = test::coll_node(3, ChakraProtoMsg::ALL_REDUCE, 1 << 20, {1});
  test::add_attr(reduce, "pg_name").set_string_val(group);
  return {test::comp_node(1), send, reduce};
}

int64_t peer_of(const TraceGraph& graph) { return **graph.get_int(1, "comm_dst"); }
std::string group_of(const TraceGraph& graph) {
  return std::string(**graph.get_string(2, "pg_name"));
}

const char* kHeader = R"("format": "orrery rank map", "version": 1, "classes": ["w.class.0.et"])";

std::string map_text(const std::string& ranks) {
  return std::string("{") + kHeader + ", \"ranks\": [" + ranks + "]}";
}

TEST(RankMap, written_and_read_back) {
  TempDir dir;
  RankMap map;
  map.classes = {"w.class.0.et", "w.class.1.et.gz"};
  map.ranks.resize(4);
  map.ranks[1].rename.peers = {{0, 1}, {2, 3}};
  map.ranks[1].rename.groups = {{"1", "2"}, {"a \"b\"", "c"}};
  map.ranks[2].trace = 1;
  const std::string path = dir.file("w.ranks.json");
  ASSERT_TRUE(write_rank_map(path, map));
  Expected<RankMap> read = read_rank_map(path);
  ASSERT_TRUE(read) << read.error().message();
  EXPECT_EQ(read->classes, map.classes);
  ASSERT_EQ(read->ranks.size(), 4u);
  EXPECT_EQ(read->ranks[1].rename.peers, map.ranks[1].rename.peers);
  EXPECT_EQ(read->ranks[1].rename.groups, map.ranks[1].rename.groups);
  EXPECT_EQ(read->ranks[2].trace, 1u);
  EXPECT_TRUE(read->ranks[0].rename.peers.empty());
}

TEST(RankMap, ranks_run_their_class_trace_renamed) {
  TempDir dir;
  test::write_trace(dir.file("w.class.0.et"), program(1, "5"));
  test::write_text(
      dir.file("w.ranks.json"),
      map_text(R"({"class": 0}, {"class": 0, "peers": [[1, 2]], "groups": [["5", "6"]]},
                               {"class": 0, "peers": [[1, 0]]})"));
  Expected<std::shared_ptr<const TraceSet>> set = TraceSet::load(dir.file("w"));
  ASSERT_TRUE(set) << set.error().message();
  ASSERT_EQ((*set)->rank_count(), 3u);
  EXPECT_EQ(peer_of((*set)->rank_graph(0)), 1);
  EXPECT_EQ(group_of((*set)->rank_graph(0)), "5");
  EXPECT_EQ(peer_of((*set)->rank_graph(1)), 2);
  EXPECT_EQ(group_of((*set)->rank_graph(1)), "6");
  EXPECT_EQ(peer_of((*set)->rank_graph(2)), 0);
  EXPECT_EQ(group_of((*set)->rank_graph(2)), "5");
  // Renamed ranks share the class's tables and hold only the nodes they changed.
  EXPECT_TRUE((*set)->rank_graph(1).shares_structure((*set)->rank_graph(0)));
  EXPECT_EQ((*set)->rank_graph(1).patched_count(), 2u);
  EXPECT_EQ((*set)->rank_graph(2).patched_count(), 1u);
  EXPECT_EQ((*set)->rank_path(2), dir.file("w.class.0.et"));
  EXPECT_TRUE((*set)->report(0).passes(ValidationMode::kStrict));

  TraceSetOptions first_two;
  first_two.max_ranks = 2;
  Expected<std::shared_ptr<const TraceSet>> cut = TraceSet::load(dir.file("w"), first_two);
  ASSERT_TRUE(cut);
  EXPECT_EQ((*cut)->rank_count(), 2u);
  EXPECT_EQ((*cut)->ranks_left_out(), 1u);
}

// A class trace with findings is no shortcut: each renamed rank is validated on its own and
// reports what the class's file would.
TEST(RankMap, ranks_of_a_class_with_findings_are_validated_whole) {
  TempDir dir;
  std::vector<ChakraProtoMsg::Node> nodes = program(1, "5");
  nodes.push_back(test::comp_node(4, {99}));  // a parent no node has
  test::write_trace(dir.file("w.class.0.et"), nodes);
  test::write_text(dir.file("w.ranks.json"),
                   map_text(R"({"class": 0}, {"class": 0, "peers": [[1, 0]]})"));
  Expected<std::shared_ptr<const TraceSet>> set = TraceSet::load(dir.file("w"));
  ASSERT_TRUE(set) << set.error().message();
  const TraceSet& traces = **set;
  ASSERT_NE(traces.graph_index(0), traces.graph_index(1));
  const ValidationReport& renamed = traces.report(traces.graph_index(1));
  EXPECT_FALSE(renamed.passes(ValidationMode::kStrict));
  EXPECT_EQ(renamed.summary_lines(), traces.report(traces.graph_index(0)).summary_lines());
  EXPECT_EQ(renamed.summary_lines(), validate_trace(traces.rank_graph(1)).summary_lines());
}

TEST(RankMap, both_forms_under_one_prefix_are_refused) {
  TempDir dir;
  test::write_trace(dir.file("w.class.0.et"), program(1, "5"));
  test::write_text(dir.file("w.ranks.json"), map_text(R"({"class": 0})"));
  test::write_trace(dir.file("w.0.et"), program(1, "5"));
  Expected<std::shared_ptr<const TraceSet>> set = TraceSet::load(dir.file("w"));
  ASSERT_FALSE(set);
  EXPECT_CONTAINS(set.error().message(), "both rank files");
  EXPECT_CONTAINS(set.error().message(), dir.file("w.ranks.json"));
}

TEST(RankMap, tools_reading_rank_files_point_at_the_map) {
  TempDir dir;
  test::write_text(dir.file("w.ranks.json"), map_text(R"({"class": 0})"));
  Expected<TraceFiles> files = resolve_trace_files(dir.file("w"));
  ASSERT_FALSE(files);
  EXPECT_CONTAINS(files.error().message(), "holds a rank map");
  EXPECT_CONTAINS(files.error().message(), dir.file("w.class.0.et"));
}

TEST(RankMap, malformed_maps_name_the_file_and_rank) {
  TempDir dir;
  test::write_trace(dir.file("w.class.0.et"), program(1, "5"));
  const std::string path = dir.file("w.ranks.json");
  struct Case {
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"[1, 2]", "a rank map is a JSON object"},
      {R"({"format": "other", "version": 1, "classes": ["a"], "ranks": [{"class": 0}]})",
       "key 'format': expected \"orrery rank map\""},
      {R"({"format": "orrery rank map", "version": 2, "classes": ["a"], "ranks": [{"class": 0}]})",
       "key 'version': this orrery reads version 1"},
      {R"({"format": "orrery rank map", "version": 1, "classes": [], "ranks": [{"class": 0}]})",
       "key 'classes': expected a non-empty list"},
      {std::string("{") + kHeader + "}", "key 'ranks': expected a non-empty list"},
      {map_text(R"({"class": 0}, {"class": 1})"),
       "rank 1: 'class' must be an index into 'classes' (0 to 0), found 1"},
      {map_text(R"({"class": 0}, 7)"), "rank 1: expected an object, found 7"},
      {map_text(R"({"class": 0}, {"peers": []})"), "rank 1: missing 'class'"},
      {map_text(R"({"class": 0}, {"class": 0, "peers": [[1, 5]]})"),
       "rank 1: 'peers' renames 1 to 5; peers are ranks, 0 to 1"},
      {map_text(R"({"class": 0}, {"class": 0, "peers": [[1, 0], [1, 1]]})"),
       "rank 1: 'peers' renames 1 twice"},
      {map_text(R"({"class": 0}, {"class": 0, "peers": [[1, "0"]]})"),
       "rank 1: 'peers': expected a [from, to] pair, found [1,\"0\"]"},
      {map_text(R"({"class": 0}, {"class": 0, "groups": [["5", 6]]})"),
       "rank 1: 'groups': expected a [from, to] pair"},
      {map_text(R"({"class": 0}, {"class": 0, "groups": {"5": "6"}})"),
       "rank 1: 'groups' must be a list of [from, to] pairs"},
      {map_text(R"({"class": 0}, {"class": 0, "tag": 1})"), "rank 1: unknown key 'tag'"},
      {"{\"format\": \"orrery rank map\",\n \"version\": 1,\n \"ranks\": [",
       "parse error at line 3"},
  };
  for (const Case& one : cases) {
    SCOPED_TRACE(one.text);
    test::write_text(path, one.text);
    Expected<std::shared_ptr<const TraceSet>> set = TraceSet::load(dir.file("w"));
    ASSERT_FALSE(set);
    EXPECT_CONTAINS(set.error().message(), path);
    EXPECT_CONTAINS(set.error().message(), one.message);
  }
  // A class file that is missing or does not decode is named with its class.
  test::write_text(path, R"({"format": "orrery rank map", "version": 1,
                             "classes": ["w.class.0.et", "gone.et"],
                             "ranks": [{"class": 0}, {"class": 1}]})");
  Expected<std::shared_ptr<const TraceSet>> set = TraceSet::load(dir.file("w"));
  ASSERT_FALSE(set);
  EXPECT_CONTAINS(set.error().message(), path + ": class 1: ");
  EXPECT_CONTAINS(set.error().message(), "gone.et");
}

}  // namespace rank_map_test
}  // namespace orrery::chakra
