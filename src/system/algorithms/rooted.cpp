// Gather and scatter rooted at the group's first member: every other member sends its x bytes to
// the root at once (gather), or the root sends x bytes to every other member at once (scatter).
// The root finishes when all n-1 messages are in (gather) or as soon as it has sent (scatter).
#include "system/algorithms/algorithms.h"

namespace orrery::sys::algorithms {

namespace {

struct RootedState {
  uint32_t waiting;  // receives still to come
};

class Rooted final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "rooted"; }

  void start(PhaseRun& run) const override {
    RootedState& s = run.state<RootedState>();
    const bool root = run.index() == 0;
    const bool sender = (run.op() == PhaseOp::kGather) != root;
    if (sender) {
      run.after_endpoint_delay(false, 0);
    } else if (root) {
      s.waiting = run.members() - 1;
      for (uint32_t peer = 1; peer < run.members(); ++peer) run.expect(peer);
    } else {
      s.waiting = 1;
      run.expect(0);
    }
  }

  void on_continue(PhaseRun& run) const override {
    RootedState& s = run.state<RootedState>();
    const bool root = run.index() == 0;
    if (run.op() == PhaseOp::kScatter && root) {
      for (uint32_t peer = 1; peer < run.members(); ++peer) run.send(peer, run.size());
      run.finish();
    } else if (run.op() == PhaseOp::kGather && !root) {
      run.send(0, run.size());
      run.finish();
    } else if (--s.waiting == 0) {
      run.finish();
    }
  }

  void on_receive(PhaseRun& run) const override { run.after_endpoint_delay(false, 0); }
};

}  // namespace

const CollectiveAlgorithm& rooted() {
  static const Rooted algorithm;
  return algorithm;
}

}  // namespace orrery::sys::algorithms
