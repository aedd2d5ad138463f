// replay/op_cost.h: the arithmetic of the operators whose work is known in closed form, from their
// recorded shapes: matrix products and convolutions, which dominate training and inference.
//
// A replay measures how long each operator took on this machine; with its FLOPs and bytes that is
// an achieved rate, the data a compute model's efficiency is fitted to (the roofline's peak and
// bandwidth, or per-operation curves), and what --emit-chakra writes as num_ops and tensor_size.
// FLOPs count a multiply-add as two: mm(n x k, k x m) is 2nkm; addmm and linear the same (the bias
// add is left out); bmm and baddbmm b times that; matmul as mm over its broadcast batch;
// conv2d/convolution 2 N O Ho Wo (C/groups) kh kw from the output's recorded shape; their backward
// twice the forward (input and weight gradients). Other operators: nullopt.
#pragma once

#include <cstdint>
#include <optional>

#include "replay/plan.h"

namespace orrery::replay {

// A matrix product's shape in the compute model's terms (sys::GemmShape): `batch` products of
// (m x k) by (k x n).
struct MatrixShape {
  uint64_t m = 0, n = 0, k = 0, batch = 1;
};

struct OpCost {
  uint64_t flops = 0;
  uint64_t bytes = 0;               // every tensor the op reads or writes, once
  std::optional<MatrixShape> gemm;  // mm, bmm, matmul, addmm, baddbmm, addbmm, linear
};

std::optional<OpCost> op_cost(const ReplayPlan& plan, const ReplayOp& op);

// The bytes an element-wise or normalizing operator streams (every tensor it reads or writes,
// once): the memory-bound kernels a compute model's bandwidth is fitted to. Only operators that
// touch every element of their tensors (activations, arithmetic, copies and fills, softmax, norms,
// dropout, sums and means, the optimizers' fused updates); views, allocations and the rest:
// nullopt.
std::optional<uint64_t> streamed_bytes(const ReplayPlan& plan, const ReplayOp& op);

}  // namespace orrery::replay
