// The event queue hands events back in time order, FIFO among equal times, whatever the mix of
// pushes and pops, checked against a sorted reference.
#include "core/event_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

namespace orrery {
namespace event_queue_test {

Event at_ps(int64_t ps, uint64_t arg = 0) {
  Event event;
  event.time = SimTime::from_ps(ps);
  event.arg = arg;
  return event;
}

TEST(EventQueue, events_come_out_in_time_order) {
  EventQueue queue;
  std::mt19937_64 rng(7);
  std::vector<int64_t> times;
  for (int idx = 0; idx < 10000; ++idx) {
    const auto time = static_cast<int64_t>(rng() % 1'000'000'000'000ULL);
    times.push_back(time);
    (void)queue.push(at_ps(time));
  }
  std::sort(times.begin(), times.end());
  for (const int64_t expected : times) {
    ASSERT_FALSE(queue.empty());
    EXPECT_EQ(queue.next_time().ps(), expected);
    EXPECT_EQ(queue.pop().time.ps(), expected);
  }
  EXPECT_TRUE(queue.empty());
}

TEST(EventQueue, equal_times_come_out_in_insertion_order) {
  EventQueue queue;
  // Interleave two times so that both ties get spread from higher buckets, not only pushed to the
  // current one.
  for (uint64_t idx = 0; idx < 1000; ++idx) {
    (void)queue.push(at_ps(idx % 2 == 0 ? 5000 : 9000, idx));
  }
  uint64_t last_even = 0;
  uint64_t last_odd = 1;
  for (int idx = 0; idx < 500; ++idx) {
    const Event event = queue.pop();
    EXPECT_EQ(event.time.ps(), 5000);
    if (idx > 0) {
      EXPECT_EQ(event.arg, last_even + 2);
    }
    last_even = event.arg;
  }
  for (int idx = 0; idx < 500; ++idx) {
    const Event event = queue.pop();
    EXPECT_EQ(event.time.ps(), 9000);
    if (idx > 0) {
      EXPECT_EQ(event.arg, last_odd + 2);
    }
    last_odd = event.arg;
  }
}

TEST(EventQueue, sequence_numbers_count_pushes) {
  EventQueue queue;
  EXPECT_EQ(queue.push(at_ps(10)), 0u);
  EXPECT_EQ(queue.push(at_ps(3)), 1u);
  EXPECT_EQ(queue.push(at_ps(3)), 2u);
  EXPECT_EQ(queue.pushed(), 3u);
  EXPECT_EQ(queue.pop().seq, 1u);
  EXPECT_EQ(queue.pop().seq, 2u);
  EXPECT_EQ(queue.pop().seq, 0u);
}

// A model of the contract: a set ordered by (time, seq). Delays in whole nanoseconds, as runs
// mostly have, leave buckets whose events share one time (moved whole when spread); picoseconds
// and wide spreads mix times in a bucket.
TEST(EventQueue, interleaved_pushes_and_pops_match_a_sorted_reference) {
  struct Load {
    uint64_t spread;
    int64_t unit;
  };
  for (const Load load : {Load{1, 1}, Load{16, 1}, Load{1000, 1}, Load{1ULL << 40, 1},
                          Load{4, 1000}, Load{3000, 1000}, Load{1ULL << 24, 1000}}) {
    const uint64_t spread = load.spread;
    EventQueue queue;
    std::set<std::pair<int64_t, uint64_t>> reference;
    std::mt19937_64 rng(spread * 1000 + static_cast<uint64_t>(load.unit));
    int64_t now = 0;
    for (int step = 0; step < 200000; ++step) {
      if (reference.empty() || rng() % 3 != 0) {
        const auto time = now + static_cast<int64_t>(rng() % spread) * load.unit;
        const uint64_t seq = queue.push(at_ps(time));
        reference.emplace(time, seq);
      } else {
        ASSERT_EQ(queue.next_time().ps(), reference.begin()->first) << "step " << step;
        const Event event = queue.pop();
        const auto expected = *reference.begin();
        reference.erase(reference.begin());
        ASSERT_EQ(event.time.ps(), expected.first) << "spread " << spread << " step " << step;
        ASSERT_EQ(event.seq, expected.second) << "spread " << spread << " step " << step;
        now = event.time.ps();
      }
      ASSERT_EQ(queue.size(), reference.size());
    }
  }
}

TEST(EventQueue, times_across_the_whole_int64_range_keep_their_order) {
  EventQueue queue;
  const int64_t huge = int64_t{1} << 62;
  const std::vector<int64_t> times = {huge + 5, 0, huge, 255, 256, huge + 5, 65536, INT64_MAX, 1};
  for (size_t idx = 0; idx < times.size(); ++idx) (void)queue.push(at_ps(times[idx], idx));
  std::vector<std::pair<int64_t, uint64_t>> expected;
  for (size_t idx = 0; idx < times.size(); ++idx) expected.emplace_back(times[idx], idx);
  std::stable_sort(expected.begin(), expected.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [time, arg] : expected) {
    const Event event = queue.pop();
    EXPECT_EQ(event.time.ps(), time);
    EXPECT_EQ(event.arg, arg);
  }
}

TEST(EventQueue, pop_not_after_leaves_later_events_and_accepts_earlier_pushes) {
  EventQueue queue;
  (void)queue.push(at_ps(100));
  (void)queue.push(at_ps(1000));
  Event event;
  ASSERT_TRUE(queue.pop_not_after(SimTime::from_ps(500), event));
  EXPECT_EQ(event.time.ps(), 100);
  EXPECT_FALSE(queue.pop_not_after(SimTime::from_ps(500), event));
  // The queue did not move its base past 500: an event at 600 still goes before the one at 1000.
  (void)queue.push(at_ps(600));
  EXPECT_EQ(queue.pop().time.ps(), 600);
  EXPECT_EQ(queue.pop().time.ps(), 1000);
}

TEST(EventQueue, memory_stays_at_the_peak_of_pending_events) {
  EventQueue queue;
  // A million events all at one time, handled one "round" after another at later times: the pool
  // must not keep a copy per bucket visited.
  constexpr int kEvents = 1 << 20;
  for (int idx = 0; idx < kEvents; ++idx) (void)queue.push(at_ps(0));
  const size_t after_fill = queue.memory_bytes();
  for (int64_t round = 1; round <= 20; ++round) {
    for (int idx = 0; idx < kEvents; ++idx) {
      const Event event = queue.pop();
      (void)queue.push(at_ps(event.time.ps() + 1000));
    }
  }
  EXPECT_EQ(queue.size(), static_cast<size_t>(kEvents));
  EXPECT_LE(queue.memory_bytes(), after_fill + after_fill / 8);
}

}  // namespace event_queue_test
}  // namespace orrery
