#include "gen/rank_program.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <system_error>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "chakra/rank_map.h"
#include "chakra/trace_file.h"
#include "chakra/trace_set.h"
#include "chakra/trace_set_loader.h"
#include "core/parallel.h"
#include "gen/common.h"

namespace orrery::gen {

namespace {

using ChakraProtoMsg::AttributeProto;

}  // namespace

ProgRef RankProgram::add(Node node, std::initializer_list<ProgRef> data) {
  const auto ref = static_cast<ProgRef>(nodes_.size());
  nodes_.push_back(std::move(node));
  for (ProgRef parent : data) depend(ref, parent, false);
  return ref;
}

ProgRef RankProgram::compute(std::string name, const OpCost& cost,
                             std::initializer_list<ProgRef> data, Lane lane) {
  Node node;
  node.name = std::move(name);
  node.kind = ProgKind::kCompute;
  node.lane = lane;
  node.flops = cost.flops;
  node.bytes = cost.bytes;
  node.gemm = cost.gemm;
  return add(std::move(node), data);
}

ProgRef RankProgram::timed(std::string name, uint64_t duration_us, uint64_t bytes,
                           std::initializer_list<ProgRef> data, Lane lane) {
  Node node;
  node.name = std::move(name);
  node.kind = ProgKind::kCompute;
  node.lane = lane;
  node.bytes = bytes;
  node.duration_us = duration_us;
  return add(std::move(node), data);
}

ProgRef RankProgram::collective(std::string name, ChakraProtoMsg::CollectiveCommType type,
                                uint64_t bytes, uint32_t group, std::initializer_list<ProgRef> data,
                                Lane lane) {
  Node node;
  node.name = std::move(name);
  node.kind = ProgKind::kCollective;
  node.lane = lane;
  node.comm_type = type;
  node.bytes = bytes;
  node.group = group;
  return add(std::move(node), data);
}

ProgRef RankProgram::send(std::string name, uint32_t dst, int32_t tag, uint64_t bytes,
                          std::initializer_list<ProgRef> data) {
  Node node;
  node.name = std::move(name);
  node.kind = ProgKind::kSend;
  node.bytes = bytes;
  node.peer = static_cast<int32_t>(dst);
  node.tag = tag;
  return add(std::move(node), data);
}

ProgRef RankProgram::recv(std::string name, uint32_t src, int32_t tag, uint64_t bytes) {
  Node node;
  node.name = std::move(name);
  node.kind = ProgKind::kRecv;
  node.bytes = bytes;
  node.peer = static_cast<int32_t>(src);
  node.tag = tag;
  return add(std::move(node), {});
}

void RankProgram::depend(ProgRef child, ProgRef parent, bool control) {
  if (parent == kNoNode || child == kNoNode) return;
  edges_.push_back({child, parent, control});
}

void RankProgram::depend(ProgRef child, const std::vector<ProgRef>& parents, bool control) {
  for (ProgRef parent : parents) depend(child, parent, control);
}

void RankProgram::issue_after(ProgRef node, ProgRef anchor) {
  if (anchor == kNoNode) return;
  assert(anchor < node);
  if (issue_after_.size() <= node) issue_after_.resize(size_t{node} + 1, kNoNode);
  issue_after_[node] = anchor;
}

void RankProgram::order_communication() {
  // Program order, with each anchored node moved to just after its anchor: (position, then 0 for
  // the anchor itself and 1 for nodes placed after it, then creation order). Moving a node whose
  // parents all come no later than its anchor keeps the order topological, so the chain adds no
  // cycle.
  std::vector<std::tuple<ProgRef, int, ProgRef>> comm;
  for (ProgRef ref = 0; ref < nodes_.size(); ++ref) {
    const ProgKind kind = nodes_[ref].kind;
    if (kind != ProgKind::kCollective && kind != ProgKind::kSend) continue;
    const ProgRef anchor = ref < issue_after_.size() ? issue_after_[ref] : kNoNode;
    comm.emplace_back(anchor == kNoNode ? ref : anchor, anchor == kNoNode ? 0 : 1, ref);
  }
#ifndef NDEBUG
  for (const Edge& edge : edges_) {
    if (edge.child < issue_after_.size() && issue_after_[edge.child] != kNoNode)
      assert(edge.parent <= issue_after_[edge.child]);
  }
#endif
  std::sort(comm.begin(), comm.end());
  ProgRef previous = kNoNode;
  for (const auto& entry : comm) {
    const ProgRef ref = std::get<2>(entry);
    depend(ref, previous, /*control=*/true);
    previous = ref;
  }
}

std::vector<ProgRef> RankProgram::open_compute(ProgRef first, size_t first_edge) const {
  std::vector<uint8_t> has_child(nodes_.size() - first, 0);
  for (size_t index = first_edge; index < edges_.size(); ++index) {
    const Edge& edge = edges_[index];
    if (edge.parent >= first && edge.child >= first &&
        nodes_[edge.child].kind == ProgKind::kCompute) {
      has_child[edge.parent - first] = 1;
    }
  }
  std::vector<ProgRef> open;
  for (size_t ref = first; ref < nodes_.size(); ++ref) {
    if (nodes_[ref].kind == ProgKind::kCompute && nodes_[ref].lane == Lane::kMain &&
        !has_child[ref - first]) {
      open.push_back(static_cast<ProgRef>(ref));
    }
  }
  return open;
}

Status RankProgram::emit(const std::function<Status(const ChakraProtoMsg::Node&)>& out) const {
  // Ids: main lane in program order, then the background lane.
  std::vector<uint64_t> id(nodes_.size());
  std::vector<ProgRef> order;
  order.reserve(nodes_.size());
  for (const Lane lane : {Lane::kMain, Lane::kBackground}) {
    for (size_t ref = 0; ref < nodes_.size(); ++ref) {
      if (nodes_[ref].lane != lane) continue;
      id[ref] = order.size();
      order.push_back(static_cast<ProgRef>(ref));
    }
  }
  // Parents grouped by child (counting sort, stable: edges keep the order they were added in).
  std::vector<uint32_t> first_edge(nodes_.size() + 1, 0);
  for (const Edge& edge : edges_) ++first_edge[edge.child + 1];
  for (size_t ref = 0; ref < nodes_.size(); ++ref) first_edge[ref + 1] += first_edge[ref];
  std::vector<uint32_t> fill(first_edge.begin(), first_edge.end() - 1);
  std::vector<const Edge*> by_child(edges_.size());
  for (const Edge& edge : edges_) by_child[fill[edge.child]++] = &edge;

  ChakraProtoMsg::Node out_node;
  for (ProgRef ref : order) {
    const Node& node = nodes_[ref];
    out_node.Clear();
    out_node.set_id(id[ref]);
    out_node.set_name(node.name);
    for (uint32_t index = first_edge[ref]; index < first_edge[ref + 1]; ++index) {
      const Edge& edge = *by_child[index];
      if (edge.control) {
        out_node.add_ctrl_deps(id[edge.parent]);
      } else {
        out_node.add_data_deps(id[edge.parent]);
      }
    }
    switch (node.kind) {
      case ProgKind::kCompute:
        out_node.set_type(ChakraProtoMsg::COMP_NODE);
        add_attr(out_node, "is_cpu_op").set_bool_val(false);
        add_attr(out_node, "num_ops").set_int64_val(static_cast<int64_t>(node.flops));
        add_attr(out_node, "tensor_size").set_uint64_val(node.bytes);
        if (node.gemm.valid()) {
          add_attr(out_node, "gemm_m").set_uint64_val(node.gemm.m);
          add_attr(out_node, "gemm_n").set_uint64_val(node.gemm.n);
          add_attr(out_node, "gemm_k").set_uint64_val(node.gemm.k);
          add_attr(out_node, "gemm_batch").set_uint64_val(node.gemm.batch);
        }
        if (node.duration_us > 0) out_node.set_duration_micros(node.duration_us);
        break;
      case ProgKind::kCollective:
        out_node.set_type(ChakraProtoMsg::COMM_COLL_NODE);
        add_attr(out_node, "is_cpu_op").set_bool_val(false);
        add_attr(out_node, "comm_type").set_int64_val(node.comm_type);
        add_attr(out_node, "comm_size").set_int64_val(static_cast<int64_t>(node.bytes));
        if (node.group != 0)
          add_attr(out_node, "pg_name").set_string_val(std::to_string(node.group));
        break;
      case ProgKind::kSend:
      case ProgKind::kRecv:
        out_node.set_type(node.kind == ProgKind::kSend ? ChakraProtoMsg::COMM_SEND_NODE
                                                       : ChakraProtoMsg::COMM_RECV_NODE);
        add_attr(out_node, "is_cpu_op").set_bool_val(false);
        add_attr(out_node, node.kind == ProgKind::kSend ? "comm_dst" : "comm_src")
            .set_int32_val(node.peer);
        add_attr(out_node, "comm_tag").set_int32_val(node.tag);
        add_attr(out_node, "comm_size").set_int64_val(static_cast<int64_t>(node.bytes));
        break;
    }
    if (Status status = out(out_node); !status) return status;
  }
  return Status::ok();
}

uint64_t RankProgram::total_flops() const {
  uint64_t flops = 0;
  for (const Node& node : nodes_) flops += node.flops;
  return flops;
}

namespace {

// The GlobalMetadata of every generated rank: the schema version and the generator's command.
ChakraProtoMsg::GlobalMetadata rank_metadata(const RankFileOptions& options) {
  ChakraProtoMsg::GlobalMetadata metadata;
  metadata.set_version(chakra::kDefaultSchemaVersion);
  if (!options.generator.empty()) {
    AttributeProto* attribute = metadata.add_attr();
    attribute->set_name("generator");
    attribute->set_string_val(options.generator);
  }
  return metadata;
}

}  // namespace

namespace {

// Creates the folder `prefix` is in (rank files are written as <prefix>.<rank>.et).
Status make_prefix_folder(const std::string& prefix) {
  if (prefix.empty()) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "empty output prefix (rank files are written as <prefix>.<rank>.et)");
  }
  const std::filesystem::path folder = std::filesystem::path(prefix).parent_path();
  if (!folder.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(folder, ec);
    if (ec) {
      return Error::make(ErrorKind::kIo, "{}: cannot create the folder: {}", folder.string(),
                         ec.message());
    }
  }
  return Status::ok();
}

