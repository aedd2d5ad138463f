// The nccl time model: its formula at known points, NCCL's choice of algorithm and protocol.
#include <gtest/gtest.h>

#include <cmath>
#include <string_view>
#include <utility>

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

// NVLS's time with a per-chunk sync: the peak over (1 + sync x per-channel rate / chunk).
double chunked_nvls_us(const NcclTuning& t, double gbps, uint64_t bytes, double chunk) {
  const double peak = gbps * t.nvls_efficiency;
  const double per_channel = peak * 1e3 / t.nvls_channels;
  return t.launch_us + t.nvls_latency_us +
         static_cast<double>(bytes) * (chunk + t.nvls_chunk_us * per_channel) /
             (chunk * peak * 1e3);
}

// The candidate of one algorithm and protocol (a failure when the model has none).
NcclEstimate candidate(NcclOp op, uint64_t bytes, const NcclFabric& fabric,
                       const NcclTuning& tuning, NcclAlgorithm algorithm, NcclProtocol protocol) {
  for (const NcclEstimate& c : nccl_candidates(op, bytes, fabric, tuning)) {
    if (c.algorithm == algorithm && c.protocol == protocol) return c;
  }
  ADD_FAILURE() << "no " << nccl_algorithm_name(algorithm) << " " << nccl_protocol_name(protocol)
                << " candidate";
  return {};
}

NcclEstimate nvls_candidate(uint64_t bytes, const NcclFabric& fabric, const NcclTuning& tuning) {
  return candidate(NcclOp::kAllReduce, bytes, fabric, tuning, NcclAlgorithm::kNvls,
                   NcclProtocol::kSimple);
}

TEST(NcclModel, nvls_chunks_shrink_for_smaller_buffers_as_nccls_enqueue_rules) {
  NcclTuning tuning;
  tuning.nvls = true;
  tuning.nvls_channels = 16;  // 16 channels x 8 heads: 128 chunks in flight
  tuning.nvls_chunk_bytes = 131072;
  tuning.nvls_chunk_us = 0.5;
  const NcclFabric fabric = node(450);
  // 128 KiB chunks from 64 x 128 x 128 KiB = 1 GiB; 64 KiB from 8 x 128 x 64 KiB = 64 MiB;
  // 32 KiB from 2 x 128 x 32 KiB = 8 MiB; 16 KiB below.
  const uint64_t mib = uint64_t{1} << 20;
  const std::pair<uint64_t, double> cases[] = {
      {1024 * mib, 131072}, {1024 * mib - 1, 65536}, {64 * mib, 65536}, {64 * mib - 1, 32768},
      {8 * mib, 32768},     {8 * mib - 1, 16384},    {1 * mib, 16384}};
  for (const auto& [bytes, chunk] : cases) {
    EXPECT_NEAR(nvls_candidate(bytes, fabric, tuning).time_us,
                chunked_nvls_us(tuning, 450, bytes, chunk), 1e-9)
        << bytes;
  }
  // The step the measured curves show: the same bytes per us below 1 GiB and more from it.
  const double below =
      static_cast<double>(512 * mib) / nvls_candidate(512 * mib, fabric, tuning).time_us;
  const double above =
      static_cast<double>(2048 * mib) / nvls_candidate(2048 * mib, fabric, tuning).time_us;
  EXPECT_GT(above, below * 1.05);
  // Without a per-chunk sync the chunk changes nothing (the model before chunks).
  tuning.nvls_chunk_us = 0;
  EXPECT_NEAR(nvls_candidate(64 * mib - 1, fabric, tuning).time_us,
              tuning.launch_us + tuning.nvls_latency_us +
                  static_cast<double>(64 * mib - 1) / (450 * tuning.nvls_efficiency * 1e3),
              1e-9);
}

