// ONNX models through the protobuf schema Debian's libonnx-dev ships (partition/model_file.h).
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "core/text_file.h"
#include "partition/model_file.h"

namespace orrery::partition {

namespace {

struct OnnxTensor {
  std::vector<int64_t> dims;
  std::vector<double> values;
};

double half_to_double(uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double value = 0.0;
  if (exponent == 0) {
    value = std::ldexp(mantissa, -24);
  } else if (exponent == 31) {
    value = mantissa ? std::numeric_limits<double>::quiet_NaN()
                     : std::numeric_limits<double>::infinity();
  } else {
    value = std::ldexp(mantissa + 1024, exponent - 25);
  }
  return sign ? -value : value;
}

class OnnxReader {
 public:
  OnnxReader(std::string path, Model& model) : path_(std::move(path)), model_(model) {}

  Status read(const onnx::GraphProto& graph) {
    for (const onnx::TensorProto& t : graph.initializer()) {
      auto tensor = decode(t, "initializer " + t.name());
      if (!tensor) return tensor.error();
      constants_[t.name()] = std::move(*tensor);
    }
    std::vector<std::string> data_inputs;
    for (const onnx::ValueInfoProto& input : graph.input()) {
      if (constants_.find(input.name()) == constants_.end()) data_inputs.push_back(input.name());
    }
    if (data_inputs.size() != 1) {
      return fail(fmt::format("the graph has {} data inputs; a chain of layers has one",
                              data_inputs.size()));
    }
    current_ = data_inputs[0];
    for (const onnx::ValueInfoProto& input : graph.input()) {
      if (input.name() != current_ || !input.type().has_tensor_type()) continue;
      const auto& shape = input.type().tensor_type().shape();
      if (shape.dim_size() == 4) {
        bool known = true;
        for (int d = 1; d < 4; ++d) known = known && shape.dim(d).has_dim_value();
        if (known) {
          model_.input = {shape.dim(1).dim_value(), shape.dim(2).dim_value(),
                          shape.dim(3).dim_value()};
        }
      } else if (shape.dim_size() == 2 && shape.dim(1).has_dim_value()) {
        model_.input = {shape.dim(1).dim_value(), 1, 1};
      }
    }
    for (int i = 0; i < graph.node_size(); ++i) {
      Status status = visit(graph.node(i), i);
      if (!status) return status;
    }
    if (graph.output_size() != 1 || graph.output(0).name() != current_) {
      return fail("the graph's output is not the end of its chain of layers");
    }
    return Status::ok();
  }

 private:
  Error fail(const std::string& what) const {
    return Error::make(ErrorKind::kParse, "{}: ONNX: {}", path_, what);
  }
  Error node_error(const onnx::NodeProto& node, int index, const std::string& what) const {
    return fail(fmt::format("node {} ({} \"{}\"): {}", index, node.op_type(), node.name(), what));
  }

