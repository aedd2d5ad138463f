// Communicator groups from ASTRA-sim's group files and from the process groups that PyTorch traces
// record, in every form real files carry them; bad input names the file, line and group.
#include "chakra/comm_groups.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>

#include <nlohmann/json.hpp>

#include "chakra/trace_builder.h"

namespace orrery::chakra {
namespace comm_groups_test {

using test::TempDir;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

std::vector<uint32_t> all_ranks(uint32_t count) {
  std::vector<uint32_t> ranks(count);
  std::iota(ranks.begin(), ranks.end(), 0U);
  return ranks;
}

// Writes `text` to a file in `dir` and loads it as a group file for `rank_count` ranks.
Status load_text(const TempDir& dir, const std::string& text, CommGroups& groups) {
  const std::string path = dir.file("groups.json");
  std::ofstream(path) << text;
  return load_comm_group_file(path, groups);
}

std::string load_error(const TempDir& dir, const std::string& text, uint32_t rank_count = 8) {
  CommGroups groups(rank_count);
  Status status = load_text(dir, text, groups);
  EXPECT_FALSE(status) << "loaded: " << text;
  return status ? std::string() : status.error().message();
}

std::string metadata_error(const std::string& text, uint32_t rank_count = 4) {
  CommGroups groups(rank_count);
  Status status = add_groups_from_metadata(text, "trace.0.et: node 3", groups);
  EXPECT_FALSE(status) << "read: " << text;
  return status ? std::string() : status.error().message();
}

// The whole text of a gzip-compressed (or plain) file.
std::string read_gzip(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return {};
  std::string text;
  char buffer[65536];
  int count = 0;
  while ((count = gzread(file, buffer, sizeof(buffer))) > 0) {
    text.append(buffer, static_cast<size_t>(count));
  }
  gzclose(file);
  return text;
}

// inputs.values[0] of the first "## process_group:init ##" node of a PyTorch execution trace.
std::string process_group_init_text(const std::string& path) {
  const nlohmann::json trace = nlohmann::json::parse(read_gzip(path));
  for (const nlohmann::json& node : trace.at("nodes")) {
    if (node.at("name") == "## process_group:init ##") {
      return node.at("inputs").at("values").at(0).get<std::string>();
    }
  }
  return {};
}

// ---- the group table
// ------------------------------------------------------------------------------

TEST(CommGroups, the_whole_job_is_the_empty_name_and_0) {
  CommGroups groups(4);
  EXPECT_EQ(groups.rank_count(), 4u);
  EXPECT_EQ(groups.all().ranks, all_ranks(4));
  ASSERT_NE(groups.find(""), nullptr);
  EXPECT_EQ(groups.find("")->ranks, all_ranks(4));
  ASSERT_NE(groups.find("0"), nullptr);
  EXPECT_EQ(groups.find("0")->ranks, all_ranks(4));
  EXPECT_EQ(groups.find("1"), nullptr);
  EXPECT_TRUE(groups.named().empty());
}

TEST(CommGroups, a_group_named_0_replaces_the_whole_job_for_0_only) {
  CommGroups groups(4);
  ASSERT_TRUE(groups.add("0", {2, 3}, "test"));
  EXPECT_EQ(groups.find("0")->ranks, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(groups.find("")->ranks, all_ranks(4));
}

TEST(CommGroups, add_sorts_ranks_and_replaces_a_group_of_the_same_name) {
  CommGroups groups(8);
  ASSERT_TRUE(groups.add("1", {5, 1, 3}, "test"));
  EXPECT_EQ(groups.find("1")->ranks, (std::vector<uint32_t>{1, 3, 5}));
  EXPECT_EQ(groups.find("1")->name, "1");
  ASSERT_TRUE(groups.add("1", {7}, "test"));
  EXPECT_EQ(groups.find("1")->ranks, (std::vector<uint32_t>{7}));
  EXPECT_EQ(groups.named().size(), 1u);
}

TEST(CommGroups, add_rejects_out_of_range_duplicate_and_empty_lists) {
  CommGroups groups(4);
  Status out_of_range = groups.add("1", {0, 4}, "f.json:2");
  ASSERT_FALSE(out_of_range);
  EXPECT_EQ(out_of_range.error().kind(), ErrorKind::kConfig);
  EXPECT_EQ(out_of_range.error().message(),
            "f.json:2: group '1': rank 4 is out of range (the job has 4 ranks, 0 to 3)");
  Status twice = groups.add("2", {3, 1, 3}, "f.json:3");
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().message(), "f.json:3: group '2': rank 3 is listed twice");
  Status empty = groups.add("3", {}, "f.json:4");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().message(),
            "f.json:4: group '3': empty rank list (expected 1 to 4 ranks)");
  EXPECT_TRUE(groups.named().empty());
}

// ---- group files
// ----------------------------------------------------------------------------------

TEST(CommGroups, reads_the_symbolic_tensor_graph_dp2tp2pp2_groups) {
  CommGroups groups(8);
  Status status = load_comm_group_file(
      test::test_data("symbolic_tensor_graph/dp2tp2pp2/workload.json"), groups);
  ASSERT_TRUE(status) << status.error().message();
  EXPECT_EQ(groups.named().size(), 16u);
  EXPECT_EQ(groups.find("1")->ranks, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(groups.find("4")->ranks, (std::vector<uint32_t>{6, 7}));
  EXPECT_EQ(groups.find("5")->ranks, (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(groups.find("8")->ranks, (std::vector<uint32_t>{5, 7}));
  EXPECT_EQ(groups.find("16")->ranks, (std::vector<uint32_t>{7}));
  EXPECT_EQ(groups.find("0")->ranks, all_ranks(8));
}

TEST(CommGroups, reads_the_symbolic_tensor_graph_fsdp4_groups) {
  CommGroups groups(4);
  Status status =
      load_comm_group_file(test::test_data("symbolic_tensor_graph/fsdp4/workload.json"), groups);
  ASSERT_TRUE(status) << status.error().message();
  EXPECT_EQ(groups.named().size(), 9u);
  EXPECT_EQ(groups.find("1")->ranks, all_ranks(4));
  EXPECT_EQ(groups.find("9")->ranks, (std::vector<uint32_t>{3}));
}

TEST(CommGroups, reads_every_group_file_in_the_shared_data) {
  if (!test::shared_data_present()) GTEST_SKIP() << "no shared data folder";
  const std::string root =
      std::string(ORRERY_SHARED_DATA_DIR) + "/astra-sim+symbolic_tensor_graph/generated/";
  for (const auto& [folder, ranks, count] :
       {std::tuple{"out_dp2tp2pp2", 8U, 16U}, std::tuple{"out_fsdp4", 4U, 9U}}) {
    CommGroups groups(ranks);
    Status status = load_comm_group_file(root + folder + "/workload.json", groups);
    ASSERT_TRUE(status) << folder << ": " << status.error().message();
    EXPECT_EQ(groups.named().size(), count) << folder;
  }
}

TEST(CommGroups, a_real_file_for_a_larger_job_names_the_first_group_out_of_range) {
  const std::string path = test::test_data("symbolic_tensor_graph/dp2tp2pp2/workload.json");
  CommGroups groups(4);
  Status status = load_comm_group_file(path, groups);
  ASSERT_FALSE(status);
  // Groups "1" and "2" fit 4 ranks; "3" holds ranks 4 and 5.
  EXPECT_EQ(status.error().message(),
            path + ":1: group '3': rank 4 is out of range (the job has 4 ranks, 0 to 3)");
}

TEST(CommGroups, file_errors_name_the_line_and_group) {
  TempDir dir;
  const std::string path = dir.file("groups.json");
  EXPECT_EQ(load_error(dir, "{\n  \"1\": [0, 1],\n  \"2\": [2, 9]\n}"),
            path + ":3: group '2': rank 9 is out of range (the job has 8 ranks, 0 to 7)");
  EXPECT_EQ(load_error(dir, "{\n  \"1\": [0, 1],\n  \"2\": [2, 3, 2]\n}"),
            path + ":3: group '2': rank 2 is listed twice");
  EXPECT_EQ(load_error(dir, "{\n  \"1\": [0, 1],\n  \"7\": []\n}"),
            path + ":3: group '7': empty rank list (expected 1 to 8 ranks)");
  EXPECT_EQ(load_error(dir, "{\n  \"1\": [0, -1]\n}"),
            path + ":2: group '1': expected ranks as non-negative integers, found -1");
  EXPECT_EQ(load_error(dir, "{\n  \"1\": [0, \"1\"]\n}"),
            path + ":2: group '1': expected ranks as non-negative integers, found \"1\"");
  EXPECT_EQ(load_error(dir, "{\n  \"1\": [0, 1.5]\n}"),
            path + ":2: group '1': expected ranks as non-negative integers, found 1.5");
  EXPECT_EQ(load_error(dir, "{\n  \"1\": {\"ranks\": [0, 1]}\n}"),
            path + ":2: group '1': expected a list of ranks, found {\"ranks\":[0,1]}");
  EXPECT_EQ(load_error(dir, "{\n  \"1\": 3\n}"),
            path + ":2: group '1': expected a list of ranks, found 3");
  EXPECT_EQ(load_error(dir, "{\n\n  \"dp\": [0, 1]\n}"),
            path +
                ":3: group id \"dp\" is not a non-negative integer (the pg_name that COMM_COLL "
                "nodes carry)");
}

TEST(CommGroups, file_must_be_a_json_object) {
  TempDir dir;
  const std::string path = dir.file("groups.json");
  EXPECT_EQ(load_error(dir, "[[0, 1], [2, 3]]"),
            path +
                ": expected an object of groups ({\"1\": [0, 1], \"2\": [2, 3]}), found "
                "[[0,1],[2,3]]");
  CommGroups groups(8);
  Status broken = load_text(dir, "{\n  \"1\": [0, 1],\n  \"2\": [2, 3\n}", groups);
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error().kind(), ErrorKind::kParse);
  EXPECT_CONTAINS(broken.error().message(), path + ": parse error at line 4");
  Status missing = load_comm_group_file(dir.file("none.json"), groups);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind(), ErrorKind::kIo);
  EXPECT_EQ(missing.error().message(),
            dir.file("none.json") + ": cannot open: No such file or directory");
}

TEST(CommGroups, a_file_that_fails_adds_nothing) {
  TempDir dir;
  CommGroups groups(4);
  ASSERT_TRUE(groups.add("9", {3}, "earlier"));
  Status status = load_text(dir, "{\n\"2\": [0, 1],\n\"1\": [7]\n}", groups);
  ASSERT_FALSE(status);
  EXPECT_CONTAINS(status.error().message(), "groups.json:3: group '1': rank 7 is out of range");
  EXPECT_EQ(groups.find("2"), nullptr);
  EXPECT_EQ(groups.named().size(), 1u);
}

TEST(CommGroups, groups_on_one_line_are_checked_in_numeric_order) {
  TempDir dir;
  EXPECT_CONTAINS(load_error(dir, "{\"10\": [9], \"2\": [8]}", 8),
                  "groups.json:1: group '2': rank 8 is out of range");
}

// ---- METADATA process groups
// ------------------------------------------------------------------------

TEST(CommGroups, metadata_in_python_form_with_an_empty_list_meaning_every_rank) {
  CommGroups groups(4);
  Status status = add_groups_from_metadata(
      "[{'pg_name': '1', 'ranks': [0, 1]}, {'pg_name': '2', 'ranks': []}]", "node 3", groups);
  ASSERT_TRUE(status) << status.error().message();
  EXPECT_EQ(groups.find("1")->ranks, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(groups.find("2")->ranks, all_ranks(4));
}

TEST(CommGroups, metadata_as_pytorch_writes_it_in_the_chakra_repository_trace) {
  if (!test::shared_data_present()) GTEST_SKIP() << "no shared data folder";
  const std::string text = process_group_init_text(std::string(ORRERY_SHARED_DATA_DIR) +
                                                   "/mlcommons+chakra/tests/data/"
                                                   "1.0.2-chakra.0.0.4.json");
  ASSERT_NE(text.find("pg_name"), std::string::npos) << text;
  CommGroups groups(2);
  Status status = add_groups_from_metadata(text, "node 3", groups);
  ASSERT_TRUE(status) << status.error().message();
  ASSERT_EQ(groups.named().size(), 1u);
  EXPECT_EQ(groups.find("0")->ranks, all_ranks(2));
}

TEST(CommGroups, metadata_of_every_param_trace_with_process_groups) {
  if (!test::shared_data_present()) GTEST_SKIP() << "no shared data folder";
  const std::string root =
      std::string(ORRERY_SHARED_DATA_DIR) + "/facebookresearch+param/et_replay/tests/inputs/";
  for (const auto& [path, ranks] : {std::pair{"1.1.0-chakra.0.0.4/resnet_2gpu_et.json.gz", 2U},
                                    std::pair{"resnet_et.json.gz", 1U}}) {
    const std::string text = process_group_init_text(root + path);
    ASSERT_NE(text.find("pg_name"), std::string::npos) << path;
    CommGroups groups(ranks);
    Status status = add_groups_from_metadata(text, path, groups);
    ASSERT_TRUE(status) << path << ": " << status.error().message();
    ASSERT_NE(groups.named().find("0"), groups.named().end()) << path;
    EXPECT_EQ(groups.find("0")->ranks, all_ranks(ranks)) << path;
  }
}

TEST(CommGroups, metadata_as_json_text_inside_a_python_list) {
  // Chakra's converter stores inputs.values as the Python repr of PyTorch's list of JSON strings.
  CommGroups groups(2);
  Status status = add_groups_from_metadata(
      R"(['[{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "ranks": [], "group_size": 2, "group_count": 1}, {"pg_name": "5", "pg_desc": "dp", "backend_config": "cuda:nccl", "ranks": [1], "group_size": 1, "group_count": 2}]'])",
      "node 3", groups);
  ASSERT_TRUE(status) << status.error().message();
  EXPECT_EQ(groups.find("0")->ranks, all_ranks(2));
  EXPECT_EQ(groups.find("5")->ranks, (std::vector<uint32_t>{1}));
}

TEST(CommGroups, metadata_as_a_list_of_lists_of_objects) {
  CommGroups groups(4);
  Status status = add_groups_from_metadata(
      R"([[{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 2, "ranks": [0, 1]}, {"pg_name": "1", "pg_size": 2, "ranks": [2, 3]}]])",
      "node 3", groups);
  ASSERT_TRUE(status) << status.error().message();
  EXPECT_EQ(groups.find("0")->ranks, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(groups.find("1")->ranks, (std::vector<uint32_t>{2, 3}));
}

TEST(CommGroups, metadata_python_literals_true_false_none_tuples_and_escapes) {
  CommGroups groups(4);
  Status status = add_groups_from_metadata(
      "[{'pg_name': '3', 'ranks': (3, 1,), 'is_default': False, 'desc': None, 'ok': True},"
      " {'pg_name': 'it\\'s \"quoted\"', 'ranks': [2,], 'note': 'a\\x41'},]",
      "node 3", groups);
  ASSERT_TRUE(status) << status.error().message();
  EXPECT_EQ(groups.find("3")->ranks, (std::vector<uint32_t>{1, 3}));
  ASSERT_NE(groups.find("it's \"quoted\""), nullptr);
  EXPECT_EQ(groups.find("it's \"quoted\"")->ranks, (std::vector<uint32_t>{2}));
}

TEST(CommGroups, metadata_pg_name_may_be_a_number) {
  CommGroups groups(4);
  ASSERT_TRUE(add_groups_from_metadata("[{\"pg_name\": 7, \"ranks\": [0, 3]}]", "n", groups));
  EXPECT_EQ(groups.find("7")->ranks, (std::vector<uint32_t>{0, 3}));
}

TEST(CommGroups, text_without_process_groups_adds_nothing) {
  CommGroups groups(4);
  for (const char* text : {"", "[]", "[1, 2, 3]", "['cuda:0', 'nccl']", "not a literal at all",
                           "{\"ranks\": [0, 1]}"}) {
    Status status = add_groups_from_metadata(text, "node 1", groups);
    EXPECT_TRUE(status) << text << ": " << status.error().message();
  }
  EXPECT_TRUE(groups.named().empty());
}

TEST(CommGroups, metadata_errors_name_the_node_and_group) {
  EXPECT_EQ(metadata_error("[{'pg_name': '1', 'ranks': [0, 4]}]"),
            "trace.0.et: node 3: group '1': rank 4 is out of range (the job has 4 ranks, 0 to 3)");
  EXPECT_EQ(metadata_error("[{'pg_name': '1', 'ranks': [0, 0]}]"),
            "trace.0.et: node 3: group '1': rank 0 is listed twice");
  EXPECT_EQ(metadata_error("[{'pg_name': '1', 'group_size': 2}]"),
            "trace.0.et: node 3: group '1': no 'ranks' list");
  EXPECT_EQ(metadata_error("[{'pg_name': '1', 'ranks': 'all'}]"),
            "trace.0.et: node 3: group '1': expected a list of ranks, found \"all\"");
  EXPECT_EQ(metadata_error("[{'pg_name': ['x'], 'ranks': [0]}]"),
            "trace.0.et: node 3: process group with pg_name [\"x\"]: expected the name as text");
}

TEST(CommGroups, unreadable_process_group_text_is_an_error) {
  CommGroups groups(4);
  Status truncated =
      add_groups_from_metadata("[{'pg_name': '1', 'ranks': [0, 1]", "trace.0.et: node 3", groups);
  ASSERT_FALSE(truncated);
  EXPECT_EQ(truncated.error().kind(), ErrorKind::kParse);
  EXPECT_CONTAINS(truncated.error().message(),
                  "trace.0.et: node 3: cannot read the process groups in \"[{'pg_name'");
  Status inner = add_groups_from_metadata("['[{\"pg_name\": \"0\", \"ranks\": [}]']",
                                          "trace.0.et: node 3", groups);
  ASSERT_FALSE(inner);
  EXPECT_CONTAINS(inner.error().message(), "trace.0.et: node 3: cannot read the process groups");
  EXPECT_TRUE(groups.named().empty());
  // A list whose second group is bad adds neither.
  EXPECT_FALSE(
      add_groups_from_metadata("[{'pg_name': '1', 'ranks': [0]}, {'pg_name': '2', "
                               "'ranks': [9]}]",
                               "node 3", groups));
  EXPECT_TRUE(groups.named().empty());
}

}  // namespace comm_groups_test
}  // namespace orrery::chakra
