#include "sim/perturbation.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <functional>
#include <unordered_map>

#include "core/counter_random.h"
#include "core/text_file.h"
#include "network/yaml_text.h"

namespace orrery::sim {

namespace {

using net::yaml_line;

class Reader {
 public:
  Reader(std::string_view file, const PresetLoader& presets) : file_(file), presets_(presets) {}

  template <typename... Args>
  Error fail(const YAML::Node& node, fmt::format_string<Args...> format, Args&&... args) const {
    return Error(ErrorKind::kConfig, fmt::format("{}:{}: {}", file_, yaml_line(node),
                                                 fmt::format(format, std::forward<Args>(args)...)));
  }

  // Every key of `map` must be one of `keys`; `read` handles each.
  Status mapping(const YAML::Node& map, std::string_view what,
                 std::initializer_list<std::string_view> keys,
                 const std::function<Status(const std::string&, const YAML::Node&)>& read) const {
    if (!map.IsMap()) return fail(map, "{}: expected a mapping of keys", what);
    for (const auto& entry : map) {
      const std::string key = entry.first.as<std::string>();
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        std::string known;
        for (std::string_view k : keys) known += fmt::format("{}{}", known.empty() ? "" : ", ", k);
        return fail(entry.first, "{}: unknown key '{}' (known: {})", what, key, known);
      }
      if (Status status = read(key, entry.second); !status) return status;
    }
    return Status::ok();
  }

  Status number(const YAML::Node& node, std::string_view key, double low, double high,
                bool low_open, double& out) const {
    double value = 0;
    if (!node.IsScalar() || !YAML::convert<double>::decode(node, value) || !std::isfinite(value)) {
      return fail(node, "key '{}': expected a number", key);
    }
    if (value < low || (low_open && value == low) || value > high) {
      return fail(node, "key '{}': {} is out of range ({}{}, {}])", key, value,
                  low_open ? "(" : "[", low, high);
    }
    out = value;
    return Status::ok();
  }

  Status u64(const YAML::Node& node, std::string_view key, uint64_t& out) const {
    if (!node.IsScalar() || !YAML::convert<uint64_t>::decode(node, out)) {
      return fail(node, "key '{}': expected a non-negative whole number", key);
    }
    return Status::ok();
  }

  // `between: [a, b]`: a cable between two named graph nodes.
  Status cable(const YAML::Node& value, std::string& from, std::string& to) const {
    if (!value.IsSequence() || value.size() != 2 || !value[0].IsScalar() || !value[1].IsScalar()) {
      return fail(value, "key 'between': expected two node names, [a, b]");
    }
    from = value[0].as<std::string>();
    to = value[1].as<std::string>();
    return Status::ok();
  }

  Status ranks(const YAML::Node& node, RankSet& out) const {
    if (!node.IsScalar())
      return fail(node, "key 'ranks': expected a rank list such as \"0-15,1024\"");
    const std::string text = node.as<std::string>();
    if (text == "all") {
      out = RankSet::all();
      return Status::ok();
    }
    Expected<RankSet> parsed = RankSet::parse(text, UINT32_MAX);
    if (!parsed) return fail(node, "key 'ranks': {}", parsed.error().message());
    out = *parsed;
    return Status::ok();
  }

