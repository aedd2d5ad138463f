// Ring (ASTRA-sim's Ring): every member sends to its neighbour in the phase's direction and
// receives from the other neighbour, one message in flight. Each receive (and the start) is
// followed by an endpoint delay, then the next send. Messages: all-reduce 2(n-1) of floor(x/n)
// (the first n-1 receives reduced), reduce-scatter n-1 of floor(x/n) (all reduced), all-gather
// n-1 of x, all-to-all n(n-1)/2 of floor(x/n) relayed round the ring.
#include "system/algorithms/algorithms.h"

namespace orrery::sys::algorithms {

namespace {

struct RingState {
  uint64_t message;     // bytes per message
  uint64_t remaining;   // sends left
  uint32_t to;          // the neighbour messages go to
  uint32_t from;        // the neighbour they come from
  uint32_t queued;      // steps readied (by the start or a receive) and not yet sent
  uint32_t free;        // endpoint delays over and not yet used by a send
  ReduceRounds rounds;  // which receives reduce
};

class Ring final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "ring"; }

  void start(PhaseRun& run) const override {
    RingState& s = run.state<RingState>();
    const uint32_t n = run.members();
    const int64_t step = run.anticlockwise() ? -1 : 1;
    switch (run.op()) {
      case PhaseOp::kAllReduce:
        s.remaining = 2ull * (n - 1);
        break;
      case PhaseOp::kAllToAll:
        s.remaining = uint64_t{n} * (n - 1) / 2;
        break;
      default:
        s.remaining = n - 1;
        break;
    }
    s.message = run.op() == PhaseOp::kAllGather ? run.size() : run.size() / n;
    s.to = static_cast<uint32_t>((static_cast<int64_t>(run.index()) + step + n) % n);
    s.from = static_cast<uint32_t>((static_cast<int64_t>(run.index()) - step + n) % n);
    ready_step(run, s);
  }

  void on_continue(PhaseRun& run) const override {
    RingState& s = run.state<RingState>();
    ++s.free;
    if (s.queued > 0 && s.remaining > 0) {
      --s.queued;
      --s.remaining;
      --s.free;
      run.exchange(s.to, s.from, s.message, MirrorPattern::kShift);
    }
    if (s.remaining == 0 && s.free == 1) run.finish();
  }

  void on_receive(PhaseRun& run) const override { ready_step(run, run.state<RingState>()); }

 private:
  // The next step is ready: after the endpoint delay (and the reduction, when this receive
  // reduces) it is sent.
  static void ready_step(PhaseRun& run, RingState& s) {
    const bool reduce = s.rounds.next(run.op(), 1, run.members() - 1);
    ++s.queued;
    run.after_endpoint_delay(reduce, s.message);
  }
};

}  // namespace

const CollectiveAlgorithm& ring() {
  static const Ring algorithm;
  return algorithm;
}

}  // namespace orrery::sys::algorithms
