// The model's forward pass against direct definitions, its shape checks, and CSV data.
#include <gtest/gtest.h>

#include "partition/dataset.h"
#include "partition/model.h"

namespace orrery::partition {
namespace model_test {

Layer conv(int64_t out, int64_t in, int64_t k, int64_t stride, int64_t pad, double seed) {
  Layer l;
  l.kind = LayerKind::kConv2d;
  l.name = "conv";
  l.weight.resize(out, in * k * k);
  for (int64_t r = 0; r < l.weight.rows(); ++r) {
    for (int64_t c = 0; c < l.weight.cols(); ++c)
      l.weight(r, c) = std::sin(seed + 0.7 * static_cast<double>(r) + 0.3 * static_cast<double>(c));
  }
  l.bias = Vector::LinSpaced(out, -0.5, 0.5);
  l.kernel_h = l.kernel_w = k;
  l.stride_h = l.stride_w = stride;
  l.pad_h = l.pad_w = pad;
  return l;
}

TEST(Model, convolution_matches_the_direct_sum_with_zero_padding_and_stride) {
  Model model;
  model.source = "test";
  model.input = {2, 5, 4};
  model.layers = {conv(3, 2, 3, 2, 1, 0.1)};
  ASSERT_TRUE(finish_model(model));
  EXPECT_EQ(model.output(), (TensorShape{3, 3, 2}));
  Matrix x(2, 40);
  for (int64_t i = 0; i < x.size(); ++i) x(i) = std::cos(0.37 * static_cast<double>(i));
  const Matrix y = forward(model, x);
  const Layer& l = model.layers[0];
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t o = 0; o < 3; ++o) {
      for (int64_t oh = 0; oh < 3; ++oh) {
        for (int64_t ow = 0; ow < 2; ++ow) {
          double sum = l.bias(o);
          for (int64_t c = 0; c < 2; ++c) {
            for (int64_t kh = 0; kh < 3; ++kh) {
              for (int64_t kw = 0; kw < 3; ++kw) {
                const int64_t ih = oh * 2 - 1 + kh;
                const int64_t iw = ow * 2 - 1 + kw;
                if (ih < 0 || ih >= 5 || iw < 0 || iw >= 4) continue;
                sum += l.weight(o, c * 9 + kh * 3 + kw) * x(n, (c * 5 + ih) * 4 + iw);
              }
            }
          }
          EXPECT_NEAR(y(n, (o * 3 + oh) * 2 + ow), sum, 1e-12);
        }
      }
    }
  }
}

TEST(Model, dense_relu_pool_and_flatten_compose_in_order) {
  Model model;
  model.source = "test";
  model.input = {1, 4, 4};
  Layer pool;
  pool.kind = LayerKind::kMaxPool2d;
  pool.kernel_h = pool.kernel_w = pool.stride_h = pool.stride_w = 2;
  Layer flat;
  flat.kind = LayerKind::kReshape;
  Layer relu;
  relu.kind = LayerKind::kRelu;
  Layer dense;
  dense.kind = LayerKind::kDense;
  dense.weight = (Matrix(2, 4) << 1, -1, 0, 2, 0.5, 0.5, 0.5, 0.5).finished();
  dense.bias = (Vector(2) << 0.25, -30).finished();
  model.layers = {pool, flat, dense, relu};
  ASSERT_TRUE(finish_model(model));
  Matrix x(1, 16);
  for (int64_t i = 0; i < 16; ++i) x(0, i) = static_cast<double>((i * 7) % 16);
  // 2x2 maxima of [[0 7 14 5][12 3 10 1][8 15 6 13][4 11 2 9]]: 12, 14, 15, 13.
  const Matrix y = forward(model, x);
  EXPECT_DOUBLE_EQ(y(0, 0), 12 - 14 + 2 * 13 + 0.25);
  EXPECT_DOUBLE_EQ(y(0, 1), 0.0);  // relu(0.5 * 54 - 30)
}

TEST(Model, shape_errors_name_the_layer) {
  Model model;
  model.source = "m.pt";
  model.input = {8, 1, 1};
  Layer dense;
  dense.kind = LayerKind::kDense;
  dense.name = "fc1";
  dense.weight = Matrix::Ones(4, 6);
  model.layers = {dense};
  Status status = finish_model(model);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().message(),
            "m.pt: layer 0 (dense fc1): weight 4x6 takes 6 inputs, the tensor has 8");

  Model image;
  image.source = "c.onnx";
  image.layers = {conv(4, 1, 3, 1, 1, 0.0)};
  Status odd = finish_model(image, 60);
  ASSERT_FALSE(odd);
  EXPECT_NE(odd.error().message().find("60 input features are not 1 square image channels"),
            std::string::npos)
      << odd.error().message();
  EXPECT_TRUE(finish_model(image, 64));
  EXPECT_EQ(image.input, (TensorShape{1, 8, 8}));
}

