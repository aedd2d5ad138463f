// core/time.h: simulated time as an integer count of picoseconds.
//
// The engine never uses floating-point time: configurations in ns or us are converted once, at
// the edge, with the rounding rule stated by the converting function. 2^63 ps is about 106 days of
// simulated time, far beyond any training step.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

namespace orrery {

class SimTime {
 public:
  constexpr SimTime() = default;

  static constexpr SimTime from_ps(int64_t ps) { return SimTime(ps); }
  static constexpr SimTime from_ns(int64_t ns) { return SimTime(ns * 1000); }
  static constexpr SimTime from_us(int64_t us) { return SimTime(us * 1000000); }
  // Rounds to the nearest picosecond (half away from zero).
  static SimTime from_ns_rounded(double ns) { return SimTime(std::llround(ns * 1000.0)); }
  static constexpr SimTime zero() { return SimTime(0); }
  static constexpr SimTime max() { return SimTime(std::numeric_limits<int64_t>::max()); }

  constexpr int64_t ps() const { return ps_; }
  // Whole nanoseconds, truncated (the unit ASTRA-sim reports in).
  constexpr int64_t ns_truncated() const { return ps_ / 1000; }
  constexpr double ns() const { return static_cast<double>(ps_) / 1000.0; }
  constexpr double us() const { return static_cast<double>(ps_) / 1e6; }
  constexpr double seconds() const { return static_cast<double>(ps_) / 1e12; }

  constexpr SimTime operator+(SimTime other) const { return SimTime(ps_ + other.ps_); }
  constexpr SimTime operator-(SimTime other) const { return SimTime(ps_ - other.ps_); }
  constexpr SimTime operator*(int64_t factor) const { return SimTime(ps_ * factor); }
  constexpr SimTime& operator+=(SimTime other) {
    ps_ += other.ps_;
    return *this;
  }
  constexpr SimTime& operator-=(SimTime other) {
    ps_ -= other.ps_;
    return *this;
  }
  constexpr auto operator<=>(const SimTime&) const = default;

 private:
  constexpr explicit SimTime(int64_t ps) : ps_(ps) {}
  int64_t ps_ = 0;
};

}  // namespace orrery
