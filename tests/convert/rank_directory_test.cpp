// A directory of ranks: files found and paired by content and name, the 8-rank DLRM set of
// facebookresearch/param converted (from ../shared/data when present).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "convert/rank_directory.h"
#include "convert_test_support.h"

namespace orrery::convert {
namespace rank_directory_test {

using test::TempDir;

TEST(RankDirectory, ranks_come_from_file_names) {
  EXPECT_EQ(rank_from_file_name("a/b/dlrm_eg_5.json"), 5u);
  EXPECT_EQ(rank_from_file_name("worker3_step_12.1694128201557.pt.trace.json"), 3u);
  EXPECT_EQ(rank_from_file_name("rank-12.json.gz"), 12u);
  EXPECT_EQ(rank_from_file_name("x/et_rank7_iter2.json"), 7u);
  EXPECT_EQ(rank_from_file_name("trace.json"), std::nullopt);
}

std::string tiny_host(int rank) {
  return R"({"schema": "1.0.1", "pid": )" + std::to_string(100 + rank) + R"(, "nodes": [
    {"id": 2, "name": "[pytorch|profiler|execution_graph|thread]", "parent": 1, "tid": 1},
    {"id": 3, "name": "aten::mm", "parent": 2, "tid": 1, "rf_id": 1}]})";
}

TEST(RankDirectory, finds_hosts_and_kineto_traces_recursively) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("hosts/deep"));
  std::filesystem::create_directories(dir.file("kineto"));
  test::write_file(dir.file("hosts/deep/et_0.json"), tiny_host(0));
  test::write_file(dir.file("hosts/et_1.json"), tiny_host(1));
  // The Kineto file's rank comes from its contents, not its name.
  test::write_file(dir.file("kineto/trace_9.json"),
                   R"({"schemaVersion": 1, "distributedInfo": {"rank": 1}, "traceEvents": []})");
  test::write_file(dir.file("notes.json"), R"({"hello": 1})");
  Expected<DirectoryPlan> plan = plan_rank_directory(dir.file(""));
  ASSERT_TRUE(plan) << plan.error().message();
  ASSERT_EQ(plan->ranks.size(), 2u);
  EXPECT_NE(plan->ranks[0].host.find("et_0.json"), std::string::npos);
  EXPECT_TRUE(plan->ranks[0].device.empty());
  EXPECT_NE(plan->ranks[1].device.find("trace_9.json"), std::string::npos);
  EXPECT_EQ(plan->ranks[1].rank_source, "distributedInfo.rank");
  ASSERT_EQ(plan->ignored.size(), 1u);
  EXPECT_NE(plan->ignored[0].find("notes.json"), std::string::npos);
}

TEST(RankDirectory, gaps_and_repeats_are_errors) {
  TempDir dir;
  test::write_file(dir.file("et_0.json"), tiny_host(0));
  test::write_file(dir.file("et_2.json"), tiny_host(2));
  Expected<DirectoryPlan> gap = plan_rank_directory(dir.file(""));
  ASSERT_FALSE(gap);
  EXPECT_NE(gap.error().message().find("none for rank 1"), std::string::npos)
      << gap.error().message();
  test::write_file(dir.file("et_rank0.json"), tiny_host(0));
  Expected<DirectoryPlan> twice = plan_rank_directory(dir.file(""));
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().message().find("both host traces claim rank 0"), std::string::npos)
      << twice.error().message();
  TempDir empty;
  EXPECT_FALSE(plan_rank_directory(empty.file("")));
}