  Expected<OnnxTensor> decode(const onnx::TensorProto& t, const std::string& what) const {
    if (t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
      return fail(what + ": data in an external file is not read");
    }
    OnnxTensor out;
    // The values must be in the file, so a shape beyond 2^40 elements (or with a negative
    // dimension) is malformed, refused before it is multiplied out of range. The bound holds for
    // the nonzero dimensions too: an empty tensor's other dimensions become its layer's shape.
    constexpr int64_t kMaxElements = int64_t{1} << 40;
    int64_t count = 1;
    int64_t extent = 1;  // the product of the nonzero dimensions
    for (int64_t d : t.dims()) {
      if (d < 0) return fail(fmt::format("{}: dimension {} is negative", what, d));
      if (d > 0 && extent > kMaxElements / d) {
        return fail(fmt::format("{}: a shape of more than 2^40 elements", what));
      }
      out.dims.push_back(d);
      count *= d;
      if (d > 0) extent *= d;
    }
    const std::string& raw = t.raw_data();
    auto from_raw = [&](size_t size, auto convert) -> Status {
      if (raw.size() != static_cast<size_t>(count) * size) {
        return fail(fmt::format("{}: {} raw bytes for {} elements", what, raw.size(), count));
      }
      out.values.resize(static_cast<size_t>(count));
      for (size_t i = 0; i < out.values.size(); ++i) out.values[i] = convert(raw.data() + i * size);
      return Status::ok();
    };
    Status status = Status::ok();
    switch (t.data_type()) {
      case onnx::TensorProto_DataType_FLOAT:
        if (!raw.empty()) {
          status = from_raw(4, [](const char* p) {
            float f;
            std::memcpy(&f, p, 4);
            return static_cast<double>(f);
          });
        } else {
          for (float f : t.float_data()) out.values.push_back(static_cast<double>(f));
        }
        break;
      case onnx::TensorProto_DataType_DOUBLE:
        if (!raw.empty()) {
          status = from_raw(8, [](const char* p) {
            double d;
            std::memcpy(&d, p, 8);
            return d;
          });
        } else {
          out.values.assign(t.double_data().begin(), t.double_data().end());
        }
        break;
      case onnx::TensorProto_DataType_FLOAT16:
      case onnx::TensorProto_DataType_BFLOAT16: {
        const bool brain = t.data_type() == onnx::TensorProto_DataType_BFLOAT16;
        auto convert = [brain](uint16_t bits) {
          if (!brain) return half_to_double(bits);
          const uint32_t wide = static_cast<uint32_t>(bits) << 16;
          float f;
          std::memcpy(&f, &wide, 4);
          return static_cast<double>(f);
        };
        if (!raw.empty()) {
          status = from_raw(2, [&](const char* p) {
            uint16_t bits;
            std::memcpy(&bits, p, 2);
            return convert(bits);
          });
        } else {
          for (int32_t bits : t.int32_data())
            out.values.push_back(convert(static_cast<uint16_t>(bits)));
        }
        break;
      }
      case onnx::TensorProto_DataType_INT64:
        if (!raw.empty()) {
          status = from_raw(8, [](const char* p) {
            int64_t v;
            std::memcpy(&v, p, 8);
            return static_cast<double>(v);
          });
        } else {
          for (int64_t v : t.int64_data()) out.values.push_back(static_cast<double>(v));
        }
        break;
      case onnx::TensorProto_DataType_INT32:
        if (!raw.empty()) {
          status = from_raw(4, [](const char* p) {
            int32_t v;
            std::memcpy(&v, p, 4);
            return static_cast<double>(v);
          });
        } else {
          for (int32_t v : t.int32_data()) out.values.push_back(static_cast<double>(v));
        }
        break;
      default:
        return fail(fmt::format("{}: element type {} is not read", what, t.data_type()));
    }
    if (!status) return status.error();
    if (out.values.size() != static_cast<size_t>(count)) {
      return fail(
          fmt::format("{}: {} values for shape of {} elements", what, out.values.size(), count));
    }
    return out;
  }

  const onnx::AttributeProto* attribute(const onnx::NodeProto& node,
                                        const std::string& name) const {
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.name() == name) return &a;
    }
    return nullptr;
  }
  int64_t int_attr(const onnx::NodeProto& node, const std::string& name, int64_t fallback) const {
    const onnx::AttributeProto* a = attribute(node, name);
    return a ? a->i() : fallback;
  }
  double float_attr(const onnx::NodeProto& node, const std::string& name, double fallback) const {
    const onnx::AttributeProto* a = attribute(node, name);
    return a ? static_cast<double>(a->f()) : fallback;
  }
  std::vector<int64_t> ints_attr(const onnx::NodeProto& node, const std::string& name) const {
    const onnx::AttributeProto* a = attribute(node, name);
    if (!a) return {};
    return {a->ints().begin(), a->ints().end()};
  }

  Expected<const OnnxTensor*> constant_input(const onnx::NodeProto& node, int index,
                                             int input) const {
    if (input >= node.input_size()) return node_error(node, index, "an input is missing");
    const auto found = constants_.find(node.input(input));
    if (found == constants_.end()) {
      return node_error(node, index,
                        fmt::format("input {} \"{}\" is not a constant (an initializer)", input,
                                    node.input(input)));
    }
    return &found->second;
  }

