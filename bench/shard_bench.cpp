// Embedding sharding planner benchmarks (`orrery shard plan`, docs/models/sharding.md).
//
//   BM_ShardPlan/<tables>/<ranks>/<p>  plan_shards on `tables` random tables (rows log-uniform in
//                                      10^3 .. 10^8, dimension 64, 128 or 256, pooling 1 .. 100,
//                                      fp32) over `ranks` GPUs in hosts of 8 (32 GiB HBM, 128 GiB
//                                      DDR, TorchRec's bandwidths), every sharding type and
//                                      kernel; p 0 greedy, 1 memory-balanced. A fixed seed: every
//                                      run plans the same instance. Counters: the rating (ms) and
//                                      its imbalance against the lower bound.
//   BM_ShardEnumerate/<tables>/<ranks> the cost model alone: every option of every table.
//   BM_ShardGap/<instances>            the greedy planner against the exact optimum (GLPK, 10 s
//                                      per instance; those not proven are counted apart) on
//                                      random instances small enough to solve: 6 tables on 2
//                                      hosts of 2, five sharding types, fused or UVM caching, HBM
//                                      for about the tables' size. Counters: the gap (greedy /
//                                      optimum - 1) at the median, 90th percentile and maximum,
//                                      the share of instances where greedy is optimal, and the
//                                      same for placement alone (the greedy's options, placed
//                                      exactly). One iteration: the instances are the study.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "design/shard_planner.h"

namespace orrery::design {
namespace {

ShardProblem random_problem(size_t tables, uint32_t ranks) {
  std::mt19937_64 rng(1000 + tables);
  std::uniform_real_distribution<double> exponent(3.0, 8.0);
  ShardProblem problem;
  problem.cluster.world_size = ranks;
  problem.cluster.local_world_size = std::min<uint32_t>(8, ranks);
  for (size_t index = 0; index < tables; ++index) {
    ShardTable table;
    table.name = fmt::format("t{}", index);
    table.rows = static_cast<uint64_t>(std::pow(10.0, exponent(rng)));
    table.dim = 64u << (rng() % 3);
    table.pooling = static_cast<double>(1 + rng() % 100);
    problem.tables.push_back(table);
  }
  return problem;
}

void BM_ShardPlan(benchmark::State& state) {
  const ShardProblem problem =
      random_problem(static_cast<size_t>(state.range(0)), static_cast<uint32_t>(state.range(1)));
  ShardPlannerOptions options;
  options.partitioner =
      state.range(2) == 0 ? ShardPartitioner::kGreedy : ShardPartitioner::kMemoryBalanced;
  double rating = 0;
  double imbalance = 0;
  for (auto _ : state) {
    Expected<ShardPlan> plan = plan_shards(problem, options);
    if (!plan) {
      state.SkipWithError(plan.error().message().c_str());
      return;
    }
    rating = plan->rating();
    imbalance = plan->rating() / plan->lower_bound();
    benchmark::DoNotOptimize(rating);
  }
  state.counters["rating_ms"] = rating;
  state.counters["imbalance"] = imbalance;
}
BENCHMARK(BM_ShardPlan)
    ->Args({100, 16, 0})
    ->Args({1000, 128, 0})
    ->Args({1000, 128, 1})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

void BM_ShardEnumerate(benchmark::State& state) {
  const ShardProblem problem =
      random_problem(static_cast<size_t>(state.range(0)), static_cast<uint32_t>(state.range(1)));
  const ShardPlannerOptions options;
  for (auto _ : state) {
    size_t shards = 0;
    for (uint32_t t = 0; t < problem.tables.size(); ++t) {
      for (const ShardOption& option : enumerate_shard_options(t, problem.tables[t], options.types,
                                                               options.kernels, problem.cluster)) {
        shards += option.blocks.size();
      }
    }
    benchmark::DoNotOptimize(shards);
  }
}
BENCHMARK(BM_ShardEnumerate)->Args({1000, 128})->Unit(benchmark::kMillisecond);

// The instances of tests/design/shard_planner_test.cpp's comparison, from another seed.
ShardProblem small_problem(std::mt19937_64& rng) {
  ShardProblem problem;
  problem.cluster.world_size = 4;
  problem.cluster.local_world_size = 2;
  uint64_t bytes = 0;
  for (int t = 0; t < 6; ++t) {
    const uint32_t dim = 32u << (rng() % 4);
    const uint64_t rows = 1000 + rng() % 200000;
    problem.tables.push_back(ShardTable{fmt::format("t{}", t), rows, dim,
                                        1.0 + static_cast<double>(rng() % 40), gen::DType::kFp32});
    bytes += rows * dim * 4;
  }
  problem.cluster.hbm_bytes = bytes / 4 + (4ULL << 20);
  return problem;
}

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q * static_cast<double>(values.size() - 1) + 0.5)];
}

