// system/system_layer.h: what the workload layer asks of the system layer, and how it hears back.
//
// The executor (workload/executor.h) issues collectives, sends and receives through SystemLayer and
// is told of their completion through SystemListener, so it is written against this seam, not
// against one collective model: ASTRA-sim's (collective_engine.h) or any other.
#pragma once

#include <cstdint>

#include "core/error.h"
#include "network/topology.h"
#include "system/collective.h"

namespace orrery::sys {

using net::Rank;

// Hears when operations issued through the engine complete. Called from inside engine events at the
// completion time (or synchronously inside the issuing call for work that takes no time).
class SystemListener {
 public:
  virtual ~SystemListener() = default;
  virtual void on_collective_done(Rank rank, uint64_t cookie) = 0;
  virtual void on_send_done(Rank rank, uint64_t cookie) = 0;
  virtual void on_recv_done(Rank rank, uint64_t cookie) = 0;

 protected:
  SystemListener() = default;
  SystemListener(const SystemListener&) = default;
  SystemListener& operator=(const SystemListener&) = default;
};

struct CollectiveRequest {
  CollectiveType type = CollectiveType::kAllReduce;
  uint64_t bytes = 0;            // comm_size: the per-rank buffer (per-rank input for all-gather)
  uint32_t group = 0;            // from add_group; 0 is every rank
  uint32_t involved_dims = ~0u;  // bit d: the collective may use network dimension d
  int64_t priority = 0;          // used by the EXPLICIT scheduling policy
  uint64_t cookie = 0;           // handed back in on_collective_done
  uint64_t node_id = 0;          // the trace node, for messages
};

class SystemLayer {
 public:
  virtual ~SystemLayer() = default;
  SystemLayer(const SystemLayer&) = delete;
  SystemLayer& operator=(const SystemLayer&) = delete;

  // Starts a collective at `rank` now. Error when `rank` is not in the group, or when the group's
  // other ranks issued a different collective (type or size) at the same position of their order.
  // Any time, also inside events.
  virtual Status issue_collective(Rank rank, const CollectiveRequest& request) = 0;

  // Point-to-point: a send completes when its message arrives at `dst`; a receive when its message
  // has arrived (at once if it came earlier). Messages match on (src, dst, tag) in issue order.
  virtual void issue_send(Rank src, Rank dst, int64_t tag, uint64_t bytes, uint64_t cookie,
                          uint64_t node_id) = 0;
  virtual void issue_recv(Rank dst, Rank src, int64_t tag, uint64_t bytes, uint64_t cookie,
                          uint64_t node_id) = 0;

 protected:
  SystemLayer() = default;
};

}  // namespace orrery::sys
