#include "sim/symmetry.h"

#include <algorithm>

#include <fmt/format.h>

#include "system/collective.h"

namespace orrery::sim {

namespace {

bool power_of_two(uint32_t value) { return value != 0 && (value & (value - 1)) == 0; }

// The algorithm list of collective kind `kind`, in the order of `uses`.
const std::vector<sys::Algorithm>& kind_list(const sys::SystemConfig& system, int kind) {
  const std::vector<sys::Algorithm>* lists[4] = {&system.all_reduce, &system.reduce_scatter,
                                                 &system.all_gather, &system.all_to_all};
  return *lists[kind];
}

}  // namespace

std::string algorithm_problem(const sys::Algorithm& algorithm, uint32_t dim,
                              const net::Topology& topology) {
  switch (algorithm.kind) {
    case sys::AlgorithmKind::kRing:
    case sys::AlgorithmKind::kDirect:
    case sys::AlgorithmKind::kInSwitch:
      return "";
    case sys::AlgorithmKind::kHalvingDoubling:
      return power_of_two(topology.size(dim))
                 ? ""
                 : fmt::format("halvingDoubling on dimension {} of {} members (not a power of two)",
                               dim, topology.size(dim));
    default:
      return fmt::format("{} in dimension {}", sys::algorithm_name(algorithm), dim);
  }
}

bool runs_nccl(const sys::SystemConfig& system, int kind) {
  const std::vector<sys::Algorithm>& list = kind_list(system, kind);
  return !list.empty() && list.front().kind == sys::AlgorithmKind::kNccl;
}

std::string algorithm_lists_problem(const bool (&uses)[4], const sys::SystemConfig& system,
                                    const net::Topology& topology, bool congestion_aware,
                                    bool flat_nccl) {
  const std::vector<std::string>* custom[4] = {
      &system.all_reduce_custom, &system.reduce_scatter_custom, &system.all_gather_custom,
      &system.all_to_all_custom};
  for (int kind = 0; kind < 4; ++kind) {
    if (!uses[kind]) continue;
    if (!custom[kind]->empty()) return "a custom collective graph";
    const std::vector<sys::Algorithm>& list = kind_list(system, kind);
    // nccl runs one phase over the group whatever the other dimensions list.
    if (flat_nccl && runs_nccl(system, kind)) continue;
    for (uint32_t dim = 0; dim < list.size() && dim < topology.dimension_count(); ++dim) {
      // The reduce-scatter and all-gather halves of a hierarchical all-reduce use the all-reduce
      // list, which is checked as well when all-reduce is used.
      if (std::string problem = algorithm_problem(list[dim], dim, topology); !problem.empty()) {
        return problem;
      }
      if (congestion_aware && topology.size(dim) > 1) {
        // Every message one hop: to a ring neighbour, or any peer of a FullyConnected dimension.
        const sys::AlgorithmKind algorithm = list[dim].kind;
        const bool one_hop = algorithm == sys::AlgorithmKind::kRing ||
                             (algorithm == sys::AlgorithmKind::kDirect &&
                              topology.dimension(dim).kind == net::TopologyKind::kFullyConnected);
        if (!one_hop) {
          return fmt::format("congestion-aware: {} in dimension {} crosses links of other ranks",
                             sys::algorithm_name(list[dim]), dim);
        }
      }
    }
  }
  return "";
}

SymmetryVerdict check_symmetric_run(const chakra::TraceGraph& graph,
                                    const sys::SystemConfig& system, const net::Topology& topology,
                                    const std::string& backend, bool shared_memory_pools,
                                    const std::vector<std::string>& all_ranks_groups) {
  auto no = [](std::string reason) { return SymmetryVerdict{false, std::move(reason)}; };
  const bool congestion_aware = backend == "congestion-aware";
  if (backend != "analytical" && !congestion_aware) {
    return no(fmt::format("the {} backend models contention", backend));
  }
  if (congestion_aware) {
    // Queues are exact for the representative only when no link carries another rank's message:
    // no switch (its downlinks merge senders).
    for (uint32_t dim = 0; dim < topology.dimension_count(); ++dim) {
      if (topology.size(dim) > 1 && topology.dimension(dim).kind == net::TopologyKind::kSwitch) {
        return no(fmt::format(
            "congestion-aware: the Switch of dimension {} merges senders on its downlinks", dim));
      }
    }
  }
  bool uses[4] = {false, false, false,
                  false};  // all-reduce, reduce-scatter, all-gather, all-to-all
  for (chakra::NodeIndex node = 0; node < graph.size(); ++node) {
    const int32_t type = graph.type(node);
    if (type == ChakraProtoMsg::COMM_SEND_NODE || type == ChakraProtoMsg::COMM_RECV_NODE) {
      return no(fmt::format("node {} is a point-to-point message", graph.id(node)));
    }
    if ((type == ChakraProtoMsg::MEM_LOAD_NODE || type == ChakraProtoMsg::MEM_STORE_NODE) &&
        shared_memory_pools) {
      return no("memory nodes share a pool");
    }
    if (type != ChakraProtoMsg::COMM_COLL_NODE) continue;
    Expected<std::optional<int64_t>> comm_type = graph.get_int(node, "comm_type");
    if (!comm_type || !comm_type->has_value()) continue;  // host-side work, no collective
    const std::optional<sys::CollectiveType> collective = sys::collective_from_chakra(**comm_type);
    if (!collective) return no(fmt::format("node {} has an unknown collective", graph.id(node)));
    switch (*collective) {
      case sys::CollectiveType::kAllReduce:
        uses[0] = true;
        break;
      case sys::CollectiveType::kReduceScatter:
        uses[1] = true;
        break;
      case sys::CollectiveType::kAllGather:
        uses[2] = true;
        break;
      case sys::CollectiveType::kAllToAll:
        uses[3] = true;
        break;
      default:
        return no(fmt::format("node {} is a {} (rooted at one rank)", graph.id(node),
                              sys::collective_name(*collective)));
    }
    Expected<std::optional<std::string_view>> group = graph.get_string(node, "pg_name");
    const std::string name = group && group->has_value() ? std::string(**group) : "";
    if (std::find(all_ranks_groups.begin(), all_ranks_groups.end(), name) ==
        all_ranks_groups.end()) {
      return no(fmt::format("node {} runs over group '{}', not every rank", graph.id(node), name));
    }
  }
  if (std::string problem = algorithm_lists_problem(uses, system, topology, congestion_aware);
      !problem.empty()) {
    return no(std::move(problem));
  }
  return SymmetryVerdict{true, "", congestion_aware};
}

}  // namespace orrery::sim
