// Broadcast and reduce as a pipelined chain over the group in order (docs/models/system.md): a
// broadcast starts at the first member and each member forwards each chunk to the next; a reduce
// runs the reverse chain towards the first member, each receive reduced. x bytes per message, the
// endpoint delay on every receive.
#include "system/algorithms/algorithms.h"

namespace orrery::sys::algorithms {

namespace {

class Chain final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "chain"; }

  void start(PhaseRun& run) const override {
    const bool broadcast = run.op() == PhaseOp::kBroadcast;
    const uint32_t head = broadcast ? 0 : run.members() - 1;
    if (run.index() == head) {
      run.after_endpoint_delay(false, 0);
    } else {
      run.expect(broadcast ? run.index() - 1 : run.index() + 1);
    }
  }

  void on_continue(PhaseRun& run) const override {
    const bool broadcast = run.op() == PhaseOp::kBroadcast;
    if (broadcast && run.index() + 1 < run.members()) run.send(run.index() + 1, run.size());
    if (!broadcast && run.index() > 0) run.send(run.index() - 1, run.size());
    run.finish();
  }

  void on_receive(PhaseRun& run) const override {
    run.after_endpoint_delay(run.op() == PhaseOp::kReduce, run.size());
  }
};

}  // namespace

const CollectiveAlgorithm& chain() {
  static const Chain algorithm;
  return algorithm;
}

}  // namespace orrery::sys::algorithms
