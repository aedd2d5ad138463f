// The nccl time model: its formula at known points, NCCL's choice of algorithm and protocol.
#include <gtest/gtest.h>

#include <cmath>

#include "system/nccl_model.h"

namespace orrery::sys {
namespace nccl_model_test {

NcclFabric node(double nvlink_gbps) {
  NcclFabric fabric;
  fabric.ranks = 8;
  fabric.nodes = 1;
  fabric.nvlink_gbps = nvlink_gbps;
  return fabric;
}

TEST(NcclModel, bus_factors_are_nccl_tests) {
  EXPECT_DOUBLE_EQ(nccl_bus_factor(NcclOp::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(nccl_bus_factor(NcclOp::kAllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(nccl_bus_factor(NcclOp::kReduceScatter, 16), 15.0 / 16.0);
  EXPECT_DOUBLE_EQ(nccl_bus_factor(NcclOp::kAllToAll, 4), 0.75);
  EXPECT_DOUBLE_EQ(nccl_bus_factor(NcclOp::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(nccl_bus_factor(NcclOp::kReduce, 8), 1.0);
}

TEST(NcclModel, large_ring_all_reduce_is_the_simple_ring_formula) {
  NcclTuning tuning;  // defaults: no NVLS
  const uint64_t bytes = uint64_t{1} << 30;
  const NcclEstimate e = nccl_estimate(NcclOp::kAllReduce, bytes, node(300), tuning);
  EXPECT_EQ(e.algorithm, NcclAlgorithm::kRing);
  EXPECT_EQ(e.protocol, NcclProtocol::kSimple);
  // launch + base + 2(n-1) steps + 2(n-1)/n S / (link x efficiency).
  const double expected = tuning.launch_us + 8.4 + 14 * tuning.nvlink_hop_us[2] +
                          1.75 * static_cast<double>(bytes) / (300 * 0.77 * 1e3);
  EXPECT_NEAR(e.time_us, expected, 1e-9);
  EXPECT_NEAR(e.busbw_gbps, 300 * 0.77, 1e-9);
}

TEST(NcclModel, small_messages_take_ll_and_middle_ones_ll128) {
  NcclTuning tuning;
  EXPECT_EQ(nccl_estimate(NcclOp::kAllReduce, 8, node(300), tuning).protocol, NcclProtocol::kLL);
  const NcclEstimate mid = nccl_estimate(NcclOp::kAllReduce, 4 << 20, node(300), tuning);
  EXPECT_EQ(mid.protocol, NcclProtocol::kLL128);
  // LL at 8 bytes: launch + 3.6 + 14 x LL's step latency (+ 8 bytes of data).
  const NcclEstimate tiny = nccl_estimate(NcclOp::kAllReduce, 8, node(300), tuning);
  EXPECT_NEAR(tiny.time_us, tuning.launch_us + 3.6 + 14 * 0.47 + 1.75 * 8 / (300 * 0.77 / 4 * 1e3),
              1e-9);
}

TEST(NcclModel, nvls_serves_large_all_reduces_where_the_switch_reduces) {
  NcclTuning tuning;
  tuning.nvls = true;
  const uint64_t bytes = uint64_t{1} << 30;
  const NcclEstimate e = nccl_estimate(NcclOp::kAllReduce, bytes, node(450), tuning);
  EXPECT_EQ(e.algorithm, NcclAlgorithm::kNvls);
  EXPECT_NEAR(e.time_us,
              tuning.launch_us + tuning.nvls_latency_us +
                  static_cast<double>(bytes) / (450 * tuning.nvls_efficiency * 1e3),
              1e-9);
  // NVLS is for all-reduce only here: an all-gather rides the ring.
  EXPECT_EQ(nccl_estimate(NcclOp::kAllGather, bytes, node(450), tuning).algorithm,
            NcclAlgorithm::kRing);
}

TEST(NcclModel, across_nodes_the_ring_is_capped_by_the_nics_of_a_node) {
  NcclTuning tuning;
  NcclFabric fabric = node(300);
  fabric.ranks = 16;
  fabric.nodes = 2;
  fabric.net_gbps = 200;
  const uint64_t bytes = uint64_t{8} << 30;
  const NcclEstimate e = nccl_estimate(NcclOp::kAllReduce, bytes, fabric, tuning);
  EXPECT_EQ(e.algorithm, NcclAlgorithm::kRing);
  EXPECT_EQ(e.protocol, NcclProtocol::kSimple);
  const double busbw = std::min(300 * 0.77, 200 * tuning.net_efficiency);
  const double latency =
      tuning.launch_us + 8.4 + 28 * tuning.nvlink_hop_us[2] + 2 * tuning.net_hop_us[2];
  EXPECT_NEAR(e.time_us, latency + 30.0 / 16.0 * static_cast<double>(bytes) / (busbw * 1e3), 1e-6);
  // Tree candidates exist for all-reduce across nodes, and NVLS-tree with NVLS.
  tuning.nvls = true;
  bool tree = false;
  bool nvls_tree = false;
  for (const NcclEstimate& c : nccl_candidates(NcclOp::kAllReduce, bytes, fabric, tuning)) {
    tree |= c.algorithm == NcclAlgorithm::kTree;
    nvls_tree |= c.algorithm == NcclAlgorithm::kNvlsTree;
  }
  EXPECT_TRUE(tree);
  EXPECT_TRUE(nvls_tree);
}

TEST(NcclModel, the_choice_is_by_nccls_prediction_not_by_the_machines_time) {
  // A machine whose LL is much faster than NCCL's constants think: NCCL still leaves LL at the
  // size its own model says, and the time is what LL128 takes there.
  NcclTuning tuning;
  tuning.ll_fraction = 0.9;
  const std::vector<NcclEstimate> all =
      nccl_candidates(NcclOp::kAllReduce, 4 << 20, node(300), tuning);
  const NcclEstimate chosen = nccl_estimate(NcclOp::kAllReduce, 4 << 20, node(300), tuning);
  EXPECT_EQ(chosen.protocol, NcclProtocol::kLL128);
  double fastest = chosen.time_us;
  for (const NcclEstimate& c : all) fastest = std::min(fastest, c.time_us);
  EXPECT_LT(fastest, chosen.time_us);
  EXPECT_EQ(all[0].protocol, NcclProtocol::kLL);
  EXPECT_DOUBLE_EQ(all[0].time_us, fastest);
}

TEST(NcclModel, one_rank_takes_no_time) {
  NcclFabric fabric = node(300);
  fabric.ranks = 1;
  EXPECT_EQ(nccl_estimate(NcclOp::kAllReduce, 1 << 20, fabric, NcclTuning{}).time_us, 0);
}

}  // namespace nccl_model_test
}  // namespace orrery::sys
