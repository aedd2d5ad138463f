// sim/symmetry.h: when every rank of a run is provably the same, simulate one.
//
// A run is *symmetric* when every rank executes the same trace (node for node: types, durations,
// attributes and dependencies, ids aside), every collective runs over all ranks with an algorithm
// whose messages look alike from every rank (ring, direct, halving-doubling on power-of-two
// dimensions, in-switch), there are no point-to-point messages, memory has no shared pools, and
// the network model has no contention (the analytical backend) or no link carries another rank's
// messages (the congestion-aware backend when every message is one hop: a ring neighbour, or
// direct on a FullyConnected dimension; no Switch). Then every rank does the
// same thing at the same time, and the messages a rank receives are mirror images of the ones it
// sends: simulating one representative rank gives every rank's result exactly
// (tests/sim/symmetry_test.cpp compares the two on randomized workloads).
#pragma once

#include <string>
#include <vector>

#include "chakra/trace_graph.h"
#include "network/topology.h"
#include "system/system_config.h"

namespace orrery::sim {

struct SymmetryVerdict {
  bool symmetric = false;
  std::string reason;  // why not, for --explain-fast-path style messages
  // The representative's messages go through the (congestion-aware) network backend.
  bool through_network = false;
};

// Checks everything but the traces' sameness (which the caller establishes with
// TraceGraph::same_work): the representative trace's operations, the system configuration, the
// network and the memory model. `all_ranks_groups` are the pg_names whose group is every rank.
// "" when `algorithm` in dimension `dim` sends alike from every member (ring, direct,
// halving-doubling on a power-of-two dimension, in-switch); otherwise what is wrong.
std::string algorithm_problem(const sys::Algorithm& algorithm, uint32_t dim,
                              const net::Topology& topology);

// Whether collective kind `kind` (0 all-reduce, 1 reduce-scatter, 2 all-gather, 3 all-to-all, as
// `uses` below) runs the `nccl` model (its list's first entry).
bool runs_nccl(const sys::SystemConfig& system, int kind);

// The first problem, or "", of the algorithm lists of the collective kinds a run `uses`
// (all-reduce, reduce-scatter, all-gather, all-to-all) for mirroring: a custom graph, an algorithm
// that does not send alike from every member, and with `congestion_aware` a message of more than
// one hop. With `flat_nccl` the `nccl` model passes: its one phase over a group sends alike from
// every member where the group's members are alike at its barrier's distances, which the caller
// (rank classes) checks group by group.
std::string algorithm_lists_problem(const bool (&uses)[4], const sys::SystemConfig& system,
                                    const net::Topology& topology, bool congestion_aware,
                                    bool flat_nccl = false);

SymmetryVerdict check_symmetric_run(const chakra::TraceGraph& representative,
                                    const sys::SystemConfig& system, const net::Topology& topology,
                                    const std::string& backend, bool shared_memory_pools,
                                    const std::vector<std::string>& all_ranks_groups);

}  // namespace orrery::sim
