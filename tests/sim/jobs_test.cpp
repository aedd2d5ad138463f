// Several jobs on one network (sim/jobs.h): jobs on disjoint halves of a Clos run as they do alone;
// jobs whose rings share the leaf uplinks slow each other by what max-min sharing predicts (each
// gets half of every shared uplink); a later start does not overlap; bad files are refused with
// file, line and job.
#include <gtest/gtest.h>

#include <fstream>

#include "sim/jobs.h"
#include "sim/sim_test_support.h"

namespace orrery::sim {
namespace jobs_test {

using test::TempDir;

constexpr int64_t kBytes = 8 << 20;

// 16 NPUs, 4 per leaf, one spine; NPU cables at 100 GB/s, leaf-spine at `uplink` GB/s, 100 ns per
// hop; one logical Switch dimension.
std::string clos(const std::string& uplink) {
  std::string text =
      "name: clos16\nnpus: 16\nswitches: [leaf0, leaf1, leaf2, leaf3, spine]\n"
      "logical: [[Switch, 16]]\nlinks:\n";
  for (int npu = 0; npu < 16; ++npu)
    text += fmt::format("  - [npu{}, leaf{}, 100, 100]\n", npu, npu / 4);
  for (int leaf = 0; leaf < 4; ++leaf)
    text += fmt::format("  - [leaf{}, spine, {}, 100]\n", leaf, uplink);
  return text;
}

// A folder with the network, a system file and an 8-rank ring all-reduce trace set `w`.
void write_inputs(const TempDir& dir, const std::string& uplink = "25") {
  std::ofstream(dir.file("net.yml")) << clos(uplink);
  std::ofstream(dir.file("sys.json"))
      << test::system_json("ring", 1, /*splits=*/1, /*active=*/1, /*endpoint_delay=*/0);
  for (int rank = 0; rank < 8; ++rank) {
    test::write_trace(dir.file(fmt::format("w.{}.et", rank)),
                      {test::coll_node(1, ChakraProtoMsg::ALL_REDUCE, kBytes)});
  }
}

std::string job(const std::string& name, const std::string& placement, uint64_t start_ns = 0) {
  return fmt::format(
      "  - name: {}\n    workload: w\n    system: sys.json\n    placement: \"{}\"\n"
      "    start_ns: {}\n",
      name, placement, start_ns);
}

Expected<JobsResult> run(const TempDir& dir, const std::string& jobs,
                         const std::string& net = "net.yml") {
  std::ofstream(dir.file("jobs.yml")) << "network: " << net << "\nbackend: flow\njobs:\n" << jobs;
  RunSettings settings;
  settings.backend_options.rounding = net::TimeRounding::kExact;
  Expected<Jobs> loaded = load_jobs(dir.file("jobs.yml"), settings);
  if (!loaded) return loaded.error();
  return run_jobs(*loaded);
}

JobsResult run_ok(const TempDir& dir, const std::string& jobs, const std::string& net = "net.yml") {
  Expected<JobsResult> result = run(dir, jobs, net);
  EXPECT_TRUE(result) << result.error().message();
  return result ? std::move(*result) : JobsResult{};
}

TEST(Jobs, two_jobs_on_disjoint_halves_of_a_clos_run_as_they_do_alone) {
  TempDir dir;
  write_inputs(dir);
  const JobsResult result = run_ok(dir, job("a", "0-7") + job("b", "8-15"));
  ASSERT_EQ(result.jobs.size(), 2u);
  for (const JobResult& job : result.jobs) {
    EXPECT_EQ(job.iteration, job.alone) << job.name;
    EXPECT_EQ(job.slowdown, 1.0);
    EXPECT_GT(job.iteration.ps(), 0);
  }
  EXPECT_EQ(result.jobs[0].iteration, result.jobs[1].iteration);  // mirror images
  for (const JobLink& link : result.links) EXPECT_EQ(link.jobs.size(), 1u) << link.src << link.dst;
}

TEST(Jobs, rings_sharing_the_leaf_uplinks_get_half_of_each_as_max_min_sharing_predicts) {
  TempDir dir;
  write_inputs(dir);
  // Two NPUs of each leaf per job: every ring step sends one message of each job up every leaf
  // uplink and down every downlink, and 25 GB/s uplinks are the bottleneck (NPU cables: 100).
  const JobsResult shared =
      run_ok(dir, job("a", "0,1,4,5,8,9,12,13") + job("b", "2,3,6,7,10,11,14,15"));
  ASSERT_EQ(shared.jobs.size(), 2u);
  const JobResult& a = shared.jobs[0];
  EXPECT_GT(a.slowdown, 1.5);
  // Max-min gives each of two flows on a 25 GB/s uplink 12.5 GB/s: the job alone with 12.5 GB/s
  // uplinks, up to the picosecond rounding of each message's finish.
  TempDir half;
  write_inputs(half, "12.5");
  const JobsResult predicted = run_ok(half, job("a", "0,1,4,5,8,9,12,13"));
  EXPECT_NEAR(static_cast<double>(a.iteration.ps()),
              static_cast<double>(predicted.jobs[0].iteration.ps()), 100.0);
  EXPECT_EQ(shared.jobs[1].iteration, a.iteration);
  std::printf("jobs: alone %.3f us, shared %.3f us (%.4fx), predicted by max-min %.3f us\n",
              a.alone.seconds() * 1e6, a.iteration.seconds() * 1e6, a.slowdown,
              predicted.jobs[0].iteration.seconds() * 1e6);
  // The uplinks and downlinks carry both jobs, the same bytes each.
  size_t both = 0;
  for (const JobLink& link : shared.links) {
    const bool spine = link.src == "spine" || link.dst == "spine";
    EXPECT_EQ(link.jobs.size(), spine ? 2u : 1u) << link.src << "->" << link.dst;
    if (link.jobs.size() == 2) {
      ++both;
      EXPECT_EQ(link.bytes_by_job[0], link.bytes_by_job[1]);
      EXPECT_EQ(link.bytes_by_job[0] + link.bytes_by_job[1], link.stats.bytes);
    }
  }
  EXPECT_EQ(both, 8u);  // four leaves, up and down
}

TEST(Jobs, a_job_that_starts_after_the_other_ends_is_not_slowed) {
  TempDir dir;
  write_inputs(dir);
  const JobsResult result =
      run_ok(dir, job("a", "0,1,4,5,8,9,12,13") + job("b", "2,3,6,7,10,11,14,15", 50'000'000));
  ASSERT_EQ(result.jobs.size(), 2u);
  EXPECT_EQ(result.jobs[0].iteration, result.jobs[0].alone);
  EXPECT_EQ(result.jobs[1].iteration, result.jobs[1].alone);
  EXPECT_EQ(result.jobs[1].start, SimTime::from_us(50'000));
  EXPECT_EQ(result.end, SimTime::from_us(50'000) + result.jobs[1].iteration);
}

TEST(Jobs, bad_jobs_files_name_file_line_and_job) {
  TempDir dir;
  write_inputs(dir);
  std::ofstream(dir.file("astra.yml")) << test::network_yaml("Ring", "16", "50", "500");
  const std::pair<std::string, std::string> cases[] = {
      {job("a", "0-7") + job("b", "7-14"), "jobs.yml:9: job b: NPU 7 is already job a's"},
      {job("a", "0-16"), "jobs.yml:4: job a: NPU 16 is beyond the network's 16 NPUs"},
      {job("a", "0-3"), "job a: w.4.et"},  // fewer ranks than trace files is a warning; more is not
      {job("a", "0-7") + job("a", "8-15"), "jobs.yml:9: job 'a' is named twice (first on line 4)"},
      {"  - name: a\n    workload: w\n    system: sys.json\n    place: \"0-7\"\n",
       "jobs.yml:7: job: unknown key 'place'"},
      {"  - name: a\n    workload: w\n    system: sys.json\n",
       "jobs.yml:4: job: key 'placement' is missing"},
  };
  for (const auto& [text, message] : cases) {
    Expected<JobsResult> result = run(dir, text);
    if (message == "job a: w.4.et") {
      // Four ranks of an eight-file trace set run (a warning names the unused files).
      EXPECT_TRUE(result) << result.error().message();
      continue;
    }
    ASSERT_FALSE(result) << text;
    EXPECT_NE(result.error().message().find(message), std::string::npos)
        << result.error().message();
  }
  Expected<JobsResult> astra = run(dir, job("a", "0-7"), "astra.yml");
  ASSERT_FALSE(astra);
  EXPECT_NE(astra.error().message().find("is an ASTRA-sim network"), std::string::npos)
      << astra.error().message();
}

}  // namespace jobs_test
}  // namespace orrery::sim
