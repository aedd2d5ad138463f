#include "chakra/comm_groups.h"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <optional>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_config.h"

namespace orrery::chakra {

namespace {

// "<where>: " when `where` names a place, "" otherwise.
std::string prefix(const std::string& where) { return where.empty() ? "" : where + ": "; }

// A rank written in a file: a non-negative JSON integer.
std::optional<uint64_t> as_rank(const nlohmann::json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    return static_cast<uint64_t>(value.get<int64_t>());
  }
  return std::nullopt;
}

// Reads a JSON list of ranks. Ranks beyond uint32 are kept as an out-of-range marker for add().
Expected<std::vector<uint32_t>> read_ranks(const nlohmann::json& value, const std::string& where,
                                           const std::string& name, uint32_t rank_count) {
  if (!value.is_array()) {
    return Error::make(ErrorKind::kConfig, "{}group '{}': expected a list of ranks, found {}",
                       prefix(where), name, json_excerpt(value));
  }
  std::vector<uint32_t> ranks;
  ranks.reserve(value.size());
  for (const nlohmann::json& item : value) {
    const std::optional<uint64_t> rank = as_rank(item);
    if (!rank) {
      return Error::make(ErrorKind::kConfig,
                         "{}group '{}': expected ranks as non-negative integers, found {}",
                         prefix(where), name, json_excerpt(item));
    }
    if (*rank >= rank_count) {
      return Error::make(ErrorKind::kConfig,
                         "{}group '{}': rank {} is out of range (the job has {} ranks, 0 to {})",
                         prefix(where), name, *rank, rank_count, rank_count - 1);
    }
    ranks.push_back(static_cast<uint32_t>(*rank));
  }
  return ranks;
}

// ---- Python literals ----------------------------------------------------------------------------

// Drops a trailing comma (and the blanks after it) before a closing bracket: Python allows
// `[1, 2,]` and `(1,)`, JSON does not.
void drop_trailing_comma(std::string& out) {
  size_t end = out.size();
  while (end > 0 && std::isspace(static_cast<unsigned char>(out[end - 1])) != 0) --end;
  if (end > 0 && out[end - 1] == ',') out.erase(end - 1);
}

// Rewrites a Python literal (repr of lists, tuples, dicts, strings, numbers, True/False/None) as
// JSON text. Anything it does not understand is copied as is, for the JSON parser to reject.
std::string python_literal_to_json(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  size_t pos = 0;
  while (pos < text.size()) {
    const char c = text[pos];
    if (c == '\'' || c == '"') {
      // A string: emit it double-quoted, turning Python escapes into JSON ones.
      const char quote = c;
      out += '"';
      ++pos;
      while (pos < text.size() && text[pos] != quote) {
        const char ch = text[pos];
        if (ch == '\\' && pos + 1 < text.size()) {
          const char next = text[pos + 1];
          if (next == '\'') {
            out += '\'';
          } else if (next == 'x' && pos + 3 < text.size() &&
                     std::isxdigit(static_cast<unsigned char>(text[pos + 2])) != 0 &&
                     std::isxdigit(static_cast<unsigned char>(text[pos + 3])) != 0) {
            out += "\\u00";
            out += text.substr(pos + 2, 2);
            pos += 2;
          } else {
            out += '\\';
            out += next;
          }
          pos += 2;
          continue;
        }
        if (ch == '"') {
          out += "\\\"";  // only possible inside a single-quoted string
        } else {
          out += ch;
        }
        ++pos;
      }
      out += '"';
      ++pos;  // the closing quote (or the end of an unterminated string)
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_') {
      size_t end = pos;
      while (end < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[end])) != 0 || text[end] == '_')) {
        ++end;
      }
      const std::string_view word = text.substr(pos, end - pos);
      if (word == "True") {
        out += "true";
      } else if (word == "False") {
        out += "false";
      } else if (word == "None") {
        out += "null";
      } else {
        out += word;
      }
      pos = end;
      continue;
    }
    if (c == '(' || c == ')' || c == ']' || c == '}') {
      if (c != '(') drop_trailing_comma(out);
      out += c == '(' ? '[' : (c == ')' ? ']' : c);
      ++pos;
      continue;
    }
    out += c;
    ++pos;
  }
  return out;
}

