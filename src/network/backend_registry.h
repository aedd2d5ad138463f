// network/backend_registry.h: the network backends by name, the one list of them.
//
// `orrery run --help`, its errors, `orrery net send` and the Python module all read this table;
// adding a backend means adding one row (backend_registry.cpp). Each backend runs on ASTRA-sim's
// multi-dimensional networks, on graph topologies, or both, and is made from a NetworkDescription
// (network/graph_yaml.h) and the options of every backend.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/event_engine.h"
#include "network/dimension_failures.h"
#include "network/failing_fabric.h"
#include "network/graph_yaml.h"
#include "network/network_backend.h"
#include "network/roce_config.h"

namespace orrery::net {

// Options of the backends; each reads its own.
struct BackendOptions {
  TimeRounding rounding = TimeRounding::kExact;  // analytical and congestion-aware on ASTRA files
  RoceConfig roce;                               // roce (network/roce_config.h: defaults)
  // Links of a graph that fail during the run (network/failing_fabric.h); flow, analytical and
  // congestion-aware on graphs only.
  std::vector<LinkFailure> failures;
  // Dimensions of ASTRA-sim's networks that lose bandwidth at some NPUs during the run
  // (network/dimension_failures.h); analytical and congestion-aware only.
  std::vector<DimensionFailure> dimension_failures;
};

struct BackendInfo {
  std::string_view name;
  std::string_view description;   // one line for --help
  bool on_astra_networks = true;  // runs on ASTRA-sim's network files
  bool on_graphs = true;          // runs on graph topology files
};

// Every backend, in the order --help lists them.
std::span<const BackendInfo> backends();
// The row called `name`, or nullptr.
const BackendInfo* find_backend(std::string_view name);
// "analytical, congestion-aware, flow, roce".
std::string backend_names_text();

// Creates backend `name` over `network`, scheduling its events on `engine` (which must outlive it).
// Build phase. Errors (kInvalidArgument): an unknown name (listing the known ones), a backend that
// does not run on this kind of network.
Expected<std::unique_ptr<NetworkBackend>> make_backend(std::string_view name, EventEngine& engine,
                                                       const NetworkDescription& network,
                                                       const BackendOptions& options = {});

}  // namespace orrery::net
