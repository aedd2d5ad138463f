#include "core/event_engine.h"

namespace orrery {

uint64_t EventEngine::run() {
  stop_requested_ = false;
  uint64_t count = 0;
  while (!stop_requested_ && !queue_.empty()) {
    dispatch(queue_.pop());
    ++count;
  }
  handled_ += count;
  return count;
}

uint64_t EventEngine::run_until(SimTime limit) {
  stop_requested_ = false;
  uint64_t count = 0;
  Event event;
  while (!stop_requested_ && queue_.pop_not_after(limit, event)) {
    dispatch(event);
    ++count;
  }
  if (!stop_requested_ && now_ < limit) now_ = limit;
  handled_ += count;
  return count;
}

}  // namespace orrery
