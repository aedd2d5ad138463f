// partition/dataset.h: labelled samples from CSV, the format every user can write.
//
// One sample per line: the model's input features, then the class label (a non-negative integer)
// in the last column. An optional first line of column names is skipped (a line whose fields are
// not all numbers). Every row must have the same number of fields. Errors name the file, the line
// and the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "partition/model.h"

namespace orrery::partition {

struct Dataset {
  std::string source;
  Matrix features;              // one row per sample
  std::vector<int64_t> labels;  // one per sample
  std::vector<int64_t> lines;   // the line of each sample in the file, for errors
  int64_t rows() const { return features.rows(); }
};

Expected<Dataset> read_csv_dataset(const std::string& path);
// The same from text (`source` names it in errors).
Expected<Dataset> parse_csv_dataset(const std::string& text, const std::string& source);

// Checks that `data` is for `model`: as many features per row as its input takes, and every
// label one of its output classes. The error names the file and line (or row).
Status check_dataset(const Dataset& data, const Model& model);

// The share of rows whose argmax of `scores` is the label, in [0, 1].
double accuracy(const Matrix& scores, const std::vector<int64_t>& labels);

}  // namespace orrery::partition