// Parses `text` as JSON, else as a Python literal. nullopt when neither reads.
std::optional<nlohmann::json> parse_literal(std::string_view text) {
  nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!value.is_discarded()) return value;
  value = nlohmann::json::parse(python_literal_to_json(text), nullptr, false);
  if (!value.is_discarded()) return value;
  return std::nullopt;
}

bool mentions_process_groups(std::string_view text) {
  return text.find("pg_name") != std::string_view::npos;
}

// Collects every object with a "pg_name" member, looking inside lists and inside strings that
// hold JSON or Python text themselves (PyTorch stores the groups as JSON text, and converters
// wrap that text in Python lists). Fails when such a string mentions pg_name but does not read.
Status collect_groups(const nlohmann::json& value, int depth, const std::string& where,
                      std::vector<nlohmann::json>& groups) {
  if (depth > 8) return Status::ok();
  if (value.is_object()) {
    if (value.contains("pg_name")) {
      groups.push_back(value);
      return Status::ok();
    }
    for (const auto& item : value.items()) {
      if (Status status = collect_groups(item.value(), depth + 1, where, groups); !status) {
        return status;
      }
    }
    return Status::ok();
  }
  if (value.is_array()) {
    for (const nlohmann::json& item : value) {
      if (Status status = collect_groups(item, depth + 1, where, groups); !status) return status;
    }
    return Status::ok();
  }
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    if (!mentions_process_groups(text)) return Status::ok();
    std::optional<nlohmann::json> inner = parse_literal(text);
    if (!inner) {
      return Error::make(ErrorKind::kParse,
                         "{}cannot read the process groups in {} (expected a list of "
                         "{{'pg_name': ..., 'ranks': [...]}})",
                         prefix(where), json_excerpt(value));
    }
    return collect_groups(*inner, depth + 1, where, groups);
  }
  return Status::ok();
}

}  // namespace

CommGroups::CommGroups(uint32_t rank_count) : rank_count_(rank_count) {
  all_.ranks.resize(rank_count);
  std::iota(all_.ranks.begin(), all_.ranks.end(), 0U);
}

Status CommGroups::add(const std::string& name, std::vector<uint32_t> ranks,
                       const std::string& where) {
  if (ranks.empty()) {
    return Error::make(ErrorKind::kConfig, "{}group '{}': empty rank list (expected 1 to {} ranks)",
                       prefix(where), name, rank_count_);
  }
  for (const uint32_t rank : ranks) {
    if (rank >= rank_count_) {
      return Error::make(ErrorKind::kConfig,
                         "{}group '{}': rank {} is out of range (the job has {} ranks, 0 to {})",
                         prefix(where), name, rank, rank_count_, rank_count_ - 1);
    }
  }
  std::sort(ranks.begin(), ranks.end());
  if (const auto twice = std::adjacent_find(ranks.begin(), ranks.end()); twice != ranks.end()) {
    return Error::make(ErrorKind::kConfig, "{}group '{}': rank {} is listed twice", prefix(where),
                       name, *twice);
  }
  groups_[name] = CommGroup{name, std::move(ranks)};
  return Status::ok();
}

const CommGroup* CommGroups::find(const std::string& pg_name) const {
  if (const auto found = groups_.find(pg_name); found != groups_.end()) return &found->second;
  if (pg_name.empty() || pg_name == "0") return &all_;
  return nullptr;
}