// A channel's pipeline holds `nvls_fill_chunks` chunks before its first completes: NVLS's latency
// grows by that many chunk times (the chunk at the channel's share of the peak, plus its sync),
// with the chunk NCCL picks for the size, and NCCL's prediction does not see it.
TEST(NcclModel, nvls_fills_its_pipeline_with_the_chunk_it_picks) {
  NcclTuning tuning;
  tuning.nvls = true;
  tuning.nvls_channels = 24;  // 24 x 8 = 192 chunks in flight: 16 KiB below 12 MiB, 32 KiB to 96
  tuning.nvls_chunk_us = 1.3;
  const NcclFabric fabric = node(900);
  const uint64_t mib = uint64_t{1} << 20;
  const double per_channel = 900 * tuning.nvls_efficiency * 1e3 / 24;  // bytes per us
  for (const auto& [bytes, chunk] :
       {std::pair<uint64_t, double>{4 * mib, 16384}, {16 * mib, 32768}, {128 * mib, 65536}}) {
    tuning.nvls_fill_chunks = 0;
    const NcclEstimate bare = nvls_candidate(bytes, fabric, tuning);
    tuning.nvls_fill_chunks = 15;
    const NcclEstimate filled = nvls_candidate(bytes, fabric, tuning);
    EXPECT_NEAR(filled.time_us - bare.time_us, 15 * (chunk / per_channel + 1.3), 1e-9) << bytes;
    EXPECT_DOUBLE_EQ(filled.predicted_us, bare.predicted_us);
  }
}

// NCCL 2.25, the first release that runs Blackwell, changed the constants its choice uses (LL128's
// base latency up to 14 us, LL's bandwidth half of Simple's up to 282 GB/s in a node, NVLS's
// latency 25 us): on a Blackwell node an 8 MiB all-gather stays LL, where the older constants
// move it to LL128 (as B200's measured all-gather does, from 16 MiB).
TEST(NcclModel, blackwell_is_chosen_by_the_constants_of_the_releases_that_run_it) {
  NcclTuning tuning;
  tuning.channels = 32;
  tuning.ring_efficiency = 0.75;
  tuning.ll128_channel_gbps = 16.4;
  const NcclFabric fabric = node(900);
  const uint64_t bytes = uint64_t{8} << 20;
  const double data = 0.875 * static_cast<double>(bytes);  // bytes each rank receives
  const double simple = 900 * 0.75;
  tuning.arch = NcclArch::kHopper;
  const NcclEstimate hopper = nccl_estimate(NcclOp::kAllGather, bytes, fabric, tuning);
  EXPECT_EQ(hopper.protocol, NcclProtocol::kLL128);
  tuning.arch = NcclArch::kBlackwell;
  const NcclEstimate blackwell = nccl_estimate(NcclOp::kAllGather, bytes, fabric, tuning);
  EXPECT_EQ(blackwell.protocol, NcclProtocol::kLL);
  // LL: 6.6 + 7 x 0.6 us and min(675 / 2, 282) GB/s; LL128: 14 + 7 x 1.9 us and 0.92 x 675
  // (under Blackwell's 40 GB/s x 32 channels).
  EXPECT_NEAR(blackwell.predicted_us, 6.6 + 7 * 0.6 + data / (282.0 * 1e3), 1e-9);
  EXPECT_NEAR(candidate(NcclOp::kAllGather, bytes, fabric, tuning, NcclAlgorithm::kRing,
                        NcclProtocol::kLL128)
                  .predicted_us,
              14 + 7 * 1.9 + data / (0.92 * simple * 1e3), 1e-9);
  // The time is the machine's either way: the choice moved, not the LL formula.
  tuning.protocols = 1u << static_cast<int>(NcclProtocol::kLL);
  tuning.arch = NcclArch::kHopper;
  EXPECT_DOUBLE_EQ(nccl_estimate(NcclOp::kAllGather, bytes, fabric, tuning).time_us,
                   blackwell.time_us);
}

