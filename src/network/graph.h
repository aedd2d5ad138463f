// network/graph.h: a physical network as an explicit graph of NPUs, switches and directed links,
// with routing, and the `Fabric` seam that graph-aware backends route over.
//
// Nodes: NPUs are nodes 0 .. npu_count()-1 (NPU i is rank i of the logical layout); switches
// follow. Every link is directed and has its own bandwidth (GB/s, 2^30 bytes) and latency; a cable
// is two links. Each link carries a `dimension` label (its tier: 0 = inside a node or host to leaf,
// rising outwards) used to group link statistics.
//
// Routing, chosen per graph and deterministic:
//  - kEcmp: shortest paths in hops. At every node the next link is picked among the links that
//    lie on a shortest path by a hash of (source, destination, flow id, node), so one flow always
//    takes one path and different flows spread over equal-cost paths (the node in the hash avoids
//    polarization: consecutive switches do not all choose the same index). Switches forward; NPUs
//    forward only when `npu_forwarding` is set (graphs of NPUs alone, such as rings), otherwise a
//    path never passes through an NPU other than its ends.
//  - kDimensionOrder: the graph is a torus whose NPUs have mixed-radix coordinates over `torus`
//    (dimension 0 fastest); a packet corrects the lowest differing dimension first, the shorter
//    way round (clockwise at exactly half way), one hop at a time.
//
// The logical layout is what the system layer sees: a multi-dimensional Topology over the same
// ranks (for example [8 GPUs in a node, 128 nodes]) whose dimensions drive hierarchical
// collectives, while a graph-aware backend routes every message over the physical links.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/time.h"
#include "network/bandwidth.h"
#include "network/topology.h"

namespace orrery::net {

enum class Routing : uint8_t { kEcmp, kDimensionOrder };

struct GraphLink {
  NodeId src = 0;
  NodeId dst = 0;
  Bandwidth bandwidth;
  SimTime latency;
  uint32_t dimension = 0;  // tier label, see above
};

struct LogicalDimension {
  TopologyKind kind = TopologyKind::kSwitch;
  uint32_t size = 0;
};

// Everything needed to build a Graph; generators and the YAML reader fill one.
struct GraphSpec {
  std::string name;
  uint32_t npus = 0;
  std::vector<std::string> switch_names;  // switch s is node npus + s
  std::vector<GraphLink> links;
  // Logical layout, innermost first; the product of sizes must be `npus`. Empty = one Switch
  // dimension of every NPU.
  std::vector<LogicalDimension> logical;
  Routing routing = Routing::kEcmp;
  std::vector<uint32_t> torus;  // kDimensionOrder: sizes, product = npus
  bool npu_forwarding = false;
  uint32_t npus_per_node = 1;  // informational (summaries, drawings)
};

// One step of a path is a link id; a path lists the links from source to destination.
using Path = std::vector<LinkId>;

// What a graph-aware backend needs: link attributes and a route per (source, destination, flow).
// Implemented by Graph and by TopologyFabric (ASTRA-sim's multi-dimensional networks as graphs,
// computed rather than stored). Not thread-safe (a Graph caches distances).
class Fabric {
 public:
  virtual ~Fabric() = default;
  virtual uint32_t npu_count() const = 0;
  virtual uint64_t link_count() const = 0;
  virtual LinkInfo link_info(LinkId link) const = 0;
  virtual Bandwidth link_bandwidth(LinkId link) const = 0;
  virtual SimTime link_latency(LinkId link) const = 0;
  // The routing key of message number `flow` from `src` to `dst` (its ECMP hash input).
  virtual uint64_t route_key(Rank src, Rank dst, uint64_t flow) const = 0;
  // Whether routes depend on the message number at all (else backends need not count them).
  virtual bool multipath() const = 0;
  // The next link from node `at` (not `dst`) towards NPU `dst` for a message with `key`: routes
  // are decided hop by hop, so a store-and-forward model needs no path per message.
  virtual Hop next_hop(NodeId at, Rank dst, uint64_t key) const = 0;
  // Appends to `out` the links from NPU `src` to NPU `dst` (src != dst) taken by flow `flow`:
  // next_hop from `src` until `dst`.
  void route(Rank src, Rank dst, uint64_t flow, Path& out) const;
  // For in-network collectives on logical dimension `dim`: the first link out of `rank` (up) or
  // the last link into it (down) that serves that dimension.
  virtual LinkId edge_link(Rank rank, uint32_t dim, bool up) const = 0;

 protected:
  Fabric() = default;
  Fabric(const Fabric&) = default;
  Fabric& operator=(const Fabric&) = default;
};

class Graph final : public Fabric {
 public:
  // Checks `spec`: endpoints in range, no self-links, positive bandwidth, non-negative latency,
  // a logical layout whose product is the NPU count, a torus for dimension-order routing, every NPU
  // reaching every other one. Errors (kTopology) name the link or the node. O(nodes + links),
  // plus one breadth-first search per NPU for the reachability check on graphs below 4,096 NPUs
  // (larger graphs are checked from NPU 0 only).
  static Expected<Graph> create(GraphSpec spec);

