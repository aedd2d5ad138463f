// Network layer benchmarks: building a million-rank topology, and the two backends under load.
//
//   BM_BuildMillionRankTopology      parse + build FullyConnected(64) x Ring(128) x Switch(128)
//   BM_MillionRanksRingShift/<b>     every one of 2^20 ranks sends 1 MiB to its Ring neighbour at
//                                    once (b = 0 analytical, 1 congestion-aware); reports messages
//                                    and events per second and the memory per rank
//   BM_SwitchIncast                  63 ranks send to one through a Switch, 1000 times
//   BM_AnalyticalDelay               the pure delay function, calls per second
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "core/event_engine.h"
#include "network/analytical_backend.h"
#include "network/network_backend.h"
#include "network/topology_yaml.h"

namespace orrery::net {
namespace {

const char* kMillionRanks =
    "topology: [ FullyConnected, Ring, Switch ]\n"
    "npus_count: [ 64, 128, 128 ]\n"
    "bandwidth: [ 400, 200, 50 ]\n"
    "latency: [ 100, 500, 1000 ]\n";

// Resident memory of this process, in bytes.
double resident_bytes() {
  long pages = 0;
  long resident = 0;
  if (FILE* statm = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(statm, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(statm);
  }
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

Topology million_rank_topology() {
  return std::move(parse_topology_yaml(kMillionRanks, "bench")).value();
}

void BM_BuildMillionRankTopology(benchmark::State& state) {
  size_t memory = 0;
  for (auto _ : state) {
    Expected<Topology> topology = parse_topology_yaml(kMillionRanks, "bench");
    benchmark::DoNotOptimize(topology->link_count());
    memory = topology->memory_bytes();
  }
  state.counters["ranks"] = 1 << 20;
  state.counters["topology_bytes"] = static_cast<double>(memory);
}
BENCHMARK(BM_BuildMillionRankTopology)->Unit(benchmark::kMicrosecond);

class Counter final : public DeliveryListener {
 public:
  void on_delivered(uint64_t token) override { sum += token; }
  uint64_t sum = 0;
};

void BM_MillionRanksRingShift(benchmark::State& state) {
  const char* backend_name = state.range(0) == 0 ? "analytical" : "congestion-aware";
  const Topology topology = million_rank_topology();
  uint64_t messages = 0;
  uint64_t events = 0;
  double memory_delta = 0;
  size_t backend_bytes = 0;
  for (auto _ : state) {
    const double before = resident_bytes();
    EventEngine engine;
    std::unique_ptr<NetworkBackend> backend =
        std::move(make_network_backend(backend_name, engine, topology)).value();
    Counter counter;
    backend->set_listener(counter);
    for (Rank rank = 0; rank < topology.rank_count(); ++rank) {
      const uint32_t next = (topology.coordinate(rank, 1) + 1) % topology.size(1);
      backend->send(rank, topology.peer(rank, 1, next), 1 << 20, rank);
    }
    events += engine.run();
    messages += topology.rank_count();
    backend_bytes = backend->memory_bytes() + engine.queue().memory_bytes();
    memory_delta = resident_bytes() - before;
    benchmark::DoNotOptimize(counter.sum);
  }
  state.counters["messages_per_s"] =
      benchmark::Counter(static_cast<double>(messages), benchmark::Counter::kIsRate);
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["rss_growth_MB"] = memory_delta / 1e6;
  state.counters["state_bytes_per_rank"] =
      static_cast<double>(backend_bytes) / static_cast<double>(topology.rank_count());
}
BENCHMARK(BM_MillionRanksRingShift)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_SwitchIncast(benchmark::State& state) {
  const Topology topology =
      std::move(parse_topology_yaml("topology: [ Switch ]\nnpus_count: [ 64 ]\n"
                                    "bandwidth: [ 400 ]\nlatency: [ 936.25 ]\n",
                                    "bench"))
          .value();
  uint64_t messages = 0;
  for (auto _ : state) {
    EventEngine engine;
    std::unique_ptr<NetworkBackend> backend =
        std::move(make_network_backend("congestion-aware", engine, topology)).value();
    Counter counter;
    backend->set_listener(counter);
    for (int round = 0; round < 1000; ++round) {
      for (Rank src = 1; src < 64; ++src) backend->send(src, 0, 65536, src);
    }
    (void)engine.run();
    messages += 63'000;
    benchmark::DoNotOptimize(counter.sum);
  }
  state.counters["messages_per_s"] =
      benchmark::Counter(static_cast<double>(messages), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SwitchIncast)->Unit(benchmark::kMillisecond);

void BM_AnalyticalDelay(benchmark::State& state) {
  const Topology topology = million_rank_topology();
  Rank src = 12345;
  for (auto _ : state) {
    src = (src * 2654435761u + 1) % topology.rank_count();
    benchmark::DoNotOptimize(
        analytical_delay(topology, src, (src * 7 + 3) % topology.rank_count(), 1 << 20));
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_AnalyticalDelay);

}  // namespace
}  // namespace orrery::net

BENCHMARK_MAIN();
