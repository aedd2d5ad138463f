// system/collective.h: the collective operations the system layer runs, and their names.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace orrery::sys {

enum class CollectiveType : uint8_t {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kAllToAll,
  kBroadcast,
  kReduce,
  kGather,
  kScatter,
  kBarrier,
};

// "all-reduce", "reduce-scatter", ...: the names orrery prints.
std::string_view collective_name(CollectiveType type);

// The collective for a Chakra CollectiveCommType value (REDUCE_SCATTER_BLOCK is a reduce-scatter);
// nullopt for values outside the enum.
std::optional<CollectiveType> collective_from_chakra(int64_t comm_type);

// The factor that turns algorithm bandwidth into bus bandwidth for `ranks` participants
// (docs/models: all-reduce 2(n-1)/n; reduce-scatter, all-gather, all-to-all (n-1)/n; others 1).
double bus_bandwidth_factor(CollectiveType type, uint32_t ranks);

}  // namespace orrery::sys
