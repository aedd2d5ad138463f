// What `orrery run` writes besides its summary: the Perfetto timeline, CSV tables, JSON links.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "chakra/trace_builder.h"
#include "e2e/run_command.h"

namespace orrery {
namespace run_outputs_test {

using test::TempDir;

// A 64-rank training-like step: 50 us of compute, then a 4 MiB all-reduce, on Ring(8) x Switch(8).
void make_64_rank_run(const TempDir& dir) {
  ASSERT_EQ(run_orrery({"gen", "microbench", "--collective", "all-reduce", "--size", "4MiB",
                        "--ranks", "64", "--compute-us", "50", "-o", dir.file("w/step")})
                .exit_code,
            0);
  std::ofstream(dir.file("net.yml")) << "topology: [ Ring, Switch ]\nnpus_count: [ 8, 8 ]\n"
                                        "bandwidth: [ 200, 50 ]\nlatency: [ 500, 1000 ]\n";
  std::ofstream(dir.file("sys.json"))
      << R"({"preferred-dataset-splits": 4, "local-mem-bw": 1600, "collective-optimization": "localBWAware",
             "all-reduce-implementation": ["ring", "ring"], "all-gather-implementation": ["ring", "ring"],
             "reduce-scatter-implementation": ["ring", "ring"], "all-to-all-implementation": ["direct", "direct"]})";
}

TEST(RunOutputs, the_timeline_of_a_64_rank_run_is_valid_and_nests_on_every_track) {
  TempDir dir;
  make_64_rank_run(dir);
  const CommandResult result =
      run_orrery({"run", "-q", "-w", dir.file("w/step"), "-s", dir.file("sys.json"), "-n",
                  dir.file("net.yml"), "--timeline", dir.file("timeline.json")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::ifstream in(dir.file("timeline.json"));
  const nlohmann::json trace = nlohmann::json::parse(in);  // throws, failing the test, if invalid
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> tracks;
  std::map<int, std::string> processes;
  size_t slices = 0;
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] == "M" && event["name"] == "process_name")
      processes[event["pid"]] = event["args"]["name"];
    if (event["ph"] != "X") continue;
    ++slices;
    ASSERT_GE(event["dur"].get<double>(), 0.0);
    tracks[{event["pid"], event["tid"]}].emplace_back(
        event["ts"].get<double>(), event["ts"].get<double>() + event["dur"].get<double>());
  }
  EXPECT_EQ(processes.size(), 64u);
  EXPECT_EQ(processes[17], "rank 17");
  EXPECT_EQ(slices, 64u * 2u) << "one compute and one collective slice per rank";
  for (auto& [track, spans] : tracks) {
    std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) {
      return a.first < b.first || (a.first == b.first && a.second > b.second);
    });
    // Each slice either ends before the next starts or contains it: slices nest.
    std::vector<double> open;
    for (const auto& [start, end] : spans) {
      while (!open.empty() && open.back() <= start + 1e-9) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(end, open.back() + 1e-9) << "rank " << track.first << " track " << track.second;
      }
      open.push_back(end);
    }
  }
}

TEST(RunOutputs, timeline_ranks_bound_the_file) {
  TempDir dir;
  make_64_rank_run(dir);
  ASSERT_EQ(run_orrery({"run", "-q", "-w", dir.file("w/step"), "-s", dir.file("sys.json"), "-n",
                        dir.file("net.yml"), "--timeline", dir.file("t.json"), "--timeline-ranks",
                        "0-3,60"})
                .exit_code,
            0);
  std::ifstream in(dir.file("t.json"));
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::set<int> pids;
  for (const auto& event : trace["traceEvents"]) pids.insert(event["pid"].get<int>());
  EXPECT_EQ(pids, (std::set<int>{0, 1, 2, 3, 60}));
  const CommandResult bad = run_orrery(
      {"run", "-q", "-w", dir.file("w/step"), "-s", dir.file("sys.json"), "-n", dir.file("net.yml"),
       "--timeline", dir.file("t.json"), "--timeline-ranks", "9-2"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("--timeline-ranks: range '9-2' runs backwards"), std::string::npos)
      << bad.err;
  // Without --timeline the ranks would choose nothing: refused, not ignored.
  const CommandResult alone =
      run_orrery({"run", "-q", "-w", dir.file("w/step"), "-s", dir.file("sys.json"), "-n",
                  dir.file("net.yml"), "--timeline-ranks", "0-3"});
  EXPECT_EQ(alone.exit_code, 1);
  EXPECT_NE(alone.err.find("--timeline-ranks requires --timeline"), std::string::npos) << alone.err;
}

TEST(RunOutputs, csv_tables_hold_the_json_fields) {
  TempDir dir;
  make_64_rank_run(dir);
  ASSERT_EQ(
      run_orrery({"run", "-q", "-w", dir.file("w/step"), "-s", dir.file("sys.json"), "-n",
                  dir.file("net.yml"), "--csv-dir", dir.file("csv"), "-o", dir.file("r.json")})
          .exit_code,
      0);
  auto lines = [&](const std::string& file) {
    std::ifstream in(dir.file("csv/" + file));
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  };
  const auto ranks = lines("ranks.csv");
  ASSERT_EQ(ranks.size(), 65u);
  EXPECT_EQ(ranks[0].rfind("rank,finish_ns,exposed_comm_ns,compute_ns,", 0), 0u) << ranks[0];
  std::ifstream in(dir.file("r.json"));
  const nlohmann::json json = nlohmann::json::parse(in);
  EXPECT_EQ(
      ranks[1].rfind("0," + std::to_string(json["ranks"][0]["finish_ns"].get<int64_t>()) + ",", 0),
      0u);
  EXPECT_EQ(lines("links.csv").size(), json["links"].size() + 1);
  EXPECT_EQ(lines("collectives.csv").size(), json["collectives"].size() + 1);
  const auto dims = lines("dimensions.csv");
  ASSERT_EQ(dims.size(), 3u);
  EXPECT_EQ(dims[1].rfind("0,\"Ring\",8,", 0), 0u) << dims[1];
  EXPECT_EQ(dims[2].rfind("1,\"Switch\",8,", 0), 0u) << dims[2];
  // The links array: at least src, dst, bytes and busy_ns for every link.
  for (const auto& link : json["links"]) {
    for (const char* key : {"src", "dst", "bytes", "busy_ns", "utilization"})
      ASSERT_TRUE(link.contains(key)) << key;
  }
}

}  // namespace run_outputs_test
}  // namespace orrery