// Writes `program` to `path`; the record bytes written.
Expected<uint64_t> write_program(const std::string& path,
                                 const ChakraProtoMsg::GlobalMetadata& metadata,
                                 const RankProgram& program) {
  Expected<chakra::TraceWriter> writer = chakra::TraceWriter::create(path, metadata);
  if (!writer) return writer.error();
  Status status =
      program.emit([&](const ChakraProtoMsg::Node& node) { return writer->write(node); });
  if (status) status = writer->close();
  if (!status) return status.error();
  return writer->bytes_written();
}

}  // namespace

Expected<RankFiles> write_rank_files(uint32_t ranks, const std::string& prefix,
                                     const RankFileOptions& options, const ProgramBuilder& build) {
  if (Status status = make_prefix_folder(prefix); !status) return status.error();
  const ChakraProtoMsg::GlobalMetadata metadata = rank_metadata(options);
  std::vector<std::string> paths(ranks);
  std::vector<std::optional<Error>> errors(ranks);
  std::vector<std::array<uint64_t, 3>> totals(ranks);  // nodes, flops, bytes
  parallel_for(ranks, options.threads, [&](size_t index) {
    const auto rank = static_cast<uint32_t>(index);
    std::string path = chakra::rank_trace_path(prefix, rank) + (options.gzip ? ".gz" : "");
    Expected<RankProgram> program = build(rank);
    if (!program) {
      errors[index] = program.error();
      return;
    }
    Expected<uint64_t> bytes = write_program(path, metadata, *program);
    if (!bytes) {
      errors[index] = bytes.error();
      return;
    }
    totals[index] = {program->size(), program->total_flops(), *bytes};
    paths[index] = std::move(path);
  });
  for (const std::optional<Error>& error : errors) {
    if (error) return *error;
  }
  RankFiles files;
  files.paths = std::move(paths);
  for (const auto& [nodes, flops, bytes] : totals) {
    files.nodes += nodes;
    files.flops += flops;
    files.bytes += bytes;
  }
  return files;
}

