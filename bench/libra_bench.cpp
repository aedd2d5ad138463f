// LIBRA solver benchmarks (`orrery libra`, docs/models/libra.md): how long a certified optimum
// takes.
//
//   BM_LibraWorkload/<w>/<d>  LIBRA's own workloads (w: 0 GPT-3, 1 MSFT-1T, 2 ResNet-50) on its
//                             4,096-NPU networks (d: 3 or 4 dimensions), sum = 500 GB/s: the solve
//                             (SLSQP and the GLPK cutting-plane bound). Needs ../shared/data.
//   BM_LibraRandom/<D>        random convex instances of D dimensions (Ring, FullyConnected and
//                             Switch of 2 to 8 NPUs): 8 layers of random collectives over random
//                             subsets of the dimensions, sum = 500 and B0 >= B1. Fixed seed, so
//                             every run solves the same instances.
// Counters: the certificate's relative gap, the distinct collectives the solver sees and NLopt's
// objective evaluations.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "design/libra_input.h"
#include "design/libra_model.h"
#include "design/libra_solver.h"

namespace orrery::design {
namespace {

const char* const kWorkloads[] = {"GPT_3", "MSFT_1T", "ResNet_50"};

Expected<Problem> libra_problem(int workload, int dims) {
  const std::string root = std::string(ORRERY_SHARED_DATA_DIR) + "/astra-sim+libra/inputs/";
  Problem problem;
  auto network = load_libra_network(fmt::format("{}network/{}d_network.yml", root, dims));
  if (!network) return network.error();
  problem.dimensions = std::move(*network);
  auto layers = load_libra_workload(fmt::format("{}workload/{}.txt", root, kWorkloads[workload]));
  if (!layers) return layers.error();
  problem.layers = std::move(*layers);
  auto groups = load_libra_communicator(
      fmt::format("{}communicator/{}_{}d.yml", root, kWorkloads[workload], dims));
  if (!groups) return groups.error();
  apply_communicator(*groups, problem.layers);
  auto sum = parse_constraint("sum = 500", problem.dimensions.size());
  if (!sum) return sum.error();
  problem.constraints.push_back(*sum);
  return problem;
}

void solve_loop(benchmark::State& state, const Problem& problem) {
  Expected<TrafficModel> model = build_traffic_model(problem);
  if (!model) {
    state.SkipWithError(model.error().message().c_str());
    return;
  }
  double gap = 0;
  double evaluations = 0;
  for (auto _ : state) {
    Expected<Solution> solution = solve(problem);
    if (!solution) {
      state.SkipWithError(solution.error().message().c_str());
      return;
    }
    gap = solution->certificate.gap;
    evaluations = solution->evaluations;
    benchmark::DoNotOptimize(solution->optimum.time_ns);
  }
  state.counters["gap"] = gap;
  state.counters["evaluations"] = evaluations;
  state.counters["collectives"] = static_cast<double>(model->collectives.size());
}

void BM_LibraWorkload(benchmark::State& state) {
  const auto workload = static_cast<int>(state.range(0));
  const auto dims = static_cast<int>(state.range(1));
  state.SetLabel(fmt::format("{} {}-D", kWorkloads[workload], dims));
  Expected<Problem> problem = libra_problem(workload, dims);
  if (!problem) {
    state.SkipWithError(problem.error().message().c_str());
    return;
  }
  solve_loop(state, *problem);
}
BENCHMARK(BM_LibraWorkload)->ArgsProduct({{0, 1, 2}, {3, 4}})->Unit(benchmark::kMillisecond);

struct Random {
  uint64_t state;
  double uniform() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(state >> 11) / 9007199254740992.0;
  }
};

Problem random_problem(size_t dims, uint64_t seed) {
  Random random{seed};
  Problem problem;
  const TopologyKind kinds[] = {TopologyKind::kRing, TopologyKind::kFullyConnected,
                                TopologyKind::kSwitch};
  const uint32_t sizes[] = {2, 4, 8};
  for (size_t d = 0; d < dims; ++d) {
    problem.dimensions.push_back(
        {kinds[d % 3], sizes[static_cast<size_t>(random.uniform() * 3)], ""});
  }
  const CollectiveKind collectives[] = {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter,
                                        CollectiveKind::kAllGather, CollectiveKind::kAllToAll};
  for (int l = 0; l < 8; ++l) {
    Layer layer;
    layer.name = fmt::format("l{}", l);
    for (Phase& phase : layer.phases) {
      phase.compute_ns = 1e6 * random.uniform();
      phase.collective = collectives[static_cast<size_t>(random.uniform() * 4)];
      phase.bytes = 1e8 * (0.1 + random.uniform());
      for (const Dimension& d : problem.dimensions) {
        phase.groups.push_back(random.uniform() < 0.6 ? static_cast<int32_t>(d.size) : -1);
      }
    }
    problem.layers.push_back(std::move(layer));
  }
  problem.constraints.push_back(*parse_constraint("sum = 500", dims));
  problem.constraints.push_back(*parse_constraint("B0 >= B1", dims));
  return problem;
}

void BM_LibraRandom(benchmark::State& state) {
  const auto dims = static_cast<size_t>(state.range(0));
  solve_loop(state, random_problem(dims, 20261129 + dims));
}
BENCHMARK(BM_LibraRandom)
    ->DenseRange(2, 6, 1)
    ->Arg(8)
    ->Arg(12)
    ->Arg(16)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace orrery::design

BENCHMARK_MAIN();
