#include "partition/model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <Eigen/Dense>

namespace orrery::partition {

std::string format_shape(const TensorShape& shape) {
  if (shape.height == 1 && shape.width == 1) return fmt::format("{}", shape.channels);
  return fmt::format("{}x{}x{}", shape.channels, shape.height, shape.width);
}

std::string_view layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::kDense:
      return "dense";
    case LayerKind::kConv2d:
      return "conv2d";
    case LayerKind::kRelu:
      return "relu";
    case LayerKind::kMaxPool2d:
      return "maxpool2d";
    case LayerKind::kReshape:
      return "reshape";
  }
  return "?";
}

int64_t Layer::macs() const {
  if (kind == LayerKind::kDense) return weight.rows() * weight.cols();
  if (kind == LayerKind::kConv2d) return weight.rows() * weight.cols() * out.positions();
  return 0;
}

int64_t Model::weighted_layers() const {
  return std::count_if(layers.begin(), layers.end(), [](const Layer& l) { return l.weighted(); });
}

namespace {

// "<file>: layer 3 (conv2d features.0): <what>".
Error layer_error(const Model& model, size_t index, const std::string& what) {
  const Layer& layer = model.layers[index];
  return Error::make(ErrorKind::kConfig, "{}: layer {} ({} {}): {}", model.source, index,
                     layer_kind_name(layer.kind), layer.name, what);
}

// At most 2^40 values in one sample's tensor, every dimension at least 1: far above any real
// network's, and small enough that the shape arithmetic below cannot overflow.
constexpr int64_t kMaxFeatures = int64_t{1} << 40;

bool shape_in_range(const TensorShape& shape) {
  int64_t product = 1;
  for (const int64_t dim : {shape.channels, shape.height, shape.width}) {
    if (dim < 1 || __builtin_mul_overflow(product, dim, &product) || product > kMaxFeatures)
      return false;
  }
  return true;
}

// Kernels, strides and padding beyond 2^31 are no real network's; bounded so that the kernel
// area and the padded extent cannot overflow.
constexpr int64_t kMaxExtent = int64_t{1} << 31;

bool window_in_range(const Layer& layer) {
  const auto within = [](int64_t value, int64_t low) {
    return value >= low && value <= kMaxExtent;
  };
  return within(layer.kernel_h, 1) && within(layer.kernel_w, 1) && within(layer.stride_h, 1) &&
         within(layer.stride_w, 1) && within(layer.pad_h, 0) && within(layer.pad_w, 0);
}

// The extent of a window's positions over `in` padded by `pad` on each side, 0 when the window
// does not fit (C++ division truncates toward zero, so the formula alone said 1 for a window one
// wider than the input). `in` is a checked shape's and the window a checked layer's: no overflow.
int64_t conv_extent(int64_t in, int64_t kernel, int64_t stride, int64_t pad) {
  const int64_t span = in + 2 * pad;
  return span < kernel ? 0 : (span - kernel) / stride + 1;
}

}  // namespace

