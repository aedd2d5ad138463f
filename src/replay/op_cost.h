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

struct OpCost {
  uint64_t flops = 0;
  uint64_t bytes = 0;  // every tensor the op reads or writes, once
};

std::optional<OpCost> op_cost(const ReplayPlan& plan, const ReplayOp& op);

}  // namespace orrery::replay
