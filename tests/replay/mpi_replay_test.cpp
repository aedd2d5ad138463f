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

TEST(ReplayMpi, two_processes_replay_ddp_with_real_all_reduces) {
  const std::string mpirun = test::mpirun_path();
  if (mpirun.empty()) GTEST_SKIP() << "no mpirun on this machine: the two-process replay needs it";
  test::TempDir dir;
  test::ranks_without_leak_detection();
  const CommandResult run =
      run_program(mpirun, {"--allow-run-as-root", "--oversubscribe", "-np", "2", ORRERY_BINARY,
                           "replay", "--dir", test::test_data("pytorch/recorded/ddp"), "--warmup",
                           "0", "--iterations", "2", "--threads", "1", "--json", "-o",
                           dir.file("ddp.json"), "--emit-chakra", dir.file("out/ddp")});
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  const nlohmann::json job = nlohmann::json::parse(run.out);
  test::expect_ddp_replayed(job, "MPI (Open MPI");
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
