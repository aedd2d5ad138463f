#include "core/units.h"

#include <array>
#include <charconv>
#include <cmath>

namespace orrery {

namespace {

struct Unit {
  std::string_view suffix;
  double factor;
};

constexpr std::array<Unit, 11> kUnits = {{
    {"KiB", 1024.0},
    {"MiB", 1024.0 * 1024.0},
    {"GiB", 1024.0 * 1024.0 * 1024.0},
    {"TiB", 1024.0 * 1024.0 * 1024.0 * 1024.0},
    {"kB", 1e3},
    {"KB", 1e3},
    {"MB", 1e6},
    {"GB", 1e9},
    {"TB", 1e12},
    {"B", 1.0},
    {"", 1.0},
}};

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

}  // namespace

Expected<uint64_t> parse_bytes(std::string_view text) {
  const std::string_view input = trim(text);
  if (input.empty()) {
    return Error::make(ErrorKind::kInvalidArgument, "empty size (expected e.g. 1048576 or 1MiB)");
  }
  for (const Unit& unit : kUnits) {
    if (input.size() < unit.suffix.size() ||
        input.substr(input.size() - unit.suffix.size()) != unit.suffix) {
      continue;
    }
    const std::string_view number = trim(input.substr(0, input.size() - unit.suffix.size()));
    if (number.empty()) break;
    // Integers are parsed exactly; only a fractional number goes through floating point.
    uint64_t whole = 0;
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), whole);
    if (ec == std::errc() && end == number.data() + number.size()) {
      const auto factor = static_cast<uint64_t>(unit.factor);
      if (factor != 0 && whole > UINT64_MAX / factor) break;
      return whole * factor;
    }
    double value = 0;
    auto [fend, fec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (fec != std::errc() || fend != number.data() + number.size() || value < 0) break;
    const double bytes = value * unit.factor;
    if (bytes > 1.8e19 || bytes != std::floor(bytes)) {
      return Error::make(ErrorKind::kInvalidArgument, "size '{}' is not a whole number of bytes",
                         input);
    }
    return static_cast<uint64_t>(bytes);
  }
  return Error::make(ErrorKind::kInvalidArgument,
                     "cannot read '{}' as a size (expected e.g. 1048576, 64MiB or 1GB)", input);
}

std::string format_bytes(uint64_t bytes) {
  static constexpr std::array<std::string_view, 5> kNames = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kNames.size()) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", value, kNames[unit]);
}

std::string format_count(uint64_t value) {
  const std::string digits = std::to_string(value);
  std::string out;
  out.reserve(digits.size() + digits.size() / 3);
  for (size_t idx = 0; idx < digits.size(); ++idx) {
    if (idx != 0 && (digits.size() - idx) % 3 == 0) out.push_back(',');
    out.push_back(digits[idx]);
  }
  return out;
}

std::string format_duration_ns(double ns) {
  if (ns >= 1e9) return fmt::format("{:.3g} s", ns / 1e9);
  if (ns >= 1e6) return fmt::format("{:.3g} ms", ns / 1e6);
  if (ns >= 1e3) return fmt::format("{:.3g} us", ns / 1e3);
  return fmt::format("{:.3g} ns", ns);
}

}  // namespace orrery
