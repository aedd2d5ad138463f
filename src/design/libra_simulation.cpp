#include "design/libra_simulation.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>

#include "chakra/trace_file.h"
#include "chakra/trace_set.h"
#include "core/text_file.h"
#include "gen/common.h"
#include "network/graph_yaml.h"
#include "sim/simulation.h"

namespace orrery::design {

namespace {

using ChakraProtoMsg::AttributeProto;
using ChakraProtoMsg::Node;

using gen::add_attr;

int64_t comm_type(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return ChakraProtoMsg::ALL_REDUCE;
    case CollectiveKind::kReduceScatter:
      return ChakraProtoMsg::REDUCE_SCATTER;
    case CollectiveKind::kAllGather:
      return ChakraProtoMsg::ALL_GATHER;
    case CollectiveKind::kAllToAll:
      return ChakraProtoMsg::ALL_TO_ALL;
    case CollectiveKind::kNone:
      break;
  }
  return ChakraProtoMsg::ALL_REDUCE;
}

// The phase order of one iteration: forward over layers, then backward in reverse.
std::vector<std::pair<size_t, size_t>> schedule(size_t layers) {
  std::vector<std::pair<size_t, size_t>> order;
  for (size_t l = 0; l < layers; ++l) order.emplace_back(l, 0);
  for (size_t l = layers; l-- > 0;) {
    order.emplace_back(l, 1);
    order.emplace_back(l, 2);
  }
  return order;
}

// The simulated network's dimensions and, per LIBRA dimension, the indices of its parts.
struct Layout {
  std::vector<SimulatedDimension> dims;
  std::vector<std::vector<size_t>> parts;  // per LIBRA dimension: all its simulated dimensions
  std::vector<int> inner;                  // per LIBRA dimension: the inner part (-1: none)
  std::vector<int> outer;                  // per LIBRA dimension: the outer part (-1: none)
};

const char* const kPhaseNames[] = {"forward", "input gradient", "weight gradient"};

// Whether a group that uses dimension d in part takes its outer coordinates (it also uses higher
// dimensions) or its inner ones; error when it uses lower and higher ones too.
Expected<bool> takes_outer(const Layer& layer, size_t phase, size_t d) {
  const std::vector<int32_t>& groups = layer.phases[phase].groups;
  bool lower = false;
  bool higher = false;
  for (size_t e = 0; e < groups.size(); ++e) {
    if (groups[e] > 1 && e < d) lower = true;
    if (groups[e] > 1 && e > d) higher = true;
  }
  if (lower && higher) {
    return Error::make(ErrorKind::kConfig,
                       "layer '{}', {}: the group uses {} NPUs of dimension {} together with lower "
                       "and higher dimensions; no sub-grid of the simulated network holds it",
                       layer.name, kPhaseNames[phase], groups[d], d);
  }
  return higher;
}

Expected<Layout> make_layout(const Problem& problem) {
  const size_t dims = problem.dimensions.size();
  std::vector<int32_t> inner(dims, 0), outer(dims, 0);
  std::vector<std::string> whole_by(dims), part_by(dims), inner_by(dims), outer_by(dims);
  for (const Layer& layer : problem.layers) {
    for (size_t p = 0; p < 3; ++p) {
      const Phase& phase = layer.phases[p];
      if (phase.collective == CollectiveKind::kNone || phase.bytes == 0) continue;
      for (size_t d = 0; d < dims; ++d) {
        const int32_t n = phase.groups[d];
        if (n <= 1) continue;
        const std::string who = fmt::format("layer '{}', {}", layer.name, kPhaseNames[p]);
        if (static_cast<uint32_t>(n) == problem.dimensions[d].size) {
          if (whole_by[d].empty()) whole_by[d] = who;
          continue;
        }
        if (part_by[d].empty()) part_by[d] = who;
        Expected<bool> is_outer = takes_outer(layer, p, d);
        if (!is_outer) return is_outer.error();
        int32_t& side = *is_outer ? outer[d] : inner[d];
        std::string& side_by = *is_outer ? outer_by[d] : inner_by[d];
        if (side != 0 && side != n) {
          return Error::make(ErrorKind::kConfig,
                             "{} uses {} NPUs of dimension {} and {} uses {}, both on its {} "
                             "side; the simulated network splits a dimension for one size a side",
                             who, n, d, side_by, side, *is_outer ? "outer" : "inner");
        }
        side = n;
        side_by = who;
      }
    }
  }
  Layout layout;
  layout.parts.resize(dims);
  layout.inner.assign(dims, -1);
  layout.outer.assign(dims, -1);
  for (size_t d = 0; d < dims; ++d) {
    const uint32_t size = problem.dimensions[d].size;
    if (part_by[d].empty()) {
      layout.parts[d].push_back(layout.dims.size());
      layout.dims.push_back({d, size});
      continue;
    }
    if (!whole_by[d].empty()) {
      return Error::make(ErrorKind::kConfig,
                         "dimension {} is used whole by {} and in part by {}: simulating the parts "
                         "as sub-dimensions with B{} each would let the whole use pipeline over "
                         "them at more than B{}",
                         d, whole_by[d], part_by[d], d, d);
    }
    const auto a = static_cast<uint32_t>(std::max(inner[d], 1));
    const auto b = static_cast<uint32_t>(std::max(outer[d], 1));
    if (size % (a * b) != 0) {
      return Error::make(ErrorKind::kConfig,
                         "dimension {} of {} NPUs: {} uses {} inner NPUs and {} uses {} outer "
                         "ones, and {} x {} does not divide {}",
                         d, size, inner_by[d].empty() ? "no group" : inner_by[d], a,
                         outer_by[d].empty() ? "no group" : outer_by[d], b, a, b, size);
    }
    const uint32_t parts[3] = {a, size / (a * b), b};
    for (int part = 0; part < 3; ++part) {
      if (parts[part] <= 1) continue;
      if (part == 0) layout.inner[d] = static_cast<int>(layout.dims.size());
      if (part == 2) layout.outer[d] = static_cast<int>(layout.dims.size());
      layout.parts[d].push_back(layout.dims.size());
      layout.dims.push_back({d, parts[part]});
    }
  }
  if (layout.dims.size() > 32) {
    return Error::make(ErrorKind::kConfig, "{} simulated dimensions (at most 32)",
                       layout.dims.size());
  }
  return layout;
}

}  // namespace

