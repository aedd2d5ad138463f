// Custom collectives: a collective type given as its own Chakra graph per rank
// (`*-implementation-custom` in the system file), run the way ASTRA-sim runs them: every ready
// node issues at once (no issue slots inside the collective); a send completes when its message
// arrives, a receive when its message has arrived; a compute node takes duration_micros (1 ns when
// zero) with no endpoint delay or reduction cost; the collective completes with its last node.
#include <cassert>

#include "chakra/trace_file.h"
#include "chakra/trace_set.h"
#include "chakra/validation.h"
#include "core/slot_pool.h"
#include "system/collective_engine.h"

namespace orrery::sys {

const std::vector<std::string>& CollectiveEngine::custom_prefixes(CollectiveType type) const {
  static const std::vector<std::string> kNone;
  switch (type) {
    case CollectiveType::kAllReduce:
      return config_.all_reduce_custom;
    case CollectiveType::kAllGather:
      return config_.all_gather_custom;
    case CollectiveType::kReduceScatter:
      return config_.reduce_scatter_custom;
    case CollectiveType::kAllToAll:
      return config_.all_to_all_custom;
    default:
      return kNone;
  }
}

Status CollectiveEngine::start_custom(uint32_t owner, uint32_t position,
                                      const std::string& prefix) {
  const auto key = std::make_pair(prefix, position);
  auto found = custom_graphs_.find(key);
  if (found == custom_graphs_.end()) {
    const std::string path = chakra::rank_trace_path(prefix, position);
    Expected<chakra::TraceGraph> graph = chakra::load_trace(path);
    if (!graph) return graph.error().with_context("custom collective");
    // Its sizes and durations are bounded as in any trace (core/checked.h, docs/numbers.md).
    const chakra::ValidationReport report = chakra::validate_trace(*graph);
    for (const chakra::Diagnostic& finding : report.diagnostics()) {
      if (finding.check == chakra::Check::kOutOfRange) {
        return Error(ErrorKind::kTrace,
                     fmt::format("custom collective: {}: {}", path, finding.message));
      }
    }
    auto custom = std::make_unique<CustomGraph>();
    custom->graph = std::move(*graph);
    custom->deps = chakra::DependencyGraph::build(custom->graph, chakra::DependencyKinds::kBoth);
    found = custom_graphs_.emplace(key, std::move(custom)).first;
  }
  const uint32_t run = take_slot(custom_runs_, free_custom_runs_);
  CustomRun& state = custom_runs_[run];
  state.owner = owner;
  state.instance = rank_collectives_[owner].instance;
  state.graph = found->second.get();
  state.tracker =
      std::make_unique<chakra::DependencyTracker>(state.graph->graph, state.graph->deps);
  state.remaining = state.graph->graph.size();
  if (state.remaining == 0) {
    free_custom_runs_.push_back(run);
    (void)engine_.schedule_at(engine_.now(), id_, kDoneNow, owner);
    return Status::ok();
  }
  custom_pump(run);
  return Status::ok();
}

void CollectiveEngine::custom_pump(uint32_t run) {
  while (!failure_ && custom_runs_[run].tracker && custom_runs_[run].tracker->has_ready()) {
    CustomRun& state = custom_runs_[run];
    const chakra::NodeIndex node = state.tracker->pop_ready();
    const chakra::TraceGraph& graph = state.graph->graph;
    const RankCollective& owner = rank_collectives_[state.owner];
    const Instance& instance = instances_[state.instance];
    const Group& group = groups_[instance.group];
    const int32_t type = graph.type(node);
    if (type == ChakraProtoMsg::COMM_SEND_NODE || type == ChakraProtoMsg::COMM_RECV_NODE) {
      const bool send = type == ChakraProtoMsg::COMM_SEND_NODE;
      Expected<std::optional<uint64_t>> peer = graph.get_uint(node, send ? "comm_dst" : "comm_src");
      Expected<std::optional<uint64_t>> bytes = graph.get_uint(node, "comm_size");
      Expected<int64_t> tag = graph.get_int_or(node, "comm_tag", 0);
      if (!peer || !bytes || !tag || !peer->has_value() || **peer >= group.ranks.size()) {
        fail(Error::make(ErrorKind::kTrace,
                         "{} node {}: custom collective {} needs a peer below {}", graph.source(),
                         graph.id(node), send ? "send" : "receive", group.ranks.size()));
        return;
      }
      const Rank peer_rank = group.ranks[**peer];
      if (send) {
        p2p_send(owner.rank, peer_rank, *tag, state.instance, bytes->value_or(0), node,
                 graph.id(node), run);
      } else {
        p2p_recv(owner.rank, peer_rank, *tag, state.instance, bytes->value_or(0), node,
                 graph.id(node), run);
      }
      continue;
    }
    if (type == ChakraProtoMsg::COMP_NODE) {
      const uint64_t micros = graph.duration_micros(node);
      const SimTime time =
          micros == 0 ? SimTime::from_ns(1) : SimTime::from_us(static_cast<int64_t>(micros));
      (void)engine_.schedule_after(time, id_, kCustomWork, uint64_t{run} << 32 | node);
      continue;
    }
    custom_node_done(run, node);
    return;  // custom_node_done pumps again
  }
}

void CollectiveEngine::custom_node_done(uint32_t run, chakra::NodeIndex node) {
  CustomRun& state = custom_runs_[run];
  state.tracker->complete(node);
  if (--state.remaining == 0) {
    const uint32_t owner = state.owner;
    state.tracker.reset();
    free_custom_runs_.push_back(run);
    collective_finished(owner);
    return;
  }
  custom_pump(run);
}

}  // namespace orrery::sys
