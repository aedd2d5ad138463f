// Barrier by dissemination: in round k (k = 0 .. ceil(log2 n) - 1) every member sends 1 byte to
// the member 2^k ahead and waits for the one from the member 2^k behind; each receive costs the
// endpoint delay.
#include "system/algorithms/algorithms.h"

namespace orrery::sys::algorithms {

namespace {

struct BarrierState {
  uint32_t round;
};

class Barrier final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "barrier"; }

  void start(PhaseRun& run) const override { run.after_endpoint_delay(false, 0); }

  void on_continue(PhaseRun& run) const override {
    BarrierState& s = run.state<BarrierState>();
    const uint32_t n = run.members();
    if (s.round == ceil_log2(n)) {
      run.finish();
      return;
    }
    const uint32_t distance = 1u << s.round;
    run.send((run.index() + distance) % n, 1);
    run.expect((run.index() + n - distance % n) % n);
    ++s.round;
  }

  void on_receive(PhaseRun& run) const override { run.after_endpoint_delay(false, 0); }
};

}  // namespace

const CollectiveAlgorithm& barrier() {
  static const Barrier algorithm;
  return algorithm;
}

}  // namespace orrery::sys::algorithms
