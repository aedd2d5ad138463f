// core/event_engine.h: the discrete-event loop of one simulation: a clock, an event queue and the
// components that handle events.
//
// A component implements EventHandler and registers once to get a HandlerId; it then schedules
// plain Events addressed to that id (a kind and a 64-bit argument of its own meaning) and receives
// them back through handle_event at their time. There is no closure per event and no allocation per
// event once the queue's block pool has grown (core/event_queue.h). Events at equal times are
// handled in the order they were scheduled, so a run is bit-for-bit repeatable.
//
// Time never goes past kSimTimeLimitPs (2^61 ps): an event at or after it is not handled; the loop
// stops and time_limit_reached() says why, so that the caller reports the run as out of range
// rather than a wrapped-around or saturated clock as a result (docs/numbers.md).
//
// An engine is an ordinary object: it holds no global state and any number can live in one process
// (sweeps, tests). It is single-threaded. To cancel an event, a component keeps a generation
// counter and ignores events that carry a stale one; the queue is never searched.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/event_queue.h"
#include "core/time.h"

namespace orrery {

// A component that receives events. Called only from inside EventEngine::run/run_until, at the
// event's time (engine.now() == event.time); it may schedule further events at now or later.
class EventHandler {
 public:
  virtual ~EventHandler() = default;
  virtual void handle_event(const Event& event) = 0;

 protected:
  EventHandler() = default;
  EventHandler(const EventHandler&) = default;
  EventHandler& operator=(const EventHandler&) = default;
};

class EventEngine {
 public:
  EventEngine() = default;
  EventEngine(const EventEngine&) = delete;
  EventEngine& operator=(const EventEngine&) = delete;

  // Registers `handler` and returns its id. Any time, also inside an event; O(1) amortized. The
  // engine keeps a pointer: the handler must outlive the engine or call unregister_handler first.
  HandlerId register_handler(EventHandler& handler) {
    handlers_.push_back(&handler);
    return static_cast<HandlerId>(handlers_.size() - 1);
  }

  // Forgets a handler; its pending events must not be run afterwards (asserted when they are).
  void unregister_handler(HandlerId id) {
    assert(index(id) < handlers_.size());
    handlers_[index(id)] = nullptr;
  }

  // Current simulated time: the time of the event being handled, or where the last run stopped.
  SimTime now() const { return now_; }

  // Schedules an event for `target` at `time` (not before now(), asserted) and returns its sequence
  // number. Any time, also inside an event; O(1), no allocation once the pool is warm.
  uint64_t schedule_at(SimTime time, HandlerId target, uint16_t kind, uint64_t arg) {
    assert(time >= now_ && "event engine: scheduling in the past");
    assert(index(target) < handlers_.size() && "event engine: unknown handler");
    Event event;
    event.time = time;
    event.target = target;
    event.kind = kind;
    event.arg = arg;
    return queue_.push(event);
  }

  // Schedules an event `delay` after now() (delay >= 0).
  uint64_t schedule_after(SimTime delay, HandlerId target, uint16_t kind, uint64_t arg) {
    return schedule_at(now_ + delay, target, kind, arg);
  }

  // Handles events until none is left (or stop() is called); returns how many were handled. Call
  // from outside an event. now() ends at the time of the last event handled.
  uint64_t run();

  // Handles every event whose time is at most `limit` (unless stop() is called first), then sets
  // now() to `limit` if it was earlier. Events after `limit` stay pending. Returns the count
  // handled.
  uint64_t run_until(SimTime limit);

  // Asks the running loop to return after the current event. Call from inside an event.
  void stop() { stop_requested_ = true; }

  // Whether a loop stopped at an event at or after kSimTimeLimitPs (that event stays unhandled).
  bool time_limit_reached() const { return time_limit_reached_; }

  bool empty() const { return queue_.empty(); }
  size_t pending() const { return queue_.size(); }
  // Time of the next pending event. Requires !empty().
  SimTime next_event_time() const { return queue_.next_time(); }
  // Events handled since the engine was created.
  uint64_t events_handled() const { return handled_; }
  // Time of the last event handled (zero before the first): unlike now(), not moved by
  // run_until's limit.
  SimTime last_event_time() const { return last_event_; }
  const EventQueue& queue() const { return queue_; }

 private:
  static size_t index(HandlerId id) { return static_cast<size_t>(id); }

  void dispatch(const Event& event) {
    now_ = event.time;
    last_event_ = event.time;
    EventHandler* handler = handlers_[index(event.target)];
    assert(handler != nullptr && "event engine: event for an unregistered handler");
    handler->handle_event(event);
  }

  EventQueue queue_;
  std::vector<EventHandler*> handlers_;
  SimTime now_ = SimTime::zero();
  SimTime last_event_ = SimTime::zero();
  uint64_t handled_ = 0;
  bool stop_requested_ = false;
  bool time_limit_reached_ = false;
};

}  // namespace orrery