Status write_comm_groups(const std::string& path,
                         const std::vector<std::vector<uint32_t>>& groups) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Error::make(ErrorKind::kIo, "{}: cannot write", path);
  out << "{";
  for (size_t index = 0; index < groups.size(); ++index) {
    out << (index == 0 ? "\n" : ",\n") << "  \"" << index + 1 << "\": [";
    for (size_t member = 0; member < groups[index].size(); ++member) {
      out << (member == 0 ? "" : ", ") << groups[index][member];
    }
    out << "]";
  }
  out << (groups.empty() ? "}\n" : "\n}\n");
  out.close();
  if (!out) return Error::make(ErrorKind::kIo, "{}: write failed", path);
  return Status::ok();
}

namespace {

// Each rank's representative, when no generator names them: the first rank whose program
// serializes to the same bytes. Programs are built a chunk of ranks at a time, in parallel, and
// only the representatives' bytes are kept, so memory stays one chunk plus the classes.
Expected<std::vector<RankRenaming>> identical_programs(uint32_t ranks,
                                                       const RankFileOptions& options,
                                                       const ProgramBuilder& build) {
  std::vector<RankRenaming> renamings(ranks);
  std::unordered_multimap<size_t, std::pair<uint32_t, std::string>> classes;  // hash -> rank, bytes
  const size_t chunk = std::max<size_t>(8, 4 * (options.threads == 0 ? 2 : options.threads));
  std::vector<std::string> bytes(chunk);
  std::vector<std::optional<Error>> errors(chunk);
  for (size_t first = 0; first < ranks; first += chunk) {
    const size_t count = std::min<size_t>(chunk, ranks - first);
    parallel_for(count, options.threads, [&](size_t k) {
      bytes[k].clear();
      errors[k].reset();
      Expected<RankProgram> program = build(static_cast<uint32_t>(first + k));
      if (!program) {
        errors[k] = program.error();
        return;
      }
      std::string record;
      Status status = program->emit([&](const ChakraProtoMsg::Node& node) {
        record.clear();
        node.SerializeToString(&record);
        bytes[k] += fmt::format("{}:", record.size());
        bytes[k] += record;
        return Status::ok();
      });
      if (!status) errors[k] = status.error();
    });
    for (size_t k = 0; k < count; ++k) {
      if (errors[k]) return *errors[k];
      const auto rank = static_cast<uint32_t>(first + k);
      const size_t hash = std::hash<std::string>{}(bytes[k]);
      uint32_t representative = rank;
      const auto [begin, end] = classes.equal_range(hash);
      for (auto it = begin; it != end; ++it) {
        if (it->second.second == bytes[k]) representative = it->second.first;
      }
      if (representative == rank) classes.emplace(hash, std::make_pair(rank, std::move(bytes[k])));
      renamings[rank].representative = representative;
    }
  }
  return renamings;
}

Expected<GeneratedTraces> write_class_trace_set(uint32_t ranks, const std::string& prefix,
                                                const RankFileOptions& options,
                                                const ProgramBuilder& build,
                                                const RenamingOf& renaming_of) {
  if (Status status = make_prefix_folder(prefix); !status) return status.error();
  std::vector<RankRenaming> renamings(ranks);
  if (renaming_of) {
    for (uint32_t rank = 0; rank < ranks; ++rank) renamings[rank] = renaming_of(rank);
  } else {
    Expected<std::vector<RankRenaming>> identical = identical_programs(ranks, options, build);
    if (!identical) return identical.error();
    renamings = std::move(*identical);
  }
  std::vector<uint32_t> representatives;
  std::vector<uint32_t> class_of(ranks, UINT32_MAX);
  for (uint32_t rank = 0; rank < ranks; ++rank) {
    assert(renamings[renamings[rank].representative].representative ==
               renamings[rank].representative &&
           "a representative is its own");
    if (renamings[rank].representative == rank) {
      class_of[rank] = static_cast<uint32_t>(representatives.size());
      representatives.push_back(rank);
    }
  }
  const ChakraProtoMsg::GlobalMetadata metadata = rank_metadata(options);
  std::vector<std::string> paths(representatives.size());
  std::vector<std::optional<Error>> errors(representatives.size());
  std::vector<std::array<uint64_t, 3>> totals(representatives.size());  // nodes, flops, bytes
  parallel_for(representatives.size(), options.threads, [&](size_t k) {
    std::string path = chakra::class_trace_path(prefix, k) + (options.gzip ? ".gz" : "");
    Expected<RankProgram> program = build(representatives[k]);
    if (!program) {
      errors[k] = program.error();
      return;
    }
    Expected<uint64_t> bytes = write_program(path, metadata, *program);
    if (!bytes) {
      errors[k] = bytes.error();
      return;
    }
    totals[k] = {program->size(), program->total_flops(), *bytes};
    paths[k] = std::move(path);
  });
  for (const std::optional<Error>& error : errors) {
    if (error) return *error;
  }
  GeneratedTraces traces;
  traces.ranks = ranks;
  chakra::RankMap map;
  for (const std::string& path : paths) {
    map.classes.push_back(std::filesystem::path(path).filename().string());
  }
  map.ranks.resize(ranks);
  for (uint32_t rank = 0; rank < ranks; ++rank) {
    const RankRenaming& renaming = renamings[rank];
    const uint32_t k = class_of[renaming.representative];
    chakra::RankMap::Rank& entry = map.ranks[rank];
    entry.trace = k;
    traces.nodes += totals[k][0];
    traces.flops += totals[k][1];
    if (renaming.representative == rank) continue;
    for (const auto& [from, to] : renaming.peers) {
      if (from != to) entry.rename.peers.emplace_back(from, to);
    }
    for (const auto& [from, to] : renaming.groups) {
      if (from != 0 && from != to) {
        entry.rename.groups.emplace_back(std::to_string(from), std::to_string(to));
      }
    }
    // The strings sort otherwise than the numbers.
    std::sort(entry.rename.groups.begin(), entry.rename.groups.end());
  }
  for (const auto& one : totals) traces.bytes_written += one[2];
  traces.rank_map = chakra::rank_map_path(prefix);
  if (Status status = chakra::write_rank_map(traces.rank_map, map); !status) {
    return status.error();
  }
  traces.rank_files = std::move(paths);
  return traces;
}

}  // namespace

