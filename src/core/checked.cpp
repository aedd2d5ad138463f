#include "core/checked.h"

#include <cstdlib>

#include <fmt/format.h>

namespace orrery {

namespace {
// 2^64 and 2^63 as doubles (exact): the first values a conversion cannot hold.
constexpr double kTwo64 = 18446744073709551616.0;
constexpr double kTwo63 = 9223372036854775808.0;
}  // namespace

uint64_t saturating_round_u64(double value) {
  if (std::isnan(value)) return std::numeric_limits<uint64_t>::max();
  if (value <= 0.0) return 0;
  const double rounded = std::round(value);
  if (rounded >= kTwo64) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(rounded);
}

int64_t saturating_trunc_i64(double value) {
  if (std::isnan(value) || value >= kTwo63) return std::numeric_limits<int64_t>::max();
  if (value <= -kTwo63) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(value);
}

int64_t saturating_round_i64(double value) { return saturating_trunc_i64(std::round(value)); }

Expected<SimTime> sim_time_from_ns(double ns, std::string_view what) {
  const double limit_ns = static_cast<double>(kMaxSimTimePs) / 1000.0;
  if (!std::isfinite(ns) || ns < 0.0 || ns >= limit_ns) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "{}: expected a time from 0 to {} ns (2^61 ps, the longest run orrery "
                       "simulates), found {}",
                       what, format_number(limit_ns), format_number(ns));
  }
  return SimTime::from_ns_rounded(ns);
}

std::string format_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // Six significant digits when they say the value exactly (50, 0.001, 1e+09, 1e+30), else the
  // shortest text that reads back as the same double (2305843009213.694).
  const std::string short_form = fmt::format("{:.6g}", value);
  if (std::strtod(short_form.c_str(), nullptr) == value) return short_form;
  return fmt::format("{}", value);
}

std::string range_message(double value, double min, double max, std::string_view unit) {
  const std::string suffix = unit.empty() ? "" : fmt::format(" {}", unit);
  return fmt::format("expected a number from {} to {}{}, found {}", format_number(min),
                     format_number(max), suffix, format_number(value));
}

}  // namespace orrery
