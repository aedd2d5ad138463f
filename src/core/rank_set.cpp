#include "core/rank_set.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include <fmt/format.h>

namespace orrery {

namespace {

std::optional<uint32_t> parse_rank(std::string_view text) {
  uint32_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

Expected<std::vector<std::pair<uint32_t, uint32_t>>> parse_rank_ranges(std::string_view text,
                                                                       uint32_t rank_count) {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t comma = text.find(',', begin);
    const std::string_view item =
        text.substr(begin, comma == std::string_view::npos ? text.size() - begin : comma - begin);
    const size_t dash = item.find('-');
    std::optional<uint32_t> first = parse_rank(item.substr(0, dash));
    std::optional<uint32_t> last =
        dash == std::string_view::npos ? first : parse_rank(item.substr(dash + 1));
    if (!first || !last) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "'{}' is not a rank or a range of ranks (expected e.g. 0-15,1024)", item);
    }
    if (*last < *first) {
      return Error::make(ErrorKind::kInvalidArgument, "range '{}' runs backwards", item);
    }
    if (*last >= rank_count) {
      return Error::make(ErrorKind::kInvalidArgument, "rank {} is beyond the job's {} ranks", *last,
                         rank_count);
    }
    ranges.emplace_back(*first, *last);
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  return ranges;
}

Expected<RankSet> RankSet::parse(std::string_view text, uint32_t rank_count) {
  Expected<std::vector<std::pair<uint32_t, uint32_t>>> ranges = parse_rank_ranges(text, rank_count);
  if (!ranges) return ranges.error();
  RankSet set;
  set.all_ = false;
  set.ranges_ = std::move(*ranges);
  std::sort(set.ranges_.begin(), set.ranges_.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (const auto& range : set.ranges_) {
    if (!merged.empty() && range.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, range.second);
    } else {
      merged.push_back(range);
    }
  }
  set.ranges_ = std::move(merged);
  return set;
}

bool RankSet::contains(uint32_t rank) const {
  if (all_) return true;
  auto found = std::upper_bound(ranges_.begin(), ranges_.end(), std::make_pair(rank, UINT32_MAX));
  if (found == ranges_.begin()) return false;
  --found;
  return rank >= found->first && rank <= found->second;
}

}  // namespace orrery