// finish_model's error for `layers` on `input` (and `features` a row), or "accepted".
std::string finish_error(TensorShape input, std::vector<Layer> layers, int64_t features = 0) {
  Model model;
  model.source = "m.onnx";
  model.input = input;
  model.layers = std::move(layers);
  Status status = finish_model(model, features);
  return status ? std::string("accepted") : status.error().message();
}

// Shapes and windows a hostile file can give, each found by fuzz_partition_input or beside one.
TEST(Model, shapes_and_windows_out_of_range_are_errors_naming_the_layer) {
  Layer pool;
  pool.kind = LayerKind::kMaxPool2d;
  pool.name = "pool";
  pool.kernel_h = pool.kernel_w = pool.stride_h = pool.stride_w = 2;
  // (1 - 2) / 2 + 1 is 1 in C++'s division: a 2x2 window over a 1x1 map had a 1x1 output, and
  // the forward pass read past the input.
  EXPECT_EQ(finish_error({1, 1, 1}, {conv(2, 1, 1, 1, 0, 0.0), pool}),
            "m.onnx: layer 1 (maxpool2d pool): a 2x2 window does not fit the 2 tensor");
  // A kernel of 2^32 x 2^32 taps overflowed their product.
  Layer wide = conv(1, 1, 1, 1, 0, 0.0);
  wide.kernel_h = wide.kernel_w = int64_t{1} << 32;
  EXPECT_EQ(finish_error({1, 4, 4}, {wide}),
            "m.onnx: layer 0 (conv2d conv): kernel, stride or padding out of range");
  // --input-shape 1,4294967296,4294967296 overflowed its feature count.
  EXPECT_EQ(finish_error({1, int64_t{1} << 32, int64_t{1} << 32}, {conv(1, 1, 1, 1, 0, 0.0)}),
            "m.onnx: an input of 1x4294967296x4294967296: expected 1 to 2^40 values");
  // Three weight columns under a 2x2 kernel made 0 input channels, and the input shape's
  // inference divided by them.
  Layer ragged = conv(1, 1, 2, 1, 0, 0.0);
  ragged.weight = Matrix::Ones(1, 3);
  EXPECT_EQ(finish_error({0, 1, 1}, {ragged}, 16),
            "m.onnx: layer 0 (conv2d conv): 3 weight columns are not whole 2x2 kernels");
  // A padding of 2^31 on each side makes an output of 2^64 positions.
  Layer padded = conv(1, 1, 1, 1, int64_t{1} << 31, 0.0);
  EXPECT_EQ(finish_error({1, 4, 4}, {padded}),
            "m.onnx: layer 0 (conv2d conv): an output of 1x4294967300x4294967300: expected 1 to "
            "2^40 values");
}

TEST(Dataset, reads_features_and_labels_and_skips_a_header) {
  Expected<Dataset> data = parse_csv_dataset("a,b,label\n0.5,1,3\n-2,1e-3,0\n\n", "d.csv");
  ASSERT_TRUE(data) << data.error().message();
  EXPECT_EQ(data->rows(), 2);
  EXPECT_EQ(data->features.cols(), 2);
  EXPECT_DOUBLE_EQ(data->features(1, 1), 1e-3);
  EXPECT_EQ(data->labels, (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(data->lines, (std::vector<int64_t>{2, 3}));
}

TEST(Dataset, bad_rows_are_errors_naming_file_line_and_field) {
  auto message = [](const std::string& text) {
    Expected<Dataset> d = parse_csv_dataset(text, "d.csv");
    return d ? std::string("no error") : d.error().message();
  };
  EXPECT_EQ(message("1,2,3\n4,x,1\n"), "d.csv:2: field 2 \"x\" is not a number");
  EXPECT_EQ(message("1,2,3\n4,5\n"), "d.csv:2: 2 fields, the rows before have 3");
  EXPECT_EQ(message("1,2,1.5\n"),
            "d.csv:1: the label (last field) \"1.5\" is not a class number (0, 1, ...)");
  EXPECT_EQ(message("h1,h2\n"), "d.csv: no data rows");
  EXPECT_EQ(message("7\n"), "d.csv:1: 1 field; a row is the features, then the label");
  Expected<Dataset> missing = read_csv_dataset("/nonexistent/x.csv");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message(),
            "/nonexistent/x.csv: cannot open: No such file or directory");
}

TEST(Dataset, accuracy_counts_argmax_hits) {
  const Matrix scores = (Matrix(3, 2) << 0.1, 0.9, 0.8, 0.2, 0.5, 0.5).finished();
  EXPECT_DOUBLE_EQ(accuracy(scores, {1, 1, 0}), 2.0 / 3.0);  // a tie goes to class 0
}

}  // namespace model_test
}  // namespace orrery::partition
