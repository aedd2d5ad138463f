#include "replay/op_cost.h"

#include <algorithm>
#include <iterator>
#include <string_view>

namespace orrery::replay {

namespace {

const TensorView* tensor_at(const ReplayPlan& plan, const std::vector<Arg>& args, size_t at) {
  if (at >= args.size() || args[at].kind != Arg::Kind::kTensor) return nullptr;
  return &plan.tensors[args[at].tensor];
}

uint64_t product(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  uint64_t out = 1;
  for (size_t at = begin; at < end && at < dims.size(); ++at)
    out *= static_cast<uint64_t>(std::max<int64_t>(dims[at], 0));
  return out;
}

uint64_t tensor_bytes_of(const ReplayPlan& plan, const std::vector<Arg>& args) {
  uint64_t bytes = 0;
  for (const Arg& arg : args) {
    if (arg.kind == Arg::Kind::kTensor) {
      const TensorView& view = plan.tensors[arg.tensor];
      bytes += static_cast<uint64_t>(view.numel()) * dtype_bytes(view.dtype);
    }
    bytes += tensor_bytes_of(plan, arg.items);
  }
  return bytes;
}

// 2 x (product of the output's dims) x (C/groups) x kh x kw, from output [N, O, spatial...] and
// weight [O, C/groups, kernel...].
std::optional<uint64_t> conv_flops(const TensorView& output, const TensorView& weight) {
  if (output.shape.size() < 3 || weight.shape.size() != output.shape.size()) return std::nullopt;
  return 2 * product(output.shape, 0, output.shape.size()) *
         product(weight.shape, 1, weight.shape.size());
}

}  // namespace

std::optional<OpCost> op_cost(const ReplayPlan& plan, const ReplayOp& op) {
  if (op.kind != OpKind::kCompute) return std::nullopt;
  std::string_view name = op.name;
  std::optional<uint64_t> flops;
  const auto in = [&](size_t at) { return tensor_at(plan, op.inputs, at); };
  std::optional<MatrixShape> gemm;
  // a [..., rows, k] by b [..., k, cols]: batch products of (rows x k) by (k x cols).
  const auto matrix = [&gemm](const TensorView* a, const TensorView* b) -> std::optional<uint64_t> {
    if (a == nullptr || b == nullptr || a->shape.size() < 2 || b->shape.size() < 2)
      return std::nullopt;
    const size_t ra = a->shape.size();
    const size_t rb = b->shape.size();
    const uint64_t rows = static_cast<uint64_t>(std::max<int64_t>(a->shape[ra - 2], 0));
    const uint64_t k = static_cast<uint64_t>(std::max<int64_t>(a->shape[ra - 1], 0));
    const uint64_t cols = static_cast<uint64_t>(std::max<int64_t>(b->shape[rb - 1], 0));
    const uint64_t batch = std::max(product(a->shape, 0, ra - 2), product(b->shape, 0, rb - 2));
    gemm = MatrixShape{rows, cols, k, batch};
    return 2 * batch * rows * k * cols;
  };
  if (name == "aten::mm" || name == "aten::bmm" || name == "aten::matmul") {
    flops = matrix(in(0), in(1));
  } else if (name == "aten::addmm" || name == "aten::baddbmm" || name == "aten::addbmm") {
    flops = matrix(in(1), in(2));
  } else if (name == "aten::linear") {
    // input [..., k] by weight [out, k] transposed: one (rows x k) by (k x out) product.
    const TensorView* input = in(0);
    const TensorView* weight = in(1);
    if (input != nullptr && weight != nullptr && weight->shape.size() == 2 &&
        !input->shape.empty()) {
      const uint64_t k = static_cast<uint64_t>(std::max<int64_t>(input->shape.back(), 0));
      const uint64_t rows = product(input->shape, 0, input->shape.size() - 1);
      const uint64_t out = static_cast<uint64_t>(std::max<int64_t>(weight->shape[0], 0));
      flops = 2 * rows * k * out;
      gemm = MatrixShape{rows, out, k, 1};
    }
  } else if (name == "aten::conv1d" || name == "aten::conv2d" || name == "aten::conv3d" ||
             name == "aten::convolution" || name == "aten::_convolution") {
    const TensorView* output = tensor_at(plan, op.outputs, 0);
    if (output != nullptr && in(1) != nullptr) flops = conv_flops(*output, *in(1));
  } else if (name == "aten::convolution_backward") {
    // (grad_output, input, weight, ...): the input and weight gradients, a forward's work each.
    if (in(0) != nullptr && in(2) != nullptr) {
      if (const std::optional<uint64_t> forward = conv_flops(*in(0), *in(2))) flops = 2 * *forward;
    }
  }
  if (!flops) return std::nullopt;
  return OpCost{*flops, tensor_bytes_of(plan, op.inputs) + tensor_bytes_of(plan, op.outputs), gemm};
}

std::optional<uint64_t> streamed_bytes(const ReplayPlan& plan, const ReplayOp& op) {
  if (op.kind != OpKind::kCompute) return std::nullopt;
  static constexpr std::string_view kStreaming[] = {"aten::relu",
                                                    "aten::relu_",
                                                    "aten::gelu",
                                                    "aten::gelu_backward",
                                                    "aten::silu",
                                                    "aten::sigmoid",
                                                    "aten::tanh",
                                                    "aten::threshold_backward",
                                                    "aten::add",
                                                    "aten::add_",
                                                    "aten::sub",
                                                    "aten::mul",
                                                    "aten::mul_",
                                                    "aten::div",
                                                    "aten::div_",
                                                    "aten::neg",
                                                    "aten::copy_",
                                                    "aten::fill_",
                                                    "aten::zero_",
                                                    "aten::clone",
                                                    "aten::dropout",
                                                    "aten::native_dropout",
                                                    "aten::softmax",
                                                    "aten::_softmax",
                                                    "aten::log_softmax",
                                                    "aten::_log_softmax",
                                                    "aten::_softmax_backward_data",
                                                    "aten::_log_softmax_backward_data",
                                                    "aten::layer_norm",
                                                    "aten::native_layer_norm",
                                                    "aten::native_layer_norm_backward",
                                                    "aten::batch_norm",
                                                    "aten::native_batch_norm",
                                                    "aten::native_batch_norm_backward",
                                                    "aten::sum",
                                                    "aten::mean",
                                                    "aten::addcmul_",
                                                    "aten::addcdiv_",
                                                    "aten::sqrt",
                                                    "aten::exp",
                                                    "aten::_foreach_add_",
                                                    "aten::_foreach_mul_",
                                                    "aten::_foreach_addcmul_",
                                                    "aten::_foreach_addcdiv_"};
  const std::string_view name = op.name;
  if (std::find(std::begin(kStreaming), std::end(kStreaming), name) == std::end(kStreaming))
    return std::nullopt;
  const uint64_t bytes = tensor_bytes_of(plan, op.inputs) + tensor_bytes_of(plan, op.outputs);
  if (bytes == 0) return std::nullopt;
  return bytes;
}

}  // namespace orrery::replay