  Status compute(const YAML::Node& node, Perturbation& out) const {
    if (!node.IsSequence()) return fail(node, "compute: expected a list of entries");
    for (const YAML::Node& item : node) {
      ComputeEntry entry;
      entry.line = yaml_line(item);
      bool has_ranks = false, has_factor = false, has_law = false;
      std::string law;
      Status status = mapping(
          item, "compute entry",
          {"ranks", "factor", "distribution", "mu", "sigma", "min", "max", "fraction", "seed"},
          [&](const std::string& key, const YAML::Node& value) -> Status {
            if (key == "ranks") {
              has_ranks = true;
              return ranks(value, entry.ranks);
            }
            if (key == "factor") {
              has_factor = true;
              return number(value, key, 0, 1e6, true, entry.factor);
            }
            if (key == "distribution") {
              has_law = true;
              law = value.IsScalar() ? value.as<std::string>() : "";
              if (law == "lognormal")
                entry.law = FactorLaw::kLognormal;
              else if (law == "uniform")
                entry.law = FactorLaw::kUniform;
              else if (law == "tail")
                entry.law = FactorLaw::kTail;
              else
                return fail(value,
                            "key 'distribution': found '{}', expected lognormal, uniform or tail",
                            law);
              return Status::ok();
            }
            if (key == "mu") return number(value, key, -10, 10, false, entry.mu);
            if (key == "sigma") return number(value, key, 0, 10, false, entry.sigma);
            if (key == "min") return number(value, key, 0, 1e6, true, entry.min);
            if (key == "max") return number(value, key, 0, 1e6, true, entry.max);
            if (key == "fraction") return number(value, key, 0, 1, false, entry.fraction);
            return u64(value, key, entry.seed);
          });
      if (!status) return status;
      if (!has_ranks) return fail(item, "compute entry: key 'ranks' is missing");
      if (!has_law && !has_factor) {
        return fail(item, "compute entry: give a 'factor' or a 'distribution'");
      }
      if (entry.law == FactorLaw::kUniform && entry.max < entry.min) {
        return fail(item, "compute entry: max ({}) is below min ({})", entry.max, entry.min);
      }
      if (entry.law == FactorLaw::kTail && !has_factor) {
        return fail(item, "compute entry: a tail needs the 'factor' of its slow ranks");
      }
      if ((entry.law == FactorLaw::kLognormal || entry.law == FactorLaw::kUniform) && has_factor) {
        return fail(item, "compute entry: 'factor' and a {} distribution exclude each other", law);
      }
      out.compute.push_back(entry);
    }
    return Status::ok();
  }

  Status links(const YAML::Node& node, Perturbation& out) const {
    if (!node.IsSequence()) return fail(node, "links: expected a list of entries");
    for (const YAML::Node& item : node) {
      LinkEntry entry;
      entry.line = yaml_line(item);
      bool has_factor = false;
      Status status =
          mapping(item, "links entry", {"dimension", "between", "factor"},
                  [&](const std::string& key, const YAML::Node& value) -> Status {
                    if (key == "factor") {
                      has_factor = true;
                      return number(value, key, 0, 1e6, true, entry.factor);
                    }
                    if (key == "dimension") {
                      uint64_t dim = 0;
                      if (Status s = u64(value, key, dim); !s) return s;
                      if (dim > 64)
                        return fail(value, "key 'dimension': {} is not a dimension", dim);
                      entry.dimension = static_cast<uint32_t>(dim);
                      return Status::ok();
                    }
                    return cable(value, entry.from, entry.to);
                  });
      if (!status) return status;
      if (!has_factor) return fail(item, "links entry: key 'factor' is missing");
      if (entry.dimension.has_value() == !entry.from.empty()) {
        return fail(item, "links entry: give either 'dimension' or 'between'");
      }
      out.links.push_back(entry);
    }
    return Status::ok();
  }

  Status hardware(const YAML::Node& node, Perturbation& out) const {
    if (!node.IsSequence()) return fail(node, "hardware: expected a list of entries");
    for (const YAML::Node& item : node) {
      HardwareEntry entry;
      entry.line = yaml_line(item);
      bool has_ranks = false;
      std::string preset, system;
      Status status = mapping(item, "hardware entry", {"ranks", "preset", "system"},
                              [&](const std::string& key, const YAML::Node& value) -> Status {
                                if (key == "ranks") {
                                  has_ranks = true;
                                  return ranks(value, entry.ranks);
                                }
                                if (!value.IsScalar())
                                  return fail(value, "key '{}': expected a name", key);
                                (key == "preset" ? preset : system) = value.as<std::string>();
                                return Status::ok();
                              });
      if (!status) return status;
      if (!has_ranks) return fail(item, "hardware entry: key 'ranks' is missing");
      if (preset.empty() == system.empty()) {
        return fail(item,
                    "hardware entry: give either 'preset' (dgx-a100, ...) or 'system' (a "
                    "system JSON file)");
      }
      Expected<sys::SystemConfig> config = Error(ErrorKind::kConfig, "");
      if (!system.empty()) {
        std::filesystem::path path(system);
        if (path.is_relative()) path = std::filesystem::path(file_).parent_path() / path;
        entry.name = system;
        config = sys::load_system_config(path.string());
      } else {
        entry.name = preset;
        if (!presets_)
          return fail(item, "hardware entry: presets are not available here; give a 'system' file");
        config = presets_(preset);
      }
      if (!config) return fail(item, "hardware entry: {}", config.error().message());
      entry.system = std::make_shared<const sys::SystemConfig>(std::move(*config));
      out.hardware.push_back(std::move(entry));
    }
    return Status::ok();
  }

