// core/slot_pool.h: reusable slots in a vector, for records that come and go during a run
// (messages, streams): no allocation once the vector has grown to the peak in flight.
#pragma once

#include <cstdint>
#include <vector>

namespace orrery {

// Returns the index of a slot of `items` holding a fresh T{}: a released one from `released` when
// there is one, else a new one at the end. Amortized O(1). Indices stay valid; references into
// `items` do not survive a later call (the vector may grow).
template <typename T>
uint32_t take_slot(std::vector<T>& items, std::vector<uint32_t>& released) {
  if (!released.empty()) {
    const uint32_t index = released.back();
    released.pop_back();
    items[index] = T{};
    return index;
  }
  items.emplace_back();
  return static_cast<uint32_t>(items.size() - 1);
}

}  // namespace orrery