  Status visit(const onnx::NodeProto& node, int index) {
    const std::string& op = node.op_type();
    if (op == "Constant") {
      const onnx::AttributeProto* value = attribute(node, "value");
      if (!value || !value->has_t() || node.output_size() != 1) {
        return node_error(node, index, "a Constant without a tensor value");
      }
      auto tensor = decode(value->t(), "Constant " + node.name());
      if (!tensor) return tensor.error();
      constants_[node.output(0)] = std::move(*tensor);
      return Status::ok();
    }
    if (node.input_size() == 0 || node.input(0) != current_) {
      for (const std::string& input : node.input()) {
        if (input == current_) {
          return node_error(node, index,
                            "uses the activations other than as its first input "
                            "(only chains of layers can be partitioned)");
        }
      }
      return node_error(node, index, "not on the chain of layers");
    }
    for (int i = 1; i < node.input_size(); ++i) {
      if (node.input(i) == current_) {
        return node_error(node, index, "uses the activations twice");
      }
    }
    if (node.output_size() < 1) return node_error(node, index, "no output");
    Layer layer;
    layer.name = node.name();
    if (op == "Gemm") {
      if (int_attr(node, "transA", 0) != 0 || float_attr(node, "alpha", 1.0) != 1.0 ||
          float_attr(node, "beta", 1.0) != 1.0) {
        return node_error(node, index, "Gemm with transA, alpha or beta other than 0, 1, 1");
      }
      auto b = constant_input(node, index, 1);
      if (!b) return b.error();
      Status status = dense_from(node, index, **b, int_attr(node, "transB", 0) != 0, layer);
      if (!status) return status;
      if (node.input_size() > 2 && !node.input(2).empty()) {
        auto c = constant_input(node, index, 2);
        if (!c) return c.error();
        if (static_cast<int64_t>((*c)->values.size()) != layer.weight.rows()) {
          return node_error(node, index, "a bias that is not one value per output");
        }
        layer.bias = Eigen::Map<const Vector>((*c)->values.data(), layer.weight.rows());
      }
      model_.layers.push_back(std::move(layer));
    } else if (op == "MatMul") {
      auto b = constant_input(node, index, 1);
      if (!b) return b.error();
      Status status = dense_from(node, index, **b, false, layer);
      if (!status) return status;
      model_.layers.push_back(std::move(layer));
    } else if (op == "Add") {
      // The bias of a MatMul just before.
      if (model_.layers.empty() || model_.layers.back().kind != LayerKind::kDense ||
          last_was_add_) {
        return node_error(node, index, "an Add that is not the bias of a MatMul");
      }
      auto c = constant_input(node, index, 1);
      if (!c) return c.error();
      Layer& dense = model_.layers.back();
      if (static_cast<int64_t>((*c)->values.size()) != dense.weight.rows()) {
        return node_error(node, index, "a bias that is not one value per output");
      }
      const Vector add = Eigen::Map<const Vector>((*c)->values.data(), dense.weight.rows());
      dense.bias = dense.bias.size() == 0 ? add : Vector(dense.bias + add);
      current_ = node.output(0);
      last_was_add_ = true;
      return Status::ok();
    } else if (op == "Conv") {
      auto w = constant_input(node, index, 1);
      if (!w) return w.error();
      const std::vector<int64_t>& dims = (*w)->dims;
      if (dims.size() != 4) return node_error(node, index, "only 2-D convolutions (4-D weights)");
      const std::vector<int64_t> strides = ints_attr(node, "strides");
      const std::vector<int64_t> pads = ints_attr(node, "pads");
      const std::vector<int64_t> dilations = ints_attr(node, "dilations");
      const onnx::AttributeProto* auto_pad = attribute(node, "auto_pad");
      if (auto_pad && auto_pad->s() != "NOTSET") {
        return node_error(node, index, "auto_pad: give explicit pads");
      }
      if (int_attr(node, "group", 1) != 1) return node_error(node, index, "grouped convolutions");
      for (int64_t d : dilations) {
        if (d != 1) return node_error(node, index, "dilated convolutions");
      }
      if ((!strides.empty() && strides.size() != 2) || (!pads.empty() && pads.size() != 4)) {
        return node_error(node, index, "strides need 2 values and pads 4 for a 2-D convolution");
      }
      if (pads.size() == 4 && (pads[0] != pads[2] || pads[1] != pads[3])) {
        return node_error(node, index, "asymmetric padding");
      }
      layer.kind = LayerKind::kConv2d;
      layer.kernel_h = dims[2];
      layer.kernel_w = dims[3];
      layer.stride_h = strides.size() == 2 ? strides[0] : 1;
      layer.stride_w = strides.size() == 2 ? strides[1] : 1;
      layer.pad_h = pads.size() == 4 ? pads[0] : 0;
      layer.pad_w = pads.size() == 4 ? pads[1] : 0;
      layer.weight =
          Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
              (*w)->values.data(), dims[0], dims[1] * dims[2] * dims[3]);
      if (node.input_size() > 2 && !node.input(2).empty()) {
        auto b = constant_input(node, index, 2);
        if (!b) return b.error();
        if (static_cast<int64_t>((*b)->values.size()) != dims[0]) {
          return node_error(node, index, "a bias that is not one value per output channel");
        }
        layer.bias = Eigen::Map<const Vector>((*b)->values.data(), dims[0]);
      }
      model_.layers.push_back(std::move(layer));
    } else if (op == "Relu") {
      layer.kind = LayerKind::kRelu;
      model_.layers.push_back(std::move(layer));
    } else if (op == "MaxPool") {
      const std::vector<int64_t> kernel = ints_attr(node, "kernel_shape");
      std::vector<int64_t> strides = ints_attr(node, "strides");
      for (int64_t p : ints_attr(node, "pads")) {
        if (p != 0) return node_error(node, index, "max pooling with padding");
      }
      for (int64_t d : ints_attr(node, "dilations")) {
        if (d != 1) return node_error(node, index, "dilated max pooling");
      }
      if (int_attr(node, "ceil_mode", 0) != 0 || node.output_size() > 1) {
        return node_error(node, index, "max pooling in ceil mode or with indices");
      }
      if (kernel.size() != 2) return node_error(node, index, "only 2-D max pooling");
      if (strides.empty()) strides = kernel;
      if (strides.size() != 2) return node_error(node, index, "strides need 2 values");
      layer.kind = LayerKind::kMaxPool2d;
      layer.kernel_h = kernel[0];
      layer.kernel_w = kernel[1];
      layer.stride_h = strides[0];
      layer.stride_w = strides[1];
      model_.layers.push_back(std::move(layer));
    } else if (op == "Flatten") {
      if (int_attr(node, "axis", 1) != 1)
        return node_error(node, index, "Flatten other than axis 1");
      layer.kind = LayerKind::kReshape;
      layer.reshape_to = {0, 1, 1};
      model_.layers.push_back(std::move(layer));
    } else if (op == "Reshape") {
      auto shape = constant_input(node, index, 1);
      if (!shape) return shape.error();
      const std::vector<double>& s = (*shape)->values;
      if (s.empty() || (s[0] != -1 && s[0] != 0)) {
        return node_error(node, index, "a reshape whose first dimension is not the batch");
      }
      // Whole numbers within a shape's range (-1: the rest), so that the casts below are exact;
      // finish_model checks the shape they make.
      if (std::any_of(s.begin() + 1, s.end(), [](double v) {
            return !(v >= -1 && v <= static_cast<double>(int64_t{1} << 40)) || v != std::floor(v);
          })) {
        return node_error(node, index, "a reshape to dimensions that are not -1 to 2^40");
      }
      layer.kind = LayerKind::kReshape;
      const auto count_open = std::count(s.begin() + 1, s.end(), -1.0);
      if (s.size() == 2) {
        layer.reshape_to = {s[1] < 0 ? 0 : static_cast<int64_t>(s[1]), 1, 1};
      } else if (s.size() == 4 && count_open == 0) {
        layer.reshape_to = {static_cast<int64_t>(s[1]), static_cast<int64_t>(s[2]),
                            static_cast<int64_t>(s[3])};
      } else {
        return node_error(node, index,
                          "a reshape to other than (batch, features) or (batch, C, H, W)");
      }
      model_.layers.push_back(std::move(layer));
    } else if (op == "Identity" || op == "Dropout") {
      // Inference: identity.
    } else {
      return node_error(node, index, "an operation the partitioner does not know");
    }
    current_ = node.output(0);
    last_was_add_ = false;
    return Status::ok();
  }

  // A dense layer from a weight matrix: out x in when transposed (Gemm with transB, as PyTorch
  // exports), in x out otherwise.
  Status dense_from(const onnx::NodeProto& node, int index, const OnnxTensor& b, bool transposed,
                    Layer& layer) const {
    if (b.dims.size() != 2) return node_error(node, index, "a weight that is not a matrix");
    using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const Eigen::Map<const RowMajor> m(b.values.data(), b.dims[0], b.dims[1]);
    layer.kind = LayerKind::kDense;
    layer.weight = transposed ? Matrix(m) : Matrix(m.transpose());
    return Status::ok();
  }

  std::string path_;
  Model& model_;
  std::map<std::string, OnnxTensor> constants_;
  std::string current_;
  bool last_was_add_ = false;
};

}  // namespace

Expected<Model> parse_onnx_model(const std::string& bytes, const std::string& source) {
  onnx::ModelProto proto;
  if (!proto.ParseFromString(bytes) || !proto.has_graph()) {
    return Error::make(ErrorKind::kParse,
                       "{}: neither a PyTorch archive (TorchScript, state dict) nor an ONNX model",
                       source);
  }
  Model model;
  model.source = source;
  OnnxReader reader(source, model);
  Status status = reader.read(proto.graph());
  if (!status) return status.error();
  return model;
}

Expected<Model> read_onnx_model(const std::string& path) {
  Expected<std::string> bytes = read_text_file(path, "a model");
  if (!bytes) return bytes.error();
  return parse_onnx_model(*bytes, path);
}

}  // namespace orrery::partition
