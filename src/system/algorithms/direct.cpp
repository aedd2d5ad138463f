// Direct (ASTRA-sim's Direct): a ring whose steps go straight to successive members, a window of
// w messages in flight (w = n - 1, or N for directN, at most n - 1). The k-th step of a member at
// position i goes to i + s(1 + k mod (n-1)) and expects the message from i - s(1 + k mod (n-1)),
// s the phase's direction. All-reduce: 2(n-1) messages of floor(x/n), the second half waiting for
// every message of the first; all-to-all: n-1 messages of floor(x/n); reduce-scatter and
// all-gather as ring.
#include <algorithm>

#include "system/algorithms/algorithms.h"

namespace orrery::sys::algorithms {

namespace {

struct DirectState {
  uint64_t message;    // bytes per message
  uint64_t remaining;  // sends left
  uint32_t readied;    // steps readied so far (the k of the next one)
  uint32_t sent;       // steps sent so far
  uint32_t window;     // messages in flight
  uint32_t free;       // endpoint delays over and not yet used by a send
  uint32_t received;
  ReduceRounds rounds;  // which receives reduce
};

class Direct final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "direct"; }

  void start(PhaseRun& run) const override {
    DirectState& s = run.state<DirectState>();
    const uint32_t n = run.members();
    s.window = run.window() == 0 ? n - 1 : std::min(run.window(), n - 1);
    switch (run.op()) {
      case PhaseOp::kAllReduce:
        s.remaining = 2ull * (n - 1);
        break;
      default:
        s.remaining = n - 1;
        break;
    }
    s.message = run.op() == PhaseOp::kAllGather ? run.size() : run.size() / n;
    for (uint32_t idx = 0; idx < s.window; ++idx) ready_step(run, s);
  }

  void on_continue(PhaseRun& run) const override {
    DirectState& s = run.state<DirectState>();
    const uint32_t half = run.members() - 1;
    ++s.free;
    if (run.op() == PhaseOp::kAllReduce && s.remaining <= half) {
      // The second half of a direct all-reduce waits for every message of the first.
      if (s.received < half) return;
      for (uint32_t idx = 0; idx < s.window; ++idx) send_step(run, s);
    } else {
      send_step(run, s);
    }
    if (s.remaining == 0 && s.free == s.window) run.finish();
  }

  void on_receive(PhaseRun& run) const override {
    DirectState& s = run.state<DirectState>();
    ++s.received;
    ready_step(run, s);
  }

 private:
  static void ready_step(PhaseRun& run, DirectState& s) {
    const uint32_t n = run.members();
    const bool reduce = s.rounds.next(run.op(), s.window, s.window == 1 ? n - 1 : s.window);
    ++s.readied;
    run.after_endpoint_delay(reduce, s.message);
  }

  static void send_step(PhaseRun& run, DirectState& s) {
    if (s.sent == s.readied || s.remaining == 0 || s.free == 0) return;
    const uint32_t n = run.members();
    const uint32_t distance = 1 + s.sent % (n - 1);
    const uint32_t ahead = (run.index() + distance) % n;
    const uint32_t behind = (run.index() + n - distance) % n;
    const bool anticlockwise = run.anticlockwise();
    ++s.sent;
    --s.remaining;
    --s.free;
    run.exchange(anticlockwise ? behind : ahead, anticlockwise ? ahead : behind, s.message,
                 MirrorPattern::kShift);
  }
};

}  // namespace

const CollectiveAlgorithm& direct() {
  static const Direct algorithm;
  return algorithm;
}

}  // namespace orrery::sys::algorithms
