// design/shard_planner.h: placing DLRM embedding-table shards on ranks to balance time under memory
// limits (TorchRec's planner), and the exact optimum to measure it against.
//
// A plan picks one ShardOption per table (design/shard_model.h) and a rank for every shard. Its
// rating is TorchRec's: the largest per-rank sum of shard times (forward and backward, compute and
// communication). Partitioners, all deterministic:
// - greedy (TorchRec's GreedyPerfPartitioner): uniform options (RW, DP) one shard per rank; then
//   the other tables largest first (by HBM, then DDR), TWRW and TWCW onto the least-loaded host
//   that holds them, TW and CW shard by shard onto the least-loaded rank (by time; ties by local
//   rank, then rank) that still has room;
// - memory-balanced (TorchRec's MemoryBalancedPartitioner): greedy by time, then a binary search
//   for the smallest per-rank HBM cap whose greedy plan rates within `balance_tolerance` of the
//   uncapped one;
// - exact: a mixed-integer program (GLPK's branch and cut) over every candidate option and
//   placement, minimising the rating; for instances small enough to prove optimal.
// Proposals (which option per table): the fastest option of every table, and for each allowed
// sharding type every table that way; when a proposal does not fit, tables move to options that
// need less HBM (UVM caching, UVM, other types), cheapest time per byte saved first. The best-rated
// plan that fits wins, then a local search moves tables on the busiest rank to other options while
// that lowers the rating (a fixed budget of re-partitions). If nothing fits, the error names the
// table and the memory that is missing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "design/shard_model.h"
#include "gen/dlrm_shard_plan.h"

namespace orrery::design {

struct ShardProblem {
  std::vector<ShardTable> tables;
  ShardCluster cluster;
  uint64_t dense_parameter_bytes = 0;  // the MLPs (0: none known); reserved on every device
  std::string model;                   // where the tables came from (recorded in the plan file)
};

enum class ShardPartitioner : uint8_t { kGreedy, kMemoryBalanced, kExact };
// "greedy", "memory-balanced", "exact" (also "ilp").
Expected<ShardPartitioner> parse_shard_partitioner(std::string_view name);
std::string_view shard_partitioner_name(ShardPartitioner partitioner);

struct ShardPlannerOptions {
  std::vector<ShardingType> types{std::begin(gen::kAllShardingTypes),
                                  std::end(gen::kAllShardingTypes)};
  std::vector<ShardKernel> kernels{ShardKernel::kFused, ShardKernel::kUvmCaching,
                                   ShardKernel::kUvm};
  ShardPartitioner partitioner = ShardPartitioner::kGreedy;
  double balance_tolerance = 0.02;  // memory-balanced: accepted rating increase
  uint32_t balance_searches = 10;   // memory-balanced: greedy runs in the binary search
  double exact_time_limit_s = 60;   // exact: GLPK's time limit
  // Local search after the proposals: re-partitions to try (auto: 40,000 / tables, within
  // [16, 2,000]; 0: none).
  static constexpr size_t kAutoBudget = SIZE_MAX;
  size_t search_budget = kAutoBudget;
};

// A table's chosen option and the rank of each of its shards.
struct PlacedTable {
  ShardOption option;
  std::vector<uint32_t> ranks;  // per shard
};

struct ShardPlan {
  std::vector<PlacedTable> tables;  // by table index
  std::vector<ShardPerf> rank_perf;
  std::vector<ShardStorage> rank_storage;
  ShardStorage capacity;  // per rank, after reservations
  std::string proposal;   // which proposal won ("fastest per table", "every table tw", ...)
  std::string partitioner;
  // Exact partitioner: whether GLPK proved the rating optimal, and its best bound.
  bool proven_optimal = false;
  double bound = 0;

  // The largest per-rank time (TorchRec's rating), ms.
  double rating() const;
  // A lower bound on any placement of these shards: the larger of the total time over the ranks
  // and the longest single shard (ms).
  double lower_bound() const;
};

// Plans `problem` (greedy or memory-balanced partitioner over the proposals, or the exact model).
Expected<ShardPlan> plan_shards(const ShardProblem& problem, const ShardPlannerOptions& options);

// Places one fixed option per table (`options[t]` for table t) with the greedy or memory-balanced
// partitioner. The error names the first table that does not fit and the memory it misses.
Expected<ShardPlan> partition_shards(const ShardProblem& problem, std::vector<ShardOption> options,
                                     const ShardStorage& capacity, ShardPartitioner partitioner,
                                     const ShardPlannerOptions& planner = {});

// The exact model: chooses one of `candidates[t]` for every table t and a rank for every shard,
// minimising the rating, within `time_limit_s`. `incumbent` (a feasible plan of the same problem
// whose options are among the candidates) seeds the search. Fails when no placement fits (or none
// was found in time).
Expected<ShardPlan> solve_exact(const ShardProblem& problem,
                                const std::vector<std::vector<ShardOption>>& candidates,
                                const ShardStorage& capacity, double time_limit_s,
                                const ShardPlan* incumbent = nullptr);

// The plan as the file `orrery gen dlrm --plan` reads (estimates and storage per shard and rank).
gen::DlrmShardPlan to_shard_plan_file(const ShardProblem& problem, const ShardPlan& plan);

}  // namespace orrery::design
