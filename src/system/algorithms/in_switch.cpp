// In-network collectives (SHARP-style) on a Switch dimension: after the endpoint delay each member
// sends its x bytes up to the switch; once every member's data is in, the switch combines it at
// line rate and sends each member the result: x (all-reduce), floor(x/n) (reduce-scatter) or n x
// (all-gather). The member pays the endpoint delay again on the answer and finishes.
#include "system/algorithms/algorithms.h"

namespace orrery::sys::algorithms {

namespace {

struct InSwitchState {
  bool sent;  // the member's data went up; the next continuation follows the answer
};

class InSwitch final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "inSwitch"; }

  void start(PhaseRun& run) const override { run.after_endpoint_delay(false, 0); }

  void on_continue(PhaseRun& run) const override {
    InSwitchState& s = run.state<InSwitchState>();
    if (s.sent) {
      run.finish();
      return;
    }
    const uint64_t x = run.size();
    uint64_t down = x;
    if (run.op() == PhaseOp::kReduceScatter) down = x / run.members();
    if (run.op() == PhaseOp::kAllGather) down = x * run.members();
    run.send_to_switch(x, down);
    run.expect_from_switch();
    s.sent = true;
  }

  void on_receive(PhaseRun& run) const override { run.after_endpoint_delay(false, 0); }
};

}  // namespace

const CollectiveAlgorithm& in_switch() {
  static const InSwitch algorithm;
  return algorithm;
}

}  // namespace orrery::sys::algorithms
