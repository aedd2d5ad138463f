// partition/model.h: a trained feed-forward network as a chain of layers, and its forward pass.
//
// A Model is what every reader (TorchScript, state dict, ONNX) produces: dense and 2-D convolution
// layers with their weights in double precision, ReLU, max pooling and reshapes (flatten), applied
// in order to one input tensor. Activations are matrices with one row per sample and the tensor's
// features in channel-major order (NCHW flattened: feature = (c * H + h) * W + w), so a reshape
// moves no data. finish_model() infers every layer's shapes and checks them; forward() runs the
// chain on a batch and can keep every intermediate activation (the calibration data of the
// partitioner). Pure functions of their inputs, single-threaded: bit-identical on every run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "core/error.h"

namespace orrery::partition {

using Matrix = Eigen::MatrixXd;
using Vector = Eigen::VectorXd;

// A tensor of one sample: channels x height x width (a vector of n features is n x 1 x 1).
struct TensorShape {
  int64_t channels = 0;
  int64_t height = 1;
  int64_t width = 1;
  int64_t features() const { return channels * height * width; }
  int64_t positions() const { return height * width; }
  bool operator==(const TensorShape&) const = default;
};
std::string format_shape(const TensorShape& shape);

enum class LayerKind : uint8_t { kDense, kConv2d, kRelu, kMaxPool2d, kReshape };
std::string_view layer_kind_name(LayerKind kind);

struct Layer {
  LayerKind kind = LayerKind::kRelu;
  std::string name;  // where it came from: a module path, an ONNX node name
  // Dense: out x in. Conv2d: out_channels x (in_channels * kernel_h * kernel_w), columns in
  // (channel, kernel row, kernel column) order, as PyTorch and ONNX store them.
  Matrix weight;
  Vector bias;  // one per output neuron or channel (zeros when the file has none)
  // Conv2d: kernel, stride and zero padding; MaxPool2d: kernel and stride (no padding).
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  TensorShape reshape_to;  // kReshape: the shape after it (features unchanged)
  // Filled by finish_model().
  TensorShape in, out;

  bool weighted() const { return kind == LayerKind::kDense || kind == LayerKind::kConv2d; }
  // Output neurons (dense) or channels (conv): the units the partitioner places on workers.
  int64_t units() const { return weighted() ? weight.rows() : 0; }
  // Multiply-adds per sample of the whole layer.
  int64_t macs() const;
};

struct Model {
  std::string source;  // the file it was read from
  TensorShape input;   // one sample
  std::vector<Layer> layers;

  TensorShape output() const { return layers.empty() ? input : layers.back().out; }
  int64_t weighted_layers() const;
};

// Infers in/out shapes layer by layer from `model.input` and checks weights, kernels and reshapes
// against them. With `input_features` > 0 and an input shape of 0 channels, the input becomes
// that many features, or a square single-channel image when the first weighted layer is a
// convolution taking one channel (the CSV rows of an image model). Errors name the layer.
Status finish_model(Model& model, int64_t input_features = 0);

// The activations after one layer, from the input after `layer`'s predecessors.
Matrix apply_layer(const Layer& layer, const Matrix& input);

// Runs the chain on `input` (rows = samples, columns = model.input features). With `keep`, every
// layer's output is appended (keep->size() == layers.size()).
Matrix forward(const Model& model, const Matrix& input, std::vector<Matrix>* keep = nullptr);

// The im2col matrix of a convolution: one row per (sample, output position), sample-major, one
// column per (input channel, kernel row, kernel column), zero where the kernel covers padding.
Matrix unfold(const Layer& conv, const Matrix& input);

// The argmax of each row (ties: the lowest index).
std::vector<int64_t> argmax_rows(const Matrix& scores);

}  // namespace orrery::partition
