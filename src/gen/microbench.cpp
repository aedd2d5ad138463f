#include "gen/microbench.h"

#include <array>
#include <filesystem>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>
#include <tuple>

#include <fmt/format.h>

#include "chakra/trace_file.h"
#include "chakra/trace_set.h"
#include "core/checked.h"
#include "core/units.h"
#include "gen/common.h"

namespace orrery::gen {

namespace {

using ChakraProtoMsg::AttributeProto;
using ChakraProtoMsg::Node;

struct KindInfo {
  MicrobenchKind kind;
  std::string_view name;  // as typed, with dashes
  std::string_view stem;  // in node names, with underscores (ASTRA-sim's folder and file names)
  ChakraProtoMsg::CollectiveCommType comm_type;
};

constexpr std::array<KindInfo, 10> kKinds = {{
    {MicrobenchKind::kAllReduce, "all-reduce", "all_reduce", ChakraProtoMsg::ALL_REDUCE},
    {MicrobenchKind::kAllGather, "all-gather", "all_gather", ChakraProtoMsg::ALL_GATHER},
    {MicrobenchKind::kReduceScatter, "reduce-scatter", "reduce_scatter",
     ChakraProtoMsg::REDUCE_SCATTER},
    {MicrobenchKind::kAllToAll, "all-to-all", "all_to_all", ChakraProtoMsg::ALL_TO_ALL},
    {MicrobenchKind::kBroadcast, "broadcast", "broadcast", ChakraProtoMsg::BROADCAST},
    {MicrobenchKind::kReduce, "reduce", "reduce", ChakraProtoMsg::REDUCE},
    {MicrobenchKind::kGather, "gather", "gather", ChakraProtoMsg::GATHER},
    {MicrobenchKind::kScatter, "scatter", "scatter", ChakraProtoMsg::SCATTER},
    {MicrobenchKind::kBarrier, "barrier", "barrier", ChakraProtoMsg::BARRIER},
    // Not a collective: comm_type is unused for it.
    {MicrobenchKind::kSendRecv, "send-recv", "send_recv", ChakraProtoMsg::ALL_REDUCE},
}};

const KindInfo& info(MicrobenchKind kind) {
  for (const KindInfo& entry : kKinds) {
    if (entry.kind == kind) return entry;
  }
  return kKinds.front();
}

// ASTRA-sim's generator names sizes in whole "MB" of 2^20 bytes; smaller sizes keep that style.
std::string size_label(uint64_t bytes) {
  constexpr uint64_t kKiB = 1024;
  constexpr uint64_t kMiB = kKiB * kKiB;
  if (bytes > 0 && bytes % kMiB == 0) return fmt::format("{}MB", bytes / kMiB);
  if (bytes > 0 && bytes % kKiB == 0) return fmt::format("{}KB", bytes / kKiB);
  return fmt::format("{}B", bytes);
}

// The nodes of one rank. Ids continue across ranks as ASTRA-sim's generator numbers them: rank r
// holds ids r*k .. r*k+k-1 for k nodes per rank.
std::vector<Node> rank_nodes(const MicrobenchSpec& spec, uint32_t rank) {
  const KindInfo& kind = info(spec.kind);
  const bool send_recv = spec.kind == MicrobenchKind::kSendRecv;
  const uint64_t per_rank = (spec.compute_us > 0 ? 1U : 0U) + (send_recv ? 2U : 1U);
  uint64_t next_id = static_cast<uint64_t>(rank) * per_rank;
  const std::string base =
      spec.bytes == 0 ? fmt::format("{}_{}npus", kind.stem, spec.ranks)
                      : fmt::format("{}_{}npus_{}", kind.stem, spec.ranks, size_label(spec.bytes));
  const auto comm_size = static_cast<int64_t>(spec.bytes);

  std::vector<Node> nodes;
  std::optional<uint64_t> compute_id;
  if (spec.compute_us > 0) {
    Node& comp = nodes.emplace_back();
    comp.set_id(next_id);
    compute_id = next_id++;
    comp.set_name(fmt::format("compute_{}us", spec.compute_us));
    comp.set_type(ChakraProtoMsg::COMP_NODE);
    comp.set_duration_micros(spec.compute_us);
    add_attr(comp, "is_cpu_op").set_bool_val(false);
  }
  if (!send_recv) {
    Node& coll = nodes.emplace_back();
    coll.set_id(next_id++);
    coll.set_name(base);
    coll.set_type(ChakraProtoMsg::COMM_COLL_NODE);
    if (compute_id) coll.add_data_deps(*compute_id);
    add_attr(coll, "is_cpu_op").set_bool_val(false);
    add_attr(coll, "comm_type").set_int64_val(kind.comm_type);
    add_attr(coll, "comm_size").set_int64_val(comm_size);
    if (!spec.pg_name.empty()) add_attr(coll, "pg_name").set_string_val(spec.pg_name);
    return nodes;
  }
  const auto self = static_cast<int32_t>(rank);
  const auto next = static_cast<int32_t>((rank + 1) % spec.ranks);
  const auto previous = static_cast<int32_t>((rank + spec.ranks - 1) % spec.ranks);
  const std::array<std::tuple<ChakraProtoMsg::NodeType, const char*, int32_t, int32_t>, 2> peers = {
      {{ChakraProtoMsg::COMM_SEND_NODE, "_send", self, next},
       {ChakraProtoMsg::COMM_RECV_NODE, "_recv", previous, self}}};
  for (const auto& [type, suffix, src, dst] : peers) {
    Node& message = nodes.emplace_back();
    message.set_id(next_id++);
    message.set_name(base + suffix);
    message.set_type(type);
    if (compute_id) message.add_data_deps(*compute_id);
    add_attr(message, "is_cpu_op").set_bool_val(false);
    add_attr(message, "comm_src").set_int32_val(src);
    add_attr(message, "comm_dst").set_int32_val(dst);
    add_attr(message, "comm_tag").set_int32_val(0);
    add_attr(message, "comm_size").set_int64_val(comm_size);
  }
  return nodes;
}

Status check_spec(const MicrobenchSpec& spec, const std::string& prefix) {
  const std::string_view name = info(spec.kind).name;
  if (prefix.empty()) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "empty output prefix (rank files are written as <prefix>.<rank>.et)");
  }
  if (spec.ranks == 0 || spec.ranks > kMaxRanks) {
    return Error::make(ErrorKind::kInvalidArgument, "{} ranks: expected 1 to {}", spec.ranks,
                       kMaxRanks);
  }
  if (spec.kind == MicrobenchKind::kSendRecv && spec.ranks < 2) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "send-recv needs at least 2 ranks (rank r sends to r+1), found {}",
                       spec.ranks);
  }
  if (spec.bytes == 0 && spec.kind != MicrobenchKind::kBarrier) {
    return Error::make(ErrorKind::kInvalidArgument, "{} of 0 bytes: give a size of 1 byte or more",
                       name);
  }
  // The ranges every trace is validated against (core/checked.h).
  if (spec.bytes > kMaxBytes) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "--size {} bytes: more than 2^50 bytes (1 PiB), the largest size orrery "
                       "simulates",
                       format_count(spec.bytes));
  }
  if (spec.compute_us > kMaxDurationMicros) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "--compute-us {}: more than {} us (2^61 ps, the longest run orrery "
                       "simulates)",
                       format_count(spec.compute_us), format_count(kMaxDurationMicros));
  }
  if (spec.kind == MicrobenchKind::kSendRecv && !spec.pg_name.empty()) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "pg_name '{}' applies to collectives, not to send-recv", spec.pg_name);
  }
  return Status::ok();
}

}  // namespace

