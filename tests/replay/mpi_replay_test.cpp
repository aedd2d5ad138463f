// Two processes under mpirun replay the two-rank DDP trace with real all-reduces (MPI). Skipped,
// visibly, where mpirun is not installed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "e2e/run_command.h"
#include "replay_test_support.h"

namespace orrery {
namespace mpi_replay_test {

std::string mpirun_path() {
  for (const char* candidate : {"/usr/bin/mpirun", "/usr/local/bin/mpirun"}) {
    if (std::filesystem::exists(candidate)) return candidate;
  }
  return "";
}

TEST(ReplayMpi, two_processes_replay_ddp_with_real_all_reduces) {
  const std::string mpirun = mpirun_path();
  if (mpirun.empty()) GTEST_SKIP() << "no mpirun on this machine: the two-process replay needs it";
  test::TempDir dir;
  // Under ASan, Open MPI's own allocations (its reduction ops, components it unloads at exit, so
  // their frames do not symbolize) are reported as leaks when the ranks exit: the replay
  // processes (not this test) run without leak detection. mpirun passes the variable on.
  if (const char* asan = std::getenv("ASAN_OPTIONS"); asan != nullptr)
    setenv("ASAN_OPTIONS", (std::string(asan) + ":detect_leaks=0").c_str(), 1);
  const CommandResult run =
      run_program(mpirun, {"--allow-run-as-root", "--oversubscribe", "-np", "2", ORRERY_BINARY,
                           "replay", "--dir", test::test_data("pytorch/recorded/ddp"), "--warmup",
                           "0", "--iterations", "2", "--threads", "1", "--json", "-o",
                           dir.file("ddp.json"), "--emit-chakra", dir.file("out/ddp")});
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  const nlohmann::json job = nlohmann::json::parse(run.out);
  EXPECT_EQ(job.at("world"), 2);
  EXPECT_NE(job.at("communicator").get<std::string>().find("MPI (Open MPI"), std::string::npos);
  ASSERT_EQ(job.at("ranks").size(), 2u);
  for (const nlohmann::json& rank : job.at("ranks")) {
    EXPECT_EQ(rank.at("coverage_by_count"), 1.0) << rank.dump();
    EXPECT_EQ(rank.at("coverage_by_time"), 1.0);
    EXPECT_EQ(rank.at("communication_ops"), 2);
    std::vector<uint64_t> bytes;
    for (const nlohmann::json& op : rank.at("operators")) {
      if (op.at("kind") != "communication") continue;
      EXPECT_TRUE(op.at("replayed").get<bool>());
      EXPECT_GT(op.at("measured_us").get<double>(), 0.0);
      bytes.push_back(op.at("bytes").get<uint64_t>());
    }
    EXPECT_EQ(bytes, (std::vector<uint64_t>{267'786 * 4, 131'584 * 4}));
  }
  EXPECT_EQ(nlohmann::json::parse(read_whole_file(dir.file("ddp.json"))), job);
  // The emitted traces carry each all-reduce's measured time once, on its communication node; the
  // host op that issued it takes none (it would otherwise count as compute too).
  for (int rank = 0; rank < 2; ++rank) {
    const std::string et = dir.file("out/ddp." + std::to_string(rank) + ".et");
    const std::string json = dir.file("ddp." + std::to_string(rank) + ".json");
    ASSERT_EQ(run_program(ORRERY_BINARY, {"trace", "to-json", et, "-o", json}).exit_code, 0);
    const nlohmann::json trace = nlohmann::json::parse(read_whole_file(json));
    size_t colls = 0;
    size_t issuers = 0;
    const auto micros = [](const nlohmann::json& node) -> uint64_t {  // JSON writes uint64 as text
      if (!node.contains("duration_micros")) return 0;
      const nlohmann::json& value = node.at("duration_micros");
      return value.is_string() ? std::stoull(value.get<std::string>()) : value.get<uint64_t>();
    };
    for (const nlohmann::json& node : trace.at("nodes")) {
      if (node.value("name", "") != "gloo:all_reduce") continue;
      if (node.at("type") == "COMM_COLL_NODE") {
        ++colls;
        EXPECT_GT(micros(node), 0u) << node.dump();
      } else {
        ++issuers;
        EXPECT_EQ(micros(node), 0u) << node.dump();
      }
    }
    EXPECT_EQ(colls, 2u);
    EXPECT_EQ(issuers, 2u);
    // Where the replay waited for an all-reduce (the first later op on its tensors), the trace
    // makes that op depend on it, so the simulated step waits too.
    for (const nlohmann::json& coll : trace.at("nodes")) {
      if (coll.at("type") != "COMM_COLL_NODE") continue;
      const std::string id = coll.at("id").is_string()
                                 ? coll.at("id").get<std::string>()
                                 : std::to_string(coll.at("id").get<uint64_t>());
      bool waited = false;
      for (const nlohmann::json& node : trace.at("nodes")) {
        if (node.at("type") != "COMP_NODE" || !node.contains("data_deps")) continue;
        for (const nlohmann::json& dep : node.at("data_deps"))
          waited |= (dep.is_string() ? dep.get<std::string>()
                                     : std::to_string(dep.get<uint64_t>())) == id;
      }
      EXPECT_TRUE(waited) << "nothing waits for " << coll.dump();
    }
  }
}

}  // namespace mpi_replay_test
}  // namespace orrery
