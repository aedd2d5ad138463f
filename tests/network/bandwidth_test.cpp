// Serialization time: exact, rounded once to the picosecond, for every size.
#include "network/bandwidth.h"

#include <gtest/gtest.h>

#include "network/network_test_support.h"

namespace orrery::net {
namespace bandwidth_test {

TEST(Bandwidth, one_mebibyte_at_50_gbps_takes_19531_25_ns) {
  // 2^20 B / (50 * 2^30 B/s) = 1 / 51200 s = 19.53125 us, exactly.
  EXPECT_EQ(Bandwidth::from_gbps(50).serialization_time(1 << 20).ps(), 19'531'250);
}

TEST(Bandwidth, sixteen_gibibytes_at_half_a_gbps_take_32_seconds) {
  EXPECT_EQ(Bandwidth::from_nano_gbps(500'000'000).serialization_time(16ULL << 30),
            SimTime::from_us(32'000'000));
}

TEST(Bandwidth, one_byte_rounds_to_the_nearest_picosecond) {
  // 10^12 / 2^30 = 931.32... ps
  EXPECT_EQ(Bandwidth::from_gbps(1).serialization_time(1).ps(), 931);
  // 7 * 10^12 / 2^30 = 6519.25... ps
  EXPECT_EQ(Bandwidth::from_gbps(1).serialization_time(7).ps(), 6519);
  // 3 * 10^12 / 2^30 = 2793.96... ps
  EXPECT_EQ(Bandwidth::from_gbps(1).serialization_time(3).ps(), 2794);
}

TEST(Bandwidth, exact_halves_round_up) {
  // 256 B at 10^-9 GB/s = 256 * 10^21 / 2^30 ps = 5^21 / 2 ps = 238418579101562.5 ps.
  EXPECT_EQ(Bandwidth::from_nano_gbps(1).serialization_time(256).ps(), 238'418'579'101'563);
}

TEST(Bandwidth, zero_bytes_take_no_time) {
  EXPECT_EQ(Bandwidth::from_gbps(50).serialization_time(0), SimTime::zero());
}

TEST(Bandwidth, matches_the_closed_form_from_1_byte_to_16_gibibytes) {
  for (const uint64_t nano : {1'000'000'000ULL, 12'500'000'000ULL, 400'000'000'000ULL,
                              3'333'333'333ULL, 750'000'000ULL}) {
    for (uint64_t bytes = 1; bytes <= (16ULL << 30); bytes = bytes * 3 + 1) {
      EXPECT_EQ(Bandwidth::from_nano_gbps(nano).serialization_time(bytes).ps(),
                testing::expected_serialization_ps(bytes, nano))
          << bytes << " B at " << nano << " nGB/s";
    }
  }
}

TEST(Bandwidth, absurd_sizes_saturate_instead_of_overflowing) {
  EXPECT_EQ(Bandwidth::from_nano_gbps(1).serialization_time(UINT64_MAX),
            Bandwidth::kMaxSerialization);
}

}  // namespace bandwidth_test
}  // namespace orrery::net
