// Whole runs on graph topologies: a one-switch graph reproduces ASTRA-sim's Switch dimension
// exactly; the flow backend shares links where the analytical one does not; the 128-NPU two-tier
// Clos of the reference runs with every backend that supports it.
#include <gtest/gtest.h>

#include "sim/sim_test_support.h"

namespace orrery {
namespace graph_run_test {

using gen::MicrobenchKind;

// n NPUs on one switch, every cable `gbps` GB/s and `ns` latency: ASTRA-sim's Switch dimension.
std::string star_graph(uint32_t n, const std::string& gbps, const std::string& ns) {
  std::string text =
      fmt::format("name: star\nnpus: {}\nswitches: [s]\nlogical: [[Switch, {}]]\nlinks:\n", n, n);
  for (uint32_t i = 0; i < n; ++i) text += fmt::format("  - [npu{}, s, {}, {}]\n", i, gbps, ns);
  return text;
}

sim::RunResult run_ok(const test::MicroRun& spec) {
  Expected<sim::RunResult> result = test::run_micro(spec);
  EXPECT_TRUE(result.has_value()) << (result ? "" : result.error().message());
  return std::move(*result);
}

TEST(GraphRuns, a_one_switch_graph_times_a_ring_all_reduce_as_the_switch_dimension_does) {
  test::MicroRun spec;
  spec.kind = MicrobenchKind::kAllReduce;
  spec.bytes = 8 << 20;
  spec.ranks = 16;
  spec.system = test::system_json("ring", 1);
  spec.rounding = net::TimeRounding::kExact;
  spec.network = test::network_yaml("Switch", "16", "50", "500");
  const sim::RunResult astra = run_ok(spec);
  spec.network = star_graph(16, "50", "500");
  const sim::RunResult graph = run_ok(spec);
  EXPECT_FALSE(graph.symmetric);
  EXPECT_EQ(graph.end, astra.end);  // same per-message delay: 2 hops + bytes / bandwidth
  spec.backend = "flow";
  const sim::RunResult flow = run_ok(spec);
  // A ring loads every cable with one message at a time: no sharing, the same time up to the
  // picosecond rounding of each message.
  EXPECT_NEAR(static_cast<double>(flow.end.ps()), static_cast<double>(astra.end.ps()),
              static_cast<double>(astra.messages));
  EXPECT_EQ(flow.backend, "flow");
  ASSERT_FALSE(flow.links.empty());
  uint64_t bytes = 0;
  for (const net::LinkStats& link : flow.links) bytes += link.bytes;
  // Every message crosses two cables: an all-reduce moves 2 (n-1)/n of the buffer per rank.
  EXPECT_EQ(bytes, 2u * 16 * 2 * 15 * ((8u << 20) / 16));
}

TEST(GraphRuns, flow_all_to_all_shares_the_cables_that_analytical_ignores) {
  test::MicroRun spec;
  spec.kind = MicrobenchKind::kAllToAll;
  spec.bytes = 16 << 20;
  spec.ranks = 16;
  spec.system = test::system_json("direct", 1, /*splits=*/1, /*active=*/1, /*endpoint_delay=*/0);
  spec.rounding = net::TimeRounding::kExact;
  spec.network = star_graph(16, "50", "500");
  const sim::RunResult analytical = run_ok(spec);
  spec.backend = "flow";
  const sim::RunResult flow = run_ok(spec);
  // Each rank sends 15 pieces of 1 MiB at once: in the flow model its uplink carries all 15 at a
  // fifteenth of 50 GB/s each, so the exchange takes 15 x 1 MiB / 50 GB/s = 292,968.75 ns plus
  // two latencies; the analytical model sends them side by side at full rate.
  const double piece_ns = 1048576.0 / (50.0 * 1073741824.0) * 1e9;
  EXPECT_NEAR(flow.end.seconds() * 1e9, 15 * piece_ns + 1000, 1.0);
  EXPECT_NEAR(analytical.end.seconds() * 1e9, piece_ns + 1000, 1.0);
}

TEST(GraphRuns, the_128_npu_two_tier_clos_runs_ring_all_reduce_and_all_to_all) {
  // 8 leaves x 16 NPUs, 8 spines, 200 Gb/s, 5 us NPU-leaf and 12.5 us leaf-spine: the generator's
  // defaults. Logical layout [16 per leaf, 8 leaves].
  for (const MicrobenchKind kind : {MicrobenchKind::kAllReduce, MicrobenchKind::kAllToAll}) {
    test::MicroRun spec;
    spec.kind = kind;
    spec.bytes = 64 << 20;
    spec.ranks = 128;
    spec.system = test::system_json(kind == MicrobenchKind::kAllReduce ? "ring" : "direct", 2);
    spec.rounding = net::TimeRounding::kExact;
    spec.network = "generator: clos2\n";
    const sim::RunResult analytical = run_ok(spec);
    spec.backend = "flow";
    const sim::RunResult flow = run_ok(spec);
    // 200 Gb/s = 25e9 B/s per NPU cable. Lower bounds from bandwidth alone:
    //  all-reduce: every rank sends and receives 2 (n-1)/n of the buffer through its cable.
    //  all-to-all: a leaf's 16 NPUs send 7/8 of their buffers to other leaves over 8 uplinks
    //  (2:1 oversubscription): 16 x 7/8 x S / (8 x 25e9) seconds.
    const double s = 64.0 * 1048576;
    const double bound = kind == MicrobenchKind::kAllReduce ? 2 * 127.0 / 128 * s / 25e9
                                                            : 16 * 7.0 / 8 * s / (8 * 25e9);
    EXPECT_GT(flow.end.seconds(), bound);
    EXPECT_GE(flow.end, analytical.end);
    RecordProperty(
        kind == MicrobenchKind::kAllReduce ? "all_reduce" : "all_to_all",
        fmt::format("analytical {:.1f} us, flow {:.1f} us, bound {:.1f} us",
                    analytical.end.seconds() * 1e6, flow.end.seconds() * 1e6, bound * 1e6));
    std::printf("clos128 %s: analytical %.1f us, flow %.1f us, bandwidth bound %.1f us\n",
                kind == MicrobenchKind::kAllReduce ? "all-reduce" : "all-to-all",
                analytical.end.seconds() * 1e6, flow.end.seconds() * 1e6, bound * 1e6);
  }
}

TEST(GraphRuns, hierarchical_rings_go_through_the_node_then_along_the_rails) {
  // 4 HGX-like nodes x 8 GPUs, 2 nodes per rail leaf, 2 spines; logical [8 GPUs, 4 nodes]. A ring
  // all-reduce of S (localBWAware): reduce-scatter over NVLink (7/8 S out of every GPU), an
  // all-reduce of S/8 along each rail (2 x 3/4 x S/8 out of every GPU's NIC), all-gather over
  // NVLink (7/8 S). Half of each rail ring's hops cross leaves through a spine.
  test::MicroRun spec;
  spec.kind = MicrobenchKind::kAllReduce;
  spec.bytes = 8 << 20;
  spec.ranks = 32;
  spec.system = test::system_json("ring", 2);
  spec.network = "generator: rail\nnodes: 4\nnodes_per_leaf: 2\nspines: 2\n";
  for (const char* backend : {"analytical", "flow"}) {
    spec.backend = backend;
    const sim::RunResult run = run_ok(spec);
    double tier_bytes[3] = {0, 0, 0};
    for (const net::LinkStats& link : run.links) {
      ASSERT_LT(link.dimension, 3u);
      tier_bytes[link.dimension] += static_cast<double>(link.bytes);
    }
    const double s = 8.0 * (1 << 20);
    // Tier 0, GPU <-> NVSwitch: 32 GPUs x 1.75 S, each byte on an up and a down link.
    EXPECT_DOUBLE_EQ(tier_bytes[0], 32 * 1.75 * s * 2) << backend;
    // Tier 1, GPU <-> rail leaf: 32 GPUs x 0.1875 S, up and down.
    EXPECT_DOUBLE_EQ(tier_bytes[1], 32 * 0.1875 * s * 2) << backend;
    // Tier 2, leaf <-> spine: per rail 2 of the 4 ring hops cross, each over 2 links.
    EXPECT_DOUBLE_EQ(tier_bytes[2], 8 * 2 * 0.1875 * s * 2) << backend;
    // Summaries group the outer tiers under the outermost logical dimension.
    ASSERT_EQ(run.dimensions.size(), 2u);
    EXPECT_EQ(run.dimensions[0].links, 64u);               // 32 cables to the NVSwitches
    EXPECT_EQ(run.dimensions[1].links, 64u + 2 * 16 * 2);  // NIC cables, leaf-spine cables
  }
}

TEST(GraphRuns, direct_and_halving_doubling_run_over_the_graph_too) {
  // Same 32-GPU rail fabric. Whatever the algorithm, both backends carry the same messages over
  // the same routes (the same bytes per link), and sharing links can only slow the flow model.
  for (const char* algorithm : {"direct", "halvingDoubling"}) {
    test::MicroRun spec;
    spec.kind = MicrobenchKind::kAllReduce;
    spec.bytes = 8 << 20;
    spec.ranks = 32;
    spec.system = test::system_json(algorithm, 2);
    spec.rounding = net::TimeRounding::kExact;
    spec.network = "generator: rail\nnodes: 4\nnodes_per_leaf: 2\nspines: 2\n";
    const sim::RunResult analytical = run_ok(spec);
    spec.backend = "flow";
    const sim::RunResult flow = run_ok(spec);
    // Per tier: paths inside a node and to the rail leaf are unique; the spine a message takes
    // depends on the order messages are sent (ECMP hashes a sequence number), so compare totals.
    uint64_t tier_bytes[2][3] = {};
    for (const net::LinkStats& link : analytical.links) tier_bytes[0][link.dimension] += link.bytes;
    for (const net::LinkStats& link : flow.links) tier_bytes[1][link.dimension] += link.bytes;
    for (int tier = 0; tier < 3; ++tier) {
      EXPECT_EQ(tier_bytes[0][tier], tier_bytes[1][tier]) << algorithm << " tier " << tier;
    }
    const uint64_t nvlink_bytes = tier_bytes[1][0];
    // Reduce-scatter and all-gather inside the nodes: 2 x 7/8 S out of, and into, every GPU.
    EXPECT_EQ(nvlink_bytes, 32u * 2 * 2 * 7 * ((8u << 20) / 8)) << algorithm;
    EXPECT_GE(flow.end.ps() + static_cast<int64_t>(flow.messages), analytical.end.ps())
        << algorithm;
  }
}

TEST(GraphRuns, an_unknown_backend_lists_the_registry) {
  test::MicroRun spec;
  spec.system = test::system_json("ring", 1);
  spec.network = star_graph(8, "50", "500");
  spec.backend = "garnet";
  Expected<sim::RunResult> result = test::run_micro(spec);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().message(),
            "unknown network backend 'garnet' (expected analytical, congestion-aware, flow, roce)");
}

}  // namespace graph_run_test
}  // namespace orrery
