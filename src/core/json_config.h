// core/json_config.h: JSON configuration files with errors that name the file, line and key.
//
// nlohmann::json parses the file (its syntax errors carry line and column); line_of() finds where a
// key is written so that a value of the wrong kind or range can be reported as
// `sys.json:7: key 'active-chunks-per-dimension': expected a positive integer, found "two"`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace orrery {

class JsonConfig {
 public:
  // Reads and parses `path`. Fails on a missing file, a syntax error (with line and column), a
  // number beyond a double's range, or a key written twice in one object (with both lines).
  static Expected<JsonConfig> load(const std::string& path);
  // Parses `text` as if read from `path` (for tests and embedded defaults).
  static Expected<JsonConfig> parse(const std::string& path, std::string text);

  const std::string& path() const { return path_; }
  const nlohmann::json& doc() const { return doc_; }

  // The 1-based line where "key" is first written, 0 when it does not appear.
  int line_of(std::string_view key) const;
  // The 1-based line of each key of the top-level object, in one pass over the text (line_of per
  // key is a scan each: quadratic for a file of many thousand groups). Keys written with escapes
  // are left out (line_of finds those).
  std::unordered_map<std::string, int> top_level_key_lines() const;
  // "path:line: key 'key'" (or "path: key 'key'" when the key is absent), for error messages.
  std::string where(std::string_view key) const;
  // An Error of kind kConfig: "<where(key)>: <what>".
  Error error(std::string_view key, std::string_view what) const;

  // Typed reads of a top-level key; nullopt when absent, an Error when present but unusable.
  Expected<std::optional<int64_t>> get_int(std::string_view key, int64_t min, int64_t max) const;
  Expected<std::optional<double>> get_number(std::string_view key, double min_exclusive) const;
  // A number within [min, max] (finite); the error states the range and `unit`.
  Expected<std::optional<double>> get_number_in(std::string_view key, double min, double max,
                                                std::string_view unit = "") const;
  Expected<std::optional<std::string>> get_string(std::string_view key) const;
  Expected<std::optional<std::vector<std::string>>> get_string_list(std::string_view key) const;

 private:
  std::string path_;
  std::string text_;
  nlohmann::json doc_;
};

// A short rendering of a JSON value for messages ("\"two\"", "[1, 2]", "-3").
std::string json_excerpt(const nlohmann::json& value);

// Appends `text` as a JSON string literal (quoted, with ", \ and control characters escaped) to
// `out`, without building a json value: for writers that stream JSON text.
void append_json_string(std::string& out, std::string_view text);

}  // namespace orrery
