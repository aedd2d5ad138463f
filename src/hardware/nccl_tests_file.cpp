#include "hardware/nccl_tests_file.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "core/text_file.h"

namespace orrery::hw {

namespace {

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos < line.size()) {
    while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t' || line[pos] == '\r')) ++pos;
    size_t end = pos;
    while (end < line.size() && line[end] != ' ' && line[end] != '\t' && line[end] != '\r') ++end;
    if (end > pos) out.push_back(line.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

bool whole(std::string_view text, uint64_t& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end;
}

bool number(std::string_view text, double& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && std::isfinite(out);
}

bool is_number(std::string_view text) {
  double value = 0;
  return number(text, value);
}

}  // namespace

Expected<std::vector<MeasuredRow>> parse_nccl_tests(std::string_view text,
                                                    std::string_view file_name) {
  std::vector<MeasuredRow> rows;
  // Tables: the column of the time, from the header line. nccl-tests' output: found per row.
  int time_column = -1;
  bool header_seen = false;
  int line_number = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    const std::vector<std::string_view> f = fields(line);
    if (f.empty() || f[0].starts_with("#")) {
      if (end == text.size()) break;
      continue;
    }
    if (!is_number(f[0])) {
      // A header of column names.
      if (header_seen) {
        return Error::make(ErrorKind::kParse, "{}:{}: a second header line ('{}')", file_name,
                           line_number, f[0]);
      }
      header_seen = true;
      for (size_t idx = 0; idx < f.size(); ++idx) {
        if (f[idx] == "oop_time_us") {
          time_column = static_cast<int>(idx);
          break;
        }
        if (time_column < 0 && f[idx].find("time") != std::string_view::npos) {
          time_column = static_cast<int>(idx);
        }
      }
      if (time_column < 0) {
        return Error::make(ErrorKind::kParse, "{}:{}: no time column in the header", file_name,
                           line_number);
      }
      if (end == text.size()) break;
      continue;
    }
    MeasuredRow row;
    row.line = line_number;
    if (!whole(f[0], row.size) || row.size == 0) {
      return Error::make(ErrorKind::kParse, "{}:{}: size '{}' is not a positive whole number",
                         file_name, line_number, f[0]);
    }
    size_t column = 0;
    if (header_seen) {
      column = static_cast<size_t>(time_column);
    } else {
      // nccl-tests: size count type, then redop and root when printed, then the time.
      if (f.size() < 4) {
        return Error::make(ErrorKind::kParse,
                           "{}:{}: expected nccl-tests' columns (size count type ... time), found "
                           "{} fields",
                           file_name, line_number, f.size());
      }
      column = 3;
      while (column < f.size() && !is_number(f[column])) ++column;  // redop
      if (column + 1 < f.size() && column > 3) ++column;            // root (a number)
    }
    if (column >= f.size()) {
      return Error::make(ErrorKind::kParse,
                         "{}:{}: no time (expected at least {} fields, found {})", file_name,
                         line_number, column + 1, f.size());
    }
    if (!number(f[column], row.time_us) || row.time_us <= 0) {
      return Error::make(ErrorKind::kParse, "{}:{}: time '{}' is not a positive number", file_name,
                         line_number, f[column]);
    }
    if (!rows.empty() && row.size <= rows.back().size) {
      return Error::make(ErrorKind::kParse, "{}:{}: size {} does not increase (line {} has {})",
                         file_name, line_number, row.size, rows.back().line, rows.back().size);
    }
    rows.push_back(row);
    if (end == text.size()) break;
  }
  if (rows.empty()) {
    return Error::make(ErrorKind::kParse, "{}: no measured rows (size and time per line)",
                       file_name);
  }
  return rows;
}

Expected<std::vector<MeasuredRow>> load_nccl_tests(const std::string& path) {
  Expected<std::string> text = read_text_file(path);
  if (!text) return text.error();
  return parse_nccl_tests(*text, path);
}

}  // namespace orrery::hw