TEST(RankDirectory, writes_every_rank_and_the_groups_and_warns_of_stale_rank_files) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("in"));
  test::write_file(dir.file("in/et_0.json"), tiny_host(0));
  test::write_file(dir.file("in/et_1.json"), tiny_host(1));
  std::filesystem::create_directories(dir.file("out"));
  test::write_file(dir.file("out/w.2.et"), "left from a 3-rank job");
  Expected<DirectoryReport> report =
      convert_rank_directory(dir.file("in"), dir.file("out/w"), {}, 0);
  ASSERT_TRUE(report) << report.error().message();
  ASSERT_EQ(report->outputs.size(), 2u);
  EXPECT_TRUE(std::filesystem::exists(dir.file("out/w.0.et")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("out/w.1.et")));
  EXPECT_EQ(report->comm_group_text, "{\"0\":[0,1]}\n");
  ASSERT_EQ(report->warnings.size(), 1u);
  EXPECT_NE(report->warnings[0].find("w.2.et is left from an earlier conversion; tools reading the "
                                     "prefix take it as rank 2: remove it"),
            std::string::npos)
      << report->warnings[0];
  const std::string summary = format_directory_report(*report, 3);
  EXPECT_NE(summary.find("2 ranks: 0 with a Kineto trace, 2 from the host trace alone"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("warning: "), std::string::npos) << summary;

  // Two stale ranks (one gzip), as `orrery run` would read them: both named in one warning.
  test::write_file(dir.file("out/w.3.et.gz"), "left from a 4-rank job");
  report = convert_rank_directory(dir.file("in"), dir.file("out/w"), {}, 0);
  ASSERT_TRUE(report) << report.error().message();
  ASSERT_EQ(report->warnings.size(), 1u);
  EXPECT_NE(report->warnings[0].find("w.2.et to " + dir.file("out/w.3.et.gz") +
                                     " are left from an earlier conversion; tools reading the "
                                     "prefix take them as ranks 2 to 3: remove them"),
            std::string::npos)
      << report->warnings[0];

  // A fresh prefix: no warning at all.
  report = convert_rank_directory(dir.file("in"), dir.file("fresh/w"), {}, 0);
  ASSERT_TRUE(report) << report.error().message();
  EXPECT_TRUE(report->warnings.empty()) << report->warnings.front();
}

TEST(RankDirectory, dlrm_eight_ranks_convert_with_their_collectives) {
  if (!test::shared_data_present()) GTEST_SKIP() << "no ../shared/data: the DLRM set is there";
  TempDir dir;
  ASSERT_TRUE(test::untar_dlrm_set(dir.file("in")));
  Expected<DirectoryReport> report =
      convert_rank_directory(dir.file("in"), dir.file("out/dlrm"), {}, 0);
  ASSERT_TRUE(report) << report.error().message();
  ASSERT_EQ(report->ranks.size(), 8u);
  EXPECT_TRUE(report->warnings.empty()) << report->warnings.front();
  for (size_t rank = 0; rank < 8; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const ConversionReport& converted = report->ranks[rank];
    EXPECT_EQ(report->plan.ranks[rank].rank_source, "distributedInfo.rank");
    EXPECT_NE(converted.host_path.find("dlrm_eg_" + std::to_string(rank) + ".json"),
              std::string::npos);
    EXPECT_NE(converted.device_path.find("worker" + std::to_string(rank) + "_step_12"),
              std::string::npos);
    EXPECT_EQ(converted.kineto_rank, static_cast<int64_t>(rank));
    EXPECT_EQ(converted.host_ops_linked, converted.host_ops_linkable);
    // Kernels of the step before the profile began have no runtime call in it: they are named.
    uint64_t unlaunched = 0;
    for (const ConversionNote& note : converted.notes) {
      if (note.what.find("GPU events") != std::string::npos) {
        EXPECT_NE(note.what.find("no runtime call"), std::string::npos) << note.what;
        unlaunched += note.count;
      }
    }
    EXPECT_EQ(converted.gpu_events_linked + unlaunched, converted.gpu_events);
    EXPECT_GT(converted.gpu_events_linked, 200u);
    std::map<int32_t, size_t> by_type;
    for (const CommRecord& comm : converted.comms) ++by_type[comm.comm_type];
    EXPECT_EQ(by_type[ChakraProtoMsg::ALL_TO_ALL], 5u);
    EXPECT_EQ(by_type[ChakraProtoMsg::ALL_REDUCE], 3u);
    EXPECT_GT(converted.kernels, 200u);
    size_t nodes = 0;
    const chakra::ValidationReport checks = test::validate_file(report->outputs[rank], &nodes);
    EXPECT_TRUE(checks.diagnostics().empty()) << test::findings(checks);
    EXPECT_EQ(nodes, converted.output_nodes);
  }
  // The same collectives, in the same order and sizes, on every rank: the tensors of each nccl op,
  // num_elem x elem_bytes (the first all-to-all moves 6,144 floats, the embeddings' 8 x 768).
  const std::vector<std::pair<int32_t, uint64_t>> expected = {
      {ChakraProtoMsg::ALL_TO_ALL, 6144 * 4}, {ChakraProtoMsg::ALL_TO_ALL, 24 * 8},
      {ChakraProtoMsg::ALL_TO_ALL, 1536},     {ChakraProtoMsg::ALL_TO_ALL, 13568},
      {ChakraProtoMsg::ALL_REDUCE, 1576964},  {ChakraProtoMsg::ALL_TO_ALL, 6144 * 4},
      {ChakraProtoMsg::ALL_REDUCE, 448},      {ChakraProtoMsg::ALL_REDUCE, 907840}};
  for (size_t rank = 0; rank < 8; ++rank) {
    std::vector<std::pair<int32_t, uint64_t>> comms;
    for (const CommRecord& comm : report->ranks[rank].comms) {
      EXPECT_EQ(comm.node_type, ChakraProtoMsg::COMM_COLL_NODE);
      comms.emplace_back(comm.comm_type, comm.bytes);
    }
    EXPECT_EQ(comms, expected) << "rank " << rank;
  }
  std::ifstream in(report->comm_group_path);
  const nlohmann::json groups = nlohmann::json::parse(in);
  EXPECT_EQ(groups, nlohmann::json::parse(R"({"0": [0, 1, 2, 3, 4, 5, 6, 7]})"));
}

