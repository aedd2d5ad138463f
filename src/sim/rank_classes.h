// sim/rank_classes.h: which ranks of a run provably behave alike, so that one representative per
// class of alike ranks can be simulated for its whole class (system/peer_model.h).
//
// The classes are decided from the traces, the communicator groups and the network alone:
//   1. a colour per distinct trace, up to node ids, peers, tags and group names
//      (TraceGraph::same_work_except: the same node types, durations, dependencies and other
//      attributes; node ids in the same order, as the executor issues ready nodes by id), and
//      per compute factor of a perturbation;
//   2. colour refinement: ranks split by the colours of the peer of each point-to-point node,
//      until stable; the final colours are the classes, numbered by their smallest member (the
//      representative).
// Then the conditions under which every member of a class has its representative's timeline (by
// induction over events) are verified, and anything unproven falls back to full simulation with
// the reason:
//   - every collective is all-reduce, reduce-scatter, all-gather or all-to-all with algorithms
//     that mirror (ring, direct, halving-doubling on power-of-two dimensions, in-switch), no
//     custom graphs, no flat (one*) algorithms;
//   - every collective's group holds members of one class only and is a sub-grid of the network
//     (it spans whole dimensions), with the same dimensions for every member at that node, so
//     every member runs the same phases over members of its own class; groups correspond one to
//     one between a member and its representative;
//   - every point-to-point node of a class sends to (receives from) one class, injectively, at the
//     same distance (lowest differing dimension and hops: the same analytical delay); the nodes a
//     rank sends to one (peer, tag) are the same nodes for every member, and so are the receive
//     nodes at the destination, so that the message a representative sends to member d of class D
//     arrives at D's representative as from the member of its class that sends it the
//     corresponding message (a table, ClassPlan::p2p);
//   - no memory node uses a shared pool; the analytical backend (no contention) on a
//     dimensional network.
// The one-class case of every rank with no point-to-point messages is the symmetric fast path
// (sim/symmetry.h), which is tried first.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "chakra/trace_set.h"
#include "network/topology.h"
#include "system/peer_model.h"
#include "system/system_config.h"

namespace orrery::sim {

inline constexpr uint32_t kNoGroupId = UINT32_MAX;

struct RankClassVerdict {
  bool ok = false;
  std::string reason;    // why not, when not ok
  uint32_t classes = 0;  // classes found (also when they could not be used; 0 when not decided)
  std::shared_ptr<sys::ClassPlan> plan;
  // By engine group id: the group of the representatives' that stands for it (itself for the
  // representatives' own groups), kNoGroupId for groups no collective uses.
  std::vector<uint32_t> group_representative;
};

struct RankClassInputs {
  const chakra::TraceSet* traces = nullptr;
  // By engine group id (0 = every rank): the members, ascending.
  const std::vector<std::vector<net::Rank>>* group_ranks = nullptr;
  const std::map<std::string, uint32_t>* group_ids = nullptr;  // pg_name -> engine group id
  const sys::SystemConfig* system = nullptr;
  const net::Topology* topology = nullptr;
  bool shared_memory_pools = false;
  size_t threads = 0;
  // By rank, a factor on compute times (sim/perturbation.h; nullptr: all 1): ranks of different
  // factors are never one class.
  const std::vector<double>* compute_factors = nullptr;
  // By rank, its hardware entry (sim/perturbation.h; nullptr: all the run's): the same rule.
  const std::vector<uint16_t>* hardware = nullptr;
};

RankClassVerdict decide_rank_classes(const RankClassInputs& inputs);

}  // namespace orrery::sim
