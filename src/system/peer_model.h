// system/peer_model.h: which ranks a run simulates, and what becomes of the messages that reach
// ranks it does not.
//
// The collective engine runs the ranks a PeerModel names and asks it, and nothing else, at every
// point where not simulating some ranks matters: the size of its per-rank tables, the fate of each
// message it sends (through the network to the destination, or a mirror image arriving on a
// timer), how many members of a group or of a switch take part. Two models exist:
//
// - full simulation (make_full_peer_model): every rank runs, every message goes through the
//   network backend to its destination, as addressed;
// - mirror mode (make_mirror_peer_model, sim/symmetry.h decides when it is exact): rank 0 stands
//   for every rank of a symmetric run. A message it sends in an exchange step does not travel:
//   the message that mirrors it (what the member it expects from sends it at the same moment)
//   arrives after the analytical delay of the one sent, which is also what the network would give
//   every copy; the copies of every rank are counted and their link use recorded per link class
//   (mirror_traffic.h). With `through_network` the representative's message goes through the
//   (congestion-aware) backend instead and its delivery stands for the arrival of the mirror.
//
// - rank classes (make_class_peer_model, sim/rank_classes.h decides when it is exact): the
//   smallest member of each class of alike ranks runs for its class. Within a class it is mirror
//   mode (every collective's group lies inside one class); a point-to-point message from a
//   representative to a member d of class D arrives at D's representative as from the member of
//   the sender's class that sends it the corresponding message, after the analytical delay (a
//   table built when the classes were decided). A collective over a group across classes runs
//   among the representatives, its messages as addressed after the analytical delay, each
//   standing for the copies of every group it represents. With one class of every rank it is
//   mirror mode.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "core/time.h"
#include "network/network_backend.h"
#include "network/topology.h"
#include "system/collective_algorithm.h"
#include "system/mirror_traffic.h"

namespace orrery::sys {

using net::Rank;

// A phase outside the network's dimensions (one algorithm over a whole group).
inline constexpr uint32_t kFlatPhase = UINT32_MAX;

// A collective message the engine is about to send from a simulated rank.
struct CollectiveMessage {
  Rank src = 0;               // the simulated sender
  Rank dst = 0;               // the member it is addressed to
  Rank mirror_src = 0;        // the member whose message to `src` mirrors this one (exchange steps)
  uint32_t dim = kFlatPhase;  // the phase's network dimension
  uint32_t src_index = 0;     // positions within the phase: of the sender,
  uint32_t dst_index = 0;     // of the destination
  uint64_t bytes = 0;
  MirrorPattern pattern = MirrorPattern::kNone;  // kNone: the message has no mirror
};

// What happens to a message (or an in-network hop).
struct MessageFate {
  enum class Transport : uint8_t { kNetwork, kTimer };
  Transport transport = Transport::kNetwork;
  Rank network_src = 0;  // kNetwork: the endpoints the backend times it between
  Rank network_dst = 0;
  SimTime delay;  // kTimer: it arrives this long after now
  // The message that arrives: matched at `arrives_at` as a message from `arrives_from`.
  Rank arrives_from = 0;
  Rank arrives_at = 0;
  uint64_t copies = 1;  // messages of the whole run it stands for (the run's message count)
};

// Rank classes for make_class_peer_model (built by sim/rank_classes.h).
struct ClassPlan {
  std::vector<uint32_t> class_of;          // per rank
  std::vector<std::vector<Rank>> members;  // per class, ascending; members[c].front() runs
  // A point-to-point message a representative sends to `dst` with `tag`: it arrives at
  // `arrives_at` (the representative of dst's class) as from `arrives_from`; p2p_pairs[pairs] is
  // every member's (sender, destination) of that message, for link statistics.
  struct P2pRoute {
    Rank arrives_from = 0;
    Rank arrives_at = 0;
    uint32_t pairs = 0;
  };
  std::map<std::tuple<Rank, Rank, int64_t>, P2pRoute> p2p;  // by (representative, dst, tag)
  // Collective messages between representatives (groups across classes run for real among
  // them): p2p_pairs[direct[{src, dst}]] is every (sender, destination) that message stands for.
  std::map<std::pair<Rank, Rank>, uint32_t> direct;
  // Ring messages of groups inside one class that are not sub-grids of the network (one ring over
  // the group): p2p_pairs[flat[{representative, its neighbour}]] is every member's message.
  std::map<std::pair<Rank, Rank>, uint32_t> flat;
  std::vector<MirrorTraffic::RoutePairs> p2p_pairs;
};

class PeerModel {
 public:
  virtual ~PeerModel() = default;
  PeerModel(const PeerModel&) = delete;
  PeerModel& operator=(const PeerModel&) = delete;

  // How many ranks run: per-rank tables of the engine hold this many, indexed by slot().
  virtual uint32_t simulated_count() const = 0;
  virtual bool simulated(Rank rank) const = 0;
  // The dense index of a simulated rank, below simulated_count().
  virtual uint32_t slot(Rank rank) const = 0;
  // The fate of `message`, sent now. A model that mirrors may record it.
  virtual MessageFate route(const CollectiveMessage& message, SimTime now) = 0;
  // The fate of one in-network hop of `bytes` from `rank` up to the switch of Switch dimension
  // `dim` (up), or from that switch down to `rank`. Transport and copies are used.
  virtual MessageFate route_switch_hop(Rank rank, uint32_t dim, bool up, uint64_t bytes,
                                       SimTime now) = 0;
  // The fate of a workload point-to-point message from simulated `src` to `dst`, sent now.
  // Default: through the network, as addressed.
  virtual MessageFate route_p2p(Rank src, Rank dst, int64_t tag, uint64_t bytes, SimTime now);
  // A message through the network from `src` to `dst`, delivered there as from `src`.
  static MessageFate as_addressed(Rank src, Rank dst);
  // Members of the switch of `dim` under `rank` whose data the switch waits for.
  virtual uint32_t switch_participants(Rank rank, uint32_t dim) const = 0;
  // The link use of the ranks not simulated, when the model records it.
  virtual const MirrorTraffic* traffic() const { return nullptr; }

 protected:
  PeerModel() = default;
};

// Every rank of `topology` runs; messages go through the network as addressed.
std::unique_ptr<PeerModel> make_full_peer_model(const net::Topology& topology);

// Rank 0 runs for every rank of a symmetric run (see above). `rounding` applies to the delays the
// model computes itself. `topology` must outlive the model.
std::unique_ptr<PeerModel> make_mirror_peer_model(const net::Topology& topology,
                                                  net::TimeRounding rounding, bool through_network);

// One representative per class of `plan` runs (see above). `plan` and `topology` must outlive the
// model; delays are the analytical backend's under `rounding`. `queue_peaks` off: links' peak
// queues are not kept (MirrorTraffic::set_queue_peaks), for runs that need totals only.
std::unique_ptr<PeerModel> make_class_peer_model(const net::Topology& topology,
                                                 net::TimeRounding rounding,
                                                 std::shared_ptr<const ClassPlan> plan,
                                                 bool queue_peaks = true);

}  // namespace orrery::sys
