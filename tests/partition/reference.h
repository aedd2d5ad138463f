// tests/partition/reference.h: PyTorch's figures for the trained models (reference.json, written
// by train_digits.py), and a check that a Model reproduces them.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "partition/dataset.h"
#include "partition/model.h"

namespace orrery::partition {

inline std::string partition_data(const std::string& name) {
  return std::string(ORRERY_TEST_DATA_DIR) + "/partition/" + name;
}

// Finishes `model` for the test rows, then compares its logits of the first rows and its accuracy
// with PyTorch's.
inline void expect_reference(Model model, const std::string& file) {
  std::ifstream in(partition_data("reference.json"));
  const nlohmann::json reference = nlohmann::json::parse(in)[file];
  Expected<Dataset> test = read_csv_dataset(partition_data("test.csv"));
  ASSERT_TRUE(test) << test.error().message();
  ASSERT_TRUE(finish_model(model, test->features.cols()));
  const Matrix logits = forward(model, test->features);
  const auto& rows = reference["logits"];
  ASSERT_EQ(rows.size(), 4u);
  for (size_t r = 0; r < rows.size(); ++r) {
    ASSERT_EQ(static_cast<int64_t>(rows[r].size()), logits.cols());
    for (size_t c = 0; c < rows[r].size(); ++c) {
      // PyTorch computes in float32, orrery in double.
      EXPECT_NEAR(logits(static_cast<int64_t>(r), static_cast<int64_t>(c)),
                  rows[r][c].get<double>(), 1e-4 * (1.0 + std::abs(rows[r][c].get<double>())))
          << file << " row " << r << " logit " << c;
    }
  }
  EXPECT_DOUBLE_EQ(accuracy(logits, test->labels), reference["accuracy"].get<double>()) << file;
}

}  // namespace orrery::partition