Expected<GeneratedTraces> write_trace_set(uint32_t ranks, const std::string& prefix,
                                          const RankFileOptions& options,
                                          const ProgramBuilder& build,
                                          const std::vector<std::vector<uint32_t>>& groups,
                                          const RenamingOf& renaming_of) {
  GeneratedTraces traces;
  if (options.classes) {
    Expected<GeneratedTraces> written =
        write_class_trace_set(ranks, prefix, options, build, renaming_of);
    if (!written) return written.error();
    traces = std::move(*written);
  } else {
    Expected<RankFiles> files = write_rank_files(ranks, prefix, options, build);
    if (!files) return files.error();
    traces.ranks = ranks;
    traces.rank_files = std::move(files->paths);
    traces.nodes = files->nodes;
    traces.flops = files->flops;
    traces.bytes_written = files->bytes;
  }
  traces.group_file = prefix + ".json";
  traces.groups = groups.size();
  if (Status status = write_comm_groups(traces.group_file, groups); !status) return status.error();
  return traces;
}

namespace {

// `groups` as communicator groups: group i + 1 = groups[i].
Expected<std::shared_ptr<const chakra::CommGroups>> comm_groups_of(
    uint32_t ranks, const std::string& name, const std::vector<std::vector<uint32_t>>& groups) {
  auto comm = std::make_shared<chakra::CommGroups>(ranks);
  for (size_t index = 0; index < groups.size(); ++index) {
    if (Status status = comm->add(std::to_string(index + 1), groups[index], name); !status) {
      return status.error();
    }
  }
  return std::shared_ptr<const chakra::CommGroups>(std::move(comm));
}

// build_trace_set with a renaming: representatives' programs become graphs node by node (no
// serialization), every other rank's graph is its representative's renamed.
Expected<BuiltTraces> build_renamed_trace_set(uint32_t ranks, const std::string& name,
                                              const RankFileOptions& options,
                                              const ProgramBuilder& build,
                                              const std::vector<std::vector<uint32_t>>& groups,
                                              const RenamingOf& renaming_of) {
  const ChakraProtoMsg::GlobalMetadata metadata = rank_metadata(options);
  auto source_of = [&](size_t rank) { return fmt::format("{} rank {}", name, rank); };
  std::vector<RankRenaming> renamings(ranks);
  std::vector<uint32_t> representatives;
  for (uint32_t rank = 0; rank < ranks; ++rank) {
    renamings[rank] = renaming_of(rank);
    assert(renamings[rank].representative < ranks);
    assert(renamings[renamings[rank].representative].representative ==
               renamings[rank].representative &&
           "a representative is its own");
    if (renamings[rank].representative == rank) representatives.push_back(rank);
  }
  struct Template {
    std::optional<Error> error;
    chakra::TraceGraph graph;
    std::vector<chakra::NodeIndex> candidates;
    uint64_t nodes = 0;
    uint64_t flops = 0;
  };
  std::vector<Template> templates(representatives.size());
  std::vector<uint32_t> template_of(ranks, UINT32_MAX);
  for (uint32_t k = 0; k < representatives.size(); ++k) template_of[representatives[k]] = k;
  parallel_for(representatives.size(), options.threads, [&](size_t k) {
    Template& out = templates[k];
    Expected<RankProgram> program = build(representatives[k]);
    if (!program) {
      out.error = program.error();
      return;
    }
    out.graph.set_source(source_of(representatives[k]));
    out.graph.set_metadata(metadata);
    out.graph.reserve_like_current(program->size());
    Status status = program->emit([&](const ChakraProtoMsg::Node& node) {
      out.graph.add_node(node);
      return Status::ok();
    });
    if (!status) {
      out.error = status.error();
      return;
    }
    out.graph.finish();
    out.candidates = out.graph.renamable_nodes();
    out.nodes = program->size();
    out.flops = program->total_flops();
  });
  for (const Template& one : templates) {
    if (one.error) return *one.error;
  }
  // Every rank's graph: a representative's is its template; the others' are renamed from it.
  std::vector<std::optional<chakra::TraceGraph>> renamed(ranks);
  parallel_for(ranks, options.threads, [&](size_t rank) {
    const RankRenaming& renaming = renamings[rank];
    if (renaming.representative == rank) return;
    const Template& base = templates[template_of[renaming.representative]];
    chakra::TraceGraph::Renaming values;
    values.peers = renaming.peers;
    for (const auto& [from, to] : renaming.groups) {
      if (from != 0) values.groups.emplace_back(std::to_string(from), std::to_string(to));
    }
    // The strings sort otherwise than the numbers.
    std::sort(values.groups.begin(), values.groups.end());
    chakra::TraceGraph graph =
        chakra::TraceGraph::renamed_from(base.graph, values, base.candidates);
    graph.set_source(source_of(rank));
    renamed[rank] = std::move(graph);
  });
  BuiltTraces traces;
  std::vector<chakra::TraceGraph> graphs;
  std::vector<uint32_t> rank_graph(ranks);
  std::vector<uint32_t> graph_of_template(templates.size(), UINT32_MAX);
  for (uint32_t rank = 0; rank < ranks; ++rank) {
    const uint32_t k = template_of[renamings[rank].representative];
    traces.nodes += templates[k].nodes;
    traces.flops += templates[k].flops;
    if (renamings[rank].representative == rank || renamed[rank]->patched_count() == 0) {
      // A rank that renamed nothing runs its representative's graph.
      if (graph_of_template[k] == UINT32_MAX) {
        graph_of_template[k] = static_cast<uint32_t>(graphs.size());
        graphs.push_back(std::move(templates[k].graph));
        graphs.back().set_source(source_of(renamings[rank].representative));
      }
      rank_graph[rank] = graph_of_template[k];
      continue;
    }
    rank_graph[rank] = static_cast<uint32_t>(graphs.size());
    graphs.push_back(std::move(*renamed[rank]));
  }
  renamed.clear();
  traces.traces = chakra::TraceSet::from_graphs(name, std::move(graphs), std::move(rank_graph));
  Expected<std::shared_ptr<const chakra::CommGroups>> comm = comm_groups_of(ranks, name, groups);
  if (!comm) return comm.error();
  traces.groups = std::move(*comm);
  return traces;
}

}  // namespace

