// The plan axes of `orrery sweep` that change the schedule and the memory: schedule and virtual
// stages (interleaving cuts the pipeline bubble, the rules refuse what the generator refuses), and
// offload to a memory expansion tier (the closed forms of design/sweep_cost.h, the tier's cost,
// `auto` choosing the fastest set that fits, a set without a tier refused).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "design/sweep_cost.h"
#include "design/sweep_eval.h"
#include "design/sweep_file.h"
#include "design/sweep_space.h"

namespace orrery::design {
namespace sweep_plan_test {

const std::string kData = std::string(ORRERY_TEST_DATA_DIR) + "/sweep/";

// A sweep of tests/data/sweep/small_model.json (8 layers) on 16 accelerators, 4 x 4, with `plan`
// and `cluster_extra` (YAML lines under cluster:) as given.
Expected<SweepSpec> sweep_of(const std::string& cluster_extra, const std::string& plan,
                             const std::string& costs = "  accelerator: 10000\n") {
  const std::string text =
      "name: plan-test\n"
      "workload:\n  llm: " +
      kData +
      "small_model.json\n  global_batch: 16\n"
      "cluster:\n  accelerators: 16\n  peak_tflops: 312\n  efficiency: 0.6\n"
      "  hbm_bandwidth: 2039\n"
      "  network:\n"
      "    - {topology: Switch, size: 4, bandwidth: 300, latency: 700}\n"
      "    - {topology: Ring, size: rest, bandwidth: 25, latency: 3000}\n" +
      cluster_extra + "costs:\n" + costs + "plan:\n" + plan;
  return parse_sweep_file("plan.yml", text);
}

std::vector<std::pair<SweepPoint, PointResult>> evaluate_all(const SweepSpec& spec) {
  Expected<std::vector<SweepPoint>> points = expand_sweep(spec);
  EXPECT_TRUE(points) << points.error().message();
  std::vector<std::pair<SweepPoint, PointResult>> out;
  if (!points) return out;
  for (const SweepPoint& point : *points) out.emplace_back(point, evaluate_point(spec, point, 1));
  return out;
}

// ---- schedule and virtual stages -------------------------------------------------------------

TEST(SweepPlan, interleaving_cuts_the_bubble_and_keeps_the_compute) {
  // dp 2, 8 micro-batches per pipeline of 2 stages; `all` virtual stages: v in {2, 4}
  // (pp x v divides the 8 layers; 3 does not).
  Expected<SweepSpec> spec = sweep_of("  hbm_capacity: 16GiB\n",
                                      "  tp: [4]\n  pp: [2]\n  micro_batch: [1]\n"
                                      "  schedule: [1f1b, interleaved]\n  virtual_stages: all\n");
  ASSERT_TRUE(spec) << spec.error().message();
  std::map<std::pair<std::string, uint32_t>, PointResult> by_plan;
  for (const auto& [point, result] : evaluate_all(*spec)) {
    ASSERT_EQ(result.status, PointStatus::kOk) << result.reason;
    by_plan[{point.plan.schedule, point.plan.virtual_stages}] = result;
  }
  ASSERT_EQ(by_plan.size(), 3u);
  const PointResult& plain = by_plan.at({"1f1b", 1});
  const PointResult& v2 = by_plan.at({"interleaved", 2});
  const PointResult& v4 = by_plan.at({"interleaved", 4});
  // The same layers and micro-batches: the same compute per iteration.
  EXPECT_DOUBLE_EQ(v2.compute_ns, plain.compute_ns);
  EXPECT_DOUBLE_EQ(v4.compute_ns, plain.compute_ns);
  // Megatron-LM's bubble (p - 1) / (m v) of the 1F1B one: smaller with every extra chunk.
  EXPECT_GT(plain.bubble_ns, 0);
  EXPECT_LT(v2.bubble_ns, plain.bubble_ns);
  EXPECT_LT(v4.bubble_ns, v2.bubble_ns);
  // Each chunk boundary is a pipeline send: interleaving sends v times as many activations.
  EXPECT_GT(v2.events, plain.events);
}

TEST(SweepPlan, the_rules_refuse_schedules_the_generator_refuses) {
  // Listed values are points too, refused with the generator's rule. `gen llm` spreads layers
  // unevenly over chunks (pp 2 x v 3 of 8 layers runs); `all` keeps the even splits only.
  Expected<SweepSpec> spec = sweep_of("  hbm_capacity: 16GiB\n",
                                      "  tp: [4]\n  pp: [1, 2]\n  micro_batch: [1]\n"
                                      "  schedule: [interleaved]\n  virtual_stages: [3, 5]\n");
  ASSERT_TRUE(spec) << spec.error().message();
  std::map<std::pair<uint32_t, uint32_t>, PointResult> by_plan;
  for (const auto& [point, result] : evaluate_all(*spec)) {
    by_plan[{point.plan.pp, point.plan.virtual_stages}] = result;
  }
  ASSERT_EQ(by_plan.size(), 4u);
  for (const uint32_t v : {3u, 5u}) {
    EXPECT_EQ(by_plan.at({1, v}).status, PointStatus::kRejected);
    EXPECT_NE(by_plan.at({1, v}).reason.find("--schedule interleaved needs --pp 2 or more"),
              std::string::npos)
        << by_plan.at({1, v}).reason;
  }
  EXPECT_EQ(by_plan.at({2, 3}).status, PointStatus::kOk) << by_plan.at({2, 3}).reason;
  EXPECT_EQ(by_plan.at({2, 5}).status, PointStatus::kRejected);
  EXPECT_NE(by_plan.at({2, 5}).reason.find(
                "--pp 2 x --virtual-stages 5 = 10 pipeline stages exceed the 8 layers"),
            std::string::npos)
      << by_plan.at({2, 5}).reason;
  // `all` with nothing allowed leaves one point that says why.
  Expected<SweepSpec> none = sweep_of("  hbm_capacity: 16GiB\n",
                                      "  tp: [1]\n  pp: [8]\n  micro_batch: [1]\n"
                                      "  schedule: [interleaved]\n  virtual_stages: all\n");
  ASSERT_TRUE(none) << none.error().message();
  const auto refused = evaluate_all(*none);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].second.status, PointStatus::kRejected);
  EXPECT_NE(refused[0].second.reason.find(
                "no virtual stage count v >= 2 has pp 8 x v dividing the 8 layers"),
            std::string::npos)
      << refused[0].second.reason;
}