  Status failures(const YAML::Node& node, Perturbation& out) const {
    if (!node.IsSequence()) return fail(node, "failures: expected a list of entries");
    for (const YAML::Node& item : node) {
      FailureEntry entry;
      entry.line = yaml_line(item);
      bool has_time = false;
      int kinds = 0;
      bool has_ranks = false, has_surviving = false;
      Status status =
          mapping(item, "failures entry",
                  {"at_ns", "between", "switch", "rank", "dimension", "ranks", "surviving"},
                  [&](const std::string& key, const YAML::Node& value) -> Status {
                    if (key == "at_ns") {
                      has_time = true;
                      uint64_t ns = 0;
                      if (Status s = u64(value, key, ns); !s) return s;
                      if (ns > (uint64_t{1} << 50))
                        return fail(value, "key 'at_ns': beyond 2^50 ns");
                      entry.at = SimTime::from_ns(static_cast<int64_t>(ns));
                      return Status::ok();
                    }
                    if (key == "ranks") {
                      has_ranks = true;
                      entry.ranks_text = value.IsScalar() ? value.Scalar() : "";
                      return ranks(value, entry.ranks);
                    }
                    if (key == "surviving") {
                      has_surviving = true;
                      if (Status s = number(value, key, 0, 1, false, entry.surviving); !s) return s;
                      if (entry.surviving == 1)
                        return fail(value,
                                    "key 'surviving': 1 is no failure; give a "
                                    "fraction below 1");
                      return Status::ok();
                    }
                    ++kinds;
                    if (key == "dimension") {
                      uint64_t dim = 0;
                      if (Status s = u64(value, key, dim); !s) return s;
                      if (dim > 64)
                        return fail(value, "key 'dimension': {} is not a dimension", dim);
                      entry.dimension = static_cast<uint32_t>(dim);
                      return Status::ok();
                    }
                    if (key == "rank") {
                      uint64_t rank = 0;
                      if (Status s = u64(value, key, rank); !s) return s;
                      if (rank >= UINT32_MAX)
                        return fail(value, "key 'rank': {} is not a rank", rank);
                      entry.rank = static_cast<uint32_t>(rank);
                      return Status::ok();
                    }
                    if (key == "switch") {
                      if (!value.IsScalar())
                        return fail(value, "key 'switch': expected a switch's name");
                      entry.switch_name = value.as<std::string>();
                      return Status::ok();
                    }
                    return cable(value, entry.from, entry.to);
                  });
      if (!status) return status;
      if (!has_time) return fail(item, "failures entry: key 'at_ns' is missing");
      if (kinds != 1)
        return fail(item, "failures entry: give one of 'between', 'switch', 'dimension' or 'rank'");
      if (!entry.dimension && (has_ranks || has_surviving))
        return fail(item, "failures entry: 'ranks' and 'surviving' go with 'dimension'");
      if (entry.dimension && !has_ranks)
        return fail(item,
                    "failures entry: a dimension's failure needs 'ranks' (the NPUs whose "
                    "links in it fail; \"all\" for every one)");
      out.failures.push_back(std::move(entry));
    }
    return Status::ok();
  }

  Status goodput(const YAML::Node& node, Perturbation& out) const {
    GoodputSpec spec;
    bool has_mtbf = false;
    Status status = mapping(node, "goodput",
                            {"mtbf_hours", "components", "checkpoint_s", "restart_s", "interval_s",
                             "horizon_hours", "seed"},
                            [&](const std::string& key, const YAML::Node& value) -> Status {
                              if (key == "mtbf_hours") {
                                has_mtbf = true;
                                return number(value, key, 0, 1e9, true, spec.mtbf_hours);
                              }
                              if (key == "components") return u64(value, key, spec.components);
                              if (key == "checkpoint_s")
                                return number(value, key, 0, 1e7, false, spec.checkpoint_s);
                              if (key == "restart_s")
                                return number(value, key, 0, 1e7, false, spec.restart_s);
                              if (key == "interval_s")
                                return number(value, key, 0, 1e9, false, spec.interval_s);
                              if (key == "horizon_hours")
                                return number(value, key, 0, 1e7, true, spec.horizon_hours);
                              return u64(value, key, spec.seed);
                            });
    if (!status) return status;
    if (!has_mtbf) return fail(node, "goodput: key 'mtbf_hours' is missing");
    out.goodput = spec;
    return Status::ok();
  }

