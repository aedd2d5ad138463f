#include "network/failing_fabric.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace orrery::net {

Expected<std::shared_ptr<const FailingFabric>> FailingFabric::create(
    std::shared_ptr<const Graph> graph, std::vector<LinkFailure> failures,
    const EventEngine& clock) {
  std::stable_sort(failures.begin(), failures.end(),
                   [](const LinkFailure& a, const LinkFailure& b) { return a.at < b.at; });
  std::shared_ptr<FailingFabric> fabric(new FailingFabric(graph, clock));
  std::set<LinkId> failed;
  for (size_t index = 0; index < failures.size(); ++index) {
    const LinkFailure& failure = failures[index];
    failed.insert(failure.links.begin(), failure.links.end());
    // Failures at one time form one stage.
    if (index + 1 < failures.size() && failures[index + 1].at == failure.at) continue;
    GraphSpec spec = graph->spec();
    std::vector<LinkId> original;
    std::vector<GraphLink> survivors;
    for (LinkId link = 0; link < spec.links.size(); ++link) {
      if (failed.count(link) != 0) continue;
      survivors.push_back(spec.links[link]);
      original.push_back(link);
    }
    spec.links = std::move(survivors);
    Expected<Graph> stage = Graph::create(std::move(spec));
    if (!stage) {
      return Error::make(ErrorKind::kTopology,
                         "after the failure of {} at {} ns, the network is broken: {}",
                         failure.what, failure.at.ns_truncated(), stage.error().message());
    }
    fabric->stages_.push_back({failure.at, std::move(*stage), std::move(original)});
  }
  return std::shared_ptr<const FailingFabric>(std::move(fabric));
}

Hop FailingFabric::next_hop(NodeId at, Rank dst, uint64_t key) const {
  const SimTime now = clock_.now();
  const Stage* stage = nullptr;
  for (const Stage& candidate : stages_) {
    if (candidate.from > now) break;
    stage = &candidate;
  }
  if (stage == nullptr) return graph_->next_hop(at, dst, key);
  Hop hop = stage->graph.next_hop(at, dst, key);
  hop.link = stage->original[hop.link];
  return hop;
}

}  // namespace orrery::net