TEST(NcclModel, nvls_tree_chunks_follow_their_own_steps_and_the_four_node_cap) {
  // NICs far faster than NVLS, so NVLS-tree's bandwidth is the chunked NVLS rate.
  NcclTuning tuning;
  tuning.nvls = true;
  tuning.nvls_channels = 16;
  tuning.nvls_chunk_bytes = 262144;
  tuning.nvls_chunk_us = 0.5;
  const auto tree_us = [&](uint32_t nodes, uint64_t bytes) {
    NcclFabric fabric = node(450);
    fabric.nodes = nodes;
    fabric.ranks = 8 * nodes;
    fabric.net_gbps = 1e6;
    for (const NcclEstimate& c : nccl_candidates(NcclOp::kAllReduce, bytes, fabric, tuning))
      if (c.algorithm == NcclAlgorithm::kNvlsTree) return c.time_us;
    ADD_FAILURE() << "no NVLS-tree candidate";
    return 0.0;
  };
  const auto expected = [&](uint32_t nodes, uint64_t bytes, double chunk) {
    const double latency = tuning.launch_us + tuning.nvls_latency_us +
                           2 * std::log2(static_cast<double>(nodes)) * tuning.net_hop_us[2];
    return chunked_nvls_us(tuning, 450, bytes, chunk) - tuning.launch_us - tuning.nvls_latency_us +
           latency;
  };
  // 16 channels x 8 heads = 128 chunks in flight; each step compares with the chunk so far, as
  // NCCL's does. Two nodes: 256 KiB from 16 x 128 x 256 KiB = 512 MiB, 128 KiB down to
  // 4 x 128 x 128 KiB = 64 MiB, 64 KiB down to 128 x 64 KiB = 8 MiB, 32 KiB below.
  const uint64_t mib = uint64_t{1} << 20;
  const std::pair<uint64_t, double> cases[] = {{512 * mib, 262144}, {512 * mib - 1, 131072},
                                               {64 * mib, 131072},  {64 * mib - 1, 65536},
                                               {8 * mib, 65536},    {8 * mib - 1, 32768}};
  for (const auto& [bytes, chunk] : cases)
    EXPECT_NEAR(tree_us(2, bytes), expected(2, bytes, chunk), 1e-9) << bytes;
  // From four nodes the chunk is at most 64 KiB, however large the buffer.
  EXPECT_NEAR(tree_us(4, 4096 * mib), expected(4, 4096 * mib, 65536), 1e-9);
}

