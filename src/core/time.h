// core/time.h: simulated time as an integer count of picoseconds.
//
// The engine never uses floating-point time: configurations in ns or us are converted once, at
// the edge, with the rounding rule stated by the converting function. 2^63 ps is about 106 days of
// simulated time, far beyond any training step.
//
// Arithmetic saturates: a sum, difference, product or conversion that would leave the int64 range
// gives SimTime::max() (or its negative), never a wrapped-around value. The event engine refuses to
// run events at or after kSimTimeLimitPs (2^61 ps, about 26.7 days), so a saturated time surfaces
// as a run that passes the limit (an error), not as a short run (docs/numbers.md).
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

namespace orrery {

// No run goes past 2^61 ps (core/checked.h, core/event_engine.h).
inline constexpr int64_t kSimTimeLimitPs = int64_t{1} << 61;

namespace time_detail {
constexpr int64_t saturate(bool negative) {
  return negative ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
}
constexpr int64_t add(int64_t a, int64_t b) {
  int64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? saturate(b < 0) : out;
}
constexpr int64_t sub(int64_t a, int64_t b) {
  int64_t out = 0;
  return __builtin_sub_overflow(a, b, &out) ? saturate(b > 0) : out;
}
constexpr int64_t mul(int64_t a, int64_t b) {
  int64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? saturate((a < 0) != (b < 0)) : out;
}
// llround without its undefined result out of range: clamps, and NaN gives the maximum.
inline int64_t round(double value) {
  if (std::isnan(value) || value >= 9.2233720368547758e18) return saturate(false);
  if (value <= -9.2233720368547758e18) return saturate(true);
  return std::llround(value);
}
}  // namespace time_detail

class SimTime {
 public:
  constexpr SimTime() = default;

  static constexpr SimTime from_ps(int64_t ps) { return SimTime(ps); }
  static constexpr SimTime from_ns(int64_t ns) { return SimTime(time_detail::mul(ns, 1000)); }
  static constexpr SimTime from_us(int64_t us) { return SimTime(time_detail::mul(us, 1000000)); }
  // Rounds to the nearest picosecond (half away from zero); saturates out of range, NaN to max().
  static SimTime from_ns_rounded(double ns) { return SimTime(time_detail::round(ns * 1000.0)); }
  static constexpr SimTime zero() { return SimTime(0); }
  static constexpr SimTime max() { return SimTime(std::numeric_limits<int64_t>::max()); }

  constexpr int64_t ps() const { return ps_; }
  // Whole nanoseconds, truncated (the unit ASTRA-sim reports in).
  constexpr int64_t ns_truncated() const { return ps_ / 1000; }
  constexpr double ns() const { return static_cast<double>(ps_) / 1000.0; }
  constexpr double us() const { return static_cast<double>(ps_) / 1e6; }
  constexpr double seconds() const { return static_cast<double>(ps_) / 1e12; }

  constexpr SimTime operator+(SimTime other) const {
    return SimTime(time_detail::add(ps_, other.ps_));
  }
  constexpr SimTime operator-(SimTime other) const {
    return SimTime(time_detail::sub(ps_, other.ps_));
  }
  constexpr SimTime operator*(int64_t factor) const {
    return SimTime(time_detail::mul(ps_, factor));
  }
  constexpr SimTime& operator+=(SimTime other) {
    ps_ = time_detail::add(ps_, other.ps_);
    return *this;
  }
  constexpr SimTime& operator-=(SimTime other) {
    ps_ = time_detail::sub(ps_, other.ps_);
    return *this;
  }
  constexpr auto operator<=>(const SimTime&) const = default;

 private:
  constexpr explicit SimTime(int64_t ps) : ps_(ps) {}
  int64_t ps_ = 0;
};

}  // namespace orrery
