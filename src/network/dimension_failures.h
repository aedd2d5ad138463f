// network/dimension_failures.h: ASTRA-sim dimensions that lose bandwidth at some NPUs at a
// simulated time (`failures` with `dimension` in docs/formats/perturb.md).
//
// ASTRA-sim's files give a dimension one bandwidth per NPU, standing for all the links (NVLink
// lanes, NICs) an NPU has in it; there are no routes to go around a failure. So a failure is a
// fraction of that bandwidth which survives from its time on: on every link of the dimension
// with a listed NPU at one end, a message that starts crossing it after the failure goes at the
// surviving bandwidth (0.875: one NIC of eight is down), and with nothing surviving it cannot
// cross at all: the backend keeps it and the run reports it as undeliverable. Several failures
// on one link: the lowest surviving fraction of those that have happened. Pure lookups, no
// events; O(failures) per link asked.
#pragma once

#include <string>
#include <vector>

#include "core/rank_set.h"
#include "core/time.h"
#include "network/bandwidth.h"
#include "network/topology.h"

namespace orrery::net {

struct DimensionFailure {
  SimTime at;
  uint32_t dimension = 0;
  RankSet ranks;         // the links of the dimension with one of these NPUs at an end
  double surviving = 0;  // fraction of the bandwidth left, in [0, 1)
  std::string what;      // for messages: "perturb.yml:4: dimension 1 at ranks 8-15"
};

class DimensionFailures {
 public:
  DimensionFailures(const Topology& topology, std::vector<DimensionFailure> failures);

  // The fraction of `link`'s bandwidth left at `now`: 1 before any failure of it.
  double surviving(LinkId link, SimTime now) const;
  // `bandwidth` of `link` at `now` (Bandwidth::scaled; zero when nothing survives).
  Bandwidth bandwidth(LinkId link, Bandwidth bandwidth, SimTime now) const;
  // The failure that cut `link` by `now` (nothing survives), or nullptr.
  const DimensionFailure* cut_by(LinkId link, SimTime now) const;
  const std::vector<DimensionFailure>& failures() const { return failures_; }

 private:
  bool applies(const DimensionFailure& failure, const LinkInfo& info) const;

  Topology topology_;
  std::vector<DimensionFailure> failures_;  // by time
};

// The messages a backend holds because a failure cut a link on their way, for the report of a
// run that cannot finish.
struct Undelivered {
  Rank src = 0;  // kNoRank when the backend does not know it (a message already under way)
  Rank dst = 0;
  uint64_t bytes = 0;
  LinkId link = 0;
  const DimensionFailure* failure = nullptr;
};
inline constexpr Rank kNoRank = UINT32_MAX;

// "rank 3 -> rank 11, 1,048,576 bytes: perturb.yml:4: dimension 1 at ranks 8-15 failed at 2,000
// ns with nothing surviving", at most `most` lines and a count of the rest.
std::vector<std::string> describe_undelivered(const std::vector<Undelivered>& held, size_t most);

}  // namespace orrery::net
