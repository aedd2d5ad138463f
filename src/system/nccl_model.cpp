#include "system/nccl_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

namespace orrery::sys {

namespace {

// NCCL's public tuning constants (us), by protocol LL, LL128, Simple: the base latency of a ring
// and of a tree, and the latency of one step over NVLink and over the network (a tree's step
// latencies are its own). These drive the choice only (see the header); what the machine takes is
// NcclTuning's. Learnt from NCCL's src/graph/tuning.cc of the releases named, not copied.
struct NcclConstants {
  double ring_base[3];
  double tree_base[3];
  double nvlink_hop[3];
  double net_hop[3];
  double tree_nvlink_hop[3];
  double tree_net_hop[3];
  // NVLS's latency within a node; 0: the tuning's (the releases before 2.18 had other NVLS
  // constants, which changed much, so presets fitted it).
  double nvls_latency;
  // LL's bus bandwidth: half of Simple's up to this cap (NCCL's llMaxBw, from 2.21), by node
  // count 1, 2, more (across nodes the CPU's row; Intel's here); 0: a quarter of Simple's (a
  // third within a node for ops that do not reduce), as before.
  double ll_max_bw[3];
};
// Up to NCCL 2.17 (tree Simple's step is that of a 256 KiB chunk).
constexpr NcclConstants kNccl2_17 = {{3.6, 10.0, 8.4},
                                     {4.4, 4.4, 8.4},
                                     {0.47, 1.9, 3.4},
                                     {2.7, 4.0, 9.6},
                                     {0.52, 1.25, 28},
                                     {5.0, 8.5, 28},
                                     0,
                                     {0, 0, 0}};
// NCCL 2.25 on, the releases that run Blackwell: LL128's base latency up from 10 to 14 us, the
// ring's LL base from 3.6 to 6.6, NVLS's latency 25 us in a node, LL at half of Simple's.
constexpr NcclConstants kNccl2_25 = {{6.6, 14.0, 8.4},
                                     {6.8, 14.0, 8.4},
                                     {0.6, 1.9, 3.4},
                                     {2.7, 4.0, 14.0},
                                     {0.6, 1.25, 4.0},
                                     {5.0, 8.5, 14.0},
                                     25.0,
                                     {282.0, 39.0, 20.4}};
// The constants NCCL's choice uses for a tuning: 2.25's for Blackwell, which no earlier release
// runs; the older ones otherwise (the presets of earlier GPUs were fitted under them, and their
// measurements do not say which release ran).
const NcclConstants& choice_constants(const NcclTuning& tuning) {
  return tuning.arch == NcclArch::kBlackwell ? kNccl2_25 : kNccl2_17;
}

// Per-channel bandwidth caps (GB/s): ring LL128 (one figure), tree LL128 and tree (all protocols)
// by node count (1, 2, more).
struct ChannelCaps {
  double ring_ll128;
  double tree_ll128[3];
  double tree[3];
};
constexpr double kNoCap = 1e30;
// NCCL's, by GPU generation (NcclArch, from Volta), which its choice assumes whatever the machine
// achieves.
constexpr ChannelCaps kNcclCaps[] = {
    {20.0, {20.0, 20.0, 20.0}, {26.5, 18.5, 10.0}},   // Volta
    {20.0, {20.0, 20.0, 20.0}, {24.0, 23.6, 17.8}},   // Ampere
    {36.7, {36.7, 36.7, 29.0}, {38.7, 41.4, 36.0}},   // Hopper
    {40.0, {55.6, 31.67, 20.0}, {70.0, 42.8, 24.0}},  // Blackwell
};

// The caps a computation uses: NCCL's for the choice where the generation is known; else (the
// time, or no generation) the machine's LL128 rate and no tree caps.
ChannelCaps channel_caps(const NcclTuning& tuning, bool choice) {
  if (choice && tuning.arch != NcclArch::kUnknown) {
    return kNcclCaps[static_cast<size_t>(tuning.arch) - static_cast<size_t>(NcclArch::kVolta)];
  }
  return {tuning.ll128_channel_gbps, {kNoCap, kNoCap, kNoCap}, {kNoCap, kNoCap, kNoCap}};
}
// NCCL's bandwidth rules: LL moves 4 data bytes per 8-byte store and more flag traffic across
// nodes; LL128 carries 120 data bytes per 128-byte line; a tree pipelines at 90% of a ring.
constexpr double kLL128Derate = 0.92;
constexpr double kTreeDerate = 0.9;
constexpr double kTreeLLDerate = 1.0 / 3.8;
constexpr double kTreeLL128Derate = 0.915;

struct Steps {
  double total;  // steps of one ring pass
  double inter;  // of which cross a node boundary
};

Steps ring_steps(NcclOp op, uint32_t ranks, uint32_t nodes) {
  const double n = ranks;
  const double m = nodes;
  switch (op) {
    case NcclOp::kAllReduce:
      return {2 * (n - 1), 2 * (m - 1)};
    case NcclOp::kAllGather:
    case NcclOp::kReduceScatter:
    case NcclOp::kAllToAll:
      return {n - 1, m - 1};
    case NcclOp::kBroadcast:
    case NcclOp::kReduce:
      return {n - 1, m - 1};
  }
  return {n - 1, m - 1};
}

// One evaluation of the formula, for the choice (NCCL's constants) or the time (the machine's).
struct Latencies {
  double launch;
  const double* ring_base;
  const double* tree_base;
  const double* nvlink_hop;
  const double* net_hop;
  const double* tree_nvlink_hop;
  const double* tree_net_hop;
  double nvls;
};

// The channels NCCL runs: a node's rings over NVLink (the tuning's channels); across nodes, where
// the generation is known, one ring per NIC rail, doubled where a rail carries 25 GB/s or more
// (NCCL duplicates channels on fast links only: an HDR rail, 25 GB/s of line rate and about 23.5
// achieved, is not doubled; an NDR one is). Without a generation, the tuning's channels.
double nccl_channels(const NcclFabric& fabric, const NcclTuning& tuning) {
  if (fabric.nodes <= 1 || tuning.arch == NcclArch::kUnknown) return tuning.channels;
  const double rails = std::max(1u, fabric.ranks / fabric.nodes);
  return fabric.net_gbps * tuning.net_efficiency / rails >= 25.0 ? 2 * rails : rails;
}

struct Bandwidths {
  double ring[3];  // bus bandwidth per protocol, GB/s
  double tree[3];  // algorithm bandwidth per protocol
  double nvls;     // algorithm bandwidth, 0 when not available
  double nvls_tree;
  // The time: NVLS filling each channel's pipeline before its first chunk completes (the choice:
  // 0, as NCCL's prediction knows no chunks).
  double nvls_fill_us;
  double direct;      // all-to-all: a rank's NVLink
  double direct_net;  // all-to-all: a rank's share of its node's NICs
};

// The chunk NCCL moves NVLS buffers in: its largest chunk, halved in steps for buffers too small
// to pass through every channel and head (GPU) of the node that many times (NCCL's enqueue rules;
// NVLS-tree has its own steps and, from four nodes, a 64 KiB cap).
double nvls_chunk(uint64_t bytes, uint32_t heads, uint32_t nodes, const NcclTuning& tuning) {
  const double size = static_cast<double>(bytes);
  const double ops = static_cast<double>(tuning.nvls_channels) * heads;
  double chunk = tuning.nvls_chunk_bytes;
  auto step = [&](double passes, double below) {
    if (size < passes * ops * chunk && chunk > below) chunk = below;
  };
  if (nodes <= 1) {
    step(64, 65536);
    step(8, 32768);
    step(2, 16384);
  } else {
    if (nodes >= 4) chunk = std::min(chunk, 65536.0);
    step(32, 262144);
    step(16, 131072);
    step(4, 65536);
    step(1, 32768);
  }
  return chunk;
}

// The time one NVLS channel takes per chunk of `chunk` bytes: the chunk at the channel's share of
// `peak` (GB/s), and `nvls_chunk_us` waiting for the switch. The chunked bandwidth and the
// pipeline's fill both follow from it.
double nvls_chunk_time_us(double peak, double chunk, const NcclTuning& tuning) {
  const double per_channel = peak * 1e3 / std::max(tuning.nvls_channels, 1u);  // bytes per us
  return chunk / per_channel + tuning.nvls_chunk_us;
}

Bandwidths bandwidths(NcclOp op, uint64_t bytes, const NcclFabric& fabric, const NcclTuning& tuning,
                      bool choice) {
  Bandwidths bw{};
  const bool multi = fabric.nodes > 1;
  const double net = fabric.net_gbps * tuning.net_efficiency;
  double simple = fabric.nvlink_gbps * tuning.ring_efficiency;
  // A ring enters and leaves every node once per channel: across nodes it is capped by the NICs of
  // a node together.
  if (multi) simple = std::min(simple, net);
  const size_t node_class = fabric.nodes <= 1 ? 0 : fabric.nodes == 2 ? 1 : 2;
  const bool quarter = multi || op == NcclOp::kAllReduce || op == NcclOp::kReduce;
  // NCCL's rule for the choice; what LL achieves, when the tuning says, for the time.
  const double nccl_ll = quarter ? 0.25 : 1.0 / 3.0;
  const double ll = !choice && tuning.ll_fraction > 0 ? tuning.ll_fraction : nccl_ll;
  // From NCCL 2.21 the choice takes LL at half of Simple's up to a cap (the ring's bus bandwidth;
  // the tree's, halved, below).
  const NcclConstants& nccl = choice_constants(tuning);
  const double ll_cap = choice ? nccl.ll_max_bw[node_class] : 0;
  bw.ring[0] = ll_cap > 0 ? std::min(simple * 0.5, ll_cap) : simple * ll;
  // The choice caps LL128 and the tree per channel as NCCL does for the GPU generation; the time
  // caps LL128 at what the machine's channels achieve.
  const ChannelCaps caps = channel_caps(tuning, choice);
  const double channels = nccl_channels(fabric, tuning);
  // Across nodes LL128's lines go through the network proxy, and what they achieve there is the
  // machine's (the tuning's share of Simple's, where a preset measured it), not NCCL's 120/128.
  const bool net_ll128 = multi && !choice && tuning.ll128_net_fraction > 0;
  bw.ring[1] = std::min(simple * (net_ll128 ? tuning.ll128_net_fraction : kLL128Derate),
                        caps.ring_ll128 * channels);
  bw.ring[2] = simple;
  // A tree's algorithm bandwidth is half its bus bandwidth (every byte goes up and comes down).
  const double tree = 0.5 * std::min(kTreeDerate * simple, caps.tree[node_class] * channels);
  bw.tree[0] = tree * kTreeLLDerate;
  if (ll_cap > 0) bw.tree[0] = std::min(bw.tree[0], 0.5 * ll_cap);
  bw.tree[1] = std::min(tree * (net_ll128 ? tuning.ll128_net_fraction : kTreeLL128Derate),
                        0.5 * caps.tree_ll128[node_class] * channels);
  bw.tree[2] = tree;
  // All-to-all: every rank's traffic to other nodes leaves through its share of the NICs.
  const uint32_t per_node = fabric.ranks / std::max(fabric.nodes, 1u);
  if (tuning.nvls) {
    // NCCL's prediction knows no chunks: the choice sees the peak, the time the chunked rate and
    // the pipeline's fill.
    const double peak = fabric.nvlink_gbps * tuning.nvls_efficiency;
    bw.nvls = peak;
    if (!choice) {
      const double chunk = nvls_chunk(bytes, per_node, fabric.nodes, tuning);
      const double chunk_us = nvls_chunk_time_us(peak, chunk, tuning);
      bw.nvls = chunk * std::max(tuning.nvls_channels, 1u) / (chunk_us * 1e3);
      bw.nvls_fill_us = tuning.nvls_fill_chunks * chunk_us;
    }
    // Across nodes every node sends and receives the whole buffer through its NICs once.
    bw.nvls_tree = multi ? std::min(bw.nvls, net) : 0;
  }
  bw.direct = fabric.nvlink_gbps * tuning.ring_efficiency;
  bw.direct_net = net / std::max(per_node, 1u);
  return bw;
}

void add_candidates(NcclOp op, uint64_t bytes, const NcclFabric& fabric, const NcclTuning& tuning,
                    const Latencies& lat, bool predicted, std::vector<NcclEstimate>& out) {
  const Bandwidths bw = bandwidths(op, bytes, fabric, tuning, predicted);
  const uint32_t n = fabric.ranks;
  const uint32_t nodes = std::max(fabric.nodes, 1u);
  const bool multi = nodes > 1;
  const double size = static_cast<double>(bytes);
  const double factor = nccl_bus_factor(op, n);
  size_t slot = 0;
  auto put = [&](NcclAlgorithm algorithm, NcclProtocol protocol, double latency, double busbw,
                 double data_time) {
    const double time = latency + data_time;
    if (predicted) {
      NcclEstimate estimate;
      estimate.algorithm = algorithm;
      estimate.protocol = protocol;
      estimate.predicted_us = time;
      out.push_back(estimate);
    } else {
      out[slot].time_us = time;
      out[slot].busbw_gbps = busbw;
    }
    ++slot;
  };
  // size / (GB/s) in us: bytes / (gbps * 1e3).
  auto us = [](double data, double gbps) { return gbps > 0 ? data / (gbps * 1e3) : 1e30; };

  if (op == NcclOp::kAllToAll) {
    // Grouped sends and receives to every peer at once: one step of latency; the shares for the
    // node's other GPUs cross NVLink while those for other nodes leave through the rank's NICs.
    const double per_node = static_cast<double>(n / nodes);
    const double intra = size * (per_node - 1) / n;
    const double inter = size * (n - per_node) / n;
    const double data_time = std::max(us(intra, bw.direct), multi ? us(inter, bw.direct_net) : 0.0);
    put(NcclAlgorithm::kDirect, NcclProtocol::kSimple,
        lat.launch + lat.ring_base[2] + (multi ? lat.net_hop[2] : lat.nvlink_hop[2]),
        data_time > 0 ? size * factor / (data_time * 1e3) : 0, data_time);
    return;
  }
  const Steps steps = ring_steps(op, n, nodes);
  for (int p = 0; p < 3; ++p) {
    // LL's per-step latency grows across nodes (its flags cross PCIe twice).
    const double intra = lat.nvlink_hop[p] * (multi && p == 0 ? 1.8 : 1.0);
    const double latency = lat.launch + lat.ring_base[p] + (steps.total - steps.inter) * intra +
                           steps.inter * lat.net_hop[p];
    put(NcclAlgorithm::kRing, static_cast<NcclProtocol>(p), latency, bw.ring[p],
        us(size * factor, bw.ring[p]));
  }
  if (op == NcclOp::kAllReduce && multi) {
    const double per_node = static_cast<double>(n / nodes);
    const double depth = std::log2(static_cast<double>(nodes));
    for (int p = 0; p < 3; ++p) {
      const double latency =
          lat.launch + lat.tree_base[p] +
          2 * ((per_node - 1) * lat.tree_nvlink_hop[p] + depth * lat.tree_net_hop[p]);
      put(NcclAlgorithm::kTree, static_cast<NcclProtocol>(p), latency, bw.tree[p] * factor,
          us(size, bw.tree[p]));
    }
  }
  if (op == NcclOp::kAllReduce && tuning.nvls) {
    const double fill = bw.nvls_fill_us;
    if (!multi) {
      put(NcclAlgorithm::kNvls, NcclProtocol::kSimple, lat.launch + lat.nvls + fill,
          bw.nvls * factor, us(size, bw.nvls));
    } else {
      const double depth = std::log2(static_cast<double>(nodes));
      put(NcclAlgorithm::kNvlsTree, NcclProtocol::kSimple,
          lat.launch + lat.nvls + fill + 2 * depth * lat.net_hop[2], bw.nvls_tree * factor,
          us(size, bw.nvls_tree));
    }
  }
}

// NCCL_ALGO / NCCL_PROTO's list syntax: names separated by commas, any case, or "^" and the
// names left out. `bit_of` maps a lower-case name to its bit, or an error message.
template <typename BitOf>
Expected<uint8_t> parse_allowed(std::string_view list, std::string_view what, BitOf&& bit_of) {
  std::string text;
  for (char c : list) {
    if (!std::isspace(static_cast<unsigned char>(c)))
      text += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  const bool exclude = !text.empty() && text.front() == '^';
  if (exclude) text.erase(0, 1);
  if (text.empty()) {
    return Error::make(ErrorKind::kInvalidArgument, "{} '{}': no names", what, list);
  }
  uint8_t named = 0;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, end - start);
    if (name.empty()) {
      return Error::make(ErrorKind::kInvalidArgument, "{} '{}': an empty name", what, list);
    }
    Expected<uint8_t> bit = bit_of(name);
    if (!bit) return bit.error().with_context(fmt::format("{} '{}'", what, list));
    named |= *bit;
    start = end + 1;
  }
  return exclude ? static_cast<uint8_t>(~named) : named;
}

uint8_t bit(NcclAlgorithm algorithm) {
  return static_cast<uint8_t>(1u << static_cast<int>(algorithm));
}
uint8_t bit(NcclProtocol protocol) {
  return static_cast<uint8_t>(1u << static_cast<int>(protocol));
}

template <typename Enum>
std::string names_in(uint8_t bits, std::initializer_list<Enum> all,
                     std::string_view (*name)(Enum)) {
  std::string out;
  for (Enum value : all) {
    if (bits & bit(value)) out += (out.empty() ? "" : ",") + std::string(name(value));
  }
  return out.empty() ? "none" : out;
}

}  // namespace

