// memory/remote_memory_config.h: ASTRA-sim's remote memory file (JSON), read unchanged.
//
//   {"memory-type": "NO_MEMORY_EXPANSION"}
//   {"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 500, "remote-mem-bw": 50}
//   {"memory-type": "PER_NODE_MEMORY_EXPANSION", "num-nodes": 2, "num-npus-per-node": 4, ...}
//   {"memory-type": "MEMORY_POOL", "remote-mem-latency": ..., "remote-mem-bw": ...}
// An access costs latency + bytes / bandwidth; per-NPU expansion has no contention, per-node
// expansion shares one FIFO per node, a pool one FIFO for all (issue #5 models the contention).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace orrery::memory {

enum class MemoryType : uint8_t { kNoExpansion, kPerNpu, kPerNode, kPool };

struct RemoteMemoryConfig {
  std::string path;
  MemoryType type = MemoryType::kNoExpansion;
  double latency_ns = 0;           // remote-mem-latency
  double bandwidth_gbps = 0;       // remote-mem-bw, decimal GB/s (10^9 bytes per second)
  uint32_t num_nodes = 0;          // PER_NODE_MEMORY_EXPANSION
  uint32_t num_npus_per_node = 0;  // PER_NODE_MEMORY_EXPANSION
  // Keys ASTRA-sim does not read (from forks, or typos), in file order, for a warning.
  std::vector<std::string> unknown_keys;
};

// Reads the file. Errors name file, line and key: an unknown memory-type (listing the four), a
// missing latency or bandwidth for the types that need them, a non-positive bandwidth, a negative
// latency, node counts that are missing or below 1.
Expected<RemoteMemoryConfig> load_remote_memory_config(const std::string& path);
Expected<RemoteMemoryConfig> parse_remote_memory_config(const std::string& path, std::string text);

}  // namespace orrery::memory
