#include "design/libra_workload.h"

#include <cctype>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "chakra/trace_file.h"
#include "chakra/trace_set.h"
#include "core/units.h"
#include "system/system_config.h"
#include "workload/executor.h"

namespace orrery::design {

namespace {

uint64_t network_npus(const std::vector<Dimension>& dims) {
  uint64_t npus = 1;
  for (const Dimension& d : dims) npus *= d.size;
  return npus;
}

// LIBRA's collective for a Chakra comm_type; kNone for the ones its model does not have.
CollectiveKind libra_collective(int64_t comm_type) {
  switch (comm_type) {
    case ChakraProtoMsg::ALL_REDUCE:
      return CollectiveKind::kAllReduce;
    case ChakraProtoMsg::ALL_GATHER:
      return CollectiveKind::kAllGather;
    case ChakraProtoMsg::ALL_TO_ALL:
      return CollectiveKind::kAllToAll;
    case ChakraProtoMsg::REDUCE_SCATTER:
    case ChakraProtoMsg::REDUCE_SCATTER_BLOCK:  // the simulator runs it as a reduce-scatter
      return CollectiveKind::kReduceScatter;
    default:
      return CollectiveKind::kNone;
  }
}

std::string network_text(const std::vector<Dimension>& dims) {
  std::vector<uint32_t> sizes;
  for (const Dimension& d : dims) sizes.push_back(d.size);
  return fmt::format("{}", fmt::join(sizes, " x "));
}

std::string ranks_text(const std::vector<uint32_t>& ranks) {
  if (ranks.size() <= 8) return fmt::format("[{}]", fmt::join(ranks, ", "));
  return fmt::format("[{}, ... {} ranks]",
                     fmt::join(std::vector<uint32_t>(ranks.begin(), ranks.begin() + 4), ", "),
                     ranks.size());
}

}  // namespace

Expected<ComputeTiming> load_compute_timing(const std::string& system_path) {
  ComputeTiming timing;
  if (system_path.empty()) return timing;
  Expected<sys::SystemConfig> system = sys::load_system_config(system_path);
  if (!system) return system.error();
  timing.system = system_path;
  timing.roofline = system->roofline_enabled && !system->replay_only;
  timing.peak_tflops = system->peak_perf_tflops.value_or(0);
  timing.mem_bw = system->local_mem_bw_gbps.value_or(0);
  return timing;
}

std::string DerivedWorkload::summary() const {
  std::string timed;
  if (timed_by_roofline > 0) {
    timed = fmt::format("{} node{} by the roofline", format_count(timed_by_roofline),
                        timed_by_roofline == 1 ? "" : "s");
  }
  if (timed_by_duration > 0) {
    timed += fmt::format("{}{} node{} by duration_micros", timed.empty() ? "" : ", ",
                         format_count(timed_by_duration), timed_by_duration == 1 ? "" : "s");
  }
  std::string left;
  auto leave = [&left](uint64_t count, std::string_view what) {
    if (count == 0) return;
    left += fmt::format("{}{} {}", left.empty() ? "; left out: " : ", ", format_count(count), what);
  };
  leave(point_to_point, fmt::format("point-to-point message{} ({})", point_to_point == 1 ? "" : "s",
                                    format_bytes(point_to_point_bytes)));
  leave(unmodelled, "collectives LIBRA does not model (broadcast, reduce, gather, ...)");
  leave(single_rank, "collectives over one rank");
  leave(cpu_nodes, "CPU operations");
  return fmt::format("rank {} of {}: {} collectives, {:.3f} ms of compute{}{}", rank, source,
                     format_count(collectives), compute_ns / 1e6,
                     timed.empty() ? "" : fmt::format(" ({})", timed), left);
}

Expected<std::vector<int32_t>> group_dimension_sizes(const std::vector<uint32_t>& ranks,
                                                     const std::vector<Dimension>& dims) {
  const uint64_t npus = network_npus(dims);
  std::vector<std::set<uint32_t>> coordinates(dims.size());
  for (const uint32_t rank : ranks) {
    if (rank >= npus) {
      return Error::make(ErrorKind::kConfig, "rank {} is outside the {}-NPU network ({})", rank,
                         npus, network_text(dims));
    }
    uint32_t rest = rank;
    for (size_t d = 0; d < dims.size(); ++d) {
      coordinates[d].insert(rest % dims[d].size);
      rest /= dims[d].size;
    }
  }
  // The ranks are distinct and lie in the product of their coordinate sets: they are that whole
  // product exactly when the counts agree.
  uint64_t product = 1;
  std::vector<int32_t> sizes(dims.size(), -1);
  for (size_t d = 0; d < dims.size(); ++d) {
    product *= coordinates[d].size();
    if (coordinates[d].size() > 1) sizes[d] = static_cast<int32_t>(coordinates[d].size());
  }
  if (product != ranks.size()) {
    return Error::make(ErrorKind::kConfig,
                       "the group {} is not a sub-grid of the {} network (it would need all {} "
                       "combinations of the coordinates it takes); LIBRA's model cannot place it",
                       ranks_text(ranks), network_text(dims), product);
  }
  return sizes;
}

Expected<DerivedWorkload> workload_from_graph(const chakra::TraceGraph& graph,
                                              const chakra::CommGroups& groups, uint32_t rank,
                                              const std::vector<Dimension>& dims,
                                              const ComputeTiming& timing) {
  DerivedWorkload out;
  out.source = graph.source();
  out.rank = rank;
  double pending_ns = 0;  // compute since the last collective
  auto where = [&](chakra::NodeIndex node) {
    return fmt::format("{} node {}", graph.source(), graph.id(node));
  };
  for (chakra::NodeIndex node = 0; node < graph.size(); ++node) {
    const int32_t type = graph.type(node);
    Expected<bool> cpu = graph.get_bool_or(node, "is_cpu_op", false);
    if (!cpu) return cpu.error().with_context(where(node));
    if (type == ChakraProtoMsg::COMP_NODE || (type == ChakraProtoMsg::COMM_COLL_NODE && *cpu &&
                                              !graph.find_attribute(node, "comm_type"))) {
      if (*cpu) {  // host-side work, not the accelerator compute LIBRA counts
        ++out.cpu_nodes;
        continue;
      }
      Expected<std::optional<uint64_t>> flops = graph.get_uint(node, "num_ops");
      if (!flops) return flops.error().with_context(where(node));
      Expected<std::optional<uint64_t>> bytes = graph.get_uint(node, "tensor_size");
      if (!bytes) return bytes.error().with_context(where(node));
      const uint64_t f = flops->value_or(0);
      double ns = 0;
      if (timing.roofline && f > 0) {
        ns = workload::roofline_time(f, bytes->value_or(0), timing.peak_tflops, timing.mem_bw).ns();
        ++out.timed_by_roofline;
      } else if (graph.duration_micros(node) > 0) {
        ns = static_cast<double>(graph.duration_micros(node)) * 1000.0;
        ++out.timed_by_duration;
      } else if (f > 0) {
        return Error::make(ErrorKind::kInvalidArgument,
                           "{} ('{}'): {} FLOPs and no duration_micros; give a system file with "
                           "roofline-enabled, peak-perf and local-mem-bw (--system) to time it",
                           where(node), graph.name(node), f);
      } else {
        continue;  // no time and no FLOPs: the simulator skips it too
      }
      pending_ns += ns;
      out.compute_ns += ns;
      continue;
    }
    if (type == ChakraProtoMsg::COMM_SEND_NODE || type == ChakraProtoMsg::COMM_RECV_NODE) {
      ++out.point_to_point;
      Expected<std::optional<uint64_t>> size = graph.get_uint(node, "comm_size");
      if (!size) return size.error().with_context(where(node));
      out.point_to_point_bytes += size->value_or(0);
      continue;
    }
    if (type != ChakraProtoMsg::COMM_COLL_NODE) continue;
    Expected<std::optional<int64_t>> comm_type = graph.get_int(node, "comm_type");
    if (!comm_type) return comm_type.error().with_context(where(node));
    if (!comm_type->has_value()) {
      return Error::make(ErrorKind::kTrace, "{}: COMM_COLL_NODE without comm_type", where(node));
    }
    const CollectiveKind kind = libra_collective(**comm_type);
    if (kind == CollectiveKind::kNone) {
      ++out.unmodelled;
      continue;
    }
    Expected<std::optional<uint64_t>> size = graph.get_uint(node, "comm_size");
    if (!size) return size.error().with_context(where(node));
    Expected<std::optional<std::string_view>> pg = graph.get_string(node, "pg_name");
    if (!pg) return pg.error().with_context(where(node));
    const std::string pg_name(pg->value_or(""));
    const chakra::CommGroup* group = groups.find(pg_name);
    if (group == nullptr) {
      return Error::make(ErrorKind::kTrace,
                         "{}: pg_name '{}' names no communicator group; give the group file "
                         "(--comm-groups)",
                         where(node), pg_name);
    }
    if (!std::binary_search(group->ranks.begin(), group->ranks.end(), rank)) {
      return Error::make(ErrorKind::kTrace,
                         "{}: rank {} runs a collective on group '{}' {} that "
                         "does not hold it",
                         where(node), rank, pg_name, ranks_text(group->ranks));
    }
    Expected<std::vector<int32_t>> sizes = group_dimension_sizes(group->ranks, dims);
    if (!sizes) {
      return sizes.error().with_context(fmt::format("{} (group '{}')", where(node), pg_name));
    }
    if (group->ranks.size() < 2 || size->value_or(0) == 0) {
      ++out.single_rank;
      continue;
    }
    Layer layer;
    layer.name = std::string(graph.name(node));
    if (layer.name.empty()) layer.name = fmt::format("node{}", graph.id(node));
    Phase& phase = layer.phases[0];
    phase.compute_ns = pending_ns;
    phase.collective = kind;
    phase.bytes = static_cast<double>(size->value_or(0));
    phase.groups = std::move(*sizes);
    for (size_t p = 1; p < 3; ++p) layer.phases[p].groups.assign(dims.size(), -1);
    out.layers.push_back(std::move(layer));
    ++out.collectives;
    pending_ns = 0;
  }
  if (pending_ns > 0 || out.layers.empty()) {
    Layer tail;
    tail.name = out.layers.empty() ? "compute" : "compute after the last collective";
    tail.phases[0].compute_ns = pending_ns;
    for (Phase& p : tail.phases) p.groups.assign(dims.size(), -1);
    out.layers.push_back(std::move(tail));
  }
  return out;
}

Expected<DerivedWorkload> workload_from_trace(const std::string& prefix,
                                              const std::string& groups_file, uint32_t rank,
                                              const std::vector<Dimension>& dims,
                                              const ComputeTiming& timing) {
  Expected<chakra::TraceFiles> files = chakra::resolve_trace_files(prefix);
  if (!files) return files.error();
  const uint64_t npus = network_npus(dims);
  if (files->paths.size() != npus) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "{}: {} rank file{} but the network ({}) has {} NPUs; the trace set and the "
                       "network must have the same ranks",
                       prefix, files->paths.size(), files->paths.size() == 1 ? "" : "s",
                       network_text(dims), npus);
  }
  if (rank >= files->paths.size()) {
    return Error::make(ErrorKind::kInvalidArgument, "rank {}: the trace set {} has ranks 0..{}",
                       rank, prefix, files->paths.size() - 1);
  }
  chakra::CommGroups groups(static_cast<uint32_t>(npus));
  std::string group_path = groups_file;
  if (group_path.empty()) {
    std::error_code ec;
    if (files->from_prefix && std::filesystem::is_regular_file(prefix + ".json", ec)) {
      group_path = prefix + ".json";
    }
  }
  if (!group_path.empty()) {
    if (Status s = chakra::load_comm_group_file(group_path, groups); !s) return s.error();
  }
  Expected<chakra::TraceGraph> graph = chakra::load_trace(files->paths[rank]);
  if (!graph) return graph.error();
  for (chakra::NodeIndex node = 0; node < graph->size(); ++node) {
    if (graph->type(node) != ChakraProtoMsg::METADATA_NODE) continue;
    const std::string where = fmt::format("{} node {}", graph->source(), graph->id(node));
    if (Status s = chakra::add_groups_from_metadata(graph->inputs_values(node), where, groups);
        !s) {
      return s.error();
    }
  }
  return workload_from_graph(*graph, groups, rank, dims, timing);
}

