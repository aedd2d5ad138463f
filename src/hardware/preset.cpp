#include "hardware/preset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <tuple>

#include <fmt/format.h>

#include "core/text_file.h"
#include "hardware/embedded_presets.h"
#include "network/yaml_text.h"
#include "system/nccl_model.h"

namespace orrery::hw {

namespace {

using net::yaml_line;

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// Reads checked values out of one YAML file; every error is "FILE:LINE: key 'a.b': ...".
class Reader {
 public:
  explicit Reader(std::string_view file) : file_(file) {}

  Error fail(const YAML::Node& at, std::string_view key, const std::string& what) const {
    return Error::make(ErrorKind::kConfig, "{}:{}: key '{}': {}", file_, yaml_line(at), key, what);
  }

  // `map` must be a mapping whose keys are all in `allowed`.
  Status keys(const YAML::Node& map, std::string_view where,
              std::initializer_list<std::string_view> allowed) const {
    if (!map.IsMap()) {
      return Error::make(ErrorKind::kConfig, "{}:{}: {}: expected a mapping of keys", file_,
                         yaml_line(map),
                         where.empty() ? "the file" : fmt::format("key '{}'", where));
    }
    for (const auto& entry : map) {
      const std::string key = entry.first.as<std::string>();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        std::string list;
        for (std::string_view name : allowed)
          list += (list.empty() ? "" : ", ") + std::string(name);
        return fail(entry.first, path(where, key), fmt::format("unknown key (expected {})", list));
      }
    }
    return Status::ok();
  }

  Expected<YAML::Node> child(const YAML::Node& map, std::string_view where,
                             std::string_view key) const {
    const YAML::Node node = map[std::string(key)];
    if (!node) return fail(map, path(where, key), "missing");
    return node;
  }

  Expected<double> number(const YAML::Node& map, std::string_view where, std::string_view key,
                          double min, double max, bool required = true, double fallback = 0) const {
    const YAML::Node node = map[std::string(key)];
    if (!node) {
      if (!required) return fallback;
      return fail(map, path(where, key), "missing");
    }
    double value = 0;
    if (!node.IsScalar() || !YAML::convert<double>::decode(node, value) || !std::isfinite(value)) {
      return fail(node, path(where, key), "expected a number");
    }
    if (value < min || value > max) {
      return fail(node, path(where, key),
                  fmt::format("{} is out of range (expected {} to {})", value, min, max));
    }
    return value;
  }

  Expected<uint32_t> whole(const YAML::Node& map, std::string_view where, std::string_view key,
                           uint32_t min, uint32_t max, bool required = true,
                           uint32_t fallback = 0) const {
    const YAML::Node node = map[std::string(key)];
    if (!node) {
      if (!required) return fallback;
      return fail(map, path(where, key), "missing");
    }
    int64_t value = 0;
    if (!node.IsScalar() || !YAML::convert<int64_t>::decode(node, value)) {
      return fail(node, path(where, key), "expected a whole number");
    }
    if (value < min || value > max) {
      return fail(node, path(where, key),
                  fmt::format("{} is out of range (expected {} to {})", value, min, max));
    }
    return static_cast<uint32_t>(value);
  }

  Expected<std::string> text(const YAML::Node& map, std::string_view where, std::string_view key,
                             bool required = true) const {
    const YAML::Node node = map[std::string(key)];
    if (!node) {
      if (!required) return std::string();
      return fail(map, path(where, key), "missing");
    }
    if (!node.IsScalar()) return fail(node, path(where, key), "expected text");
    return node.as<std::string>();
  }

  Expected<bool> flag(const YAML::Node& map, std::string_view where, std::string_view key) const {
    const YAML::Node node = map[std::string(key)];
    if (!node) return fail(map, path(where, key), "missing");
    bool value = false;
    if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) {
      return fail(node, path(where, key), "expected true or false");
    }
    return value;
  }

