#include "core/json_config.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace orrery {

Expected<JsonConfig> JsonConfig::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::make(ErrorKind::kIo, "{}: cannot open", path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return parse(path, buffer.str());
}

Expected<JsonConfig> JsonConfig::parse(const std::string& path, std::string text) {
  JsonConfig config;
  config.path_ = path;
  config.text_ = std::move(text);
  try {
    config.doc_ = nlohmann::json::parse(config.text_);
  } catch (const nlohmann::json::parse_error& error) {
    // nlohmann's message: "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    std::string message = error.what();
    if (const size_t at = message.find("parse error"); at != std::string::npos)
      message = message.substr(at);
    return Error::make(ErrorKind::kParse, "{}: {}", path, message);
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

std::string JsonConfig::where(std::string_view key) const {
  const int line = line_of(key);
  if (line == 0) return fmt::format("{}: key '{}'", path_, key);
  return fmt::format("{}:{}: key '{}'", path_, line, key);
}

Error JsonConfig::error(std::string_view key, std::string_view what) const {
  return Error(ErrorKind::kConfig, fmt::format("{}: {}", where(key), what));
}

std::string json_excerpt(const nlohmann::json& value) {
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

Expected<std::optional<int64_t>> JsonConfig::get_int(std::string_view key, int64_t min,
                                                     int64_t max) const {
  if (!doc_.is_object() || !doc_.contains(key)) return std::optional<int64_t>();
  const nlohmann::json& value = doc_.at(std::string(key));
  int64_t number = 0;
  if (value.is_number_integer()) {
    number = value.get<int64_t>();
  } else if (value.is_number_float() &&
             value.get<double>() ==
                 static_cast<double>(static_cast<int64_t>(value.get<double>()))) {
    number = static_cast<int64_t>(value.get<double>());
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
