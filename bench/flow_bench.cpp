// Flow backend benchmarks: thousands of concurrent flows sharing a k = 16 fat-tree (1,024 NPUs)
// by max-min fairness.
//
//   BM_FlowRandom/<F>      F flows between random NPU pairs, random sizes (64 KiB .. 4 MiB), all
//                          started at once and run to completion: every departure is its own
//                          rate recomputation. Reports flows/s and recomputations/s.
//   BM_FlowPermutation/<F> F/1024 rounds of a random permutation (every NPU sends once per round,
//                          equal sizes): departures of a round mostly coincide.
//   BM_FlowRailAllToAll/<R> every GPU of a 1,024-GPU rail-optimized fat-tree (R:1 oversubscribed)
//                          sends 1 MiB to each of the 127 GPUs of its rail at once (130,048
//                          concurrent flows).
#include <benchmark/benchmark.h>

#include "bench_support.h"

#include <algorithm>
#include <cstdint>
#include <memory>

#include "core/event_engine.h"
#include "network/flow_backend.h"
#include "network/generators.h"

namespace orrery::net {
namespace {

using Counter = bench::DeliveryCounter;

std::shared_ptr<const Graph> fat_tree16() {
  static const std::shared_ptr<const Graph> graph = std::make_shared<const Graph>(
      std::move(Graph::create(std::move(make_fat_tree(16, {}).value()))).value());
  return graph;
}

uint64_t lcg(uint64_t& state) {
  state = state * 6364136223846793005ULL + 1442695040888963407ULL;
  return state >> 33;
}

void run_flows(benchmark::State& state, const std::shared_ptr<const Graph>& graph,
               bool permutation) {
  const auto flows = static_cast<uint64_t>(state.range(0));
  uint64_t recomputations = 0;
  uint64_t visited = 0;
  for (auto _ : state) {
    EventEngine engine;
    Counter counter;
    FlowBackend backend(engine, graph, *graph->logical_topology());
    backend.set_listener(counter);
    uint64_t seed = 12345;
    const uint32_t npus = graph->npu_count();
    if (permutation) {
      std::vector<Rank> perm(npus);
      for (uint64_t sent = 0; sent < flows;) {
        for (Rank r = 0; r < npus; ++r) perm[r] = r;
        for (Rank r = npus - 1; r > 0; --r) std::swap(perm[r], perm[lcg(seed) % (r + 1)]);
        for (Rank r = 0; r < npus && sent < flows; ++r, ++sent) {
          backend.send(r, perm[r] == r ? (r + 1) % npus : perm[r], 1 << 20, sent);
        }
      }
    } else {
      for (uint64_t f = 0; f < flows; ++f) {
        const auto src = static_cast<Rank>(lcg(seed) % npus);
        auto dst = static_cast<Rank>(lcg(seed) % npus);
        if (dst == src) dst = (dst + 1) % npus;
        backend.send(src, dst, (64u << 10) + lcg(seed) % (4u << 20), f);
      }
    }
    engine.run();
    recomputations = backend.recomputations();
    visited = backend.flows_visited();
    benchmark::DoNotOptimize(counter.delivered);
  }
  state.SetItemsProcessed(static_cast<int64_t>(static_cast<uint64_t>(state.iterations()) * flows));
  state.counters["recomputations"] = static_cast<double>(recomputations);
  state.counters["rerated_per_recomputation"] =
      static_cast<double>(visited) / static_cast<double>(std::max<uint64_t>(1, recomputations));
  state.counters["recomputations_per_s"] = benchmark::Counter(
      static_cast<double>(recomputations) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}

void BM_FlowRandom(benchmark::State& state) { run_flows(state, fat_tree16(), false); }
BENCHMARK(BM_FlowRandom)->Arg(1024)->Arg(4096)->Unit(benchmark::kMillisecond);

void BM_FlowPermutation(benchmark::State& state) { run_flows(state, fat_tree16(), true); }
BENCHMARK(BM_FlowPermutation)->Arg(4096)->Arg(65536)->Unit(benchmark::kMillisecond);

void BM_FlowRailAllToAll(benchmark::State& state) {
  RailParams params;
  params.oversubscription = static_cast<double>(state.range(0));
  const auto graph = std::make_shared<const Graph>(
      std::move(Graph::create(std::move(make_rail_optimized(params).value()))).value());
  uint64_t flows = 0;
  uint64_t recomputations = 0;
  double finish_us = 0;
  for (auto _ : state) {
    EventEngine engine;
    Counter counter;
    FlowBackend backend(engine, graph, *graph->logical_topology());
    backend.set_listener(counter);
    flows = 0;
    for (Rank src = 0; src < 1024; ++src) {
      for (Rank dst = src % 8; dst < 1024; dst += 8) {
        if (dst != src) backend.send(src, dst, 1 << 20, flows++);
      }
    }
    engine.run();
    recomputations = backend.recomputations();
    finish_us = static_cast<double>(engine.now().ps()) / 1e6;
    benchmark::DoNotOptimize(counter.delivered);
  }
  state.SetItemsProcessed(static_cast<int64_t>(static_cast<uint64_t>(state.iterations()) * flows));
  state.counters["simulated_us"] = finish_us;
  state.counters["flows"] = static_cast<double>(flows);
  state.counters["recomputations"] = static_cast<double>(recomputations);
}
// Arg(4), 4:1 oversubscribed, spreads departures over thousands of distinct instants: the case
// incremental recomputation is for (docs/network.md).
BENCHMARK(BM_FlowRailAllToAll)->Arg(1)->Arg(4)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace orrery::net

BENCHMARK_MAIN();