  // A list of three numbers (LL, LL128, Simple) into `out`, when present.
  Status triple(const YAML::Node& map, std::string_view where, std::string_view key, double min,
                double max, double (&out)[3]) const {
    const YAML::Node node = map[std::string(key)];
    if (!node) return Status::ok();
    if (!node.IsSequence() || node.size() != 3) {
      return fail(node, path(where, key), "expected 3 numbers [LL, LL128, Simple]");
    }
    for (size_t idx = 0; idx < 3; ++idx) {
      double value = 0;
      if (!node[idx].IsScalar() || !YAML::convert<double>::decode(node[idx], value) ||
          !std::isfinite(value) || value < min || value > max) {
        return fail(node[idx], path(where, key),
                    fmt::format("entry {}: expected a number from {} to {}", idx + 1, min, max));
      }
      out[idx] = value;
    }
    return Status::ok();
  }

  static std::string path(std::string_view where, std::string_view key) {
    return where.empty() ? std::string(key) : fmt::format("{}.{}", where, key);
  }

 private:
  std::string file_;
};

// Assigns the value of an Expected to `target`, or returns its error.
#define ORRERY_CAT2(a, b) a##b
#define ORRERY_CAT(a, b) ORRERY_CAT2(a, b)
#define ORRERY_TRY(target, expr)                                                    \
  auto ORRERY_CAT(result_, __LINE__) = (expr);                                      \
  if (!ORRERY_CAT(result_, __LINE__)) return ORRERY_CAT(result_, __LINE__).error(); \
  target = std::move(*ORRERY_CAT(result_, __LINE__))

Status read_nccl(const Reader& in, const YAML::Node& map, sys::NcclTuning& out) {
  constexpr std::string_view w = "nccl";
  if (Status s = in.keys(map, w,
                         {"launch_us", "channels", "ring_efficiency", "ll_fraction",
                          "ll128_channel_gbps", "ll128_net_fraction", "nvlink_hop_us", "net_hop_us",
                          "nvls_efficiency", "nvls_latency_us", "nvls_channels", "nvls_chunk_bytes",
                          "nvls_chunk_us", "nvls_fill_chunks", "algo", "proto"});
      !s) {
    return s;
  }
  // Every key is optional: what a file leaves out keeps sys::NcclTuning's default.
  ORRERY_TRY(out.launch_us, in.number(map, w, "launch_us", 0, 1e6, false, out.launch_us));
  ORRERY_TRY(out.channels, in.whole(map, w, "channels", 1, 64, false, out.channels));
  ORRERY_TRY(out.ring_efficiency,
             in.number(map, w, "ring_efficiency", 0.01, 1, false, out.ring_efficiency));
  ORRERY_TRY(out.ll_fraction, in.number(map, w, "ll_fraction", 0, 1, false, out.ll_fraction));
  ORRERY_TRY(out.ll128_channel_gbps,
             in.number(map, w, "ll128_channel_gbps", 0.001, 1e6, false, out.ll128_channel_gbps));
  ORRERY_TRY(out.ll128_net_fraction,
             in.number(map, w, "ll128_net_fraction", 0, 1, false, out.ll128_net_fraction));
  if (Status s = in.triple(map, w, "nvlink_hop_us", 0, 1e6, out.nvlink_hop_us); !s) return s;
  if (Status s = in.triple(map, w, "net_hop_us", 0, 1e6, out.net_hop_us); !s) return s;
  ORRERY_TRY(out.nvls_efficiency,
             in.number(map, w, "nvls_efficiency", 0.01, 1, false, out.nvls_efficiency));
  ORRERY_TRY(out.nvls_latency_us,
             in.number(map, w, "nvls_latency_us", 0, 1e6, false, out.nvls_latency_us));
  ORRERY_TRY(out.nvls_channels, in.whole(map, w, "nvls_channels", 1, 64, false, out.nvls_channels));
  ORRERY_TRY(out.nvls_chunk_bytes,
             in.whole(map, w, "nvls_chunk_bytes", 4096, 1u << 26, false, out.nvls_chunk_bytes));
  ORRERY_TRY(out.nvls_chunk_us,
             in.number(map, w, "nvls_chunk_us", 0, 1e3, false, out.nvls_chunk_us));
  ORRERY_TRY(out.nvls_fill_chunks,
             in.number(map, w, "nvls_fill_chunks", 0, 1e3, false, out.nvls_fill_chunks));
  // NCCL_ALGO and NCCL_PROTO, in their syntax (a machine whose NCCL runs with them set).
  for (const auto& [key, parse, target] :
       {std::tuple{"algo", &sys::parse_nccl_algorithms, &out.algorithms},
        std::tuple{"proto", &sys::parse_nccl_protocols, &out.protocols}}) {
    ORRERY_TRY(const std::string list, in.text(map, w, key, false));
    if (list.empty()) continue;
    Expected<uint8_t> bits = parse(list);
    if (!bits) return in.fail(map[key], Reader::path(w, key), bits.error().message());
    *target = *bits;
  }
  return Status::ok();
}

