// core/rank_set.h: a set of ranks written as people write them: "0-15,1024,2048-2055".
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace orrery {

// The ranges of "a-b,c,..." (inclusive) in the order written, repeats kept. Errors as
// RankSet::parse's.
Expected<std::vector<std::pair<uint32_t, uint32_t>>> parse_rank_ranges(std::string_view text,
                                                                       uint32_t rank_count);

class RankSet {
 public:
  // Every rank.
  static RankSet all() { return RankSet(); }
  // Parses "a-b,c,...". Errors name the offending item: a reversed or malformed range, a rank at
  // or above `rank_count`.
  static Expected<RankSet> parse(std::string_view text, uint32_t rank_count);

  bool contains(uint32_t rank) const;
  bool is_all() const { return all_; }
  // The ranges, inclusive, sorted and merged (empty for all()).
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }
  // The highest rank in the set (UINT32_MAX for all()).
  uint32_t last() const { return all_ || ranges_.empty() ? UINT32_MAX : ranges_.back().second; }

 private:
  bool all_ = true;
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;  // inclusive, sorted, merged
};

}  // namespace orrery
