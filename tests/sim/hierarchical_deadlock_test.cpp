// A deadlock the soak (bench/soak.cpp) found in the collective engine, kept as a regression test
// for whoever fixes it (docs/fuzzing.md): a localBWAware all-reduce over three dimensions, cut
// into two or more chunks, never finishes when one rank issues it later than the others. The run
// ends in "the run cannot finish", every rank waiting on the all-reduce. It is the same on main
// before issue 17 (not caused by its changes). With one chunk, or two dimensions, or every rank
// issuing at once, or the baseline optimization, or active-chunks-per-dimension 2, it finishes.
//
// The likely cause (src/system/collective_engine.cpp, not changed here: it is being restructured):
// localBWAware plans reduce-scatter on dimensions 0 and 1, all-reduce on 2, then all-gather on 1
// and 0, and every phase of a rank on dimension d waits in that rank's one queue for d, which runs
// active-chunks-per-dimension streams at once. So chunk 1's reduce-scatter and chunk 0's all-gather
// share a queue at equal priority, ordered by when each reached it on that rank; a late rank
// orders them differently from its peers, each peer runs the phase the other has not started, and
// neither finishes. ASTRA-sim puts the all-gather half in other queues of the level
// (QueueLevels::get_next_queue_at_level_last), which a fix would follow (and check against the
// reference timings). Enable the test (drop DISABLED_) with the fix.
#include <gtest/gtest.h>

#include "sim/sim_test_support.h"

namespace orrery {
namespace hierarchical_deadlock_test {

using test::TempDir;

// Eight ranks on a 2 x 2 x 2 ring; rank `late` computes 5 us before its all-reduce of 8 KiB.
Expected<sim::RunResult> late_rank_all_reduce(const TempDir& dir, int splits, uint32_t late,
                                              int active = 1,
                                              const std::string& optimization = "localBWAware") {
  test::write_text(dir.file("sys.json"),
                   test::system_json("ring", 3, splits, active, 10, 1600, optimization));
  test::write_text(dir.file("net.yml"), test::network_yaml("Ring, Ring, Ring", "2, 2, 2",
                                                           "50, 50, 50", "500, 500, 500"));
  for (uint32_t rank = 0; rank < 8; ++rank) {
    ChakraProtoMsg::GlobalMetadata metadata;
    metadata.set_version("0.0.4");
    Expected<chakra::TraceWriter> writer =
        chakra::TraceWriter::create(dir.file("w." + std::to_string(rank) + ".et"), metadata);
    EXPECT_TRUE(writer);
    if (rank == late) {
      ChakraProtoMsg::Node compute = test::make_node(0, ChakraProtoMsg::COMP_NODE);
      compute.set_duration_micros(5);
      EXPECT_TRUE(writer->write(compute));
      EXPECT_TRUE(writer->write(test::coll_node(1, ChakraProtoMsg::ALL_REDUCE, 8192, {0})));
    } else {
      EXPECT_TRUE(writer->write(test::coll_node(1, ChakraProtoMsg::ALL_REDUCE, 8192)));
    }
    EXPECT_TRUE(writer->close());
  }
  sim::RunConfig config;
  config.workload = dir.file("w");
  config.system = dir.file("sys.json");
  config.network = dir.file("net.yml");
  return sim::run_simulation(config, [](const std::string&) {});
}

TEST(HierarchicalAllReduce, one_chunk_finishes_with_a_late_rank) {
  TempDir dir;
  Expected<sim::RunResult> result = late_rank_all_reduce(dir, 1, 4);
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_GE(result->end, SimTime::from_us(5));
}

// The boundaries of the bug: two chunks finish when two of them may run per dimension at once, or
// without the localBWAware plan (every phase in its own dimension's order).
TEST(HierarchicalAllReduce, two_chunks_finish_with_two_active_or_the_baseline_plan) {
  TempDir dir;
  for (const uint32_t late : {0u, 4u, 7u}) {
    Expected<sim::RunResult> active = late_rank_all_reduce(dir, 2, late, 2);
    ASSERT_TRUE(active) << "late rank " << late << ": " << active.error().message();
    EXPECT_GE(active->end, SimTime::from_us(5));
    Expected<sim::RunResult> baseline = late_rank_all_reduce(dir, 2, late, 1, "baseline");
    ASSERT_TRUE(baseline) << "late rank " << late << ": " << baseline.error().message();
    EXPECT_GE(baseline->end, SimTime::from_us(5));
  }
}

TEST(HierarchicalAllReduce, DISABLED_two_chunks_finish_with_a_late_rank) {
  TempDir dir;
  for (const uint32_t late : {0u, 4u, 7u}) {
    Expected<sim::RunResult> result = late_rank_all_reduce(dir, 2, late);
    ASSERT_TRUE(result) << "late rank " << late << ": " << result.error().message();
    EXPECT_GE(result->end, SimTime::from_us(5));
  }
}

}  // namespace hierarchical_deadlock_test
}  // namespace orrery
