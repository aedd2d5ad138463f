// memory/remote_memory.h: the time of MEM_LOAD and MEM_STORE nodes under ASTRA-sim's remote
// memory models (docs/models/memory.md).
//
// An access of B bytes costs latency + floor(B / bandwidth) ns (bandwidth in decimal GB/s, that is
// bytes per ns), as ASTRA-sim's analytical remote memory times it.
// - PER_NPU_MEMORY_EXPANSION: every NPU has its own remote memory: no contention.
// - PER_NODE_MEMORY_EXPANSION: the NPUs of a node (rank / num-npus-per-node) share one FIFO server:
//   an access starts when the accesses issued before it on that node have completed, and holds the
//   server for its whole cost, latency included.
// - MEMORY_POOL: one such FIFO server shared by every NPU.
// - NO_MEMORY_EXPANSION: there is no remote memory; ASTRA-sim aborts on the first memory node, and
//   orrery returns an error instead.
#pragma once

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/time.h"
#include "memory/remote_memory_config.h"

namespace orrery::memory {

// The remote memory of one run: its configuration and the state of its shared FIFOs. Owned by the
// workload executor; one per simulation.
class RemoteMemory {
 public:
  // `ranks` sizes the per-node FIFOs: max(num-nodes, ceil(ranks / num-npus-per-node)) of them, so a
  // rank beyond num-nodes x num-npus-per-node still has a node (ASTRA-sim would index past its
  // table; the simulation warns about such files). Build phase.
  RemoteMemory(RemoteMemoryConfig config, uint32_t ranks);

  // The cost of one access of `bytes` with no contention: latency + floor(bytes / bandwidth) ns.
  // Zero for NO_MEMORY_EXPANSION.
  SimTime cost(uint64_t bytes) const;

  // An access of `bytes` by `rank` issued at `now`: returns when it completes, and occupies the
  // rank's FIFO (per-node, pool) until then. An error under NO_MEMORY_EXPANSION. Calls must come in
  // non-decreasing `now` order (the simulation's order): FIFO order is call order. O(1).
  Expected<SimTime> access(uint32_t rank, uint64_t bytes, SimTime now);

  // The FIFO `rank` waits in, or -1 when its accesses never wait (PER_NPU, NO_MEMORY_EXPANSION).
  int64_t fifo_of(uint32_t rank) const;
  size_t fifo_count() const { return busy_until_.size(); }

  const RemoteMemoryConfig& config() const { return config_; }

 private:
  RemoteMemoryConfig config_;
  std::vector<SimTime> busy_until_;  // per node (per-node expansion) or one (pool)
};

}  // namespace orrery::memory
