// system/nccl_model.h: the time of one NCCL collective, as NCCL's algorithms and protocols take it.
//
// NCCL runs a collective with one of its algorithms (ring; tree across nodes; NVLS, the NVLink
// switch reducing in-switch, within a node, and NVLS-tree across nodes) and one of its protocols
// (LL: 8-byte flag+data stores, lowest latency, a quarter to a third of the bandwidth; LL128:
// 128-byte lines, nearly full bandwidth on NVLink; Simple: bulk copies with the highest latency).
// It picks the pair its tuning model predicts fastest for the size: time = base latency + steps x
// per-step latency + bytes / bandwidth, with the bandwidth derated per protocol and capped per
// channel.
//
// This model does the same in two steps, as NCCL does: the *choice* uses NCCL's public tuning
// constants (../shared/reference/collectives.md; learnt from NCCL's src/graph/tuning.cc, not
// copied; those of NCCL 2.25 on for Blackwell, which no earlier release runs, and of 2.17 and
// before otherwise), with its per-channel caps for the GPU generation (NcclTuning::arch) and its
// channel count (one ring per NIC rail across nodes), so it can pick what is not the fastest on the
// machine, as NCCL does; the *time* of the
// chosen pair uses the same formula with what the machine achieves (sys::NcclTuning: a fixed
// per-collective cost, per-step latencies, efficiencies), which hardware presets carry. NVLS's time
// also follows the chunk NCCL picks for the buffer's size (a per-chunk sync, and a pipeline that
// fills with chunks before the first completes; NCCL's prediction ignores both, so NCCL may pick
// NVLS where it is slower than the ring). Bandwidths
// are the machine's links (NcclFabric); sizes are NCCL's: the per-rank buffer for all-reduce,
// broadcast, reduce and all-to-all, the whole gathered (scattered) buffer for all-gather
// (reduce-scatter), as nccl-tests print them. Pure functions; O(1).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "network/topology.h"
#include "system/system_config.h"

namespace orrery::sys {

enum class NcclOp : uint8_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBroadcast,
  kReduce
};
enum class NcclAlgorithm : uint8_t { kRing, kTree, kNvls, kNvlsTree, kDirect };
enum class NcclProtocol : uint8_t { kLL, kLL128, kSimple };

std::string_view nccl_algorithm_name(NcclAlgorithm algorithm);  // "ring", "tree", "nvls", ...
std::string_view nccl_protocol_name(NcclProtocol protocol);     // "LL", "LL128", "Simple"

// NCCL_ALGO and NCCL_PROTO: the algorithms and protocols NCCL may pick (NcclTuning::algorithms
// and ::protocols). NCCL's syntax: names separated by commas, in any case, or "^" and the names
// left out. Algorithms: ring, tree, nvls, nvlstree (or nvls-tree); NCCL's collnetdirect,
// collnetchain and pat are refused as not modelled. Protocols: LL, LL128, Simple. All-to-all is
// grouped sends and receives, which neither restricts. Errors: kInvalidArgument naming the name.
Expected<uint8_t> parse_nccl_algorithms(std::string_view list);
Expected<uint8_t> parse_nccl_protocols(std::string_view list);
// "NCCL_ALGO=ring,tree NCCL_PROTO=LL,LL128,Simple": what `tuning` allows, for messages.
std::string nccl_allowed_text(const NcclTuning& tuning);
// Whether any collective of `system` runs the nccl algorithm.
bool uses_nccl(const SystemConfig& system);
// `algo` and `proto` (NCCL_ALGO's and NCCL_PROTO's syntax; an empty one changes nothing) applied
// to `system`'s nccl tuning; errors name them as the flags --nccl-algo and --nccl-proto. Errors:
// kInvalidArgument for a bad list, or when no collective of `system` runs the nccl algorithm (the
// restriction would change nothing).
Status restrict_nccl(SystemConfig& system, std::string_view algo, std::string_view proto);

// The machine as NCCL sees it: ranks over nodes of equal size, and the link bandwidths in
// decimal GB/s (10^9 bytes per second) per direction.
struct NcclFabric {
  uint32_t ranks = 1;
  uint32_t nodes = 1;
  double nvlink_gbps = 0;  // per GPU, within a node
  double net_gbps = 0;     // per node, all its NICs together (unused when nodes == 1)
};

struct NcclEstimate {
  NcclAlgorithm algorithm = NcclAlgorithm::kRing;
  NcclProtocol protocol = NcclProtocol::kSimple;
  double time_us = 0;       // what the machine takes (NcclTuning)
  double predicted_us = 0;  // what NCCL's tuning constants predict (the choice's criterion)
  double busbw_gbps = 0;    // the bus bandwidth the time assumes beyond its latency
  // false: the tuning's NCCL_ALGO and NCCL_PROTO leave no pair for the call (NCCL fails it).
  bool available = true;
};

// Every pair NCCL may run for `op` on `fabric`, in a fixed order (ring LL, LL128, Simple, then
// tree, NVLS, NVLS-tree where they apply; all-to-all: direct Simple only), whether or not the
// tuning's NCCL_ALGO and NCCL_PROTO allow it.
std::vector<NcclEstimate> nccl_candidates(NcclOp op, uint64_t bytes, const NcclFabric& fabric,
                                          const NcclTuning& tuning);

// The pair NCCL picks (least predicted_us among those the tuning allows; the first of equals)
// and its time; `available` false when it allows none. One rank (or an empty fabric) takes no
// time.
NcclEstimate nccl_estimate(NcclOp op, uint64_t bytes, const NcclFabric& fabric,
                           const NcclTuning& tuning);

// The fabric NCCL sees for a group of `members` ranks on `topology`: a node is a group of the first
// dimension (NVLink; its link bandwidth is the NVLink bandwidth per GPU); the members on the first
// member's node tell how the group spreads (a data-parallel group may have one rank per node);
// across nodes, the second dimension's bandwidth is one rail's NIC, so a node's members reach the
// network at it times the members per node. `member_rank(i)` is the rank of member i. O(members).
template <typename MemberRank>
NcclFabric nccl_fabric(const net::Topology& topology, uint32_t members, MemberRank&& member_rank) {
  NcclFabric fabric;
  fabric.ranks = members;
  const uint32_t node_size = topology.size(0);
  const uint32_t first_node = member_rank(0u) / node_size;
  uint32_t per_node = 0;
  for (uint32_t idx = 0; idx < members; ++idx)
    per_node += member_rank(idx) / node_size == first_node;
  fabric.nodes = std::max(1u, members / std::max(per_node, 1u));
  fabric.nvlink_gbps = topology.dimension(0).bandwidth.bytes_per_second() / 1e9;
  if (fabric.nodes > 1 && topology.dimension_count() > 1) {
    fabric.net_gbps = topology.dimension(1).bandwidth.bytes_per_second() / 1e9 * per_node;
  }
  return fabric;
}

// nccl-tests' bus-bandwidth factor: 2(n-1)/n for all-reduce; (n-1)/n for all-gather,
// reduce-scatter and all-to-all; 1 for broadcast and reduce.
double nccl_bus_factor(NcclOp op, uint32_t ranks);

}  // namespace orrery::sys
