// ONNX models read through Debian's ONNX schema: the CNN exported by PyTorch, and bad files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "partition/model_file.h"
#include "partition/reference.h"

namespace orrery::partition {
namespace onnx_model_test {

TEST(OnnxModel, the_exported_cnn_reproduces_pytorchs_logits_and_accuracy) {
  Expected<Model> model = read_onnx_model(partition_data("digits_cnn.onnx"));
  ASSERT_TRUE(model) << model.error().message();
  // Reshape, conv, relu, conv, relu, maxpool, flatten, gemm, relu, gemm.
  ASSERT_EQ(model->layers.size(), 10u);
  EXPECT_EQ(model->layers[1].kind, LayerKind::kConv2d);
  EXPECT_EQ(model->layers[1].pad_h, 1);
  EXPECT_EQ(model->layers[5].kind, LayerKind::kMaxPool2d);
  EXPECT_EQ(model->layers[7].weight.rows(), 64);
  EXPECT_EQ(model->layers[7].weight.cols(), 512);
  expect_reference(*model, "digits_cnn.onnx");
}

TEST(OnnxModel, files_that_are_not_models_are_errors_naming_the_file) {
  const auto path = std::filesystem::temp_directory_path() / "orrery-not-a-model.onnx";
  {
    std::ofstream out(path);
    out << "x0,x1,label\n1,2,3\n";
  }
  Expected<Model> model = read_onnx_model(path.string());
  ASSERT_FALSE(model);
  EXPECT_EQ(
      model.error().message(),
      path.string() + ": neither a PyTorch archive (TorchScript, state dict) nor an ONNX model");
  std::filesystem::remove(path);
  Expected<Model> missing = read_onnx_model("/nonexistent/m.onnx");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message(), "/nonexistent/m.onnx: cannot open");
}

}  // namespace onnx_model_test
}  // namespace orrery::partition
