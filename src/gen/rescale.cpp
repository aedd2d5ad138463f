#include "gen/rescale.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <system_error>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "chakra/comm_groups.h"
#include "chakra/trace_file.h"
#include "chakra/trace_set.h"
#include "core/parallel.h"
#include "gen/common.h"
#include "gen/rank_program.h"

namespace orrery::gen {

namespace {

using ChakraProtoMsg::AttributeProto;
using ChakraProtoMsg::Node;

Error spec_error(std::string message) {
  return Error(ErrorKind::kInvalidArgument, std::move(message));
}

// rank = inner + S (d + D outer).
struct Coord {
  uint32_t inner = 0;
  uint32_t d = 0;
  uint32_t outer = 0;
};

struct Layout {
  uint32_t stride = 1;
  uint32_t from = 1;
  uint32_t to = 1;

  Coord of(uint32_t rank) const {
    const uint32_t q = rank / stride;
    return {rank % stride, q % from, q / from};
  }
  Coord of_new(uint32_t rank) const {
    const uint32_t q = rank / stride;
    return {rank % stride, q % to, q / to};
  }
  uint32_t old_rank(const Coord& c) const { return c.inner + stride * (c.d + from * c.outer); }
  uint32_t new_rank(const Coord& c) const { return c.inner + stride * (c.d + to * c.outer); }
};

// ceil(value x num / den), without overflowing for any size below 2^63 / num.
uint64_t scale(uint64_t value, uint64_t num, uint64_t den) {
  return value / den * num + (value % den * num + den - 1) / den;
}

struct GroupInfo {
  std::string name;
  bool data = false;
  uint32_t replica = 0;  // replica groups: the d of every member
  std::vector<uint32_t> members;
};

// Classifies `members` under `layout`: a replica group, a data group, or neither (nullopt).
std::optional<GroupInfo> classify(const std::vector<uint32_t>& members, const Layout& layout) {
  GroupInfo info;
  info.members = members;
  std::set<std::pair<uint32_t, uint32_t>> pairs;
  std::set<std::tuple<uint32_t, uint32_t, uint32_t>> seen;
  std::set<uint32_t> ds;
  for (uint32_t rank : members) {
    const Coord c = layout.of(rank);
    pairs.emplace(c.inner, c.outer);
    seen.emplace(c.inner, c.d, c.outer);
    ds.insert(c.d);
  }
  if (ds.size() == 1) {
    info.replica = *ds.begin();
    return info;
  }
  if (ds.size() != layout.from || members.size() != pairs.size() * layout.from) return std::nullopt;
  for (const auto& [inner, outer] : pairs) {
    for (uint32_t d = 0; d < layout.from; ++d) {
      if (!seen.contains({inner, d, outer})) return std::nullopt;
    }
  }
  info.data = true;
  return info;
}

// The stride of the data-parallel index, from the groups: every group of D members in arithmetic
// progression whose step S fits the rank count is a candidate; exactly one S must classify every
// group.
Expected<uint32_t> infer_stride(const chakra::CommGroups& groups, uint32_t ranks, uint32_t from) {
  std::set<uint32_t> candidates;
  if (from >= 2) {
    for (const auto& [name, group] : groups.named()) {
      const std::vector<uint32_t>& m = group.ranks;
      if (m.size() != from) continue;
      const uint32_t step = m[1] - m[0];
      bool progression = step > 0;
      for (size_t index = 1; index < m.size() && progression; ++index)
        progression = m[index] - m[index - 1] == step;
      if (!progression || ranks % (static_cast<uint64_t>(step) * from) != 0) continue;
      if ((m[0] / step) % from != 0) continue;
      candidates.insert(step);
    }
  }
  if (candidates.empty() && ranks == from) candidates.insert(1);
  std::vector<uint32_t> consistent;
  for (uint32_t stride : candidates) {
    const Layout layout{stride, from, from};
    bool all = true;
    for (const auto& [name, group] : groups.named()) all = all && classify(group.ranks, layout);
    if (all) consistent.push_back(stride);
  }
  if (consistent.size() == 1) return consistent.front();
  if (consistent.empty()) {
    return spec_error(fmt::format(
        "cannot tell which ranks are data-parallel replicas: no communicator group of {} ranks "
        "with a constant stride{} (give --dp-stride: the distance between data-parallel ranks, "
        "tensor x context ranks in Megatron-LM's order)",
        from, from == 1 ? " exists with --from-dp 1" : ""));
  }
  return spec_error(
      fmt::format("the data-parallel stride is ambiguous: groups fit strides {} (give --dp-stride)",
                  fmt::join(consistent, ", ")));
}

// An integer attribute of any integer type, and writing it back in the same type.
std::optional<uint64_t> int_value(const AttributeProto& attr) {
  switch (attr.value_case()) {
    case AttributeProto::kInt32Val:
      return static_cast<uint64_t>(attr.int32_val());
    case AttributeProto::kInt64Val:
      return static_cast<uint64_t>(attr.int64_val());
    case AttributeProto::kUint32Val:
      return attr.uint32_val();
    case AttributeProto::kUint64Val:
      return attr.uint64_val();
    case AttributeProto::kSint32Val:
      return static_cast<uint64_t>(attr.sint32_val());
    case AttributeProto::kSint64Val:
      return static_cast<uint64_t>(attr.sint64_val());
    case AttributeProto::kFixed32Val:
      return attr.fixed32_val();
    case AttributeProto::kFixed64Val:
      return attr.fixed64_val();
    case AttributeProto::kSfixed32Val:
      return static_cast<uint64_t>(attr.sfixed32_val());
    case AttributeProto::kSfixed64Val:
      return static_cast<uint64_t>(attr.sfixed64_val());
    default:
      return std::nullopt;
  }
}

void set_int(AttributeProto& attr, uint64_t value) {
  switch (attr.value_case()) {
    case AttributeProto::kInt32Val:
      attr.set_int32_val(static_cast<int32_t>(value));
      break;
    case AttributeProto::kUint32Val:
      attr.set_uint32_val(static_cast<uint32_t>(value));
      break;
    case AttributeProto::kUint64Val:
      attr.set_uint64_val(value);
      break;
    case AttributeProto::kSint32Val:
      attr.set_sint32_val(static_cast<int32_t>(value));
      break;
    case AttributeProto::kSint64Val:
      attr.set_sint64_val(static_cast<int64_t>(value));
      break;
    case AttributeProto::kFixed32Val:
      attr.set_fixed32_val(static_cast<uint32_t>(value));
      break;
    case AttributeProto::kFixed64Val:
      attr.set_fixed64_val(value);
      break;
    case AttributeProto::kSfixed32Val:
      attr.set_sfixed32_val(static_cast<int32_t>(value));
      break;
    case AttributeProto::kSfixed64Val:
      attr.set_sfixed64_val(static_cast<int64_t>(value));
      break;
    default:
      attr.set_int64_val(static_cast<int64_t>(value));
      break;
  }
}

AttributeProto* find_attr(Node& node, std::string_view name) {
  for (AttributeProto& attr : *node.mutable_attr()) {
    if (attr.name() == name) return &attr;
  }
  return nullptr;
}

class Rescaler {
 public:
  Rescaler(const RescaleSpec& spec, Layout layout, uint32_t old_ranks)
      : spec_(spec), layout_(layout), old_ranks_(old_ranks) {
    new_ranks_ = old_ranks / layout.from * layout.to;
  }