Expected<uint8_t> parse_nccl_algorithms(std::string_view list) {
  return parse_allowed(list, "NCCL_ALGO", [](const std::string& name) -> Expected<uint8_t> {
    if (name == "ring") return bit(NcclAlgorithm::kRing);
    if (name == "tree") return bit(NcclAlgorithm::kTree);
    if (name == "nvls") return bit(NcclAlgorithm::kNvls);
    if (name == "nvlstree" || name == "nvls-tree") return bit(NcclAlgorithm::kNvlsTree);
    if (name == "collnet" || name == "collnetdirect" || name == "collnetchain" || name == "pat") {
      return Error::make(ErrorKind::kInvalidArgument,
                         "'{}' is NCCL's but not modelled (ring, tree, nvls, nvlstree are)", name);
    }
    return Error::make(ErrorKind::kInvalidArgument,
                       "unknown algorithm '{}' (expected ring, tree, nvls or nvlstree)", name);
  });
}

Expected<uint8_t> parse_nccl_protocols(std::string_view list) {
  return parse_allowed(list, "NCCL_PROTO", [](const std::string& name) -> Expected<uint8_t> {
    if (name == "ll") return bit(NcclProtocol::kLL);
    if (name == "ll128") return bit(NcclProtocol::kLL128);
    if (name == "simple") return bit(NcclProtocol::kSimple);
    return Error::make(ErrorKind::kInvalidArgument,
                       "unknown protocol '{}' (expected LL, LL128 or Simple)", name);
  });
}

