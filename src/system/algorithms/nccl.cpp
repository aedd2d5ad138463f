// The `nccl` algorithm: one phase over the whole group, timed by NCCL's model (nccl_model.h).
//
// The members first agree that all have arrived (a dissemination barrier of 1-byte messages,
// ceil(log2 n) rounds, so a collective never ends at a rank before the last rank issued it), then
// the phase lasts what the model says NCCL's chosen algorithm and protocol take for the collective
// on this fabric. The fabric is read off the network: a node is a group of the first dimension
// (NVLink; its link bandwidth the NVLink bandwidth per GPU), the members per node are counted on
// the first member's node; a second dimension's bandwidth is one rail's NIC, so the members of a
// node reach the network at it times the members per node.
#include <algorithm>
#include <cmath>

#include "system/algorithms/algorithms.h"
#include "system/nccl_model.h"

namespace orrery::sys::algorithms {

namespace {

struct NcclState {
  uint32_t round;
};

class Nccl final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "nccl"; }

  void start(PhaseRun& run) const override { next_round(run); }

  void on_continue(PhaseRun& run) const override { run.finish(); }

  void on_receive(PhaseRun& run) const override {
    ++run.state<NcclState>().round;
    next_round(run);
  }

 private:
  static void next_round(PhaseRun& run) {
    NcclState& s = run.state<NcclState>();
    const uint32_t n = run.members();
    if (s.round == ceil_log2(n)) {
      run.after_delay(SimTime::from_ps(static_cast<int64_t>(std::llround(time_us(run) * 1e6))));
      return;
    }
    const uint32_t distance = 1u << s.round;
    run.exchange((run.index() + distance) % n, (run.index() + n - distance % n) % n, 1,
                 MirrorPattern::kShift);
  }

  static double time_us(const PhaseRun& run) {
    const net::Topology& topology = run.topology();
    const uint32_t n = run.members();
    NcclFabric fabric;
    fabric.ranks = n;
    // A node is a group of the first dimension (NVLink); the members on the first member's node
    // tell how the group spreads (a data-parallel group may have one rank per node).
    const uint32_t node_size = topology.size(0);
    const uint32_t first_node = run.member_rank(0) / node_size;
    uint32_t per_node = 0;
    for (uint32_t idx = 0; idx < n; ++idx)
      per_node += run.member_rank(idx) / node_size == first_node;
    fabric.nodes = std::max(1u, n / std::max(per_node, 1u));
    fabric.nvlink_gbps = topology.dimension(0).bandwidth.bytes_per_second() / 1e9;
    if (fabric.nodes > 1 && topology.dimension_count() > 1) {
      fabric.net_gbps = topology.dimension(1).bandwidth.bytes_per_second() / 1e9 * per_node;
    }
    // The phase's size is ASTRA-sim's (a rank's input); NCCL's is the gathered buffer for
    // all-gather.
    uint64_t bytes = run.size();
    NcclOp op = NcclOp::kAllReduce;
    switch (run.op()) {
      case PhaseOp::kAllGather:
        op = NcclOp::kAllGather;
        bytes *= n;
        break;
      case PhaseOp::kReduceScatter:
        op = NcclOp::kReduceScatter;
        break;
      case PhaseOp::kAllToAll:
        op = NcclOp::kAllToAll;
        break;
      case PhaseOp::kBroadcast:
        op = NcclOp::kBroadcast;
        break;
      case PhaseOp::kReduce:
        op = NcclOp::kReduce;
        break;
      default:
        break;
    }
    return nccl_estimate(op, bytes, fabric, run.system().nccl).time_us;
  }
};

}  // namespace

const CollectiveAlgorithm& nccl() {
  static const Nccl algorithm;
  return algorithm;
}

}  // namespace orrery::sys::algorithms
