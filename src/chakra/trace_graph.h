// chakra/trace_graph.h: the in-memory graph of one rank's Chakra trace.
//
// A compact, read-only node table built once from a stream of Node messages: plain arrays indexed
// by a dense NodeIndex (the order of the file), interned strings, attributes in one flat table and
// dependencies as id lists kept exactly as written (data and control apart). Nothing here judges
// the trace: validation (validation.h) reports missing parents, cycles and bad attributes, and the
// dependency tracker (dependency_tracker.h) resolves ids into edges.
//
// Attribute access is typed and by name. Producers disagree on integer widths (is_cpu_op as bool or
// int32, comm_size as int64 or uint64), so the integer getters accept any integer member; a float,
// string or list where an integer is asked for is an Error naming the node id and the attribute.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "et_def.pb.h"

namespace orrery::chakra {

using NodeIndex = uint32_t;
using StringId = uint32_t;
inline constexpr StringId kNoString = UINT32_MAX;

// The Chakra enums by their raw wire value, so unknown values survive loading and can be reported.
using NodeType = ChakraProtoMsg::NodeType;
using CommType = ChakraProtoMsg::CollectiveCommType;
using ValueCase = ChakraProtoMsg::AttributeProto::ValueCase;

// "COMP_NODE" for a known type, "unknown node type 12" otherwise.
std::string node_type_name(int32_t type);
// "ALL_REDUCE" for a known type, "unknown collective 42" otherwise.
std::string comm_type_name(int64_t type);
// The attribute member name as in the schema ("int64_val", "bool_list").
std::string_view value_case_name(ValueCase value_case);

// One attribute of one node (16 bytes). Scalars hold their value; strings name an interned string;
// lists index the graph's list table, which points into the element pools.
struct Attribute {
  StringId name = kNoString;
  ValueCase value_case = ValueCase::VALUE_NOT_SET;
  union {
    int64_t i;      // signed integer members and bool
    uint64_t u;     // unsigned integer members
    double d;       // double and float
    StringId str;   // string and bytes
    uint32_t list;  // index into the list table, for every *_list member
  };
  Attribute() : i(0) {}
};

// An attribute name resolved once for one graph (TraceGraph::key): lookups by key scan the node's
// few attributes without hashing the name. `name` is kept for error messages and must outlive the
// key (a string literal, typically).
struct AttributeKey {
  StringId id = kNoString;  // kNoString when no node of the graph has the attribute
  std::string_view name;
};

// Where one list attribute's elements lie in their pool.
struct ListRef {
  uint64_t first = 0;  // index of the first element
  uint32_t count = 0;
};

// Interned strings: each distinct string is stored once and named by a dense StringId.
class StringTable {
 public:
  StringTable() = default;
  // A copy has its own strings, so its index must point into them, not into the original's.
  StringTable(const StringTable& other);
  StringTable& operator=(const StringTable& other);
  // A moved deque keeps its elements where they are: the index stays valid.
  StringTable(StringTable&&) = default;
  StringTable& operator=(StringTable&&) = default;

  StringId intern(std::string_view text);
  // The id of `text` if it was ever interned.
  std::optional<StringId> find(std::string_view text) const;
  std::string_view view(StringId id) const { return strings_[id]; }
  size_t size() const { return strings_.size(); }
  size_t memory_bytes() const;

 private:
  std::deque<std::string> strings_;  // a deque never moves its elements: views stay valid
  std::unordered_map<std::string_view, StringId> index_;
};

class TraceGraph {
 public:
  // ---- Building (once, by the loader) ----
  void set_source(std::string path) { source_ = std::move(path); }
  void set_metadata(ChakraProtoMsg::GlobalMetadata metadata) { metadata_ = std::move(metadata); }
  // Makes room for about `nodes` more nodes shaped like those added so far, so that loading a
  // large file grows each table once instead of doubling (and copying) it repeatedly.
  void reserve_like_current(size_t nodes);
  // Appends `node`, copying what simulation and inspection need. Cost: O(size of the node).
  void add_node(const ChakraProtoMsg::Node& node);
  // Records that the node just added carried fields this schema does not know.
  void mark_unknown_fields() { tables().unknown_field_nodes_.push_back(size() - 1); }
  // Builds the id index. Call once after the last add_node and before any lookup by id.
  void finish();

