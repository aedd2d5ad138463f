#include "network/topology.h"

#include <cassert>
#include <limits>

#include "core/units.h"

namespace orrery::net {

std::string_view topology_kind_name(TopologyKind kind) {
  switch (kind) {
    case TopologyKind::kRing:
      return "Ring";
    case TopologyKind::kFullyConnected:
      return "FullyConnected";
    case TopologyKind::kSwitch:
      return "Switch";
  }
  return "?";
}

Expected<Topology> Topology::create(std::vector<Dimension> dimensions) {
  if (dimensions.empty()) {
    return Error::make(ErrorKind::kTopology, "a network needs at least one dimension, found none");
  }
  constexpr uint64_t kMaxCount = std::numeric_limits<uint32_t>::max();
  constexpr uint64_t kMaxPathLatencyPs = uint64_t{1} << 61;
  Topology topology;
  uint64_t ranks = 1;
  for (size_t dim = 0; dim < dimensions.size(); ++dim) {
    const Dimension& spec = dimensions[dim];
    if (spec.size < 2) {
      return Error::make(ErrorKind::kTopology,
                         "dimension {}: size {} is below 2 (a dimension links at least 2 ranks)",
                         dim, spec.size);
    }
    if (spec.bandwidth.nano_gbps() == 0) {
      return Error::make(ErrorKind::kTopology, "dimension {}: bandwidth must be positive, found 0",
                         dim);
    }
    if (spec.latency < SimTime::zero()) {
      return Error::make(ErrorKind::kTopology,
                         "dimension {}: latency must not be negative, found {} ps", dim,
                         spec.latency.ps());
    }
    ranks *= spec.size;
    if (ranks > kMaxRanks) {
      return Error::make(ErrorKind::kTopology,
                         "the dimensions up to {} make more than {} ranks (2^24), the most orrery "
                         "simulates (a run keeps results per rank)",
                         dim, format_count(kMaxRanks));
    }
  }
  topology.rank_count_ = static_cast<uint32_t>(ranks);

  uint64_t stride = 1;
  uint64_t switches = 0;
  LinkId links = 0;
  uint64_t worst_latency_ps = 0;
  for (const Dimension& spec : dimensions) {
    DimLayout layout;
    layout.spec = spec;
    layout.stride = static_cast<uint32_t>(stride);
    layout.groups = static_cast<uint32_t>(ranks / spec.size);
    const uint64_t n = spec.size;
    uint64_t max_hops = 0;
    switch (spec.kind) {
      case TopologyKind::kRing:
        layout.links_per_group = 2 * n;
        max_hops = n / 2;
        break;
      case TopologyKind::kFullyConnected:
        layout.links_per_group = n * (n - 1);
        max_hops = 1;
        break;
      case TopologyKind::kSwitch:
        layout.links_per_group = 2 * n;
        layout.switch_base = static_cast<uint32_t>(switches);
        switches += layout.groups;
        max_hops = 2;
        break;
    }
    layout.link_base = links;
    links += uint64_t{layout.groups} * layout.links_per_group;
    const auto latency_ps = static_cast<uint64_t>(spec.latency.ps());
    const bool latency_too_long =
        latency_ps != 0 && max_hops > (kMaxPathLatencyPs - worst_latency_ps) / latency_ps;
    if (!latency_too_long) worst_latency_ps += max_hops * latency_ps;
    if (ranks + switches > kMaxCount || latency_too_long) {
      return Error::make(ErrorKind::kTopology,
                         "the network is too large: more than {} nodes or a worst-case path "
                         "latency beyond 2^61 ps",
                         kMaxCount);
    }
    stride *= spec.size;
    topology.dims_.push_back(layout);
  }
  topology.switch_count_ = static_cast<uint32_t>(switches);
  topology.link_count_ = links;
  return topology;
}

void Topology::coordinates(Rank rank, std::span<uint32_t> out) const {
  assert(out.size() == dims_.size());
  for (size_t dim = 0; dim < dims_.size(); ++dim) {
    out[dim] = rank % dims_[dim].spec.size;
    rank /= dims_[dim].spec.size;
  }
}

std::vector<uint32_t> Topology::coordinates(Rank rank) const {
  std::vector<uint32_t> out(dims_.size());
  coordinates(rank, out);
  return out;
}

Rank Topology::rank_at(std::span<const uint32_t> coords) const {
  assert(coords.size() == dims_.size());
  Rank rank = 0;
  for (size_t dim = 0; dim < dims_.size(); ++dim) {
    assert(coords[dim] < dims_[dim].spec.size);
    rank += coords[dim] * dims_[dim].stride;
  }
  return rank;
}

uint32_t Topology::lowest_differing_dimension(Rank a, Rank b) const {
  for (uint32_t dim = 0; dim < dims_.size(); ++dim) {
    const uint32_t size = dims_[dim].spec.size;
    if (a % size != b % size) return dim;
    a /= size;
    b /= size;
  }
  return kNoDimension;
}

uint32_t Topology::highest_differing_dimension(Rank a, Rank b) const {
  uint32_t highest = kNoDimension;
  for (uint32_t dim = 0; dim < dims_.size(); ++dim) {
    const uint32_t size = dims_[dim].spec.size;
    if (a % size != b % size) highest = dim;
    a /= size;
    b /= size;
  }
  return highest;
}

uint32_t Topology::hops(uint32_t dim, uint32_t from, uint32_t to) const {
  if (from == to) return 0;
  const Dimension& spec = dims_[dim].spec;
  switch (spec.kind) {
    case TopologyKind::kRing: {
      const uint32_t clockwise = to >= from ? to - from : to + spec.size - from;
      const uint32_t counter = spec.size - clockwise;
      return counter < clockwise ? counter : clockwise;
    }
    case TopologyKind::kFullyConnected:
      return 1;
    case TopologyKind::kSwitch:
      return 2;
  }
  return 0;
}

uint32_t Topology::group_of(Rank rank, uint32_t dim) const {
  const DimLayout& layout = dims_[dim];
  const uint64_t span = uint64_t{layout.stride} * layout.spec.size;
  return static_cast<uint32_t>(rank / span * layout.stride + rank % layout.stride);
}

Rank Topology::rank_in_group(uint32_t group, uint32_t coord, uint32_t dim) const {
  const DimLayout& layout = dims_[dim];
  const uint64_t span = uint64_t{layout.stride} * layout.spec.size;
  return static_cast<Rank>(group / layout.stride * span + uint64_t{coord} * layout.stride +
                           group % layout.stride);
}

void Topology::switch_position(NodeId node, uint32_t& dim, uint32_t& group) const {
  assert(is_switch(node) && node - rank_count_ < switch_count_);
  const uint32_t index = node - rank_count_;
  for (uint32_t candidate = 0; candidate < dims_.size(); ++candidate) {
    const DimLayout& layout = dims_[candidate];
    if (layout.spec.kind == TopologyKind::kSwitch && index >= layout.switch_base &&
        index - layout.switch_base < layout.groups) {
      dim = candidate;
      group = index - layout.switch_base;
      return;
    }
  }
  assert(false && "topology: switch node out of range");
}

LinkInfo Topology::link_info(LinkId link) const {
  assert(link < link_count_);
  uint32_t dim = static_cast<uint32_t>(dims_.size()) - 1;
  while (dims_[dim].link_base > link) --dim;
  const DimLayout& layout = dims_[dim];
  const uint64_t local = link - layout.link_base;
  const auto group = static_cast<uint32_t>(local / layout.links_per_group);
  const uint64_t index = local % layout.links_per_group;
  const uint32_t n = layout.spec.size;
  LinkInfo info;
  info.dimension = dim;
  switch (layout.spec.kind) {
    case TopologyKind::kRing: {
      const auto coord = static_cast<uint32_t>(index / 2);
      const uint32_t next = index % 2 == 0 ? (coord + 1) % n : (coord + n - 1) % n;
      info.src = rank_in_group(group, coord, dim);
      info.dst = rank_in_group(group, next, dim);
      break;
    }
    case TopologyKind::kFullyConnected: {
      const auto coord = static_cast<uint32_t>(index / (n - 1));
      const auto other = static_cast<uint32_t>(index % (n - 1));
      info.src = rank_in_group(group, coord, dim);
      info.dst = rank_in_group(group, other < coord ? other : other + 1, dim);
      break;
    }
    case TopologyKind::kSwitch: {
      const auto coord = static_cast<uint32_t>(index / 2);
      const NodeId rank = rank_in_group(group, coord, dim);
      const NodeId hub = rank_count_ + layout.switch_base + group;
      info.src = index % 2 == 0 ? rank : hub;
      info.dst = index % 2 == 0 ? hub : rank;
      break;
    }
  }
  return info;
}

Hop Topology::next_hop(NodeId at, Rank dst) const {
  assert(at != dst && dst < rank_count_);
  Hop hop;
  if (is_switch(at)) {
    uint32_t group = 0;
    switch_position(at, hop.dimension, group);
    const DimLayout& layout = dims_[hop.dimension];
    const uint32_t coord = coordinate(dst, hop.dimension);
    hop.next = rank_in_group(group, coord, hop.dimension);
    hop.link =
        layout.link_base + uint64_t{group} * layout.links_per_group + 2 * uint64_t{coord} + 1;
    return hop;
  }
  const Rank rank = at;
  hop.dimension = lowest_differing_dimension(rank, dst);
  assert(hop.dimension != kNoDimension);
  const uint32_t dim = hop.dimension;
  const DimLayout& layout = dims_[dim];
  const uint32_t n = layout.spec.size;
  const uint32_t from = coordinate(rank, dim);
  const uint32_t to = coordinate(dst, dim);
  const uint32_t group = group_of(rank, dim);
  const LinkId group_base = layout.link_base + uint64_t{group} * layout.links_per_group;
  switch (layout.spec.kind) {
    case TopologyKind::kRing: {
      const uint32_t clockwise = to >= from ? to - from : to + n - from;
      if (n - clockwise < clockwise) {
        hop.link = group_base + 2 * uint64_t{from} + 1;
        hop.next = peer(rank, dim, (from + n - 1) % n);
      } else {
        hop.link = group_base + 2 * uint64_t{from};
        hop.next = peer(rank, dim, (from + 1) % n);
      }
      break;
    }
    case TopologyKind::kFullyConnected:
      hop.link = group_base + uint64_t{from} * (n - 1) + (to < from ? to : to - 1);
      hop.next = peer(rank, dim, to);
      break;
    case TopologyKind::kSwitch:
      hop.link = group_base + 2 * uint64_t{from};
      hop.next = rank_count_ + layout.switch_base + group;
      break;
  }
  return hop;
}

Hop Topology::switch_uplink(Rank rank, uint32_t dim) const {
  const DimLayout& layout = dims_[dim];
  assert(layout.spec.kind == TopologyKind::kSwitch);
  const uint32_t group = group_of(rank, dim);
  Hop hop;
  hop.dimension = dim;
  hop.link = layout.link_base + uint64_t{group} * layout.links_per_group +
             2 * uint64_t{coordinate(rank, dim)};
  hop.next = rank_count_ + layout.switch_base + group;
  return hop;
}

Hop Topology::switch_downlink(Rank rank, uint32_t dim) const {
  Hop hop = switch_uplink(rank, dim);
  hop.link += 1;
  hop.next = rank;
  return hop;
}

}  // namespace orrery::net
