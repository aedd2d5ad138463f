#include "memory/remote_memory.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <utility>

#include "core/checked.h"

namespace orrery::memory {

RemoteMemory::RemoteMemory(RemoteMemoryConfig config, uint32_t ranks) : config_(std::move(config)) {
  switch (config_.type) {
    case MemoryType::kPerNode: {
      assert(config_.num_npus_per_node > 0 && "remote memory: num-npus-per-node below 1");
      const uint32_t per_node = std::max<uint32_t>(config_.num_npus_per_node, 1);
      const uint32_t needed = (ranks + per_node - 1) / per_node;
      busy_until_.assign(std::max(config_.num_nodes, needed), SimTime::zero());
      break;
    }
    case MemoryType::kPool:
      busy_until_.assign(1, SimTime::zero());
      break;
    case MemoryType::kNoExpansion:
    case MemoryType::kPerNpu:
      break;
  }
}

SimTime RemoteMemory::cost(uint64_t bytes) const {
  if (config_.type == MemoryType::kNoExpansion) return SimTime::zero();
  // ASTRA-sim: latency + (uint64)(bytes / (bw x 1e9 B/s) x 1e9 ns/s). The same double expression,
  // truncated the same way, keeps whole-nanosecond agreement where bytes / bw is a near-integer.
  const double transfer_ns = static_cast<double>(bytes) / (config_.bandwidth_gbps * 1e9) * 1e9;
  return SimTime::from_ns_rounded(config_.latency_ns) +
         SimTime::from_ns(saturating_trunc_i64(std::floor(transfer_ns)));
}

int64_t RemoteMemory::fifo_of(uint32_t rank) const {
  switch (config_.type) {
    case MemoryType::kPerNode:
      return rank / config_.num_npus_per_node;
    case MemoryType::kPool:
      return 0;
    case MemoryType::kNoExpansion:
    case MemoryType::kPerNpu:
      break;
  }
  return -1;
}

Expected<SimTime> RemoteMemory::access(uint32_t rank, uint64_t bytes, SimTime now) {
  if (config_.type == MemoryType::kNoExpansion) {
    const std::string where = config_.path.empty()
                                  ? std::string(
                                        "no remote memory file was given, so the memory type "
                                        "is NO_MEMORY_EXPANSION")
                                  : config_.path + " sets NO_MEMORY_EXPANSION";
    return Error::make(ErrorKind::kConfig,
                       "memory nodes need a remote memory, but {} (ASTRA-sim stops on the first "
                       "memory node too); give --remote-memory-configuration a file of type "
                       "PER_NPU_MEMORY_EXPANSION, PER_NODE_MEMORY_EXPANSION or MEMORY_POOL",
                       where);
  }
  const SimTime cost_time = cost(bytes);
  const int64_t fifo = fifo_of(rank);
  if (fifo < 0) return now + cost_time;
  assert(static_cast<size_t>(fifo) < busy_until_.size());
  SimTime& busy = busy_until_[static_cast<size_t>(fifo)];
  const SimTime start = std::max(now, busy);
  busy = start + cost_time;
  return busy;
}

}  // namespace orrery::memory
