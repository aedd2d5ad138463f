#include "network/graph_yaml.h"

#include <charconv>
#include <cmath>
#include <map>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "core/checked.h"
#include "core/text_file.h"
#include "network/topology_yaml.h"
#include "network/yaml_text.h"

namespace orrery::net {

namespace {

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// A finite non-negative decimal; false when `text` is not one.
bool parse_number(std::string_view text, double& out) {
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  if (text.empty()) return false;
  const std::string copy(text);
  char* end = nullptr;
  out = std::strtod(copy.c_str(), &end);
  return end == copy.c_str() + copy.size() && std::isfinite(out) && out >= 0;
}

struct ParamDef {
  std::string_view key;
  std::string_view fallback;
  std::string_view help;
};

const std::map<std::string_view, std::vector<ParamDef>>& generator_table() {
  static const std::map<std::string_view, std::vector<ParamDef>> table = {
      {"fat-tree",
       {{"k", "4", "switch radix (even): k pods, k^3/4 NPUs"},
        {"bandwidth", "25", "every link"},
        {"latency", "500ns", "every link"}}},
      {"clos2",
       {{"leaves", "8", "leaf switches"},
        {"npus_per_leaf", "16", "NPUs under each leaf"},
        {"spines", "8", "spine switches; every leaf links to every spine"},
        {"npu_bandwidth", "200Gbps", "NPU-leaf links"},
        {"npu_latency", "5us", "NPU-leaf links"},
        {"uplink_bandwidth", "200Gbps", "leaf-spine links (ignored when oversubscription > 0)"},
        {"uplink_latency", "12.5us", "leaf-spine links"},
        {"oversubscription", "0", "ratio of leaf down to up capacity; 0 = use uplink_bandwidth"},
        {"nics", "1", "NICs per NPU, each to a plane of its own leaves and spines"}}},
      {"clos3",
       {{"pods", "4", "pods"},
        {"leaves_per_pod", "4", "leaves per pod"},
        {"npus_per_leaf", "8", "NPUs per leaf"},
        {"spines_per_pod", "4", "spines per pod"},
        {"cores", "4", "core switches (a multiple of spines_per_pod)"},
        {"npu_bandwidth", "25", "NPU-leaf links"},
        {"npu_latency", "500ns", "NPU-leaf links"},
        {"leaf_spine_bandwidth", "25", "leaf-spine links"},
        {"leaf_spine_latency", "500ns", "leaf-spine links"},
        {"spine_core_bandwidth", "25", "spine-core links"},
        {"spine_core_latency", "500ns", "spine-core links"},
        {"oversubscription", "0", "ratio at both upper tiers; 0 = use the bandwidths"}}},
      {"rail",
       {{"nodes", "128", "HGX-like nodes"},
        {"gpus_per_node", "8", "GPUs per node on one NVSwitch; also the number of rails"},
        {"nodes_per_leaf", "32", "nodes sharing a rail leaf"},
        {"spines", "16", "spines; every leaf links to every spine"},
        {"nvlink_bandwidth", "450", "GPU-NVSwitch links"},
        {"nvlink_latency", "250ns", "GPU-NVSwitch links"},
        {"nic_bandwidth", "50", "GPU-leaf links"},
        {"nic_latency", "1us", "GPU-leaf links"},
        {"uplink_bandwidth", "50", "leaf-spine links (ignored when oversubscription > 0)"},
        {"uplink_latency", "1us", "leaf-spine links"},
        {"oversubscription", "1", "leaf down/up capacity ratio; 0 = use uplink_bandwidth"},
        {"nics", "1", "NICs per GPU, each to a plane of its own rail leaves and spines"}}},
      {"torus",
       {{"dims", "4x4", "sizes, 2-D or 3-D, e.g. 4x4x4"},
        {"bandwidth", "25", "every link"},
        {"latency", "500ns", "every link"}}},
      {"dragonfly",
       {{"groups", "9", "groups"},
        {"routers_per_group", "4", "fully connected routers per group"},
        {"npus_per_router", "2", "NPUs per router"},
        {"global_per_router", "2", "global ports per router"},
        {"npu_bandwidth", "25", "NPU-router links"},
        {"npu_latency", "500ns", "NPU-router links"},
        {"local_bandwidth", "25", "router-router links in a group"},
        {"local_latency", "500ns", "local links"},
        {"global_bandwidth", "25", "links between groups"},
        {"global_latency", "1us", "global links"}}},
  };
  return table;
}

const std::vector<ParamDef> kNodeParams = {
    {"node_gpus", "0", "0: none; else every NPU becomes an HGX-like node of this many GPUs"},
    {"nvlink_bandwidth", "450", "GPU-NVSwitch links of those nodes"},
    {"nvlink_latency", "250ns", "GPU-NVSwitch links of those nodes"}};

class Params {
 public:
  Params(std::string_view generator, std::map<std::string, std::string> values)
      : generator_(generator), values_(std::move(values)) {}

