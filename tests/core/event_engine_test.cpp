// The event engine: dispatch to registered handlers, run and run_until, stop, and independence of
// two engines in one process.
#include "core/event_engine.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace orrery {
namespace event_engine_test {

// Records what it receives, and can reschedule itself `hops` times, `step` apart.
class Recorder final : public EventHandler {
 public:
  explicit Recorder(EventEngine& engine) : engine_(engine), id_(engine.register_handler(*this)) {}

  void handle_event(const Event& event) override {
    EXPECT_EQ(engine_.now(), event.time);
    seen.push_back({engine_.now().ps(), event.kind, event.arg});
    if (event.kind == kBounce && event.arg > 0) {
      (void)engine_.schedule_after(step, id_, kBounce, event.arg - 1);
    }
    if (event.kind == kStop) engine_.stop();
  }

  HandlerId id() const { return id_; }

  struct Seen {
    int64_t time_ps;
    uint16_t kind;
    uint64_t arg;
    bool operator==(const Seen&) const = default;
  };
  static constexpr uint16_t kPlain = 0;
  static constexpr uint16_t kBounce = 1;
  static constexpr uint16_t kStop = 2;
  std::vector<Seen> seen;
  SimTime step = SimTime::from_ns(10);

 private:
  EventEngine& engine_;
  HandlerId id_;
};

TEST(EventEngine, dispatches_each_event_to_its_target_at_its_time) {
  EventEngine engine;
  Recorder first(engine);
  Recorder second(engine);
  (void)engine.schedule_at(SimTime::from_ns(5), second.id(), Recorder::kPlain, 2);
  (void)engine.schedule_at(SimTime::from_ns(3), first.id(), Recorder::kPlain, 1);
  EXPECT_EQ(engine.run(), 2u);
  ASSERT_EQ(first.seen.size(), 1u);
  ASSERT_EQ(second.seen.size(), 1u);
  EXPECT_EQ(first.seen[0].time_ps, 3000);
  EXPECT_EQ(second.seen[0].time_ps, 5000);
  EXPECT_EQ(engine.now(), SimTime::from_ns(5));
}

TEST(EventEngine, events_at_one_time_run_in_the_order_they_were_scheduled) {
  EventEngine engine;
  Recorder recorder(engine);
  for (uint64_t idx = 0; idx < 100; ++idx) {
    (void)engine.schedule_at(SimTime::from_ns(idx % 2 == 0 ? 7 : 3), recorder.id(),
                             Recorder::kPlain, idx);
  }
  (void)engine.run();
  ASSERT_EQ(recorder.seen.size(), 100u);
  for (size_t idx = 0; idx < 50; ++idx) EXPECT_EQ(recorder.seen[idx].arg, 2 * idx + 1);
  for (size_t idx = 0; idx < 50; ++idx) EXPECT_EQ(recorder.seen[50 + idx].arg, 2 * idx);
}

TEST(EventEngine, handlers_may_schedule_events_at_the_current_time) {
  EventEngine engine;
  Recorder recorder(engine);
  recorder.step = SimTime::zero();
  (void)engine.schedule_at(SimTime::from_ns(1), recorder.id(), Recorder::kBounce, 3);
  (void)engine.schedule_at(SimTime::from_ns(1), recorder.id(), Recorder::kPlain, 99);
  (void)engine.run();
  // The zero-delay bounces go after the event that was already pending at that time.
  std::vector<Recorder::Seen> expected = {{1000, Recorder::kBounce, 3},
                                          {1000, Recorder::kPlain, 99},
                                          {1000, Recorder::kBounce, 2},
                                          {1000, Recorder::kBounce, 1},
                                          {1000, Recorder::kBounce, 0}};
  EXPECT_EQ(recorder.seen, expected);
}

TEST(EventEngine, run_until_stops_at_the_limit_and_moves_the_clock_there) {
  EventEngine engine;
  Recorder recorder(engine);
  (void)engine.schedule_at(SimTime::from_ns(0), recorder.id(), Recorder::kBounce, 9);
  EXPECT_EQ(engine.run_until(SimTime::from_ns(35)), 4u);  // 0, 10, 20, 30
  EXPECT_EQ(engine.now(), SimTime::from_ns(35));
  EXPECT_EQ(engine.pending(), 1u);
  EXPECT_EQ(engine.next_event_time(), SimTime::from_ns(40));
  // An event scheduled between the limit and the next pending one still comes first.
  (void)engine.schedule_at(SimTime::from_ns(36), recorder.id(), Recorder::kPlain, 77);
  EXPECT_EQ(engine.run_until(SimTime::from_ns(40)), 2u);
  EXPECT_EQ(recorder.seen[4].arg, 77u);
  EXPECT_EQ(recorder.seen[5].time_ps, 40000);
  EXPECT_EQ(engine.run(), 5u);
  EXPECT_EQ(engine.now(), SimTime::from_ns(90));
  EXPECT_EQ(engine.events_handled(), 11u);
}

TEST(EventEngine, an_event_exactly_at_the_limit_is_handled) {
  EventEngine engine;
  Recorder recorder(engine);
  (void)engine.schedule_at(SimTime::from_ns(20), recorder.id(), Recorder::kPlain, 1);
  EXPECT_EQ(engine.run_until(SimTime::from_ns(20)), 1u);
  EXPECT_TRUE(engine.empty());
}

TEST(EventEngine, stop_returns_after_the_current_event) {
  EventEngine engine;
  Recorder recorder(engine);
  (void)engine.schedule_at(SimTime::from_ns(1), recorder.id(), Recorder::kStop, 0);
  (void)engine.schedule_at(SimTime::from_ns(2), recorder.id(), Recorder::kPlain, 0);
  EXPECT_EQ(engine.run(), 1u);
  EXPECT_EQ(engine.now(), SimTime::from_ns(1));
  EXPECT_EQ(engine.run(), 1u);
  EXPECT_EQ(engine.now(), SimTime::from_ns(2));
}

TEST(EventEngine, two_engines_in_one_process_are_independent) {
  EventEngine left;
  EventEngine right;
  Recorder left_recorder(left);
  Recorder right_recorder(right);
  right_recorder.step = SimTime::from_ns(3);
  (void)left.schedule_at(SimTime::zero(), left_recorder.id(), Recorder::kBounce, 4);
  (void)right.schedule_at(SimTime::zero(), right_recorder.id(), Recorder::kBounce, 2);
  // Interleave the two runs step by step: neither sees the other's events or clock.
  for (int64_t limit_ns = 0; limit_ns <= 50; ++limit_ns) {
    (void)left.run_until(SimTime::from_ns(limit_ns));
    (void)right.run_until(SimTime::from_ns(limit_ns / 2));
  }
  EXPECT_EQ(left_recorder.seen.size(), 5u);
  EXPECT_EQ(right_recorder.seen.size(), 3u);
  EXPECT_EQ(left_recorder.seen.back().time_ps, 40000);
  EXPECT_EQ(right_recorder.seen.back().time_ps, 6000);
  EXPECT_EQ(left.now(), SimTime::from_ns(50));
  EXPECT_EQ(right.now(), SimTime::from_ns(25));
}

TEST(EventEngine, the_same_schedule_gives_the_same_run) {
  auto run_once = [] {
    EventEngine engine;
    Recorder recorder(engine);
    for (uint64_t idx = 0; idx < 50; ++idx) {
      (void)engine.schedule_at(SimTime::from_ps(static_cast<int64_t>((idx * 7919) % 13)),
                               recorder.id(), Recorder::kBounce, idx % 4);
    }
    (void)engine.run();
    return recorder.seen;
  };
  EXPECT_EQ(run_once(), run_once());
}

}  // namespace event_engine_test
}  // namespace orrery
