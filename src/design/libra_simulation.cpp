#include "design/libra_simulation.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "chakra/trace_file.h"
#include "chakra/trace_set.h"
#include "sim/simulation.h"

namespace orrery::design {

namespace {

using ChakraProtoMsg::AttributeProto;
using ChakraProtoMsg::Node;

AttributeProto& add_attr(Node& node, const char* name) {
  AttributeProto* attribute = node.add_attr();
  attribute->set_name(name);
  return *attribute;
}

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

Status write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return Error::make(ErrorKind::kIo, "{}: cannot write", path);
  out << text;
  out.close();
  if (!out) return Error::make(ErrorKind::kIo, "{}: write failed", path);
  return Status::ok();
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

}  // namespace

Expected<LibraTraces> write_libra_traces(const Problem& problem, const std::string& folder,
                                         uint32_t chunks) {
  Expected<TrafficModel> model = build_traffic_model(problem);
  if (!model) return model.error();
  const size_t dims = problem.dimensions.size();
  if (model->npus > 65536) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "{} NPUs: simulating the LIBRA check needs at most 65,536 ranks",
                       model->npus);
  }
  const auto ranks = static_cast<uint32_t>(model->npus);
  std::vector<uint32_t> stride(dims, 1);
  for (size_t d = 1; d < dims; ++d) stride[d] = stride[d - 1] * problem.dimensions[d - 1].size;

  // Groups keyed by (used-dimension mask, rank of the group's first member).
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> group_ids;
  std::vector<std::vector<uint32_t>> group_members;
  auto group_of = [&](uint32_t mask, uint32_t rank) -> uint32_t {
    uint32_t base = rank;
    for (size_t d = 0; d < dims; ++d) {
      if ((mask & (1u << d)) != 0) {
        const uint32_t coordinate = (rank / stride[d]) % problem.dimensions[d].size;
        base -= coordinate * stride[d];
      }
    }
    auto [it, inserted] = group_ids.emplace(std::make_pair(mask, base),
                                            static_cast<uint32_t>(group_members.size() + 1));
    if (inserted) {
      std::vector<uint32_t> members{base};
      for (size_t d = 0; d < dims; ++d) {
        if ((mask & (1u << d)) == 0) continue;
        std::vector<uint32_t> grown;
        for (uint32_t m : members) {
          for (uint32_t c = 0; c < problem.dimensions[d].size; ++c)
            grown.push_back(m + c * stride[d]);
        }
        members = std::move(grown);
      }
      std::sort(members.begin(), members.end());
      group_members.push_back(std::move(members));
    }
    return it->second;
  };

  for (const Layer& layer : problem.layers) {
    for (size_t p = 0; p < 3; ++p) {
      const Phase& phase = layer.phases[p];
      if (phase.collective == CollectiveKind::kNone || phase.bytes == 0) continue;
      for (size_t d = 0; d < dims; ++d) {
        const int32_t n = phase.groups[d];
        if (n > 1 && static_cast<uint32_t>(n) != problem.dimensions[d].size) {
          return Error::make(ErrorKind::kConfig,
                             "layer '{}': group size {} in dimension {} of size {}; the "
                             "simulation check needs whole dimensions",
                             layer.name, n, d, problem.dimensions[d].size);
        }
      }
    }
  }

  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) return Error::make(ErrorKind::kIo, "{}: cannot create: {}", folder, ec.message());
  LibraTraces traces;
  traces.prefix = (std::filesystem::path(folder) / "libra").string();
  traces.ranks = ranks;
  ChakraProtoMsg::GlobalMetadata metadata;
  metadata.set_version(chakra::kDefaultSchemaVersion);
  const auto order = schedule(problem.layers.size());
  for (uint32_t rank = 0; rank < ranks; ++rank) {
    Expected<chakra::TraceWriter> writer =
        chakra::TraceWriter::create(chakra::rank_trace_path(traces.prefix, rank), metadata);
    if (!writer) return writer.error();
    uint64_t id = 0;
    for (const auto& [l, p] : order) {
      const Layer& layer = problem.layers[l];
      const Phase& phase = layer.phases[p];
      static constexpr const char* kPhase[] = {"fwd", "ig", "wg"};
      const auto micros = static_cast<uint64_t>(std::llround(phase.compute_ns / 1000.0));
      if (micros > 0) {
        Node comp;
        comp.set_id(id);
        comp.set_name(fmt::format("{}_{}_compute", layer.name, kPhase[p]));
        comp.set_type(ChakraProtoMsg::COMP_NODE);
        comp.set_duration_micros(micros);
        if (id > 0) comp.add_data_deps(id - 1);
        add_attr(comp, "is_cpu_op").set_bool_val(false);
        if (Status s = writer->write(comp); !s) return s.error();
        ++id;
      }
      if (phase.collective == CollectiveKind::kNone || phase.bytes == 0) continue;
      uint32_t mask = 0;
      for (size_t d = 0; d < dims; ++d) {
        if (phase.groups[d] > 1) mask |= 1u << d;
      }
      if (mask == 0) continue;
      Node coll;
      coll.set_id(id);
      coll.set_name(
          fmt::format("{}_{}_{}", layer.name, kPhase[p], collective_name(phase.collective)));
      coll.set_type(ChakraProtoMsg::COMM_COLL_NODE);
      if (id > 0) coll.add_data_deps(id - 1);
      add_attr(coll, "is_cpu_op").set_bool_val(false);
      add_attr(coll, "comm_type").set_int64_val(comm_type(phase.collective));
      add_attr(coll, "comm_size").set_int64_val(static_cast<int64_t>(std::llround(phase.bytes)));
      add_attr(coll, "pg_name").set_string_val(std::to_string(group_of(mask, rank)));
      if (Status s = writer->write(coll); !s) return s.error();
      ++id;
    }
    if (Status s = writer->close(); !s) return s.error();
  }

  std::string groups = "{\n";
  for (size_t g = 0; g < group_members.size(); ++g) {
    groups += fmt::format("  \"{}\": [{}]{}\n", g + 1, fmt::join(group_members[g], ", "),
                          g + 1 < group_members.size() ? "," : "");
  }
  groups += "}\n";
  traces.comm_groups = (std::filesystem::path(folder) / "comm_groups.json").string();
  if (Status s = write_text(traces.comm_groups, groups); !s) return s.error();

  std::vector<std::string> impl, a2a;
  for (const Dimension& d : problem.dimensions) {
    impl.push_back(d.kind == TopologyKind::kFullyConnected ? "\"direct\"" : "\"ring\"");
    a2a.push_back("\"direct\"");
  }
  const std::string system = fmt::format(
      "{{\n  \"scheduling-policy\": \"FIFO\",\n  \"endpoint-delay\": 0,\n"
      "  \"active-chunks-per-dimension\": 1,\n  \"preferred-dataset-splits\": {2},\n"
      "  \"all-reduce-implementation\": [{0}],\n  \"all-gather-implementation\": [{0}],\n"
      "  \"reduce-scatter-implementation\": [{0}],\n  \"all-to-all-implementation\": [{1}],\n"
      "  \"collective-optimization\": \"localBWAware\",\n  \"local-mem-bw\": 1000000000\n}}\n",
      fmt::join(impl, ", "), fmt::join(a2a, ", "), chunks);
  traces.system = (std::filesystem::path(folder) / "system.json").string();
  if (Status s = write_text(traces.system, system); !s) return s.error();
  return traces;
}

