// Event engine throughput on a schedule-heavy load (the "hold" model): keep N events pending; each
// handled event schedules one more at now + a random delay. Reports events per second.
//
//   BM_EngineHold/100000       10^7 events through EventEngine (dispatch included), 10^5 pending
//   BM_QueueHold/...           the bare EventQueue (push + pop), for several pending counts
//   BM_QueueHoldNs/...         the same with delays in whole nanoseconds, as runs mostly have
//                              (buckets of one time, moved whole when spread)
//   BM_BinaryHeapHold/...      std::priority_queue of the same 32-byte events, as a baseline
#include <benchmark/benchmark.h>

#include <cstdint>
#include <queue>
#include <vector>

#include "core/event_engine.h"
#include "core/event_queue.h"

namespace orrery {
namespace {

constexpr int64_t kTotalEvents = 10'000'000;
constexpr uint64_t kMaxDelayPs = 1'000'000;  // delays uniform in [0, 1 us)

// splitmix64: a tiny deterministic generator, so the load is the same on every run.
struct Random {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  int64_t delay() { return static_cast<int64_t>(next() % kMaxDelayPs); }
};

class Rescheduler final : public EventHandler {
 public:
  explicit Rescheduler(EventEngine& engine)
      : engine_(engine), id_(engine.register_handler(*this)) {}
  void handle_event(const Event& event) override {
    if (remaining_ == 0) return;
    --remaining_;
    (void)engine_.schedule_after(SimTime::from_ps(random_.delay()), id_, event.kind, event.arg + 1);
  }
  HandlerId id() const { return id_; }
  void set_remaining(int64_t remaining) { remaining_ = remaining; }
  Random& random() { return random_; }

 private:
  EventEngine& engine_;
  HandlerId id_;
  int64_t remaining_ = 0;
  Random random_{42};
};

void BM_EngineHold(benchmark::State& state) {
  const int64_t pending = state.range(0);
  int64_t handled = 0;
  for (auto _ : state) {
    state.PauseTiming();
    EventEngine engine;
    Rescheduler handler(engine);
    for (int64_t idx = 0; idx < pending; ++idx) {
      (void)engine.schedule_at(SimTime::from_ps(handler.random().delay()), handler.id(), 0, 0);
    }
    handler.set_remaining(kTotalEvents - pending);
    state.ResumeTiming();
    handled += static_cast<int64_t>(engine.run());
  }
  state.SetItemsProcessed(handled);
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(handled), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EngineHold)->Arg(100'000)->Unit(benchmark::kMillisecond)->UseRealTime();

void queue_hold(benchmark::State& state, int64_t unit_ps) {
  const int64_t pending = state.range(0);
  int64_t handled = 0;
  for (auto _ : state) {
    state.PauseTiming();
    EventQueue queue;
    Random random{42};
    for (int64_t idx = 0; idx < pending; ++idx) {
      Event event;
      event.time = SimTime::from_ps(random.delay() / unit_ps * unit_ps);
      (void)queue.push(event);
    }
    state.ResumeTiming();
    for (int64_t idx = 0; idx < kTotalEvents; ++idx) {
      Event event = queue.pop();
      event.time = event.time + SimTime::from_ps(random.delay() / unit_ps * unit_ps);
      (void)queue.push(event);
    }
    benchmark::DoNotOptimize(queue.size());
    handled += kTotalEvents;
  }
  state.SetItemsProcessed(handled);
}
void BM_QueueHold(benchmark::State& state) { queue_hold(state, 1); }
BENCHMARK(BM_QueueHold)
    ->Arg(1'000)
    ->Arg(100'000)
    ->Arg(1'000'000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_QueueHoldNs(benchmark::State& state) { queue_hold(state, 1000); }
BENCHMARK(BM_QueueHoldNs)->Arg(1'000)->Arg(100'000)->Unit(benchmark::kMillisecond)->UseRealTime();

struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return a.time != b.time ? a.time > b.time : a.seq > b.seq;
  }
};

void BM_BinaryHeapHold(benchmark::State& state) {
  const int64_t pending = state.range(0);
  int64_t handled = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<Event> storage;
    storage.reserve(static_cast<size_t>(pending) + 1);
    std::priority_queue<Event, std::vector<Event>, Later> heap(Later{}, std::move(storage));
    Random random{42};
    uint64_t seq = 0;
    for (int64_t idx = 0; idx < pending; ++idx) {
      Event event;
      event.time = SimTime::from_ps(random.delay());
      event.seq = seq++;
      heap.push(event);
    }
    state.ResumeTiming();
    for (int64_t idx = 0; idx < kTotalEvents; ++idx) {
      Event event = heap.top();
      heap.pop();
      event.time = event.time + SimTime::from_ps(random.delay());
      event.seq = seq++;
      heap.push(event);
    }
    benchmark::DoNotOptimize(heap.size());
    handled += kTotalEvents;
  }
  state.SetItemsProcessed(handled);
}
BENCHMARK(BM_BinaryHeapHold)->Arg(100'000)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace orrery

BENCHMARK_MAIN();
