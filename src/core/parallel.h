// core/parallel.h: independent work spread over the machine's cores, with deterministic results.
#pragma once

#include <cstddef>
#include <functional>

namespace orrery {

// Calls `work(index)` once for every index in [0, count), on up to `threads` threads (0: one per
// hardware core). Indices are handed out in order; the caller makes results deterministic by
// writing each one to its own slot. Returns when all calls have returned.
void parallel_for(size_t count, size_t threads, const std::function<void(size_t)>& work);

}  // namespace orrery
