#include "synth/trace_writer.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <filesystem>
#include <map>

#include "chakra/trace_file.h"
#include "chakra/trace_set.h"
#include "gen/common.h"
#include "gen/rank_program.h"
#include "synth/layers.h"

namespace orrery::synth {

namespace {

// Collectives on one communicator that no path of the program orders get an edge from the one
// earlier in layer order to the later. A process group issues its collectives in program order,
// and the simulator (as ASTRA-sim) pairs a group's collectives across ranks in the order each rank
// issues them: two unordered ones could be issued in different orders on two ranks when other
// work delays one rank's path (1 of 1,000 samples did, and its set did not simulate). Where a path
// already orders them, nothing is added. Returns the edges added. O(collectives x (nodes + edges)).
uint32_t order_collectives_per_group(Dag& work, uint32_t ranks) {
  std::map<GroupShape, std::vector<uint32_t>> by_group;  // in node order, which is topological
  for (uint32_t node = 0; node < work.size(); ++node) {
    const DagNode& item = work.nodes[node];
    if (!is_collective(item.kind)) continue;
    const bool own_group = !item.group.whole_job() && !group_members(item.group, 0, ranks).empty();
    by_group[own_group ? item.group : GroupShape{}].push_back(node);
  }
  std::vector<std::vector<uint32_t>> children(work.size());
  for (const auto& [parent, child] : work.edges) children[parent].push_back(child);
  std::vector<uint32_t> seen(work.size(), 0);
  uint32_t walk = 0;
  // Whether `to` is reachable from `from`; nodes after `to` cannot lead to it.
  const auto reaches = [&](uint32_t from, uint32_t to) {
    ++walk;
    std::vector<uint32_t> stack = {from};
    seen[from] = walk;
    while (!stack.empty()) {
      const uint32_t node = stack.back();
      stack.pop_back();
      if (node == to) return true;
      for (const uint32_t child : children[node]) {
        if (child <= to && seen[child] != walk) {
          seen[child] = walk;
          stack.push_back(child);
        }
      }
    }
    return false;
  };
  uint32_t added = 0;
  for (const auto& [group, nodes] : by_group) {
    for (size_t at = 1; at < nodes.size(); ++at) {
      if (reaches(nodes[at - 1], nodes[at])) continue;
      work.edges.emplace_back(nodes[at - 1], nodes[at]);
      children[nodes[at - 1]].push_back(nodes[at]);
      ++added;
    }
  }
  return added;
}

}  // namespace

SpmdProgram pair_point_to_point(const Dag& dag, uint32_t ranks) {
  SpmdProgram program;
  Dag work = layer_dag(dag).dag;
  std::vector<int32_t> tags(work.size(), -1);
  std::deque<uint32_t> open_sends;
  int32_t next_tag = 0;
  const uint32_t original = work.size();
  for (uint32_t node = 0; node < original; ++node) {
    const NodeKind kind = work.nodes[node].kind;
    if (kind == NodeKind::kSend) {
      open_sends.push_back(node);
    } else if (kind == NodeKind::kRecv) {
      uint32_t send;
      if (!open_sends.empty()) {
        send = open_sends.front();
        open_sends.pop_front();
      } else {  // a new send, a source, so before this receive in some topological order
        send = work.size();
        work.nodes.push_back(DagNode{NodeKind::kSend, {}, 0, 0, work.nodes[node].comm_bytes, 0});
        tags.push_back(-1);
        ++program.partners_added;
      }
      if (work.nodes[send].comm_bytes == 0)
        work.nodes[send].comm_bytes = work.nodes[node].comm_bytes;
      work.nodes[node].comm_bytes = work.nodes[send].comm_bytes;
      tags[send] = tags[node] = next_tag++;
    }
  }
  for (uint32_t send : open_sends) {  // a new receive, a sink, after it in every order
    const uint32_t recv = work.size();
    work.nodes.push_back(DagNode{NodeKind::kRecv, {}, 0, 0, work.nodes[send].comm_bytes, 0});
    tags.push_back(-1);
    tags[send] = tags[recv] = next_tag++;
    ++program.partners_added;
  }
  program.collective_orderings =
      order_collectives_per_group(work, ranks != 0 ? ranks : std::max<uint32_t>(dag.ranks, 1));
  // Partners are sources (and ordering edges may deepen a collective): renumber by layers again,
  // carrying the tags along.
  const std::vector<uint32_t> level = kahn_levels(work);
  std::vector<uint32_t> order(work.size());
  for (uint32_t idx = 0; idx < order.size(); ++idx) order[idx] = idx;
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return level[a] < level[b]; });
  std::vector<uint32_t> position(work.size());
  for (uint32_t idx = 0; idx < order.size(); ++idx) position[order[idx]] = idx;
  program.dag.ranks = dag.ranks;
  program.dag.source = dag.source;
  for (uint32_t node : order) {
    program.dag.nodes.push_back(work.nodes[node]);
    program.tags.push_back(tags[node]);
  }
  for (const auto& [parent, child] : work.edges) {
    program.dag.edges.emplace_back(position[parent], position[child]);
  }
  normalize_edges(program.dag);
  return program;
}