Expected<BuiltTraces> build_trace_set(uint32_t ranks, const std::string& name,
                                      const RankFileOptions& options, const ProgramBuilder& build,
                                      const std::vector<std::vector<uint32_t>>& groups,
                                      const RenamingOf& renaming_of) {
  if (renaming_of) return build_renamed_trace_set(ranks, name, options, build, groups, renaming_of);
  const ChakraProtoMsg::GlobalMetadata metadata = rank_metadata(options);
  // Each rank's program is serialized as its file would be and built, as chakra::TraceSetLoader
  // builds rank files, from the first rank of its shape: the ranks of a stage differ only in
  // peers and group names, so they share that rank's tables and hold their patched nodes alone
  // (a 1,024-rank GPT-3 plan took 4.7 GB held whole). Ranks go in chunks: built in parallel
  // against the templates of earlier chunks, then, in rank order, against this chunk's or made
  // templates, so which ranks are templates never depends on thread timing.
  struct Built {
    std::optional<Error> error;
    std::optional<chakra::TraceGraph> graph;
    std::optional<chakra::TraceSetLoader::RawTrace> raw;  // until built
    uint64_t nodes = 0;
    uint64_t flops = 0;
  };
  chakra::TraceSetLoader loader(size_t{1} << 16);
  std::vector<Built> built(ranks);
  std::map<const void*, uint32_t> template_rank;  // structure -> the rank whose trace it is
  auto source_of = [&](size_t rank) { return fmt::format("{} rank {}", name, rank); };
  const size_t chunk = std::max<size_t>(8, 4 * (options.threads == 0 ? 2 : options.threads));
  for (size_t first = 0; first < ranks; first += chunk) {
    const size_t count = std::min<size_t>(chunk, ranks - first);
    parallel_for(count, options.threads, [&](size_t k) {
      const size_t index = first + k;
      Built& out = built[index];
      Expected<RankProgram> program = build(static_cast<uint32_t>(index));
      if (!program) {
        out.error = program.error();
        return;
      }
      chakra::TraceSetLoader::RawTrace raw;
      raw.metadata = metadata;
      std::string record;
      Status status = program->emit([&](const ChakraProtoMsg::Node& node) {
        record.clear();
        node.SerializeToString(&record);
        raw.bytes += record;
        raw.ends.push_back(raw.bytes.size());
        return Status::ok();
      });
      if (!status) {
        out.error = status.error();
        return;
      }
      out.nodes = program->size();
      out.flops = program->total_flops();
      out.graph = loader.derive_from_templates(source_of(index), raw);
      if (!out.graph) out.raw = std::move(raw);
    });
    for (size_t index = first; index < first + count; ++index) {
      Built& out = built[index];
      if (out.error || !out.raw) continue;
      out.graph = loader.derive_from_templates(source_of(index), *out.raw);
      if (!out.graph) {
        Expected<chakra::TraceGraph> graph =
            loader.add_template(source_of(index), std::move(*out.raw));
        if (!graph) {
          out.error = graph.error();
        } else {
          template_rank.emplace(graph->structure(), static_cast<uint32_t>(index));
          out.graph = std::move(*graph);
        }
      }
      out.raw.reset();
    }
  }
  BuiltTraces traces;
  std::vector<chakra::TraceGraph> graphs;
  std::vector<uint32_t> rank_graph(ranks);
  for (uint32_t rank = 0; rank < ranks; ++rank) {
    Built& one = built[rank];
    if (one.error) return *one.error;
    traces.nodes += one.nodes;
    traces.flops += one.flops;
    // A rank that patched nothing is its template's rank: they share one graph.
    const auto twin = template_rank.find(one.graph->structure());
    if (one.graph->patched_count() == 0 && twin != template_rank.end() && twin->second != rank) {
      rank_graph[rank] = rank_graph[twin->second];
      continue;
    }
    rank_graph[rank] = static_cast<uint32_t>(graphs.size());
    graphs.push_back(std::move(*one.graph));
  }
  built.clear();
  traces.traces = chakra::TraceSet::from_graphs(name, std::move(graphs), std::move(rank_graph));
  Expected<std::shared_ptr<const chakra::CommGroups>> comm = comm_groups_of(ranks, name, groups);
  if (!comm) return comm.error();
  traces.groups = std::move(*comm);
  return traces;
}

}  // namespace orrery::gen
