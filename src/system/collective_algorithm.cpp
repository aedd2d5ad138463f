#include "system/collective_algorithm.h"

#include "system/algorithms/algorithms.h"

namespace orrery::sys {

const CollectiveAlgorithm& collective_algorithm(PhaseOp op, const Algorithm& config) {
  if (config.kind == AlgorithmKind::kNccl && op != PhaseOp::kGather && op != PhaseOp::kScatter &&
      op != PhaseOp::kBarrier) {
    return algorithms::nccl();
  }
  switch (op) {
    case PhaseOp::kBroadcast:
    case PhaseOp::kReduce:
      return algorithms::chain();
    case PhaseOp::kGather:
    case PhaseOp::kScatter:
      return algorithms::rooted();
    case PhaseOp::kBarrier:
      return algorithms::barrier();
    default:
      break;
  }
  switch (config.kind) {
    case AlgorithmKind::kInSwitch:
      return algorithms::in_switch();
    case AlgorithmKind::kHalvingDoubling:
      return algorithms::halving_doubling();
    case AlgorithmKind::kDoubleBinaryTree:
      return algorithms::double_binary_tree();
    case AlgorithmKind::kDirect:
      return algorithms::direct();
    default:
      // ring; a one* name in a dimension other than the first runs a ring there (only the first
      // dimension's name selects one flat phase over the group).
      return algorithms::ring();
  }
}

}  // namespace orrery::sys
