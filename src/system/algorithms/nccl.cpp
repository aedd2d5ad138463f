// The `nccl` algorithm: one phase over the whole group, timed by NCCL's model (nccl_model.h).
//
// The members first agree that all have arrived (a dissemination barrier of 1-byte messages,
// ceil(log2 n) rounds, so a collective never ends at a rank before the last rank issued it), then
// the phase lasts what the model says NCCL's chosen algorithm and protocol take for the collective
// on this fabric, read off the network by nccl_fabric (nccl_model.h).
#include <algorithm>
#include <cmath>

#include "system/algorithms/algorithms.h"
#include "system/collective.h"
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
      const Call call = call_of(run);
      const NcclEstimate estimate =
          nccl_estimate(call.op, call.bytes, call.fabric, run.system().nccl);
      if (!estimate.available) {
        run.fail(Error::make(ErrorKind::kConfig,
                             "nccl: {} leaves no algorithm and protocol for {} of {} bytes over "
                             "{} ranks on {} node(s) (NCCL fails such a call)",
                             nccl_allowed_text(run.system().nccl), collective_name(call.type),
                             call.bytes, call.fabric.ranks, call.fabric.nodes));
        return;
      }
      run.after_delay(SimTime::from_ps(static_cast<int64_t>(std::llround(estimate.time_us * 1e6))));
      return;
    }
    const uint32_t distance = 1u << s.round;
    run.exchange((run.index() + distance) % n, (run.index() + n - distance % n) % n, 1,
                 MirrorPattern::kShift);
  }

  // The collective as NCCL is called for it.
  struct Call {
    NcclOp op;
    CollectiveType type;  // the same, as orrery names it
    uint64_t bytes;
    NcclFabric fabric;
  };

  static Call call_of(const PhaseRun& run) {
    const uint32_t n = run.members();
    const NcclFabric& fabric = run.nccl_fabric();
    // The phase's size is ASTRA-sim's (a rank's input); NCCL's is the gathered buffer for
    // all-gather.
    uint64_t bytes = run.size();
    NcclOp op = NcclOp::kAllReduce;
    CollectiveType type = CollectiveType::kAllReduce;
    switch (run.op()) {
      case PhaseOp::kAllGather:
        op = NcclOp::kAllGather;
        type = CollectiveType::kAllGather;
        bytes *= n;
        break;
      case PhaseOp::kReduceScatter:
        op = NcclOp::kReduceScatter;
        type = CollectiveType::kReduceScatter;
        break;
      case PhaseOp::kAllToAll:
        op = NcclOp::kAllToAll;
        type = CollectiveType::kAllToAll;
        break;
      case PhaseOp::kBroadcast:
        op = NcclOp::kBroadcast;
        type = CollectiveType::kBroadcast;
        break;
      case PhaseOp::kReduce:
        op = NcclOp::kReduce;
        type = CollectiveType::kReduce;
        break;
      default:
        break;
    }
    return {op, type, bytes, fabric};
  }
};

}  // namespace

const CollectiveAlgorithm& nccl() {
  static const Nccl algorithm;
  return algorithm;
}

}  // namespace orrery::sys::algorithms