  const GraphSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  uint32_t npu_count() const override { return spec_.npus; }
  uint32_t switch_count() const { return static_cast<uint32_t>(spec_.switch_names.size()); }
  uint32_t node_count() const { return spec_.npus + switch_count(); }
  bool is_switch(NodeId node) const { return node >= spec_.npus; }
  std::string node_name(NodeId node) const;
  uint64_t link_count() const override { return spec_.links.size(); }
  const GraphLink& link(LinkId id) const { return spec_.links[id]; }
  LinkInfo link_info(LinkId link) const override;
  Bandwidth link_bandwidth(LinkId link) const override { return spec_.links[link].bandwidth; }
  SimTime link_latency(LinkId link) const override { return spec_.links[link].latency; }
  // Links leaving `node`, in id order.
  std::span<const uint32_t> out_links(NodeId node) const {
    return {out_.data() + out_begin_[node], out_.data() + out_begin_[node + 1]};
  }

  uint64_t route_key(Rank src, Rank dst, uint64_t flow) const override;
  bool multipath() const override { return spec_.routing == Routing::kEcmp; }
  Hop next_hop(NodeId at, Rank dst, uint64_t key) const override;
  LinkId edge_link(Rank rank, uint32_t dim, bool up) const override;

  // Hops on a shortest path between two NPUs (through nodes allowed to forward).
  uint32_t distance(Rank src, Rank dst) const;

  // The logical multi-dimensional topology the system layer works on: kinds and sizes from the
  // layout; each dimension's bandwidth and latency are those of NPU 0's first link of that tier
  // (or its first link when it has none), for the models that need one figure per dimension.
  Expected<Topology> logical_topology() const;

 private:
  Graph() = default;
  // Hop distance from every node to NPU `dst` (UINT16_MAX = unreachable), cached.
  const std::vector<uint16_t>& distances_to(Rank dst) const;
  bool forwards(NodeId node) const { return is_switch(node) || spec_.npu_forwarding; }
  // Whether every NPU reaches, and is reached from, the relaying node of most links (then every
  // NPU reaches every other). O(nodes + links).
  bool reaches_through_hub() const;
  LinkId find_link(NodeId from, NodeId to) const;

  GraphSpec spec_;
  std::vector<uint32_t> out_begin_;  // node -> first index in out_ (CSR)
  std::vector<uint32_t> out_;        // link ids grouped by source node
  std::vector<uint32_t> in_begin_;
  std::vector<uint32_t> in_;
  mutable std::vector<std::vector<uint16_t>> distance_cache_;  // by destination NPU
};

// ASTRA-sim's implicit multi-dimensional network seen as a fabric: links and routes are the
// Topology's own (link ids, dimension-order routing), nothing is stored.
class TopologyFabric final : public Fabric {
 public:
  explicit TopologyFabric(Topology topology) : topology_(std::move(topology)) {}
  uint32_t npu_count() const override { return topology_.rank_count(); }
  uint64_t link_count() const override { return topology_.link_count(); }
  LinkInfo link_info(LinkId link) const override { return topology_.link_info(link); }
  Bandwidth link_bandwidth(LinkId link) const override {
    return topology_.dimension(topology_.link_info(link).dimension).bandwidth;
  }
  SimTime link_latency(LinkId link) const override {
    return topology_.dimension(topology_.link_info(link).dimension).latency;
  }
  uint64_t route_key(Rank, Rank, uint64_t) const override { return 0; }
  bool multipath() const override { return false; }
  Hop next_hop(NodeId at, Rank dst, uint64_t) const override { return topology_.next_hop(at, dst); }
  LinkId edge_link(Rank rank, uint32_t dim, bool up) const override;

 private:
  Topology topology_;
};

// A deterministic 64-bit mix (splitmix64 finalizer), for ECMP hashing.
uint64_t mix64(uint64_t x);

// Flow labels for ECMP: the k-th message from `src` to `dst` gets label k, so a message's path
// depends on its own pair's history only, not on how sends of other pairs interleave (which
// changes with the order of simultaneous events). An open-addressing table of the pairs that
// have talked: 16 bytes per pair at most half full; O(1) expected per message.
class FlowLabels {
 public:
  // The label of the next message from `src` to `dst` on `fabric`; 0 (nothing counted) when the
  // fabric's routes do not depend on it.
  uint64_t next(const Fabric& fabric, Rank src, Rank dst) {
    return fabric.multipath() ? next(src, dst) : 0;
  }
  uint64_t next(Rank src, Rank dst);
  size_t memory_bytes() const { return slots_.capacity() * sizeof(Slot); }

 private:
  struct Slot {
    uint64_t pair = 0;  // (src + 1) << 32 | dst; 0 = empty
    uint64_t count = 0;
  };
  std::vector<Slot> slots_;
  size_t used_ = 0;
};

}  // namespace orrery::net
