// With one chunk, no endpoint delay and no reduction cost, collective times equal the textbook
// closed forms exactly (reference/collectives.md): the system layer adds nothing of its own.
// Message time d(m) = latency + m / bandwidth, bandwidth in 2^30 bytes per second, computed here
// independently in integer picoseconds.
#include <gtest/gtest.h>

#include "sim/sim_test_support.h"

namespace orrery::sim {
namespace closed_form_test {

using gen::MicrobenchKind;
using test::MicroRun;

__extension__ using int128 = __int128;

// Serialization of `bytes` at `gbps` (2^30 B/s units) in ps, rounded half up.
int64_t serialization_ps(uint64_t bytes, uint64_t gbps) {
  const int128 numerator = static_cast<int128>(bytes) * 1000000000000LL;
  const int128 denominator = static_cast<int128>(gbps) << 30;
  return static_cast<int64_t>((numerator + denominator / 2) / denominator);
}

int64_t message_ps(uint64_t bytes, uint64_t gbps, int64_t latency_ns, int64_t hops = 1) {
  return latency_ns * 1000 * hops + serialization_ps(bytes, gbps);
}

// Runs on an exact-picosecond network with no endpoint or reduction cost, one chunk.
int64_t run_ps(MicrobenchKind kind, uint64_t bytes, const std::string& algorithm,
               const std::string& kinds, const std::string& sizes, const std::string& bandwidths,
               const std::string& latencies, uint32_t ranks, uint32_t dims,
               const std::string& optimization = "localBWAware") {
  MicroRun run;
  run.kind = kind;
  run.bytes = bytes;
  run.ranks = ranks;
  run.rounding = net::TimeRounding::kExact;
  run.system = test::system_json(algorithm, dims, /*splits=*/1, /*active=*/1, /*endpoint_delay=*/0,
                                 /*local_mem_bw=*/1e18, optimization);
  run.network = test::network_yaml(kinds, sizes, bandwidths, latencies);
  auto result = test::run_micro(run);
  EXPECT_TRUE(result) << result.error().message();
  if (!result) return -1;
  // Symmetric collectives end together; rooted ones (broadcast, reduce, ...) end with their last
  // rank, which is what the closed form gives.
  const bool symmetric = kind == MicrobenchKind::kAllReduce ||
                         kind == MicrobenchKind::kReduceScatter ||
                         kind == MicrobenchKind::kAllGather || kind == MicrobenchKind::kAllToAll;
  int64_t finish = 0;
  for (const auto& rank : result->rank_results) finish = std::max(finish, rank.finish.ps());
  if (symmetric) {
    for (const auto& rank : result->rank_results) EXPECT_EQ(rank.finish.ps(), finish) << rank.rank;
  }
  return finish;
}

constexpr uint64_t kS = 8 << 20;  // 8 MiB per rank
constexpr uint64_t kB = 50;       // GB/s
constexpr int64_t kLat = 500;     // ns
constexpr int64_t kN = 8;

TEST(ClosedForm, ring_all_reduce_takes_2_n_minus_1_steps_of_s_over_n) {
  EXPECT_EQ(run_ps(MicrobenchKind::kAllReduce, kS, "ring", "Ring", "8", "50", "500", 8, 1),
            2 * (kN - 1) * message_ps(kS / kN, kB, kLat));
}

TEST(ClosedForm, ring_reduce_scatter_takes_n_minus_1_steps_of_s_over_n) {
  EXPECT_EQ(run_ps(MicrobenchKind::kReduceScatter, kS, "ring", "Ring", "8", "50", "500", 8, 1),
            (kN - 1) * message_ps(kS / kN, kB, kLat));
}

TEST(ClosedForm, ring_all_gather_takes_n_minus_1_steps_of_the_per_rank_input) {
  EXPECT_EQ(run_ps(MicrobenchKind::kAllGather, kS, "ring", "Ring", "8", "50", "500", 8, 1),
            (kN - 1) * message_ps(kS, kB, kLat));
}

TEST(ClosedForm, ring_all_to_all_relays_n_times_n_minus_1_over_2_steps) {
  EXPECT_EQ(run_ps(MicrobenchKind::kAllToAll, kS, "ring", "Ring", "8", "50", "500", 8, 1),
            kN * (kN - 1) / 2 * message_ps(kS / kN, kB, kLat));
}

TEST(ClosedForm, direct_all_reduce_is_two_rounds_of_parallel_messages) {
  EXPECT_EQ(
      run_ps(MicrobenchKind::kAllReduce, kS, "direct", "FullyConnected", "8", "50", "500", 8, 1),
      2 * message_ps(kS / kN, kB, kLat));
}

TEST(ClosedForm, direct_reduce_scatter_all_gather_and_all_to_all_are_one_round) {
  EXPECT_EQ(run_ps(MicrobenchKind::kReduceScatter, kS, "direct", "FullyConnected", "8", "50", "500",
                   8, 1),
            message_ps(kS / kN, kB, kLat));
  EXPECT_EQ(
      run_ps(MicrobenchKind::kAllGather, kS, "direct", "FullyConnected", "8", "50", "500", 8, 1),
      message_ps(kS, kB, kLat));
  EXPECT_EQ(
      run_ps(MicrobenchKind::kAllToAll, kS, "direct", "FullyConnected", "8", "50", "500", 8, 1),
      message_ps(kS / kN, kB, kLat));
}

TEST(ClosedForm, halving_doubling_reduce_scatter_halves_the_message_each_step) {
  // log2 8 = 3 steps of S/2, S/4, S/8.
  EXPECT_EQ(
      run_ps(MicrobenchKind::kReduceScatter, kS, "halvingDoubling", "FullyConnected", "8", "50",
             "500", 8, 1),
      message_ps(kS / 2, kB, kLat) + message_ps(kS / 4, kB, kLat) + message_ps(kS / 8, kB, kLat));
}

TEST(ClosedForm, halving_doubling_all_gather_doubles_the_message_each_step) {
  EXPECT_EQ(run_ps(MicrobenchKind::kAllGather, kS, "halvingDoubling", "FullyConnected", "8", "50",
                   "500", 8, 1),
            message_ps(kS, kB, kLat) + message_ps(2 * kS, kB, kLat) + message_ps(4 * kS, kB, kLat));
}

TEST(ClosedForm, halving_doubling_all_reduce_is_reduce_scatter_then_all_gather) {
  const int64_t half =
      message_ps(kS / 2, kB, kLat) + message_ps(kS / 4, kB, kLat) + message_ps(kS / 8, kB, kLat);
  EXPECT_EQ(run_ps(MicrobenchKind::kAllReduce, kS, "halvingDoubling", "FullyConnected", "8", "50",
                   "500", 8, 1),
            2 * half);
}

TEST(ClosedForm, halving_doubling_on_a_ring_pays_the_hops_of_each_distance) {
  // Partners 1, 2 and 4 positions away: 1, 2 and 4 hops on a ring of 8.
  EXPECT_EQ(
      run_ps(MicrobenchKind::kReduceScatter, kS, "halvingDoubling", "Ring", "8", "50", "500", 8, 1),
      message_ps(kS / 2, kB, kLat, 1) + message_ps(kS / 4, kB, kLat, 2) +
          message_ps(kS / 8, kB, kLat, 4));
}

TEST(ClosedForm, hierarchical_all_reduce_local_bw_aware_shrinks_the_data_per_dimension) {
  // Ring(4) x Ring(2): reduce-scatter in dim 0 (3 x S/4), all-reduce in dim 1 on S/4 (2 x S/8),
  // all-gather back in dim 0 (3 x S/4).
  const int64_t dim0 = message_ps(kS / 4, 100, 500);
  const int64_t dim1 = message_ps(kS / 8, 25, 2000);
  EXPECT_EQ(run_ps(MicrobenchKind::kAllReduce, kS, "ring", "Ring, Ring", "4, 2", "100, 25",
                   "500, 2000", 8, 2),
            3 * dim0 + 2 * dim1 + 3 * dim0);
}

TEST(ClosedForm, hierarchical_all_reduce_baseline_reduces_the_whole_buffer_in_every_dimension) {
  // All-reduce in dim 0 (6 x S/4), then in dim 1 on the whole S (2 x S/2).
  EXPECT_EQ(run_ps(MicrobenchKind::kAllReduce, kS, "ring", "Ring, Ring", "4, 2", "100, 25",
                   "500, 2000", 8, 2, "baseline"),
            6 * message_ps(kS / 4, 100, 500) + 2 * message_ps(kS / 2, 25, 2000));
}

TEST(ClosedForm, hierarchical_reduce_scatter_and_all_gather_chain_the_dimensions) {
  EXPECT_EQ(run_ps(MicrobenchKind::kReduceScatter, kS, "ring", "Ring, Ring", "4, 2", "100, 25",
                   "500, 2000", 8, 2),
            3 * message_ps(kS / 4, 100, 500) + 1 * message_ps(kS / 8, 25, 2000));
  // All-gather runs the outer dimension first: S in dim 1, then 2S in dim 0.
  EXPECT_EQ(run_ps(MicrobenchKind::kAllGather, kS, "ring", "Ring, Ring", "4, 2", "100, 25",
                   "500, 2000", 8, 2),
            1 * message_ps(kS, 25, 2000) + 3 * message_ps(2 * kS, 100, 500));
}

TEST(ClosedForm, broadcast_is_a_chain_from_the_first_rank) {
  EXPECT_EQ(
      run_ps(MicrobenchKind::kBroadcast, kS, "ring", "FullyConnected", "8", "50", "500", 8, 1),
      (kN - 1) * message_ps(kS, kB, kLat));
}

TEST(ClosedForm, reduce_is_a_chain_towards_the_first_rank) {
  EXPECT_EQ(run_ps(MicrobenchKind::kReduce, kS, "ring", "FullyConnected", "8", "50", "500", 8, 1),
            (kN - 1) * message_ps(kS, kB, kLat));
}

TEST(ClosedForm, gather_and_scatter_are_one_round_of_direct_messages) {
  EXPECT_EQ(run_ps(MicrobenchKind::kGather, kS, "ring", "FullyConnected", "8", "50", "500", 8, 1),
            message_ps(kS, kB, kLat));
  EXPECT_EQ(run_ps(MicrobenchKind::kScatter, kS, "ring", "FullyConnected", "8", "50", "500", 8, 1),
            message_ps(kS, kB, kLat));
}

TEST(ClosedForm, barrier_takes_log2_n_rounds_of_one_byte) {
  EXPECT_EQ(run_ps(MicrobenchKind::kBarrier, 0, "ring", "FullyConnected", "8", "50", "500", 8, 1),
            3 * message_ps(1, kB, kLat));
}

}  // namespace closed_form_test
}  // namespace orrery::sim
