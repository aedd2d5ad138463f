// Packet-level RoCE backend benchmarks on the reference's 128-NPU two-tier Clos (8 leaves x 16
// NPUs, 8 spines, 200 Gb/s, 5 us and 12.5 us links). Every benchmark reports events per second
// (packet events: ends of serialization, arrivals, PAUSE, timers) as items/s.
//
//   BM_RoceRingStep/<cc>  every NPU sends 1 MiB to the next NPU at once (one step of a ring
//                         all-reduce; 134k data packets and as many ACKs).
//   BM_RoceIncast/<cc>    the 112 NPUs outside leaf 0 send 256 KiB each to NPU 0: PFC pauses
//                         spread through the fabric, congestion control reacts.
// cc: 0 none (PFC only), 1 DCQCN, 2 DCTCP, 3 TIMELY, 4 HPCC.
#include <benchmark/benchmark.h>

#include "bench_support.h"

#include <cstdint>
#include <memory>

#include "core/event_engine.h"
#include "network/generators.h"
#include "network/roce_backend.h"

namespace orrery::net {
namespace {

using Counter = bench::DeliveryCounter;

std::shared_ptr<const Graph> clos128() {
  static const std::shared_ptr<const Graph> graph = [] {
    ClosParams params;
    params.npu_link = {Bandwidth::from_nano_gbps(23'283'064'365), SimTime::from_ns(5000)};
    params.uplink = {Bandwidth::from_nano_gbps(23'283'064'365), SimTime::from_ns(12'500)};
    return std::make_shared<const Graph>(
        std::move(Graph::create(std::move(make_clos2(params).value()))).value());
  }();
  return graph;
}

template <typename Sends>
void run(benchmark::State& state, Sends&& sends) {
  const std::shared_ptr<const Graph> graph = clos128();
  RoceConfig config;
  config.cc = static_cast<CongestionControl>(state.range(0));
  uint64_t events = 0;
  uint64_t pauses = 0;
  for (auto _ : state) {
    EventEngine engine;
    Counter counter;
    RoceBackend backend(engine, graph, *graph->logical_topology(), config);
    backend.set_listener(counter);
    sends(backend);
    events += engine.run();
    pauses += backend.totals().pauses;
    benchmark::DoNotOptimize(counter.delivered);
  }
  state.SetItemsProcessed(static_cast<int64_t>(events));
  state.counters["events"] = static_cast<double>(events) / static_cast<double>(state.iterations());
  state.counters["pauses"] = static_cast<double>(pauses) / static_cast<double>(state.iterations());
  state.SetLabel(std::string(congestion_control_name(config.cc)));
}

void BM_RoceRingStep(benchmark::State& state) {
  run(state, [](RoceBackend& backend) {
    for (Rank r = 0; r < 128; ++r) backend.send(r, (r + 1) % 128, 1 << 20, r);
  });
}
BENCHMARK(BM_RoceRingStep)->DenseRange(0, 4)->Unit(benchmark::kMillisecond);

void BM_RoceIncast(benchmark::State& state) {
  run(state, [](RoceBackend& backend) {
    for (Rank r = 16; r < 128; ++r) backend.send(r, 0, 256 << 10, r);
  });
}
BENCHMARK(BM_RoceIncast)->DenseRange(0, 4)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace orrery::net

BENCHMARK_MAIN();