// Ranks convert in parallel; the files are the same bytes on one thread as on many.
TEST(RankDirectory, outputs_do_not_depend_on_the_thread_count) {
  if (!test::shared_data_present()) GTEST_SKIP() << "no ../shared/data: the DLRM set is there";
  TempDir dir;
  ASSERT_TRUE(test::untar_dlrm_set(dir.file("in")));
  Expected<DirectoryReport> one = convert_rank_directory(dir.file("in"), dir.file("one/d"), {}, 1);
  Expected<DirectoryReport> four =
      convert_rank_directory(dir.file("in"), dir.file("four/d"), {}, 4);
  ASSERT_TRUE(one) << one.error().message();
  ASSERT_TRUE(four) << four.error().message();
  ASSERT_EQ(one->outputs.size(), 8u);
  for (size_t rank = 0; rank < 8; ++rank) {
    const std::string a = test::read_bytes(one->outputs[rank]);
    EXPECT_GT(a.size(), 10'000u);
    EXPECT_TRUE(a == test::read_bytes(four->outputs[rank])) << "rank " << rank;
  }
  EXPECT_EQ(test::read_bytes(one->comm_group_path), test::read_bytes(four->comm_group_path));
}

TEST(RankDirectory, dlrm_hosts_alone_convert_too) {
  if (!test::shared_data_present()) GTEST_SKIP() << "no ../shared/data: the DLRM set is there";
  TempDir dir;
  ASSERT_TRUE(test::untar(test::param_input("dlrm_pytorch_et.tar.gz"), dir.file("in")));
  Expected<DirectoryReport> report =
      convert_rank_directory(dir.file("in"), dir.file("dlrm"), {}, 0);
  ASSERT_TRUE(report) << report.error().message();
  ASSERT_EQ(report->ranks.size(), 8u);
  EXPECT_EQ(report->plan.ranks[3].rank_source, "file name");
  for (const ConversionReport& converted : report->ranks) {
    EXPECT_EQ(converted.comms.size(), 8u);
    EXPECT_EQ(converted.kernels, 0u);
  }
}

}  // namespace rank_directory_test
}  // namespace orrery::convert
