// The replay's communicators across real processes: every operation over Gloo and over MPI
// (comm_check.cpp, three processes, sub-groups included), the two-rank DDP trace replayed by
// `orrery replay --backend gloo` (which starts its own processes), and its bad-input paths.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <tuple>
#include <vector>

#include <zlib.h>
#include <nlohmann/json.hpp>

#include "e2e/run_command.h"
#include "replay_test_support.h"

namespace orrery {
namespace communicator_test {

// The three check processes exited 0, each saying so over `backend`.
void expect_every_rank_checked(const CommandResult& run, const std::string& backend) {
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(run.out.find(fmt::format("rank {}: every operation as expected ({}", rank, backend)),
              std::string::npos)
        << run.out;
  }
}

TEST(ReplayGloo, three_processes_run_every_operation_with_known_results) {
  test::TempDir dir;
  std::filesystem::create_directories(dir.file("store"));
  std::string script;
  for (int rank = 0; rank < 3; ++rank) {
    // A hang (an operation one rank waits for in vain) fails the test in 2 minutes.
    script += fmt::format("RANK={} WORLD_SIZE=3 timeout 120 '{}' '{}' & p{}=$!\n", rank,
                          COMM_CHECK_BINARY, dir.file("store"), rank);
  }
  script += "status=0\nfor p in $p0 $p1 $p2; do wait $p || status=1; done\nexit $status\n";
  const CommandResult run = run_program("/bin/sh", {"-c", script});
  expect_every_rank_checked(run, "Gloo");
}

TEST(ReplayMpi, three_processes_run_every_operation_with_known_results) {
  const std::string launcher = test::mpirun_path();
  if (launcher.empty()) GTEST_SKIP() << "no mpirun on this machine";
  test::ranks_without_leak_detection();
  const CommandResult run = run_program(
      "timeout",
      {"120", launcher, "--allow-run-as-root", "--oversubscribe", "-np", "3", COMM_CHECK_BINARY});
  expect_every_rank_checked(run, "MPI");
}

TEST(ReplayGloo, backend_gloo_starts_the_ranks_and_replays_ddp_with_real_all_reduces) {
  test::TempDir dir;
  // The launcher's store goes in the temporary directory; this test's own, to see it removed.
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string saved = tmpdir != nullptr ? tmpdir : "";
  setenv("TMPDIR", dir.file("").c_str(), 1);
  const CommandResult run =
      run_orrery({"replay", "--dir", test::test_data("pytorch/recorded/ddp"), "--backend", "gloo",
                  "--warmup", "0", "--iterations", "2", "--threads", "1", "--json"});
  if (tmpdir != nullptr) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  test::expect_ddp_replayed(nlohmann::json::parse(run.out), "Gloo");
  // The store the launcher made is gone.
  for (const auto& entry : std::filesystem::directory_iterator(dir.file("")))
    EXPECT_EQ(entry.path().filename().string().rfind("orrery-gloo-", 0), std::string::npos)
        << entry.path();
}

TEST(ReplayGloo, a_failing_rank_stops_the_others_and_names_itself) {
  test::TempDir dir;
  const std::string set = dir.file("ddp");
  std::filesystem::create_directories(set);
  const std::string source = test::test_data("pytorch/recorded/ddp");
  for (const auto& entry : std::filesystem::directory_iterator(source))
    std::filesystem::copy_file(entry.path(), set + "/" + entry.path().filename().string());
  // Rank 1's host trace cut short: its head still says what it is, its body does not parse.
  gzFile in = gzopen((source + "/rank1_et.json.gz").c_str(), "rb");
  ASSERT_NE(in, nullptr);
  std::string head(4000, '\0');
  head.resize(static_cast<size_t>(gzread(in, head.data(), static_cast<unsigned>(head.size()))));
  gzclose(in);
  std::filesystem::remove(set + "/rank1_et.json.gz");
  std::ofstream(set + "/rank1_et.json") << head;
  const CommandResult run =
      run_orrery({"replay", "--dir", set, "--backend", "gloo", "--iterations", "1"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("rank 1"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("rank1_et.json"), std::string::npos) << run.err;
}

TEST(ReplayGloo, backend_flags_out_of_place_are_refused_with_the_reason) {
  const std::string ddp = test::test_data("pytorch/recorded/ddp");
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--dir", ddp, "--backend", "mpi"}, "--backend mpi needs an MPI launcher"},
      {{test::recorded_et("mlp_infer"), "--backend", "gloo"}, "--backend gloo replays every rank"},
      {{"--dir", ddp, "--backend", "gloo", "--rank", "1"}, "--backend gloo replays every rank"},
      {{"--dir", ddp, "--backend", "gloo", "--store", "/tmp"}, "--store goes with a launcher"},
      {{"--dir", ddp, "--store", "/tmp"}, "--store goes with --backend gloo"},
      {{"--dir", ddp, "--backend", "tcp"}, "--backend"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args{"replay"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const CommandResult run = run_orrery(args);
    EXPECT_NE(run.exit_code, 0) << fmt::format("{}", fmt::join(c.args, " "));
    EXPECT_NE(run.err.find(c.says), std::string::npos) << run.err;
  }
}

TEST(ReplayGloo, under_a_launcher_each_process_joins_through_the_store) {
  // As torchrun starts them: RANK and WORLD_SIZE set, one shared directory, the host's own name.
  test::TempDir dir;
  std::filesystem::create_directories(dir.file("store"));
  std::string script = "unset ORRERY_GLOO_HOST\n";
  for (int rank = 0; rank < 2; ++rank) {
    script += fmt::format(
        "RANK={} WORLD_SIZE=2 timeout 120 '{}' replay --dir '{}' --backend gloo --store '{}' "
        "--warmup 0 --iterations 2 --threads 1 --json >'{}' & p{}=$!\n",
        rank, ORRERY_BINARY, test::test_data("pytorch/recorded/ddp"), dir.file("store"),
        dir.file(fmt::format("rank{}.json", rank)), rank);
  }
  script += "status=0\nfor p in $p0 $p1; do wait $p || status=1; done\nexit $status\n";
  const CommandResult run = run_program("/bin/sh", {"-c", script});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  test::expect_ddp_replayed(nlohmann::json::parse(read_whole_file(dir.file("rank0.json"))), "Gloo");
  EXPECT_EQ(read_whole_file(dir.file("rank1.json")), "");  // rank 0 reports for the job
}

// `orrery replay --backend gloo` of the DDP trace set as if a launcher had set RANK and
// WORLD_SIZE.
CommandResult gloo_under_launcher(const char* rank, const char* world) {
  setenv("RANK", rank, 1);
  setenv("WORLD_SIZE", world, 1);
  const CommandResult run =
      run_orrery({"replay", "--dir", test::test_data("pytorch/recorded/ddp"), "--backend", "gloo"});
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  return run;
}

TEST(ReplayGloo, a_launcher_rank_or_world_that_is_not_a_number_is_refused) {
  for (const auto& [rank, world, message] :
       {std::tuple{"first", "2", "RANK='first' in the environment is not a rank"},
        std::tuple{"", "2", "RANK='' in the environment is not a rank"},
        std::tuple{"0", "two", "WORLD_SIZE='two' in the environment is not a rank"},
        std::tuple{"0", "2x", "WORLD_SIZE='2x' in the environment is not a rank"}}) {
    const CommandResult run = gloo_under_launcher(rank, world);
    EXPECT_NE(run.exit_code, 0) << rank << " " << world;
    EXPECT_NE(run.err.find(message), std::string::npos) << run.err;
  }
}

TEST(ReplayGloo, under_a_launcher_the_store_is_required) {
  const CommandResult run = gloo_under_launcher("0", "2");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("(RANK=0, WORLD_SIZE=2) needs --store DIR"), std::string::npos) << run.err;
}

}  // namespace communicator_test
}  // namespace orrery