Expected<std::vector<SimulatedDimension>> simulated_dimensions(const Problem& problem) {
  Expected<TrafficModel> model = build_traffic_model(problem);
  if (!model) return model.error();
  Expected<Layout> layout = make_layout(problem);
  if (!layout) return layout.error();
  return layout->dims;
}

Expected<LibraWorkload> build_libra_workload(const Problem& problem, uint32_t chunks,
                                             const std::string& folder) {
  Expected<TrafficModel> model = build_traffic_model(problem);
  if (!model) return model.error();
  const size_t dims = problem.dimensions.size();
  if (model->npus > 65536) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "{} NPUs: simulating the LIBRA check needs at most 65,536 ranks",
                       model->npus);
  }
  const auto ranks = static_cast<uint32_t>(model->npus);
  Expected<Layout> layout = make_layout(problem);
  if (!layout) return layout.error();
  const std::vector<SimulatedDimension>& sim = layout->dims;
  std::vector<uint32_t> stride(sim.size(), 1);
  for (size_t d = 1; d < sim.size(); ++d) stride[d] = stride[d - 1] * sim[d - 1].size;

  // Groups keyed by (used simulated-dimension mask, rank of the group's first member).
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> group_ids;
  std::vector<std::vector<uint32_t>> group_members;
  auto group_of = [&](uint32_t mask, uint32_t rank) -> uint32_t {
    uint32_t base = rank;
    for (size_t d = 0; d < sim.size(); ++d) {
      if ((mask & (1u << d)) != 0) {
        const uint32_t coordinate = (rank / stride[d]) % sim[d].size;
        base -= coordinate * stride[d];
      }
    }
    auto [it, inserted] = group_ids.emplace(std::make_pair(mask, base),
                                            static_cast<uint32_t>(group_members.size() + 1));
    if (inserted) {
      std::vector<uint32_t> members{base};
      for (size_t d = 0; d < sim.size(); ++d) {
        if ((mask & (1u << d)) == 0) continue;
        std::vector<uint32_t> grown;
        for (uint32_t m : members) {
          for (uint32_t c = 0; c < sim[d].size; ++c) grown.push_back(m + c * stride[d]);
        }
        members = std::move(grown);
      }
      std::sort(members.begin(), members.end());
      group_members.push_back(std::move(members));
    }
    return it->second;
  };
  // The simulated dimensions a phase's group spans (make_layout checked every group).
  auto mask_of = [&](const Phase& phase) {
    uint32_t mask = 0;
    for (size_t d = 0; d < dims; ++d) {
      const int32_t n = phase.groups[d];
      if (n <= 1) continue;
      if (static_cast<uint32_t>(n) == problem.dimensions[d].size) {
        for (const size_t part : layout->parts[d]) mask |= 1u << part;
        continue;
      }
      bool higher = false;
      for (size_t e = d + 1; e < dims; ++e) higher = higher || phase.groups[e] > 1;
      mask |= 1u << (higher ? layout->outer[d] : layout->inner[d]);
    }
    return mask;
  };

  if (!folder.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(folder, ec);
    if (ec) return Error::make(ErrorKind::kIo, "{}: cannot create: {}", folder, ec.message());
  }
  const std::string prefix = (std::filesystem::path(folder) / "libra").string();
  LibraWorkload workload;
  workload.ranks = ranks;
  workload.dimensions = sim;
  ChakraProtoMsg::GlobalMetadata metadata;
  metadata.set_version(chakra::kDefaultSchemaVersion);
  const auto order = schedule(problem.layers.size());
  std::vector<chakra::TraceGraph> graphs(ranks);
  Node comp;
  Node coll;
  for (uint32_t rank = 0; rank < ranks; ++rank) {
    chakra::TraceGraph& graph = graphs[rank];
    graph.set_source(fmt::format("libra rank {}", rank));
    graph.set_metadata(metadata);
    std::optional<chakra::TraceWriter> writer;
    if (!folder.empty()) {
      Expected<chakra::TraceWriter> created =
          chakra::TraceWriter::create(chakra::rank_trace_path(prefix, rank), metadata);
      if (!created) return created.error();
      writer.emplace(std::move(*created));
    }
    auto add = [&](const Node& node) -> Status {
      graph.add_node(node);
      return writer ? writer->write(node) : Status::ok();
    };
    uint64_t id = 0;
    for (const auto& [l, p] : order) {
      const Layer& layer = problem.layers[l];
      const Phase& phase = layer.phases[p];
      static constexpr const char* kPhase[] = {"fwd", "ig", "wg"};
      const auto micros = static_cast<uint64_t>(std::llround(phase.compute_ns / 1000.0));
      if (micros > 0) {
        comp.Clear();
        comp.set_id(id);
        comp.set_name(fmt::format("{}_{}_compute", layer.name, kPhase[p]));
        comp.set_type(ChakraProtoMsg::COMP_NODE);
        comp.set_duration_micros(micros);
        if (id > 0) comp.add_data_deps(id - 1);
        add_attr(comp, "is_cpu_op").set_bool_val(false);
        if (Status s = add(comp); !s) return s.error();
        ++id;
      }
      if (phase.collective == CollectiveKind::kNone || phase.bytes == 0) continue;
      const uint32_t mask = mask_of(phase);
      if (mask == 0) continue;
      coll.Clear();
      coll.set_id(id);
      coll.set_name(
          fmt::format("{}_{}_{}", layer.name, kPhase[p], collective_name(phase.collective)));
      coll.set_type(ChakraProtoMsg::COMM_COLL_NODE);
      if (id > 0) coll.add_data_deps(id - 1);
      add_attr(coll, "is_cpu_op").set_bool_val(false);
      add_attr(coll, "comm_type").set_int64_val(comm_type(phase.collective));
      add_attr(coll, "comm_size").set_int64_val(static_cast<int64_t>(std::llround(phase.bytes)));
      add_attr(coll, "pg_name").set_string_val(std::to_string(group_of(mask, rank)));
      if (Status s = add(coll); !s) return s.error();
      ++id;
    }
    graph.finish();
    if (writer) {
      if (Status s = writer->close(); !s) return s.error();
    }
  }
  workload.traces = chakra::TraceSet::from_graphs("libra", std::move(graphs));

  auto groups = std::make_shared<chakra::CommGroups>(ranks);
  for (size_t g = 0; g < group_members.size(); ++g) {
    if (Status s = groups->add(std::to_string(g + 1), group_members[g], "libra groups"); !s) {
      return s.error();
    }
  }
  workload.groups = std::move(groups);
  if (!folder.empty()) {
    std::string text = "{\n";
    for (size_t g = 0; g < group_members.size(); ++g) {
      text += fmt::format("  \"{}\": [{}]{}\n", g + 1, fmt::join(group_members[g], ", "),
                          g + 1 < group_members.size() ? "," : "");
    }
    text += "}\n";
    if (Status s =
            write_text_file((std::filesystem::path(folder) / "comm_groups.json").string(), text);
        !s) {
      return s.error();
    }
  }

  std::vector<std::string> impl, a2a;
  for (const SimulatedDimension& s : sim) {
    const bool direct = problem.dimensions[s.parent].kind == TopologyKind::kFullyConnected;
    impl.push_back(direct ? "\"direct\"" : "\"ring\"");
    a2a.push_back("\"direct\"");
  }
  const std::string system = fmt::format(
      "{{\n  \"scheduling-policy\": \"FIFO\",\n  \"endpoint-delay\": 0,\n"
      "  \"active-chunks-per-dimension\": 1,\n  \"preferred-dataset-splits\": {2},\n"
      "  \"all-reduce-implementation\": [{0}],\n  \"all-gather-implementation\": [{0}],\n"
      "  \"reduce-scatter-implementation\": [{0}],\n  \"all-to-all-implementation\": [{1}],\n"
      "  \"collective-optimization\": \"localBWAware\",\n  \"local-mem-bw\": 1000000000\n}}\n",
      fmt::join(impl, ", "), fmt::join(a2a, ", "), chunks);
  Expected<sys::SystemConfig> config = sys::parse_system_config("libra system", system);
  if (!config) return config.error();
  workload.system = std::make_shared<const sys::SystemConfig>(std::move(*config));
  workload.system_json = system;
  if (!folder.empty()) {
    if (Status s =
            write_text_file((std::filesystem::path(folder) / "system.json").string(), system);
        !s) {
      return s.error();
    }
  }
  return workload;
}