  std::string text(std::string_view key) const { return values_.at(std::string(key)); }
  Expected<uint32_t> count(std::string_view key) const {
    const std::string value = text(key);
    uint32_t out = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
    if (ec != std::errc() || end != value.data() + value.size()) {
      return fail(key, value, "a whole number");
    }
    return out;
  }
  Expected<double> ratio(std::string_view key) const {
    double out = 0;
    if (!parse_number(text(key), out)) return fail(key, text(key), "a number, 0 or more");
    return out;
  }
  Expected<Bandwidth> bandwidth(std::string_view key) const {
    Expected<Bandwidth> out = parse_bandwidth_text(text(key));
    if (!out) return fail(key, text(key), out.error().message());
    return out;
  }
  Expected<SimTime> latency(std::string_view key) const {
    Expected<SimTime> out = parse_latency_text(text(key));
    if (!out) return fail(key, text(key), out.error().message());
    return out;
  }
  Expected<LinkSpec> link(std::string_view prefix) const {
    Expected<Bandwidth> bw = bandwidth(std::string(prefix) + "_bandwidth");
    if (!bw) return bw.error();
    Expected<SimTime> lat = latency(std::string(prefix) + "_latency");
    if (!lat) return lat.error();
    return LinkSpec{*bw, *lat};
  }

