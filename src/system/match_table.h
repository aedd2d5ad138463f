// system/match_table.h: the table that meets each collective message with its receive.
//
// One entry per (destination, source, collective, chunk, phase) with a message or a receive
// waiting; an entry lives from the first of the two to the second, so the table holds only what is
// in flight. Open addressing with linear probing in one flat array (power-of-two capacity, at most
// half full) and backward-shift deletion: no allocation per message and one or two cache lines
// per lookup, where std::unordered_map allocated a node per message and chased a pointer per
// probe (about a fifth of a full simulation's time). Hand-written because the key is a small POD
// and no flat hash map is among the project's libraries; nothing iterates the table, so its order
// never reaches an output.
#pragma once

#include <cstdint>
#include <vector>

namespace orrery::sys {

struct MatchKey {
  uint32_t dst;
  uint32_t src;
  uint32_t instance;
  uint32_t chunk;
  uint32_t phase;
  bool operator==(const MatchKey&) const = default;
};

struct MatchEntry {
  uint32_t arrived = 0;  // messages delivered before their receive
  uint32_t posted = 0;   // receives waiting for their message
  uint32_t stream = 0;   // the stream that posted them
};

class MatchTable {
 public:
  MatchTable() { rehash(kInitialCapacity); }

  // The entry of `key`, created empty when absent. Returns its slot, valid until the next insert
  // or erase.
  uint32_t find_or_insert(const MatchKey& key) {
    if (2 * (size_ + 1) > slots_.size()) rehash(slots_.size() * 2);
    uint32_t slot = home(key);
    while (slots_[slot].used) {
      if (slots_[slot].key == key) return slot;
      slot = (slot + 1) & mask_;
    }
    slots_[slot].used = true;
    slots_[slot].key = key;
    slots_[slot].entry = MatchEntry{};
    ++size_;
    return slot;
  }

  MatchEntry& entry(uint32_t slot) { return slots_[slot].entry; }

  // Removes the entry in `slot`, shifting back the entries behind it that probed past it.
  void erase(uint32_t slot) {
    uint32_t hole = slot;
    uint32_t next = (hole + 1) & mask_;
    while (slots_[next].used) {
      const uint32_t wanted = home(slots_[next].key);
      // Move `next` into the hole unless its home lies cyclically in (hole, next].
      const bool stays = ((next - wanted) & mask_) < ((next - hole) & mask_);
      if (!stays) {
        slots_[hole] = slots_[next];
        hole = next;
      }
      next = (next + 1) & mask_;
    }
    slots_[hole].used = false;
    --size_;
  }

  size_t size() const { return size_; }

 private:
  static constexpr uint32_t kInitialCapacity = 1024;

  struct Slot {
    MatchKey key;
    MatchEntry entry;
    bool used = false;
  };

  static uint64_t mix(uint64_t value) {
    value ^= value >> 33;
    value *= 0xff51afd7ed558ccdULL;
    value ^= value >> 33;
    value *= 0xc4ceb9fe1a85ec53ULL;
    value ^= value >> 33;
    return value;
  }
  uint32_t home(const MatchKey& key) const {
    const uint64_t hash = mix((uint64_t{key.dst} << 32 | key.src) ^
                              mix(uint64_t{key.instance} << 32 | key.chunk) ^ key.phase);
    return static_cast<uint32_t>(hash) & mask_;
  }

  void rehash(size_t capacity) {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.resize(capacity);
    mask_ = static_cast<uint32_t>(capacity - 1);
    size_ = 0;
    for (const Slot& slot : old) {
      if (!slot.used) continue;
      uint32_t index = home(slot.key);
      while (slots_[index].used) index = (index + 1) & mask_;
      slots_[index] = slot;
      ++size_;
    }
  }

  std::vector<Slot> slots_;
  uint32_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace orrery::sys
