// network/generators.h: graph topologies built from a few parameters.
//
// Every generator returns a GraphSpec (NPUs first, then switches; links in cable pairs, the
// upward direction first) with a logical layout that follows the wiring, so hierarchical
// collectives go through the node, then the leaf, then the pod. Bandwidths are per link and
// direction in GB/s (2^30 bytes per second); latencies per link. Parameters are checked and every
// error (kInvalidArgument) names the parameter.
//
//  k-ary fat-tree      k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 cores, k^3/4
//                      NPUs; logical [k/2 per edge, k/2 edges per pod, k pods].
//  two-tier Clos       leaves x npus_per_leaf NPUs, every leaf linked to every spine; the
//                      leaf-spine link bandwidth makes the oversubscription ratio
//                      (npus_per_leaf x npu bandwidth) / (spines x uplink bandwidth).
//                      Logical [npus_per_leaf, leaves].
//  three-tier Clos     pods of two-tier Clos; spine j of every pod links to cores
//                      j*cores/spines .. (j+1)*cores/spines - 1. Logical [npus_per_leaf,
//                      leaves_per_pod, pods].
//  rail-optimized      nodes of gpus_per_node GPUs on an NVSwitch; GPU g's NIC goes to a leaf of
//                      rail g (nodes_per_leaf nodes share a rail leaf); every leaf links to every
//                      spine (none when one leaf per rail suffices). Logical [gpus_per_node,
//                      nodes].
//  torus               2-D or 3-D, NPUs only, links to the +1 and -1 neighbours of each
//                      dimension, dimension-order routing; logical: one Ring per dimension.
//  dragonfly           groups of fully connected routers, npus_per_router NPUs per router,
//                      one global link between every pair of groups (router (j-i-1)/h of group
//                      i for pair i<j); ECMP minimal routing. Logical [npus_per_router, routers,
//                      groups].
//  HGX nodes           with_nodes() replaces every NPU of any switched generator by a node of
//                      gpus GPUs on an NVSwitch; each GPU gets its own NIC with the NPU's links.
#pragma once

#include <cstdint>

#include "core/error.h"
#include "network/graph.h"

namespace orrery::net {

struct LinkSpec {
  Bandwidth bandwidth = Bandwidth::from_gbps(25);
  SimTime latency = SimTime::from_ns(500);
};

Expected<GraphSpec> make_fat_tree(uint32_t k, LinkSpec link);

struct ClosParams {
  uint32_t leaves = 8;
  uint32_t npus_per_leaf = 16;
  uint32_t spines = 8;
  LinkSpec npu_link;
  LinkSpec uplink;  // leaf-spine; its bandwidth is overridden when oversubscription > 0
  // > 0: sets the uplink bandwidth so (npus_per_leaf x npu bw) / (spines x uplink bw) = ratio.
  double oversubscription = 0;
  // NICs per NPU: NIC j joins plane j, a copy of the leaves and spines of its own (multi-plane
  // fabric); ECMP spreads an NPU's traffic over its NICs.
  uint32_t nics = 1;
};
Expected<GraphSpec> make_clos2(const ClosParams& params);

struct Clos3Params {
  uint32_t pods = 4;
  uint32_t leaves_per_pod = 4;
  uint32_t npus_per_leaf = 8;
  uint32_t spines_per_pod = 4;
  uint32_t cores = 4;
  LinkSpec npu_link;
  LinkSpec leaf_spine;
  LinkSpec spine_core;
  double oversubscription = 0;  // applied at both upper tiers, as in make_clos2
};
Expected<GraphSpec> make_clos3(const Clos3Params& params);

struct RailParams {
  uint32_t nodes = 128;
  uint32_t gpus_per_node = 8;
  uint32_t nodes_per_leaf = 32;
  uint32_t spines = 16;
  LinkSpec nvlink{Bandwidth::from_gbps(450), SimTime::from_ns(250)};  // GPU <-> NVSwitch
  LinkSpec nic{Bandwidth::from_gbps(50), SimTime::from_ns(1000)};     // GPU <-> rail leaf
  LinkSpec uplink{Bandwidth::from_gbps(50), SimTime::from_ns(1000)};  // leaf <-> spine
  double oversubscription = 1;  // as in make_clos2; 1 = full bisection
  uint32_t nics = 1;            // NICs per GPU, one plane of rail leaves and spines each
};
Expected<GraphSpec> make_rail_optimized(const RailParams& params);

Expected<GraphSpec> make_torus(const std::vector<uint32_t>& sizes, LinkSpec link);

struct DragonflyParams {
  uint32_t groups = 9;
  uint32_t routers_per_group = 4;
  uint32_t npus_per_router = 2;
  uint32_t global_per_router = 2;  // h: global ports per router; routers x h >= groups - 1
  LinkSpec npu_link;
  LinkSpec local;
  LinkSpec global;
};
Expected<GraphSpec> make_dragonfly(const DragonflyParams& params);

// Every NPU of `base` (a graph whose NPUs do not forward) becomes a node of `gpus` GPUs joined by
// an NVSwitch with `nvlink` links; the logical layout gains an innermost Switch dimension of size
// `gpus`. Link tiers of `base` move up by one (tier 0 is now inside the node).
Expected<GraphSpec> with_nodes(const GraphSpec& base, uint32_t gpus, LinkSpec nvlink);

}  // namespace orrery::net
