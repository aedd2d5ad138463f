#include "core/units.h"

#include <gtest/gtest.h>

namespace orrery {
namespace units_test {

TEST(ParseBytes, plain_integers_are_bytes) {
  EXPECT_EQ(*parse_bytes("1048576"), 1048576u);
  EXPECT_EQ(*parse_bytes("0"), 0u);
  EXPECT_EQ(*parse_bytes("512B"), 512u);
}

TEST(ParseBytes, binary_and_decimal_units_differ) {
  EXPECT_EQ(*parse_bytes("1MiB"), 1048576u);
  EXPECT_EQ(*parse_bytes("1MB"), 1000000u);
  EXPECT_EQ(*parse_bytes("80GiB"), 80ull << 30);
  EXPECT_EQ(*parse_bytes("2 KiB"), 2048u);
  EXPECT_EQ(*parse_bytes("1.5KiB"), 1536u);
  EXPECT_EQ(*parse_bytes("16TiB"), 16ull << 40);
}

TEST(ParseBytes, rejects_what_is_not_a_size) {
  EXPECT_FALSE(parse_bytes(""));
  EXPECT_FALSE(parse_bytes("MiB"));
  EXPECT_FALSE(parse_bytes("abc"));
  EXPECT_FALSE(parse_bytes("-1"));
  EXPECT_FALSE(parse_bytes("1.3B"));
  EXPECT_FALSE(parse_bytes("99999999999TiB"));
  EXPECT_NE(parse_bytes("12 parsecs").error().message().find("12 parsecs"), std::string::npos);
}

TEST(FormatCount, separates_thousands) {
  EXPECT_EQ(format_count(0), "0");
  EXPECT_EQ(format_count(999), "999");
  EXPECT_EQ(format_count(1000), "1,000");
  EXPECT_EQ(format_count(3664), "3,664");
  EXPECT_EQ(format_count(1048576), "1,048,576");
  EXPECT_EQ(format_count(123456789), "123,456,789");
}

TEST(FormatBytes, picks_the_largest_binary_unit) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1048576), "1.00 MiB");
  EXPECT_EQ(format_bytes(3ull << 30), "3.00 GiB");
}

TEST(FormatDuration, three_digits_in_the_largest_unit_at_least_one) {
  EXPECT_EQ(format_duration_ns(512), "512 ns");
  EXPECT_EQ(format_duration_ns(9300), "9.3 us");
  EXPECT_EQ(format_duration_ns(131e6), "131 ms");
  EXPECT_EQ(format_duration_ns(1e9), "1 s");
  EXPECT_EQ(format_duration_ns(1e300), "1e+291 s");
}

}  // namespace units_test
}  // namespace orrery