  // Classifies every group and numbers the new ones.
  Status plan(const chakra::CommGroups& groups, RescaleResult& result) {
    // Groups in ascending numeric id order (names are decimal in a comm-group file).
    std::vector<const chakra::CommGroup*> ordered;
    for (const auto& [name, group] : groups.named()) ordered.push_back(&group);
    std::sort(ordered.begin(), ordered.end(), [](const auto* a, const auto* b) {
      return a->name.size() != b->name.size() ? a->name.size() < b->name.size() : a->name < b->name;
    });
    uint32_t next = 1;
    for (const chakra::CommGroup* group : ordered) {
      std::optional<GroupInfo> info = classify(group->ranks, layout_);
      if (!info) {
        std::set<uint32_t> ds;
        for (uint32_t rank : group->ranks) ds.insert(layout_.of(rank).d);
        return spec_error(fmt::format(
            "{}: group '{}' spans {} of the {} data-parallel replicas, or not all of them alike "
            "(rescale handles groups within one replica or across all of them, as data-parallel "
            "groups are; expert-parallel groups carved out of data parallelism are not)",
            spec_.comm_groups, group->name, ds.size(), layout_.from));
      }
      info->name = group->name;
      known_.insert(group->name);
      if (info->data) {
        ++result.data_groups;
        std::vector<uint32_t> members;
        std::set<std::pair<uint32_t, uint32_t>> pairs;
        for (uint32_t rank : group->ranks) {
          const Coord c = layout_.of(rank);
          pairs.emplace(c.inner, c.outer);
        }
        for (const auto& [inner, outer] : pairs) {
          for (uint32_t d = 0; d < layout_.to; ++d)
            members.push_back(layout_.new_rank({inner, d, outer}));
        }
        std::sort(members.begin(), members.end());
        data_names_[group->name] = std::to_string(next++);
        new_groups_.push_back(std::move(members));
      } else {
        ++result.replica_groups;
        for (uint32_t d = 0; d < layout_.to; ++d) {
          if (d % layout_.from != info->replica) continue;
          std::vector<uint32_t> members;
          for (uint32_t rank : group->ranks) {
            Coord c = layout_.of(rank);
            c.d = d;
            members.push_back(layout_.new_rank(c));
          }
          std::sort(members.begin(), members.end());
          replica_names_[{group->name, d}] = std::to_string(next++);
          new_groups_.push_back(std::move(members));
        }
      }
    }
    return Status::ok();
  }

