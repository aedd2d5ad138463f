// ONNX models read through Debian's ONNX schema: the CNN exported by PyTorch, and bad files.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <limits>

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
  EXPECT_EQ(missing.error().message(),
            "/nonexistent/m.onnx: cannot open a model: No such file or directory");
}

// Found by fuzz_partition_input: a tensor's dimensions were multiplied without a bound (signed
// overflow), and a MaxPool with one stride read a second.
TEST(OnnxModel, malformed_shapes_and_attributes_are_errors_naming_the_node) {
  onnx::ModelProto proto;
  onnx::GraphProto* graph = proto.mutable_graph();
  onnx::TensorProto* weight = graph->add_initializer();
  weight->set_name("w");
  weight->set_data_type(onnx::TensorProto_DataType_FLOAT);
  for (int64_t dim : {int64_t{1} << 30, int64_t{1} << 30}) weight->add_dims(dim);
  onnx::NodeProto* gemm = graph->add_node();
  gemm->set_op_type("Gemm");
  gemm->set_name("fc");
  gemm->add_input("x");
  gemm->add_input("w");
  gemm->add_output("y");
  Expected<Model> model = parse_onnx_model(proto.SerializeAsString(), "big.onnx");
  ASSERT_FALSE(model);
  EXPECT_NE(model.error().message().find("a shape of more than 2^40 elements"), std::string::npos)
      << model.error().message();

  onnx::ModelProto pooling;
  pooling.mutable_graph()->add_input()->set_name("x");
  onnx::NodeProto* pool = pooling.mutable_graph()->add_node();
  pool->set_op_type("MaxPool");
  pool->set_name("pool");
  pool->add_input("x");
  pool->add_output("y");
  onnx::AttributeProto* kernel = pool->add_attribute();
  kernel->set_name("kernel_shape");
  kernel->add_ints(2);
  kernel->add_ints(2);
  onnx::AttributeProto* strides = pool->add_attribute();
  strides->set_name("strides");
  strides->add_ints(2);
  Expected<Model> strided = parse_onnx_model(pooling.SerializeAsString(), "pool.onnx");
  ASSERT_FALSE(strided);
  EXPECT_EQ(strided.error().message(),
            "pool.onnx: ONNX: node 0 (MaxPool \"pool\"): strides need 2 values");

  // A reshape to 2^63 - 1 features: the double it is read as did not fit int64 on the way back.
  onnx::ModelProto reshaping;
  onnx::GraphProto* flat = reshaping.mutable_graph();
  flat->add_input()->set_name("x");
  onnx::TensorProto* shape = flat->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(onnx::TensorProto_DataType_INT64);
  shape->add_dims(2);
  shape->add_int64_data(-1);
  shape->add_int64_data(std::numeric_limits<int64_t>::max());
  onnx::NodeProto* reshape = flat->add_node();
  reshape->set_op_type("Reshape");
  reshape->set_name("r");
  reshape->add_input("x");
  reshape->add_input("shape");
  reshape->add_output("y");
  Expected<Model> far = parse_onnx_model(reshaping.SerializeAsString(), "r.onnx");
  ASSERT_FALSE(far);
  EXPECT_EQ(far.error().message(),
            "r.onnx: ONNX: node 0 (Reshape \"r\"): a reshape to dimensions that are not -1 to "
            "2^40");
}

}  // namespace onnx_model_test
}  // namespace orrery::partition