Status read_compute(const Reader& in, const YAML::Node& map, sys::ComputeModel& out) {
  constexpr std::string_view w = "compute";
  if (Status s = in.keys(map, w,
                         {"gemm_efficiency", "gemm_k_half", "sms", "tile_m", "tile_n",
                          "memory_efficiency", "launch_us", "comm_sms"});
      !s) {
    return s;
  }
  // Every key is optional: what a file leaves out keeps sys::ComputeModel's default.
  ORRERY_TRY(out.gemm_efficiency,
             in.number(map, w, "gemm_efficiency", 0.01, 1, false, out.gemm_efficiency));
  ORRERY_TRY(out.gemm_k_half, in.number(map, w, "gemm_k_half", 0, 1e6, false, out.gemm_k_half));
  ORRERY_TRY(out.sms, in.whole(map, w, "sms", 1, 100000, false, out.sms));
  ORRERY_TRY(out.tile_m, in.whole(map, w, "tile_m", 0, 4096, false, out.tile_m));
  ORRERY_TRY(out.tile_n, in.whole(map, w, "tile_n", 0, 4096, false, out.tile_n));
  if ((out.tile_m == 0) != (out.tile_n == 0)) {
    return in.fail(map, "compute.tile_m",
                   "tile_m and tile_n are both 0 (no tile model) or neither");
  }
  ORRERY_TRY(out.memory_efficiency,
             in.number(map, w, "memory_efficiency", 0.01, 1, false, out.memory_efficiency));
  ORRERY_TRY(out.launch_us, in.number(map, w, "launch_us", 0, 1e6, false, out.launch_us));
  ORRERY_TRY(out.comm_sms, in.whole(map, w, "comm_sms", 0, 100000, false, out.comm_sms));
  if (out.comm_sms >= out.sms) {
    return in.fail(map["comm_sms"], "compute.comm_sms",
                   fmt::format("{} SMs held while communicating leave none of the {} to compute",
                               out.comm_sms, out.sms));
  }
  return Status::ok();
}

const EmbeddedFile* embedded(std::string_view name) {
  for (size_t idx = 0; idx < kEmbeddedPresetCount; ++idx) {
    if (kEmbeddedPresets[idx].name == name) return &kEmbeddedPresets[idx];
  }
  return nullptr;
}

