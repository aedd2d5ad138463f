#include "core/json_config.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/checked.h"
#include "core/text_file.h"

namespace orrery {

Expected<JsonConfig> JsonConfig::load(const std::string& path) {
  Expected<std::string> text = read_text_file(path);
  if (!text) return text.error();
  return parse(path, std::move(*text));
}

namespace {

// The 1-based line of the `occurrence`-th (0-based) place where `"key"` is written as a key (the
// quoted text followed by a colon), 0 when there is none.
int line_of_key(const std::string& text, std::string_view key, int occurrence) {
  const std::string quoted = fmt::format("\"{}\"", key);
  size_t at = 0;
  int seen = 0;
  while ((at = text.find(quoted, at)) != std::string::npos) {
    size_t after = at + quoted.size();
    while (after < text.size() && (text[after] == ' ' || text[after] == '\t' ||
                                   text[after] == '\n' || text[after] == '\r')) {
      ++after;
    }
    if (after < text.size() && text[after] == ':' && seen++ == occurrence) {
      return 1 + static_cast<int>(std::count(text.begin(),
                                             text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
    }
    at += quoted.size();
  }
  return 0;
}

int line_at_byte(const std::string& text, size_t byte) {
  const size_t end = std::min(byte, text.size());
  return 1 + static_cast<int>(
                 std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
}

// The SAX pass of JsonConfig::parse: nesting depth and, per open object, the keys seen (how often
// each key was seen before in the whole text tells which of its places holds a repeat). A syntax
// error stops it; the DOM parse after it reports the error.
class KeyCheck : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit KeyCheck(int max_depth) : max_depth_(max_depth) {}
  bool too_deep = false;
  std::optional<std::pair<std::string, int>> duplicate;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    open_objects_.emplace_back();
    return enter();
  }
  bool key(string_t& key) override {
    std::vector<std::string>& keys = open_objects_.back();
    const int occurrence = seen_as_key_[key]++;
    if (!duplicate && std::find(keys.begin(), keys.end(), key) != keys.end()) {
      duplicate.emplace(key, occurrence);
    }
    keys.push_back(key);
    return true;
  }
  bool end_object() override {
    open_objects_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override { return enter(); }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception&) override {
    return false;
  }

 private:
  // A value inside more than max_depth containers is too deep (nlohmann's callback depth).
  bool enter() {
    if (++depth_ > max_depth_) too_deep = true;
    return !too_deep;
  }
  int max_depth_;
  int depth_ = 0;
  std::vector<std::vector<std::string>> open_objects_;
  std::map<std::string, int, std::less<>> seen_as_key_;
};

}  // namespace

Expected<JsonConfig> JsonConfig::parse(const std::string& path, std::string text) {
  JsonConfig config;
  config.path_ = path;
  config.text_ = std::move(text);
  // Duplicate keys are an error: nlohmann keeps the last, other readers the first, and a file that
  // says two things should not be read as either. A key's duplicates are found per object (one
  // set of keys per open object); how often each key was seen before tells which of its places
  // in the text holds the repeat.
  // Both are checked by a SAX pass before the document is built: nlohmann 3.11's parser with a
  // callback scans the parent container at every object's end (a rank map of 65,536 objects in
  // one list took seconds), the SAX interface is linear and stops at the first excess level.
  constexpr int kMaxDepth = 64;
  KeyCheck check(kMaxDepth);
  nlohmann::json::sax_parse(config.text_, &check);
  if (check.too_deep) {
    return Error::make(ErrorKind::kParse, "{}: lists or objects nested more than {} deep", path,
                       kMaxDepth);
  }
  try {
    config.doc_ = nlohmann::json::parse(config.text_);
  } catch (const nlohmann::json::parse_error& error) {
    // nlohmann's message: "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    std::string message = error.what();
    if (const size_t at = message.find("parse error"); at != std::string::npos)
      message = message.substr(at);
    return Error::make(ErrorKind::kParse, "{}: {}", path, message);
  } catch (const nlohmann::json::exception& error) {
    // A number beyond a double's range ("1e999"): nlohmann reports it without a position, but
    // names the text, which is found to give the line.
    std::string message = error.what();
    if (const size_t at = message.find("] "); at != std::string::npos)
      message = message.substr(at + 2);
    int line = 0;
    if (const size_t open = message.find('\''); open != std::string::npos) {
      const size_t close = message.find('\'', open + 1);
      if (close != std::string::npos) {
        const size_t found = config.text_.find(message.substr(open + 1, close - open - 1));
        if (found != std::string::npos) line = line_at_byte(config.text_, found);
      }
    }
    if (line > 0) return Error::make(ErrorKind::kParse, "{}:{}: {}", path, line, message);
    return Error::make(ErrorKind::kParse, "{}: {}", path, message);
  }
  if (const std::optional<std::pair<std::string, int>>& duplicate = check.duplicate) {
    const int line = line_of_key(config.text_, duplicate->first, duplicate->second);
    const int first = line_of_key(config.text_, duplicate->first, 0);
    return Error::make(ErrorKind::kConfig,
                       "{}:{}: key '{}' is given twice (first on line {}); a key may appear once",
                       path, line, duplicate->first, first);
  }
  return config;
}

int JsonConfig::line_of(std::string_view key) const {
  const std::string quoted = fmt::format("\"{}\"", key);
  const size_t at = text_.find(quoted);
  if (at == std::string::npos) return 0;
  return 1 + static_cast<int>(
                 std::count(text_.begin(), text_.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
}

std::unordered_map<std::string, int> JsonConfig::top_level_key_lines() const {
  std::unordered_map<std::string, int> lines;
  int line = 1;
  int depth = 0;
  for (size_t at = 0; at < text_.size(); ++at) {
    const char c = text_[at];
    if (c == '\n') {
      ++line;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == '"') {
      const size_t start = at + 1;
      const int start_line = line;
      bool escaped = false;
      size_t end = start;
      for (; end < text_.size() && text_[end] != '"'; ++end) {
        if (text_[end] == '\\') {
          escaped = true;
          ++end;  // the escaped character
        } else if (text_[end] == '\n') {
          ++line;
        }
      }
      at = end;
      if (depth != 1 || escaped) continue;
      size_t next = end + 1;
      while (next < text_.size() && (text_[next] == ' ' || text_[next] == '\t' ||
                                     text_[next] == '\r' || text_[next] == '\n')) {
        ++next;
      }
      if (next < text_.size() && text_[next] == ':' && end <= text_.size()) {
        lines.try_emplace(text_.substr(start, end - start), start_line);
      }
    }
  }
  return lines;
}

std::string JsonConfig::where(std::string_view key) const {
  const int line = line_of(key);
  if (line == 0) return fmt::format("{}: key '{}'", path_, key);
  return fmt::format("{}:{}: key '{}'", path_, line, key);
}

Error JsonConfig::error(std::string_view key, std::string_view what) const {
  return Error(ErrorKind::kConfig, fmt::format("{}: {}", where(key), what));
}

std::string json_excerpt(const nlohmann::json& value) {
  // Text from a file may hold bytes that are not UTF-8 (a trace's METADATA node): they print as
  // U+FFFD; nlohmann's default would throw from inside an error message (found by
  // fuzz_json_config).
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

Expected<std::optional<int64_t>> JsonConfig::get_int(std::string_view key, int64_t min,
                                                     int64_t max) const {
  if (!doc_.is_object() || !doc_.contains(key)) return std::optional<int64_t>();
  const nlohmann::json& value = doc_.at(std::string(key));
  auto out_of_range = [&] {
    return error(key, fmt::format("expected an integer from {} to {}, found {}", min, max,
                                  json_excerpt(value)));
  };
  int64_t number = 0;
  if (value.is_number_unsigned()) {
    if (value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return out_of_range();
    number = static_cast<int64_t>(value.get<uint64_t>());
  } else if (value.is_number_integer()) {
    number = value.get<int64_t>();
  } else if (value.is_number_float()) {
    // A whole number written with a fraction or exponent ("4.0", "1e3"); the range is checked
    // before the conversion, which is undefined beyond int64.
    const double real = value.get<double>();
    if (!std::isfinite(real) || real != std::floor(real)) {
      return error(key, fmt::format("expected an integer, found {}", json_excerpt(value)));
    }
    if (real < -9.2e18 || real > 9.2e18) return out_of_range();
    number = static_cast<int64_t>(real);
  } else {
    return error(key, fmt::format("expected an integer, found {}", json_excerpt(value)));
  }
  if (number < min || number > max) {
    return error(key, fmt::format("expected an integer from {} to {}, found {}", min, max, number));
  }
  return std::optional<int64_t>(number);
}

Expected<std::optional<double>> JsonConfig::get_number(std::string_view key,
                                                       double min_exclusive) const {
  if (!doc_.is_object() || !doc_.contains(key)) return std::optional<double>();
  const nlohmann::json& value = doc_.at(std::string(key));
  if (!value.is_number()) {
    return error(key, fmt::format("expected a number, found {}", json_excerpt(value)));
  }
  const double number = value.get<double>();
  if (!(number > min_exclusive)) {
    return error(key, fmt::format("expected a number above {}, found {}", min_exclusive,
                                  json_excerpt(value)));
  }
  return std::optional<double>(number);
}

Expected<std::optional<double>> JsonConfig::get_number_in(std::string_view key, double min,
                                                          double max, std::string_view unit) const {
  if (!doc_.is_object() || !doc_.contains(key)) return std::optional<double>();
  const nlohmann::json& value = doc_.at(std::string(key));
  if (!value.is_number()) {
    return error(key, fmt::format("expected a number, found {}", json_excerpt(value)));
  }
  const double number = value.get<double>();
  if (!in_range(number, min, max)) return error(key, range_message(number, min, max, unit));
  return std::optional<double>(number);
}

Expected<std::optional<std::string>> JsonConfig::get_string(std::string_view key) const {
  if (!doc_.is_object() || !doc_.contains(key)) return std::optional<std::string>();
  const nlohmann::json& value = doc_.at(std::string(key));
  if (!value.is_string()) {
    return error(key, fmt::format("expected a string, found {}", json_excerpt(value)));
  }
  return std::optional<std::string>(value.get<std::string>());
}

Expected<std::optional<std::vector<std::string>>> JsonConfig::get_string_list(
    std::string_view key) const {
  if (!doc_.is_object() || !doc_.contains(key)) return std::optional<std::vector<std::string>>();
  const nlohmann::json& value = doc_.at(std::string(key));
  if (!value.is_array()) {
    return error(key, fmt::format("expected a list of strings, found {}", json_excerpt(value)));
  }
  std::vector<std::string> items;
  for (const nlohmann::json& item : value) {
    if (!item.is_string()) {
      return error(
          key, fmt::format("expected a list of strings, found the item {}", json_excerpt(item)));
    }
    items.push_back(item.get<std::string>());
  }
  return std::optional<std::vector<std::string>>(std::move(items));
}

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

}  // namespace orrery
