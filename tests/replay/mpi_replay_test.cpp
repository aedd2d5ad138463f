// Two processes under mpirun replay the two-rank DDP trace with real all-reduces (MPI). Skipped,
// visibly, where mpirun is not installed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "chakra/trace_file.h"
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
    Expected<chakra::TraceReader> reader =
        chakra::TraceReader::open(dir.file("out/ddp." + std::to_string(rank) + ".et"));
    ASSERT_TRUE(reader) << reader.error().message();
    std::vector<ChakraProtoMsg::Node> nodes;
    for (ChakraProtoMsg::Node node;;) {
      Expected<bool> more = reader->next(node);
      ASSERT_TRUE(more) << more.error().message();
      if (!*more) break;
      nodes.push_back(node);
    }
    size_t colls = 0;
    size_t issuers = 0;
    for (const ChakraProtoMsg::Node& node : nodes) {
      if (node.name() != "gloo:all_reduce") continue;
      if (node.type() == ChakraProtoMsg::COMM_COLL_NODE) {
        ++colls;
        EXPECT_GT(node.duration_micros(), 0u) << node.id();
        // Where the replay waited for it (the first later op on its tensors), an op depends on
        // it, so the simulated step waits too.
        const bool waited = std::any_of(nodes.begin(), nodes.end(), [&](const auto& other) {
          return other.type() == ChakraProtoMsg::COMP_NODE &&
                 std::count(other.data_deps().begin(), other.data_deps().end(), node.id()) > 0;
        });
        EXPECT_TRUE(waited) << "nothing waits for node " << node.id();
      } else {
        ++issuers;
        EXPECT_EQ(node.duration_micros(), 0u) << node.id();
      }
    }
    EXPECT_EQ(colls, 2u);
    EXPECT_EQ(issuers, 2u);
  }
}

}  // namespace mpi_replay_test
}  // namespace orrery
