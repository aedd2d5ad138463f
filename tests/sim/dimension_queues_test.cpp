// Queues per network dimension (`--num-queues-per-dim`, sys::EngineOptions::queues_per_dim).
//
// The soak (bench/soak.cpp) found that a localBWAware all-reduce over three dimensions, cut into
// two or more chunks, never finishes when one rank issues it later than the others: with one queue
// per dimension a chunk's all-gather half waits in the queue of the next chunk's reduce-scatter at
// equal priority, ordered by when each reached it on that rank, and a late rank orders them
// differently from its peers (ASTRA-sim's source has the same race with its default of one queue;
// its issue #137). With two queues per dimension the all-gather half has its own queue, as
// ASTRA-sim's QueueLevelHandler gives it the second half of a level's queues, and the run
// finishes. With one queue the run still stops (as ASTRA-sim would), and says why and what to do.
//
// Beyond the race: chunk c takes queue c mod n of its dimension, the second half of the queues
// runs its rings anticlockwise, and each queue runs ceil(active-chunks / n) chunks at once.
#include <gtest/gtest.h>

#include "sim/sim_test_support.h"

namespace orrery {
namespace dimension_queues_test {

using test::TempDir;

// Eight ranks on a 2 x 2 x 2 ring; rank `late` computes 5 us before its all-reduce of 8 KiB.
Expected<sim::RunResult> late_rank_all_reduce(const TempDir& dir, int splits, uint32_t late,
                                              int active = 1,
                                              const std::string& optimization = "localBWAware",
                                              uint32_t queues = 1) {
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
  config.queues_per_dim = queues;
  return sim::run_simulation(config, [](const std::string&) {});
}

TEST(DimensionQueues, one_chunk_finishes_with_a_late_rank) {
  TempDir dir;
  Expected<sim::RunResult> result = late_rank_all_reduce(dir, 1, 4);
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_GE(result->end, SimTime::from_us(5));
}

// The boundaries of the race: two chunks finish when two of them may run per dimension at once,
// or without the localBWAware plan (every phase in its own dimension's order).
TEST(DimensionQueues, two_chunks_finish_with_two_active_or_the_baseline_plan) {
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

TEST(DimensionQueues, two_queues_per_dimension_finish_the_chunks_of_a_late_rank) {
  TempDir dir;
  for (const uint32_t late : {0u, 4u, 7u}) {
    for (const int splits : {2, 3, 8}) {
      Expected<sim::RunResult> result =
          late_rank_all_reduce(dir, splits, late, 1, "localBWAware", 2);
      ASSERT_TRUE(result) << "late rank " << late << ", " << splits
                          << " chunks: " << result.error().message();
      EXPECT_GE(result->end, SimTime::from_us(5));
      EXPECT_EQ(result->collectives.size(), 1u);
    }
  }
}

// One queue keeps ASTRA-sim's behaviour, race included; the run says which collective and why.
TEST(DimensionQueues, one_queue_names_the_race_and_the_flag_that_avoids_it) {
  TempDir dir;
  bool stuck = false;
  for (const uint32_t late : {0u, 4u, 7u}) {
    Expected<sim::RunResult> result = late_rank_all_reduce(dir, 2, late);
    if (result) continue;
    stuck = true;
    EXPECT_EQ(result.error().kind(), ErrorKind::kDeadlock);
    const std::string message = result.error().message();
    EXPECT_NE(message.find("all-reduce #0 of all ranks (8192 bytes in 2 chunks) was issued by "
                           "every member but did not finish"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("--num-queues-per-dim 2"), std::string::npos) << message;
  }
  EXPECT_TRUE(stuck) << "one queue per dimension no longer races: update the docs and this test";
}

// Chunk c waits in queue c mod n, the second half anticlockwise. On a congestion-aware ring two
// chunks in two queues run one each way on links of their own: exactly one chunk of half the
// size alone. In one queue both run clockwise and share every link: slower. The analytical
// backend does not see links, so the queues change nothing there.
TEST(DimensionQueues, two_queues_run_two_chunks_in_opposite_directions) {
  auto run = [](uint64_t bytes, int splits, uint32_t queues, const std::string& backend) {
    gen::MicrobenchSpec micro;
    micro.kind = gen::MicrobenchKind::kAllReduce;
    micro.bytes = bytes;
    micro.ranks = 8;
    Expected<std::shared_ptr<const chakra::TraceSet>> traces = gen::build_microbench(micro);
    EXPECT_TRUE(traces);
    test::RunInputs inputs;
    inputs.traces = *traces;
    inputs.system = test::system_json("ring", 1, splits, 2, 10, 1600, "baseline");
    inputs.network = test::network_yaml("Ring", "8", "50", "500");
    inputs.settings.backend = backend;
    inputs.settings.queues_per_dim = queues;
    Expected<sim::RunResult> result = test::simulate(inputs);
    EXPECT_TRUE(result) << result.error().message();
    return result ? test::common_finish_ns(*result) : int64_t{-1};
  };
  constexpr uint64_t kBytes = 8 << 20;
  const int64_t half_alone = run(kBytes / 2, 1, 1, "congestion-aware");
  const int64_t two_queues = run(kBytes, 2, 2, "congestion-aware");
  const int64_t one_queue = run(kBytes, 2, 1, "congestion-aware");
  EXPECT_EQ(two_queues, half_alone);
  EXPECT_GT(one_queue, two_queues + two_queues / 2);  // the links carry twice the bytes
  EXPECT_EQ(run(kBytes, 2, 2, "analytical"), run(kBytes, 2, 1, "analytical"));
}

// Each queue runs ceil(active / n) chunks: with four chunks, two active and two queues, one
// chunk runs per queue, as with two chunks.
TEST(DimensionQueues, each_queue_runs_its_share_of_the_active_chunks) {
  auto run = [](int splits, int active, uint32_t queues) {
    gen::MicrobenchSpec micro;
    micro.kind = gen::MicrobenchKind::kAllReduce;
    micro.bytes = 8 << 20;
    micro.ranks = 8;
    Expected<std::shared_ptr<const chakra::TraceSet>> traces = gen::build_microbench(micro);
    EXPECT_TRUE(traces);
    test::RunInputs inputs;
    inputs.traces = *traces;
    inputs.system = test::system_json("ring", 1, splits, active, 10, 1600, "baseline");
    inputs.network = test::network_yaml("Ring", "8", "50", "500");
    inputs.settings.queues_per_dim = queues;
    Expected<sim::RunResult> result = test::simulate(inputs);
    EXPECT_TRUE(result) << result.error().message();
    return result ? test::common_finish_ns(*result) : int64_t{-1};
  };
  // Analytical: k chunks at once take as long as one; four chunks two at a time take two rounds.
  EXPECT_EQ(run(4, 2, 2), run(4, 2, 1));
  EXPECT_LT(run(4, 4, 1), run(4, 2, 2));
  EXPECT_EQ(run(4, 4, 1), run(4, 4, 4));
}

TEST(DimensionQueues, a_queue_count_out_of_range_is_refused) {
  TempDir dir;
  Expected<sim::RunResult> zero = late_rank_all_reduce(dir, 2, 0, 1, "localBWAware", 0);
  ASSERT_FALSE(zero);
  EXPECT_NE(zero.error().message().find("queues per dimension must be 1 to 64, not 0"),
            std::string::npos)
      << zero.error().message();
  EXPECT_FALSE(late_rank_all_reduce(dir, 2, 0, 1, "localBWAware", 65));
}

}  // namespace dimension_queues_test
}  // namespace orrery
