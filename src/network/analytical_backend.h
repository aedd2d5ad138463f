// network/analytical_backend.h: ASTRA-sim's congestion-unaware model. A message takes
// hops x latency + bytes / bandwidth in the dimension it uses, whatever else is on the network.
//
// The dimension used is the lowest one in which source and destination coordinates differ, and
// only that dimension is timed, as ASTRA-sim's congestion-unaware backend does (collectives
// address one dimension at a time; a message that differs in several coordinates is charged the
// lowest dimension's hops and bandwidth, not a route through all of them). Hops: Ring the shorter
// way round, FullyConnected 1, Switch 2.
//
// Link statistics follow the links of that route within the dimension (from the source to its
// peer with the destination's coordinate). Since links are not shared in this model, a link's
// peak queue counts messages overlapping on it that the congestion-aware model would have queued:
// the most messages whose [send, delivery) intervals overlap at one instant (a message delivered
// at t does not overlap one sent at t, whatever order the two events run in).
//
// With dimension failures (network/dimension_failures.h) a message starting after one goes at the
// lowest bandwidth left on the links of its route; one whose route crosses a cut link is held,
// never delivered, and listed by describe_undelivered.
#pragma once

#include <cstdint>
#include <memory>
#include <queue>
#include <span>
#include <vector>

#include "core/event_engine.h"
#include "network/dimension_failures.h"
#include "network/link_table.h"
#include "network/network_backend.h"
#include "network/topology.h"

namespace orrery::net {

// The congestion-unaware delay of one message: hops x latency + serialization, in the lowest
// differing dimension; zero when src == dst. Pure, no events: for fast paths that need only the
// number. O(dimensions).
SimTime analytical_delay(const Topology& topology, Rank src, Rank dst, uint64_t bytes);

class AnalyticalBackend final : public NetworkBackend, private EventHandler {
 public:
  // Registers with `engine`, which must outlive this backend. Build phase.
  AnalyticalBackend(EventEngine& engine, Topology topology,
                    TimeRounding rounding = TimeRounding::kExact,
                    std::shared_ptr<const DimensionFailures> failures = nullptr);
  ~AnalyticalBackend() override;

  std::string_view name() const override { return "analytical"; }
  const Topology& topology() const override { return topology_; }
  void set_listener(DeliveryListener& listener) override;
  // O(hops) for statistics (each link crossed is charged the bytes and busy time and counts the
  // message present until its delivery), one event.
  void send(Rank src, Rank dst, uint64_t bytes, uint64_t token) override;
  // latency + serialization on the one link, one event.
  void send_switch(Rank rank, uint32_t dim, bool up, uint64_t bytes, uint64_t token) override;
  uint64_t in_flight() const override { return in_flight_; }
  std::vector<LinkStats> link_stats() const override { return links_.report(topology_); }
  size_t memory_bytes() const override;
  std::vector<std::string> describe_undelivered(size_t most) const override {
    return net::describe_undelivered(undelivered_, most);
  }

 private:
  struct Pending {
    uint64_t token = 0;
    Rank src = 0;
    Rank dst = 0;
  };
  uint32_t take_pending();
  void handle_event(const Event& event) override;
  void occupy(uint32_t slot, uint64_t bytes, SimTime serialization, SimTime delivery);
  // The bandwidth left to a message over `links` of dimension `dim` now; zero and `cut` set when
  // a failure cut one of them.
  Bandwidth degraded(uint32_t dim, std::span<const LinkId> links, const DimensionFailure*& cut,
                     LinkId& cut_link) const;

  EventEngine& engine_;
  Topology topology_;
  TimeRounding rounding_;
  HandlerId id_;
  DeliveryListener* listener_ = nullptr;
  LinkTable links_;
  // Per link slot: delivery times of the messages on it, earliest first (expired ones are dropped
  // lazily when the next message arrives).
  std::vector<std::priority_queue<SimTime, std::vector<SimTime>, std::greater<>>> on_link_;
  std::vector<Pending> pending_;
  std::vector<uint32_t> free_pending_;
  uint64_t in_flight_ = 0;
  std::shared_ptr<const DimensionFailures> failures_;
  std::vector<Undelivered> undelivered_;
  std::vector<LinkId> route_;  // scratch: a message's links, with failures
};

}  // namespace orrery::net
