#include "network/generators.h"

#include <cmath>

namespace orrery::net {

namespace {

Error bad(const std::string& message) { return Error(ErrorKind::kInvalidArgument, message); }

// A cable: two directed links, `a` -> `b` first.
void cable(GraphSpec& spec, NodeId a, NodeId b, LinkSpec link, uint32_t tier) {
  spec.links.push_back({a, b, link.bandwidth, link.latency, tier});
  spec.links.push_back({b, a, link.bandwidth, link.latency, tier});
}

NodeId add_switch(GraphSpec& spec, std::string name) {
  spec.switch_names.push_back(std::move(name));
  return spec.npus + static_cast<NodeId>(spec.switch_names.size() - 1);
}

// The uplink bandwidth that makes (down_ports x down) / (up_ports x up) = ratio.
Expected<Bandwidth> oversubscribed(uint32_t down_ports, Bandwidth down, uint32_t up_ports,
                                   double ratio, const char* what) {
  if (!(ratio > 0) || !std::isfinite(ratio)) {
    return bad(fmt::format("{}: oversubscription must be a positive ratio", what));
  }
  const double nano = static_cast<double>(down_ports) * static_cast<double>(down.nano_gbps()) /
                      (static_cast<double>(up_ports) * ratio);
  if (nano < 1 || nano > 1e18) return bad(fmt::format("{}: oversubscription out of range", what));
  return Bandwidth::from_nano_gbps(static_cast<uint64_t>(std::llround(nano)));
}

Status check_link(const LinkSpec& link, const char* what) {
  if (link.bandwidth.nano_gbps() == 0)
    return bad(fmt::format("{}: bandwidth must be positive", what));
  if (link.latency < SimTime::zero()) return bad(fmt::format("{}: latency must be >= 0", what));
  return {};
}

// Graphs hold every node and link (a 4.8 M-NPU torus took 1.4 s and 540 MB to build, 21 s under
// the sanitizers): a million NPUs is where the graph backends stop being the tool; larger
// networks are ASTRA-sim dimension files, computed rather than stored, up to 2^24 ranks.
constexpr uint32_t kMaxNpus = 1u << 20;

}  // namespace

Expected<GraphSpec> make_fat_tree(uint32_t k, LinkSpec link) {
  // k^3 / 4 hosts: k = 160 is the largest within kMaxNpus.
  if (k < 2 || k % 2 != 0 || k > 160) {
    return bad(fmt::format("fat-tree: k = {}; expected an even number from 2 to 160", k));
  }
  if (Status s = check_link(link, "fat-tree link"); !s) return s.error();
  const uint32_t half = k / 2;
  GraphSpec spec;
  spec.name = fmt::format("fat-tree-k{}", k);
  spec.npus = k * half * half;
  std::vector<NodeId> edge(k * half), agg(k * half), core(half * half);
  for (uint32_t p = 0; p < k; ++p) {
    for (uint32_t e = 0; e < half; ++e)
      edge[p * half + e] = add_switch(spec, fmt::format("edge{}_{}", p, e));
  }
  for (uint32_t p = 0; p < k; ++p) {
    for (uint32_t a = 0; a < half; ++a)
      agg[p * half + a] = add_switch(spec, fmt::format("agg{}_{}", p, a));
  }
  for (uint32_t c = 0; c < half * half; ++c) core[c] = add_switch(spec, fmt::format("core{}", c));
  for (uint32_t npu = 0; npu < spec.npus; ++npu) cable(spec, npu, edge[npu / half], link, 0);
  for (uint32_t p = 0; p < k; ++p) {
    for (uint32_t e = 0; e < half; ++e) {
      for (uint32_t a = 0; a < half; ++a)
        cable(spec, edge[p * half + e], agg[p * half + a], link, 1);
    }
    // Aggregation switch a of every pod links to cores a*half .. a*half + half - 1.
    for (uint32_t a = 0; a < half; ++a) {
      for (uint32_t c = 0; c < half; ++c)
        cable(spec, agg[p * half + a], core[a * half + c], link, 2);
    }
  }
  if (k >= 4) {
    spec.logical = {
        {TopologyKind::kSwitch, half}, {TopologyKind::kSwitch, half}, {TopologyKind::kSwitch, k}};
  } else {
    spec.logical = {{TopologyKind::kSwitch, k}};  // k = 2: one NPU per edge switch
  }
  return spec;
}

Expected<GraphSpec> make_clos2(const ClosParams& p) {
  if (p.leaves < 1 || p.npus_per_leaf < 1 || p.spines < 1) {
    return bad("clos2: leaves, npus-per-leaf and spines must be at least 1");
  }
  if (uint64_t{p.leaves} * p.npus_per_leaf > kMaxNpus || p.leaves * p.npus_per_leaf < 2) {
    return bad("clos2: leaves x npus-per-leaf must be from 2 to 2^20");
  }
  if (Status s = check_link(p.npu_link, "clos2 npu link"); !s) return s.error();
  LinkSpec up = p.uplink;
  if (p.oversubscription != 0) {
    Expected<Bandwidth> bw = oversubscribed(p.npus_per_leaf, p.npu_link.bandwidth, p.spines,
                                            p.oversubscription, "clos2");
    if (!bw) return bw.error();
    up.bandwidth = *bw;
  }
  if (Status s = check_link(up, "clos2 uplink"); !s) return s.error();
  if (p.nics < 1 || p.nics > 64) return bad("clos2: nics must be from 1 to 64");
  GraphSpec spec;
  spec.name = fmt::format("clos2-{}x{}-{}spines", p.leaves, p.npus_per_leaf, p.spines);
  if (p.nics > 1) spec.name += fmt::format("-{}planes", p.nics);
  spec.npus = p.leaves * p.npus_per_leaf;
  // Plane 0 keeps the single-plane names; further planes are suffixed.
  auto plane_name = [&](std::string_view kind, uint32_t index, uint32_t plane) {
    return plane == 0 ? fmt::format("{}{}", kind, index)
                      : fmt::format("{}{}_p{}", kind, index, plane);
  };
  const NodeId first = spec.npus;
  const uint32_t per_plane = p.leaves + p.spines;
  for (uint32_t plane = 0; plane < p.nics; ++plane) {
    for (uint32_t l = 0; l < p.leaves; ++l) (void)add_switch(spec, plane_name("leaf", l, plane));
    for (uint32_t s = 0; s < p.spines; ++s) (void)add_switch(spec, plane_name("spine", s, plane));
  }
  for (uint32_t plane = 0; plane < p.nics; ++plane) {
    const NodeId leaf0 = first + plane * per_plane;
    for (uint32_t npu = 0; npu < spec.npus; ++npu) {
      cable(spec, npu, leaf0 + npu / p.npus_per_leaf, p.npu_link, 0);
    }
    for (uint32_t l = 0; l < p.leaves; ++l) {
      for (uint32_t s = 0; s < p.spines; ++s) cable(spec, leaf0 + l, leaf0 + p.leaves + s, up, 1);
    }
  }
  spec.logical.clear();
  if (p.npus_per_leaf >= 2) spec.logical.push_back({TopologyKind::kSwitch, p.npus_per_leaf});
  if (p.leaves >= 2) spec.logical.push_back({TopologyKind::kSwitch, p.leaves});
  return spec;
}

Expected<GraphSpec> make_clos3(const Clos3Params& p) {
  if (p.pods < 2 || p.leaves_per_pod < 1 || p.npus_per_leaf < 1 || p.spines_per_pod < 1 ||
      p.cores < 1) {
    return bad("clos3: pods must be at least 2; leaves, npus, spines and cores at least 1");
  }
  if (p.cores % p.spines_per_pod != 0) {
    return bad(fmt::format("clos3: cores ({}) must be a multiple of spines-per-pod ({})", p.cores,
                           p.spines_per_pod));
  }
  if (uint64_t{p.pods} * p.leaves_per_pod * p.npus_per_leaf > kMaxNpus) {
    return bad("clos3: more than 2^20 NPUs");
  }
  if (Status s = check_link(p.npu_link, "clos3 npu link"); !s) return s.error();
  LinkSpec leaf_spine = p.leaf_spine;
  LinkSpec spine_core = p.spine_core;
  const uint32_t per_spine = p.cores / p.spines_per_pod;
  if (p.oversubscription != 0) {
    Expected<Bandwidth> bw = oversubscribed(p.npus_per_leaf, p.npu_link.bandwidth, p.spines_per_pod,
                                            p.oversubscription, "clos3");
    if (!bw) return bw.error();
    leaf_spine.bandwidth = *bw;
    Expected<Bandwidth> core_bw = oversubscribed(p.leaves_per_pod, leaf_spine.bandwidth, per_spine,
                                                 p.oversubscription, "clos3");
    if (!core_bw) return core_bw.error();
    spine_core.bandwidth = *core_bw;
  }
  if (Status s = check_link(leaf_spine, "clos3 leaf-spine link"); !s) return s.error();
  if (Status s = check_link(spine_core, "clos3 spine-core link"); !s) return s.error();
  GraphSpec spec;
  spec.name = fmt::format("clos3-{}pods", p.pods);
  const uint32_t leaves = p.pods * p.leaves_per_pod;
  spec.npus = leaves * p.npus_per_leaf;
  for (uint32_t l = 0; l < leaves; ++l) {
    (void)add_switch(spec, fmt::format("leaf{}_{}", l / p.leaves_per_pod, l % p.leaves_per_pod));
  }
  const NodeId spine0 = spec.npus + leaves;
  for (uint32_t s = 0; s < p.pods * p.spines_per_pod; ++s) {
    (void)add_switch(spec, fmt::format("spine{}_{}", s / p.spines_per_pod, s % p.spines_per_pod));
  }
  const NodeId core0 = spine0 + p.pods * p.spines_per_pod;
  for (uint32_t c = 0; c < p.cores; ++c) (void)add_switch(spec, fmt::format("core{}", c));
  for (uint32_t npu = 0; npu < spec.npus; ++npu) {
    cable(spec, npu, spec.npus + npu / p.npus_per_leaf, p.npu_link, 0);
  }
  for (uint32_t pod = 0; pod < p.pods; ++pod) {
    for (uint32_t l = 0; l < p.leaves_per_pod; ++l) {
      for (uint32_t s = 0; s < p.spines_per_pod; ++s) {
        cable(spec, spec.npus + pod * p.leaves_per_pod + l, spine0 + pod * p.spines_per_pod + s,
              leaf_spine, 1);
      }
    }
    for (uint32_t s = 0; s < p.spines_per_pod; ++s) {
      for (uint32_t c = 0; c < per_spine; ++c) {
        cable(spec, spine0 + pod * p.spines_per_pod + s, core0 + s * per_spine + c, spine_core, 2);
      }
    }
  }
  spec.logical.clear();
  if (p.npus_per_leaf >= 2) spec.logical.push_back({TopologyKind::kSwitch, p.npus_per_leaf});
  if (p.leaves_per_pod >= 2) spec.logical.push_back({TopologyKind::kSwitch, p.leaves_per_pod});
  spec.logical.push_back({TopologyKind::kSwitch, p.pods});
  return spec;
}

Expected<GraphSpec> make_rail_optimized(const RailParams& p) {
  if (p.nodes < 2 || p.gpus_per_node < 1 || p.nodes_per_leaf < 1) {
    return bad("rail: nodes must be at least 2, gpus-per-node and nodes-per-leaf at least 1");
  }
  if (p.nodes % p.nodes_per_leaf != 0) {
    return bad(fmt::format("rail: nodes ({}) must be a multiple of nodes-per-leaf ({})", p.nodes,
                           p.nodes_per_leaf));
  }
  if (uint64_t{p.nodes} * p.gpus_per_node > kMaxNpus) return bad("rail: more than 2^20 GPUs");
  const uint32_t leaves_per_rail = p.nodes / p.nodes_per_leaf;
  const uint32_t leaves = leaves_per_rail * p.gpus_per_node;
  if (leaves > 1 && p.spines < 1) {
    return bad("rail: spines must be at least 1 (traffic between rails crosses the spines)");
  }
  if (Status s = check_link(p.nvlink, "rail nvlink"); !s) return s.error();
  if (Status s = check_link(p.nic, "rail nic"); !s) return s.error();
  LinkSpec up = p.uplink;
  if (p.oversubscription != 0 && leaves > 1) {
    Expected<Bandwidth> bw =
        oversubscribed(p.nodes_per_leaf, p.nic.bandwidth, p.spines, p.oversubscription, "rail");
    if (!bw) return bw.error();
    up.bandwidth = *bw;
  }
  if (Status s = check_link(up, "rail uplink"); !s) return s.error();
  if (p.nics < 1 || p.nics > 64) return bad("rail: nics must be from 1 to 64");
  GraphSpec spec;
  spec.name = fmt::format("rail-{}x{}", p.nodes, p.gpus_per_node);
  if (p.nics > 1) spec.name += fmt::format("-{}planes", p.nics);
  spec.npus = p.nodes * p.gpus_per_node;
  spec.npus_per_node = p.gpus_per_node;
  const bool nvswitch = p.gpus_per_node > 1;
  const NodeId nv0 = spec.npus;
  if (nvswitch) {
    for (uint32_t n = 0; n < p.nodes; ++n) (void)add_switch(spec, fmt::format("nvswitch{}", n));
  }
  // Plane 0 keeps the single-plane names; further planes are suffixed.
  auto suffix = [](uint32_t plane) {
    return plane == 0 ? std::string() : fmt::format("_p{}", plane);
  };
  std::vector<NodeId> leaf0(p.nics);
  std::vector<NodeId> spine0(p.nics);
  for (uint32_t plane = 0; plane < p.nics; ++plane) {
    leaf0[plane] = spec.npus + static_cast<NodeId>(spec.switch_names.size());
    for (uint32_t rail = 0; rail < p.gpus_per_node; ++rail) {
      for (uint32_t l = 0; l < leaves_per_rail; ++l) {
        (void)add_switch(spec, fmt::format("rail{}_leaf{}{}", rail, l, suffix(plane)));
      }
    }
    spine0[plane] = spec.npus + static_cast<NodeId>(spec.switch_names.size());
    if (leaves > 1) {
      for (uint32_t s = 0; s < p.spines; ++s) {
        (void)add_switch(spec, fmt::format("spine{}{}", s, suffix(plane)));
      }
    }
  }
  for (uint32_t node = 0; node < p.nodes; ++node) {
    for (uint32_t g = 0; g < p.gpus_per_node; ++g) {
      const NodeId gpu = node * p.gpus_per_node + g;
      if (nvswitch) cable(spec, gpu, nv0 + node, p.nvlink, 0);
      for (uint32_t plane = 0; plane < p.nics; ++plane) {
        cable(spec, gpu, leaf0[plane] + g * leaves_per_rail + node / p.nodes_per_leaf, p.nic, 1);
      }
    }
  }
  if (leaves > 1) {
    for (uint32_t plane = 0; plane < p.nics; ++plane) {
      for (uint32_t l = 0; l < leaves; ++l) {
        for (uint32_t s = 0; s < p.spines; ++s) {
          cable(spec, leaf0[plane] + l, spine0[plane] + s, up, 2);
        }
      }
    }
  }
  spec.logical.clear();
  if (p.gpus_per_node >= 2) spec.logical.push_back({TopologyKind::kSwitch, p.gpus_per_node});
  spec.logical.push_back({TopologyKind::kSwitch, p.nodes});
  return spec;
}

Expected<GraphSpec> make_torus(const std::vector<uint32_t>& sizes, LinkSpec link) {
  if (sizes.size() < 1 || sizes.size() > 3) {
    return bad(fmt::format("torus: {} dimensions; expected 1, 2 or 3", sizes.size()));
  }
  uint64_t npus = 1;
  for (uint32_t size : sizes) {
    if (size < 2)
      return bad(fmt::format("torus: dimension of size {}; each needs at least 2", size));
    npus *= size;
    if (npus > kMaxNpus) return bad("torus: more than 2^20 NPUs");
  }
  if (Status s = check_link(link, "torus link"); !s) return s.error();
  GraphSpec spec;
  std::string shape;
  for (uint32_t size : sizes) shape += (shape.empty() ? "" : "x") + std::to_string(size);
  spec.name = "torus-" + shape;
  spec.npus = static_cast<uint32_t>(npus);
  spec.routing = Routing::kDimensionOrder;
  spec.torus = sizes;
  spec.npu_forwarding = true;
  uint32_t stride = 1;
  for (uint32_t d = 0; d < sizes.size(); ++d) {
    const uint32_t size = sizes[d];
    for (uint32_t npu = 0; npu < spec.npus; ++npu) {
      const uint32_t coord = (npu / stride) % size;
      // One cable to the +1 neighbour; a dimension of 2 has a single cable per pair.
      if (size == 2 && coord == 1) continue;
      cable(spec, npu, npu - coord * stride + ((coord + 1) % size) * stride, link, d);
    }
    spec.logical.push_back({TopologyKind::kRing, size});
    stride *= size;
  }
  return spec;
}

Expected<GraphSpec> make_dragonfly(const DragonflyParams& p) {
  if (p.groups < 2 || p.routers_per_group < 1 || p.npus_per_router < 1 || p.global_per_router < 1) {
    return bad("dragonfly: groups must be at least 2; routers, npus and global ports at least 1");
  }
  if (uint64_t{p.routers_per_group} * p.global_per_router < p.groups - 1) {
    return bad(
        fmt::format("dragonfly: routers-per-group x global-per-router ({}) must be at least "
                    "groups - 1 ({}) for one global link between every pair of groups",
                    p.routers_per_group * p.global_per_router, p.groups - 1));
  }
  const uint64_t npus = uint64_t{p.groups} * p.routers_per_group * p.npus_per_router;
  if (npus > kMaxNpus || npus < 2) return bad("dragonfly: from 2 to 2^20 NPUs");
  GraphSpec spec;
  spec.name =
      fmt::format("dragonfly-g{}-a{}-p{}", p.groups, p.routers_per_group, p.npus_per_router);
  spec.npus = static_cast<uint32_t>(npus);
  const uint32_t routers = p.groups * p.routers_per_group;
  for (uint32_t r = 0; r < routers; ++r) {
    (void)add_switch(spec,
                     fmt::format("router{}_{}", r / p.routers_per_group, r % p.routers_per_group));
  }
  const NodeId r0 = spec.npus;
  for (uint32_t npu = 0; npu < spec.npus; ++npu)
    cable(spec, npu, r0 + npu / p.npus_per_router, p.npu_link, 0);
  for (uint32_t g = 0; g < p.groups; ++g) {
    for (uint32_t a = 0; a < p.routers_per_group; ++a) {
      for (uint32_t b = a + 1; b < p.routers_per_group; ++b) {
        cable(spec, r0 + g * p.routers_per_group + a, r0 + g * p.routers_per_group + b, p.local, 1);
      }
    }
  }
  for (uint32_t i = 0; i < p.groups; ++i) {
    for (uint32_t j = i + 1; j < p.groups; ++j) {
      const uint32_t port_i = j - i - 1;               // ports 0 .. groups-2 of group i
      const uint32_t port_j = p.groups - 1 - (j - i);  // group j's port towards i
      cable(spec, r0 + i * p.routers_per_group + port_i / p.global_per_router,
            r0 + j * p.routers_per_group + port_j / p.global_per_router, p.global, 2);
    }
  }
  spec.logical.clear();
  if (p.npus_per_router >= 2) spec.logical.push_back({TopologyKind::kSwitch, p.npus_per_router});
  if (p.routers_per_group >= 2)
    spec.logical.push_back({TopologyKind::kSwitch, p.routers_per_group});
  spec.logical.push_back({TopologyKind::kSwitch, p.groups});
  return spec;
}

Expected<GraphSpec> with_nodes(const GraphSpec& base, uint32_t gpus, LinkSpec nvlink) {
  if (gpus < 2) return bad(fmt::format("node: {} GPUs; expected at least 2", gpus));
  if (base.npu_forwarding || base.routing != Routing::kEcmp) {
    return bad("node: HGX nodes need a switched network (not a torus or NPU-forwarding graph)");
  }
  if (uint64_t{base.npus} * gpus > kMaxNpus) return bad("node: more than 2^20 GPUs");
  if (Status s = check_link(nvlink, "node nvlink"); !s) return s.error();
  GraphSpec spec;
  spec.name = fmt::format("{}-hgx{}", base.name, gpus);
  spec.npus = base.npus * gpus;
  spec.npus_per_node = gpus;
  // Switches: the base's, then one NVSwitch per node.
  spec.switch_names = base.switch_names;
  const NodeId old_switch0 = base.npus;
  const NodeId new_switch0 = spec.npus;
  auto remap = [&](NodeId node, uint32_t g) {
    return node < old_switch0 ? node * gpus + g : node - old_switch0 + new_switch0;
  };
  for (uint32_t n = 0; n < base.npus; ++n)
    spec.switch_names.push_back(fmt::format("nvswitch{}", n));
  const NodeId nv0 = new_switch0 + static_cast<NodeId>(base.switch_names.size());
  for (uint32_t n = 0; n < base.npus; ++n) {
    for (uint32_t g = 0; g < gpus; ++g) cable(spec, n * gpus + g, nv0 + n, nvlink, 0);
  }
  for (const GraphLink& link : base.links) {
    const bool npu_end = link.src < old_switch0 || link.dst < old_switch0;
    for (uint32_t g = 0; g < (npu_end ? gpus : 1u); ++g) {
      GraphLink copy = link;
      copy.src = remap(link.src, g);
      copy.dst = remap(link.dst, g);
      copy.dimension = link.dimension + 1;
      spec.links.push_back(copy);
    }
  }
  spec.logical.push_back({TopologyKind::kSwitch, gpus});
  for (const LogicalDimension& dim : base.logical) spec.logical.push_back(dim);
  if (base.logical.empty()) spec.logical.push_back({TopologyKind::kSwitch, base.npus});
  return spec;
}

}  // namespace orrery::net
