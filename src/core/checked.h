// core/checked.h: the limits of the numbers orrery represents exactly, and the checked and
// saturating arithmetic that keeps every value read at an edge within them (docs/numbers.md).
//
// The policy in one paragraph: every size, count, duration and rate read from a file or a flag is
// checked against a documented range when it is read, with an error naming the file and line (or
// node, or flag) and the limit. Inside the simulator, simulated time is an int64 count of
// picoseconds whose arithmetic saturates instead of wrapping (core/time.h), and the event engine
// refuses to advance past kMaxSimTime (core/event_engine.h): a run that would get there is an
// error, never a wrapped-around answer. The ranges at the edges are chosen so that the arithmetic
// between them (a size over a bandwidth, a duration times a scale, a delay added to the clock)
// stays inside int64 and inside the exact integers of a double; the proofs are in docs/numbers.md.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/time.h"

namespace orrery {

// ---- The limits ----

// Simulated time: a run ends before 2^61 ps (about 26.7 days). An int64 holds 2^63 - 1 ps, so the
// sum of any two in-range times, or an in-range time and one quantity bounded by it, cannot wrap.
inline constexpr int64_t kMaxSimTimePs = kSimTimeLimitPs;
// One size in bytes (a collective, a message, a tensor, a memory access): at most 2^50 (1 PiB).
// Sizes pass through doubles (scales, reports): 2^50 is exact there with 3 bits to spare.
inline constexpr uint64_t kMaxBytes = uint64_t{1} << 50;
// One node's recorded duration (duration_micros): shorter than the whole-run limit.
inline constexpr uint64_t kMaxDurationMicros = static_cast<uint64_t>(kMaxSimTimePs) / 1'000'000;
// One node's FLOPs (num_ops): 2^64 - 1 is representable, but beyond 2^63 a double's integer is not
// an integer count any more; 2^62 keeps FLOPs x ranks sums (reports) far from the wrap.
inline constexpr uint64_t kMaxFlops = uint64_t{1} << 62;
// Bandwidths in decimal or binary GB/s, wherever they are read (network, memory, roofline).
inline constexpr double kMinGbps = 1e-3;  // 1 MB/s: below it 1 PiB takes longer than a run
inline constexpr double kMaxGbps = 1e9;   // 1 EB/s per link, far above any hardware
// Local memory (local-mem-bw) only divides sizes: a huge value is harmless and is how closed-form
// studies make reductions free, so only its lower end is bounded by the arithmetic.
inline constexpr double kMaxLocalMemGbps = 1e18;
// Compute peak (peak-perf) in TFLOPS.
inline constexpr double kMinTflops = 1e-6;
inline constexpr double kMaxTflops = 1e9;
// Latencies in ns (network links, remote memory): at most one second per hop or access.
inline constexpr double kMaxLatencyNs = 1e9;
// Multipliers given on the command line (--compute-scale, --comm-scale, --injection-scale).
inline constexpr double kMinScale = 1e-9;
inline constexpr double kMaxScale = 1e9;

// ---- Saturating and checked integer arithmetic ----

constexpr uint64_t saturating_add(uint64_t a, uint64_t b) {
  uint64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? std::numeric_limits<uint64_t>::max() : out;
}
constexpr uint64_t saturating_mul(uint64_t a, uint64_t b) {
  uint64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? std::numeric_limits<uint64_t>::max() : out;
}
inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}
inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// ---- Doubles to integers ----

// `value` rounded to the nearest integer (halves away from zero), clamped to [0, 2^64 - 1]; NaN
// gives the maximum, so that a NaN that slipped through shows as out of range, not as zero.
uint64_t saturating_round_u64(double value);
// `value` truncated toward zero, clamped to the int64 range; NaN gives the maximum.
int64_t saturating_trunc_i64(double value);
// `value` rounded to the nearest integer, clamped to the int64 range; NaN gives the maximum.
int64_t saturating_round_i64(double value);

// A simulated time from a number of nanoseconds that must be finite, >= 0 and below the run limit.
// `what` names the value in the error ("sys.json:3: key 'endpoint-delay'").
Expected<SimTime> sim_time_from_ns(double ns, std::string_view what);

// Whether `value` is finite and within [min, max].
inline bool in_range(double value, double min, double max) {
  return std::isfinite(value) && value >= min && value <= max;
}

// A number as people read it in a message: "1e+30", "0.001", "inf", "nan", "50"; never the 309
// digits of a huge double's fixed-point form.
std::string format_number(double value);

// "expected a number from 0.001 to 1e+09, found 1e-12" (or "... found nan"), for range errors.
std::string range_message(double value, double min, double max, std::string_view unit = "");

}  // namespace orrery