std::string libra_network_yaml(const Problem& problem, const LibraWorkload& workload,
                               const std::vector<double>& bandwidth, double latency_ns) {
  std::vector<std::string> kinds, sizes, bws, lats;
  for (const SimulatedDimension& s : workload.dimensions) {
    const TopologyKind kind = problem.dimensions[s.parent].kind;
    kinds.push_back(topology_name(kind));
    sizes.push_back(std::to_string(s.size));
    // The simulator's ring runs one direction of a Ring (and uses a Switch uplink), direct uses
    // all n-1 links of a FullyConnected group: links of B_d (B_d / (n-1) for FullyConnected) give
    // the rate B_d per NPU the model assumes. Its GB is 2^30 bytes, LIBRA's 10^9. A part of a
    // dimension (simulated_dimensions) gets the same B_d per NPU over its own links.
    double link = bandwidth[s.parent];
    if (kind == TopologyKind::kFullyConnected) link /= static_cast<double>(s.size - 1);
    bws.push_back(fmt::format("{:.9f}", link * 1e9 / 1073741824.0));
    lats.push_back(fmt::format("{:.17g}", latency_ns));
  }
  return fmt::format("topology: [ {} ]\nnpus_count: [ {} ]\nbandwidth: [ {} ]\nlatency: [ {} ]\n",
                     fmt::join(kinds, ", "), fmt::join(sizes, ", "), fmt::join(bws, ", "),
                     fmt::join(lats, ", "));
}

Expected<double> simulate_allocation(const Problem& problem, const LibraWorkload& workload,
                                     const std::vector<double>& bandwidth, double latency_ns) {
  // The network is parsed from the text a file would hold, so that `orrery run` on the files of
  // write_libra_workload gives the same times to the picosecond.
  Expected<net::NetworkDescription> network = net::parse_network_yaml(
      libra_network_yaml(problem, workload, bandwidth, latency_ns), "libra network");
  if (!network) return network.error();
  sim::Scenario::Inputs inputs;
  inputs.traces = workload.traces;
  inputs.comm_groups = workload.groups;
  inputs.system = workload.system;
  inputs.network = std::make_shared<const net::NetworkDescription>(std::move(*network));
  inputs.network_name = "libra network";
  inputs.settings.threads = 1;
  Expected<sim::Scenario> scenario = sim::Scenario::create(std::move(inputs));
  if (!scenario) return scenario.error();
  Expected<sim::RunResult> result = sim::simulate(*scenario);
  if (!result) return result.error();
  return result->end.ns();
}

}  // namespace orrery::design