namespace {

// The groups of a communicator-group document (a file's or a text's).
Status add_comm_groups(const JsonConfig& file, CommGroups& groups) {
  const JsonConfig* config = &file;
  const std::string& path = file.path();
  const nlohmann::json& doc = config->doc();
  if (!doc.is_object()) {
    return Error::make(ErrorKind::kConfig,
                       "{}: expected an object of groups ({{\"1\": [0, 1], \"2\": [2, 3]}}), "
                       "found {}",
                       path, json_excerpt(doc));
  }
  // Groups in the order they are written (by line, then by number), so the first problem in the
  // file is the one reported.
  std::vector<std::pair<int, std::string>> names;
  const std::unordered_map<std::string, int> lines = config->top_level_key_lines();
  for (const auto& item : doc.items()) {
    const auto line = lines.find(item.key());
    names.emplace_back(line != lines.end() ? line->second : config->line_of(item.key()),
                       item.key());
  }
  std::sort(names.begin(), names.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    if (a.second.size() != b.second.size()) return a.second.size() < b.second.size();
    return a.second < b.second;
  });
  // Nothing is added unless the whole file reads.
  CommGroups staged = groups;
  for (const auto& [line, name] : names) {
    const std::string where = line == 0 ? path : fmt::format("{}:{}", path, line);
    // ASTRA-sim reads group ids as integers.
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c)) != 0;
        })) {
      return Error::make(ErrorKind::kConfig,
                         "{}: group id \"{}\" is not a non-negative integer (the pg_name that "
                         "COMM_COLL nodes carry)",
                         where, name);
    }
    Expected<std::vector<uint32_t>> ranks =
        read_ranks(doc.at(name), where, name, staged.rank_count());
    if (!ranks) return ranks.error();
    if (Status status = staged.add(name, std::move(*ranks), where); !status) return status;
  }
  groups = std::move(staged);
  return Status::ok();
}

}  // namespace

Status load_comm_group_file(const std::string& path, CommGroups& groups) {
  Expected<JsonConfig> config = JsonConfig::load(path);
  if (!config) return config.error();
  return add_comm_groups(*config, groups);
}

Status parse_comm_group_text(const std::string& name, std::string text, CommGroups& groups) {
  Expected<JsonConfig> config = JsonConfig::parse(name, std::move(text));
  if (!config) return config.error();
  return add_comm_groups(*config, groups);
}

Status add_groups_from_metadata(std::string_view inputs_values, const std::string& where,
                                CommGroups& groups) {
  if (!mentions_process_groups(inputs_values)) return Status::ok();
  std::optional<nlohmann::json> value = parse_literal(inputs_values);
  if (!value) {
    return Error::make(ErrorKind::kParse,
                       "{}cannot read the process groups in {} (expected a list of "
                       "{{'pg_name': ..., 'ranks': [...]}})",
                       prefix(where), json_excerpt(nlohmann::json(std::string(inputs_values))));
  }
  std::vector<nlohmann::json> found;
  if (Status status = collect_groups(*value, 0, where, found); !status) return status;
  CommGroups staged = groups;  // nothing is added unless every group reads
  for (const nlohmann::json& group : found) {
    const nlohmann::json& pg_name = group.at("pg_name");
    std::string name;
    if (pg_name.is_string()) {
      name = pg_name.get<std::string>();
    } else if (const std::optional<uint64_t> number = as_rank(pg_name)) {
      name = std::to_string(*number);
    } else {
      return Error::make(ErrorKind::kConfig,
                         "{}process group with pg_name {}: expected the name as text",
                         prefix(where), json_excerpt(pg_name));
    }
    if (!group.contains("ranks")) {
      return Error::make(ErrorKind::kConfig, "{}group '{}': no 'ranks' list", prefix(where), name);
    }
    Expected<std::vector<uint32_t>> ranks =
        read_ranks(group.at("ranks"), where, name, staged.rank_count());
    if (!ranks) return ranks.error();
    // An empty list means every rank (PyTorch writes the default group so).
    if (ranks->empty()) *ranks = staged.all().ranks;
    if (Status status = staged.add(name, std::move(*ranks), where); !status) return status;
  }
  groups = std::move(staged);
  return Status::ok();
}

}  // namespace orrery::chakra