std::string nccl_allowed_text(const NcclTuning& tuning) {
  return fmt::format(
      "NCCL_ALGO={} NCCL_PROTO={}",
      names_in(tuning.algorithms,
               {NcclAlgorithm::kRing, NcclAlgorithm::kTree, NcclAlgorithm::kNvls,
                NcclAlgorithm::kNvlsTree},
               nccl_algorithm_name),
      names_in(tuning.protocols, {NcclProtocol::kLL, NcclProtocol::kLL128, NcclProtocol::kSimple},
               nccl_protocol_name));
}

bool uses_nccl(const SystemConfig& system) {
  for (const std::vector<Algorithm>* list :
       {&system.all_reduce, &system.all_gather, &system.reduce_scatter, &system.all_to_all}) {
    for (const Algorithm& algorithm : *list) {
      if (algorithm.kind == AlgorithmKind::kNccl) return true;
    }
  }
  return false;
}

Status restrict_nccl(SystemConfig& system, std::string_view algo, std::string_view proto) {
  if (algo.empty() && proto.empty()) return Status::ok();
  const std::string_view flag = algo.empty() ? "--nccl-proto" : "--nccl-algo";
  if (!uses_nccl(system)) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "{}: no collective of the system {} runs the nccl algorithm", flag,
                       system.path.empty() ? std::string("given") : system.path);
  }
  if (!algo.empty()) {
    Expected<uint8_t> bits = parse_nccl_algorithms(algo);
    if (!bits) return bits.error().with_context("--nccl-algo");
    system.nccl.algorithms = *bits;
  }
  if (!proto.empty()) {
    Expected<uint8_t> bits = parse_nccl_protocols(proto);
    if (!bits) return bits.error().with_context("--nccl-proto");
    system.nccl.protocols = *bits;
  }
  return Status::ok();
}