Status finish_model(Model& model, int64_t input_features) {
  if (model.layers.empty()) {
    return Error::make(ErrorKind::kConfig, "{}: the model has no layers", model.source);
  }
  // Windows first: the input shape below divides by the first convolution's kernel area.
  for (size_t index = 0; index < model.layers.size(); ++index) {
    const Layer& layer = model.layers[index];
    if (layer.kind != LayerKind::kConv2d && layer.kind != LayerKind::kMaxPool2d) continue;
    if (!window_in_range(layer)) {
      return layer_error(model, index, "kernel, stride or padding out of range");
    }
    if (layer.kind == LayerKind::kConv2d &&
        (layer.weight.cols() == 0 ||
         layer.weight.cols() % (layer.kernel_h * layer.kernel_w) != 0)) {
      return layer_error(model, index,
                         fmt::format("{} weight columns are not whole {}x{} kernels",
                                     layer.weight.cols(), layer.kernel_h, layer.kernel_w));
    }
  }
  if (model.input.channels == 0) {
    const auto first = std::find_if(model.layers.begin(), model.layers.end(),
                                    [](const Layer& l) { return l.weighted(); });
    if (first != model.layers.end() && first->kind == LayerKind::kConv2d &&
        model.layers.front().kind != LayerKind::kReshape) {
      const int64_t in_channels = first->weight.cols() / (first->kernel_h * first->kernel_w);
      if (input_features <= 0 || input_features % in_channels != 0) {
        return Error::make(ErrorKind::kConfig,
                           "{}: the model starts with a convolution of {} input channels; give "
                           "the input shape (C,H,W), none fits {} features",
                           model.source, in_channels, input_features);
      }
      const auto side = static_cast<int64_t>(
          std::llround(std::sqrt(static_cast<double>(input_features / in_channels))));
      if (side * side * in_channels != input_features) {
        return Error::make(ErrorKind::kConfig,
                           "{}: {} input features are not {} square image channels: give the "
                           "input shape (C,H,W)",
                           model.source, input_features, in_channels);
      }
      model.input = {in_channels, side, side};
    } else {
      model.input = {input_features, 1, 1};
    }
  }
  if (!shape_in_range(model.input)) {
    return Error::make(ErrorKind::kConfig, "{}: an input of {}: expected 1 to 2^40 values",
                       model.source, format_shape(model.input));
  }
  TensorShape shape = model.input;
  for (size_t index = 0; index < model.layers.size(); ++index) {
    Layer& layer = model.layers[index];
    layer.in = shape;
    switch (layer.kind) {
      case LayerKind::kDense:
        if (shape.height != 1 || shape.width != 1) {
          return layer_error(model, index,
                             fmt::format("a dense layer after a {} tensor: flatten it first",
                                         format_shape(shape)));
        }
        if (layer.weight.cols() != shape.channels) {
          return layer_error(
              model, index,
              fmt::format("weight {}x{} takes {} inputs, the tensor has {}", layer.weight.rows(),
                          layer.weight.cols(), layer.weight.cols(), shape.channels));
        }
        shape = {layer.weight.rows(), 1, 1};
        break;
      case LayerKind::kConv2d: {
        const int64_t taps = layer.kernel_h * layer.kernel_w;
        if (layer.weight.cols() != shape.channels * taps) {
          return layer_error(
              model, index,
              fmt::format("weights for {} input channels, the tensor {} has {}",
                          layer.weight.cols() / taps, format_shape(shape), shape.channels));
        }
        const int64_t h = conv_extent(shape.height, layer.kernel_h, layer.stride_h, layer.pad_h);
        const int64_t w = conv_extent(shape.width, layer.kernel_w, layer.stride_w, layer.pad_w);
        if (h <= 0 || w <= 0) {
          return layer_error(model, index,
                             fmt::format("a {}x{} kernel does not fit the {} tensor",
                                         layer.kernel_h, layer.kernel_w, format_shape(shape)));
        }
        shape = {layer.weight.rows(), h, w};
        break;
      }
      case LayerKind::kMaxPool2d: {
        const int64_t h = conv_extent(shape.height, layer.kernel_h, layer.stride_h, 0);
        const int64_t w = conv_extent(shape.width, layer.kernel_w, layer.stride_w, 0);
        if (h <= 0 || w <= 0) {
          return layer_error(model, index,
                             fmt::format("a {}x{} window does not fit the {} tensor",
                                         layer.kernel_h, layer.kernel_w, format_shape(shape)));
        }
        shape = {shape.channels, h, w};
        break;
      }
      case LayerKind::kReshape:
        if (layer.reshape_to.channels <= 0) layer.reshape_to = {shape.features(), 1, 1};
        if (!shape_in_range(layer.reshape_to) || layer.reshape_to.features() != shape.features()) {
          return layer_error(model, index,
                             fmt::format("reshape of {} features to {}", shape.features(),
                                         format_shape(layer.reshape_to)));
        }
        shape = layer.reshape_to;
        break;
      case LayerKind::kRelu:
        break;
    }
    if (!shape_in_range(shape)) {
      return layer_error(
          model, index,
          fmt::format("an output of {}: expected 1 to 2^40 values", format_shape(shape)));
    }
    if (layer.weighted() && layer.bias.size() == 0) layer.bias = Vector::Zero(layer.weight.rows());
    if (layer.weighted() && layer.bias.size() != layer.weight.rows()) {
      return layer_error(
          model, index,
          fmt::format("{} biases for {} outputs", layer.bias.size(), layer.weight.rows()));
    }
    if (layer.weighted() && !layer.weight.allFinite()) {
      return layer_error(model, index, "weights that are not finite numbers");
    }
    layer.out = shape;
  }
  if (model.weighted_layers() == 0) {
    return Error::make(ErrorKind::kConfig, "{}: the model has no dense or convolution layer",
                       model.source);
  }
  return Status::ok();
}

