#include "workload/local_memory.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "core/parallel.h"

namespace orrery::workload {

namespace {

using chakra::NodeIndex;
using chakra::TraceGraph;

enum class Lifetime : uint8_t {
  kTransient,  // written and read: first writer's start .. last use's end
  kInput,      // read, never written: run start .. last reader's end
  kOutput,     // written, never read: first writer's start .. run end
};

// A size written as an integer ("32768") or a float ("32768.0", "3.2768e4"); fractions of a byte
// are dropped.
std::optional<uint64_t> parse_size(std::string_view text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc() && ptr == end) return value;
  double real = 0;
  auto [dptr, dec] = std::from_chars(text.data(), end, real);
  if (dec != std::errc() || dptr != end || !std::isfinite(real) || real < 0 ||
      real >= 18446744073709551616.0) {
    return std::nullopt;
  }
  return static_cast<uint64_t>(real);
}

// The attribute names a plan reads, resolved once per graph.
struct PlanKeys {
  explicit PlanKeys(const TraceGraph& graph)
      : inputs(graph.key("inputs")),
        outputs(graph.key("outputs")),
        num_ops(graph.key("num_ops")),
        comm_size(graph.key("comm_size")),
        tensor_size(graph.key("tensor_size")) {}
  chakra::AttributeKey inputs, outputs, num_ops, comm_size, tensor_size;
};

// Whether the executor gives the node an activity (it starts and ends), as WorkloadExecutor does:
// compute with neither a recorded duration nor FLOPs, metadata and invalid nodes complete at once
// without one.
bool runs(const TraceGraph& graph, const PlanKeys& keys, NodeIndex node) {
  switch (graph.type(node)) {
    case ChakraProtoMsg::COMP_NODE: {
      if (graph.duration_micros(node) != 0) return true;
      Expected<std::optional<uint64_t>> flops = graph.get_uint(node, keys.num_ops);
      return flops && flops->has_value() && **flops != 0;
    }
    case ChakraProtoMsg::COMM_COLL_NODE:
    case ChakraProtoMsg::COMM_SEND_NODE:
    case ChakraProtoMsg::COMM_RECV_NODE:
    case ChakraProtoMsg::MEM_LOAD_NODE:
    case ChakraProtoMsg::MEM_STORE_NODE:
      return true;
    default:
      return false;
  }
}

// The bytes a node without tensor attributes touches while it runs.
uint64_t own_bytes(const TraceGraph& graph, const PlanKeys& keys, NodeIndex node) {
  const int32_t type = graph.type(node);
  const bool comm = type == ChakraProtoMsg::COMM_COLL_NODE ||
                    type == ChakraProtoMsg::COMM_SEND_NODE ||
                    type == ChakraProtoMsg::COMM_RECV_NODE;
  Expected<std::optional<uint64_t>> bytes =
      graph.get_uint(node, comm ? keys.comm_size : keys.tensor_size);
  return bytes && bytes->has_value() ? **bytes : 0;
}

// A rank's preparation: an error, or whether its trace names tensors.
struct Prepared {
  std::optional<Error> error;
  bool has_attributes = false;
};

}  // namespace