Expected<MicrobenchKind> parse_microbench_kind(std::string_view name) {
  std::string dashed(name);
  for (char& c : dashed) {
    if (c == '_') c = '-';
  }
  for (const KindInfo& entry : kKinds) {
    if (entry.name == dashed) return entry.kind;
  }
  std::string names;
  for (const KindInfo& entry : kKinds) {
    names += fmt::format("{}{}", names.empty() ? "" : ", ", entry.name);
  }
  return Error::make(ErrorKind::kInvalidArgument, "unknown microbenchmark '{}' (expected {})", name,
                     names);
}

Expected<std::vector<std::string>> write_microbench(const MicrobenchSpec& spec,
                                                    const std::string& prefix) {
  if (Status status = check_spec(spec, prefix); !status) return status.error();
  const std::filesystem::path folder = std::filesystem::path(prefix).parent_path();
  if (!folder.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(folder, ec);
    if (ec) {
      return Error::make(ErrorKind::kIo, "{}: cannot create the folder: {}", folder.string(),
                         ec.message());
    }
  }
  ChakraProtoMsg::GlobalMetadata metadata;
  metadata.set_version(chakra::kDefaultSchemaVersion);
  std::vector<std::string> paths;
  paths.reserve(spec.ranks);
  for (uint32_t rank = 0; rank < spec.ranks; ++rank) {
    std::string path = chakra::rank_trace_path(prefix, rank);
    Expected<chakra::TraceWriter> writer = chakra::TraceWriter::create(path, metadata);
    if (!writer) return writer.error();
    for (const Node& node : rank_nodes(spec, rank)) {
      if (Status status = writer->write(node); !status) return status.error();
    }
    if (Status status = writer->close(); !status) return status.error();
    paths.push_back(std::move(path));
  }
  return paths;
}

Expected<std::shared_ptr<const chakra::TraceSet>> build_microbench(const MicrobenchSpec& spec,
                                                                   const std::string& name) {
  if (Status status = check_spec(spec, name); !status) return status.error();
  ChakraProtoMsg::GlobalMetadata metadata;
  metadata.set_version(chakra::kDefaultSchemaVersion);
  std::vector<chakra::TraceGraph> graphs(spec.ranks);
  for (uint32_t rank = 0; rank < spec.ranks; ++rank) {
    chakra::TraceGraph& graph = graphs[rank];
    graph.set_source(fmt::format("{} rank {}", name, rank));
    graph.set_metadata(metadata);
    for (const Node& node : rank_nodes(spec, rank)) graph.add_node(node);
    graph.finish();
  }
  return chakra::TraceSet::from_graphs(name, std::move(graphs));
}

}  // namespace orrery::gen
