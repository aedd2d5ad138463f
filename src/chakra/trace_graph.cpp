#include "chakra/trace_graph.h"

#include <cassert>
#include <cstring>

#include <algorithm>
#include <array>
#include <bit>
#include <limits>

namespace orrery::chakra {

using ChakraProtoMsg::AttributeProto;

std::string node_type_name(int32_t type) {
  if (ChakraProtoMsg::NodeType_IsValid(type)) {
    return ChakraProtoMsg::NodeType_Name(static_cast<NodeType>(type));
  }
  return fmt::format("unknown node type {}", type);
}

std::string comm_type_name(int64_t type) {
  if (type >= std::numeric_limits<int32_t>::min() && type <= std::numeric_limits<int32_t>::max() &&
      ChakraProtoMsg::CollectiveCommType_IsValid(static_cast<int>(type))) {
    return ChakraProtoMsg::CollectiveCommType_Name(static_cast<CommType>(type));
  }
  return fmt::format("unknown collective {}", type);
}

std::string_view value_case_name(ValueCase value_case) {
  switch (value_case) {
    case AttributeProto::kDoubleVal:
      return "double_val";
    case AttributeProto::kDoubleList:
      return "double_list";
    case AttributeProto::kFloatVal:
      return "float_val";
    case AttributeProto::kFloatList:
      return "float_list";
    case AttributeProto::kInt32Val:
      return "int32_val";
    case AttributeProto::kInt32List:
      return "int32_list";
    case AttributeProto::kInt64Val:
      return "int64_val";
    case AttributeProto::kInt64List:
      return "int64_list";
    case AttributeProto::kUint32Val:
      return "uint32_val";
    case AttributeProto::kUint32List:
      return "uint32_list";
    case AttributeProto::kUint64Val:
      return "uint64_val";
    case AttributeProto::kUint64List:
      return "uint64_list";
    case AttributeProto::kSint32Val:
      return "sint32_val";
    case AttributeProto::kSint32List:
      return "sint32_list";
    case AttributeProto::kSint64Val:
      return "sint64_val";
    case AttributeProto::kSint64List:
      return "sint64_list";
    case AttributeProto::kFixed32Val:
      return "fixed32_val";
    case AttributeProto::kFixed32List:
      return "fixed32_list";
    case AttributeProto::kFixed64Val:
      return "fixed64_val";
    case AttributeProto::kFixed64List:
      return "fixed64_list";
    case AttributeProto::kSfixed32Val:
      return "sfixed32_val";
    case AttributeProto::kSfixed32List:
      return "sfixed32_list";
    case AttributeProto::kSfixed64Val:
      return "sfixed64_val";
    case AttributeProto::kSfixed64List:
      return "sfixed64_list";
    case AttributeProto::kBoolVal:
      return "bool_val";
    case AttributeProto::kBoolList:
      return "bool_list";
    case AttributeProto::kStringVal:
      return "string_val";
    case AttributeProto::kStringList:
      return "string_list";
    case AttributeProto::kBytesVal:
      return "bytes_val";
    case AttributeProto::kBytesList:
      return "bytes_list";
    case AttributeProto::VALUE_NOT_SET:
      return "no value";
  }
  return "unknown member";
}

namespace {

bool is_unsigned_scalar(ValueCase value_case) {
  return value_case == AttributeProto::kUint32Val || value_case == AttributeProto::kUint64Val ||
         value_case == AttributeProto::kFixed32Val || value_case == AttributeProto::kFixed64Val;
}

bool is_signed_scalar(ValueCase value_case) {
  switch (value_case) {
    case AttributeProto::kInt32Val:
    case AttributeProto::kInt64Val:
    case AttributeProto::kSint32Val:
    case AttributeProto::kSint64Val:
    case AttributeProto::kSfixed32Val:
    case AttributeProto::kSfixed64Val:
    case AttributeProto::kBoolVal:
      return true;
    default:
      return false;
  }
}

bool is_integer_list(ValueCase value_case) {
  switch (value_case) {
    case AttributeProto::kInt32List:
    case AttributeProto::kInt64List:
    case AttributeProto::kUint32List:
    case AttributeProto::kUint64List:
    case AttributeProto::kSint32List:
    case AttributeProto::kSint64List:
    case AttributeProto::kFixed32List:
    case AttributeProto::kFixed64List:
    case AttributeProto::kSfixed32List:
    case AttributeProto::kSfixed64List:
    case AttributeProto::kBoolList:
      return true;
    default:
      return false;
  }
}

template <typename List, typename Pool>
void append_list(const List& list, Pool& pool, std::vector<ListRef>& lists, Attribute& attribute) {
  attribute.list = static_cast<uint32_t>(lists.size());
  lists.push_back({pool.size(), static_cast<uint32_t>(list.values_size())});
  for (auto value : list.values()) pool.push_back(static_cast<typename Pool::value_type>(value));
}

}  // namespace

// ---- StringTable
// ---------------------------------------------------------------------------------

StringTable::StringTable(const StringTable& other) : strings_(other.strings_) {
  index_.reserve(strings_.size());
  for (size_t id = 0; id < strings_.size(); ++id) {
    index_.emplace(strings_[id], static_cast<StringId>(id));
  }
}

StringTable& StringTable::operator=(const StringTable& other) {
  if (this != &other) *this = StringTable(other);
  return *this;
}

StringId StringTable::intern(std::string_view text) {
  if (auto found = index_.find(text); found != index_.end()) return found->second;
  const auto id = static_cast<StringId>(strings_.size());
  strings_.emplace_back(text);
  index_.emplace(strings_.back(), id);
  return id;
}

std::optional<StringId> StringTable::find(std::string_view text) const {
  if (auto found = index_.find(text); found != index_.end()) return found->second;
  return std::nullopt;
}

size_t StringTable::memory_bytes() const {
  size_t bytes = strings_.size() * (sizeof(std::string) + 2 * sizeof(void*) + sizeof(StringId));
  for (const std::string& text : strings_) {
    if (text.capacity() > 15) bytes += text.capacity() + 1;
  }
  return bytes + index_.bucket_count() * sizeof(void*);
}

// ---- TraceGraph: building --------------------------------------------------------------------

StringId TraceGraph::store_string(const std::string& text) {
  return tables().strings_.intern(text);
}

TraceGraph::Tables& TraceGraph::tables() {
  // A graph being built owns its tables; one that shares them (a copy) takes its own first.
  if (t_.use_count() > 1) t_ = std::make_shared<Tables>(*t_);
  return *t_;
}

TraceGraph TraceGraph::derived_from(const TraceGraph& base) {
  TraceGraph graph;
  graph.t_ = base.t_;
  graph.source_ = base.source_;
  graph.metadata_ = base.metadata_;
  return graph;
}

bool TraceGraph::patch_node(NodeIndex index, const ChakraProtoMsg::Node& node,
                            bool unknown_fields) {
  const Tables& t = *t_;
  if (index >= size()) return false;
  const NodeRecord& record = t.nodes_[index];
  if (record.id != node.id() || record.type != static_cast<int32_t>(node.type()) ||
      record.start_time_micros != node.start_time_micros() ||
      record.duration_micros != node.duration_micros() || string(record.name) != node.name()) {
    return false;
  }
  if (inputs_values(index) != node.inputs().values() ||
      outputs_values(index) != node.outputs().values()) {
    return false;
  }
  const auto same_ids = [](std::span<const uint64_t> mine, const auto& theirs) {
    return mine.size() == static_cast<size_t>(theirs.size()) &&
           std::equal(mine.begin(), mine.end(), theirs.begin());
  };
  if (!same_ids(data_deps(index), node.data_deps()) ||
      !same_ids(ctrl_deps(index), node.ctrl_deps())) {
    return false;
  }
  const bool marked =
      std::binary_search(t.unknown_field_nodes_.begin(), t.unknown_field_nodes_.end(), index);
  if (marked != unknown_fields) return false;
  const std::span<const Attribute> base = {t.attrs_.data() + t.attr_offsets_[index],
                                           t.attr_offsets_[index + 1] - t.attr_offsets_[index]};
  if (base.size() != static_cast<size_t>(node.attr_size())) return false;
  // Strings and lists are compared with the record's own values; only numbers are decoded, into
  // tables reused from call to call (a rank file patches thousands of nodes: no allocation, no
  // hashing of attribute names per node).
  thread_local Tables scratch;
  thread_local std::vector<Attribute> values;
  values.clear();
  bool differs = false;
  for (size_t idx = 0; idx < base.size(); ++idx) {
    const AttributeProto& proto = node.attr(static_cast<int>(idx));
    const Attribute& mine = base[idx];
    if (mine.value_case != proto.value_case() || string(mine.name) != proto.name()) return false;
    const ValueCase kind = mine.value_case;
    Attribute value = mine;
    if (kind == AttributeProto::kStringVal || kind == AttributeProto::kBytesVal) {
      const std::string& text =
          kind == AttributeProto::kStringVal ? proto.string_val() : proto.bytes_val();
      if (text != string(mine.str)) {
        differs = true;
        const std::optional<StringId> shared = t.strings_.find(text);
        value.str = shared ? *shared
                           : static_cast<StringId>(t.strings_.size()) + extra_strings_.intern(text);
      }
    } else if (kind == AttributeProto::kStringList || kind == AttributeProto::kBytesList) {
      // Lists are shared: they must be equal.
      const auto& texts = kind == AttributeProto::kStringList ? proto.string_list().values()
                                                              : proto.bytes_list().values();
      const ListRef& left = t.lists_[mine.list];
      if (left.count != static_cast<uint32_t>(texts.size())) return false;
      for (uint32_t item = 0; item < left.count; ++item) {
        if (string(t.string_pool_[left.first + item]) != texts[static_cast<int>(item)]) {
          return false;
        }
      }
    } else if (kind != AttributeProto::VALUE_NOT_SET) {
      scratch.lists_.clear();
      scratch.int_pool_.clear();
      scratch.double_pool_.clear();
      const Attribute decoded =
          convert(proto, scratch, [](const std::string&) { return kNoString; });
      if (is_integer_list(kind) || kind == AttributeProto::kDoubleList ||
          kind == AttributeProto::kFloatList) {
        const ListRef& left = t.lists_[mine.list];
        const ListRef& right = scratch.lists_[decoded.list];
        if (left.count != right.count) return false;
        for (uint32_t item = 0; item < left.count; ++item) {
          if (kind == AttributeProto::kDoubleList || kind == AttributeProto::kFloatList) {
            if (std::memcmp(&t.double_pool_[left.first + item],
                            &scratch.double_pool_[right.first + item], sizeof(double)) != 0) {
              return false;
            }
          } else if (t.int_pool_[left.first + item] != scratch.int_pool_[right.first + item]) {
            return false;
          }
        }
      } else {
        value = decoded;
        value.name = mine.name;
        if (value.u != mine.u) differs = true;  // scalars compare by their bits
      }
    }
    values.push_back(value);
  }
  if (!differs) return true;
  push_patch(index, values);
  return true;
}

void TraceGraph::push_patch(NodeIndex index, std::span<const Attribute> values) {
  renamed_only_ = false;  // renamed_from sets it again once done
  assert(patches_.empty() || patches_.back().node < index);
  if (patched_.empty()) {
    patched_.assign((size() + 63) / 64, 0);
    word_first_patch_.assign(patched_.size(), 0);
  }
  // Patches come in ascending node order: a word's first one is the next index.
  if (patched_[index / 64] == 0)
    word_first_patch_[index / 64] = static_cast<uint32_t>(patches_.size());
  patched_[index / 64] |= uint64_t{1} << (index % 64);
  patches_.push_back(
      {index, static_cast<uint32_t>(patch_attrs_.size()), static_cast<uint32_t>(values.size())});
  patch_attrs_.insert(patch_attrs_.end(), values.begin(), values.end());
}

std::vector<NodeIndex> TraceGraph::renamable_nodes() const {
  const std::array<StringId, 3> names = {key("comm_src").id, key("comm_dst").id, key("pg_name").id};
  std::vector<NodeIndex> out;
  for (NodeIndex node = 0; node < size(); ++node) {
    for (const Attribute& attribute : attributes(node)) {
      // An attribute's name is always interned; a name no node has is kNoString and matches none.
      if (std::find(names.begin(), names.end(), attribute.name) != names.end()) {
        out.push_back(node);
        break;
      }
    }
  }
  return out;
}

const std::pair<int64_t, int64_t>* TraceGraph::Renaming::find_peer(int64_t from) const {
  const auto found = std::lower_bound(
      peers.begin(), peers.end(), from,
      [](const std::pair<int64_t, int64_t>& entry, int64_t key) { return entry.first < key; });
  return found != peers.end() && found->first == from ? &*found : nullptr;
}

const std::pair<std::string, std::string>* TraceGraph::Renaming::find_group(
    std::string_view from) const {
  const auto found = std::lower_bound(groups.begin(), groups.end(), from,
                                      [](const std::pair<std::string, std::string>& entry,
                                         std::string_view key) { return entry.first < key; });
  return found != groups.end() && found->first == from ? &*found : nullptr;
}

TraceGraph TraceGraph::renamed_from(const TraceGraph& base, const Renaming& renaming,
                                    std::span<const NodeIndex> candidates) {
  assert(base.patched_count() == 0 && "renamed_from: the base must hold its own values");
  TraceGraph graph = derived_from(base);
  const Tables& t = *base.t_;
  const StringId src = base.key("comm_src").id, dst = base.key("comm_dst").id;
  const StringId pg = base.key("pg_name").id;
  // The renamed groups' targets as this graph's string ids (by position in renaming.groups),
  // resolved once.
  std::vector<StringId> group_ids;
  group_ids.reserve(renaming.groups.size());
  for (const auto& [from, to] : renaming.groups) {
    const std::optional<StringId> shared = t.strings_.find(to);
    group_ids.push_back(shared ? *shared
                               : static_cast<StringId>(t.strings_.size()) +
                                     graph.extra_strings_.intern(to));
  }
  std::vector<Attribute> values;
  for (const NodeIndex node : candidates) {
    const std::span<const Attribute> mine = base.attributes(node);
    values.assign(mine.begin(), mine.end());
    bool differs = false;
    for (Attribute& value : values) {
      const bool integer =
          is_signed_scalar(value.value_case) || is_unsigned_scalar(value.value_case);
      if ((value.name == src || value.name == dst) && integer) {
        const auto* found = renaming.find_peer(value.i);
        if (found != nullptr && found->second != value.i) {
          value.i = found->second;  // peers are non-negative: the same bits signed or unsigned
          differs = true;
        }
      } else if (value.name == pg && (value.value_case == ValueCase::kStringVal ||
                                      value.value_case == ValueCase::kBytesVal)) {
        const auto* found = renaming.find_group(base.string(value.str));
        const StringId to = found == nullptr
                                ? value.str
                                : group_ids[static_cast<size_t>(found - renaming.groups.data())];
        if (to != value.str) {
          value.str = to;
          differs = true;
        }
      }
    }
    if (!differs) continue;
    graph.push_patch(node, values);
  }
  // Tens of thousands of renamed ranks stay in memory for the run: no growth slack.
  graph.patches_.shrink_to_fit();
  graph.patch_attrs_.shrink_to_fit();
  graph.renamed_only_ = true;
  return graph;
}

void TraceGraph::reserve_like_current(size_t nodes) {
  Tables& t = tables();
  const size_t have = std::max<size_t>(t.nodes_.size(), 1);
  auto scaled = [&](size_t used) { return used + (used * nodes) / have + 16; };
  t.nodes_.reserve(t.nodes_.size() + nodes);
  t.io_.reserve(scaled(t.io_.size()));
  t.data_offsets_.reserve(t.data_offsets_.size() + nodes);
  t.ctrl_offsets_.reserve(t.ctrl_offsets_.size() + nodes);
  t.attr_offsets_.reserve(t.attr_offsets_.size() + nodes);
  t.data_deps_.reserve(scaled(t.data_deps_.size()));
  t.ctrl_deps_.reserve(scaled(t.ctrl_deps_.size()));
  t.attrs_.reserve(scaled(t.attrs_.size()));
  t.int_pool_.reserve(scaled(t.int_pool_.size()));
  t.double_pool_.reserve(scaled(t.double_pool_.size()));
  t.string_pool_.reserve(scaled(t.string_pool_.size()));
  t.lists_.reserve(scaled(t.lists_.size()));
}

template <typename Store>
Attribute TraceGraph::convert(const AttributeProto& proto, Tables& t, Store&& store) {
  Attribute attribute;
  attribute.name = store(proto.name());
  attribute.value_case = proto.value_case();
  switch (proto.value_case()) {
    case AttributeProto::kDoubleVal:
      attribute.d = proto.double_val();
      break;
    case AttributeProto::kFloatVal:
      attribute.d = static_cast<double>(proto.float_val());
      break;
    case AttributeProto::kInt32Val:
      attribute.i = proto.int32_val();
      break;
    case AttributeProto::kInt64Val:
      attribute.i = proto.int64_val();
      break;
    case AttributeProto::kUint32Val:
      attribute.u = proto.uint32_val();
      break;
    case AttributeProto::kUint64Val:
      attribute.u = proto.uint64_val();
      break;
    case AttributeProto::kSint32Val:
      attribute.i = proto.sint32_val();
      break;
    case AttributeProto::kSint64Val:
      attribute.i = proto.sint64_val();
      break;
    case AttributeProto::kFixed32Val:
      attribute.u = proto.fixed32_val();
      break;
    case AttributeProto::kFixed64Val:
      attribute.u = proto.fixed64_val();
      break;
    case AttributeProto::kSfixed32Val:
      attribute.i = proto.sfixed32_val();
      break;
    case AttributeProto::kSfixed64Val:
      attribute.i = proto.sfixed64_val();
      break;
    case AttributeProto::kBoolVal:
      attribute.i = proto.bool_val() ? 1 : 0;
      break;
    case AttributeProto::kStringVal:
      attribute.str = store(proto.string_val());
      break;
    case AttributeProto::kBytesVal:
      attribute.str = store(proto.bytes_val());
      break;
    case AttributeProto::kDoubleList:
      append_list(proto.double_list(), t.double_pool_, t.lists_, attribute);
      break;
    case AttributeProto::kFloatList:
      append_list(proto.float_list(), t.double_pool_, t.lists_, attribute);
      break;
    case AttributeProto::kInt32List:
      append_list(proto.int32_list(), t.int_pool_, t.lists_, attribute);
      break;
    case AttributeProto::kInt64List:
      append_list(proto.int64_list(), t.int_pool_, t.lists_, attribute);
      break;
    case AttributeProto::kUint32List:
      append_list(proto.uint32_list(), t.int_pool_, t.lists_, attribute);
      break;
    case AttributeProto::kUint64List:
      append_list(proto.uint64_list(), t.int_pool_, t.lists_, attribute);
      break;
    case AttributeProto::kSint32List:
      append_list(proto.sint32_list(), t.int_pool_, t.lists_, attribute);
      break;
    case AttributeProto::kSint64List:
      append_list(proto.sint64_list(), t.int_pool_, t.lists_, attribute);
      break;
    case AttributeProto::kFixed32List:
      append_list(proto.fixed32_list(), t.int_pool_, t.lists_, attribute);
      break;
    case AttributeProto::kFixed64List:
      append_list(proto.fixed64_list(), t.int_pool_, t.lists_, attribute);
      break;
    case AttributeProto::kSfixed32List:
      append_list(proto.sfixed32_list(), t.int_pool_, t.lists_, attribute);
      break;
    case AttributeProto::kSfixed64List:
      append_list(proto.sfixed64_list(), t.int_pool_, t.lists_, attribute);
      break;
    case AttributeProto::kBoolList:
      append_list(proto.bool_list(), t.int_pool_, t.lists_, attribute);
      break;
    case AttributeProto::kStringList:
    case AttributeProto::kBytesList: {
      const auto& values = proto.value_case() == AttributeProto::kStringList
                               ? proto.string_list().values()
                               : proto.bytes_list().values();
      attribute.list = static_cast<uint32_t>(t.lists_.size());
      t.lists_.push_back({t.string_pool_.size(), static_cast<uint32_t>(values.size())});
      for (const std::string& value : values) t.string_pool_.push_back(store(value));
      break;
    }
    case AttributeProto::VALUE_NOT_SET:
      break;
  }
  return attribute;
}

void TraceGraph::add_node(const ChakraProtoMsg::Node& node) {
  Tables& t = tables();
  NodeRecord record;
  record.id = node.id();
  record.start_time_micros = node.start_time_micros();
  record.duration_micros = node.duration_micros();
  record.name = store_string(node.name());
  record.type = static_cast<int32_t>(node.type());
  if (!node.inputs().values().empty() || !node.outputs().values().empty()) {
    record.io = static_cast<uint32_t>(t.io_.size());
    t.io_.push_back(
        {node.inputs().values().empty() ? kNoString : store_string(node.inputs().values()),
         node.outputs().values().empty() ? kNoString : store_string(node.outputs().values())});
  }
  t.nodes_.push_back(record);

  t.data_deps_.insert(t.data_deps_.end(), node.data_deps().begin(), node.data_deps().end());
  t.data_offsets_.push_back(static_cast<uint32_t>(t.data_deps_.size()));
  t.ctrl_deps_.insert(t.ctrl_deps_.end(), node.ctrl_deps().begin(), node.ctrl_deps().end());
  t.ctrl_offsets_.push_back(static_cast<uint32_t>(t.ctrl_deps_.size()));

  const auto store = [this](const std::string& text) { return store_string(text); };
  for (const AttributeProto& proto : node.attr()) t.attrs_.push_back(convert(proto, t, store));
  t.attr_offsets_.push_back(static_cast<uint32_t>(t.attrs_.size()));
}

void TraceGraph::finish() {
  Tables& t = tables();
  t.ids_sorted_ = true;
  for (size_t idx = 1; idx < t.nodes_.size(); ++idx) {
    if (t.nodes_[idx].id <= t.nodes_[idx - 1].id) {
      t.ids_sorted_ = false;
      break;
    }
  }
  t.id_index_.clear();
  t.duplicate_ids_.clear();
  if (t.ids_sorted_) return;
  t.id_index_.reserve(t.nodes_.size());
  for (NodeIndex idx = 0; idx < size(); ++idx) t.id_index_.emplace_back(t.nodes_[idx].id, idx);
  std::sort(t.id_index_.begin(), t.id_index_.end());
  for (size_t idx = 1; idx < t.id_index_.size(); ++idx) {
    if (t.id_index_[idx].first == t.id_index_[idx - 1].first &&
        (t.duplicate_ids_.empty() || t.duplicate_ids_.back() != t.id_index_[idx].first)) {
      t.duplicate_ids_.push_back(t.id_index_[idx].first);
    }
  }
}

// ---- TraceGraph: queries ----------------------------------------------------------------------

std::span<const uint64_t> TraceGraph::data_deps(NodeIndex node) const {
  return {t_->data_deps_.data() + t_->data_offsets_[node],
          t_->data_offsets_[node + 1] - t_->data_offsets_[node]};
}

std::span<const uint64_t> TraceGraph::ctrl_deps(NodeIndex node) const {
  return {t_->ctrl_deps_.data() + t_->ctrl_offsets_[node],
          t_->ctrl_offsets_[node + 1] - t_->ctrl_offsets_[node]};
}

std::string_view TraceGraph::inputs_values(NodeIndex node) const {
  const uint32_t io = t_->nodes_[node].io;
  if (io == UINT32_MAX || t_->io_[io].inputs_values == kNoString) return {};
  return string(t_->io_[io].inputs_values);
}

std::string_view TraceGraph::outputs_values(NodeIndex node) const {
  const uint32_t io = t_->nodes_[node].io;
  if (io == UINT32_MAX || t_->io_[io].outputs_values == kNoString) return {};
  return string(t_->io_[io].outputs_values);
}

std::optional<NodeIndex> TraceGraph::find(uint64_t id) const {
  if (t_->ids_sorted_) {
    auto found =
        std::lower_bound(t_->nodes_.begin(), t_->nodes_.end(), id,
                         [](const NodeRecord& record, uint64_t key) { return record.id < key; });
    if (found == t_->nodes_.end() || found->id != id) return std::nullopt;
    return static_cast<NodeIndex>(found - t_->nodes_.begin());
  }
  auto found = std::lower_bound(t_->id_index_.begin(), t_->id_index_.end(),
                                std::make_pair(id, NodeIndex{0}));
  if (found == t_->id_index_.end() || found->first != id) return std::nullopt;
  return found->second;
}

std::span<const Attribute> TraceGraph::attributes(NodeIndex node) const {
  if (!patched_.empty()) {
    const uint64_t word = patched_[node / 64];
    const uint64_t bit = uint64_t{1} << (node % 64);
    if ((word & bit) != 0) {
      // The patch's index: its word's first, plus the patched nodes before it in the word.
      const Patch& patch = patches_[word_first_patch_[node / 64] +
                                    static_cast<uint32_t>(std::popcount(word & (bit - 1)))];
      return {patch_attrs_.data() + patch.first, patch.count};
    }
  }
  return {t_->attrs_.data() + t_->attr_offsets_[node],
          t_->attr_offsets_[node + 1] - t_->attr_offsets_[node]};
}

const Attribute* TraceGraph::find_attribute(NodeIndex node, StringId key) const {
  if (key == kNoString) return nullptr;
  for (const Attribute& attribute : attributes(node)) {
    if (attribute.name == key) return &attribute;
  }
  return nullptr;
}

const Attribute* TraceGraph::find_attribute(NodeIndex node, std::string_view name) const {
  const std::optional<StringId> key = t_->strings_.find(name);
  return key ? find_attribute(node, *key) : nullptr;
}

AttributeKey TraceGraph::key(std::string_view name) const {
  return AttributeKey{t_->strings_.find(name).value_or(kNoString), name};
}

Error TraceGraph::attribute_error(NodeIndex node, const Attribute& attribute,
                                  std::string_view wanted) const {
  return Error::make(ErrorKind::kTrace, "node {}: attribute '{}' holds {}, expected {}",
                     t_->nodes_[node].id, string(attribute.name),
                     value_case_name(attribute.value_case), wanted);
}

Expected<int64_t> TraceGraph::as_int(NodeIndex node, const Attribute& attribute) const {
  if (is_signed_scalar(attribute.value_case)) return attribute.i;
  if (is_unsigned_scalar(attribute.value_case)) {
    if (attribute.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Error::make(ErrorKind::kTrace, "node {}: attribute '{}' value {} is out of range",
                         t_->nodes_[node].id, string(attribute.name), attribute.u);
    }
    return static_cast<int64_t>(attribute.u);
  }
  return attribute_error(node, attribute, "an integer");
}

Expected<double> TraceGraph::as_double(NodeIndex node, const Attribute& attribute) const {
  if (attribute.value_case == AttributeProto::kDoubleVal ||
      attribute.value_case == AttributeProto::kFloatVal) {
    return attribute.d;
  }
  if (is_signed_scalar(attribute.value_case)) return static_cast<double>(attribute.i);
  if (is_unsigned_scalar(attribute.value_case)) return static_cast<double>(attribute.u);
  return attribute_error(node, attribute, "a number");
}

Expected<std::optional<int64_t>> TraceGraph::get_int(NodeIndex node, std::string_view name) const {
  return get_int(node, key(name));
}

Expected<std::optional<int64_t>> TraceGraph::get_int(NodeIndex node,
                                                     const AttributeKey& key) const {
  const Attribute* attribute = find_attribute(node, key.id);
  if (attribute == nullptr) return std::optional<int64_t>();
  Expected<int64_t> value = as_int(node, *attribute);
  if (!value) return value.error();
  return std::optional<int64_t>(*value);
}

Expected<int64_t> TraceGraph::get_int_or(NodeIndex node, std::string_view name,
                                         int64_t fallback) const {
  return get_int_or(node, key(name), fallback);
}

Expected<int64_t> TraceGraph::get_int_or(NodeIndex node, const AttributeKey& key,
                                         int64_t fallback) const {
  Expected<std::optional<int64_t>> value = get_int(node, key);
  if (!value) return value.error();
  return value->value_or(fallback);
}

Expected<std::optional<uint64_t>> TraceGraph::get_uint(NodeIndex node,
                                                       std::string_view name) const {
  return get_uint(node, key(name));
}

Expected<std::optional<uint64_t>> TraceGraph::get_uint(NodeIndex node,
                                                       const AttributeKey& key) const {
  const Attribute* attribute = find_attribute(node, key.id);
  if (attribute == nullptr) return std::optional<uint64_t>();
  if (is_unsigned_scalar(attribute->value_case)) return std::optional<uint64_t>(attribute->u);
  Expected<int64_t> value = as_int(node, *attribute);
  if (!value) return value.error();
  if (*value < 0) {
    return Error::make(ErrorKind::kTrace, "node {}: attribute '{}' is {}, expected a value >= 0",
                       t_->nodes_[node].id, key.name, *value);
  }
  return std::optional<uint64_t>(static_cast<uint64_t>(*value));
}

Expected<bool> TraceGraph::get_bool_or(NodeIndex node, std::string_view name, bool fallback) const {
  return get_bool_or(node, key(name), fallback);
}

Expected<bool> TraceGraph::get_bool_or(NodeIndex node, const AttributeKey& key,
                                       bool fallback) const {
  const Attribute* attribute = find_attribute(node, key.id);
  if (attribute == nullptr) return fallback;
  if (is_unsigned_scalar(attribute->value_case)) return attribute->u != 0;
  if (is_signed_scalar(attribute->value_case)) return attribute->i != 0;
  return attribute_error(node, *attribute, "a boolean or integer");
}

Expected<std::optional<double>> TraceGraph::get_double(NodeIndex node,
                                                       std::string_view name) const {
  const Attribute* attribute = find_attribute(node, name);
  if (attribute == nullptr) return std::optional<double>();
  Expected<double> value = as_double(node, *attribute);
  if (!value) return value.error();
  return std::optional<double>(*value);
}

Expected<std::optional<std::string_view>> TraceGraph::get_string(NodeIndex node,
                                                                 std::string_view name) const {
  return get_string(node, key(name));
}

Expected<std::optional<std::string_view>> TraceGraph::get_string(NodeIndex node,
                                                                 const AttributeKey& key) const {
  const Attribute* attribute = find_attribute(node, key.id);
  if (attribute == nullptr) return std::optional<std::string_view>();
  if (attribute->value_case != AttributeProto::kStringVal &&
      attribute->value_case != AttributeProto::kBytesVal) {
    return attribute_error(node, *attribute, "a string");
  }
  return std::optional<std::string_view>(string(attribute->str));
}

Expected<std::optional<std::vector<bool>>> TraceGraph::get_bool_list(NodeIndex node,
                                                                     std::string_view name) const {
  return get_bool_list(node, key(name));
}

Expected<std::optional<std::vector<bool>>> TraceGraph::get_bool_list(
    NodeIndex node, const AttributeKey& key) const {
  const Attribute* attribute = find_attribute(node, key.id);
  if (attribute == nullptr) return std::optional<std::vector<bool>>();
  if (!is_integer_list(attribute->value_case)) {
    return attribute_error(node, *attribute, "a bool_list");
  }
  const ListRef& list = t_->lists_[attribute->list];
  std::vector<bool> values(list.count);
  for (uint32_t idx = 0; idx < list.count; ++idx) {
    values[idx] = t_->int_pool_[list.first + idx] != 0;
  }
  return std::optional<std::vector<bool>>(std::move(values));
}

Expected<std::optional<std::vector<int64_t>>> TraceGraph::get_int_list(
    NodeIndex node, std::string_view name) const {
  const Attribute* attribute = find_attribute(node, name);
  if (attribute == nullptr) return std::optional<std::vector<int64_t>>();
  if (!is_integer_list(attribute->value_case)) {
    return attribute_error(node, *attribute, "an integer list");
  }
  const ListRef& list = t_->lists_[attribute->list];
  const auto first = static_cast<std::ptrdiff_t>(list.first);
  return std::optional<std::vector<int64_t>>(std::vector<int64_t>(
      t_->int_pool_.begin() + first, t_->int_pool_.begin() + first + list.count));
}

Expected<std::optional<std::vector<double>>> TraceGraph::get_double_list(
    NodeIndex node, std::string_view name) const {
  const Attribute* attribute = find_attribute(node, name);
  if (attribute == nullptr) return std::optional<std::vector<double>>();
  if (attribute->value_case != AttributeProto::kDoubleList &&
      attribute->value_case != AttributeProto::kFloatList) {
    return attribute_error(node, *attribute, "a double_list");
  }
  const ListRef& list = t_->lists_[attribute->list];
  const auto first = static_cast<std::ptrdiff_t>(list.first);
  return std::optional<std::vector<double>>(std::vector<double>(
      t_->double_pool_.begin() + first, t_->double_pool_.begin() + first + list.count));
}

Expected<std::optional<std::vector<std::string_view>>> TraceGraph::get_string_list(
    NodeIndex node, std::string_view name) const {
  const Attribute* attribute = find_attribute(node, name);
  if (attribute == nullptr) return std::optional<std::vector<std::string_view>>();
  if (attribute->value_case != AttributeProto::kStringList &&
      attribute->value_case != AttributeProto::kBytesList) {
    return attribute_error(node, *attribute, "a string_list");
  }
  const ListRef& list = t_->lists_[attribute->list];
  std::vector<std::string_view> values(list.count);
  for (uint32_t idx = 0; idx < list.count; ++idx) {
    values[idx] = string(t_->string_pool_[list.first + idx]);
  }
  return std::optional<std::vector<std::string_view>>(std::move(values));
}

bool TraceGraph::same_work(const TraceGraph& other) const { return same_work_except(other, {}); }

bool TraceGraph::same_work_except(const TraceGraph& other,
                                  std::span<const std::string_view> ignored) const {
  if (size() != other.size()) return false;
  auto same_deps = [&](std::span<const uint64_t> mine, std::span<const uint64_t> theirs,
                       NodeIndex node) {
    if (mine.size() != theirs.size()) return false;
    for (size_t idx = 0; idx < mine.size(); ++idx) {
      // Compare positions: a parent outside the file, or the node itself, must be so in both.
      const std::optional<NodeIndex> lhs = find(mine[idx]);
      const std::optional<NodeIndex> rhs = other.find(theirs[idx]);
      if (lhs != rhs) return false;
      if (!lhs && (mine[idx] == id(node)) != (theirs[idx] == other.id(node))) return false;
    }
    return true;
  };
  auto same_list = [&](const Attribute& lhs, const Attribute& rhs) {
    const ListRef& left = t_->lists_[lhs.list];
    const ListRef& right = other.t_->lists_[rhs.list];
    if (left.count != right.count) return false;
    for (uint32_t idx = 0; idx < left.count; ++idx) {
      switch (lhs.value_case) {
        case AttributeProto::kDoubleList:
        case AttributeProto::kFloatList:
          if (t_->double_pool_[left.first + idx] != other.t_->double_pool_[right.first + idx])
            return false;
          break;
        case AttributeProto::kStringList:
        case AttributeProto::kBytesList:
          if (string(t_->string_pool_[left.first + idx]) !=
              other.string(other.t_->string_pool_[right.first + idx])) {
            return false;
          }
          break;
        default:
          if (t_->int_pool_[left.first + idx] != other.t_->int_pool_[right.first + idx])
            return false;
      }
    }
    return true;
  };
  // Graphs sharing their tables have the same nodes and edges; only attribute values may differ,
  // and only on nodes one of them patched (the others hold the very same attribute arrays).
  const bool shared = t_ == other.t_;
  auto same_node = [&](NodeIndex node) {
    const NodeRecord& mine = t_->nodes_[node];
    const NodeRecord& theirs = other.t_->nodes_[node];
    if (!shared) {
      if (mine.type != theirs.type || mine.duration_micros != theirs.duration_micros) return false;
      if (!same_deps(data_deps(node), other.data_deps(node), node) ||
          !same_deps(ctrl_deps(node), other.ctrl_deps(node), node)) {
        return false;
      }
    }
    const std::span<const Attribute> lhs = attributes(node);
    const std::span<const Attribute> rhs = other.attributes(node);
    if (lhs.size() != rhs.size()) return false;
    for (size_t idx = 0; idx < lhs.size(); ++idx) {
      const Attribute& left = lhs[idx];
      const Attribute& right = rhs[idx];
      if (left.value_case != right.value_case ||
          (left.name != right.name && string(left.name) != other.string(right.name))) {
        return false;
      }
      if (!ignored.empty() &&
          std::find(ignored.begin(), ignored.end(), string(left.name)) != ignored.end()) {
        continue;
      }
      switch (left.value_case) {
        case AttributeProto::kStringVal:
        case AttributeProto::kBytesVal:
          if (string(left.str) != other.string(right.str)) return false;
          break;
        case AttributeProto::VALUE_NOT_SET:
          break;
        default:
          if (is_integer_list(left.value_case) || left.value_case == AttributeProto::kDoubleList ||
              left.value_case == AttributeProto::kFloatList ||
              left.value_case == AttributeProto::kStringList ||
              left.value_case == AttributeProto::kBytesList) {
            if (!same_list(left, right)) return false;
          } else if (left.u != right.u) {
            return false;  // scalars compare by their bits
          }
      }
    }
    return true;
  };
  if (!shared) {
    for (NodeIndex node = 0; node < size(); ++node) {
      if (!same_node(node)) return false;
    }
    return true;
  }
  // Both patch lists ascend: walk their union.
  size_t mine_at = 0;
  size_t theirs_at = 0;
  while (mine_at < patches_.size() || theirs_at < other.patches_.size()) {
    const NodeIndex lhs = mine_at < patches_.size() ? patches_[mine_at].node : size();
    const NodeIndex rhs =
        theirs_at < other.patches_.size() ? other.patches_[theirs_at].node : size();
    const NodeIndex node = std::min(lhs, rhs);
    if (!same_node(node)) return false;
    if (lhs == node) ++mine_at;
    if (rhs == node) ++theirs_at;
  }
  return true;
}

size_t TraceGraph::overlay_bytes() const {
  return patched_.capacity() * sizeof(uint64_t) + word_first_patch_.capacity() * sizeof(uint32_t) +
         patches_.capacity() * sizeof(Patch) + patch_attrs_.capacity() * sizeof(Attribute) +
         extra_strings_.memory_bytes();
}

size_t TraceGraph::memory_bytes() const {
  return t_->nodes_.capacity() * sizeof(NodeRecord) + t_->io_.capacity() * sizeof(IoRecord) +
         (t_->data_offsets_.capacity() + t_->ctrl_offsets_.capacity() +
          t_->attr_offsets_.capacity()) *
             sizeof(uint32_t) +
         (t_->data_deps_.capacity() + t_->ctrl_deps_.capacity()) * sizeof(uint64_t) +
         t_->attrs_.capacity() * sizeof(Attribute) + t_->lists_.capacity() * sizeof(ListRef) +
         t_->int_pool_.capacity() * sizeof(int64_t) + t_->double_pool_.capacity() * sizeof(double) +
         t_->string_pool_.capacity() * sizeof(StringId) +
         t_->id_index_.capacity() * sizeof(std::pair<uint64_t, NodeIndex>) +
         t_->strings_.memory_bytes() + overlay_bytes();
}

}  // namespace orrery::chakra