Expected<LocalMemoryTracker> LocalMemoryTracker::create(
    const std::vector<const chakra::TraceGraph*>& graphs, size_t threads) {
  LocalMemoryTracker tracker;
  // One plan per distinct graph, numbered in rank order.
  std::unordered_map<const TraceGraph*, uint32_t> plan_of;
  std::vector<const TraceGraph*> distinct;
  for (const TraceGraph* graph : graphs) {
    if (plan_of.try_emplace(graph, static_cast<uint32_t>(distinct.size())).second) {
      distinct.push_back(graph);
    }
  }
  tracker.plans_.resize(distinct.size());
  std::vector<Prepared> prepared(distinct.size());

  parallel_for(distinct.size(), threads, [&](size_t plan_idx) {
    const TraceGraph& graph = *distinct[plan_idx];
    tracker.plans_[plan_idx] = std::make_unique<Plan>();
    Plan& plan = *tracker.plans_[plan_idx];
    Prepared& out = prepared[plan_idx];
    const PlanKeys keys(graph);
    std::unordered_map<std::string_view, uint32_t> index;
    std::vector<uint8_t> written;
    std::vector<uint8_t> read;
    std::vector<uint32_t> last_node;  // per tensor: the last node that named it, for de-duplication
    plan.first.reserve(graph.size() + 1);
    plan.own_bytes.assign(graph.size(), 0);

    for (NodeIndex node = 0; node < graph.size(); ++node) {
      const chakra::Attribute* inputs = graph.find_attribute(node, keys.inputs.id);
      const chakra::Attribute* outputs = graph.find_attribute(node, keys.outputs.id);
      if (inputs != nullptr || outputs != nullptr) out.has_attributes = true;
      if (!runs(graph, keys, node)) {
        plan.first.push_back(static_cast<uint32_t>(plan.named.size()));
        continue;
      }
      if (inputs == nullptr && outputs == nullptr) {
        plan.own_bytes[node] = own_bytes(graph, keys, node);
        plan.first.push_back(static_cast<uint32_t>(plan.named.size()));
        continue;
      }
      const size_t node_first = plan.named.size();
      for (const auto& [attribute, writes] : {std::pair{inputs, false}, std::pair{outputs, true}}) {
        if (attribute == nullptr) continue;
        const std::string_view name = writes ? "outputs" : "inputs";
        // An attribute without a value (the generator writes `outputs` so for collectives) lists
        // nothing.
        if (attribute->value_case == chakra::ValueCase::VALUE_NOT_SET) continue;
        Expected<std::optional<std::vector<std::string_view>>> list =
            graph.get_string_list(node, name);
        if (!list) {
          out.error = list.error().with_context(graph.source());
          return;
        }
        const std::vector<std::string_view>& values = **list;
        if (values.size() % 2 != 0) {
          out.error = Error::make(ErrorKind::kTrace,
                                  "{}: node {}: '{}' has {} strings, expected tensor name and "
                                  "size pairs",
                                  graph.source(), graph.id(node), name, values.size());
          return;
        }
        for (size_t idx = 0; idx < values.size(); idx += 2) {
          const std::optional<uint64_t> size = parse_size(values[idx + 1]);
          if (!size) {
            out.error =
                Error::make(ErrorKind::kTrace,
                            "{}: node {}: '{}' gives tensor '{}' the size '{}', expected "
                            "a number of bytes",
                            graph.source(), graph.id(node), name, values[idx], values[idx + 1]);
            return;
          }
          if (*size == 0) continue;
          auto [found, added] = index.try_emplace(values[idx], static_cast<uint32_t>(index.size()));
          const uint32_t tensor = found->second;
          if (added) {
            plan.size.push_back(0);
            plan.uses.push_back(0);
            written.push_back(0);
            read.push_back(0);
            last_node.push_back(UINT32_MAX);
          }
          // Producers disagree now and then about a tensor's size; the largest is kept.
          plan.size[tensor] = std::max(plan.size[tensor], *size);
          (writes ? written : read)[tensor] = 1;
          if (last_node[tensor] == node) {
            // Named twice by one node (read and written in place): one use, which writes.
            if (writes) {
              for (size_t use = node_first; use < plan.named.size(); ++use) {
                if (plan.named[use] >> 1 == tensor) plan.named[use] |= 1u;
              }
            }
            continue;
          }
          last_node[tensor] = node;
          ++plan.uses[tensor];
          plan.named.push_back(tensor << 1 | (writes ? 1u : 0u));
        }
      }
      plan.first.push_back(static_cast<uint32_t>(plan.named.size()));
    }

    const size_t tensors = plan.size.size();
    plan.lifetime.resize(tensors);
    for (size_t tensor = 0; tensor < tensors; ++tensor) {
      Lifetime lifetime = Lifetime::kTransient;
      if (!written[tensor]) {
        lifetime = Lifetime::kInput;
        plan.resident += plan.size[tensor];
      } else if (!read[tensor]) {
        lifetime = Lifetime::kOutput;
      }
      plan.lifetime[tensor] = static_cast<uint8_t>(lifetime);
    }
  });

  for (const Prepared& out : prepared) {
    if (out.error) return *out.error;
    tracker.has_tensor_attributes_ = tracker.has_tensor_attributes_ || out.has_attributes;
  }
  tracker.ranks_.resize(graphs.size());
  for (size_t rank_idx = 0; rank_idx < graphs.size(); ++rank_idx) {
    RankState& rank = tracker.ranks_[rank_idx];
    const Plan& plan = *tracker.plans_[plan_of.at(graphs[rank_idx])];
    rank.plan = &plan;
    rank.pending = plan.uses;
    rank.live.resize(plan.size.size());
    for (size_t tensor = 0; tensor < plan.size.size(); ++tensor) {
      rank.live[tensor] = static_cast<Lifetime>(plan.lifetime[tensor]) == Lifetime::kInput;
    }
    rank.held = plan.resident;
    rank.peak = plan.resident;
  }
  return tracker;
}

void LocalMemoryTracker::advance(RankState& rank, SimTime now) {
  if (now == rank.last_change) return;
  rank.peak = std::max(rank.peak, rank.held);
  rank.last_change = now;
}

void LocalMemoryTracker::on_activity_start(const ActivityRecord& record,
                                           const chakra::TraceGraph& graph) {
  (void)graph;
  RankState& rank = ranks_[record.rank];
  const Plan& plan = *rank.plan;
  advance(rank, record.start);
  const NodeIndex node = record.node;
  for (uint32_t use = plan.first[node]; use < plan.first[node + 1]; ++use) {
    const uint32_t tensor = plan.named[use] >> 1;
    const bool writes = (plan.named[use] & 1u) != 0;
    if (writes && !rank.live[tensor]) {
      rank.live[tensor] = 1;
      rank.held += plan.size[tensor];
    }
  }
  rank.held += plan.own_bytes[node];
}

void LocalMemoryTracker::on_activity(const ActivityRecord& record,
                                     const chakra::TraceGraph& graph) {
  (void)graph;
  RankState& rank = ranks_[record.rank];
  const Plan& plan = *rank.plan;
  advance(rank, record.end);
  const NodeIndex node = record.node;
  for (uint32_t use = plan.first[node]; use < plan.first[node + 1]; ++use) {
    const uint32_t tensor = plan.named[use] >> 1;
    assert(rank.pending[tensor] > 0 && "local memory: a node ended twice");
    if (--rank.pending[tensor] != 0) continue;
    if (static_cast<Lifetime>(plan.lifetime[tensor]) == Lifetime::kOutput) continue;
    if (rank.live[tensor]) {
      rank.live[tensor] = 0;
      rank.held -= plan.size[tensor];
    }
  }
  assert(rank.held >= plan.own_bytes[node]);
  rank.held -= plan.own_bytes[node];
}

uint64_t LocalMemoryTracker::peak(uint32_t rank) const {
  return std::max(ranks_[rank].peak, ranks_[rank].held);
}

}  // namespace orrery::workload