Matrix unfold(const Layer& conv, const Matrix& input) {
  const TensorShape in = conv.in;
  const TensorShape out = conv.out;
  const int64_t taps = conv.kernel_h * conv.kernel_w;
  const int64_t positions = out.positions();
  Matrix patches = Matrix::Zero(input.rows() * positions, in.channels * taps);
  for (int64_t sample = 0; sample < input.rows(); ++sample) {
    for (int64_t oh = 0; oh < out.height; ++oh) {
      for (int64_t ow = 0; ow < out.width; ++ow) {
        const int64_t row = sample * positions + oh * out.width + ow;
        for (int64_t c = 0; c < in.channels; ++c) {
          for (int64_t kh = 0; kh < conv.kernel_h; ++kh) {
            const int64_t ih = oh * conv.stride_h - conv.pad_h + kh;
            if (ih < 0 || ih >= in.height) continue;
            for (int64_t kw = 0; kw < conv.kernel_w; ++kw) {
              const int64_t iw = ow * conv.stride_w - conv.pad_w + kw;
              if (iw < 0 || iw >= in.width) continue;
              patches(row, c * taps + kh * conv.kernel_w + kw) =
                  input(sample, (c * in.height + ih) * in.width + iw);
            }
          }
        }
      }
    }
  }
  return patches;
}

Matrix apply_layer(const Layer& layer, const Matrix& input) {
  switch (layer.kind) {
    case LayerKind::kDense: {
      Matrix out = input * layer.weight.transpose();
      out.rowwise() += layer.bias.transpose();
      return out;
    }
    case LayerKind::kConv2d: {
      const int64_t positions = layer.out.positions();
      Matrix out(input.rows(), layer.out.features());
      // In blocks of samples: the unfolded input of a whole batch can be large.
      constexpr int64_t kBlock = 64;
      for (int64_t first = 0; first < input.rows(); first += kBlock) {
        const int64_t count = std::min(kBlock, input.rows() - first);
        const Matrix patches = unfold(layer, input.middleRows(first, count));
        Matrix result = patches * layer.weight.transpose();
        result.rowwise() += layer.bias.transpose();
        for (int64_t sample = 0; sample < count; ++sample) {
          for (int64_t c = 0; c < layer.out.channels; ++c) {
            for (int64_t p = 0; p < positions; ++p) {
              out(first + sample, c * positions + p) = result(sample * positions + p, c);
            }
          }
        }
      }
      return out;
    }
    case LayerKind::kRelu:
      return input.cwiseMax(0.0);
    case LayerKind::kMaxPool2d: {
      const TensorShape in = layer.in;
      const TensorShape out = layer.out;
      Matrix result(input.rows(), out.features());
      for (int64_t sample = 0; sample < input.rows(); ++sample) {
        for (int64_t c = 0; c < out.channels; ++c) {
          for (int64_t oh = 0; oh < out.height; ++oh) {
            for (int64_t ow = 0; ow < out.width; ++ow) {
              double best = -std::numeric_limits<double>::infinity();
              for (int64_t kh = 0; kh < layer.kernel_h; ++kh) {
                for (int64_t kw = 0; kw < layer.kernel_w; ++kw) {
                  const int64_t ih = oh * layer.stride_h + kh;
                  const int64_t iw = ow * layer.stride_w + kw;
                  best = std::max(best, input(sample, (c * in.height + ih) * in.width + iw));
                }
              }
              result(sample, (c * out.height + oh) * out.width + ow) = best;
            }
          }
        }
      }
      return result;
    }
    case LayerKind::kReshape:
      return input;
  }
  return input;
}

Matrix forward(const Model& model, const Matrix& input, std::vector<Matrix>* keep) {
  Matrix current = input;
  for (const Layer& layer : model.layers) {
    current = apply_layer(layer, current);
    if (keep) keep->push_back(current);
  }
  return current;
}

std::vector<int64_t> argmax_rows(const Matrix& scores) {
  std::vector<int64_t> best(static_cast<size_t>(scores.rows()), 0);
  for (int64_t row = 0; row < scores.rows(); ++row) {
    for (int64_t col = 1; col < scores.cols(); ++col) {
      if (scores(row, col) > scores(row, best[static_cast<size_t>(row)])) {
        best[static_cast<size_t>(row)] = col;
      }
    }
  }
  return best;
}

}  // namespace orrery::partition