  // Entries are resolved rank by rank or by rebuilding the graph: a bound keeps a hostile file
  // from costing hours.
  Status entries(const YAML::Node& node, std::string_view what, size_t most) const {
    if (node.IsSequence() && node.size() > most) {
      return fail(node, "{}: {} entries; at most {} (merge rank lists into one entry)", what,
                  node.size(), most);
    }
    return Status::ok();
  }

  Status read(const YAML::Node& root, Perturbation& out) const {
    if (!root.IsDefined() || root.IsNull()) return Status::ok();
    return mapping(root, "perturbation",
                   {"compute", "noise", "links", "hardware", "failures", "goodput"},
                   [&](const std::string& key, const YAML::Node& value) -> Status {
                     if (key == "compute") {
                       if (Status s = entries(value, key, 256); !s) return s;
                       return compute(value, out);
                     }
                     if (key == "failures") {
                       if (Status s = entries(value, key, 1024); !s) return s;
                       return failures(value, out);
                     }
                     if (key == "hardware") {
                       if (Status s = entries(value, key, 256); !s) return s;
                       return hardware(value, out);
                     }
                     if (key == "links") {
                       if (Status s = entries(value, key, 4096); !s) return s;
                       return links(value, out);
                     }
                     if (key == "goodput") return goodput(value, out);
                     return mapping(value, "noise", {"sigma", "seed"},
                                    [&](const std::string& k, const YAML::Node& v) -> Status {
                                      if (k == "sigma")
                                        return number(v, k, 0, 2, false, out.noise_sigma);
                                      return u64(v, k, out.noise_seed);
                                    });
                   });
  }

 private:
  std::string file_;
  const PresetLoader& presets_;
};

}  // namespace

Expected<Perturbation> parse_perturbation(std::string_view text, std::string_view file_name,
                                          const PresetLoader& presets) {
  Expected<YAML::Node> root = net::parse_yaml_text(text, file_name);
  if (!root) return root.error();
  Perturbation perturbation;
  perturbation.file = std::string(file_name);
  if (Status status = Reader(file_name, presets).read(*root, perturbation); !status) {
    return status.error();
  }
  return perturbation;
}

Expected<Perturbation> load_perturbation(const std::filesystem::path& path,
                                         const PresetLoader& presets) {
  Expected<std::string> text = read_text_file(path, "the perturbation file");
  if (!text) return text.error();
  return parse_perturbation(*text, path.string(), presets);
}

