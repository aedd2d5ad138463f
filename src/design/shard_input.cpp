#include "design/shard_input.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "core/text_file.h"

namespace orrery::design {

namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return text;
}

// Fields of one line, split at commas (no quoting: table names do not need commas).
std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    fields.push_back(
        trim(line.substr(start, comma == std::string_view::npos ? line.npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return fields;
}

}  // namespace

ShardTables tables_from_dlrm(const gen::DlrmModel& model, std::string source) {
  ShardTables out;
  out.source = std::move(source);
  out.dense_parameter_bytes = model.dense_parameters() * gen::dtype_bytes(model.dtype);
  for (size_t index = 0; index < model.tables.size(); ++index) {
    ShardTable table;
    table.name = fmt::format("t{}", index);
    table.rows = model.tables[index].rows;
    table.dim = model.dim;
    table.pooling = model.tables[index].pooling;
    table.dtype = model.dtype;
    out.tables.push_back(std::move(table));
  }
  return out;
}

Expected<ShardTables> parse_tables_csv(std::string_view text, const std::string& path,
                                       gen::DType dtype) {
  ShardTables out;
  out.source = path;
  enum Column { kName, kRows, kDim, kPooling, kDtype, kIgnored };
  std::vector<Column> columns;
  size_t line_number = 0;
  std::set<std::string> names;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = trim(text.substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (line.empty() || line.front() == '#') {
      if (end == text.size()) break;
      continue;
    }
    const std::vector<std::string_view> fields = split(line);
    auto fail = [&](std::string what) {
      return Error::make(ErrorKind::kParse, "{}:{}: {}", path, line_number, what);
    };
    if (columns.empty()) {
      bool rows = false;
      bool dim = false;
      for (std::string_view field : fields) {
        std::string name(field);
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        Column column = kIgnored;
        if (name == "name" || name == "table") column = kName;
        if (name == "rows" || name == "num_embeddings" || name == "hash_size") column = kRows;
        if (name == "dim" || name == "embedding_dim" || name == "dimension") column = kDim;
        if (name == "pooling" || name == "pooling_factor") column = kPooling;
        if (name == "dtype" || name == "data_type") column = kDtype;
        if (column != kIgnored && std::count(columns.begin(), columns.end(), column) > 0) {
          return fail(fmt::format("column '{}' appears twice in the header", field));
        }
        rows = rows || column == kRows;
        dim = dim || column == kDim;
        columns.push_back(column);
      }
      if (!rows || !dim) {
        return fail(fmt::format(
            "the header names the columns: 'rows' and 'dim' are required, 'name', 'pooling' and "
            "'dtype' optional (found '{}')",
            line));
      }
      if (end == text.size()) break;
      continue;
    }
    if (fields.size() != columns.size()) {
      return fail(
          fmt::format("{} fields, expected {} (as the header)", fields.size(), columns.size()));
    }
    ShardTable table;
    table.name = fmt::format("t{}", out.tables.size());
    table.dtype = dtype;
    for (size_t index = 0; index < fields.size(); ++index) {
      const std::string_view field = fields[index];
      switch (columns[index]) {
        case kName:
          if (field.empty()) return fail("empty table name");
          table.name = std::string(field);
          break;
        case kRows:
        case kDim: {
          uint64_t value = 0;
          const auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
          if (ec != std::errc() || ptr != field.data() + field.size() || value == 0) {
            return fail(fmt::format("column '{}': expected a positive integer, found '{}'",
                                    columns[index] == kRows ? "rows" : "dim", field));
          }
          if (columns[index] == kRows) {
            table.rows = value;
          } else {
            if (value > (1U << 16)) {
              return fail(fmt::format("column 'dim': {} is too large", value));
            }
            table.dim = static_cast<uint32_t>(value);
          }
          break;
        }
        case kPooling: {
          // from_chars for double is not in every standard library this builds with; strtod is.
          const std::string copy(field);
          char* stop = nullptr;
          const double value = std::strtod(copy.c_str(), &stop);
          if (copy.empty() || stop != copy.c_str() + copy.size() || !(value > 0) ||
              !std::isfinite(value)) {
            return fail(fmt::format("column 'pooling': expected a number > 0, found '{}'", field));
          }
          table.pooling = value;
          break;
        }
        case kDtype: {
          Expected<gen::DType> parsed = gen::parse_dtype(field);
          if (!parsed) return fail("column 'dtype': " + parsed.error().message());
          table.dtype = *parsed;
          break;
        }
        case kIgnored:
          break;
      }
    }
    if (!names.insert(table.name).second) {
      return fail(fmt::format("table '{}' is listed twice", table.name));
    }
    if (Status status = validate_shard_table(table); !status) {
      return fail(status.error().message());
    }
    out.tables.push_back(std::move(table));
    if (end == text.size()) break;
  }
  if (columns.empty()) return Error::make(ErrorKind::kParse, "{}: empty (no header row)", path);
  if (out.tables.empty()) return Error::make(ErrorKind::kParse, "{}: no tables", path);
  return out;
}

Expected<ShardTables> load_tables_csv(const std::string& path, gen::DType dtype) {
  Expected<std::string> text = read_text_file(path, "the tables file");
  if (!text) return text.error();
  return parse_tables_csv(*text, path, dtype);
}

}  // namespace orrery::design
