// network/topology.h: the multi-dimensional network of ASTRA-sim's analytical backends, computed
// rather than stored.
//
// A topology is a list of dimensions, innermost first; each is a Ring (bidirectional), a
// FullyConnected group or a Switch, with its own size, bandwidth per link and latency per hop.
// Ranks map to coordinates in mixed radix, dimension 0 varying fastest. The ranks that share every
// coordinate but dimension d's form one *group* of dimension d, wired as that dimension's kind.
//
// Nothing is materialized per rank, per pair or per link: coordinates, peers, link ids, link
// endpoints and routes are arithmetic on a few numbers per dimension, so a topology of a million
// ranks costs a few hundred bytes and builds in microseconds. A Topology is immutable after
// create() and cheap to copy; every query is O(1) or O(dimensions) unless stated otherwise.
//
// Nodes: ranks are nodes 0 .. rank_count()-1; each group of a Switch dimension adds one switch
// node after them. Links are directed and numbered densely, dimension by dimension:
//   Ring group of n:            2n links, 2c = c -> c+1 (clockwise), 2c+1 = c -> c-1
//   FullyConnected group of n:  n(n-1) links, c*(n-1) + k = c -> k-th other member in order
//   Switch group of n:          2n links, 2c = c -> switch (up), 2c+1 = switch -> c (down)
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/time.h"
#include "network/bandwidth.h"

namespace orrery::net {

// The most ranks a network may have (2^24, as the graph generators allow): a run keeps a result
// record per rank, so 2^30 ranks would need hundreds of gigabytes before the first event.
inline constexpr uint64_t kMaxRanks = uint64_t{1} << 24;

using Rank = uint32_t;    // an NPU, 0 .. rank_count()-1
using NodeId = uint32_t;  // a rank, or a switch (ids from rank_count() on)
using LinkId = uint64_t;  // a directed link, 0 .. link_count()-1

inline constexpr uint32_t kNoDimension = UINT32_MAX;

enum class TopologyKind : uint8_t { kRing, kFullyConnected, kSwitch };

// "Ring", "FullyConnected", "Switch": the names ASTRA-sim's network files use.
std::string_view topology_kind_name(TopologyKind kind);

struct Dimension {
  TopologyKind kind = TopologyKind::kRing;
  uint32_t size = 0;    // ranks per group, at least 2
  Bandwidth bandwidth;  // of every link of this dimension, per direction
  SimTime latency;      // per hop (per link traversed)
};

struct LinkInfo {
  NodeId src = 0;
  NodeId dst = 0;
  uint32_t dimension = 0;
};

// One step of a route: take `link` to reach `next`.
struct Hop {
  LinkId link = 0;
  NodeId next = 0;
  uint32_t dimension = 0;
};

class Topology {
 public:
  // Checks and lays out `dimensions` (innermost first). Errors (kTopology) name the dimension:
  // no dimension, a size below 2, a zero bandwidth, a negative latency, more than 2^32-1 ranks or
  // nodes, or a worst-case path latency beyond 2^61 ps. O(dimensions).
  static Expected<Topology> create(std::vector<Dimension> dimensions);

  // --- Shape -------------------------------------------------------------------------------
  uint32_t rank_count() const { return rank_count_; }
  uint32_t dimension_count() const { return static_cast<uint32_t>(dims_.size()); }
  const Dimension& dimension(uint32_t dim) const { return dims_[dim].spec; }
  uint32_t size(uint32_t dim) const { return dims_[dim].spec.size; }
  // Ranks between consecutive coordinates of `dim`: the product of the sizes below it.
  uint32_t stride(uint32_t dim) const { return dims_[dim].stride; }
  // Groups of `dim`: rank_count() / size(dim).
  uint32_t group_count(uint32_t dim) const { return dims_[dim].groups; }

  // --- Ranks and coordinates ----------------------------------------------------------------
  uint32_t coordinate(Rank rank, uint32_t dim) const {
    return (rank / dims_[dim].stride) % dims_[dim].spec.size;
  }
  // Writes the coordinates of `rank` into `out` (size dimension_count()). O(dimensions).
  void coordinates(Rank rank, std::span<uint32_t> out) const;
  std::vector<uint32_t> coordinates(Rank rank) const;
  // The rank at `coords` (size dimension_count(), each below its dimension's size).
  Rank rank_at(std::span<const uint32_t> coords) const;
  // `rank` with its coordinate in `dim` replaced by `coord`: its peer in that dimension's group.
  Rank peer(Rank rank, uint32_t dim, uint32_t coord) const {
    const uint32_t stride = dims_[dim].stride;
    return rank - coordinate(rank, dim) * stride + coord * stride;
  }
  // The lowest dimension in which `a` and `b` differ, or kNoDimension when a == b.
  uint32_t lowest_differing_dimension(Rank a, Rank b) const;
  // The dimension that times a message from `a` to `b` in the analytical models (kNoDimension
  // when a == b): the lowest differing one, as ASTRA-sim's congestion-unaware backend does, or,
  // with set_charge_highest(true), the highest: a message between ranks of two nodes then pays
  // the network between the nodes even when the ranks also differ inside them (a flat ring over
  // a data-parallel group with tensor parallelism below the node size: every other hop leaves
  // the node). O(dimensions).
  uint32_t charged_dimension(Rank a, Rank b) const {
    return charge_highest_ ? highest_differing_dimension(a, b) : lowest_differing_dimension(a, b);
  }
  uint32_t highest_differing_dimension(Rank a, Rank b) const;
  // Off (the default) is ASTRA-sim's rule; routing (next_hop) goes lowest dimension first either
  // way. Set before the topology is copied into backends and models.
  void set_charge_highest(bool on) { charge_highest_ = on; }
  bool charge_highest() const { return charge_highest_; }