std::vector<uint32_t> group_members(GroupShape shape, uint32_t rank, uint32_t ranks) {
  if (shape.whole_job() || shape.size >= ranks) return {};
  const uint32_t stride = shape.stride == 0 ? 1 : shape.stride;
  const uint64_t span = uint64_t{shape.size} * stride;
  if (span > ranks || ranks % span != 0) return {};
  const uint32_t base = static_cast<uint32_t>((rank / span) * span + rank % stride);
  std::vector<uint32_t> members;
  for (uint32_t idx = 0; idx < shape.size; ++idx) members.push_back(base + idx * stride);
  return members;
}

namespace {

using ChakraProtoMsg::AttributeProto;

using gen::add_attr;

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

Expected<TraceSetReport> write_trace_set(const Dag& dag, const std::string& prefix,
                                         const TraceSetOptions& options) {
  TraceSetReport report;
  report.ranks = options.ranks != 0 ? options.ranks : std::max<uint32_t>(dag.ranks, 1);
  const uint32_t ranks = report.ranks;
  SpmdProgram program = pair_point_to_point(dag, ranks);
  const Dag& spmd = program.dag;
  report.partners_added = program.partners_added;
  report.collective_orderings = program.collective_orderings;
  report.nodes = spmd.size();

  // Groups: one id per (shape, block), numbered in order of first use, as the file lists them.
  std::map<std::pair<GroupShape, uint32_t>, uint32_t> group_ids;  // (shape, first member) -> id
  std::vector<std::vector<uint32_t>> group_lists;
  std::map<GroupShape, bool> fits;
  for (const DagNode& node : spmd.nodes) {
    if (!is_collective(node.kind) || node.group.whole_job() || fits.count(node.group)) continue;
    const bool ok = !group_members(node.group, 0, ranks).empty();
    fits[node.group] = ok;
    if (!ok) continue;
    for (uint32_t rank = 0; rank < ranks; ++rank) {
      std::vector<uint32_t> members = group_members(node.group, rank, ranks);
      const auto key = std::make_pair(node.group, members.front());
      if (group_ids.emplace(key, static_cast<uint32_t>(group_lists.size()) + 1).second) {
        group_lists.push_back(std::move(members));
      }
    }
  }
  for (const DagNode& node : spmd.nodes) {
    if (is_collective(node.kind) && !node.group.whole_job() && !fits[node.group]) {
      ++report.whole_job_fallbacks;
    }
  }

  const std::filesystem::path folder = std::filesystem::path(prefix).parent_path();
  if (!folder.empty()) {
    std::error_code error;
    std::filesystem::create_directories(folder, error);
    if (error) {
      return Error::make(ErrorKind::kIo, "{}: cannot create the folder: {}", folder.string(),
                         error.message());
    }
  }
  std::vector<std::vector<uint32_t>> parents(spmd.size());
  for (const auto& [parent, child] : spmd.edges) parents[child].push_back(parent);

  ChakraProtoMsg::Node out;
  for (uint32_t rank = 0; rank < ranks; ++rank) {
    ChakraProtoMsg::GlobalMetadata metadata;
    metadata.set_version(chakra::kDefaultSchemaVersion);
    if (!options.generator.empty()) {
      AttributeProto* attribute = metadata.add_attr();
      attribute->set_name("generator");
      attribute->set_string_val(options.generator);
    }
    const std::string path = chakra::rank_trace_path(prefix, rank);
    Expected<chakra::TraceWriter> writer = chakra::TraceWriter::create(path, std::move(metadata));
    if (!writer) return writer.error();
    for (uint32_t index = 0; index < spmd.size(); ++index) {
      const DagNode& node = spmd.nodes[index];
      out.Clear();
      out.set_id(index);
      out.set_name(lower(node_kind_name(node.kind)));
      for (uint32_t parent : parents[index]) out.add_data_deps(parent);
      if (node.duration_us != 0) out.set_duration_micros(node.duration_us);
      switch (node.kind) {
        case NodeKind::kCompute:
        case NodeKind::kCpuCompute:
          out.set_type(ChakraProtoMsg::COMP_NODE);
          add_attr(out, "is_cpu_op").set_bool_val(node.kind == NodeKind::kCpuCompute);
          if (node.flops != 0)
            add_attr(out, "num_ops").set_int64_val(static_cast<int64_t>(node.flops));
          if (node.tensor_bytes != 0)
            add_attr(out, "tensor_size").set_uint64_val(node.tensor_bytes);
          break;
        case NodeKind::kMemLoad:
        case NodeKind::kMemStore:
          out.set_type(node.kind == NodeKind::kMemLoad ? ChakraProtoMsg::MEM_LOAD_NODE
                                                       : ChakraProtoMsg::MEM_STORE_NODE);
          add_attr(out, "tensor_size").set_uint64_val(node.tensor_bytes);
          break;
        case NodeKind::kMetadata:
          out.set_type(ChakraProtoMsg::METADATA_NODE);
          break;
        case NodeKind::kSend:
        case NodeKind::kRecv: {
          const bool send = node.kind == NodeKind::kSend;
          out.set_type(send ? ChakraProtoMsg::COMM_SEND_NODE : ChakraProtoMsg::COMM_RECV_NODE);
          add_attr(out, "is_cpu_op").set_bool_val(false);
          const uint32_t peer = send ? (rank + 1) % ranks : (rank + ranks - 1) % ranks;
          add_attr(out, send ? "comm_dst" : "comm_src").set_int32_val(static_cast<int32_t>(peer));
          add_attr(out, "comm_tag").set_int32_val(program.tags[index]);
          add_attr(out, "comm_size").set_int64_val(static_cast<int64_t>(node.comm_bytes));
          break;
        }
        default: {  // collectives
          out.set_type(ChakraProtoMsg::COMM_COLL_NODE);
          add_attr(out, "is_cpu_op").set_bool_val(false);
          add_attr(out, "comm_type").set_int64_val(comm_type_of(node.kind));
          add_attr(out, "comm_size").set_int64_val(static_cast<int64_t>(node.comm_bytes));
          if (!node.group.whole_job() && fits[node.group]) {
            const std::vector<uint32_t> members = group_members(node.group, rank, ranks);
            const uint32_t id = group_ids.at({node.group, members.front()});
            add_attr(out, "pg_name").set_string_val(std::to_string(id));
          }
          break;
        }
      }
      if (Status status = writer->write(out); !status) return status.error();
    }
    if (Status status = writer->close(); !status) return status.error();
    report.rank_files.push_back(path);
  }
  report.group_file = prefix + ".json";
  if (Status status = gen::write_comm_groups(report.group_file, group_lists); !status) {
    return status.error();
  }
  report.program = std::move(program.dag);
  return report;
}

}  // namespace orrery::synth
