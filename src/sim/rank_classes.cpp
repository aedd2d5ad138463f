#include "sim/rank_classes.h"

#include <algorithm>
#include <array>
#include <optional>
#include <set>
#include <span>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "core/parallel.h"
#include "sim/symmetry.h"
#include "system/collective.h"

namespace orrery::sim {

namespace {

using chakra::NodeIndex;
using chakra::TraceGraph;
using net::Rank;

// Attribute values that may differ between members of a class.
constexpr std::array<std::string_view, 4> kPeerAttributes = {"comm_src", "comm_dst", "comm_tag",
                                                             "pg_name"};
// More distinct traces than this: the run is not made of a few behaviours.
constexpr uint32_t kMaxTraceColours = 4096;

enum class CommKind : uint8_t { kSend, kRecv, kCollective };

// A communication node of one rank's trace, in file order.
struct CommNode {
  CommKind kind = CommKind::kSend;
  NodeIndex node = 0;
  uint32_t peer = 0;  // send: destination; receive: source; collective: engine group id
  int64_t tag = 0;
};

// The (peer, tag) blocks of a rank's sends or receives: the first of its comm nodes with that
// (peer, tag) and how many there are, sorted by (peer, tag).
struct Block {
  uint32_t peer;
  int64_t tag;
  uint32_t head;  // index into the rank's comm nodes
  uint32_t count;
  bool operator<(const Block& other) const {
    return std::tie(peer, tag) < std::tie(other.peer, other.tag);
  }
};

// A graph's communication nodes: its own list, or (a graph kept renamed, chakra::TraceSet) its
// base's nodes, whose kinds, nodes and tags it shares, with its own peers and groups.
struct CommList {
  std::span<const CommNode> nodes;
  std::span<const uint32_t> peers;  // empty: the nodes' own
  size_t size() const { return nodes.size(); }
  uint32_t peer(size_t k) const { return peers.empty() ? nodes[k].peer : peers[k]; }
  CommNode operator[](size_t k) const {
    CommNode node = nodes[k];
    node.peer = peer(k);
    return node;
  }
};

struct RankComm {
  CommList nodes;               // its graph's, not copied per rank
  std::vector<uint32_t> label;  // per comm node: the head of its block (collectives: itself)
  std::vector<Block> sends;
  std::vector<Block> recvs;
};

const Block* find_block(const std::vector<Block>& blocks, uint32_t peer, int64_t tag) {
  const Block key{peer, tag, 0, 0};
  auto found = std::lower_bound(blocks.begin(), blocks.end(), key);
  if (found == blocks.end() || found->peer != peer || found->tag != tag) return nullptr;
  return &*found;
}

uint64_t mix(uint64_t hash, uint64_t value) {
  hash ^= value + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2);
  return hash;
}

// What cannot differ between members of a class, cheaply: node types, durations, edge and
// attribute counts.
uint64_t fingerprint(const TraceGraph& graph) {
  uint64_t hash = graph.size();
  for (NodeIndex node = 0; node < graph.size(); ++node) {
    hash = mix(hash, static_cast<uint64_t>(graph.type(node)));
    hash = mix(hash, graph.duration_micros(node));
    hash = mix(hash, graph.data_deps(node).size() * 131 + graph.ctrl_deps(node).size() * 7 +
                         graph.attributes(node).size());
  }
  return hash;
}

// The executor issues ready nodes in ascending id order: members must order their ids alike.
bool same_id_order(const TraceGraph& lhs, const TraceGraph& rhs) {
  if (lhs.shares_structure(rhs)) return true;
  bool equal = true;
  bool ascending = true;
  for (NodeIndex node = 0; node < lhs.size(); ++node) {
    equal = equal && lhs.id(node) == rhs.id(node);
    if (node > 0) {
      ascending = ascending && lhs.id(node - 1) < lhs.id(node) && rhs.id(node - 1) < rhs.id(node);
    }
    if (!equal && !ascending) return false;
  }
  return true;
}

bool alike(const TraceGraph& lhs, const TraceGraph& rhs) {
  return lhs.size() == rhs.size() && same_id_order(lhs, rhs) &&
         lhs.same_work_except(rhs, kPeerAttributes);
}

// The dimensions a group spans exactly, as the collective engine computes them (0: not a
// sub-grid of the network).
uint32_t aligned_dims(const std::vector<Rank>& ranks, const net::Topology& topology) {
  const uint32_t dims = topology.dimension_count();
  if (ranks.empty()) return 0;
  const Rank first = ranks.front();
  uint32_t mask = 0;
  uint64_t expected = 1;
  for (uint32_t dim = 0; dim < dims; ++dim) {
    for (Rank rank : ranks) {
      if (topology.coordinate(rank, dim) != topology.coordinate(first, dim)) {
        mask |= 1u << dim;
        expected *= topology.size(dim);
        break;
      }
    }
  }
  if (expected != ranks.size()) return 0;
  for (Rank rank : ranks) {
    for (uint32_t dim = 0; dim < dims; ++dim) {
      if ((mask & (1u << dim)) == 0 &&
          topology.coordinate(rank, dim) != topology.coordinate(first, dim)) {
        return 0;
      }
    }
  }
  return mask;
}

// The analytical delay's geometry: the lowest dimension in which the endpoints differ and the
// hops there.
std::pair<uint32_t, uint32_t> geometry(const net::Topology& topology, Rank src, Rank dst) {
  const uint32_t dim = topology.charged_dimension(src, dst);
  if (dim == net::kNoDimension) return {dim, 0};
  return {dim, topology.hops(dim, topology.coordinate(src, dim), topology.coordinate(dst, dim))};
}

struct Failure {
  std::string reason;
};

}  // namespace

