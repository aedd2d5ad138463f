// Compute slowed by communication (sys::ComputeModel::comm_sms): while a rank has a collective or
// a send/receive in flight, its kernels run on the SMs the collective library leaves them. A
// kernel that overlaps communication for part of its life ends where its work, done at the two
// rates in turn, adds up; class mode and the symmetric path agree with every rank simulated.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "sim/sim_test_support.h"
#include "system/compute_model.h"

namespace orrery::sim {
namespace compute_overlap_test {

using test::add_attr;
using test::Node;
using test::run_ok;

sys::ComputeModel gpu(uint32_t comm_sms) {
  sys::ComputeModel m;
  m.peak_tflops = 100;
  m.hbm_gbps = 2000;
  m.gemm_efficiency = 0.8;
  m.sms = 100;
  m.tile_m = 0;  // no wave model: a kernel's time is its FLOPs at the SMs' share of the peak
  m.tile_n = 0;
  m.launch_us = 0;
  m.comm_sms = comm_sms;
  return m;
}

Node kernel(uint64_t id, uint64_t flops, std::initializer_list<uint64_t> deps = {}) {
  Node node = test::comp_node(id, deps);
  add_attr(node, "num_ops").set_uint64_val(flops);
  add_attr(node, "tensor_size").set_uint64_val(0);
  return node;
}

test::RunInputs two_ranks(const std::vector<Node>& nodes, uint32_t comm_sms) {
  test::RunInputs in;
  in.traces = test::same_trace(nodes, 2);
  in.system = test::system_json("ring", 1, 1, 1, 10, 1600, "baseline",
                                ", \"roofline-enabled\": 1, \"peak-perf\": 100");
  in.network = test::network_yaml("Ring", "2", "50", "500");
  in.compute = gpu(comm_sms);
  return in;
}

constexpr uint64_t kFlops = 8'000'000'000;  // 100 us at 80 TFLOP/s

// A kernel issued beside an all-reduce (both ready at 0): slowed until the all-reduce ends at C,
// then at full rate. With T alone and S beside communication, it ends at C + (1 - C / S) T.
TEST(ComputeOverlap, a_kernel_beside_a_collective_runs_slower_until_the_collective_ends) {
  const std::vector<Node> nodes = {test::coll_node(1, ChakraProtoMsg::ALL_REDUCE, 1 << 20),
                                   kernel(2, kFlops)};
  const sim::RunResult alone = run_ok(two_ranks(nodes, 0));
  const sim::RunResult slowed = run_ok(two_ranks(nodes, 20));
  // Alone: the kernel takes T = 100 us and outlasts the all-reduce.
  const int64_t t = sys::compute_model_time(gpu(0), kFlops, 0, nullptr).ps();
  const int64_t s =
      sys::compute_model_time(sys::while_communicating(gpu(20)), kFlops, 0, nullptr).ps();
  ASSERT_EQ(t, 100'000'000);
  ASSERT_EQ(s, 125'000'000);  // 80 of 100 SMs
  EXPECT_EQ(alone.rank_results[0].gpu_compute.ps(), t);
  // The all-reduce's end does not depend on the compute beside it.
  const int64_t c = alone.collectives.front().last_finish.ps();
  ASSERT_EQ(slowed.collectives.front().last_finish.ps(), c);
  ASSERT_GT(c, 0);
  ASSERT_LT(c, s);
  const double left = 1.0 - static_cast<double>(c) / static_cast<double>(s);
  const int64_t end = c + std::llround(left * static_cast<double>(t));
  EXPECT_EQ(slowed.rank_results[0].finish.ps(), end);
  EXPECT_EQ(slowed.rank_results[0].gpu_compute.ps(), end);
  EXPECT_GT(end, t);
}

// An all-reduce that starts 40 us into a kernel (after a CPU op) and ends before it: the kernel
// runs alone, beside it, and alone again. Work left: 1 - 40/T, then less C/S, then at T.
TEST(ComputeOverlap, a_collective_starting_and_ending_inside_a_kernel_retimes_it_twice) {
  Node host = test::comp_node(1);
  host.set_duration_micros(40);
  add_attr(host, "is_cpu_op").set_bool_val(true);
  const std::vector<Node> nodes = {
      host, test::coll_node(2, ChakraProtoMsg::ALL_REDUCE, 1 << 20, {1}), kernel(3, kFlops)};
  const sim::RunResult alone = run_ok(two_ranks(nodes, 0));
  const sim::RunResult slowed = run_ok(two_ranks(nodes, 20));
  constexpr int64_t kStart = 40'000'000;
  const int64_t finish = alone.collectives.front().last_finish.ps();
  ASSERT_EQ(alone.collectives.front().first_issue.ps(), kStart);
  ASSERT_EQ(slowed.collectives.front().last_finish.ps(), finish);
  const double c = static_cast<double>(finish - kStart);
  ASSERT_LT(finish, 100'000'000);
  const double left = 1.0 - 40.0 / 100.0 - c / 125'000'000.0;
  const int64_t end = finish + std::llround(left * 100'000'000.0);
  // Each retiming rounds its rest to a picosecond.
  EXPECT_NEAR(static_cast<double>(slowed.rank_results[0].gpu_compute.ps()),
              static_cast<double>(end), 1.0);
  EXPECT_EQ(alone.rank_results[0].gpu_compute.ps(), 100'000'000);
}

// A collective that outlasts the kernel slows all of it; a kernel before any communication, none.
TEST(ComputeOverlap, a_kernel_inside_communication_runs_slowed_throughout_and_one_before_it_not) {
  const uint64_t big = uint64_t{1} << 30;  // ~21 ms on 50 GB/s
  const std::vector<Node> inside = {test::coll_node(1, ChakraProtoMsg::ALL_REDUCE, big),
                                    kernel(2, kFlops)};
  const sim::RunResult r = run_ok(two_ranks(inside, 20));
  EXPECT_EQ(r.rank_results[0].gpu_compute.ps(), 125'000'000);
  const std::vector<Node> before = {kernel(1, kFlops),
                                    test::coll_node(2, ChakraProtoMsg::ALL_REDUCE, big, {1})};
  const sim::RunResult b = run_ok(two_ranks(before, 20));
  EXPECT_EQ(b.rank_results[0].gpu_compute.ps(), 100'000'000);
  EXPECT_EQ(b.rank_results[0].finish, run_ok(two_ranks(before, 0)).rank_results[0].finish);
}

// A data-parallel backward pass: each layer's gradients are all-reduced while the next computes.
// Class mode (two groups on a 2-D network) and every rank simulated give the same ranks.
TEST(ComputeOverlap, class_mode_and_the_symmetric_path_agree_with_every_rank_simulated) {
  std::vector<Node> nodes;
  for (uint64_t layer = 1; layer <= 6; ++layer) {
    nodes.push_back(layer == 1 ? kernel(layer, kFlops * layer)
                               : kernel(layer, kFlops * layer, {layer - 1}));
    nodes.push_back(test::coll_node(100 + layer, ChakraProtoMsg::ALL_REDUCE, 3 << 20, {layer}));
  }
  test::RunInputs in;
  in.traces = test::same_trace(nodes, 8);
  in.system = test::system_json("ring", 2, 4, 1, 10, 1600, "baseline",
                                ", \"roofline-enabled\": 1, \"peak-perf\": 100");
  in.network = test::network_yaml("Ring, Switch", "4, 2", "50, 25", "500, 1000");
  in.compute = gpu(24);
  const sim::RunResult fast = run_ok(in);
  EXPECT_NE(fast.mode, "full") << fast.fast_path_note;
  in.settings.fast_path = false;
  const sim::RunResult full = run_ok(in);
  ASSERT_EQ(full.rank_results.size(), 8u);
  for (uint32_t rank = 0; rank < 8; ++rank) {
    EXPECT_EQ(fast.rank_results[rank].finish, full.rank_results[rank].finish) << rank;
    EXPECT_EQ(fast.rank_results[rank].gpu_compute, full.rank_results[rank].gpu_compute) << rank;
  }
  in.compute = gpu(0);
  const sim::RunResult unslowed = run_ok(in);
  // Every kernel after the first overlaps an all-reduce: compute and the step take longer.
  EXPECT_GT(full.rank_results[0].gpu_compute, unslowed.rank_results[0].gpu_compute);
  EXPECT_GT(full.end, unslowed.end);
  EXPECT_EQ(unslowed.rank_results[0].gpu_compute.ps(), 21 * 100'000'000);
}

}  // namespace compute_overlap_test
}  // namespace orrery::sim
