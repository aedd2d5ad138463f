// core/index_fifo.h: a first-in first-out list of records kept in a pool (a std::vector indexed by
// uint32_t), linked through a uint32_t member of the records. No allocation: the links live in
// the records. Used for packet queues, a queue pair's messages and a connection's waiting
// messages; a record is in at most one list through a given member.
#pragma once

#include <cstdint>
#include <vector>

namespace orrery {

struct IndexFifo {
  static constexpr uint32_t kNil = UINT32_MAX;
  uint32_t head = kNil;
  uint32_t tail = kNil;

  bool empty() const { return head == kNil; }

  // Appends pool[index] (its link is overwritten).
  template <typename T>
  void push_back(std::vector<T>& pool, uint32_t index, uint32_t T::*next) {
    pool[index].*next = kNil;
    if (tail == kNil) {
      head = index;
    } else {
      pool[tail].*next = index;
    }
    tail = index;
  }

  // Removes and returns the first index; the list must not be empty.
  template <typename T>
  uint32_t pop_front(const std::vector<T>& pool, uint32_t T::*next) {
    const uint32_t index = head;
    head = pool[index].*next;
    if (head == kNil) tail = kNil;
    return index;
  }
};

}  // namespace orrery
