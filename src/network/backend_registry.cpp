#include "network/backend_registry.h"

#include <array>

#include <fmt/format.h>

#include "network/flow_backend.h"
#include "network/roce_backend.h"

namespace orrery::net {

namespace {

constexpr std::array<BackendInfo, 4> kBackends = {{
    {"analytical", "ASTRA-sim's congestion-unaware model: latency plus size over bandwidth per hop",
     true, true},
    {"congestion-aware", "store and forward, one FIFO queue per link (ASTRA-sim's model)", true,
     true},
    {"flow", "max-min fair sharing of links among flows; a pair's messages in order", true, true},
    {"roce", "packets, PFC, ECN and congestion control (docs/models/roce.md)", false, true},
}};

}  // namespace

std::span<const BackendInfo> backends() { return kBackends; }

const BackendInfo* find_backend(std::string_view name) {
  for (const BackendInfo& info : kBackends) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::string backend_names_text() {
  std::string text;
  for (const BackendInfo& info : kBackends) {
    if (!text.empty()) text += ", ";
    text += info.name;
  }
  return text;
}

Expected<std::unique_ptr<NetworkBackend>> make_backend(std::string_view name, EventEngine& engine,
                                                       const NetworkDescription& network,
                                                       const BackendOptions& options) {
  const BackendInfo* info = find_backend(name);
  if (info == nullptr) {
    return Error::make(ErrorKind::kInvalidArgument, "unknown network backend '{}' (expected {})",
                       name, backend_names_text());
  }
  if (!options.failures.empty()) {
    if (network.graph == nullptr || name == "roce") {
      return Error::make(ErrorKind::kInvalidArgument,
                         "link failures need a graph topology and the flow, analytical or "
                         "congestion-aware backend (not {}{})",
                         name, network.graph == nullptr ? " on an ASTRA-sim network" : "");
    }
    Expected<std::shared_ptr<const FailingFabric>> fabric =
        FailingFabric::create(network.graph, options.failures, engine);
    if (!fabric) return fabric.error();
    return make_fabric_backend(name, engine, std::move(*fabric), network.logical);
  }
  if (!options.dimension_failures.empty()) {
    if (network.graph != nullptr || (name != "analytical" && name != "congestion-aware")) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "a dimension's failure needs an ASTRA-sim network and the analytical or "
                         "congestion-aware backend (not {}{})",
                         name, network.graph != nullptr ? " on a graph topology" : "");
    }
    return make_network_backend(
        name, engine, network.logical, options.rounding,
        std::make_shared<const DimensionFailures>(network.logical, options.dimension_failures));
  }
  if (network.graph == nullptr) {
    if (!info->on_astra_networks) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "the {} backend needs a graph topology file (docs/formats/topology.md), "
                         "not an ASTRA-sim network",
                         name);
    }
    return make_network_backend(name, engine, network.logical, options.rounding);
  }
  if (name == "roce")
    return make_roce_backend(engine, network.graph, network.logical, options.roce);
  return make_fabric_backend(name, engine, network.graph, network.logical);
}

}  // namespace orrery::net