Expected<std::vector<NicKind>> nic_kinds() {
  const EmbeddedFile* file = embedded("nics.yaml");
  if (file == nullptr) return Error::make(ErrorKind::kConfig, "nics.yaml is not built in");
  const std::string name = "builtin:nics.yaml";
  Expected<YAML::Node> root = net::parse_yaml_text(file->text, name);
  if (!root) return root.error();
  Reader in(name);
  if (!root->IsMap()) return Error::make(ErrorKind::kConfig, "{}: expected a mapping", name);
  std::vector<NicKind> out;
  for (const auto& entry : *root) {
    NicKind nic;
    nic.name = entry.first.as<std::string>();
    const YAML::Node& map = entry.second;
    if (Status s =
            in.keys(map, nic.name,
                    {"description", "count", "gbps", "transport", "efficiency", "latency_us"});
        !s) {
      return s.error();
    }
    ORRERY_TRY(nic.description, in.text(map, nic.name, "description"));
    ORRERY_TRY(nic.count, in.whole(map, nic.name, "count", 1, 1024));
    ORRERY_TRY(nic.gbit, in.number(map, nic.name, "gbps", 0.001, 1e6));
    ORRERY_TRY(nic.transport, in.text(map, nic.name, "transport"));
    ORRERY_TRY(nic.efficiency, in.number(map, nic.name, "efficiency", 0.01, 1));
    ORRERY_TRY(nic.latency_us, in.number(map, nic.name, "latency_us", 0, 1e6));
    out.push_back(std::move(nic));
  }
  return out;
}

