#include "core/event_queue.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <limits>

namespace orrery {

EventQueue::EventQueue() = default;
EventQueue::~EventQueue() = default;
EventQueue::EventQueue(EventQueue&&) noexcept = default;
EventQueue& EventQueue::operator=(EventQueue&&) noexcept = default;

namespace {

// The base that slot `slot` of `level` starts at, given the current base: digits above `level`
// unchanged, digit `level` = `slot`, lower digits zero.
uint64_t slot_lower_bound(uint64_t base, int level, int slot, int digit_bits) {
  const int shift = level * digit_bits;
  const int kept_from = shift + digit_bits;
  const uint64_t high = kept_from >= 64 ? 0 : base & ~((uint64_t{1} << kept_from) - 1);
  return high | (static_cast<uint64_t>(slot) << shift);
}

}  // namespace

void EventQueue::place(uint64_t time, int& level, int& slot) const {
  const uint64_t diff = time ^ last_;
  level = diff == 0 ? 0 : static_cast<int>((std::bit_width(diff) - 1) / kDigitBits);
  slot = static_cast<int>((time >> (level * kDigitBits)) & (kSlots - 1));
}

uint32_t EventQueue::take_block() {
  if (!free_blocks_.empty()) {
    const uint32_t block = free_blocks_.back();
    free_blocks_.pop_back();
    block_next_[block] = kNoBlock;
    return block;
  }
  assert(blocks_.size() < kNoBlock && "event queue: block pool exhausted");
  blocks_.push_back(std::make_unique<Block>());
  block_next_.push_back(kNoBlock);
  return static_cast<uint32_t>(blocks_.size() - 1);
}

void EventQueue::append(int level, int slot, const Event& event) {
  Bucket& bucket = buckets_[level][slot];
  const auto time = static_cast<uint64_t>(event.time.ps());
  if (bucket.tail == kNoBlock) {
    const uint32_t block = take_block();
    bucket.head = bucket.tail = block;
    bucket.head_pos = bucket.tail_pos = 0;
    bucket.time = time;
    masks_[level][slot / 64] |= uint64_t{1} << (slot % 64);
    level_mask_ |= 1u << level;
  } else {
    if (bucket.time != time) bucket.time = kMixedTimes;
    if (bucket.tail_pos == kBlockEvents) {
      const uint32_t block = take_block();
      block_next_[bucket.tail] = block;
      bucket.tail = block;
      bucket.tail_pos = 0;
    }
  }
  blocks_[bucket.tail]->events[bucket.tail_pos++] = event;
}

uint64_t EventQueue::push(Event event) {
  assert(event.time.ps() >= 0 && "event queue: negative time");
  const auto time = static_cast<uint64_t>(event.time.ps());
  assert(time >= last_ && "event queue: event scheduled before the last popped time");
  event.seq = next_seq_++;
  int level = 0;
  int slot = 0;
  place(time, level, slot);
  append(level, slot, event);
  ++size_;
  return event.seq;
}

int EventQueue::lowest_slot(int level) const {
  for (int word = 0; word < kMaskWords; ++word) {
    if (masks_[level][word] != 0) return word * 64 + std::countr_zero(masks_[level][word]);
  }
  assert(false && "event queue: empty level");
  return 0;
}

int EventQueue::lowest_level() const {
  assert(level_mask_ != 0);
  return std::countr_zero(level_mask_);
}

void EventQueue::spread(int level, int slot) {
  assert((level_mask_ & ((1u << level) - 1)) == 0 && "event queue: spreading over full levels");
  const Bucket source = buckets_[level][slot];
  buckets_[level][slot] = Bucket{};
  masks_[level][slot / 64] &= ~(uint64_t{1} << (slot % 64));
  bool level_empty = true;
  for (int word = 0; word < kMaskWords; ++word)
    level_empty = level_empty && masks_[level][word] == 0;
  if (level_empty) level_mask_ &= ~(1u << level);

  last_ = slot_lower_bound(last_, level, slot, kDigitBits);
  if (source.time != kMixedTimes) {
    // One time: the whole chain goes to one bucket, empty like every bucket below `level`.
    int target_level = 0;
    int target_slot = 0;
    place(source.time, target_level, target_slot);
    assert(target_level < level && buckets_[target_level][target_slot].tail == kNoBlock);
    buckets_[target_level][target_slot] = source;
    masks_[target_level][target_slot / 64] |= uint64_t{1} << (target_slot % 64);
    level_mask_ |= 1u << target_level;
    return;
  }
  // Walking the chain in order keeps every target bucket (all empty before) in insertion order;
  // blocks return to the pool as soon as they are read, so the pool does not grow while spreading.
  for (uint32_t block = source.head; block != kNoBlock;) {
    const Block& data = *blocks_[block];
    const uint32_t next = block_next_[block];
    if (next != kNoBlock) {
      // The chain's blocks are scattered in memory: start fetching the next one now.
      const char* next_bytes = reinterpret_cast<const char*>(blocks_[next].get());
      for (size_t offset = 0; offset < sizeof(Block); offset += 64) {
        __builtin_prefetch(next_bytes + offset);
      }
    }
    const uint32_t begin = block == source.head ? source.head_pos : 0;
    const uint32_t end = block == source.tail ? source.tail_pos : kBlockEvents;
    for (uint32_t pos = begin; pos < end; ++pos) {
      const Event& event = data.events[pos];
      int target_level = 0;
      int target_slot = 0;
      place(static_cast<uint64_t>(event.time.ps()), target_level, target_slot);
      assert(target_level < level);
      append(target_level, target_slot, event);
    }
    free_blocks_.push_back(block);
    block = next;
  }
}

Event EventQueue::take_front(int slot) {
  Bucket& bucket = buckets_[0][slot];
  Block& head = *blocks_[bucket.head];
  const Event event = head.events[bucket.head_pos++];
  --size_;
  if (bucket.head == bucket.tail && bucket.head_pos == bucket.tail_pos) {
    free_blocks_.push_back(bucket.head);
    bucket = Bucket{};
    masks_[0][slot / 64] &= ~(uint64_t{1} << (slot % 64));
    bool level_empty = true;
    for (int word = 0; word < kMaskWords; ++word) level_empty = level_empty && masks_[0][word] == 0;
    if (level_empty) level_mask_ &= ~1u;
  } else if (bucket.head_pos == kBlockEvents) {
    free_blocks_.push_back(bucket.head);
    bucket.head = block_next_[bucket.head];
    bucket.head_pos = 0;
  }
  last_ = static_cast<uint64_t>(event.time.ps());
  return event;
}

Event EventQueue::pop() {
  assert(size_ > 0 && "event queue: pop on an empty queue");
  while ((level_mask_ & 1u) == 0) {
    const int level = lowest_level();
    spread(level, lowest_slot(level));
  }
  return take_front(lowest_slot(0));
}

bool EventQueue::pop_not_after(SimTime limit, Event& out) {
  if (size_ == 0 || limit.ps() < 0) return false;
  const auto limit_time = static_cast<uint64_t>(limit.ps());
  while ((level_mask_ & 1u) == 0) {
    const int level = lowest_level();
    const int slot = lowest_slot(level);
    if (slot_lower_bound(last_, level, slot, kDigitBits) > limit_time) return false;
    spread(level, slot);
  }
  const int slot = lowest_slot(0);
  if (slot_lower_bound(last_, 0, slot, kDigitBits) > limit_time) return false;
  out = take_front(slot);
  return true;
}

SimTime EventQueue::next_time() const {
  assert(size_ > 0 && "event queue: next_time on an empty queue");
  if ((level_mask_ & 1u) != 0) {
    return SimTime::from_ps(
        static_cast<int64_t>(slot_lower_bound(last_, 0, lowest_slot(0), kDigitBits)));
  }
  const int level = lowest_level();
  const Bucket& bucket = buckets_[level][lowest_slot(level)];
  if (bucket.time != kMixedTimes) return SimTime::from_ps(static_cast<int64_t>(bucket.time));
  uint64_t min_time = std::numeric_limits<uint64_t>::max();
  for (uint32_t block = bucket.head; block != kNoBlock; block = block_next_[block]) {
    const Block& data = *blocks_[block];
    const uint32_t begin = block == bucket.head ? bucket.head_pos : 0;
    const uint32_t end = block == bucket.tail ? bucket.tail_pos : kBlockEvents;
    for (uint32_t pos = begin; pos < end; ++pos) {
      min_time = std::min(min_time, static_cast<uint64_t>(data.events[pos].time.ps()));
    }
  }
  return SimTime::from_ps(static_cast<int64_t>(min_time));
}

size_t EventQueue::memory_bytes() const {
  return sizeof(*this) + blocks_.size() * sizeof(Block) + blocks_.capacity() * sizeof(blocks_[0]) +
         block_next_.capacity() * sizeof(uint32_t) + free_blocks_.capacity() * sizeof(uint32_t);
}

}  // namespace orrery
