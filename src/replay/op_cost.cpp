#include "replay/op_cost.h"

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
  const auto matrix = [](const TensorView* a, const TensorView* b) -> std::optional<uint64_t> {
    if (a == nullptr || b == nullptr || a->shape.size() < 2 || b->shape.size() < 2)
      return std::nullopt;
    const size_t ra = a->shape.size();
    const size_t rb = b->shape.size();
    const uint64_t n = static_cast<uint64_t>(a->shape[ra - 2]);
    const uint64_t k = static_cast<uint64_t>(a->shape[ra - 1]);
    const uint64_t m = static_cast<uint64_t>(b->shape[rb - 1]);
    const uint64_t batch = std::max(product(a->shape, 0, ra - 2), product(b->shape, 0, rb - 2));
    return 2 * batch * n * k * m;
  };
  if (name == "aten::mm" || name == "aten::bmm" || name == "aten::matmul") {
    flops = matrix(in(0), in(1));
  } else if (name == "aten::addmm" || name == "aten::baddbmm" || name == "aten::addbmm") {
    flops = matrix(in(1), in(2));
  } else if (name == "aten::linear") {
    const TensorView* input = in(0);
    const TensorView* weight = in(1);
    if (input != nullptr && weight != nullptr && weight->shape.size() == 2)
      flops = 2 * product(input->shape, 0, input->shape.size()) *
              static_cast<uint64_t>(weight->shape[0]);
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
  return OpCost{*flops, tensor_bytes_of(plan, op.inputs) + tensor_bytes_of(plan, op.outputs)};
}

}  // namespace orrery::replay
