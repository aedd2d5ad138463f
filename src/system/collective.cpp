#include "system/collective.h"

namespace orrery::sys {

std::string_view collective_name(CollectiveType type) {
  switch (type) {
    case CollectiveType::kAllReduce:
      return "all-reduce";
    case CollectiveType::kReduceScatter:
      return "reduce-scatter";
    case CollectiveType::kAllGather:
      return "all-gather";
    case CollectiveType::kAllToAll:
      return "all-to-all";
    case CollectiveType::kBroadcast:
      return "broadcast";
    case CollectiveType::kReduce:
      return "reduce";
    case CollectiveType::kGather:
      return "gather";
    case CollectiveType::kScatter:
      return "scatter";
    case CollectiveType::kBarrier:
      return "barrier";
  }
  return "unknown";
}

std::optional<CollectiveType> collective_from_chakra(int64_t comm_type) {
  // ChakraProtoMsg::CollectiveCommType values (proto/chakra/et_def.proto).
  switch (comm_type) {
    case 0:
      return CollectiveType::kAllReduce;
    case 1:
      return CollectiveType::kReduce;
    case 2:
      return CollectiveType::kAllGather;
    case 3:
      return CollectiveType::kGather;
    case 4:
      return CollectiveType::kScatter;
    case 5:
      return CollectiveType::kBroadcast;
    case 6:
      return CollectiveType::kAllToAll;
    case 7:
      return CollectiveType::kReduceScatter;
    case 8:
      return CollectiveType::kReduceScatter;
    case 9:
      return CollectiveType::kBarrier;
    default:
      return std::nullopt;
  }
}

double bus_bandwidth_factor(CollectiveType type, uint32_t ranks) {
  if (ranks <= 1) return 0.0;
  const double n = ranks;
  switch (type) {
    case CollectiveType::kAllReduce:
      return 2.0 * (n - 1.0) / n;
    case CollectiveType::kReduceScatter:
    case CollectiveType::kAllGather:
    case CollectiveType::kAllToAll:
    case CollectiveType::kGather:
    case CollectiveType::kScatter:
      return (n - 1.0) / n;
    default:
      return 1.0;
  }
}

}  // namespace orrery::sys