RankClassVerdict decide_rank_classes(const RankClassInputs& in) {
  RankClassVerdict verdict;
  auto no = [&](std::string reason) {
    verdict.ok = false;
    verdict.reason = std::move(reason);
    verdict.plan.reset();
    return verdict;
  };
  const chakra::TraceSet& traces = *in.traces;
  // A node's id, for messages: ids are structure, so a graph kept renamed is not built for it.
  auto node_id = [&](Rank rank, NodeIndex node) {
    return traces.graph(traces.base(traces.graph_index(rank))).id(node);
  };
  const net::Topology& topology = *in.topology;
  const std::vector<std::vector<Rank>>& groups = *in.group_ranks;
  const uint32_t rank_count = topology.rank_count();
  if (traces.rank_count() != rank_count && !traces.uniform()) {
    return no("the traces and the network differ in rank count");
  }
  if (topology.dimension_count() >= 32) return no("more than 31 network dimensions");

  // ---- 1. a colour per distinct trace, up to ids, peers, tags and group names ----
  const uint32_t graph_count = traces.graph_count();
  std::vector<uint64_t> prints(graph_count);
  // Graphs sharing their tables share types, durations and edges: one fingerprint each, and each
  // is compared with the first of its tables on the nodes either patched (TraceGraph::same_work).
  std::vector<uint32_t> first_of(graph_count);
  {
    std::map<const void*, uint32_t> by_structure;
    for (uint32_t index = 0; index < graph_count; ++index) {
      // A graph kept renamed has its base's structure (without being built).
      first_of[index] =
          by_structure.try_emplace(traces.graph(traces.base(index)).structure(), index)
              .first->second;
    }
    parallel_for(graph_count, in.threads, [&](size_t index) {
      if (first_of[index] == index)
        prints[index] = fingerprint(traces.graph(static_cast<uint32_t>(index)));
    });
    for (uint32_t index = 0; index < graph_count; ++index) prints[index] = prints[first_of[index]];
  }
  std::vector<uint32_t> graph_colour(graph_count, UINT32_MAX);
  uint32_t colours = 0;
  // A graph kept renamed from the first of its structure (which holds its own values): alike to
  // it by construction, and its communication read from the first's list without building it.
  auto kept_renamed = [&](size_t index) {
    const auto graph = static_cast<uint32_t>(index);
    return traces.renaming(graph) != nullptr && first_of[index] == traces.base(graph);
  };
  {
    std::vector<uint8_t> like_first(graph_count, 0);
    parallel_for(graph_count, in.threads, [&](size_t index) {
      if (kept_renamed(index)) {
        like_first[index] = 1;
      } else if (first_of[index] != index) {
        const TraceGraph& first = traces.graph(first_of[index]);
        const TraceGraph& graph = traces.graph(static_cast<uint32_t>(index));
        // A graph renamed from the first (which holds its own values) differs from it in peers and
        // group names only: alike by construction.
        like_first[index] =
            (graph.renamed_only() && first.patched_count() == 0) || alike(first, graph) ? 1 : 0;
      }
    });
    // `alike` is an equivalence: a graph takes the colour of the first model (the smallest graph
    // of its colour) it is alike to, so colours are numbered by their smallest graph.
    std::map<uint64_t, std::vector<uint32_t>> buckets;
    for (uint32_t index = 0; index < graph_count; ++index) buckets[prints[index]].push_back(index);
    for (auto& [print, members] : buckets) {
      std::vector<uint32_t> models;
      for (const uint32_t index : members) {
        if (like_first[index] != 0) {
          graph_colour[index] = graph_colour[first_of[index]];
          continue;
        }
        for (const uint32_t model : models) {
          if (alike(traces.graph(model), traces.graph(index))) {
            graph_colour[index] = graph_colour[model];
            break;
          }
        }
        if (graph_colour[index] != UINT32_MAX) continue;
        if (colours >= kMaxTraceColours) {
          return no(fmt::format("more than {} distinct traces", kMaxTraceColours));
        }
        graph_colour[index] = colours++;
        models.push_back(index);
      }
    }
  }

  // ---- communication nodes of every distinct graph ----
  // A graph sharing another's tables has its nodes and types: its list is the first graph's with
  // the nodes it patched read again (a rank renamed from its stage's holds a few thousand).
  std::vector<std::vector<CommNode>> graph_comm(graph_count);
  // A graph kept renamed: its peers and groups by comm node of its base (graph_comm empty).
  std::vector<std::vector<uint32_t>> graph_peers(graph_count);
  // Graphs read whole: each collective's pg_name value (kNoString: none), for renaming.
  std::vector<std::vector<chakra::StringId>> graph_pg(graph_count);
  std::vector<std::string> graph_problem(graph_count);
  bool memory_nodes = false;
  {
    std::vector<uint8_t> has_memory(graph_count, 0);
    auto read_graph = [&](size_t index) {
      const TraceGraph& graph = traces.graph(static_cast<uint32_t>(index));
      std::vector<CommNode>& out = graph_comm[index];
      const chakra::AttributeKey dst_key = graph.key("comm_dst");
      const chakra::AttributeKey src_key = graph.key("comm_src");
      const chakra::AttributeKey tag_key = graph.key("comm_tag");
      const chakra::AttributeKey type_key = graph.key("comm_type");
      const chakra::AttributeKey pg_key = graph.key("pg_name");
      std::unordered_map<chakra::StringId, uint32_t>
          group_of_string;  // pg_name value -> group, cached
      auto problem = [&](NodeIndex node, std::string what) {
        if (graph_problem[index].empty()) {
          graph_problem[index] =
              fmt::format("{} node {}: {}", graph.source(), graph.id(node), what);
        }
      };
      // The node's entry, if it is a point-to-point node or a collective the engine runs; the
      // collective's pg_name value goes to `pg_value`.
      chakra::StringId pg_value = chakra::kNoString;
      auto entry = [&](NodeIndex node) -> std::optional<CommNode> {
        pg_value = chakra::kNoString;
        const int32_t type = graph.type(node);
        if (type == ChakraProtoMsg::COMM_SEND_NODE || type == ChakraProtoMsg::COMM_RECV_NODE) {
          const bool send = type == ChakraProtoMsg::COMM_SEND_NODE;
          Expected<std::optional<uint64_t>> peer = graph.get_uint(node, send ? dst_key : src_key);
          Expected<int64_t> tag = graph.get_int_or(node, tag_key, 0);
          if (!peer || !peer->has_value() || **peer >= rank_count || !tag) {
            problem(node, "a point-to-point node without a valid peer or tag");
            return std::nullopt;
          }
          return CommNode{send ? CommKind::kSend : CommKind::kRecv, node,
                          static_cast<uint32_t>(**peer), *tag};
        }
        if (type != ChakraProtoMsg::COMM_COLL_NODE) return std::nullopt;
        Expected<std::optional<int64_t>> comm_type = graph.get_int(node, type_key);
        if (!comm_type || !comm_type->has_value()) return std::nullopt;  // host-side work
        const std::optional<sys::CollectiveType> collective =
            sys::collective_from_chakra(**comm_type);
        if (!collective) {
          problem(node, "an unknown collective");
          return std::nullopt;
        }
        switch (*collective) {
          case sys::CollectiveType::kAllReduce:
          case sys::CollectiveType::kReduceScatter:
          case sys::CollectiveType::kAllGather:
          case sys::CollectiveType::kAllToAll:
            break;
          default:
            problem(node,
                    fmt::format("a {} (rooted at one rank)", sys::collective_name(*collective)));
            return std::nullopt;
        }
        Expected<std::optional<std::string_view>> pg = graph.get_string(node, pg_key);
        const chakra::Attribute* value =
            pg && pg->has_value() ? graph.find_attribute(node, pg_key.id) : nullptr;
        if (value != nullptr) {
          pg_value = value->str;
          if (const auto cached = group_of_string.find(value->str);
              cached != group_of_string.end()) {
            return CommNode{CommKind::kCollective, node, cached->second, 0};
          }
        }
        const std::string name = pg && pg->has_value() ? std::string(**pg) : "";
        auto group = in.group_ids->find(name);
        if (!pg || group == in.group_ids->end()) {
          problem(node, fmt::format("pg_name '{}' names no communicator group", name));
          return std::nullopt;
        }
        if (value != nullptr) group_of_string.emplace(value->str, group->second);
        return CommNode{CommKind::kCollective, node, group->second, 0};
      };
      // Which graph of a structure loads whole, and which derived, may depend on thread timing:
      // the shortcut needs a first graph that holds the tables' own values.
      if (first_of[index] == index || traces.graph(first_of[index]).patched_count() != 0) {
        for (NodeIndex node = 0; node < graph.size(); ++node) {
          const int32_t type = graph.type(node);
          if (type == ChakraProtoMsg::MEM_LOAD_NODE || type == ChakraProtoMsg::MEM_STORE_NODE) {
            has_memory[index] = 1;
            continue;
          }
          if (std::optional<CommNode> comm = entry(node)) {
            out.push_back(*comm);
            graph_pg[index].push_back(pg_value);
          }
        }
        return;
      }
      // Types are shared: the memory nodes are the first graph's; values may differ only on the
      // nodes this graph patched.
      has_memory[index] = has_memory[first_of[index]];
      if (!graph_problem[first_of[index]].empty()) {
        graph_problem[index] = graph_problem[first_of[index]];
        return;
      }
      const std::vector<CommNode>& first = graph_comm[first_of[index]];
      out.reserve(first.size());
      size_t k = 0;  // next entry of `first` not yet copied
      for (size_t p = 0; p < graph.patched_count(); ++p) {
        const NodeIndex node = graph.patched_node(p);
        while (k < first.size() && first[k].node < node) out.push_back(first[k++]);
        if (k < first.size() && first[k].node == node) ++k;  // read again below
        if (std::optional<CommNode> comm = entry(node)) out.push_back(*comm);
      }
      out.insert(out.end(), first.begin() + static_cast<std::ptrdiff_t>(k), first.end());
    };
    // A graph kept renamed: its base's list, with peers and groups renamed as its graph would
    // have them (TraceGraph::renamed_from), without building the graph.
    auto read_renamed = [&](size_t index) {
      const uint32_t b = traces.base(static_cast<uint32_t>(index));
      const TraceGraph::Renaming& renaming = *traces.renaming(static_cast<uint32_t>(index));
      has_memory[index] = has_memory[b];
      if (!graph_problem[b].empty()) {
        graph_problem[index] = graph_problem[b];
        return;
      }
      const TraceGraph& base = traces.graph(b);
      const chakra::AttributeKey pg_key = base.key("pg_name");
      const std::vector<CommNode>& nodes = graph_comm[b];
      std::vector<uint32_t>& peers = graph_peers[index];
      peers.resize(nodes.size());
      std::vector<std::pair<chakra::StringId, uint32_t>> group_of_string;  // few per rank
      for (size_t k = 0; k < nodes.size(); ++k) {
        const CommNode& node = nodes[k];
        peers[k] = node.peer;
        if (node.kind != CommKind::kCollective) {
          const auto* found = renaming.find_peer(node.peer);
          if (found == nullptr) continue;
          if (found->second < 0 || found->second >= rank_count) {
            graph_problem[index] =
                fmt::format("{} node {}: a point-to-point node without a valid peer or tag",
                            traces.source(static_cast<uint32_t>(index)), base.id(node.node));
            return;
          }
          peers[k] = static_cast<uint32_t>(found->second);
          continue;
        }
        const chakra::StringId pg = graph_pg[b][k];
        if (pg == chakra::kNoString || renaming.groups.empty()) continue;
        const auto cached = std::find_if(
            group_of_string.begin(), group_of_string.end(),
            [&](const std::pair<chakra::StringId, uint32_t>& e) { return e.first == pg; });
        if (cached != group_of_string.end()) {
          peers[k] = cached->second;
          continue;
        }
        // The base's read of this pg_name succeeded (graph_pg holds it), so this one does too.
        const std::string_view name = base.get_string(node.node, pg_key)->value_or("");
        if (const auto* found = renaming.find_group(name)) {
          const auto group = in.group_ids->find(found->second);
          if (group == in.group_ids->end()) {
            graph_problem[index] = fmt::format(
                "{} node {}: pg_name '{}' names no communicator group",
                traces.source(static_cast<uint32_t>(index)), base.id(node.node), found->second);
            return;
          }
          peers[k] = group->second;
        }
        group_of_string.emplace_back(pg, peers[k]);
      }
    };
    std::vector<uint32_t> firsts, others, renamed;
    for (uint32_t index = 0; index < graph_count; ++index) {
      if (kept_renamed(index)) {
        renamed.push_back(index);
        continue;
      }
      const bool whole =
          first_of[index] == index || traces.graph(first_of[index]).patched_count() != 0;
      (whole ? firsts : others).push_back(index);
    }
    parallel_for(firsts.size(), in.threads, [&](size_t k) { read_graph(firsts[k]); });
    parallel_for(others.size(), in.threads, [&](size_t k) { read_graph(others[k]); });
    parallel_for(renamed.size(), in.threads, [&](size_t k) { read_renamed(renamed[k]); });
    for (uint32_t index = 0; index < graph_count; ++index) {
      if (!graph_problem[index].empty()) return no(graph_problem[index]);
      memory_nodes = memory_nodes || has_memory[index] != 0;
    }
  }
  if (memory_nodes && in.shared_memory_pools) return no("memory nodes share a pool");

  // ---- the collective types used, and their algorithms ----
  // nccl runs one phase over every group, whether or not it is a sub-grid (its barrier's messages
  // go 1, 2, 4, ... members on); other algorithms run one ring over a group that is not.
  bool uses_nccl = false;
  bool uses_other = false;
  {
    bool uses[4] = {false, false, false, false};
    for (uint32_t index = 0; index < graph_count; ++index) {
      if (graph_comm[index].empty()) continue;  // none, or its base's (kept renamed)
      const TraceGraph& graph = traces.graph(index);
      const chakra::AttributeKey type_key = graph.key("comm_type");
      for (const CommNode& comm : graph_comm[index]) {
        if (comm.kind != CommKind::kCollective) continue;
        const auto collective = sys::collective_from_chakra(**graph.get_int(comm.node, type_key));
        uses[*collective == sys::CollectiveType::kAllReduce       ? 0
             : *collective == sys::CollectiveType::kReduceScatter ? 1
             : *collective == sys::CollectiveType::kAllGather     ? 2
                                                                  : 3] = true;
      }
    }
    if (std::string problem = algorithm_lists_problem(uses, *in.system, topology,
                                                      /*congestion_aware=*/false,
                                                      /*flat_nccl=*/true);
        !problem.empty()) {
      return no(std::move(problem));
    }
    for (int kind = 0; kind < 4; ++kind) {
      if (!uses[kind]) continue;
      (runs_nccl(*in.system, kind) ? uses_nccl : uses_other) = true;
    }
  }

  // Every graph's list: a graph kept renamed reads its base's nodes with its own peers.
  std::vector<CommList> graph_list(graph_count);
  for (uint32_t index = 0; index < graph_count; ++index) {
    if (!graph_peers[index].empty()) {
      graph_list[index] = {graph_comm[traces.base(index)], graph_peers[index]};
    } else {
      graph_list[index] = {graph_comm[index], {}};
    }
  }

  // ---- 2. colour refinement by the colours of point-to-point peers ----
  std::vector<uint32_t> colour(rank_count);
  for (Rank rank = 0; rank < rank_count; ++rank)
    colour[rank] = graph_colour[traces.graph_index(rank)];
  const std::vector<uint32_t> trace_colour = colour;
  if (in.compute_factors != nullptr || in.hardware != nullptr) {
    // A rank's speed is part of what it does: (trace colour, factor, hardware), numbered afresh.
    std::map<std::tuple<uint32_t, double, uint16_t>, uint32_t> numbers;
    for (Rank rank = 0; rank < rank_count; ++rank) {
      const std::tuple<uint32_t, double, uint16_t> key{
          colour[rank], in.compute_factors ? (*in.compute_factors)[rank] : 1.0,
          in.hardware ? (*in.hardware)[rank] : uint16_t{0}};
      colour[rank] = numbers.try_emplace(key, static_cast<uint32_t>(numbers.size())).first->second;
    }
  }
  {
    uint32_t count = 0;
    {
      std::set<uint32_t> distinct(colour.begin(), colour.end());
      count = static_cast<uint32_t>(distinct.size());
    }
    std::vector<uint32_t> signature;
    for (uint32_t round = 0; round < rank_count; ++round) {
      std::map<std::vector<uint32_t>, uint32_t> numbers;
      std::vector<uint32_t> next(rank_count);
      for (Rank rank = 0; rank < rank_count; ++rank) {
        signature.clear();
        signature.push_back(colour[rank]);
        const CommList& list = graph_list[traces.graph_index(rank)];
        for (size_t k = 0; k < list.size(); ++k) {
          if (list.nodes[k].kind != CommKind::kCollective)
            signature.push_back(colour[list.peer(k)]);
        }
        next[rank] =
            numbers.try_emplace(signature, static_cast<uint32_t>(numbers.size())).first->second;
      }
      colour = std::move(next);
      const auto refined = static_cast<uint32_t>(numbers.size());
      if (refined == count) break;  // refinement only splits: the same count is stable
      count = refined;
    }
  }

  // ---- the classes, numbered by their smallest member ----
  auto plan = std::make_shared<sys::ClassPlan>();
  plan->class_of.assign(rank_count, UINT32_MAX);
  {
    std::map<uint32_t, uint32_t> class_of_colour;
    for (Rank rank = 0; rank < rank_count; ++rank) {
      auto [entry, inserted] =
          class_of_colour.try_emplace(colour[rank], static_cast<uint32_t>(plan->members.size()));
      if (inserted) plan->members.emplace_back();
      plan->members[entry->second].push_back(rank);
      plan->class_of[rank] = entry->second;
    }
  }
  const auto class_count = static_cast<uint32_t>(plan->members.size());
  verdict.classes = class_count;
  if (class_count == rank_count)
    return no("no two ranks behave alike (every rank is its own class)");

  // ---- per rank: blocks of sends and receives by (peer, tag) ----
  std::vector<RankComm> comm(rank_count);
  parallel_for(rank_count, in.threads, [&](size_t index) {
    const auto rank = static_cast<Rank>(index);
    RankComm& mine = comm[rank];
    mine.nodes = graph_list[traces.graph_index(rank)];
    mine.label.resize(mine.nodes.size());
    for (uint32_t k = 0; k < mine.nodes.size(); ++k) {
      const CommNode& node = mine.nodes.nodes[k];
      mine.label[k] = k;
      if (node.kind == CommKind::kCollective) continue;
      std::vector<Block>& blocks = node.kind == CommKind::kSend ? mine.sends : mine.recvs;
      blocks.push_back({mine.nodes.peer(k), node.tag, k, 1});
    }
    for (std::vector<Block>* blocks : {&mine.sends, &mine.recvs}) {
      std::stable_sort(blocks->begin(), blocks->end());
      std::vector<Block> merged;
      for (const Block& block : *blocks) {
        if (!merged.empty() && merged.back().peer == block.peer && merged.back().tag == block.tag) {
          ++merged.back().count;
          mine.label[block.head] = merged.back().head;
        } else {
          merged.push_back(block);
        }
      }
      *blocks = std::move(merged);
    }
  });

  // ---- 3. verification ----
  const uint32_t group_count = static_cast<uint32_t>(groups.size());
  std::vector<uint32_t> group_mask(group_count, 0);
  std::vector<uint32_t> group_class(group_count, UINT32_MAX);  // UINT32_MAX - 1: mixed
  constexpr uint32_t kMixed = UINT32_MAX - 1;
  for (uint32_t group = 0; group < group_count; ++group) {
    const std::vector<Rank>& ranks = groups[group];
    group_mask[group] = aligned_dims(ranks, topology);
    for (Rank rank : ranks) {
      const uint32_t c = plan->class_of[rank];
      if (group_class[group] == UINT32_MAX) {
        group_class[group] = c;
      } else if (group_class[group] != c) {
        group_class[group] = kMixed;
      }
    }
  }
  auto group_name = [&](uint32_t group) {
    for (const auto& [name, id] : *in.group_ids) {
      if (id == group) return name.empty() ? std::string("all ranks") : fmt::format("'{}'", name);
    }
    return fmt::format("#{}", group);
  };
  // Why the members of a mixed group are in different classes.
  auto mixed_reason = [&](uint32_t group, Rank at, NodeIndex node) {
    const std::vector<Rank>& ranks = groups[group];
    Rank other = ranks.front();
    for (Rank rank : ranks) {
      if (plan->class_of[rank] != plan->class_of[at]) {
        other = rank;
        break;
      }
    }
    const bool speeds_differ =
        in.compute_factors != nullptr && (*in.compute_factors)[at] != (*in.compute_factors)[other];
    const bool hardware_differs =
        in.hardware != nullptr && (*in.hardware)[at] != (*in.hardware)[other];
    const std::string why =
        trace_colour[at] != trace_colour[other]
            ? "their traces differ (compute, durations or other attributes)"
        : speeds_differ ? fmt::format("the perturbation gives them compute factors {:g} and {:g}",
                                      (*in.compute_factors)[at], (*in.compute_factors)[other])
        : hardware_differs
            ? std::string("the perturbation gives them different hardware")
            : "they exchange point-to-point messages with ranks of different classes";
    return fmt::format(
        "the collective at rank {} node {} runs over group {}, whose ranks {} and {} are in "
        "different classes: {}",
        at, node_id(at, node), group_name(group), at, other, why);
  };
  // Dimensions where some collective runs in-switch (its switch waits for every member).
  uint32_t in_switch = 0;
  for (const std::vector<sys::Algorithm>* list :
       {&in.system->all_reduce, &in.system->reduce_scatter, &in.system->all_gather,
        &in.system->all_to_all}) {
    for (uint32_t dim = 0; dim < list->size() && dim < 32; ++dim) {
      if ((*list)[dim].kind == sys::AlgorithmKind::kInSwitch) in_switch |= 1u << dim;
    }
  }
  constexpr size_t kMaxCrossGroup = 64;
  auto cross_problem = [&](uint32_t group, uint32_t rep_group) -> std::string {
    const std::vector<Rank>& ranks = groups[group];
    const std::vector<Rank>& reps = groups[rep_group];
    if (ranks.size() != reps.size()) return "its representatives' group differs in size";
    if (ranks.size() > kMaxCrossGroup) {
      return fmt::format("more than {} members across classes", kMaxCrossGroup);
    }
    for (size_t pos = 0; pos < ranks.size(); ++pos) {
      const uint32_t c = plan->class_of[ranks[pos]];
      if (plan->class_of[reps[pos]] != c || plan->members[c].front() != reps[pos]) {
        return fmt::format(
            "rank {} of its representatives' group is not the representative of "
            "rank {}'s class",
            reps[pos], ranks[pos]);
      }
    }
    if (group_mask[group] != group_mask[rep_group]) return "the groups span different dimensions";
    if ((group_mask[group] & in_switch) != 0) return "an in-switch collective across classes";
    for (size_t lhs = 0; lhs < ranks.size(); ++lhs) {
      for (size_t rhs = 0; rhs < ranks.size(); ++rhs) {
        if (geometry(topology, ranks[lhs], ranks[rhs]) !=
            geometry(topology, reps[lhs], reps[rhs])) {
          return fmt::format("ranks {} and {} are at another distance than {} and {}", ranks[lhs],
                             ranks[rhs], reps[lhs], reps[rhs]);
        }
      }
    }
    return "";
  };
  constexpr size_t kMaxFlatGroup = 4096;
  // The distances (in positions) at which members of a group send in one phase over it: a ring's
  // neighbours, 1 and n - 1, for a group that is not a sub-grid; nccl's barrier, 1, 2, 4, ... below
  // n, for every group.
  auto one_phase = [&](uint32_t group) {
    return groups[group].size() > 1 && (uses_nccl || (uses_other && group_mask[group] == 0));
  };
  auto flat_offsets = [&](uint32_t group) {
    const size_t n = groups[group].size();
    std::vector<size_t> offsets;
    if (!one_phase(group)) return offsets;
    if (uses_other && group_mask[group] == 0) {
      offsets.push_back(1);
      if (n > 2) offsets.push_back(n - 1);
    }
    if (uses_nccl) {
      for (size_t distance = 1; distance < n; distance *= 2) offsets.push_back(distance);
    }
    std::sort(offsets.begin(), offsets.end());
    offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());
    return offsets;
  };
  auto flat_problem = [&](uint32_t group, uint32_t rep_group) -> std::string {
    const std::vector<Rank>& ranks = groups[group];
    const std::vector<Rank>& reps = groups[rep_group];
    const size_t n = ranks.size();
    if (reps.size() != n || group_mask[rep_group] != group_mask[group]) {
      return "its representative's differs";
    }
    if (n > kMaxFlatGroup) return fmt::format("has more than {} members", kMaxFlatGroup);
    for (const size_t offset : flat_offsets(group)) {
      const auto distance = geometry(topology, reps[0], reps[offset]);
      for (size_t pos = 0; pos < n; ++pos) {
        if (geometry(topology, ranks[pos], ranks[(pos + offset) % n]) != distance) {
          return fmt::format(
              "rank {} is at another distance from the member {} places on than rank {} is from "
              "its own",
              ranks[pos], offset, reps[0]);
        }
      }
    }
    return "";
  };
  verdict.group_representative.assign(group_count, kNoGroupId);
  // Per group, the representatives' group its geometry was verified against: the check depends on
  // the two groups alone, and every member meets it at every collective node of the group.
  std::vector<uint32_t> verified_against(group_count, kNoGroupId);
  std::vector<uint32_t> reverse(group_count, kNoGroupId);
  std::vector<uint32_t> touched;
  std::vector<uint64_t> stamp(rank_count, 0);
  uint64_t stamp_value = 0;
  std::set<std::tuple<Rank, Rank, int64_t>> arrivals;
  for (uint32_t c = 0; c < class_count; ++c) {
    const std::vector<Rank>& members = plan->members[c];
    const Rank rep = members.front();
    const RankComm& model = comm[rep];
    for (Rank rank : members) {
      if (comm[rank].nodes.size() != model.nodes.size() || comm[rank].label != model.label) {
        return no(fmt::format(
            "ranks {} and {} address their point-to-point messages differently (which sends "
            "share a destination and tag)",
            rep, rank));
      }
    }
    // Collectives: groups inside the class, aligned alike, in one-to-one correspondence.
    for (Rank rank : members) {
      const RankComm& mine = comm[rank];
      for (uint32_t k = 0; k < mine.nodes.size(); ++k) {
        if (mine.nodes[k].kind != CommKind::kCollective) continue;
        const uint32_t group = mine.nodes[k].peer;
        const uint32_t rep_group = model.nodes[k].peer;
        const std::vector<Rank>& ranks = groups[group];
        const NodeIndex node = mine.nodes[k].node;
        if (!std::binary_search(ranks.begin(), ranks.end(), rank)) {
          return no(
              fmt::format("rank {} node {} runs a collective over group {}, which does not "
                          "contain it",
                          rank, node_id(rank, node), group_name(group)));
        }
        if (verified_against[group] == rep_group) {
          // Verified at an earlier node or member.
        } else if (group_class[group] != c) {
          // A group across classes runs for real among representatives: its representatives'
          // group must hold, position by position, the representative of each member's class,
          // at the same distances, and decompose alike.
          if (std::string problem = cross_problem(group, rep_group); !problem.empty()) {
            return no(fmt::format("{} ({})", mixed_reason(group, rank, node), problem));
          }
        } else if (one_phase(group)) {
          // One phase over the group's ranks (a ring over a group that is not a sub-grid, or
          // nccl). Exact when every member is as far from the members it sends to as the
          // representative is from its own.
          if (std::string problem = flat_problem(group, rep_group); !problem.empty()) {
            return no(fmt::format("group {} (rank {} node {}) {} and {}", group_name(group), rank,
                                  node_id(rank, node),
                                  uses_nccl ? "runs one nccl phase over its ranks"
                                            : "is not a sub-grid of the network",
                                  problem));
          }
        }
        verified_against[group] = rep_group;
        if (group_mask[group] != group_mask[rep_group] ||
            groups[group].size() != groups[rep_group].size()) {
          return no(fmt::format(
              "groups {} and {} (node {} of ranks {} and {}) span different "
              "dimensions",
              group_name(group), group_name(rep_group), node_id(rank, node), rank, rep));
        }
        uint32_t& stands_for = verdict.group_representative[group];
        if (stands_for == kNoGroupId) stands_for = rep_group;
        if (stands_for != rep_group ||
            (reverse[rep_group] != kNoGroupId && reverse[rep_group] != group)) {
          return no(
              fmt::format("rank {} uses its groups at other nodes than rank {} does (group "
                          "{} at node {})",
                          rank, rep, group_name(group), node_id(rank, node)));
        }
        if (reverse[rep_group] == kNoGroupId) touched.push_back(rep_group);
        reverse[rep_group] = group;
      }
      for (uint32_t group : touched) reverse[group] = kNoGroupId;
      touched.clear();
    }
    // Point-to-point: one class at the other end, injectively, at one distance.
    for (uint32_t k = 0; k < model.nodes.size(); ++k) {
      const CommNode& head = model.nodes[k];
      if (head.kind == CommKind::kCollective) continue;
      const bool send = head.kind == CommKind::kSend;
      const uint32_t other_class = plan->class_of[head.peer];
      const auto distance = geometry(topology, rep, head.peer);
      ++stamp_value;
      for (Rank rank : members) {
        const CommNode& mine = comm[rank].nodes[k];
        const NodeIndex node = mine.node;
        if (plan->class_of[mine.peer] != other_class) {
          return no(fmt::format("rank {} node {} and rank {} exchange with different classes", rank,
                                node_id(rank, node), rep));
        }
        if (geometry(topology, rank, mine.peer) != distance) {
          return no(
              fmt::format("the message of rank {} node {} travels another distance than rank {}'s",
                          rank, node_id(rank, node), rep));
        }
        if (stamp[mine.peer] == stamp_value) {
          return no(
              fmt::format("two ranks of one class {} rank {} at the same node (rank {} node {})",
                          send ? "send to" : "receive from", mine.peer, rank, node_id(rank, node)));
        }
        stamp[mine.peer] = stamp_value;
      }
      if (!send || model.label[k] != k) continue;
      // A block head of sends: where it arrives, and as from whom.
      const Block* own = find_block(comm[rep].sends, head.peer, head.tag);
      uint32_t receive_head = UINT32_MAX;
      sys::MirrorTraffic::RoutePairs pairs;
      pairs.reserve(members.size());
      for (Rank rank : members) {
        const CommNode& mine = comm[rank].nodes[k];
        const Block* block = find_block(comm[mine.peer].recvs, rank, mine.tag);
        const Block* sent = find_block(comm[rank].sends, mine.peer, mine.tag);
        if (own == nullptr || block == nullptr || sent == nullptr || block->count != sent->count ||
            sent->count != own->count) {
          return no(
              fmt::format("rank {} node {}: its sends to rank {} (tag {}) are not matched "
                          "one for one by receives there",
                          rank, node_id(rank, mine.node), mine.peer, mine.tag));
        }
        if (receive_head == UINT32_MAX) receive_head = block->head;
        if (block->head != receive_head) {
          return no(
              fmt::format("ranks {} and {} are received at different nodes of their "
                          "destinations",
                          rep, rank));
        }
        pairs.emplace_back(rank, mine.peer);
      }
      const Rank destination_rep = plan->members[other_class].front();
      const CommNode& arrival = comm[destination_rep].nodes[receive_head];
      const Rank sigma = arrival.peer;
      const Block* sigma_block = find_block(comm[sigma].sends, destination_rep, arrival.tag);
      if (arrival.tag != head.tag || sigma_block == nullptr || sigma_block->head != k ||
          plan->class_of[sigma] != c) {
        return no(
            fmt::format("rank {}'s messages to rank {} (tag {}) have no counterpart that "
                        "reaches rank {}",
                        rep, head.peer, head.tag, destination_rep));
      }
      if (!arrivals.emplace(sigma, destination_rep, head.tag).second) {
        return no(fmt::format("two messages of rank {} would arrive at rank {} as from rank {}",
                              rep, destination_rep, sigma));
      }
      plan->p2p[{rep, head.peer, head.tag}] = {sigma, destination_rep,
                                               static_cast<uint32_t>(plan->p2p_pairs.size())};
      plan->p2p_pairs.push_back(std::move(pairs));
    }
  }
  // Messages of groups across classes go from representative to representative as addressed;
  // every group they stand for sends its own copy.
  std::map<std::pair<Rank, Rank>, uint32_t> direct_owner;
  for (uint32_t group = 0; group < group_count; ++group) {
    const uint32_t rep_group = verdict.group_representative[group];
    if (rep_group == kNoGroupId || group_class[rep_group] != kMixed) continue;
    const std::vector<Rank>& ranks = groups[group];
    const std::vector<Rank>& reps = groups[rep_group];
    for (size_t lhs = 0; lhs < ranks.size(); ++lhs) {
      for (size_t rhs = 0; rhs < ranks.size(); ++rhs) {
        if (lhs == rhs) continue;
        const std::pair<Rank, Rank> key{reps[lhs], reps[rhs]};
        auto [owner, inserted] = direct_owner.try_emplace(key, rep_group);
        if (owner->second != rep_group) {
          return no(
              fmt::format("ranks {} and {} are representatives in two groups across classes "
                          "({} and {})",
                          key.first, key.second, group_name(owner->second), group_name(rep_group)));
        }
        auto [entry, fresh] =
            plan->direct.try_emplace(key, static_cast<uint32_t>(plan->p2p_pairs.size()));
        if (fresh) plan->p2p_pairs.emplace_back();
        plan->p2p_pairs[entry->second].emplace_back(ranks[lhs], ranks[rhs]);
      }
    }
  }
  // The messages of one-phase groups (rings over groups that are not sub-grids, nccl): every
  // member's message, for link statistics (the representative is the group's first rank).
  std::map<std::pair<Rank, Rank>, uint32_t> flat_owner;
  for (uint32_t group = 0; group < group_count; ++group) {
    const uint32_t rep_group = verdict.group_representative[group];
    if (rep_group == kNoGroupId || group_class[rep_group] == kMixed) continue;
    const std::vector<Rank>& ranks = groups[group];
    const std::vector<Rank>& reps = groups[rep_group];
    const size_t n = ranks.size();
    for (const size_t offset : flat_offsets(group)) {
      const std::pair<Rank, Rank> key{reps[0], reps[offset]};
      auto [owner, inserted] = flat_owner.try_emplace(key, rep_group);
      if (owner->second != rep_group) {
        return no(
            fmt::format("rank {} sends to rank {} in one phase over each of two groups ({} "
                        "and {})",
                        key.first, key.second, group_name(owner->second), group_name(rep_group)));
      }
      auto [entry, fresh] =
          plan->flat.try_emplace(key, static_cast<uint32_t>(plan->p2p_pairs.size()));
      if (fresh) plan->p2p_pairs.emplace_back();
      for (size_t pos = 0; pos < n; ++pos) {
        plan->p2p_pairs[entry->second].emplace_back(ranks[pos], ranks[(pos + offset) % n]);
      }
    }
  }
  verdict.ok = true;
  verdict.plan = std::move(plan);
  return verdict;
}

}  // namespace orrery::sim
