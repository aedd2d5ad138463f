#include "chakra/rank_map.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_config.h"

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
  std::sort(pairs.begin(), pairs.end());
  for (size_t k = 1; k < pairs.size(); ++k) {
    if (pairs[k].first == pairs[k - 1].first) {
      return Error::make(ErrorKind::kConfig, "{}: '{}' renames {} twice", where(), what,
                         fmt::format("{}", pairs[k].first));
    }
  }
  return pairs;
}

}  // namespace

std::string rank_map_path(const std::string& prefix) { return prefix + ".ranks.json"; }

std::string class_trace_path(const std::string& prefix, uint64_t k) {
  return fmt::format("{}.class.{}.et", prefix, k);
}

Expected<RankMap> read_rank_map(const std::string& path) {
  Expected<JsonConfig> file = JsonConfig::load(path);
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
        for (const auto& [from, to] : *peers) {
          if (from < 0 || from >= rank_count || to < 0 || to >= rank_count) {
            return Error::make(ErrorKind::kConfig,
                               "{}: 'peers' renames {} to {}; peers are ranks, 0 to {}", where(),
                               from, to, rank_count - 1);
          }
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
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Error::make(ErrorKind::kIo, "{}: cannot write", path);
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
  out << text;
  out.close();
  if (!out) return Error::make(ErrorKind::kIo, "{}: write failed", path);
  return Status::ok();
}

}  // namespace orrery::chakra