 private:
  Error fail(std::string_view key, const std::string& value, const std::string& expected) const {
    return Error::make(ErrorKind::kInvalidArgument,
                       "generator {}: parameter '{}' = '{}': expected {}", generator_, key, value,
                       expected);
  }
  std::string_view generator_;
  std::map<std::string, std::string> values_;
};

#define ORRERY_TRY(var, expr)                     \
  auto var##_result = (expr);                     \
  if (!var##_result) return var##_result.error(); \
  const auto var = *var##_result

Expected<GraphSpec> build(std::string_view generator, const Params& p) {
  if (generator == "fat-tree") {
    ORRERY_TRY(k, p.count("k"));
    ORRERY_TRY(bw, p.bandwidth("bandwidth"));
    ORRERY_TRY(lat, p.latency("latency"));
    return make_fat_tree(k, {bw, lat});
  }
  if (generator == "clos2") {
    ClosParams c;
    ORRERY_TRY(leaves, p.count("leaves"));
    ORRERY_TRY(per_leaf, p.count("npus_per_leaf"));
    ORRERY_TRY(spines, p.count("spines"));
    ORRERY_TRY(npu, p.link("npu"));
    ORRERY_TRY(up, p.link("uplink"));
    ORRERY_TRY(ratio, p.ratio("oversubscription"));
    ORRERY_TRY(nics, p.count("nics"));
    c.leaves = leaves;
    c.npus_per_leaf = per_leaf;
    c.spines = spines;
    c.npu_link = npu;
    c.uplink = up;
    c.oversubscription = ratio;
    c.nics = nics;
    return make_clos2(c);
  }
  if (generator == "clos3") {
    Clos3Params c;
    ORRERY_TRY(pods, p.count("pods"));
    ORRERY_TRY(leaves, p.count("leaves_per_pod"));
    ORRERY_TRY(per_leaf, p.count("npus_per_leaf"));
    ORRERY_TRY(spines, p.count("spines_per_pod"));
    ORRERY_TRY(cores, p.count("cores"));
    ORRERY_TRY(npu, p.link("npu"));
    ORRERY_TRY(leaf_spine, p.link("leaf_spine"));
    ORRERY_TRY(spine_core, p.link("spine_core"));
    ORRERY_TRY(ratio, p.ratio("oversubscription"));
    c.pods = pods;
    c.leaves_per_pod = leaves;
    c.npus_per_leaf = per_leaf;
    c.spines_per_pod = spines;
    c.cores = cores;
    c.npu_link = npu;
    c.leaf_spine = leaf_spine;
    c.spine_core = spine_core;
    c.oversubscription = ratio;
    return make_clos3(c);
  }
  if (generator == "rail") {
    RailParams r;
    ORRERY_TRY(nodes, p.count("nodes"));
    ORRERY_TRY(gpus, p.count("gpus_per_node"));
    ORRERY_TRY(per_leaf, p.count("nodes_per_leaf"));
    ORRERY_TRY(spines, p.count("spines"));
    ORRERY_TRY(nvlink, p.link("nvlink"));
    ORRERY_TRY(nic, p.link("nic"));
    ORRERY_TRY(up, p.link("uplink"));
    ORRERY_TRY(ratio, p.ratio("oversubscription"));
    ORRERY_TRY(nics, p.count("nics"));
    r.nics = nics;
    r.nodes = nodes;
    r.gpus_per_node = gpus;
    r.nodes_per_leaf = per_leaf;
    r.spines = spines;
    r.nvlink = nvlink;
    r.nic = nic;
    r.uplink = up;
    r.oversubscription = ratio;
    return make_rail_optimized(r);
  }
  if (generator == "torus") {
    std::vector<uint32_t> sizes;
    const std::string dims = p.text("dims");
    std::stringstream stream(dims);
    std::string part;
    while (std::getline(stream, part, 'x')) {
      uint32_t size = 0;
      const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), size);
      if (ec != std::errc() || end != part.data() + part.size() || part.empty()) {
        return Error::make(ErrorKind::kInvalidArgument,
                           "generator torus: parameter 'dims' = '{}': expected sizes like 4x4x4",
                           dims);
      }
      sizes.push_back(size);
    }
    ORRERY_TRY(bw, p.bandwidth("bandwidth"));
    ORRERY_TRY(lat, p.latency("latency"));
    return make_torus(sizes, {bw, lat});
  }
  if (generator == "dragonfly") {
    DragonflyParams d;
    ORRERY_TRY(groups, p.count("groups"));
    ORRERY_TRY(routers, p.count("routers_per_group"));
    ORRERY_TRY(npus, p.count("npus_per_router"));
    ORRERY_TRY(global_ports, p.count("global_per_router"));
    ORRERY_TRY(npu, p.link("npu"));
    ORRERY_TRY(local, p.link("local"));
    ORRERY_TRY(global, p.link("global"));
    d.groups = groups;
    d.routers_per_group = routers;
    d.npus_per_router = npus;
    d.global_per_router = global_ports;
    d.npu_link = npu;
    d.local = local;
    d.global = global;
    return make_dragonfly(d);
  }
  return Error::make(ErrorKind::kInvalidArgument, "unknown generator '{}'", generator);
}

#undef ORRERY_TRY

Expected<TopologyKind> kind_from(std::string_view name) {
  if (name == "Ring") return TopologyKind::kRing;
  if (name == "FullyConnected") return TopologyKind::kFullyConnected;
  if (name == "Switch") return TopologyKind::kSwitch;
  return Error::make(ErrorKind::kTopology,
                     "unknown kind '{}' (expected Ring, FullyConnected or "
                     "Switch)",
                     name);
}

std::string bandwidth_text(Bandwidth bw) {
  // Exact: integer GB/s, or nano-GB/s digits with a decimal point.
  const uint64_t nano = bw.nano_gbps();
  if (nano % 1'000'000'000 == 0) return std::to_string(nano / 1'000'000'000);
  std::string frac = fmt::format("{:09}", nano % 1'000'000'000);
  while (frac.back() == '0') frac.pop_back();
  return fmt::format("{}.{}", nano / 1'000'000'000, frac);
}

std::string latency_text(SimTime t) {
  const int64_t ps = t.ps();
  if (ps % 1000 == 0) return fmt::format("{}ns", ps / 1000);
  std::string frac = fmt::format("{:03}", ps % 1000);
  while (frac.back() == '0') frac.pop_back();
  return fmt::format("{}.{}ns", ps / 1000, frac);
}

class GraphReader {
 public:
  explicit GraphReader(std::string_view file) : file_(file) {}

  template <typename... Args>
  Error fail(int line, fmt::format_string<Args...> format, Args&&... args) const {
    return Error(
        ErrorKind::kTopology,
        fmt::format("{}:{}: {}", file_, line, fmt::format(format, std::forward<Args>(args)...)));
  }

  Expected<GraphSpec> read(const YAML::Node& root) {
    if (root["generator"].IsDefined()) return read_generated(root);
    GraphSpec spec;
    static const std::vector<std::string> kKeys = {"name",     "npus",           "npus_per_node",
                                                   "switches", "logical",        "routing",
                                                   "torus",    "npu_forwarding", "links"};
    for (const auto& entry : root) {
      const std::string key = entry.first.as<std::string>();
      if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end()) {
        return fail(yaml_line(entry.first), "unknown key '{}' in a graph topology file", key);
      }
    }
    if (root["name"].IsDefined()) spec.name = root["name"].as<std::string>();
    Expected<uint32_t> npus = count(root, "npus", true);
    if (!npus) return npus.error();
    spec.npus = *npus;
    if (root["npus_per_node"].IsDefined()) {
      Expected<uint32_t> per_node = count(root, "npus_per_node", true);
      if (!per_node) return per_node.error();
      spec.npus_per_node = *per_node;
    }
    // The cables bound the nodes: a node on no cable is unreachable (an NPU) or useless (a
    // switch), so counts beyond two per cable are refused before any name is made for them (a
    // 100-byte file naming a million switches took 1.4 s and 125 MB).
    const YAML::Node links = root["links"];
    if (!links.IsDefined() || !links.IsSequence()) {
      return fail(yaml_line(root),
                  "key 'links': expected a list of [from, to, bandwidth, latency] "
                  "cables");
    }
    const uint64_t endpoints = 2 * uint64_t{links.size()};
    if (spec.npus >= 2 && spec.npus > endpoints) {
      return fail(yaml_line(root["npus"]),
                  "key 'npus': {} NPUs but {} links: a link joins two nodes, so at most {} NPUs "
                  "can be connected",
                  spec.npus, links.size(), endpoints);
    }
    std::map<std::string, NodeId> names;
    for (uint32_t npu = 0; npu < spec.npus; ++npu) names.emplace(fmt::format("npu{}", npu), npu);
    const YAML::Node switches = root["switches"];
    if (switches.IsDefined()) {
      if (switches.IsScalar()) {
        Expected<uint32_t> n = count(root, "switches", false);
        if (!n) return n.error();
        if (*n > endpoints) {
          return fail(yaml_line(switches),
                      "key 'switches': {} switches but {} links: a link joins two nodes, so at "
                      "most {} switches can be connected",
                      *n, links.size(), endpoints);
        }
        for (uint32_t s = 0; s < *n; ++s) spec.switch_names.push_back(fmt::format("sw{}", s));
      } else if (switches.IsSequence()) {
        for (const YAML::Node& name : switches) spec.switch_names.push_back(name.as<std::string>());
      } else {
        return fail(yaml_line(switches), "key 'switches': expected a list of names or a count");
      }
      for (uint32_t s = 0; s < spec.switch_names.size(); ++s) {
        if (!names.emplace(spec.switch_names[s], spec.npus + s).second) {
          return fail(yaml_line(switches), "key 'switches': the name '{}' is used twice",
                      spec.switch_names[s]);
        }
      }
    }
    if (const YAML::Node routing = root["routing"]; routing.IsDefined()) {
      const std::string value = routing.as<std::string>();
      if (value == "ecmp") {
        spec.routing = Routing::kEcmp;
      } else if (value == "dimension-order") {
        spec.routing = Routing::kDimensionOrder;
      } else {
        return fail(yaml_line(routing),
                    "key 'routing': found '{}', expected ecmp or dimension-order", value);
      }
    }
    if (const YAML::Node torus = root["torus"]; torus.IsDefined()) {
      if (!torus.IsSequence())
        return fail(yaml_line(torus), "key 'torus': expected a list of sizes");
      for (const YAML::Node& size : torus) {
        Expected<uint32_t> value = scalar_count(size, "torus");
        if (!value) return value.error();
        spec.torus.push_back(*value);
      }
    }
    if (const YAML::Node fwd = root["npu_forwarding"]; fwd.IsDefined()) {
      const std::string value = fwd.as<std::string>();
      if (value != "true" && value != "false") {
        return fail(yaml_line(fwd), "key 'npu_forwarding': found '{}', expected true or false",
                    value);
      }
      spec.npu_forwarding = value == "true";
    } else {
      spec.npu_forwarding = spec.switch_names.empty();
    }
    if (Status status = read_logical(root, spec); !status) return status.error();
    for (const YAML::Node& link : links) {
      const int line = yaml_line(link);
      if (!link.IsSequence() || link.size() < 4 || link.size() > 6) {
        return fail(line,
                    "a link is [from, to, bandwidth, latency] with an optional tier and "
                    "'oneway'");
      }
      GraphLink out;
      for (int end = 0; end < 2; ++end) {
        const std::string name = link[end].as<std::string>();
        const auto found = names.find(name);
        if (found == names.end()) {
          return fail(line,
                      "link endpoint '{}' is neither an NPU (npu0 .. npu{}) nor a listed "
                      "switch",
                      name, spec.npus == 0 ? 0 : spec.npus - 1);
        }
        (end == 0 ? out.src : out.dst) = found->second;
      }
      if (out.src == out.dst) {
        return fail(line, "link [{}, {}] connects '{}' to itself; a cable joins two nodes",
                    link[0].as<std::string>(), link[1].as<std::string>(),
                    link[0].as<std::string>());
      }
      Expected<Bandwidth> bw = parse_bandwidth_text(link[2].as<std::string>());
      if (!bw) return fail(line, "link bandwidth: {}", bw.error().message());
      Expected<SimTime> lat = parse_latency_text(link[3].as<std::string>());
      if (!lat) return fail(line, "link latency: {}", lat.error().message());
      out.bandwidth = *bw;
      out.latency = *lat;
      bool oneway = false;
      for (size_t idx = 4; idx < link.size(); ++idx) {
        const std::string extra = link[idx].as<std::string>();
        if (extra == "oneway") {
          oneway = true;
          continue;
        }
        uint32_t tier = 0;
        const auto [end, ec] = std::from_chars(extra.data(), extra.data() + extra.size(), tier);
        if (ec != std::errc() || end != extra.data() + extra.size()) {
          return fail(line, "link field '{}': expected a tier number or 'oneway'", extra);
        }
        out.dimension = tier;
      }
      spec.links.push_back(out);
      if (!oneway)
        spec.links.push_back({out.dst, out.src, out.bandwidth, out.latency, out.dimension});
    }
    return spec;
  }

 private:
  // The optional `logical` layout: a list of [kind, size] pairs, innermost first.
  Status read_logical(const YAML::Node& root, GraphSpec& spec) const {
    const YAML::Node logical = root["logical"];
    if (!logical.IsDefined()) return {};
    if (!logical.IsSequence()) {
      return fail(yaml_line(logical), "key 'logical': expected a list of [kind, size] pairs");
    }
    spec.logical.clear();
    for (const YAML::Node& dim : logical) {
      if (!dim.IsSequence() || dim.size() != 2) {
        return fail(yaml_line(dim), "key 'logical': expected [kind, size], e.g. [Switch, 8]");
      }
      Expected<TopologyKind> kind = kind_from(dim[0].as<std::string>());
      if (!kind) return fail(yaml_line(dim), "key 'logical': {}", kind.error().message());
      Expected<uint32_t> size = scalar_count(dim[1], "logical");
      if (!size) return size.error();
      spec.logical.push_back({*kind, *size});
    }
    return {};
  }

  Expected<GraphSpec> read_generated(const YAML::Node& root) {
    const std::string generator = root["generator"].as<std::string>();
    GeneratorParams params;
    for (const auto& entry : root) {
      const std::string key = entry.first.as<std::string>();
      if (key == "generator" || key == "name" || key == "logical") continue;
      if (!entry.second.IsScalar()) {
        return fail(yaml_line(entry.second), "generator parameter '{}': expected a single value",
                    key);
      }
      params.emplace_back(key, entry.second.as<std::string>());
    }
    Expected<GraphSpec> spec = generate_graph(generator, params);
    if (!spec) return fail(yaml_line(root["generator"]), "{}", spec.error().message());
    if (root["name"].IsDefined()) spec->name = root["name"].as<std::string>();
    // A logical layout of one's own replaces the generator's (its product is checked later).
    if (Status status = read_logical(root, *spec); !status) return status.error();
    return spec;
  }

  Expected<uint32_t> scalar_count(const YAML::Node& node, std::string_view key) const {
    const std::string value = node.IsScalar() ? node.as<std::string>() : std::string("a list");
    uint32_t out = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
    if (ec != std::errc() || end != value.data() + value.size()) {
      return fail(yaml_line(node), "key '{}': found '{}', expected a whole number", key, value);
    }
    return out;
  }
  Expected<uint32_t> count(const YAML::Node& root, std::string_view key, bool required) const {
    const YAML::Node node = root[std::string(key)];
    if (!node.IsDefined()) {
      if (required) return fail(yaml_line(root), "missing key '{}'", key);
      return 0u;
    }
    return scalar_count(node, key);
  }

  std::string file_;
};

}  // namespace

Expected<Bandwidth> parse_bandwidth_text(std::string_view text) {
  double value = 0;
  double gbps = 0;  // in GB/s of 2^30 bytes
  if (ends_with(text, "Gbps") || ends_with(text, "Gb/s")) {
    if (!parse_number(text.substr(0, text.size() - 4), value)) value = -1;
    gbps = value * 1e9 / 8 / 1073741824.0;
  } else if (ends_with(text, "GB/s")) {
    if (!parse_number(text.substr(0, text.size() - 4), value)) value = -1;
    gbps = value;
  } else {
    if (!parse_number(text, value)) value = -1;
    gbps = value;
  }
  if (value < 0) {
    return Error::make(ErrorKind::kTopology,
                       "found '{}', expected a positive bandwidth: GB/s (2^30 bytes/s) as a "
                       "number or '25GB/s', or bits as '200Gbps'",
                       text);
  }
  if (!in_range(gbps, kMinGbps, kMaxGbps)) {
    return Error::make(ErrorKind::kTopology, "found '{}' ({} GB/s), expected {} to {} GB/s", text,
                       format_number(gbps), format_number(kMinGbps), format_number(kMaxGbps));
  }
  return Bandwidth::from_nano_gbps(static_cast<uint64_t>(std::round(gbps * 1e9)));
}

Expected<SimTime> parse_latency_text(std::string_view text) {
  double value = 0;
  double scale = 1000;  // ps per unit; plain numbers are ns
  std::string_view digits = text;
  if (ends_with(text, "ns")) {
    digits = text.substr(0, text.size() - 2);
  } else if (ends_with(text, "us")) {
    digits = text.substr(0, text.size() - 2);
    scale = 1e6;
  } else if (ends_with(text, "ms")) {
    digits = text.substr(0, text.size() - 2);
    scale = 1e9;
  }
  if (!parse_number(digits, value)) {
    return Error::make(ErrorKind::kTopology,
                       "found '{}', expected a latency of 0 or more: ns as a number, or '500ns', "
                       "'5us', '1ms'",
                       text);
  }
  if (value * scale > kMaxLatencyNs * 1000) {
    return Error::make(ErrorKind::kTopology,
                       "found '{}', expected at most {} ns (one second) per "
                       "link",
                       text, format_number(kMaxLatencyNs));
  }
  return SimTime::from_ps(static_cast<int64_t>(std::llround(value * scale)));
}

std::vector<std::string_view> generator_names() {
  std::vector<std::string_view> names;
  for (const auto& [name, defs] : generator_table()) names.push_back(name);
  return names;
}

std::string generator_help(std::string_view generator) {
  const auto found = generator_table().find(generator);
  if (found == generator_table().end()) return "";
  std::string out;
  auto add = [&](const ParamDef& def) {
    out += fmt::format("  {:<22} {:<10} {}\n", def.key, def.fallback, def.help);
  };
  for (const ParamDef& def : found->second) add(def);
  if (generator != "torus") {
    // A generator's own parameter of the same name (rail's nvlink_*) serves node_gpus too: listed
    // once.
    for (const ParamDef& def : kNodeParams) {
      const bool own = std::any_of(found->second.begin(), found->second.end(),
                                   [&](const ParamDef& mine) { return mine.key == def.key; });
      if (!own) add(def);
    }
  }
  return out;
}

Expected<GraphSpec> generate_graph(std::string_view generator, const GeneratorParams& params) {
  const auto found = generator_table().find(generator);
  if (found == generator_table().end()) {
    std::string names;
    for (std::string_view name : generator_names())
      names += (names.empty() ? "" : ", ") + std::string(name);
    return Error::make(ErrorKind::kInvalidArgument, "unknown generator '{}' (expected {})",
                       generator, names);
  }
  std::map<std::string, std::string> values;
  for (const ParamDef& def : found->second) values.emplace(def.key, def.fallback);
  for (const ParamDef& def : kNodeParams) values.emplace(def.key, def.fallback);
  for (const auto& [key, value] : params) {
    // (A named copy: clang 14 cannot capture a structured binding.)
    const std::string& name = key;
    const bool node_key = std::any_of(kNodeParams.begin(), kNodeParams.end(),
                                      [&](const ParamDef& def) { return def.key == name; });
    if (values.count(key) == 0 || (node_key && generator == "torus")) {
      std::string keys;
      for (const ParamDef& def : found->second)
        keys += (keys.empty() ? "" : ", ") + std::string(def.key);
      return Error::make(
          ErrorKind::kInvalidArgument, "generator {}: unknown parameter '{}' (expected {}{})",
          generator, key, keys,
          generator == "torus" ? "" : ", node_gpus, nvlink_bandwidth, nvlink_latency");
    }
    values[key] = value;
  }
  const Params p(generator, values);
  Expected<GraphSpec> spec = build(generator, p);
  if (!spec) return spec.error();
  Expected<uint32_t> gpus = p.count("node_gpus");
  if (!gpus) return gpus.error();
  if (*gpus > 0) {
    Expected<LinkSpec> nvlink = p.link("nvlink");
    if (!nvlink) return nvlink.error();
    return with_nodes(*spec, *gpus, *nvlink);
  }
  return spec;
}

Expected<GraphSpec> parse_graph_yaml(std::string_view text, std::string_view file_name) {
  Expected<YAML::Node> parsed = parse_yaml_text(text, file_name);
  if (!parsed) return parsed.error();
  const YAML::Node& root = *parsed;
  if (!root.IsMap()) {
    return Error::make(ErrorKind::kTopology, "{}:1: expected a mapping (a graph topology file)",
                       file_name);
  }
  try {
    return GraphReader(file_name).read(root);
  } catch (const YAML::Exception& error) {
    return Error(ErrorKind::kTopology,
                 fmt::format("{}:{}: {}", file_name, error.mark.line + 1, error.msg));
  }
}

std::string write_graph_yaml(const Graph& graph) {
  const GraphSpec& spec = graph.spec();
  std::string out = "# orrery graph topology (docs/formats/topology.md)\n";
  out += fmt::format("name: {}\nnpus: {}\n", spec.name.empty() ? "graph" : spec.name, spec.npus);
  if (spec.npus_per_node > 1) out += fmt::format("npus_per_node: {}\n", spec.npus_per_node);
  out += "switches: [";
  for (size_t s = 0; s < spec.switch_names.size(); ++s) {
    out += (s == 0 ? "" : ", ") + spec.switch_names[s];
  }
  out += "]\n";
  out += fmt::format("routing: {}\n", spec.routing == Routing::kEcmp ? "ecmp" : "dimension-order");
  if (!spec.torus.empty()) {
    out += "torus: [";
    for (size_t d = 0; d < spec.torus.size(); ++d)
      out += fmt::format("{}{}", d ? ", " : "", spec.torus[d]);
    out += "]\n";
  }
  out += fmt::format("npu_forwarding: {}\n", spec.npu_forwarding ? "true" : "false");
  out += "logical: [";
  for (size_t d = 0; d < spec.logical.size(); ++d) {
    out += fmt::format("{}[{}, {}]", d ? ", " : "", topology_kind_name(spec.logical[d].kind),
                       spec.logical[d].size);
  }
  out += "]\nlinks:  # [from, to, GB/s (2^30 bytes), latency, tier]; one line per cable\n";
  const auto& links = spec.links;
  for (size_t idx = 0; idx < links.size(); ++idx) {
    const GraphLink& l = links[idx];
    // A cable is a link followed by its exact reverse; anything else is written one way.
    const bool pair = idx + 1 < links.size() && links[idx + 1].src == l.dst &&
                      links[idx + 1].dst == l.src && links[idx + 1].bandwidth == l.bandwidth &&
                      links[idx + 1].latency == l.latency &&
                      links[idx + 1].dimension == l.dimension;
    out += fmt::format("  - [{}, {}, {}, {}, {}{}]\n", graph.node_name(l.src),
                       graph.node_name(l.dst), bandwidth_text(l.bandwidth), latency_text(l.latency),
                       l.dimension, pair ? "" : ", oneway");
    if (pair) ++idx;
  }
  return out;
}

Expected<NetworkDescription> parse_network_yaml(std::string_view text, std::string_view file_name) {
  Expected<YAML::Node> parsed = parse_yaml_text(text, file_name);
  if (!parsed) return parsed.error();
  const YAML::Node& root = *parsed;
  const bool graph_file = root.IsMap() && !root["topology"].IsDefined() &&
                          (root["links"].IsDefined() || root["generator"].IsDefined());
  if (!graph_file) {
    std::vector<std::string> warnings;
    Expected<Topology> topology = parse_topology_yaml(text, file_name, &warnings);
    if (!topology) return topology.error();
    return NetworkDescription{std::move(*topology), nullptr, std::move(warnings)};
  }
  Expected<GraphSpec> spec = parse_graph_yaml(text, file_name);
  if (!spec) return spec.error();
  Expected<Graph> graph = Graph::create(std::move(*spec));
  if (!graph) return graph.error().with_context(std::string(file_name));
  auto shared = std::make_shared<const Graph>(std::move(*graph));
  Expected<Topology> logical = shared->logical_topology();
  if (!logical) return logical.error().with_context(std::string(file_name));
  return NetworkDescription{std::move(*logical), std::move(shared), {}};
}

Expected<NetworkDescription> load_network_file(const std::filesystem::path& path) {
  Expected<std::string> text = read_text_file(path, "the network file");
  if (!text) return text.error();
  return parse_network_yaml(*text, path.string());
}

}  // namespace orrery::net
