#include "network/network_backend.h"

#include "network/analytical_backend.h"
#include "network/flow_backend.h"
#include "network/graph_congestion_backend.h"

namespace orrery::net {

Expected<std::unique_ptr<NetworkBackend>> make_network_backend(
    std::string_view name, EventEngine& engine, const Topology& topology, TimeRounding rounding,
    std::shared_ptr<const DimensionFailures> failures) {
  if (name == "analytical") {
    return std::unique_ptr<NetworkBackend>(
        std::make_unique<AnalyticalBackend>(engine, topology, rounding, std::move(failures)));
  }
  if (name == "congestion-aware") {
    // ASTRA-sim's dimensions as a fabric: the topology's own links and routes.
    return std::unique_ptr<NetworkBackend>(std::make_unique<GraphCongestionBackend>(
        engine, std::make_shared<const TopologyFabric>(topology), topology, rounding,
        std::move(failures)));
  }
  if (failures != nullptr) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "a dimension's failure runs on the analytical or congestion-aware backend, "
                       "not {}",
                       name);
  }
  if (name == "flow") {
    // ASTRA-sim's dimensions as a graph: the topology's own links and dimension-order routes.
    return std::unique_ptr<NetworkBackend>(std::make_unique<FlowBackend>(
        engine, std::make_shared<const TopologyFabric>(topology), topology));
  }
  return Error::make(ErrorKind::kInvalidArgument,
                     "backend '{}' does not run on an ASTRA-sim network (expected analytical, "
                     "congestion-aware or flow)",
                     name);
}

}  // namespace orrery::net