  // ---- Sharing (chakra/trace_set_loader.h) ----
  // A graph of the same nodes as `base` (finished), sharing its tables: until patch_node says
  // otherwise, every node and attribute is base's. Cost: O(1).
  static TraceGraph derived_from(const TraceGraph& base);
  // Makes node `index` of a derived graph hold `node`'s attribute values. True when `node` is
  // base's node `index` up to the values of scalar attributes (same id, name, type, times,
  // dependencies, IOInfo, unknown fields, attribute names, kinds and list values); false (and no
  // change) otherwise. Nodes in ascending order, each at most once.
  bool patch_node(NodeIndex index, const ChakraProtoMsg::Node& node, bool unknown_fields);
  // Values a renamed graph replaces: integer values of comm_src and comm_dst (peers), and pg_name
  // strings (groups). Each list sorted by its first member, each first member once.
  struct Renaming {
    std::vector<std::pair<int64_t, int64_t>> peers;
    std::vector<std::pair<std::string, std::string>> groups;
    // The entry renaming `from`, nullptr when `from` stays. O(log entries).
    const std::pair<int64_t, int64_t>* find_peer(int64_t from) const;
    const std::pair<std::string, std::string>* find_group(std::string_view from) const;
  };
  // Base's nodes with a comm_src, comm_dst or pg_name attribute, ascending: what renamed_from
  // looks at. Compute it once per base.
  std::vector<NodeIndex> renamable_nodes() const;
  // A graph derived from `base` (finished, nothing patched) whose comm_src, comm_dst and pg_name
  // values are renamed by `renaming` (values it does not list stay); everything else is base's. It
  // is the graph of base's trace with those values replaced: a generator's rank that runs another
  // rank's program with other peers and groups. Only nodes whose values change are patched.
  // `candidates` = base.renamable_nodes(). Cost: O(candidates x attributes per node).
  static TraceGraph renamed_from(const TraceGraph& base, const Renaming& renaming,
                                 std::span<const NodeIndex> candidates);
  // True for a graph made by renamed_from (and not patched since): it differs from its base only
  // in comm_src, comm_dst and pg_name values.
  bool renamed_only() const { return renamed_only_; }
  // Whether two graphs share their node tables (one derived from the other, or both from a
  // third): then they have the same nodes, ids, dependencies and attribute names, and may differ
  // only in attribute values. A graph shares with itself.
  bool shares_structure(const TraceGraph& other) const { return t_ == other.t_; }
  // An identity of the shared tables (equal exactly when shares_structure), for keying caches.
  const void* structure() const { return t_.get(); }
  // Nodes whose attribute values a derived graph holds itself.
  size_t patched_count() const { return patches_.size(); }
  // The k-th patched node, in ascending node order (k < patched_count()).
  NodeIndex patched_node(size_t k) const { return patches_[k].node; }
  // Whether this graph holds node `node`'s attribute values itself; when not, they are those of
  // every graph sharing its structure that does not patch the node either. O(1).
  bool patched(NodeIndex node) const {
    return !patched_.empty() && (patched_[node / 64] >> (node % 64) & 1) != 0;
  }

  // ---- Queries (after finish) ----
  const std::string& source() const { return source_; }
  const ChakraProtoMsg::GlobalMetadata& metadata() const { return metadata_; }
  NodeIndex size() const { return static_cast<NodeIndex>(t_->nodes_.size()); }

  uint64_t id(NodeIndex node) const { return t_->nodes_[node].id; }
  int32_t type(NodeIndex node) const { return t_->nodes_[node].type; }
  std::string_view name(NodeIndex node) const { return string(t_->nodes_[node].name); }
  uint64_t start_time_micros(NodeIndex node) const { return t_->nodes_[node].start_time_micros; }
  uint64_t duration_micros(NodeIndex node) const { return t_->nodes_[node].duration_micros; }
  // Parent ids exactly as the file lists them (possibly missing from the file, or the node itself).
  std::span<const uint64_t> data_deps(NodeIndex node) const;
  std::span<const uint64_t> ctrl_deps(NodeIndex node) const;
  // The node's IOInfo strings ("" when absent).
  std::string_view inputs_values(NodeIndex node) const;
  std::string_view outputs_values(NodeIndex node) const;

