// PyTorch's files read with libtorch: TorchScript (scripted and traced), state dicts, bad files.
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>

#include <cstring>
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
  EXPECT_EQ(missing.error().message(),
            (dir / "none.pt").string() + ": cannot open a model: No such file or directory");
  std::filesystem::remove_all(dir);
}

// A state dict of one tensor "fc.weight", written as torch.save writes it (protocol 2 pickle in a
// zip archive) but with the storage's element count, sizes and strides given.
std::string state_dict_pickle(int64_t numel, const std::vector<int64_t>& sizes,
                              const std::vector<int64_t>& strides) {
  std::string p =
      "\x80\x02"
      "ccollections\nOrderedDict\n)R(";
  const auto text = [&](const std::string& value) {
    const auto length = static_cast<uint32_t>(value.size());
    p += 'X';
    p.append(reinterpret_cast<const char*>(&length), 4);
    p += value;
  };
  const auto integer = [&](int64_t value) {  // LONG1 of 8 bytes, little-endian
    p += "\x8a\x08";
    p.append(reinterpret_cast<const char*>(&value), 8);
  };
  text("fc.weight");
  p += "ctorch._utils\n_rebuild_tensor_v2\n((";
  text("storage");
  p += "ctorch\nFloatStorage\n";
  text("0");
  text("cpu");
  integer(numel);
  p += "tQ";   // the persistent id, then the storage it names
  integer(0);  // offset
  p += '(';
  for (int64_t size : sizes) integer(size);
  p += "t(";
  for (int64_t stride : strides) integer(stride);
  p += "t\x89"
       "ccollections\nOrderedDict\n)RtRu.";  // False: no grad
  return p;
}

std::string write_state_dict(const std::filesystem::path& path, const std::string& pickle,
                             size_t storage_bytes) {
  caffe2::serialize::PyTorchStreamWriter writer(path.string());
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  const std::vector<char> storage(storage_bytes, 0);
  writer.writeRecord("data/0", storage.data(), storage.size());
  writer.writeEndOfFile();
  return path.string();
}

// The storage's count and the view were trusted: 2^62 floats times 4 bytes wrapped to 0 and
// passed the size check, and a view with fewer strides than sizes read past the strides.
TEST(TorchModel, a_state_dict_whose_tensor_does_not_fit_its_storage_is_an_error) {
  const auto dir = std::filesystem::temp_directory_path() / "orrery-torch-state-test";
  std::filesystem::create_directories(dir);
  const std::string good =
      write_state_dict(dir / "good.pt", state_dict_pickle(6, {2, 3}, {3, 1}), 24);
  Expected<Model> model = read_model(good);
  ASSERT_TRUE(model) << model.error().message();
  ASSERT_EQ(model->layers.size(), 1u);
  EXPECT_EQ(model->layers[0].weight.rows(), 2);
  EXPECT_EQ(model->layers[0].weight.cols(), 3);

  const std::string wrapped =
      write_state_dict(dir / "wrapped.pt", state_dict_pickle(int64_t{1} << 62, {2, 3}, {3, 1}), 24);
  Expected<Model> huge = read_model(wrapped);
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.error().message(),
            wrapped + ": fc.weight: its storage holds 24 bytes, not 4611686018427387904 elements");

  const std::string uneven =
      write_state_dict(dir / "uneven.pt", state_dict_pickle(6, {2, 3}, {3}), 24);
  Expected<Model> strides = read_model(uneven);
  ASSERT_FALSE(strides);
  EXPECT_EQ(strides.error().message(), uneven + ": fc.weight: 2 sizes but 1 strides");

  const std::string far = write_state_dict(
      dir / "far.pt", state_dict_pickle(6, {2, int64_t{1} << 62}, {int64_t{1} << 62, 1}), 24);
  Expected<Model> overflow = read_model(far);
  ASSERT_FALSE(overflow);
  EXPECT_EQ(overflow.error().message(), far + ": fc.weight: its shape reaches past its storage");
  std::filesystem::remove_all(dir);
}

}  // namespace torch_model_test
}  // namespace orrery::partition
