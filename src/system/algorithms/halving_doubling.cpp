// Halving-doubling (ASTRA-sim's HalvingDoubling): log2 n steps, each an exchange with the partner
// at distance d (upwards when the member's block index i / d is even). Reduce-scatter: d = 1, 2,
// 4, ... with x/2, x/4, ... bytes; all-gather: d = n/2, n/4, ... with x, 2x, ...; all-reduce: the
// reduce-scatter, then back (it turns round at the far end and repeats its last step). ASTRA-sim's
// quirks are kept: a reduction is charged on the size of the next message, and the last
// reduce-scatter receive is not reduced.
#include <cassert>

#include "system/algorithms/algorithms.h"

namespace orrery::sys::algorithms {

namespace {

struct HalvingDoublingState {
  uint64_t message;    // bytes of the next step readied
  uint64_t remaining;  // sends left
  uint64_t queued_bytes;
  uint32_t offset;  // distance of the next step readied
  uint32_t queued_peer;
  uint32_t free;        // endpoint delays over and not yet used by a send
  ReduceRounds rounds;  // which receives reduce
  bool doubling;        // distances grow (reduce-scatter, all-reduce before its turn)
  bool queued;  // a step is readied and not yet sent (never more than one: steps are sequential)
};

class HalvingDoubling final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "halvingDoubling"; }

  void start(PhaseRun& run) const override {
    HalvingDoublingState& s = run.state<HalvingDoublingState>();
    const uint32_t steps = floor_log2(run.members());
    s.remaining = run.op() == PhaseOp::kAllReduce ? 2ull * steps : steps;
    if (run.op() == PhaseOp::kAllGather) {
      s.offset = run.members() / 2;
      s.doubling = false;  // distances shrink, sizes grow
      s.message = run.size();
    } else {
      s.offset = 1;
      s.doubling = true;  // distances grow, sizes shrink
      s.message = run.size() / 2;
    }
    ready_step(run, s);
  }

  void on_continue(PhaseRun& run) const override {
    HalvingDoublingState& s = run.state<HalvingDoublingState>();
    ++s.free;
    if (s.queued && s.remaining > 0) {
      s.queued = false;
      --s.remaining;
      --s.free;
      run.exchange(s.queued_peer, s.queued_peer, s.queued_bytes, MirrorPattern::kPairwise);
    }
    if (s.remaining == 0 && s.free == 1) run.finish();
  }

  void on_receive(PhaseRun& run) const override {
    ready_step(run, run.state<HalvingDoublingState>());
  }

 private:
  static void ready_step(PhaseRun& run, HalvingDoublingState& s) {
    const uint32_t n = run.members();
    const bool reduce = s.rounds.next(run.op(), 1, floor_log2(n) - 1);
    // The partner at distance `offset`: upwards when this member's block index is even.
    const uint32_t index = run.index();
    uint32_t peer = index;
    if (s.offset != 0) {
      const bool up = ((index / s.offset) % 2) == 0;
      peer = up ? (index + s.offset) % n : (index + n - s.offset) % n;
    }
    assert(!s.queued && "halving-doubling: a step readied before the previous one was sent");
    s.queued = true;
    s.queued_peer = peer;
    s.queued_bytes = s.message;
    run.after_endpoint_delay(reduce, s.message);
    // Distances double and sizes halve (or the reverse). An all-reduce turns round at the far end
    // and repeats its last step, as ASTRA-sim's implementation does.
    if (s.doubling) {
      s.offset *= 2;
      s.message /= 2;
      if (s.offset == n && run.op() == PhaseOp::kAllReduce) {
        s.doubling = false;
        s.offset /= 2;
        s.message *= 2;
      }
    } else {
      s.offset /= 2;
      s.message *= 2;
    }
  }
};

}  // namespace

const CollectiveAlgorithm& halving_doubling() {
  static const HalvingDoubling algorithm;
  return algorithm;
}

}  // namespace orrery::sys::algorithms