  const std::vector<std::vector<uint32_t>>& new_groups() const { return new_groups_; }
  uint32_t new_ranks() const { return new_ranks_; }

  // Writes new rank `rank` from its source; returns the nodes written.
  Expected<uint64_t> write_rank(uint32_t rank, const std::vector<std::string>& sources,
                                const std::string& path) const {
    const Coord target = layout_.of_new(rank);
    Coord source_coord = target;
    source_coord.d = target.d % layout_.from;
    const uint32_t source = layout_.old_rank(source_coord);
    Expected<chakra::TraceReader> reader = chakra::TraceReader::open(sources[source]);
    if (!reader) return reader.error();
    Expected<chakra::TraceWriter> writer = chakra::TraceWriter::create(path, reader->metadata());
    if (!writer) return writer.error();
    // The whole rank in memory: whether a node works on a data-parallel shard depends on its
    // ancestors, which may come later in the file.
    std::vector<Node> nodes;
    while (true) {
      Node& node = nodes.emplace_back();
      Expected<bool> more = reader->next(node);
      if (!more) return more.error();
      if (!*more) {
        nodes.pop_back();
        break;
      }
    }
    const std::vector<bool> sharded = shard_nodes(nodes);
    const std::string& file = sources[source];
    for (size_t index = 0; index < nodes.size(); ++index) {
      Node& node = nodes[index];
      if (Status status = rewrite(node, source_coord, target, sharded[index], file); !status) {
        return status.error();
      }
      if (Status status = writer->write(node); !status) return status.error();
    }
    if (Status status = writer->close(); !status) return status.error();
    return static_cast<uint64_t>(nodes.size());
  }

 private:
  bool global() const { return spec_.batch == BatchScaling::kGlobal; }

  // Whether `node` is a collective over a data group (or every rank) of `type`.
  bool data_collective(const Node& node, ChakraProtoMsg::CollectiveCommType type) const {
    if (node.type() != ChakraProtoMsg::COMM_COLL_NODE) return false;
    std::string name;
    std::optional<uint64_t> comm_type;
    for (const AttributeProto& attr : node.attr()) {
      if (attr.name() == "pg_name" && attr.has_string_val()) name = attr.string_val();
      if (attr.name() == "comm_type") comm_type = int_value(attr);
    }
    if (!comm_type || *comm_type != static_cast<uint64_t>(type)) return false;
    return name.empty() || (name == "0" && !known_.contains("0")) || data_names_.contains(name);
  }

