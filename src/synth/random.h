// synth/random.h: the one random number stream of a training or sampling run.
//
// std::mt19937_64's sequence is fixed by the C++ standard, and the conversions below are written
// out (the standard library's distributions may differ between implementations), so a seed gives
// the same draws everywhere.
#pragma once

#include <cstdint>
#include <random>
#include <span>

namespace orrery::synth {

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  uint64_t next() { return engine_(); }
  // Uniform in [0, 1), 53 bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Uniform in [0, n); n > 0.
  uint32_t below(uint32_t n) {
    const auto pick = static_cast<uint32_t>(uniform() * n);
    return pick < n ? pick : n - 1;
  }
  // An index drawn with probability proportional to `weights` (non-negative; all zero: the last).
  template <typename T>
  uint32_t pick(std::span<const T> weights) {
    double total = 0;
    for (T weight : weights) total += static_cast<double>(weight);
    double target = uniform() * total;
    for (uint32_t idx = 0; idx < weights.size(); ++idx) {
      target -= static_cast<double>(weights[idx]);
      if (target < 0) return idx;
    }
    // Rounding (or all-zero weights): the last index with weight.
    for (uint32_t idx = static_cast<uint32_t>(weights.size()); idx > 0; --idx) {
      if (weights[idx - 1] > T{}) return idx - 1;
    }
    return weights.empty() ? 0 : static_cast<uint32_t>(weights.size()) - 1;
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace orrery::synth