std::string_view nccl_algorithm_name(NcclAlgorithm algorithm) {
  switch (algorithm) {
    case NcclAlgorithm::kRing:
      return "ring";
    case NcclAlgorithm::kTree:
      return "tree";
    case NcclAlgorithm::kNvls:
      return "nvls";
    case NcclAlgorithm::kNvlsTree:
      return "nvls-tree";
    case NcclAlgorithm::kDirect:
      return "direct";
  }
  return "unknown";
}

std::string_view nccl_protocol_name(NcclProtocol protocol) {
  switch (protocol) {
    case NcclProtocol::kLL:
      return "LL";
    case NcclProtocol::kLL128:
      return "LL128";
    case NcclProtocol::kSimple:
      return "Simple";
  }
  return "unknown";
}

double nccl_bus_factor(NcclOp op, uint32_t ranks) {
  const double n = std::max(ranks, 1u);
  switch (op) {
    case NcclOp::kAllReduce:
      return 2 * (n - 1) / n;
    case NcclOp::kAllGather:
    case NcclOp::kReduceScatter:
    case NcclOp::kAllToAll:
      return (n - 1) / n;
    case NcclOp::kBroadcast:
    case NcclOp::kReduce:
      return 1.0;
  }
  return 1.0;
}

std::vector<NcclEstimate> nccl_candidates(NcclOp op, uint64_t bytes, const NcclFabric& fabric,
                                          const NcclTuning& tuning) {
  std::vector<NcclEstimate> out;
  if (fabric.ranks <= 1) return out;
  const NcclConstants& nccl = choice_constants(tuning);
  const Latencies choice{0.0,
                         nccl.ring_base,
                         nccl.tree_base,
                         nccl.nvlink_hop,
                         nccl.net_hop,
                         nccl.tree_nvlink_hop,
                         nccl.tree_net_hop,
                         nccl.nvls_latency > 0 ? nccl.nvls_latency : tuning.nvls_latency_us};
  // The machine has no base latencies of its own: the older constants' (the presets' step
  // latencies were fitted with them), whatever release the choice follows.
  const Latencies machine{tuning.launch_us,     kNccl2_17.ring_base,   kNccl2_17.tree_base,
                          tuning.nvlink_hop_us, tuning.net_hop_us,     tuning.nvlink_hop_us,
                          tuning.net_hop_us,    tuning.nvls_latency_us};
  add_candidates(op, bytes, fabric, tuning, choice, true, out);
  add_candidates(op, bytes, fabric, tuning, machine, false, out);
  return out;
}

NcclEstimate nccl_estimate(NcclOp op, uint64_t bytes, const NcclFabric& fabric,
                           const NcclTuning& tuning) {
  const std::vector<NcclEstimate> all = nccl_candidates(op, bytes, fabric, tuning);
  if (all.empty()) return {};
  const bool restricted = op != NcclOp::kAllToAll;  // grouped sends and receives
  std::optional<size_t> best;
  for (size_t idx = 0; idx < all.size(); ++idx) {
    if (restricted && (!(tuning.algorithms & bit(all[idx].algorithm)) ||
                       !(tuning.protocols & bit(all[idx].protocol)))) {
      continue;
    }
    if (!best || all[idx].predicted_us < all[*best].predicted_us) best = idx;
  }
  if (!best) {
    NcclEstimate none;
    none.available = false;
    return none;
  }
  return all[*best];
}

}  // namespace orrery::sys