void BM_ShardGap(benchmark::State& state) {
  const int instances = static_cast<int>(state.range(0));
  ShardPlannerOptions options;
  options.types = {ShardingType::kTableWise, ShardingType::kRowWise, ShardingType::kColumnWise,
                   ShardingType::kTableRowWise, ShardingType::kDataParallel};
  options.kernels = {ShardKernel::kFused, ShardKernel::kUvmCaching};
  std::vector<double> gaps;
  std::vector<double> placement_gaps;
  int violations = 0;
  int unsolved = 0;
  for (auto _ : state) {
    gaps.clear();
    placement_gaps.clear();
    std::mt19937_64 rng(99);
    for (int instance = 0; instance < instances; ++instance) {
      const ShardProblem problem = small_problem(rng);
      options.partitioner = ShardPartitioner::kGreedy;
      Expected<ShardPlan> greedy = plan_shards(problem, options);
      if (!greedy) continue;
      for (size_t rank = 0; rank < greedy->rank_storage.size(); ++rank) {
        if (!greedy->rank_storage[rank].fits_in(greedy->capacity)) ++violations;
      }
      options.partitioner = ShardPartitioner::kExact;
      options.exact_time_limit_s = 10;
      Expected<ShardPlan> exact = plan_shards(problem, options);
      if (!exact || !exact->proven_optimal) {
        ++unsolved;
        continue;
      }
      gaps.push_back(greedy->rating() / exact->rating() - 1);
      // Placement alone: the greedy's options, placed exactly.
      std::vector<std::vector<ShardOption>> fixed;
      for (const PlacedTable& placed : greedy->tables) fixed.push_back({placed.option});
      Expected<ShardPlan> placed = solve_exact(problem, fixed, greedy->capacity, 10, &*greedy);
      if (placed && placed->proven_optimal) {
        placement_gaps.push_back(greedy->rating() / placed->rating() - 1);
      }
    }
  }
  auto share_optimal = [](const std::vector<double>& values) {
    if (values.empty()) return 0.0;
    return static_cast<double>(
               std::count_if(values.begin(), values.end(), [](double gap) { return gap < 1e-9; })) /
           static_cast<double>(values.size());
  };
  state.counters["solved"] = static_cast<double>(gaps.size());
  state.counters["gap_p50"] = quantile(gaps, 0.5);
  state.counters["gap_p90"] = quantile(gaps, 0.9);
  state.counters["gap_max"] = quantile(gaps, 1.0);
  state.counters["optimal"] = share_optimal(gaps);
  state.counters["place_p50"] = quantile(placement_gaps, 0.5);
  state.counters["place_p90"] = quantile(placement_gaps, 0.9);
  state.counters["place_max"] = quantile(placement_gaps, 1.0);
  state.counters["place_optimal"] = share_optimal(placement_gaps);
  state.counters["memory_violations"] = violations;
  state.counters["unsolved_in_10s"] = unsolved;
}
BENCHMARK(BM_ShardGap)->Arg(200)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace
}  // namespace orrery::design

BENCHMARK_MAIN();