Expected<ResolvedFailures> resolve_failures(const Perturbation& perturbation,
                                            const net::NetworkDescription& network,
                                            uint32_t rank_count) {
  ResolvedFailures out;
  auto fail = [&](const FailureEntry& entry, std::string what) {
    return Error::make(ErrorKind::kConfig, "{}:{}: failures entry: {}", perturbation.file,
                       entry.line, what);
  };
  std::unordered_map<std::string, net::NodeId> node_of;
  if (network.graph) {
    for (net::NodeId node = 0; node < network.graph->node_count(); ++node)
      node_of.emplace(network.graph->node_name(node), node);
  }
  for (const FailureEntry& entry : perturbation.failures) {
    if (entry.rank) {
      if (*entry.rank >= rank_count) {
        return fail(entry,
                    fmt::format("rank {} is beyond the job's {} ranks", *entry.rank, rank_count));
      }
      if (!out.rank || entry.at < out.rank->at) out.rank = RankFailure{*entry.rank, entry.at};
      continue;
    }
    if (entry.dimension) {
      if (network.graph) {
        return fail(entry,
                    "'dimension' fails on ASTRA-sim's networks; on a graph topology "
                    "give the cable ('between') or the 'switch'");
      }
      const uint32_t dims = network.logical.dimension_count();
      if (*entry.dimension >= dims) {
        return fail(entry, fmt::format("dimension {} is beyond the network's {} dimensions",
                                       *entry.dimension, dims));
      }
      if (!entry.ranks.is_all() && entry.ranks.last() >= rank_count) {
        return fail(entry, fmt::format("rank {} is beyond the job's {} ranks", entry.ranks.last(),
                                       rank_count));
      }
      net::DimensionFailure failure;
      failure.at = entry.at;
      failure.dimension = *entry.dimension;
      failure.ranks = entry.ranks;
      failure.surviving = entry.surviving;
      failure.what = fmt::format("{}:{}: dimension {} at ranks {}", perturbation.file, entry.line,
                                 *entry.dimension,
                                 entry.ranks.is_all() ? std::string("all") : entry.ranks_text);
      out.dimensions.push_back(std::move(failure));
      continue;
    }
    if (!network.graph) {
      return fail(entry,
                  "a cable or a switch fails on a graph topology (docs/formats/topology.md), "
                  "whose routes can go around it; on ASTRA-sim's dimensions give 'dimension', "
                  "'ranks' and 'surviving'");
    }
    const net::Graph& graph = *network.graph;
    net::LinkFailure failure;
    failure.at = entry.at;
    auto node = [&](const std::string& name) -> Expected<net::NodeId> {
      auto found = node_of.find(name);
      if (found == node_of.end()) {
        return fail(entry, fmt::format("the graph has no node '{}' (NPUs are npu0, npu1, ...; "
                                       "switches by their names)",
                                       name));
      }
      return found->second;
    };
    if (!entry.switch_name.empty()) {
      Expected<net::NodeId> sw = node(entry.switch_name);
      if (!sw) return sw.error();
      if (!graph.is_switch(*sw))
        return fail(entry, fmt::format("{} is an NPU, not a switch", entry.switch_name));
      for (net::LinkId link = 0; link < graph.link_count(); ++link) {
        if (graph.link(link).src == *sw || graph.link(link).dst == *sw)
          failure.links.push_back(link);
      }
      failure.what = "switch " + entry.switch_name;
    } else {
      Expected<net::NodeId> from = node(entry.from);
      if (!from) return from.error();
      Expected<net::NodeId> to = node(entry.to);
      if (!to) return to.error();
      for (net::LinkId link = 0; link < graph.link_count(); ++link) {
        const net::GraphLink& l = graph.link(link);
        if ((l.src == *from && l.dst == *to) || (l.src == *to && l.dst == *from))
          failure.links.push_back(link);
      }
      if (failure.links.empty()) {
        return fail(entry, fmt::format("no link joins {} and {}", entry.from, entry.to));
      }
      failure.what = fmt::format("the cable {}-{}", entry.from, entry.to);
    }
    out.links.push_back(std::move(failure));
  }
  return out;
}

Expected<std::vector<uint16_t>> hardware_of(const Perturbation& perturbation, uint32_t rank_count) {
  std::vector<uint16_t> profile(rank_count, 0);
  for (size_t index = 0; index < perturbation.hardware.size(); ++index) {
    const HardwareEntry& entry = perturbation.hardware[index];
    if (!entry.ranks.is_all() && entry.ranks.last() >= rank_count) {
      return Error::make(ErrorKind::kConfig,
                         "{}:{}: hardware entry: rank {} is beyond the job's {} ranks",
                         perturbation.file, entry.line, entry.ranks.last(), rank_count);
    }
    std::vector<std::pair<uint32_t, uint32_t>> ranges = entry.ranks.ranges();
    if (entry.ranks.is_all()) ranges = {{0, rank_count - 1}};
    for (const auto& [first, last] : ranges) {
      for (uint32_t rank = first; rank <= last; ++rank)
        profile[rank] = static_cast<uint16_t>(index + 1);
    }
  }
  return profile;
}