  // Nodes that work on the 1 / (data group) shard a reduce-scatter over a data group leaves:
  // its data descendants (ZeRO's optimizer steps, a tied embedding's sharded all-reduce) up to an
  // all-gather over a data group, which makes the tensor whole again. Their sizes follow the
  // shard, D / D', whatever the batch.
  std::vector<bool> shard_nodes(const std::vector<Node>& nodes) const {
    std::map<uint64_t, size_t> index_of;
    for (size_t index = 0; index < nodes.size(); ++index)
      index_of.emplace(nodes[index].id(), index);
    // 0 unvisited, 1 on the stack, 2 done. Iterative: chains can be long.
    std::vector<uint8_t> state(nodes.size(), 0);
    std::vector<bool> sharded(nodes.size(), false);
    std::vector<bool> scatters(nodes.size(), false);  // outputs a shard
    for (size_t index = 0; index < nodes.size(); ++index) {
      scatters[index] = data_collective(nodes[index], ChakraProtoMsg::REDUCE_SCATTER);
    }
    for (size_t root = 0; root < nodes.size(); ++root) {
      if (state[root] != 0) continue;
      std::vector<std::pair<size_t, int>> stack{{root, 0}};
      state[root] = 1;
      while (!stack.empty()) {
        auto& [index, next] = stack.back();
        const Node& node = nodes[index];
        if (next < node.data_deps_size()) {
          auto found = index_of.find(node.data_deps(next++));
          if (found != index_of.end() && state[found->second] == 0) {
            state[found->second] = 1;
            stack.emplace_back(found->second, 0);
          }
          continue;
        }
        bool shard = false;
        for (uint64_t parent : node.data_deps()) {
          auto found = index_of.find(parent);
          if (found == index_of.end() || state[found->second] != 2) continue;  // missing, cycle
          const size_t p = found->second;
          shard = shard || scatters[p] ||
                  (sharded[p] && !data_collective(nodes[p], ChakraProtoMsg::ALL_GATHER));
        }
        sharded[index] = shard;
        state[index] = 2;
        stack.pop_back();
      }
    }
    return sharded;
  }

  // A size on a data-parallel shard: D / D'.
  uint64_t shard_scaled(uint64_t value) const { return scale(value, layout_.from, layout_.to); }
  // Work that follows the per-replica batch: D / D' under a fixed global batch.
  uint64_t batch_scaled(uint64_t value) const {
    return global() ? scale(value, layout_.from, layout_.to) : value;
  }

  Status rewrite(Node& node, const Coord& source, const Coord& target, bool sharded,
                 const std::string& file) const {
    auto resize = [&](uint64_t value) {
      return sharded ? shard_scaled(value) : batch_scaled(value);
    };
    auto where = [&] { return fmt::format("{}: node {} ('{}')", file, node.id(), node.name()); };
    switch (node.type()) {
      case ChakraProtoMsg::COMP_NODE: {
        if (!global() && !sharded) return Status::ok();
        node.set_duration_micros(resize(node.duration_micros()));
        for (const char* name : {"num_ops", "tensor_size"}) {
          if (AttributeProto* attr = find_attr(node, name)) {
            if (std::optional<uint64_t> value = int_value(*attr)) set_int(*attr, resize(*value));
          }
        }
        return Status::ok();
      }
      case ChakraProtoMsg::COMM_SEND_NODE:
      case ChakraProtoMsg::COMM_RECV_NODE: {
        const bool send = node.type() == ChakraProtoMsg::COMM_SEND_NODE;
        AttributeProto* peer = find_attr(node, send ? "comm_dst" : "comm_src");
        std::optional<uint64_t> value = peer ? int_value(*peer) : std::nullopt;
        if (!value || *value >= old_ranks_) {
          return spec_error(fmt::format("{}: {} without a valid {}", where(),
                                        send ? "send" : "receive", send ? "comm_dst" : "comm_src"));
        }
        Coord other = layout_.of(static_cast<uint32_t>(*value));
        if (other.d != source.d) {
          return spec_error(fmt::format(
              "{}: {} rank {} crosses data-parallel replicas ({} to {}): rescale moves only "
              "messages within a replica (pipeline stages)",
              where(), send ? "send to" : "receive from", *value, source.d, other.d));
        }
        other.d = target.d;
        set_int(*peer, layout_.new_rank(other));
        if (AttributeProto* size = find_attr(node, "comm_size")) {
          if (std::optional<uint64_t> bytes = int_value(*size)) set_int(*size, resize(*bytes));
        }
        return Status::ok();
      }
      case ChakraProtoMsg::COMM_COLL_NODE:
        return rewrite_collective(node, target, sharded, where);
      case ChakraProtoMsg::METADATA_NODE: {
        chakra::CommGroups probe(old_ranks_);
        const Status parsed =
            chakra::add_groups_from_metadata(node.inputs().values(), where(), probe);
        if (!parsed || !probe.named().empty()) {
          return spec_error(fmt::format(
              "{}: process groups defined in a METADATA node cannot be rescaled (give them as a "
              "comm-group file)",
              where()));
        }
        return Status::ok();
      }
      default:
        return Status::ok();
    }
  }

