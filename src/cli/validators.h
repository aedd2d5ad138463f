// cli/validators.h: CLI11 validators for numbers given on the command line, in the words and
// ranges of docs/numbers.md.
//
// CLI11's own PositiveNumber accepts "nan" and "inf" in places and prints its range as the 309
// digits of the largest double; these say "expected a number from 1e-09 to 1e+09, found nan".
#pragma once

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "core/checked.h"

namespace orrery::cli {

// A finite number within [min, max], written as a plain decimal or in exponent form.
inline CLI::Validator finite_number(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size()) {
          return "expected a number, found '" + text + "'";
        }
        if (!in_range(value, min, max)) return range_message(value, min, max);
        return std::string();
      },
      "NUMBER in [" + format_number(min) + ", " + format_number(max) + "]");
}

// The multipliers --compute-scale, --comm-scale and --injection-scale (kMinScale to kMaxScale).
inline CLI::Validator scale_number() { return finite_number(kMinScale, kMaxScale); }

// `text` as a whole number of 0 to 2^64 - 1, digits only; nothing for anything else.
inline std::optional<unsigned long long> parse_whole_number(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || text[0] == '+' || end != text.c_str() + text.size() ||
      errno == ERANGE) {
    return std::nullopt;
  }
  return value;
}

// A whole number of at least `min` (checked before CLI11 converts it, so "0" and "-1" are named).
inline CLI::Validator whole_number_at_least(unsigned long long min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        const std::optional<unsigned long long> value = parse_whole_number(text);
        if (!value) return "expected a whole number, found '" + text + "'";
        if (*value < min) {
          return "expected " + std::to_string(min) + " or more, found " + text;
        }
        return std::string();
      },
      "INT >= " + std::to_string(min));
}

// A whole number from `min` to `max`.
inline CLI::Validator whole_number_in(unsigned long long min, unsigned long long max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        const std::optional<unsigned long long> value = parse_whole_number(text);
        if (!value || *value < min || *value > max) {
          return "expected a whole number from " + std::to_string(min) + " to " +
                 std::to_string(max) + ", found '" + text + "'";
        }
        return std::string();
      },
      "INT in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
}

// A thread count: 0 (one per core) to 4096, beyond which creating the threads fails.
inline CLI::Validator thread_count() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::optional<unsigned long long> value = parse_whole_number(text);
        if (!value || *value > 4096) {
          return "expected a thread count from 0 (one per core) to 4096, found '" + text + "'";
        }
        return std::string();
      },
      "");
}

// CLI11 2.3 converts "-1" for an option of an unsigned type by wrapping it around (to
// 18446744073709551615, a table of that many rows), and a number beyond 2^64 - 1 to 2^64 - 1
// (beyond 2^63 - 1 to that for a signed one); every such option of `app` and its subcommands
// refuses them instead. Call once the options are declared.
inline void refuse_wrapped_whole_numbers(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    // A signed whole number beyond 2^63 - 1 CLI11 also takes as the largest.
    if (option->get_type_name().rfind("INT", 0) == 0) {
      option->check(CLI::Validator(
          [](std::string& text) -> std::string {
            errno = 0;
            (void)std::strtoll(text.c_str(), nullptr, 10);
            return errno == ERANGE ? "'" + text + "' is beyond 2^63 - 1" : std::string();
          },
          ""));
      continue;
    }
    if (option->get_type_name().rfind("UINT", 0) != 0) continue;
    option->check(CLI::Validator(
        [](std::string& text) -> std::string {
          const size_t first = text.find_first_not_of(" \t");
          if (first == std::string::npos) return std::string();
          if (text[first] == '-')
            return "expected a whole number of 0 or more, found '" + text + "'";
          errno = 0;
          (void)std::strtoull(text.c_str() + first, nullptr, 10);
          if (errno == ERANGE) return "'" + text + "' is beyond 2^64 - 1";
          return std::string();
        },
        ""));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    refuse_wrapped_whole_numbers(*sub);
  }
}

}  // namespace orrery::cli
