// network/bandwidth.h: link bandwidth in ASTRA-sim's "GB/s" (2^30 bytes per second), kept exact,
// and the serialization time of a message on such a link.
//
// A bandwidth is stored as an integer count of 10^-9 GB/s, so every decimal written in a network
// file with up to nine fractional digits ("50", "12.5", "400.0") is held exactly. The serialization
// time of `bytes` is the exact rational bytes / (gbps * 2^30) seconds, rounded once to the nearest
// picosecond (halves up), computed in 128-bit integer arithmetic: the same inputs give the same
// picoseconds on every machine, for any size up to 2^64 - 1 bytes.
#pragma once

#include <cstdint>

#include "core/time.h"

namespace orrery::net {

class Bandwidth {
 public:
  // The longest serialization time returned; longer ones saturate to it (about 26 days).
  static constexpr SimTime kMaxSerialization = SimTime::from_ps(int64_t{1} << 61);

  constexpr Bandwidth() = default;
  // `nano_gbps` = bandwidth in units of 10^-9 GB/s; must be positive for serialization_time.
  static constexpr Bandwidth from_nano_gbps(uint64_t nano_gbps) { return Bandwidth(nano_gbps); }
  static constexpr Bandwidth from_gbps(uint64_t gbps) { return Bandwidth(gbps * 1'000'000'000); }

  constexpr uint64_t nano_gbps() const { return nano_gbps_; }
  // For printing only: the value in GB/s as a double.
  double gbps() const { return static_cast<double>(nano_gbps_) / 1e9; }
  // Bytes per second (2^30 per GB), for printing only.
  double bytes_per_second() const { return gbps() * 1073741824.0; }

  // This bandwidth times `factor` (>= 0), to the nearest 10^-9 GB/s and at least that much unless
  // `factor` is 0: a degraded or partly failed link.
  Bandwidth scaled(double factor) const;

  // Time to put `bytes` on the link, rounded to the nearest ps. Any time; O(1).
  SimTime serialization_time(uint64_t bytes) const;

  constexpr auto operator<=>(const Bandwidth&) const = default;

 private:
  constexpr explicit Bandwidth(uint64_t nano_gbps) : nano_gbps_(nano_gbps) {}
  uint64_t nano_gbps_ = 0;
};

}  // namespace orrery::net
