// PyTorch's files read with libtorch: TorchScript (scripted and traced), state dicts, bad files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "partition/model_file.h"
#include "partition/reference.h"

namespace orrery::partition {
namespace torch_model_test {

TEST(TorchModel, a_scripted_float16_mlp_reproduces_pytorchs_logits_and_accuracy) {
  Expected<Model> model = read_model(partition_data("digits_mlp.pt"));
  ASSERT_TRUE(model) << model.error().message();
  ASSERT_EQ(model->layers.size(), 5u);
  EXPECT_EQ(model->layers[0].weight.rows(), 512);
  EXPECT_EQ(model->layers[2].weight.cols(), 512);
  EXPECT_EQ(model->layers[3].kind, LayerKind::kRelu);
  expect_reference(*model, "digits_mlp.pt");
}

TEST(TorchModel, a_traced_cnn_reads_as_the_same_chain_as_its_onnx_export) {
  Expected<Model> traced = read_model(partition_data("digits_cnn.pt"));
  ASSERT_TRUE(traced) << traced.error().message();
  Expected<Model> onnx = read_model(partition_data("digits_cnn.onnx"));
  ASSERT_TRUE(onnx) << onnx.error().message();
  ASSERT_EQ(traced->layers.size(), onnx->layers.size());
  for (size_t i = 0; i < traced->layers.size(); ++i) {
    EXPECT_EQ(traced->layers[i].kind, onnx->layers[i].kind) << "layer " << i;
    EXPECT_EQ(traced->layers[i].weight, onnx->layers[i].weight) << "layer " << i;
    EXPECT_EQ(traced->layers[i].stride_h, onnx->layers[i].stride_h) << "layer " << i;
  }
  expect_reference(*traced, "digits_cnn.pt");
}

TEST(TorchModel, a_state_dict_reads_as_dense_layers_with_relu_between) {
  Expected<Model> model = read_model(partition_data("digits_mlp_small_state.pt"));
  ASSERT_TRUE(model) << model.error().message();
  ASSERT_EQ(model->layers.size(), 5u);
  EXPECT_EQ(model->layers[0].name, "net.0");
  EXPECT_EQ(model->layers[2].name, "net.2");
  EXPECT_EQ(model->layers[2].weight.rows(), 64);
  expect_reference(*model, "digits_mlp_small_state.pt");
}

TEST(TorchModel, bad_files_are_errors_naming_the_file) {
  const auto dir = std::filesystem::temp_directory_path() / "orrery-torch-model-test";
  std::filesystem::create_directories(dir);
  // A zip archive cut short.
  std::ifstream in(partition_data("digits_mlp_small_state.pt"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const auto cut = (dir / "cut.pt").string();
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, 3000);
  Expected<Model> truncated = read_model(cut);
  ASSERT_FALSE(truncated);
  EXPECT_EQ(truncated.error().message().rfind(cut + ": PyTorch archive: ", 0), 0u)
      << truncated.error().message();
  // The legacy format: a bare pickle.
  const auto legacy = (dir / "legacy.pt").string();
  std::ofstream(legacy, std::ios::binary) << std::string("\x80\x02\x8a\x0a", 4) << "rest";
  Expected<Model> old = read_model(legacy);
  ASSERT_FALSE(old);
  EXPECT_EQ(old.error().message(), legacy +
                                       ": PyTorch's legacy (non-zip) torch.save format: save it "
                                       "again with PyTorch 1.6 or later");
  Expected<Model> missing = read_model((dir / "none.pt").string());
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message(), (dir / "none.pt").string() + ": cannot open");
  std::filesystem::remove_all(dir);
}

}  // namespace torch_model_test
}  // namespace orrery::partition
