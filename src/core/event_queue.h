// core/event_queue.h: the pending-event set of one simulation, ordered by (time, insertion order).
//
// An Event is a 32-byte plain record; the queue hands events back in increasing time, and events
// with equal times in the order they were pushed (FIFO). The queue is a radix heap with 8-bit
// digits: simulated time never goes backwards, so an event is filed by the highest base-256 digit
// in which its time differs from a base time (level) and by its own value of that digit (slot).
// All events in a level-0 slot share one exact time. When level 0 runs dry, the lowest non-empty
// slot of the lowest non-empty level is spread over the levels below it; an event therefore moves
// at most once per level (in practice once or twice), never compared with another.
//
// A bucket also remembers whether all its events share one time. Spreading such a bucket moves its
// chain of blocks to the one bucket below that takes them, touching no event; that is the common
// case, since simulated times are mostly whole nanoseconds and a level-1 slot spans 256 ps, so
// every event would otherwise be copied once more just to reach level 0.
//
// Buckets are chains of small fixed-size blocks drawn from one pool, so pushing and popping
// allocate nothing once the pool has grown to the peak number of pending events, and memory stays
// proportional to that peak. Each bucket keeps its events in insertion order, which is what makes
// equal times come out FIFO without comparing sequence numbers.
//
// Cost: push O(1); pop O(1) amortized (a few bit scans, plus at most one move per level per
// event); next_time() O(1) when the next time is in level 0, else one scan of one bucket. Not
// thread-safe; one queue belongs to one engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/time.h"

namespace orrery {

// Identifies the component an event is delivered to (see core/event_engine.h).
enum class HandlerId : uint32_t {};

// One scheduled event. `kind` and `arg` mean whatever the target component says they mean (a
// message slot, a link index, a generation counter to ignore stale events).
struct Event {
  SimTime time;        // when it happens
  uint64_t seq = 0;    // position in the queue's insertion order, set by the queue
  uint64_t arg = 0;    // payload for the target
  HandlerId target{};  // who handles it
  uint16_t kind = 0;   // what it is, in the target's own numbering
  uint16_t reserved = 0;
};
static_assert(std::is_trivially_copyable_v<Event>);
static_assert(sizeof(Event) == 32);

class EventQueue {
 public:
  EventQueue();
  ~EventQueue();
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;
  EventQueue(EventQueue&&) noexcept;
  EventQueue& operator=(EventQueue&&) noexcept;

  // Files `event` and returns the sequence number it was given. Any time; O(1). The event's time
  // must not be earlier than the time of the last event popped (asserted): time never runs back.
  uint64_t push(Event event);

  // Removes and returns the earliest event (ties: the first pushed). Requires !empty().
  Event pop();

  // Pops the earliest event into `out` if its time is at most `limit` and returns true; otherwise
  // returns false and the event stays. After a false return, later pushes must not be earlier than
  // `limit` (the engine moves its clock to `limit`, so this holds there).
  bool pop_not_after(SimTime limit, Event& out);

  // Time of the earliest pending event. Requires !empty(). O(1) or one bucket scan (see above).
  SimTime next_time() const;

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // Number of events pushed so far (the next sequence number).
  uint64_t pushed() const { return next_seq_; }
  // Bytes held by the block pool (grows to the peak number of pending events, then stays).
  size_t memory_bytes() const;

 private:
  static constexpr uint32_t kBlockEvents = 64;  // 2 KiB per block
  static constexpr uint32_t kNoBlock = UINT32_MAX;
  static constexpr int kDigitBits = 8;
  static constexpr int kSlots = 1 << kDigitBits;
  static constexpr int kLevels = 8;  // 8 digits of 8 bits cover every non-negative int64 time
  static constexpr int kMaskWords = kSlots / 64;

  struct Block {
    Event events[kBlockEvents];
  };
  // A FIFO of events: a chain of blocks read from `head_pos` in the first block and written at
  // `tail_pos` in the last one.
  // No event has this time: pushed times are non-negative int64 values.
  static constexpr uint64_t kMixedTimes = UINT64_MAX;
  struct Bucket {
    uint32_t head = kNoBlock;
    uint32_t tail = kNoBlock;
    uint32_t head_pos = 0;
    uint32_t tail_pos = 0;
    uint64_t time = kMixedTimes;  // the time every event in it has, or kMixedTimes
  };

  // Level and slot of `time` relative to the base `last_`.
  void place(uint64_t time, int& level, int& slot) const;
  void append(int level, int slot, const Event& event);
  uint32_t take_block();
  // Lowest non-empty slot of `level` (which must have one).
  int lowest_slot(int level) const;
  int lowest_level() const;
  // Spreads slot (level, slot) over the lower levels, after moving the base to the slot's lower
  // bound. Requires all lower levels empty.
  void spread(int level, int slot);
  Event take_front(int slot);
  bool bucket_empty(int level, int slot) const {
    return (masks_[level][slot / 64] >> (slot % 64) & 1) == 0;
  }

  std::vector<std::unique_ptr<Block>> blocks_;
  std::vector<uint32_t> block_next_;  // chain links, apart so that linking touches no event line
  std::vector<uint32_t> free_blocks_;
  Bucket buckets_[kLevels][kSlots];
  uint64_t masks_[kLevels][kMaskWords] = {};  // bit set when the bucket holds events
  uint32_t level_mask_ = 0;                   // bit set when the level holds events
  uint64_t last_ = 0;                         // the radix base: no pending time is below it
  size_t size_ = 0;
  uint64_t next_seq_ = 0;
};

}  // namespace orrery