  template <typename Where>
  Status rewrite_collective(Node& node, const Coord& target, bool sharded,
                            const Where& where) const {
    AttributeProto* pg = find_attr(node, "pg_name");
    std::string name = pg != nullptr && pg->has_string_val() ? pg->string_val() : "";
    bool data = true;  // "" and "0" (unless the file defines "0"): every rank, a data group
    const bool everyone = name.empty() || (name == "0" && !known_.contains("0"));
    if (!everyone) {
      if (auto found = data_names_.find(name); found != data_names_.end()) {
        pg->set_string_val(found->second);
      } else if (auto copy = replica_names_.find({name, target.d}); copy != replica_names_.end()) {
        pg->set_string_val(copy->second);
        data = false;
      } else {
        return spec_error(fmt::format(
            "{}: pg_name '{}' names no group of {}", where(), name,
            spec_.comm_groups.empty() ? "the comm-group file (none given)" : spec_.comm_groups));
      }
    }
    AttributeProto* type_attr = find_attr(node, "comm_type");
    std::optional<uint64_t> type = type_attr ? int_value(*type_attr) : std::nullopt;
    AttributeProto* size = find_attr(node, "comm_size");
    std::optional<uint64_t> bytes = size ? int_value(*size) : std::nullopt;
    if (!type || !bytes) return Status::ok();  // validation reports these; nothing to resize
    if (!data) {
      set_int(*size, sharded ? shard_scaled(*bytes) : batch_scaled(*bytes));
      return Status::ok();
    }
    const auto kind = static_cast<ChakraProtoMsg::CollectiveCommType>(type.value_or(0));
    switch (kind) {
      case ChakraProtoMsg::ALL_GATHER:
        // The per-rank input is a shard of 1 / (group size): the group grows by D'/D.
        set_int(*size, scale(*bytes, layout_.from, layout_.to));
        return Status::ok();
      case ChakraProtoMsg::ALL_TO_ALL:
      case ChakraProtoMsg::GATHER:
      case ChakraProtoMsg::SCATTER:
        return spec_error(fmt::format(
            "{}: {} over data-parallel group '{}': its size depends on how the model is sharded "
            "over the ranks, which a trace does not say (regenerate the workload at the new scale)",
            where(), ChakraProtoMsg::CollectiveCommType_Name(kind),
            name.empty() ? "all ranks" : name));
      default:
        return Status::ok();  // all-reduce, reduce-scatter (whole buffer), broadcast, reduce
    }
  }