Expected<double> simulate_allocation(const Problem& problem, const LibraTraces& traces,
                                     const std::vector<double>& bandwidth,
                                     const std::string& network_path, double latency_ns) {
  std::vector<std::string> kinds, sizes, bws, lats;
  for (size_t d = 0; d < problem.dimensions.size(); ++d) {
    kinds.push_back(topology_name(problem.dimensions[d].kind));
    sizes.push_back(std::to_string(problem.dimensions[d].size));
    // The simulator's ring runs one direction of a Ring (and uses a Switch uplink), direct uses
    // all n-1 links of a FullyConnected group: links of B_d (B_d / (n-1) for FullyConnected) give
    // the rate B_d per NPU the model assumes. Its GB is 2^30 bytes, LIBRA's 10^9.
    double link = bandwidth[d];
    if (problem.dimensions[d].kind == TopologyKind::kFullyConnected) {
      link /= static_cast<double>(problem.dimensions[d].size - 1);
    }
    bws.push_back(fmt::format("{:.9f}", link * 1e9 / 1073741824.0));
    lats.push_back(fmt::format("{:.17g}", latency_ns));
  }
  const std::string network = fmt::format(
      "topology: [ {} ]\nnpus_count: [ {} ]\nbandwidth: [ {} ]\nlatency: [ {} ]\n",
      fmt::join(kinds, ", "), fmt::join(sizes, ", "), fmt::join(bws, ", "), fmt::join(lats, ", "));
  if (Status s = write_text(network_path, network); !s) return s.error();
  sim::RunConfig config;
  config.workload = traces.prefix;
  config.system = traces.system;
  config.network = network_path;
  config.comm_groups = traces.comm_groups;
  config.threads = 1;
  Expected<sim::RunResult> result = sim::run_simulation(config, [](const std::string&) {});
  if (!result) return result.error();
  return result->end.ns();
}

}  // namespace orrery::design
