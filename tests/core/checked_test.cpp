// Numbers at the edges (core/checked.h, docs/numbers.md): saturating and checked arithmetic, time
// that saturates instead of wrapping, the event engine's time limit, and numbers in messages.
#include "core/checked.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/event_engine.h"

namespace orrery {
namespace checked_test {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr uint64_t kUMax = std::numeric_limits<uint64_t>::max();

TEST(Checked, unsigned_arithmetic_saturates_or_reports_overflow) {
  EXPECT_EQ(saturating_add(uint64_t{1} << 63, uint64_t{1} << 63), kUMax);
  EXPECT_EQ(saturating_add(uint64_t{5}, uint64_t{7}), 12u);
  EXPECT_EQ(saturating_mul(uint64_t{1} << 50, uint64_t{1} << 20), kUMax);
  EXPECT_EQ(saturating_mul(uint64_t{1} << 50, uint64_t{1} << 13), uint64_t{1} << 63);
  EXPECT_FALSE(checked_add(kUMax, 1).has_value());
  EXPECT_EQ(checked_mul(uint64_t{3}, uint64_t{1} << 60).value_or(0), uint64_t{3} << 60);
  EXPECT_FALSE(checked_mul(uint64_t{16}, uint64_t{1} << 60).has_value());
}

TEST(Checked, doubles_convert_without_undefined_casts) {
  EXPECT_EQ(saturating_round_u64(1e30), kUMax);
  EXPECT_EQ(saturating_round_u64(-5.0), 0u);
  EXPECT_EQ(saturating_round_u64(std::nan("")), kUMax);  // NaN never reads as 0
  EXPECT_EQ(saturating_round_u64(2.5), 3u);
  EXPECT_EQ(saturating_round_u64(18446744073709551616.0), kUMax);  // 2^64 exactly
  EXPECT_EQ(saturating_trunc_i64(9.3e18), kMax);
  EXPECT_EQ(saturating_trunc_i64(-9.3e18), kMin);
  EXPECT_EQ(saturating_trunc_i64(-2.7), -2);
  EXPECT_EQ(saturating_trunc_i64(std::numeric_limits<double>::infinity()), kMax);
  EXPECT_EQ(saturating_round_i64(-2.5), -3);
}

TEST(SimTimeArithmetic, saturates_instead_of_wrapping) {
  const SimTime big = SimTime::from_ps(kMax - 10);
  EXPECT_EQ((big + SimTime::from_ps(100)).ps(), kMax);
  EXPECT_EQ((SimTime::from_ps(kMin + 10) - SimTime::from_ps(100)).ps(), kMin);
  EXPECT_EQ((SimTime::from_ps(int64_t{1} << 62) * 4).ps(), kMax);
  EXPECT_EQ((SimTime::from_ps(int64_t{1} << 62) * -4).ps(), kMin);
  SimTime sum = big;
  sum += SimTime::from_ps(11);
  EXPECT_EQ(sum.ps(), kMax);
  // The conversions the engine uses: a duration of 2^62 us is 2^62 x 10^6 ps, far past int64.
  EXPECT_EQ(SimTime::from_us(int64_t{1} << 62).ps(), kMax);
  EXPECT_EQ(SimTime::from_ns(kMax / 10).ps(), kMax);
  EXPECT_EQ(SimTime::from_ns_rounded(1e300).ps(), kMax);
  EXPECT_EQ(SimTime::from_ns_rounded(std::nan("")).ps(), kMax);
  // In range, nothing changes.
  EXPECT_EQ(SimTime::from_us(3).ps(), 3'000'000);
  EXPECT_EQ((SimTime::from_ns(5) + SimTime::from_ns(7)).ps(), 12'000);
  EXPECT_EQ(SimTime::from_ns_rounded(1.0005).ps(), 1001);
}

TEST(SimTimeArithmetic, conversion_from_nanoseconds_refuses_what_no_run_reaches) {
  EXPECT_EQ(sim_time_from_ns(500.25, "x")->ps(), 500'250);
  for (const double bad : {std::nan(""), std::numeric_limits<double>::infinity(), -1.0, 3e15}) {
    Expected<SimTime> time = sim_time_from_ns(bad, "net.yml:4: key 'latency'");
    ASSERT_FALSE(time) << bad;
    EXPECT_NE(time.error().message().find("net.yml:4: key 'latency': expected a time from 0 to "
                                          "2305843009213694 ns"),
              std::string::npos)
        << time.error().message();
  }
}

TEST(Checked, numbers_in_messages_are_short) {
  EXPECT_EQ(format_number(1e9), "1e+09");
  EXPECT_EQ(format_number(0.001), "0.001");
  EXPECT_EQ(format_number(50), "50");
  EXPECT_EQ(format_number(1600), "1600");
  EXPECT_EQ(format_number(std::numeric_limits<double>::max()), "1.7976931348623157e+308");
  EXPECT_EQ(format_number(std::nan("")), "nan");
  EXPECT_EQ(format_number(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(format_number(static_cast<double>(kMaxSimTimePs) / 1000), "2305843009213694");
  EXPECT_EQ(range_message(1e-12, kMinGbps, kMaxGbps, "GB/s"),
            "expected a number from 0.001 to 1e+09 GB/s, found 1e-12");
  EXPECT_TRUE(in_range(5, 1, 10));
  EXPECT_FALSE(in_range(std::nan(""), 1, 10));
  EXPECT_FALSE(in_range(std::numeric_limits<double>::infinity(), 1, 1e308));
}

// A handler that schedules one event `delay` after the current time.
class Chain final : public EventHandler {
 public:
  explicit Chain(EventEngine& engine) : engine_(engine), id_(engine.register_handler(*this)) {}
  void handle_event(const Event& event) override {
    ++handled;
    last = engine_.now();
    if (event.arg > 0) (void)engine_.schedule_after(delay, id_, 0, event.arg - 1);
  }
  HandlerId id() const { return id_; }
  SimTime delay;
  int handled = 0;
  SimTime last;

 private:
  EventEngine& engine_;
  HandlerId id_;
};

TEST(EventEngineLimit, no_event_runs_at_or_after_two_to_the_61_picoseconds) {
  EventEngine engine;
  Chain chain(engine);
  // Steps of 2^59 ps: 0, 2^59, 2^60, 3 x 2^59 run; 2^61 does not.
  chain.delay = SimTime::from_ps(int64_t{1} << 59);
  (void)engine.schedule_at(SimTime::zero(), chain.id(), 0, 10);
  engine.run();
  EXPECT_EQ(chain.handled, 4);
  EXPECT_EQ(chain.last.ps(), 3 * (int64_t{1} << 59));
  EXPECT_TRUE(engine.time_limit_reached());
}

TEST(EventEngineLimit, a_saturated_time_stops_the_run_rather_than_wrapping_to_the_past) {
  EventEngine engine;
  Chain chain(engine);
  chain.delay = SimTime::max();  // now + max saturates at max, past the limit
  (void)engine.schedule_at(SimTime::from_ns(5), chain.id(), 0, 1);
  engine.run();
  EXPECT_EQ(chain.handled, 1);
  EXPECT_TRUE(engine.time_limit_reached());
}

TEST(EventEngineLimit, run_until_stops_at_the_limit_too_and_ordinary_runs_do_not_see_it) {
  EventEngine engine;
  Chain chain(engine);
  chain.delay = SimTime::from_ps(int64_t{1} << 60);
  (void)engine.schedule_at(SimTime::zero(), chain.id(), 0, 5);
  engine.run_until(SimTime::max());
  EXPECT_EQ(chain.handled, 2);  // at 0 and 2^60; 2^61 is the limit
  EXPECT_TRUE(engine.time_limit_reached());

  EventEngine quiet;
  Chain small(quiet);
  small.delay = SimTime::from_us(1);
  (void)quiet.schedule_at(SimTime::zero(), small.id(), 0, 3);
  quiet.run();
  EXPECT_EQ(small.handled, 4);
  EXPECT_FALSE(quiet.time_limit_reached());
}

}  // namespace checked_test
}  // namespace orrery
