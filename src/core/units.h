// core/units.h: parsing and printing of sizes and counts given by people.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"

namespace orrery {

// Bytes in a GiB, for dividing by.
inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Parses a byte count: a plain integer ("1048576"), or a number with a unit. Binary units KiB, MiB,
// GiB, TiB (powers of 1024) and decimal units kB/KB, MB, GB, TB (powers of 1000); "B" alone is
// bytes. Fractions are allowed when the result is a whole number of bytes ("1.5KiB").
Expected<uint64_t> parse_bytes(std::string_view text);

// "1.00 MiB", "512 B": the largest binary unit that keeps the number at least 1.
std::string format_bytes(uint64_t bytes);

// "1,048,576": thousands separated by commas, for tables people read.
std::string format_count(uint64_t value);

// "9.3 us", "131 ms", "1e+291 s": three significant digits in the largest of ns, us, ms and s
// that keeps the number at least 1 (as the duration flags write them: 5ms, 250us).
std::string format_duration_ns(double ns);

}  // namespace orrery