Expected<DerivedWorkload> workload_from_llm(const gen::LlmGenerator& generator, uint32_t rank,
                                            const std::vector<Dimension>& dims,
                                            const ComputeTiming& timing) {
  const uint64_t npus = network_npus(dims);
  if (generator.ranks() != npus) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "the plan has {} ranks (tp {} x cp {} x dp {} x pp {}) but the network ({}) "
                       "has {} NPUs",
                       generator.ranks(), generator.plan().tp, generator.plan().cp,
                       generator.plan().dp, generator.plan().pp, network_text(dims), npus);
  }
  if (rank >= generator.ranks()) {
    return Error::make(ErrorKind::kInvalidArgument, "rank {}: the plan has ranks 0..{}", rank,
                       generator.ranks() - 1);
  }
  chakra::CommGroups groups(generator.ranks());
  for (uint32_t id = 1; id <= generator.groups().count(); ++id) {
    if (Status s = groups.add(std::to_string(id), generator.groups().members(id), "the plan"); !s) {
      return s.error();
    }
  }
  chakra::TraceGraph graph;
  graph.set_source(fmt::format("the {} plan", generator.model().name));
  const gen::RankProgram program = generator.build(rank);
  if (Status s = program.emit([&graph](const ChakraProtoMsg::Node& node) {
        graph.add_node(node);
        return Status::ok();
      });
      !s) {
    return s.error();
  }
  graph.finish();
  return workload_from_graph(graph, groups, rank, dims, timing);
}