TEST(NcclModel, nvls_is_chosen_by_its_peak_even_where_small_chunks_make_it_slower) {
  // NCCL's prediction knows no chunks: with a costly sync NVLS stays the choice and takes longer
  // than the ring would have.
  NcclTuning tuning;
  tuning.nvls = true;
  tuning.nvls_efficiency = 0.9;
  tuning.nvls_chunk_us = 5;
  const uint64_t bytes = uint64_t{256} << 20;
  const NcclEstimate chosen = nccl_estimate(NcclOp::kAllReduce, bytes, node(450), tuning);
  EXPECT_EQ(chosen.algorithm, NcclAlgorithm::kNvls);
  double ring = 1e30;
  for (const NcclEstimate& c : nccl_candidates(NcclOp::kAllReduce, bytes, node(450), tuning)) {
    if (c.algorithm == NcclAlgorithm::kRing) ring = std::min(ring, c.time_us);
  }
  EXPECT_LT(ring, chosen.time_us);
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

// NCCL's choice caps LL128 per channel by GPU generation (20 GB/s on Ampere), whatever the machine
// achieves: a machine whose LL128 reaches 13.6 GB/s a channel still runs LL128 at 16 MiB, where
// NCCL's own figures favour it (LL128 at 10 + 14 x 1.9 us and 0.92 x 232.8 GB/s against Simple at
// 8.4 + 14 x 3.4 us and 232.8 GB/s), and takes the machine's LL128 time there. Without a
// generation the choice has only the machine's figure, and Simple wins.
TEST(NcclModel, the_choice_caps_ll128_by_nccls_figure_for_the_gpu_generation) {
  NcclTuning tuning;
  tuning.channels = 12;
  tuning.ring_efficiency = 0.776;
  tuning.ll128_channel_gbps = 13.6;
  const uint64_t bytes = uint64_t{16} << 20;
  const double size = static_cast<double>(bytes);
  const double simple = 300 * 0.776;
  const double ll128_predicted = 10.0 + 14 * 1.9 + 1.75 * size / (0.92 * simple * 1e3);
  const double simple_predicted = 8.4 + 14 * 3.4 + 1.75 * size / (simple * 1e3);
  ASSERT_LT(ll128_predicted, simple_predicted);
  EXPECT_EQ(nccl_estimate(NcclOp::kAllReduce, bytes, node(300), tuning).protocol,
            NcclProtocol::kSimple);
  tuning.arch = NcclArch::kAmpere;
  const NcclEstimate e = nccl_estimate(NcclOp::kAllReduce, bytes, node(300), tuning);
  EXPECT_EQ(e.protocol, NcclProtocol::kLL128);
  EXPECT_NEAR(e.predicted_us, ll128_predicted, 1e-9);
  EXPECT_NEAR(
      e.time_us,
      tuning.launch_us + 10.0 + 14 * tuning.nvlink_hop_us[1] + 1.75 * size / (13.6 * 12 * 1e3),
      1e-9);
}

// Across nodes NCCL's choice counts one ring per NIC rail (doubled on rails of 25 GB/s or more)
// and a tree's step latencies are its own (Simple's is a 256 KiB chunk's, 28 us a step): on two
// nodes of eight A100s with HDR rails, 32 MiB is a Simple ring, as the machine ran it.
TEST(NcclModel, across_nodes_the_choice_counts_a_ring_per_rail_and_the_trees_own_latencies) {
  NcclTuning tuning;
  tuning.arch = NcclArch::kAmpere;
  tuning.channels = 12;
  tuning.ring_efficiency = 0.776;
  tuning.ll128_channel_gbps = 13.6;
  tuning.net_efficiency = 0.94;
  NcclFabric fabric;
  fabric.ranks = 16;
  fabric.nodes = 2;
  fabric.nvlink_gbps = 300;
  fabric.net_gbps = 200;  // 8 rails of 25 GB/s line rate, 23.5 achieved: 8 channels
  const uint64_t bytes = uint64_t{32} << 20;
  const double size = static_cast<double>(bytes);
  const double busbw = 200 * 0.94;
  double ll128 = 0;
  double tree_simple = 0;
  for (const NcclEstimate& c : nccl_candidates(NcclOp::kAllReduce, bytes, fabric, tuning)) {
    if (c.algorithm == NcclAlgorithm::kRing && c.protocol == NcclProtocol::kLL128) {
      ll128 = c.predicted_us;
      // The machine's LL128 runs on those 8 channels too: 13.6 GB/s each.
      EXPECT_NEAR(c.busbw_gbps, 13.6 * 8, 1e-9);
    }
    if (c.algorithm == NcclAlgorithm::kTree && c.protocol == NcclProtocol::kSimple) {
      tree_simple = c.predicted_us;
    }
  }
  // LL128: 10 + 28 x 1.9 + 2 x 4.0 us, bus bandwidth min(0.92 x 188, 20 x 8) GB/s.
  EXPECT_NEAR(ll128, 10 + 28 * 1.9 + 2 * 4.0 + 30.0 / 16.0 * size / (160 * 1e3), 1e-9);
  // Tree Simple: 8.4 + 2 (7 x 28 + 28) us, half of 0.9 x 188 GB/s.
  EXPECT_NEAR(tree_simple, 8.4 + 2 * (7 * 28.0 + 28.0) + size / (0.45 * busbw * 1e3), 1e-9);
  const NcclEstimate e = nccl_estimate(NcclOp::kAllReduce, bytes, fabric, tuning);
  EXPECT_EQ(e.algorithm, NcclAlgorithm::kRing);
  EXPECT_EQ(e.protocol, NcclProtocol::kSimple);
  // NDR rails (50 GB/s line rate) double the channels: LL128's cap is then 20 x 16 GB/s, above
  // 0.92 x the NICs' 340 GB/s, and LL128 is predicted at the derated bus bandwidth.
  fabric.net_gbps = 400;
  tuning.net_efficiency = 0.85;
  bool ndr_ll128 = false;
  for (const NcclEstimate& c : nccl_candidates(NcclOp::kAllReduce, bytes, fabric, tuning)) {
    if (c.algorithm == NcclAlgorithm::kRing && c.protocol == NcclProtocol::kLL128) {
      ndr_ll128 = true;
      EXPECT_NEAR(c.predicted_us,
                  10 + 28 * 1.9 + 2 * 4.0 + 30.0 / 16.0 * size / (0.92 * 300 * 0.776 * 1e3), 1e-9);
    }
  }
  EXPECT_TRUE(ndr_ll128);
}

// What LL128 achieves across nodes is the machine's (ll128_net_fraction of Simple's), not NCCL's
// 120/128 rules: the time of a tree LL128 on two nodes moves with it, within a node nothing does,
// and NCCL's prediction (the choice) never does.
TEST(NcclModel, ll128_across_nodes_runs_at_the_machines_share_of_simple) {
  NcclTuning tuning;
  tuning.arch = NcclArch::kAmpere;
  tuning.net_efficiency = 0.94;
  NcclFabric fabric;
  fabric.ranks = 16;
  fabric.nodes = 2;
  fabric.nvlink_gbps = 300;
  fabric.net_gbps = 200;
  const uint64_t bytes = uint64_t{4} << 20;
  const double size = static_cast<double>(bytes);
  auto tree_ll128 = [&](const NcclTuning& t) {
    return candidate(NcclOp::kAllReduce, bytes, fabric, t, NcclAlgorithm::kTree,
                     NcclProtocol::kLL128);
  };
  const NcclEstimate nccls = tree_ll128(tuning);
  tuning.ll128_net_fraction = 0.79;
  const NcclEstimate machines = tree_ll128(tuning);
  EXPECT_DOUBLE_EQ(machines.predicted_us, nccls.predicted_us);
  // The tree's Simple algorithm bandwidth is half of 0.9 x the NICs' 188 GB/s; LL128 0.915 of
  // it by NCCL's rule, 0.79 of it by the machine's.
  const double tree = 0.45 * 200 * 0.94;
  EXPECT_NEAR(nccls.time_us - machines.time_us,
              size / (0.915 * tree * 1e3) - size / (0.79 * tree * 1e3), 1e-9);
  EXPECT_NEAR(machines.busbw_gbps, 0.79 * tree * 30.0 / 16.0, 1e-9);
  // One node: the fraction is not used.
  NcclTuning one = tuning;
  one.ll128_net_fraction = 0;
  for (NcclOp op : {NcclOp::kAllReduce, NcclOp::kAllGather}) {
    EXPECT_DOUBLE_EQ(nccl_estimate(op, bytes, node(300), tuning).time_us,
                     nccl_estimate(op, bytes, node(300), one).time_us);
  }
}

TEST(NcclModel, nccl_algo_and_nccl_proto_lists_read_as_nccl_reads_them) {
  const auto algorithms = [](std::string_view list) { return parse_nccl_algorithms(list); };
  const auto bit = [](auto value) { return static_cast<uint8_t>(1u << static_cast<int>(value)); };
  EXPECT_EQ(*algorithms("Ring,Tree"), bit(NcclAlgorithm::kRing) | bit(NcclAlgorithm::kTree));
  EXPECT_EQ(*algorithms(" nvls , NVLSTree"),
            bit(NcclAlgorithm::kNvls) | bit(NcclAlgorithm::kNvlsTree));
  EXPECT_EQ(*algorithms("nvls-tree"), bit(NcclAlgorithm::kNvlsTree));
  EXPECT_EQ(*algorithms("^nvls"), static_cast<uint8_t>(~bit(NcclAlgorithm::kNvls)));
  EXPECT_EQ(*parse_nccl_protocols("LL,ll128"), bit(NcclProtocol::kLL) | bit(NcclProtocol::kLL128));
  EXPECT_EQ(*parse_nccl_protocols("^Simple"), static_cast<uint8_t>(~bit(NcclProtocol::kSimple)));
  for (const char* bad : {"", "^", "ring,", "ring,,tree", "rings"}) {
    Expected<uint8_t> parsed = algorithms(bad);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_NE(parsed.error().message().find("NCCL_ALGO '"), std::string::npos)
        << parsed.error().message();
  }
  Expected<uint8_t> collnet = algorithms("tree,CollNetDirect");
  ASSERT_FALSE(collnet);
  EXPECT_NE(collnet.error().message().find("'collnetdirect' is NCCL's but not modelled"),
            std::string::npos)
      << collnet.error().message();
  Expected<uint8_t> proto = parse_nccl_protocols("LL64");
  ASSERT_FALSE(proto);
  EXPECT_NE(proto.error().message().find("unknown protocol 'll64'"), std::string::npos)
      << proto.error().message();
  NcclTuning tuning;
  tuning.algorithms = *algorithms("ring,tree");
  tuning.protocols = *parse_nccl_protocols("^LL128");
  EXPECT_EQ(nccl_allowed_text(tuning), "NCCL_ALGO=ring,tree NCCL_PROTO=LL,Simple");
}

TEST(NcclModel, the_choice_keeps_to_what_nccl_algo_and_nccl_proto_allow) {
  NcclTuning tuning;
  const uint64_t bytes = uint64_t{1} << 30;
  const double size = static_cast<double>(bytes);
  // LL only: the LL ring at a quarter of Simple's bandwidth, even for 1 GiB.
  tuning.protocols = *parse_nccl_protocols("LL");
  const NcclEstimate ll = nccl_estimate(NcclOp::kAllReduce, bytes, node(300), tuning);
  EXPECT_TRUE(ll.available);
  EXPECT_EQ(ll.algorithm, NcclAlgorithm::kRing);
  EXPECT_EQ(ll.protocol, NcclProtocol::kLL);
  EXPECT_NEAR(ll.time_us, tuning.launch_us + 3.6 + 14 * 0.47 + 1.75 * size / (300 * 0.77 / 4 * 1e3),
              1e-9);
  // NVLS left out where it would serve: the Simple ring.
  tuning = NcclTuning{};
  tuning.nvls = true;
  ASSERT_EQ(nccl_estimate(NcclOp::kAllReduce, bytes, node(450), tuning).algorithm,
            NcclAlgorithm::kNvls);
  tuning.algorithms = *parse_nccl_algorithms("^nvls");
  const NcclEstimate ring = nccl_estimate(NcclOp::kAllReduce, bytes, node(450), tuning);
  EXPECT_EQ(ring.algorithm, NcclAlgorithm::kRing);
  EXPECT_EQ(ring.protocol, NcclProtocol::kSimple);
  EXPECT_NEAR(
      ring.time_us,
      tuning.launch_us + 8.4 + 14 * tuning.nvlink_hop_us[2] + 1.75 * size / (450 * 0.77 * 1e3),
      1e-9);
  // The tree only: an all-gather has none (NCCL fails the call); all-to-all is not restricted.
  tuning.algorithms = *parse_nccl_algorithms("tree");
  EXPECT_FALSE(nccl_estimate(NcclOp::kAllGather, bytes, node(450), tuning).available);
  const NcclEstimate all_to_all = nccl_estimate(NcclOp::kAllToAll, bytes, node(450), tuning);
  EXPECT_TRUE(all_to_all.available);
  EXPECT_EQ(all_to_all.algorithm, NcclAlgorithm::kDirect);
}

TEST(NcclModel, one_rank_takes_no_time) {
  NcclFabric fabric = node(300);
  fabric.ranks = 1;
  EXPECT_EQ(nccl_estimate(NcclOp::kAllReduce, 1 << 20, fabric, NcclTuning{}).time_us, 0);
}

}  // namespace nccl_model_test
}  // namespace orrery::sys