  // The node with this id; when several share it, the first in file order. Cost: O(log n).
  std::optional<NodeIndex> find(uint64_t id) const;
  // Node ids that appear more than once (each listed once, ascending).
  const std::vector<uint64_t>& duplicate_ids() const { return t_->duplicate_ids_; }
  // Nodes whose messages carried unknown fields, in file order.
  const std::vector<NodeIndex>& unknown_field_nodes() const { return t_->unknown_field_nodes_; }

  // ---- Attributes ----
  std::span<const Attribute> attributes(NodeIndex node) const;
  // The id of an attribute name for fast repeated lookups; nullopt when no node has it.
  std::optional<StringId> attribute_key(std::string_view name) const {
    return t_->strings_.find(name);
  }
  const Attribute* find_attribute(NodeIndex node, std::string_view name) const;
  const Attribute* find_attribute(NodeIndex node, StringId key) const;
  // `name` resolved for this graph, for repeated lookups (the getters below take either).
  AttributeKey key(std::string_view name) const;

  // The attribute as a signed integer: any integer member or bool. nullopt when absent; an Error
  // naming the node id and attribute when it holds a float, string or list, or does not fit.
  Expected<std::optional<int64_t>> get_int(NodeIndex node, std::string_view name) const;
  Expected<std::optional<int64_t>> get_int(NodeIndex node, const AttributeKey& key) const;
  // As get_int, with `fallback` when absent.
  Expected<int64_t> get_int_or(NodeIndex node, std::string_view name, int64_t fallback) const;
  Expected<int64_t> get_int_or(NodeIndex node, const AttributeKey& key, int64_t fallback) const;
  // The attribute as a non-negative integer (sizes, counts, ranks); negative values are an Error.
  Expected<std::optional<uint64_t>> get_uint(NodeIndex node, std::string_view name) const;
  Expected<std::optional<uint64_t>> get_uint(NodeIndex node, const AttributeKey& key) const;
  // Any integer member read as a boolean (nonzero is true), `fallback` when absent.
  Expected<bool> get_bool_or(NodeIndex node, std::string_view name, bool fallback) const;
  Expected<bool> get_bool_or(NodeIndex node, const AttributeKey& key, bool fallback) const;
  // double or float members, or any integer member converted.
  Expected<std::optional<double>> get_double(NodeIndex node, std::string_view name) const;
  // string or bytes members.
  Expected<std::optional<std::string_view>> get_string(NodeIndex node, std::string_view name) const;
  Expected<std::optional<std::string_view>> get_string(NodeIndex node,
                                                       const AttributeKey& key) const;
  // bool_list (or any integer list) as booleans.
  Expected<std::optional<std::vector<bool>>> get_bool_list(NodeIndex node,
                                                           std::string_view name) const;
  Expected<std::optional<std::vector<bool>>> get_bool_list(NodeIndex node,
                                                           const AttributeKey& key) const;
  // string_list or bytes_list.
  Expected<std::optional<std::vector<std::string_view>>> get_string_list(
      NodeIndex node, std::string_view name) const;
  // Any integer list (bool_list as 0 and 1; unsigned members bit-cast, as stored).
  Expected<std::optional<std::vector<int64_t>>> get_int_list(NodeIndex node,
                                                             std::string_view name) const;
  // double_list or float_list.
  Expected<std::optional<std::vector<double>>> get_double_list(NodeIndex node,
                                                               std::string_view name) const;

  // Typed reads of an attribute already found (the node is named in errors).
  Expected<int64_t> as_int(NodeIndex node, const Attribute& attribute) const;
  Expected<double> as_double(NodeIndex node, const Attribute& attribute) const;
  std::string_view attribute_name(const Attribute& attribute) const {
    return string(attribute.name);
  }