Expected<std::vector<std::pair<std::string, std::string>>> parse_llm_plan_text(
    std::string_view text) {
  std::vector<std::string> words;
  size_t at = 0;
  while (at < text.size()) {
    while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at])) != 0) ++at;
    const size_t start = at;
    while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at])) == 0) ++at;
    if (at > start) words.emplace_back(text.substr(start, at - start));
  }
  std::vector<std::pair<std::string, std::string>> options;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word.size() < 3 || word.compare(0, 2, "--") != 0) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "'{}' is not an option (expected --name [value], as orrery gen llm takes "
                         "them: {})",
                         word, gen::llm_option_names());
    }
    std::string name = word.substr(2);
    std::string value = "true";  // a flag (--sp, --recompute)
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else if (i + 1 < words.size() && words[i + 1].compare(0, 2, "--") != 0) {
      value = words[++i];
    }
    options.emplace_back(std::move(name), std::move(value));
  }
  return options;
}

Expected<DerivedWorkload> derive_workload(const WorkloadSource& source,
                                          const std::vector<Dimension>& dims) {
  Expected<ComputeTiming> timing = load_compute_timing(source.system);
  if (!timing) return timing.error().with_context(source.where);
  if (!source.trace.empty()) {
    Expected<DerivedWorkload> derived =
        workload_from_trace(source.trace, source.groups, source.rank, dims, *timing);
    if (!derived) return derived.error().with_context(source.where);
    return derived;
  }
  gen::LlmOptions options;
  for (const auto& [name, value] : source.llm) {
    if (Status s = gen::set_llm_option(options, name, value); !s) {
      return s.error().with_context(source.where);
    }
  }
  Expected<gen::LlmGenerator> generator = gen::make_llm_generator(options);
  if (!generator) return generator.error().with_context(source.where);
  Expected<DerivedWorkload> derived = workload_from_llm(*generator, source.rank, dims, *timing);
  if (!derived) return derived.error().with_context(source.where);
  return derived;
}

}  // namespace orrery::design
