// network/network_backend.h: the seam between the system layer and a network model. A backend
// turns "send these bytes from rank a to rank b" into a delivery at a simulated time, and keeps
// statistics per link.
//
// Use: build a Topology, create a backend by name on an EventEngine, set the delivery listener
// once, then call send() from anywhere in the simulation (outside or inside events). Each message
// starts at engine.now(); when its last byte arrives, the backend calls
// listener.on_delivered(token) from inside an engine event at that time. A message to oneself
// (src == dst) is delivered at the current time, through an event, touching no link.
//
// Statistics are per directed link: bytes carried, busy time (bytes / bandwidth summed over the
// messages the link carried) and peak queue (the most messages present at the link at once,
// counting the one being sent). Only links that carried traffic are stored, so memory is
// proportional to the links used, not to the size of the topology.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/event_engine.h"
#include "core/time.h"
#include "network/topology.h"

namespace orrery::net {

class DimensionFailures;  // network/dimension_failures.h

// Receives deliveries. on_delivered runs inside an engine event at the delivery time; it may call
// send() again.
class DeliveryListener {
 public:
  virtual ~DeliveryListener() = default;
  virtual void on_delivered(uint64_t token) = 0;

 protected:
  DeliveryListener() = default;
  DeliveryListener(const DeliveryListener&) = default;
  DeliveryListener& operator=(const DeliveryListener&) = default;
};

// What one directed link did during a run.
struct LinkStats {
  LinkId link = 0;
  NodeId src = 0;
  NodeId dst = 0;
  uint32_t dimension = 0;
  uint64_t bytes = 0;       // bytes carried
  SimTime busy;             // time spent serializing: sum of bytes / bandwidth per message
  uint32_t peak_queue = 0;  // most messages at the link at once, the one being sent included
  uint64_t messages = 0;    // messages carried
};

class NetworkBackend {
 public:
  virtual ~NetworkBackend() = default;
  NetworkBackend(const NetworkBackend&) = delete;
  NetworkBackend& operator=(const NetworkBackend&) = delete;

  // "analytical" or "congestion-aware".
  virtual std::string_view name() const = 0;
  virtual const Topology& topology() const = 0;

  // Sets who hears about deliveries. Once, before the first send (asserted).
  virtual void set_listener(DeliveryListener& listener) = 0;

  // Starts a message of `bytes` from `src` to `dst` (both below rank_count(), asserted) at
  // engine.now(); `token` comes back in on_delivered. Any time, also inside events. Cost: O(1)
  // events and O(hops) work for the analytical backend; O(hops) events for congestion-aware.
  virtual void send(Rank src, Rank dst, uint64_t bytes, uint64_t token) = 0;

  // One hop of an in-network collective in Switch dimension `dim`: `bytes` from `rank` up to its
  // switch (up) or from the switch down to `rank`. Delivered through on_delivered(token) like
  // send(). Cost as send() for one hop.
  virtual void send_switch(Rank rank, uint32_t dim, bool up, uint64_t bytes, uint64_t token) = 0;

  // Messages sent and not yet delivered.
  virtual uint64_t in_flight() const = 0;

  // Statistics of every link that carried a message, ordered by link id (deterministic). Any
  // time; O(links used x log).
  virtual std::vector<LinkStats> link_stats() const = 0;

  // Bytes held by the backend's own state (link table, message pool), for memory reports.
  virtual size_t memory_bytes() const = 0;

  // Backend-specific summary lines for the command line (roce: PAUSE, ECN, drops). After a run.
  virtual std::vector<std::string> summary_lines() const { return {}; }
  // Backend-specific statistics as a JSON document ("" when the backend keeps none). After a run.
  virtual std::string stats_json() const { return ""; }
  // Messages a failure keeps from ever arriving (network/dimension_failures.h), at most `most`
  // lines, for the report of a run that cannot finish; empty when there are none.
  virtual std::vector<std::string> describe_undelivered(size_t most) const {
    (void)most;
    return {};
  }

 protected:
  NetworkBackend() = default;
};

// How message times are rounded. kExact keeps picoseconds (serialization rounded once to the
// nearest ps). kAstraSim reproduces ASTRA-sim's integer nanoseconds: the analytical delay is
// truncated to whole ns once per message; in the congestion-aware model each hop's arrival
// (latency + serialization) and each link's busy time (serialization) are truncated separately.
enum class TimeRounding : uint8_t { kExact, kAstraSim };

// `time` truncated to whole nanoseconds (time >= 0).
inline SimTime truncate_to_ns(SimTime time) {
  return SimTime::from_ps(time.ps() - time.ps() % 1000);
}

// Creates the backend called `name` (analytical, congestion-aware or flow) over a copy of
// `topology`, scheduling its events on `engine` (which must outlive it). Build phase. Error
// (kInvalidArgument) for another name. network/backend_registry.h is the list of every backend.
// `failures` (may be null): dimensions that lose bandwidth at some NPUs during the run, for the
// analytical and congestion-aware backends.
Expected<std::unique_ptr<NetworkBackend>> make_network_backend(
    std::string_view name, EventEngine& engine, const Topology& topology,
    TimeRounding rounding = TimeRounding::kExact,
    std::shared_ptr<const DimensionFailures> failures = nullptr);

}  // namespace orrery::net
