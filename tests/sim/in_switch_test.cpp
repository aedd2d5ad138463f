// In-network collectives: a Switch dimension whose switch combines the data. Each member's bytes
// go up once and the result comes down once: all-reduce takes d(x) up + d(x) down, where
// d(m) = latency + m / bandwidth is one hop, instead of a ring's 2(n-1) steps.
#include <gtest/gtest.h>

#include "sim/sim_test_support.h"

namespace orrery::sim {
namespace in_switch_test {

using gen::MicrobenchKind;

__extension__ using int128 = __int128;

int64_t hop_ps(uint64_t bytes, uint64_t gbps, int64_t latency_ns) {
  const int128 numerator = static_cast<int128>(bytes) * 1000000000000LL;
  const int128 denominator = static_cast<int128>(gbps) << 30;
  return latency_ns * 1000 + static_cast<int64_t>((numerator + denominator / 2) / denominator);
}

std::string in_switch_system(int splits, int endpoint_delay,
                             const std::string& optimization = "baseline",
                             const std::string& dim0 = "inSwitch", const std::string& dim1 = "") {
  const std::string list =
      dim1.empty() ? "[\"" + dim0 + "\"]" : "[\"" + dim0 + "\", \"" + dim1 + "\"]";
  const std::string a2a = dim1.empty() ? "[\"direct\"]" : "[\"direct\", \"direct\"]";
  return fmt::format(
      "{{\"preferred-dataset-splits\": {}, \"endpoint-delay\": {}, \"local-mem-bw\": 1e18,\n"
      " \"collective-optimization\": \"{}\", \"all-reduce-implementation\": {}, "
      "\"reduce-scatter-implementation\": {},\n"
      " \"all-gather-implementation\": {}, \"all-to-all-implementation\": {}}}\n",
      splits, endpoint_delay, optimization, list, list, list, a2a);
}

int64_t run_ps(MicrobenchKind kind, uint64_t bytes, const std::string& system,
               const std::string& network, uint32_t ranks,
               const std::string& backend = "analytical") {
  test::MicroRun run;
  run.kind = kind;
  run.bytes = bytes;
  run.ranks = ranks;
  run.backend = backend;
  run.rounding = net::TimeRounding::kExact;
  run.system = system;
  run.network = network;
  auto result = test::run_micro(run);
  EXPECT_TRUE(result) << result.error().message();
  if (!result) return -1;
  for (const auto& rank : result->rank_results) EXPECT_EQ(rank.finish, result->end) << rank.rank;
  return result->end.ps();
}

constexpr uint64_t kS = 8 << 20;

TEST(InSwitch, all_reduce_goes_up_once_and_comes_down_once) {
  for (const char* backend : {"analytical", "congestion-aware"}) {
    EXPECT_EQ(run_ps(MicrobenchKind::kAllReduce, kS, in_switch_system(1, 0),
                     test::network_yaml("Switch", "8", "50", "500"), 8, backend),
              2 * hop_ps(kS, 50, 500))
        << backend;
  }
}

TEST(InSwitch, reduce_scatter_comes_down_as_one_share_and_all_gather_as_everything) {
  const std::string network = test::network_yaml("Switch", "8", "50", "500");
  EXPECT_EQ(run_ps(MicrobenchKind::kReduceScatter, kS, in_switch_system(1, 0), network, 8),
            hop_ps(kS, 50, 500) + hop_ps(kS / 8, 50, 500));
  EXPECT_EQ(run_ps(MicrobenchKind::kAllGather, kS, in_switch_system(1, 0), network, 8),
            hop_ps(kS, 50, 500) + hop_ps(8 * kS, 50, 500));
}

TEST(InSwitch, endpoint_delay_and_chunks_apply_as_for_every_algorithm) {
  // 4 chunks one after the other, each E + up + E + down... : E at the start, E after the receive.
  const int64_t chunk = 10000 + hop_ps(kS / 4, 50, 500) + hop_ps(kS / 4, 50, 500) + 10000;
  EXPECT_EQ(run_ps(MicrobenchKind::kAllReduce, kS, in_switch_system(4, 10),
                   test::network_yaml("Switch", "8", "50", "500"), 8),
            4 * chunk);
}

TEST(InSwitch, beats_a_ring_all_reduce_on_the_same_switch) {
  // 64 MiB in 4 chunks of C = 16 MiB, congestion-aware (store and forward through the switch).
  const std::string network = test::network_yaml("Switch", "8", "50", "500");
  const int64_t in_switch = run_ps(MicrobenchKind::kAllReduce, 64 << 20, in_switch_system(4, 10),
                                   network, 8, "congestion-aware");
  const int64_t ring = run_ps(MicrobenchKind::kAllReduce, 64 << 20, test::system_json("ring", 1),
                              network, 8, "congestion-aware");
  const uint64_t chunk = 16 << 20;
  EXPECT_EQ(in_switch, 4 * (10000 + 2 * hop_ps(chunk, 50, 500) + 10000));
  // Ring: 14 messages of C/8, each two hops, each receive E, 7 reductions of 3 x floor(m / 1600)
  // ns.
  const int64_t reduction = 3 * (static_cast<int64_t>(chunk / 8) / 1600) * 1000;
  EXPECT_EQ(ring, 4 * (10000 + 14 * (2 * hop_ps(chunk / 8, 50, 500) + 10000) + 7 * reduction));
  // The bandwidth term alone: 2 (n-1)/n x per member through two links against x each way.
  EXPECT_GT(static_cast<double>(ring) / static_cast<double>(in_switch), 1.75);
}

TEST(InSwitch, in_a_hierarchy_only_the_switch_dimension_reduces_in_the_network) {
  // Ring(4) x Switch(2), localBWAware: reduce-scatter on the ring (3 x S/4), all-reduce in the
  // switch on S/4 (up and down), all-gather back on the ring (3 x S/4).
  const int64_t ring_step = hop_ps(kS / 4, 100, 500);
  const int64_t expected = 3 * ring_step + 2 * hop_ps(kS / 4, 25, 2000) + 3 * ring_step;
  EXPECT_EQ(run_ps(MicrobenchKind::kAllReduce, kS,
                   in_switch_system(1, 0, "localBWAware", "ring", "inSwitch"),
                   test::network_yaml("Ring, Switch", "4, 2", "100, 25", "500, 2000"), 8),
            expected);
}

TEST(InSwitch, a_dimension_without_a_switch_is_refused) {
  test::MicroRun run;
  run.system = in_switch_system(1, 0);
  run.network = test::network_yaml("Ring", "8", "50", "500");
  auto result = test::run_micro(run);
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message().find("key 'all-reduce-implementation': dimension 0 is a Ring; "
                                          "inSwitch needs a Switch dimension"),
            std::string::npos)
      << result.error().message();
}

}  // namespace in_switch_test
}  // namespace orrery::sim