  // Whether `other` describes the same work as this graph, node for node in file order: the same
  // types, durations, attributes (by name and value) and dependencies (as positions in the file).
  // Node ids, names and IOInfo may differ. Both graphs finished. O(nodes + edges + attributes).
  bool same_work(const TraceGraph& other) const;
  // As same_work, except that the values (not the presence or kind) of the attributes named in
  // `ignored` may differ: peers, tags and group names, for deciding rank classes (sim/).
  bool same_work_except(const TraceGraph& other, std::span<const std::string_view> ignored) const;

  // Bytes held by this graph (tables and strings, shared ones included), for benchmarks and
  // capacity planning.
  size_t memory_bytes() const;
  // Bytes of what a derived graph holds itself (its patched values).
  size_t overlay_bytes() const;

 private:
  struct NodeRecord {
    uint64_t id = 0;
    uint64_t start_time_micros = 0;
    uint64_t duration_micros = 0;
    StringId name = kNoString;
    int32_t type = 0;
    uint32_t io = UINT32_MAX;  // index into io_, when the node has inputs or outputs
  };
  struct IoRecord {
    StringId inputs_values = kNoString;
    StringId outputs_values = kNoString;
  };

  Error attribute_error(NodeIndex node, const Attribute& attribute, std::string_view wanted) const;
  StringId store_string(const std::string& text);
  // A string of this graph: of the shared table, or one a patch added.
  std::string_view string(StringId id) const {
    return id < t_->strings_.size()
               ? t_->strings_.view(id)
               : extra_strings_.view(id - static_cast<StringId>(t_->strings_.size()));
  }

  // What graphs derived from one another share: everything but the source, the metadata and the
  // patched attribute values.
  struct Tables {
    std::vector<NodeRecord> nodes_;
    std::vector<IoRecord> io_;
    // Dependencies and attributes in CSR form: node i owns [offsets[i], offsets[i + 1]).
    std::vector<uint32_t> data_offsets_{0};
    std::vector<uint64_t> data_deps_;
    std::vector<uint32_t> ctrl_offsets_{0};
    std::vector<uint64_t> ctrl_deps_;
    std::vector<uint32_t> attr_offsets_{0};
    std::vector<Attribute> attrs_;
    std::vector<ListRef> lists_;
    std::vector<int64_t> int_pool_;  // integer and bool lists (unsigned values bit-cast)
    std::vector<double> double_pool_;
    std::vector<StringId> string_pool_;
    StringTable strings_;
    // (id, index) sorted by id then index; empty when ids are strictly increasing in file order.
    std::vector<std::pair<uint64_t, NodeIndex>> id_index_;
    bool ids_sorted_ = true;
    std::vector<uint64_t> duplicate_ids_;
    std::vector<NodeIndex> unknown_field_nodes_;
  };
  // The tables for building: copied first if another graph shares them.
  Tables& tables();
  // Appends the patch of `index` (after every patched node so far).
  void push_patch(NodeIndex index, std::span<const Attribute> values);
  // Converts a scalar or list attribute as add_node stores it (lists into `t`'s pools).
  template <typename Store>
  static Attribute convert(const ChakraProtoMsg::AttributeProto& proto, Tables& t, Store&& store);

  std::string source_;
  ChakraProtoMsg::GlobalMetadata metadata_;
  std::shared_ptr<Tables> t_ = std::make_shared<Tables>();
  // A derived graph's own attribute values: the nodes patched (bit per node), and for each, in
  // ascending node order, its whole attribute array in patch_attrs_.
  struct Patch {
    NodeIndex node;
    uint32_t first;
    uint32_t count;
  };
  std::vector<uint64_t> patched_;
  std::vector<uint32_t> word_first_patch_;  // per word of patched_: the index of its first patch
  std::vector<Patch> patches_;
  std::vector<Attribute> patch_attrs_;
  bool renamed_only_ = false;  // renamed_only()
  StringTable extra_strings_;  // strings of patched values absent from the shared table
};

}  // namespace orrery::chakra