// A decimal GB/s (10^9 bytes per second) as the network's bandwidth (2^30 bytes per second).
net::Bandwidth network_bandwidth(double gbps) {
  const double nano = gbps * 1e9 / 1073741824.0 * 1e9;
  return net::Bandwidth::from_nano_gbps(static_cast<uint64_t>(std::llround(nano)));
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (size_t idx = 0; idx < kEmbeddedPresetCount; ++idx) {
    std::string_view name = kEmbeddedPresets[idx].name;
    if (name == "nics.yaml" || !name.ends_with(".yaml")) continue;
    names.emplace_back(name.substr(0, name.size() - 5));
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> nic_kind_names() {
  std::vector<std::string> names;
  Expected<std::vector<NicKind>> kinds = nic_kinds();
  if (kinds) {
    for (const NicKind& kind : *kinds) names.push_back(kind.name);
  }
  return names;
}

Expected<NicKind> nic_kind(std::string_view name) {
  Expected<std::vector<NicKind>> kinds = nic_kinds();
  if (!kinds) return kinds.error();
  for (const NicKind& kind : *kinds) {
    if (kind.name == name) return kind;
  }
  return Error::make(ErrorKind::kConfig, "unknown NIC kind '{}' (expected one of {})", name,
                     joined(nic_kind_names()));
}

Expected<HardwarePreset> parse_preset(std::string_view text, std::string_view file_name) {
  Expected<YAML::Node> parsed = net::parse_yaml_text(text, file_name);
  if (!parsed) return parsed.error();
  const YAML::Node root = *parsed;
  Reader in(file_name);
  if (Status s = in.keys(root, "",
                         {"name", "description", "gpu", "node", "fabric", "collective_algorithm",
                          "nccl", "compute"});
      !s) {
    return s.error();
  }
  HardwarePreset p;
  p.source = std::string(file_name);
  ORRERY_TRY(p.name, in.text(root, "", "name"));
  ORRERY_TRY(p.description, in.text(root, "", "description"));
  ORRERY_TRY(p.fabric, in.text(root, "", "fabric"));

  YAML::Node gpu;
  ORRERY_TRY(gpu, in.child(root, "", "gpu"));
  if (Status s = in.keys(gpu, "gpu", {"model", "peak_tflops", "hbm_gbps", "memory_gib"}); !s) {
    return s.error();
  }
  ORRERY_TRY(p.gpu_model, in.text(gpu, "gpu", "model"));
  ORRERY_TRY(p.peak_tflops, in.number(gpu, "gpu", "peak_tflops", 0.001, 1e7));
  ORRERY_TRY(p.hbm_gbps, in.number(gpu, "gpu", "hbm_gbps", 0.001, 1e7));
  ORRERY_TRY(p.memory_gib, in.number(gpu, "gpu", "memory_gib", 0.001, 1e7));

  YAML::Node node;
  ORRERY_TRY(node, in.child(root, "", "node"));
  if (Status s = in.keys(node, "node", {"gpus", "nvlink", "nvswitch", "nic"}); !s) {
    return s.error();
  }
  ORRERY_TRY(p.gpus_per_node, in.whole(node, "node", "gpus", 1, 1024));
  YAML::Node nvlink;
  ORRERY_TRY(nvlink, in.child(node, "node", "nvlink"));
  if (Status s = in.keys(nvlink, "node.nvlink", {"generation", "links_per_gpu", "gbps"}); !s) {
    return s.error();
  }
  ORRERY_TRY(p.nvlink_generation, in.whole(nvlink, "node.nvlink", "generation", 1, 100));
  ORRERY_TRY(p.nvlink_links, in.whole(nvlink, "node.nvlink", "links_per_gpu", 1, 1024));
  ORRERY_TRY(p.nvlink_gbps, in.number(nvlink, "node.nvlink", "gbps", 0.001, 1e7));
  YAML::Node nvswitch;
  ORRERY_TRY(nvswitch, in.child(node, "node", "nvswitch"));
  if (Status s = in.keys(nvswitch, "node.nvswitch", {"model", "count", "nvls"}); !s) {
    return s.error();
  }
  ORRERY_TRY(p.nvswitch_model, in.text(nvswitch, "node.nvswitch", "model"));
  ORRERY_TRY(p.nvswitch_count, in.whole(nvswitch, "node.nvswitch", "count", 0, 1024));
  ORRERY_TRY(p.nvls, in.flag(nvswitch, "node.nvswitch", "nvls"));
  ORRERY_TRY(p.default_nic, in.text(node, "node", "nic"));
  if (Expected<NicKind> nic = nic_kind(p.default_nic); !nic) {
    return in.fail(node["nic"], "node.nic", nic.error().message());
  }

  std::string algorithm;
  ORRERY_TRY(algorithm, in.text(root, "", "collective_algorithm", false));
  if (!algorithm.empty()) {
    Expected<sys::Algorithm> parsed_algorithm = sys::parse_algorithm(algorithm);
    if (!parsed_algorithm) {
      return in.fail(root["collective_algorithm"], "collective_algorithm",
                     parsed_algorithm.error().message());
    }
    p.collective_algorithm = algorithm;
  }
  if (const YAML::Node nccl = root["nccl"]; nccl) {
    if (Status s = read_nccl(in, nccl, p.nccl); !s) return s.error();
  }
  p.nccl.nvls = p.nvls;
  // NCCL tunes by GPU generation; NVLink's generation names it (2 Volta, 3 Ampere, 4 Hopper, 5
  // Blackwell; later ones take Blackwell's figures).
  constexpr sys::NcclArch kByNvlink[] = {sys::NcclArch::kVolta, sys::NcclArch::kAmpere,
                                         sys::NcclArch::kHopper, sys::NcclArch::kBlackwell};
  p.nccl.arch = p.nvlink_generation < 2 ? sys::NcclArch::kUnknown
                                        : kByNvlink[std::min<uint32_t>(p.nvlink_generation, 5) - 2];
  if (const YAML::Node compute = root["compute"]; compute) {
    if (Status s = read_compute(in, compute, p.compute); !s) return s.error();
  }
  p.compute.peak_tflops = p.peak_tflops;
  p.compute.hbm_gbps = p.hbm_gbps;
  return p;
}

Expected<HardwarePreset> load_preset(std::string_view name_or_file) {
  const std::string name(name_or_file);
  if (const EmbeddedFile* file = embedded(name + ".yaml"); file != nullptr && name != "nics") {
    return parse_preset(file->text, fmt::format("builtin:{}.yaml", name));
  }
  std::error_code error;
  if (!std::filesystem::is_regular_file(name, error)) {
    return Error::make(ErrorKind::kIo,
                       "--hardware {}: neither a preset ({}) nor a readable preset file", name,
                       joined(preset_names()));
  }
  Expected<std::string> text = read_text_file(name);
  if (!text) return text.error();
  return parse_preset(*text, name);
}

Expected<Hardware> build_hardware(const HardwarePreset& preset, uint32_t nodes,
                                  std::string_view nic_name, uint32_t gpus_per_node) {
  if (nodes < 1 || nodes > 65536) {
    return Error::make(ErrorKind::kInvalidArgument, "--nodes {}: expected 1 to 65536", nodes);
  }
  uint32_t gpus = preset.gpus_per_node;
  if (gpus_per_node != 0) {
    if (gpus_per_node > preset.gpus_per_node || (nodes > 1 && gpus_per_node != gpus)) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "{}: {} GPUs per node: a node of {} has {} GPUs (fewer only on one node)",
                         preset.source, gpus_per_node, preset.name, preset.gpus_per_node);
    }
    gpus = gpus_per_node;
  }
  if (gpus * nodes < 2) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "{}: {} GPU in all: a collective needs at least 2", preset.source,
                       gpus * nodes);
  }
  if (gpus == 1 && nodes > 1) {
    // The nccl model reads a node off the network's first dimension (NVLink).
    return Error::make(
        ErrorKind::kInvalidArgument,
        "{}: one GPU per node across {} nodes: presets model nodes of 2 GPUs or more",
        preset.source, nodes);
  }
  Hardware hw;
  hw.preset = preset;
  hw.nodes = nodes;
  hw.gpus_per_node = gpus;
  Expected<NicKind> nic = nic_kind(nic_name.empty() ? preset.default_nic : nic_name);
  if (!nic) return nic.error().with_context("--nic");
  hw.nic = *nic;

  std::vector<net::Dimension> dims;
  if (gpus > 1) {
    dims.push_back(
        {net::TopologyKind::kSwitch, gpus, network_bandwidth(preset.nvlink_gbps), SimTime()});
  }
  if (nodes > 1) {
    dims.push_back({net::TopologyKind::kSwitch, nodes, network_bandwidth(hw.nic.node_gbps() / gpus),
                    SimTime()});
  }
  Expected<net::Topology> topology = net::Topology::create(std::move(dims));
  if (!topology) return topology.error().with_context(preset.source);
  hw.network = std::make_shared<const net::NetworkDescription>(
      net::NetworkDescription{std::move(*topology), nullptr, {}});

  auto config = std::make_shared<sys::SystemConfig>();
  sys::SystemConfig& system = *config;
  system.path = preset.source;
  Expected<sys::Algorithm> algorithm = sys::parse_algorithm(preset.collective_algorithm);
  if (!algorithm) return algorithm.error().with_context(preset.source);
  const size_t dim_count = hw.network->logical.dimension_count();
  system.all_reduce.assign(dim_count, *algorithm);
  system.all_gather.assign(dim_count, *algorithm);
  system.reduce_scatter.assign(dim_count, *algorithm);
  system.all_to_all.assign(dim_count, algorithm->kind == sys::AlgorithmKind::kInSwitch
                                          ? sys::Algorithm{sys::AlgorithmKind::kDirect, 0}
                                          : *algorithm);
  system.local_mem_bw_gbps = preset.hbm_gbps;
  system.roofline_enabled = true;
  system.peak_perf_tflops = preset.peak_tflops;
  system.nccl = preset.nccl;
  system.compute = preset.compute;
  system.nccl.net_efficiency = hw.nic.efficiency;
  for (double& hop : system.nccl.net_hop_us) hop += hw.nic.latency_us;
  // With one GPU per node NCCL's ranks meet only through the NICs: no NVLink to use.
  if (gpus == 1) system.nccl.nvls = false;
  hw.system = std::move(config);
  hw.description = nodes == 1 ? fmt::format("{} ({} GPUs)", preset.name, gpus)
                              : fmt::format("{} x {} nodes, {}", preset.name, nodes, hw.nic.name);
  return hw;
}

}  // namespace orrery::hw