  // Links crossed inside one group of `dim` from coordinate `from` to `to` (0 when equal): Ring the
  // shorter way round, FullyConnected 1, Switch 2.
  uint32_t hops(uint32_t dim, uint32_t from, uint32_t to) const;

  // --- Nodes and links ----------------------------------------------------------------------
  uint32_t switch_count() const { return switch_count_; }
  uint64_t node_count() const { return uint64_t{rank_count_} + switch_count_; }
  bool is_switch(NodeId node) const { return node >= rank_count_; }
  // The dimension and group a switch node serves.
  void switch_position(NodeId node, uint32_t& dim, uint32_t& group) const;
  uint64_t link_count() const { return link_count_; }
  uint64_t link_count(uint32_t dim) const {
    return uint64_t{dims_[dim].groups} * dims_[dim].links_per_group;
  }
  // Endpoints and dimension of a link. O(dimensions).
  LinkInfo link_info(LinkId link) const;
  // Bytes this object holds: O(dimensions), nothing per rank or per link.
  size_t memory_bytes() const { return sizeof(*this) + dims_.capacity() * sizeof(DimLayout); }

  // --- Routing ------------------------------------------------------------------------------
  // The next hop from `at` (a rank or a switch) towards rank `dst` (at != dst), routing one
  // dimension at a time, lowest differing dimension first. Within a Ring the message goes the
  // shorter way round; at exactly half way round it goes clockwise (to increasing coordinates),
  // as ASTRA-sim does. Repeated calls walk the whole route. O(dimensions).
  Hop next_hop(NodeId at, Rank dst) const;

  // Calls visit(LinkId) for each link from `src` to the rank of its group in dimension `dim` at
  // coordinate `to` (not src's own), in order: the links successive next_hop calls walk, with the
  // group and coordinates worked out once instead of per hop (next_hop divides by every
  // dimension's size again at each hop, which a full simulation's messages felt). O(hops).
  template <class Visit>
  void route_in_dimension(Rank src, uint32_t dim, uint32_t to, Visit&& visit) const;

  // In a Switch dimension `dim`: the link from `rank` up to its switch (next = the switch), or
  // from the switch down to `rank` (next = rank). For in-network collectives. O(1).
  Hop switch_uplink(Rank rank, uint32_t dim) const;
  Hop switch_downlink(Rank rank, uint32_t dim) const;

 private:
  struct DimLayout {
    Dimension spec;
    uint32_t stride = 1;           // product of the sizes below
    uint32_t groups = 1;           // rank_count / size
    uint64_t links_per_group = 0;  // see the header comment
    LinkId link_base = 0;          // first link id of this dimension
    uint32_t switch_base = 0;      // first switch node of this dimension (Switch only)
  };

  Topology() = default;
  uint32_t group_of(Rank rank, uint32_t dim) const;
  Rank rank_in_group(uint32_t group, uint32_t coord, uint32_t dim) const;

  std::vector<DimLayout> dims_;
  uint32_t rank_count_ = 0;
  uint32_t switch_count_ = 0;
  uint64_t link_count_ = 0;
  bool charge_highest_ = false;
};

template <class Visit>
void Topology::route_in_dimension(Rank src, uint32_t dim, uint32_t to, Visit&& visit) const {
  const DimLayout& layout = dims_[dim];
  const uint32_t n = layout.spec.size;
  const uint32_t from = coordinate(src, dim);
  const LinkId base = layout.link_base + uint64_t{group_of(src, dim)} * layout.links_per_group;
  switch (layout.spec.kind) {
    case TopologyKind::kRing: {
      // The direction next_hop takes at the first hop holds for every later one.
      const uint32_t clockwise = to >= from ? to - from : to + n - from;
      if (n - clockwise < clockwise) {
        for (uint32_t at = from; at != to; at = at == 0 ? n - 1 : at - 1) {
          visit(base + 2 * uint64_t{at} + 1);
        }
      } else {
        for (uint32_t at = from; at != to; at = at + 1 == n ? 0 : at + 1) {
          visit(base + 2 * uint64_t{at});
        }
      }
      return;
    }
    case TopologyKind::kFullyConnected:
      visit(base + uint64_t{from} * (n - 1) + (to < from ? to : to - 1));
      return;
    case TopologyKind::kSwitch:
      visit(base + 2 * uint64_t{from});    // up to the group's switch
      visit(base + 2 * uint64_t{to} + 1);  // and down to the destination
      return;
  }
}

}  // namespace orrery::net