Expected<std::vector<double>> compute_factors(const Perturbation& perturbation,
                                              uint32_t rank_count) {
  std::vector<double> factors(rank_count, 1.0);
  for (const ComputeEntry& entry : perturbation.compute) {
    if (!entry.ranks.is_all() && entry.ranks.last() >= rank_count) {
      return Error::make(ErrorKind::kConfig,
                         "{}:{}: compute entry: rank {} is beyond the job's {} ranks",
                         perturbation.file, entry.line, entry.ranks.last(), rank_count);
    }
    std::vector<std::pair<uint32_t, uint32_t>> ranges = entry.ranks.ranges();
    if (entry.ranks.is_all()) ranges = {{0, rank_count - 1}};
    for (const auto& [first, last] : ranges)
      for (uint32_t rank = first; rank <= last; ++rank) {
        double factor = entry.factor;
        switch (entry.law) {
          case FactorLaw::kFixed:
            break;
          case FactorLaw::kLognormal:
            factor = std::exp(entry.mu + entry.sigma * normal_draw(entry.seed, rank, 0));
            break;
          case FactorLaw::kUniform:
            factor =
                entry.min + (entry.max - entry.min) * (1.0 - unit_draw(entry.seed, rank, 0, 3));
            break;
          case FactorLaw::kTail:
            factor = unit_draw(entry.seed, rank, 0, 4) <= entry.fraction ? entry.factor : 1.0;
            break;
        }
        factors[rank] *= factor;
      }
  }
  return factors;
}

Expected<std::shared_ptr<const net::NetworkDescription>> degrade_links(
    const Perturbation& perturbation, std::shared_ptr<const net::NetworkDescription> network) {
  if (perturbation.links.empty()) return network;
  auto fail = [&](const LinkEntry& entry, std::string what) {
    return Error::make(ErrorKind::kConfig, "{}:{}: links entry: {}", perturbation.file, entry.line,
                       what);
  };
  auto description = std::make_shared<net::NetworkDescription>(*network);
  if (!network->graph) {
    std::vector<net::Dimension> dims;
    for (uint32_t dim = 0; dim < network->logical.dimension_count(); ++dim)
      dims.push_back(network->logical.dimension(dim));
    for (const LinkEntry& entry : perturbation.links) {
      if (!entry.dimension) {
        return fail(entry, fmt::format("'between' names graph nodes, but {} has dimensions (give "
                                       "'dimension' instead)",
                                       "this network"));
      }
      if (*entry.dimension >= dims.size()) {
        return fail(entry, fmt::format("dimension {} is beyond the network's {} dimensions "
                                       "(numbered from 0)",
                                       *entry.dimension, dims.size()));
      }
      dims[*entry.dimension].bandwidth = dims[*entry.dimension].bandwidth.scaled(entry.factor);
    }
    Expected<net::Topology> topology = net::Topology::create(std::move(dims));
    if (!topology) return topology.error();
    topology->set_charge_highest(network->logical.charge_highest());
    description->logical = std::move(*topology);
    return std::shared_ptr<const net::NetworkDescription>(std::move(description));
  }
  const net::Graph& graph = *network->graph;
  net::GraphSpec spec = graph.spec();
  std::unordered_map<std::string, net::NodeId> node_of;
  for (net::NodeId node = 0; node < graph.node_count(); ++node)
    node_of.emplace(graph.node_name(node), node);
  for (const LinkEntry& entry : perturbation.links) {
    if (entry.dimension) {
      bool any = false;
      for (net::GraphLink& link : spec.links) {
        if (link.dimension != *entry.dimension) continue;
        link.bandwidth = link.bandwidth.scaled(entry.factor);
        any = true;
      }
      if (!any)
        return fail(entry, fmt::format("the graph has no link of tier {}", *entry.dimension));
      continue;
    }
    const auto from = node_of.find(entry.from);
    const auto to = node_of.find(entry.to);
    if (from == node_of.end() || to == node_of.end()) {
      return fail(entry, fmt::format("the graph has no node '{}' (NPUs are npu0, npu1, ...; "
                                     "switches by their names)",
                                     from == node_of.end() ? entry.from : entry.to));
    }
    bool any = false;
    for (net::GraphLink& link : spec.links) {
      if ((link.src == from->second && link.dst == to->second) ||
          (link.src == to->second && link.dst == from->second)) {
        link.bandwidth = link.bandwidth.scaled(entry.factor);
        any = true;
      }
    }
    if (!any) return fail(entry, fmt::format("no link joins {} and {}", entry.from, entry.to));
  }
  Expected<net::Graph> degraded = net::Graph::create(std::move(spec));
  if (!degraded) return degraded.error();
  description->graph = std::make_shared<const net::Graph>(std::move(*degraded));
  return std::shared_ptr<const net::NetworkDescription>(std::move(description));
}

}  // namespace orrery::sim
