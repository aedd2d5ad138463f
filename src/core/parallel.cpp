#include "core/parallel.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace orrery {

void parallel_for(size_t count, size_t threads, const std::function<void(size_t)>& work) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, count);
  if (threads <= 1) {
    for (size_t index = 0; index < count; ++index) work(index);
    return;
  }
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t index = next++; index < count; index = next++) work(index);
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (size_t idx = 1; idx < threads; ++idx) pool.emplace_back(worker);
  worker();
  for (std::thread& thread : pool) thread.join();
}

}  // namespace orrery
