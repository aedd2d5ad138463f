// core/counter_random.h: random draws that are pure functions of a seed and coordinates.
//
// A draw here is a hash (splitmix64's finalizer, chained over the seed and each coordinate) rather
// than the next value of a stateful generator: the slowdown of rank r, the noise on node n of rank
// r, the k-th failure of a job must not depend on the order in which a run, its threads or its
// simulation mode happen to ask for them. The standard library's distributions are not used for
// the same reason, and because their algorithms differ between implementations.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

namespace orrery {

inline uint64_t mix64(uint64_t value) {
  value += 0x9e3779b97f4a7c15ULL;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

inline uint64_t hash64(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0) {
  return mix64(mix64(mix64(mix64(seed) ^ a) ^ b) ^ c);
}

// Uniform in (0, 1], from the top 53 bits: never 0, so its logarithm is finite.
inline double unit_draw(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0) {
  return static_cast<double>((hash64(seed, a, b, c) >> 11) + 1) * 0x1.0p-53;
}

// Standard normal (Box-Muller over two independent unit draws).
inline double normal_draw(uint64_t seed, uint64_t a, uint64_t b = 0) {
  const double u1 = unit_draw(seed, a, b, 1);
  const double u2 = unit_draw(seed, a, b, 2);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// Exponential with the given mean.
inline double exponential_draw(uint64_t seed, uint64_t a, double mean) {
  return -mean * std::log(unit_draw(seed, a, 0, 3));
}

}  // namespace orrery
