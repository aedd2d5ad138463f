// The results document `orrery run --output` writes (report/run_report.h): streamed as text, it
// must be the text nlohmann's dump(1) gives of the same document, byte for byte, with every value
// where docs/formats/results.md puts it; strings that need escaping and bandwidths that are not
// whole numbers included.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "report/run_report.h"

namespace orrery::report {
namespace run_report_test {

using json = nlohmann::ordered_json;

sim::RunResult two_rank_result() {
  sim::RunResult result;
  result.ranks = 2;
  result.backend = "analytical";
  result.mode = "classes";
  result.simulated_ranks = 1;
  result.fast_path_note = "";
  result.collective_group_names = {"", "tp \"0\"\\1\n"};
  for (uint32_t rank = 0; rank < 2; ++rank) {
    workload::RankResult row;
    row.rank = rank;
    row.finished = true;
    row.finish = SimTime::from_ps(1'000'000 * (rank + 1) + 999);
    row.gpu_compute = SimTime::from_ps(400'000);
    row.comm_active = SimTime::from_ps(500'000);
    row.comm_exposed = SimTime::from_ps(300'000);
    row.busy = SimTime::from_ps(700'000);
    row.nodes = 12;
    row.collectives = 3;
    result.rank_results.push_back(row);
  }
  result.peak_memory = {1ULL << 40, 7};
  result.end = SimTime::from_ps(2'000'999);
  sys::CollectiveRecord record;
  record.group = 1;
  record.bytes = 1 << 20;
  record.ranks = 2;
  record.sequence = 4;
  record.first_issue = SimTime::from_ps(10'000);
  record.last_finish = SimTime::from_ps(610'000);
  result.collectives.push_back(record);
  record.group = 0;
  record.last_finish = record.first_issue;  // zero duration: bandwidth 0
  result.collectives.push_back(record);
  net::LinkStats link;
  link.src = 0;
  link.dst = 1;
  link.bytes = 1 << 20;
  link.busy = SimTime::from_ps(333'333);
  link.messages = 4;
  link.peak_queue = 2;
  result.links.push_back(link);
  sim::DimensionSummary dim;
  dim.topology = "Ring";
  dim.size = 2;
  dim.bandwidth_gbps = 50;
  dim.links = 2;
  dim.links_used = 1;
  dim.bytes = 1 << 20;
  dim.busy = SimTime::from_ps(500'000);
  result.dimensions.push_back(dim);
  result.workload = "w\u00e9";
  result.network = "n.yml";
  result.events = 1234;
  return result;
}

TEST(RunReport, streamed_text_is_nlohmanns_dump_of_the_same_document) {
  const std::string text = run_result_json_text(two_rank_result(), 0.125);
  const json doc = json::parse(text);
  EXPECT_EQ(text, doc.dump(1) + "\n");
  EXPECT_EQ(doc["format"], kResultFormat);
  EXPECT_EQ(doc["workload"], "w\u00e9");
  EXPECT_EQ(doc["simulation"]["mode"], "classes");
  EXPECT_EQ(doc["summary"]["simulated_ns"], 2000);  // 2,000,999 ps truncated
  EXPECT_EQ(doc["summary"]["slowest_rank"], 1);
  EXPECT_EQ(doc["summary"]["events"], 1234);
  EXPECT_EQ(doc["summary"]["wall_seconds"], 0.125);
  ASSERT_EQ(doc["ranks"].size(), 2u);
  EXPECT_EQ(doc["ranks"][1]["finish_ns"], 2000);
  EXPECT_EQ(doc["ranks"][0]["peak_memory_bytes"], 1ULL << 40);
  EXPECT_EQ(doc["ranks"][1]["idle_ns"], 2000 - 700);
  ASSERT_EQ(doc["collectives"].size(), 2u);
  EXPECT_EQ(doc["collectives"][0]["group"], "tp \"0\"\\1\n");
  EXPECT_EQ(doc["collectives"][0]["duration_ns"], 600);
  // 1 MiB in 600 ns, in GB/s; an all-reduce over 2 ranks moves 2 (n - 1) / n of it on the bus.
  EXPECT_DOUBLE_EQ(doc["collectives"][0]["algbw_gbps"].get<double>(), 1048576.0 / 600e-9 / 1e9);
  EXPECT_DOUBLE_EQ(doc["collectives"][0]["busbw_gbps"].get<double>(), 1048576.0 / 600e-9 / 1e9);
  EXPECT_EQ(doc["collectives"][1]["algbw_gbps"], 0.0);
  EXPECT_DOUBLE_EQ(doc["links"][0]["utilization"].get<double>(), 333'333.0 / 2'000'999.0);
  EXPECT_EQ(doc["dimensions"][0]["topology"], "Ring");
  EXPECT_EQ(doc["dimensions"][0]["bandwidth_gbps"], 50.0);
  EXPECT_EQ(run_result_to_json(two_rank_result(), 0.125), doc);
}

TEST(RunReport, an_empty_result_has_empty_lists) {
  sim::RunResult result;
  const std::string text = run_result_json_text(result, 0.0);
  EXPECT_EQ(text, json::parse(text).dump(1) + "\n");
  EXPECT_NE(text.find("\"ranks\": []"), std::string::npos) << text;
  EXPECT_NE(text.find("\"links\": []"), std::string::npos) << text;
}

}  // namespace run_report_test
}  // namespace orrery::report