  const RescaleSpec& spec_;
  Layout layout_;
  uint32_t old_ranks_;
  uint32_t new_ranks_ = 0;
  std::set<std::string> known_;  // group names of the input file
  std::map<std::string, std::string> data_names_;
  std::map<std::pair<std::string, uint32_t>, std::string> replica_names_;
  std::vector<std::vector<uint32_t>> new_groups_;
};

}  // namespace

Expected<BatchScaling> parse_batch_scaling(std::string_view name) {
  if (name == "per-rank") return BatchScaling::kPerRank;
  if (name == "global") return BatchScaling::kGlobal;
  return Error::make(ErrorKind::kInvalidArgument,
                     "unknown batch scaling '{}' (expected per-rank or global)", name);
}

Expected<RescaleResult> rescale_traces(const RescaleSpec& spec) {
  if (spec.output.empty()) return spec_error("missing -o PREFIX for the rescaled rank files");
  if (spec.from_dp == 0)
    return spec_error("missing --from-dp (the data-parallel degree of the input)");
  if (spec.to_dp == 0) return spec_error("missing --dp (the data-parallel degree to write)");
  Expected<chakra::TraceFiles> files = chakra::resolve_trace_files(spec.workload);
  if (!files) return files.error();
  const auto old_ranks = static_cast<uint32_t>(files->paths.size());
  if (old_ranks % spec.from_dp != 0) {
    return spec_error(fmt::format("--from-dp {} does not divide the {} ranks of {}", spec.from_dp,
                                  old_ranks, spec.workload));
  }
  const uint64_t new_ranks = static_cast<uint64_t>(old_ranks) / spec.from_dp * spec.to_dp;
  if (new_ranks > kMaxRanks) {
    return spec_error(fmt::format("--dp {} makes {} ranks: expected at most {}", spec.to_dp,
                                  new_ranks, kMaxRanks));
  }
  chakra::CommGroups groups(old_ranks);
  if (!spec.comm_groups.empty()) {
    if (Status status = chakra::load_comm_group_file(spec.comm_groups, groups); !status) {
      return status.error();
    }
  }
  uint32_t stride = spec.stride;
  if (stride == 0) {
    Expected<uint32_t> inferred = infer_stride(groups, old_ranks, spec.from_dp);
    if (!inferred) return inferred.error();
    stride = *inferred;
  } else if (old_ranks % (static_cast<uint64_t>(stride) * spec.from_dp) != 0) {
    return spec_error(fmt::format("--dp-stride {} x --from-dp {} does not divide the {} ranks",
                                  stride, spec.from_dp, old_ranks));
  }
  RescaleResult result;
  result.old_ranks = old_ranks;
  result.new_ranks = static_cast<uint32_t>(new_ranks);
  result.stride = stride;
  Rescaler rescaler(spec, Layout{stride, spec.from_dp, spec.to_dp}, old_ranks);
  if (Status status = rescaler.plan(groups, result); !status) return status.error();

  // Writing over the input while reading it would corrupt both.
  std::error_code ec;
  std::set<std::string> inputs;
  for (const std::string& path : files->paths)
    inputs.insert(std::filesystem::weakly_canonical(path, ec).string());
  for (uint32_t rank = 0; rank < result.new_ranks; ++rank) {
    const std::string path = chakra::rank_trace_path(spec.output, rank) + (spec.gzip ? ".gz" : "");
    if (inputs.contains(std::filesystem::weakly_canonical(path, ec).string())) {
      return spec_error(fmt::format(
          "-o {} would overwrite the input rank file {}: write the rescaled set elsewhere",
          spec.output, path));
    }
  }
  const std::filesystem::path folder = std::filesystem::path(spec.output).parent_path();
  if (!folder.empty()) std::filesystem::create_directories(folder, ec);
  result.rank_files.resize(result.new_ranks);
  std::vector<std::optional<Error>> errors(result.new_ranks);
  std::vector<uint64_t> counts(result.new_ranks, 0);
  parallel_for(result.new_ranks, spec.threads, [&](size_t index) {
    const auto rank = static_cast<uint32_t>(index);
    result.rank_files[rank] = chakra::rank_trace_path(spec.output, rank) + (spec.gzip ? ".gz" : "");
    Expected<uint64_t> nodes = rescaler.write_rank(rank, files->paths, result.rank_files[rank]);
    if (!nodes) {
      errors[rank] = nodes.error();
    } else {
      counts[rank] = *nodes;
    }
  });
  for (uint32_t rank = 0; rank < result.new_ranks; ++rank) {
    if (errors[rank]) return *errors[rank];
    result.nodes += counts[rank];
  }
  result.group_file = spec.output + ".json";
  result.new_groups = rescaler.new_groups().size();
  if (Status status = write_comm_groups(result.group_file, rescaler.new_groups()); !status) {
    return status.error();
  }
  return result;
}

}  // namespace orrery::gen
