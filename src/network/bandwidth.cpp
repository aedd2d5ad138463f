#include "network/bandwidth.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace orrery::net {

namespace {
__extension__ typedef unsigned __int128 uint128;
}  // namespace

SimTime Bandwidth::serialization_time(uint64_t bytes) const {
  assert(nano_gbps_ > 0 && "bandwidth: serialization on a zero bandwidth");
  // t[ps] = bytes * 10^12 / (nano_gbps * 10^-9 * 2^30) = bytes * 10^21 / (nano_gbps * 2^30)
  //       = bytes * 5^21 / (nano_gbps * 2^9)            (10^21 = 2^21 * 5^21)
  // bytes < 2^64 and 5^21 < 2^49, so the numerator fits in 113 bits; the denominator in 73.
  constexpr uint64_t kFivePow21 = 476837158203125ULL;
  const uint128 numerator = static_cast<uint128>(bytes) * kFivePow21;
  const uint128 denominator = static_cast<uint128>(nano_gbps_) << 9;
  const uint128 rounded = (numerator + denominator / 2) / denominator;
  const auto limit = static_cast<uint128>(kMaxSerialization.ps());
  if (rounded >= limit) return kMaxSerialization;
  return SimTime::from_ps(static_cast<int64_t>(rounded));
}

Bandwidth Bandwidth::scaled(double factor) const {
  assert(factor >= 0 && "bandwidth: a negative factor");
  if (factor == 0) return Bandwidth(0);
  const double nano = std::round(static_cast<double>(nano_gbps_) * factor);
  if (nano >= 18e18) return Bandwidth(UINT64_MAX);
  return Bandwidth(static_cast<uint64_t>(std::max(1.0, nano)));
}

}  // namespace orrery::net
