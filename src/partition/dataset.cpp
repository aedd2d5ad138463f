#include "partition/dataset.h"

#include <charconv>
#include <cmath>
#include <string_view>

#include "core/text_file.h"

namespace orrery::partition {

namespace {

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    std::string_view field =
        line.substr(start, comma == std::string_view::npos ? line.npos : comma - start);
    while (!field.empty() && (field.front() == ' ' || field.front() == '\t'))
      field.remove_prefix(1);
    while (!field.empty() && (field.back() == ' ' || field.back() == '\t')) field.remove_suffix(1);
    fields.push_back(field);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return fields;
}

bool parse_number(std::string_view field, double& value) {
  if (!field.empty() && field.front() == '+') field.remove_prefix(1);
  const char* end = field.data() + field.size();
  const auto [ptr, ec] = std::from_chars(field.data(), end, value);
  return ec == std::errc() && ptr == end && !field.empty();
}

}  // namespace

Expected<Dataset> parse_csv_dataset(const std::string& text, const std::string& source) {
  Dataset data;
  data.source = source;
  std::vector<double> values;
  size_t columns = 0;
  size_t line_number = 0;
  size_t start = 0;
  bool first_content = true;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const std::vector<std::string_view> fields = split_fields(line);
    std::vector<double> row(fields.size());
    size_t bad = fields.size();
    for (size_t index = 0; index < fields.size() && bad == fields.size(); ++index) {
      if (!parse_number(fields[index], row[index]) || !std::isfinite(row[index])) bad = index;
    }
    if (bad != fields.size()) {
      if (first_content) {  // a header line
        first_content = false;
        continue;
      }
      return Error::make(ErrorKind::kParse, "{}:{}: field {} \"{}\" is not a number", source,
                         line_number, bad + 1, fields[bad]);
    }
    first_content = false;
    if (fields.size() < 2) {
      return Error::make(ErrorKind::kParse,
                         "{}:{}: {} field; a row is the features, then the label", source,
                         line_number, fields.size());
    }
    if (columns == 0) columns = fields.size();
    if (fields.size() != columns) {
      return Error::make(ErrorKind::kParse, "{}:{}: {} fields, the rows before have {}", source,
                         line_number, fields.size(), columns);
    }
    const double label = row.back();
    if (label < 0 || label != std::floor(label) || label > 1e9) {
      return Error::make(ErrorKind::kParse,
                         "{}:{}: the label (last field) \"{}\" is not a class number (0, 1, ...)",
                         source, line_number, fields.back());
    }
    data.labels.push_back(static_cast<int64_t>(label));
    data.lines.push_back(static_cast<int64_t>(line_number));
    values.insert(values.end(), row.begin(), row.end() - 1);
  }
  if (data.labels.empty()) return Error::make(ErrorKind::kParse, "{}: no data rows", source);
  const auto rows = static_cast<int64_t>(data.labels.size());
  const auto features = static_cast<int64_t>(columns - 1);
  data.features =
      Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
          values.data(), rows, features);
  return data;
}

Expected<Dataset> read_csv_dataset(const std::string& path) {
  Expected<std::string> text = read_text_file(path);
  if (!text) return text.error();
  return parse_csv_dataset(*text, path);
}

Status check_dataset(const Dataset& data, const Model& model) {
  if (data.features.cols() != model.input.features()) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "{}: {} features per row, the model ({}) takes {}", data.source,
                       data.features.cols(), model.source, model.input.features());
  }
  const int64_t classes = model.output().features();
  for (size_t row = 0; row < data.labels.size(); ++row) {
    if (data.labels[row] >= classes) {
      // Datasets built in code carry no line numbers: then the message names the row.
      const std::string where = row < data.lines.size()
                                    ? fmt::format("{}:{}", data.source, data.lines[row])
                                    : fmt::format("{}: row {}", data.source, row + 1);
      return Error::make(ErrorKind::kInvalidArgument,
                         "{}: label {}, but the model has {} outputs (classes 0 to {})", where,
                         data.labels[row], classes, classes - 1);
    }
  }
  return {};
}

double accuracy(const Matrix& scores, const std::vector<int64_t>& labels) {
  const std::vector<int64_t> predicted = argmax_rows(scores);
  size_t right = 0;
  for (size_t row = 0; row < labels.size(); ++row)
    if (predicted[row] == labels[row]) ++right;
  return labels.empty() ? 0.0 : static_cast<double>(right) / static_cast<double>(labels.size());
}

}  // namespace orrery::partition
