#include "chakra/rank_map.h"

#include <algorithm>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_config.h"
#include "core/text_file.h"

namespace orrery::chakra {

namespace {

constexpr std::string_view kFormat = "orrery rank map";
constexpr int64_t kVersion = 1;
// Ranks a map may hold: the simulator's limit (docs/numbers.md).
constexpr size_t kMaxRanks = size_t{1} << 24;

std::optional<int64_t> as_integer(const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    const auto u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

// Sorts `pairs` by `from` and returns the first `from` given twice, nullptr when none is.
template <typename T>
const T* sort_and_find_repeat(std::vector<std::pair<T, T>>& pairs) {
  std::sort(pairs.begin(), pairs.end());
  for (size_t k = 1; k < pairs.size(); ++k) {
    if (pairs[k].first == pairs[k - 1].first) return &pairs[k].first;
  }
  return nullptr;
}

// The first peer pair naming something other than a rank (0 to rank_count - 1), nullptr if none.
const std::pair<int64_t, int64_t>* peer_out_of_range(
    const std::vector<std::pair<int64_t, int64_t>>& peers, int64_t rank_count) {
  for (const auto& pair : peers) {
    if (pair.first < 0 || pair.first >= rank_count || pair.second < 0 ||
        pair.second >= rank_count) {
      return &pair;
    }
  }
  return nullptr;
}

// A list of [from, to] pairs, sorted by `from`, each `from` once.
template <typename T, typename Read, typename Where>
Expected<std::vector<std::pair<T, T>>> read_pairs(const nlohmann::json& list, const Read& read,
                                                  const Where& where, const char* what) {
  if (!list.is_array()) {
    return Error::make(ErrorKind::kConfig, "{}: '{}' must be a list of [from, to] pairs, found {}",
                       where(), what, json_excerpt(list));
  }
  std::vector<std::pair<T, T>> pairs;
  pairs.reserve(list.size());
  for (const nlohmann::json& pair : list) {
    std::optional<T> from, to;
    if (pair.is_array() && pair.size() == 2) {
      from = read(pair[0]);
      to = read(pair[1]);
    }
    if (!from || !to) {
      return Error::make(ErrorKind::kConfig, "{}: '{}': expected a [from, to] pair, found {}",
                         where(), what, json_excerpt(pair));
    }
    pairs.emplace_back(std::move(*from), std::move(*to));
  }
  if (const T* repeat = sort_and_find_repeat(pairs)) {
    return Error::make(ErrorKind::kConfig, "{}: '{}' renames {} twice", where(), what,
                       fmt::format("{}", *repeat));
  }
  return pairs;
}

// A well-formed rank map read in one SAX pass, without building its JSON document (a 65,536-rank
// map is 21 MB of JSON: the document took a second). Anything it does not expect, or a value the
// checks below refuse, makes it give up; read_rank_map then reads the file the slow way, whose
// messages name what is wrong. So it decides nothing the slow way would not.
class FastRankMap : public nlohmann::json_sax<nlohmann::json> {
 public:
  RankMap map;
  std::string format;
  std::optional<int64_t> version;

  bool null() override { return false; }
  bool boolean(bool) override { return false; }
  bool number_integer(number_integer_t value) override { return integer(value); }
  bool number_unsigned(number_unsigned_t value) override {
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    return integer(static_cast<int64_t>(value));
  }
  bool number_float(number_float_t, const string_t&) override { return false; }
  bool binary(binary_t&) override { return false; }
  bool string(string_t& value) override {
    switch (at_) {
      case At::kFormatValue:
        format = std::move(value);
        at_ = At::kTop;
        return true;
      case At::kClasses:
        map.classes.push_back(std::move(value));
        return true;
      case At::kGroupPair:
        if (pair_size_ == 2) return false;
        (pair_size_++ == 0 ? group_.first : group_.second) = std::move(value);
        return true;
      default:
        return false;
    }
  }
  bool start_object(std::size_t) override {
    if (at_ == At::kBegin) {
      at_ = At::kTop;
      return true;
    }
    if (at_ != At::kRanks) return false;
    map.ranks.emplace_back();
    rank_keys_ = 0;
    at_ = At::kRank;
    return true;
  }
  bool key(string_t& key) override {
    if (at_ == At::kTop) {
      const int bit = key == "format"    ? 1
                      : key == "version" ? 2
                      : key == "classes" ? 4
                      : key == "ranks"   ? 8
                                         : 0;
      if (bit == 0 || (top_keys_ & bit) != 0) return false;
      top_keys_ |= bit;
      at_ = bit == 1   ? At::kFormatValue
            : bit == 2 ? At::kVersionValue
            : bit == 4 ? At::kClassesKey
                       : At::kRanksKey;
      return true;
    }
    if (at_ != At::kRank) return false;
    const int bit = key == "class" ? 1 : key == "peers" ? 2 : key == "groups" ? 4 : 0;
    if (bit == 0 || (rank_keys_ & bit) != 0) return false;
    rank_keys_ |= bit;
    at_ = bit == 1 ? At::kClass : bit == 2 ? At::kPeersKey : At::kGroupsKey;
    return true;
  }
  bool end_object() override {
    if (at_ == At::kRank) {
      if ((rank_keys_ & 1) == 0) return false;
      at_ = At::kRanks;
      return true;
    }
    if (at_ != At::kTop) return false;
    at_ = At::kDone;
    return true;
  }
  bool start_array(std::size_t) override {
    // Where each list may open, and what it holds.
    static constexpr std::pair<At, At> kOpens[] = {
        {At::kClassesKey, At::kClasses}, {At::kRanksKey, At::kRanks},
        {At::kPeersKey, At::kPeers},     {At::kGroupsKey, At::kGroups},
        {At::kPeers, At::kPeerPair},     {At::kGroups, At::kGroupPair}};
    for (const auto& [from, to] : kOpens) {
      if (at_ != from) continue;
      at_ = to;
      pair_size_ = 0;
      return true;
    }
    return false;
  }
  bool end_array() override {
    switch (at_) {
      case At::kClasses:
      case At::kRanks:
        at_ = At::kTop;
        return true;
      case At::kPeers:
      case At::kGroups:
        at_ = At::kRank;
        return true;
      case At::kPeerPair:
        if (pair_size_ != 2) return false;
        map.ranks.back().rename.peers.push_back(peer_);  // pairs occur inside a rank only
        at_ = At::kPeers;
        return true;
      case At::kGroupPair:
        if (pair_size_ != 2) return false;
        map.ranks.back().rename.groups.push_back(std::move(group_));
        at_ = At::kGroups;
        return true;
      default:
        return false;
    }
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception&) override {
    return false;
  }
  bool done() const { return at_ == At::kDone; }

 private:
  enum class At {
    kBegin,
    kTop,
    kFormatValue,
    kVersionValue,
    kClassesKey,
    kClasses,
    kRanksKey,
    kRanks,
    kRank,
    kClass,
    kPeersKey,
    kPeers,
    kPeerPair,
    kGroupsKey,
    kGroups,
    kGroupPair,
    kDone
  };
  bool integer(int64_t value) {
    if (at_ == At::kVersionValue) {
      version = value;
      at_ = At::kTop;
      return true;
    }
    if (at_ == At::kClass) {
      if (value < 0 || value > std::numeric_limits<uint32_t>::max()) return false;
      map.ranks.back().trace = static_cast<uint32_t>(value);
      at_ = At::kRank;
      return true;
    }
    if (at_ != At::kPeerPair || pair_size_ == 2) return false;
    (pair_size_++ == 0 ? peer_.first : peer_.second) = value;
    return true;
  }
  At at_ = At::kBegin;
  int top_keys_ = 0;
  int rank_keys_ = 0;
  int pair_size_ = 0;
  std::pair<int64_t, int64_t> peer_;
  std::pair<std::string, std::string> group_;
};

// The fast reading of `text`, when it is a well-formed map that read_rank_map accepts.
std::optional<RankMap> read_fast(const std::string& text) {
  FastRankMap reader;
  if (!nlohmann::json::sax_parse(text, &reader) || !reader.done()) return std::nullopt;
  RankMap& map = reader.map;
  if (reader.format != kFormat || reader.version != kVersion || map.classes.empty() ||
      map.ranks.empty() || map.ranks.size() > kMaxRanks) {
    return std::nullopt;
  }
  const auto rank_count = static_cast<int64_t>(map.ranks.size());
  for (RankMap::Rank& rank : map.ranks) {
    if (rank.trace >= map.classes.size() || sort_and_find_repeat(rank.rename.peers) != nullptr ||
        sort_and_find_repeat(rank.rename.groups) != nullptr ||
        peer_out_of_range(rank.rename.peers, rank_count) != nullptr) {
      return std::nullopt;
    }
  }
  return std::move(map);
}

}  // namespace

std::string rank_map_path(const std::string& prefix) { return prefix + ".ranks.json"; }

std::string class_trace_path(const std::string& prefix, uint64_t k) {
  return fmt::format("{}.class.{}.et", prefix, k);
}

Expected<RankMap> read_rank_map(const std::string& path) {
  Expected<std::string> text = read_text_file(path);
  if (!text) return text.error();
  if (std::optional<RankMap> fast = read_fast(*text)) return std::move(*fast);
  Expected<JsonConfig> file = JsonConfig::parse(path, std::move(*text));
  if (!file) return file.error();
  const nlohmann::json& doc = file->doc();
  if (!doc.is_object()) {
    return Error::make(ErrorKind::kConfig, "{}: a rank map is a JSON object, found {}", path,
                       json_excerpt(doc));
  }
  Expected<std::optional<std::string>> format = file->get_string("format");
  if (!format) return format.error();
  if (!*format || **format != kFormat) {
    return file->error("format", fmt::format("expected \"{}\"", kFormat));
  }
  Expected<std::optional<int64_t>> version = file->get_int("version", 1, 1'000'000);
  if (!version) return version.error();
  if (!*version || **version != kVersion) {
    return file->error("version", fmt::format("this orrery reads version {}", kVersion));
  }
  Expected<std::optional<std::vector<std::string>>> classes = file->get_string_list("classes");
  if (!classes) return classes.error();
  if (!*classes || (*classes)->empty()) {
    return file->error("classes", "expected a non-empty list of trace files");
  }
  const auto ranks = doc.find("ranks");
  if (ranks == doc.end() || !ranks->is_array() || ranks->empty()) {
    return file->error("ranks", "expected a non-empty list, one entry per rank");
  }
  if (ranks->size() > kMaxRanks) {
    return file->error("ranks",
                       fmt::format("{} ranks; at most {} are simulated", ranks->size(), kMaxRanks));
  }
  RankMap map;
  map.classes = std::move(**classes);
  const auto rank_count = static_cast<int64_t>(ranks->size());
  map.ranks.resize(ranks->size());
  const std::string ranks_at = file->where("ranks");
  for (size_t r = 0; r < ranks->size(); ++r) {
    const nlohmann::json& entry = (*ranks)[r];
    // "<file>:<line>: key 'ranks': rank <r>", made only for a message.
    auto where = [&] { return fmt::format("{}: rank {}", ranks_at, r); };
    if (!entry.is_object()) {
      return Error::make(ErrorKind::kConfig, "{}: expected an object, found {}", where(),
                         json_excerpt(entry));
    }
    RankMap::Rank& rank = map.ranks[r];
    for (const auto& [key, value] : entry.items()) {
      if (key == "class") {
        const std::optional<int64_t> index = as_integer(value);
        if (!index || *index < 0 || static_cast<uint64_t>(*index) >= map.classes.size()) {
          return Error::make(ErrorKind::kConfig,
                             "{}: 'class' must be an index into 'classes' (0 to {}), found {}",
                             where(), map.classes.size() - 1, json_excerpt(value));
        }
        rank.trace = static_cast<uint32_t>(*index);
      } else if (key == "peers") {
        auto peers = read_pairs<int64_t>(value, as_integer, where, "peers");
        if (!peers) return peers.error();
        if (const auto* bad = peer_out_of_range(*peers, rank_count)) {
          return Error::make(ErrorKind::kConfig,
                             "{}: 'peers' renames {} to {}; peers are ranks, 0 to {}", where(),
                             bad->first, bad->second, rank_count - 1);
        }
        rank.rename.peers = std::move(*peers);
      } else if (key == "groups") {
        auto read_name = [](const nlohmann::json& name) -> std::optional<std::string> {
          if (!name.is_string()) return std::nullopt;
          return name.get<std::string>();
        };
        auto groups = read_pairs<std::string>(value, read_name, where, "groups");
        if (!groups) return groups.error();
        rank.rename.groups = std::move(*groups);
      } else {
        return Error::make(ErrorKind::kConfig,
                           "{}: unknown key '{}' (a rank has 'class', 'peers' and 'groups')",
                           where(), key);
      }
    }
    if (entry.find("class") == entry.end()) {
      return Error::make(ErrorKind::kConfig, "{}: missing 'class'", where());
    }
  }
  return map;
}

Status write_rank_map(const std::string& path, const RankMap& map) {
  std::string text = fmt::format("{{\n  \"format\": \"{}\",\n  \"version\": {},\n  \"classes\": [",
                                 kFormat, kVersion);
  for (size_t k = 0; k < map.classes.size(); ++k) {
    text += k == 0 ? "" : ", ";
    append_json_string(text, map.classes[k]);
  }
  text += "],\n  \"ranks\": [";
  for (size_t r = 0; r < map.ranks.size(); ++r) {
    const RankMap::Rank& rank = map.ranks[r];
    text += fmt::format("{}\n    {{\"class\": {}", r == 0 ? "" : ",", rank.trace);
    if (!rank.rename.peers.empty()) {
      text += ", \"peers\": [";
      for (size_t k = 0; k < rank.rename.peers.size(); ++k) {
        text += fmt::format("{}[{}, {}]", k == 0 ? "" : ", ", rank.rename.peers[k].first,
                            rank.rename.peers[k].second);
      }
      text += "]";
    }
    if (!rank.rename.groups.empty()) {
      text += ", \"groups\": [";
      for (size_t k = 0; k < rank.rename.groups.size(); ++k) {
        text += k == 0 ? "[" : ", [";
        append_json_string(text, rank.rename.groups[k].first);
        text += ", ";
        append_json_string(text, rank.rename.groups[k].second);
        text += "]";
      }
      text += "]";
    }
    text += "}";
  }
  text += "\n  ]\n}\n";
  return write_text_file(path, text);
}

}  // namespace orrery::chakra
