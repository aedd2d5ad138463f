// network/failing_fabric.h: a graph whose links fail at simulated times (`failures` of
// docs/formats/perturb.md).
//
// Until the first failure it routes as its graph; from each failure time on, as the graph
// without every link failed so far (ECMP over the shortest paths that remain, the same hashing),
// decided hop by hop when a message asks: a message that starts after a failure takes the new
// routes, a store-and-forward hop decided after it avoids the failed links from wherever the
// message is, and a flow already transmitting keeps the path it started on (its bytes were
// committed before the failure). Link ids stay the original graph's, so statistics are comparable
// with a healthy run. Not thread-safe (one simulation's clock).
#pragma once

#include <memory>
#include <vector>

#include "core/error.h"
#include "core/event_engine.h"
#include "network/graph.h"

namespace orrery::net {

// Links that fail at `at` (both directions of a cable are two links).
struct LinkFailure {
  SimTime at;
  std::vector<LinkId> links;
  std::string what;  // for messages: "cable leaf0-spine1", "switch spine0"
};

class FailingFabric final : public Fabric {
 public:
  // Errors (kTopology) when a failure disconnects two NPUs, naming the failure and the pair.
  static Expected<std::shared_ptr<const FailingFabric>> create(std::shared_ptr<const Graph> graph,
                                                               std::vector<LinkFailure> failures,
                                                               const EventEngine& clock);

  uint32_t npu_count() const override { return graph_->npu_count(); }
  uint64_t link_count() const override { return graph_->link_count(); }
  LinkInfo link_info(LinkId link) const override { return graph_->link_info(link); }
  Bandwidth link_bandwidth(LinkId link) const override { return graph_->link_bandwidth(link); }
  SimTime link_latency(LinkId link) const override { return graph_->link_latency(link); }
  uint64_t route_key(Rank src, Rank dst, uint64_t flow) const override {
    return graph_->route_key(src, dst, flow);
  }
  bool multipath() const override { return graph_->multipath(); }
  Hop next_hop(NodeId at, Rank dst, uint64_t key) const override;
  LinkId edge_link(Rank rank, uint32_t dim, bool up) const override {
    return graph_->edge_link(rank, dim, up);
  }

 private:
  struct Stage {
    SimTime from;
    Graph graph;                   // the survivors
    std::vector<LinkId> original;  // survivor link id -> the original graph's
  };
  FailingFabric(std::shared_ptr<const Graph> graph, const EventEngine& clock)
      : graph_(std::move(graph)), clock_(clock) {}

  std::shared_ptr<const Graph> graph_;
  std::vector<Stage> stages_;  // by time
  const EventEngine& clock_;
};

}  // namespace orrery::net
