#include "core/event_engine.h"

#include <algorithm>

namespace orrery {

uint64_t EventEngine::run() {
  stop_requested_ = false;
  uint64_t count = 0;
  while (!stop_requested_ && !queue_.empty()) {
    const Event event = queue_.pop();
    if (event.time.ps() >= kSimTimeLimitPs) {
      // Left unhandled: the run is out of range and its caller reports it.
      time_limit_reached_ = true;
      break;
    }
    dispatch(event);
    ++count;
  }
  handled_ += count;
  return count;
}

uint64_t EventEngine::run_until(SimTime limit) {
  stop_requested_ = false;
  uint64_t count = 0;
  Event event;
  // Events at or after the time limit are never popped.
  const SimTime bounded = std::min(limit, SimTime::from_ps(kSimTimeLimitPs - 1));
  while (!stop_requested_ && queue_.pop_not_after(bounded, event)) {
    dispatch(event);
    ++count;
  }
  if (!stop_requested_ && !queue_.empty() && queue_.next_time().ps() >= kSimTimeLimitPs) {
    time_limit_reached_ = true;
  }
  if (!stop_requested_ && now_ < limit) now_ = limit;
  handled_ += count;
  return count;
}

}  // namespace orrery