// ---- offload and the expansion tier ----------------------------------------------------------

gen::StageMemory stage_memory() {
  gen::StageMemory stage;
  stage.in_flight = 4;
  stage.memory.weights = 8'000;
  stage.memory.gradients = 4'000;
  stage.memory.optimizer = 48'000;
  stage.memory.activations = 64'000;
  return stage;
}

TEST(SweepCost, each_offloaded_part_leaves_two_blocks_in_hbm_and_moves_as_documented) {
  const gen::StageMemory stage = stage_memory();
  const uint64_t total = 8'000 + 4'000 + 48'000 + 64'000;
  const StageOffload none = stage_offload(stage, 0, 4, 10, false);
  EXPECT_EQ(none.hbm, total);
  EXPECT_EQ(none.tier, 0u);
  EXPECT_EQ(none.overlapped + none.exposed, 0u);

  // Optimizer: two of the 4 layers' blocks stay; read and written once per step.
  const StageOffload opt = stage_offload(stage, kOffloadOptimizer, 4, 10, false);
  EXPECT_EQ(opt.hbm, total - 48'000 + 2 * 48'000 / 4);
  EXPECT_EQ(opt.tier, 48'000u);
  EXPECT_EQ(opt.exposed, 2u * 48'000);
  EXPECT_EQ(opt.exposed_accesses, 2u * 4);
  EXPECT_EQ(opt.overlapped, 0u);

  // Weights and gradients: forward, backward and (recomputation) the forward again read the
  // weights; the backward reads and writes the gradients; per micro-batch, per layer.
  const StageOffload weights = stage_offload(stage, kOffloadWeights, 4, 10, true);
  EXPECT_EQ(weights.hbm, total - 12'000 + 2 * 12'000 / 4);
  EXPECT_EQ(weights.tier, 12'000u);
  EXPECT_EQ(weights.overlapped, 10u * (3 * 8'000 + 2 * 4'000));
  EXPECT_EQ(weights.overlapped_accesses, 10u * 4 * (3 + 2));
  EXPECT_EQ(stage_offload(stage, kOffloadWeights, 4, 10, false).overlapped,
            10u * (2 * 8'000 + 2 * 4'000));

  // Activations: two layers of one micro-batch stay; written after each forward, read before
  // each backward.
  const StageOffload acts = stage_offload(stage, kOffloadActivations, 4, 10, false);
  EXPECT_EQ(acts.hbm, total - 64'000 + 2 * 64'000 / (4 * 4));
  EXPECT_EQ(acts.tier, 64'000u);
  EXPECT_EQ(acts.overlapped, 2u * 10 * (64'000 / 4));
  EXPECT_EQ(acts.overlapped_accesses, 2u * 10 * 4);

  // The parts add up.
  const StageOffload all = stage_offload(stage, kOffloadAll, 4, 10, true);
  EXPECT_EQ(all.tier, 48'000u + 12'000 + 64'000);
  EXPECT_EQ(all.overlapped, weights.overlapped + acts.overlapped);
  EXPECT_EQ(all.exposed, opt.exposed);
  EXPECT_EQ(all.hbm, 2 * 48'000 / 4 + 2 * 12'000 / 4 + 2 * 64'000 / 16);
}

TEST(SweepCost, the_tier_exposes_what_compute_does_not_hide_and_all_of_the_step) {
  StageOffload offload;
  offload.overlapped = 1'000'000;  // 100 accesses of 10,000 bytes
  offload.overlapped_accesses = 100;
  offload.exposed = 64'000;  // 8 accesses of 8,000 bytes
  offload.exposed_accesses = 8;
  // 10 GB/s shared by 2: 5 bytes per ns. Access: 500 ns + bytes / 5.
  const double overlapped = 100 * (500 + 10'000 / 5.0);
  const double exposed = 8 * (500 + 8'000 / 5.0);
  EXPECT_DOUBLE_EQ(offload_time_ns(offload, 0, 10, 500, 2), overlapped + exposed);
  EXPECT_DOUBLE_EQ(offload_time_ns(offload, 100'000, 10, 500, 2), overlapped - 100'000 + exposed);
  // Compute longer than the streaming hides all of it; the optimizer step never hides.
  EXPECT_DOUBLE_EQ(offload_time_ns(offload, 1e9, 10, 500, 2), exposed);
  // Alone on the device, twice the bandwidth.
  EXPECT_DOUBLE_EQ(offload_time_ns(offload, 1e9, 10, 500, 1), 8 * (500 + 8'000 / 10.0));
}

TEST(SweepPlan, auto_offload_picks_the_fastest_set_that_fits_and_the_tier_is_priced) {
  // 512 MiB of HBM does not hold tp 1 x pp 1 of the small model with ZeRO 0; a 64 GiB tier
  // shared by 2 does.
  Expected<SweepSpec> spec = sweep_of(
      "  hbm_capacity: 512MiB\n"
      "  expansion: {capacity: 64GiB, bandwidth: 100, latency: 500, shared_by: 2}\n",
      "  tp: [1]\n  pp: [1]\n  micro_batch: [1]\n"
      "  offload: [none, optimizer, activations, weights, optimizer+activations, "
      "optimizer+weights, activations+weights, all, auto]\n",
      "  accelerator: 10000\n  hbm_per_gib: 20\n  expansion_per_gib: 5\n"
      "  expansion_per_gbps: 2\n");
  ASSERT_TRUE(spec) << spec.error().message();
  const auto results = evaluate_all(*spec);
  ASSERT_EQ(results.size(), 9u);
  const PointResult* automatic = nullptr;
  const PointResult* fastest = nullptr;
  double simulated = -1;
  for (const auto& [point, result] : results) {
    // Priced per accelerator: HBM, and the device's capacity and bandwidth over its sharers.
    EXPECT_DOUBLE_EQ(result.cost, 16 * (10000 + 20 * 0.5 + (5 * 64.0 + 2 * 100.0) / 2))
        << offload_name(point.plan.offload);
    if (point.plan.offload.automatic) {
      automatic = &result;
      continue;
    }
    if (point.plan.offload.set == 0) {
      EXPECT_EQ(result.status, PointStatus::kRejected);
      EXPECT_GT(result.need_bytes, uint64_t{512} << 20);
      continue;
    }
    if (result.status != PointStatus::kOk) continue;
    EXPECT_LE(result.hbm_bytes, uint64_t{512} << 20) << result.offloaded;
    EXPECT_LE(result.expansion_bytes, uint64_t{32} << 30) << result.offloaded;
    EXPECT_GT(result.offload_ns, 0) << result.offloaded;
    // Offloading changes no simulation: the points share one, plus their own tier time.
    if (simulated < 0) simulated = result.iteration_ns - result.offload_ns;
    EXPECT_DOUBLE_EQ(result.iteration_ns - result.offload_ns, simulated) << result.offloaded;
    if (fastest == nullptr || result.iteration_ns < fastest->iteration_ns) fastest = &result;
  }
  ASSERT_NE(automatic, nullptr);
  ASSERT_NE(fastest, nullptr) << "no offload set fits";
  ASSERT_EQ(automatic->status, PointStatus::kOk) << automatic->reason;
  EXPECT_EQ(automatic->offloaded, fastest->offloaded);
  EXPECT_DOUBLE_EQ(automatic->iteration_ns, fastest->iteration_ns);
}

TEST(SweepPlan, an_offload_set_without_a_tier_is_refused) {
  Expected<SweepSpec> spec =
      sweep_of("  hbm_capacity: 16GiB\n", "  tp: [4]\n  pp: [1]\n  offload: [optimizer]\n");
  ASSERT_TRUE(spec) << spec.error().message();
  const auto results = evaluate_all(*spec);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].second.status, PointStatus::kRejected);
  EXPECT_NE(results[0].second.reason.find(
                "offload optimizer needs an expansion tier (its capacity is 0)"),
            std::string::npos)
      << results[0].second.reason;
}

}  // namespace sweep_plan_test
}  // namespace orrery::design
