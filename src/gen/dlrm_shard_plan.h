// gen/dlrm_shard_plan.h: a placement of DLRM embedding-table shards on ranks, as a plan file.
//
// An embedding sharding plan says, for every table, how it is split (table-, row-, column-,
// table-row-, table-column-wise or data-parallel), which block of rows and columns each shard
// holds and on which rank, and optionally what the planner estimated for each shard (compute and
// communication in ms, HBM and DDR bytes). `orrery shard plan` (design/shard_planner.h) writes it;
// `orrery gen dlrm --plan` reads it here and writes the iteration with that placement, so gen/
// never depends on design/. The JSON format is in docs/models/sharding.md; the loader checks
// every key and every shard (blocks that tile the table, ranks inside the world) and names the
// file, table and shard of what is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "gen/transformer_model.h"

namespace orrery::gen {

enum class ShardingType : uint8_t {
  kTableWise,
  kRowWise,
  kColumnWise,
  kTableRowWise,
  kTableColumnWise,
  kDataParallel
};
// "tw", "rw", "cw", "twrw", "twcw", "dp" (and TorchRec's names: "table_wise", "row_wise", ...).
Expected<ShardingType> parse_sharding_type(std::string_view name);
// The short name ("tw").
std::string_view sharding_type_name(ShardingType type);
inline constexpr ShardingType kAllShardingTypes[] = {
    ShardingType::kTableWise,    ShardingType::kRowWise,         ShardingType::kColumnWise,
    ShardingType::kTableRowWise, ShardingType::kTableColumnWise, ShardingType::kDataParallel};

// One shard: a block of rows and columns of its table on one rank.
struct PlannedShard {
  uint32_t rank = 0;
  uint64_t row_offset = 0;
  uint64_t rows = 0;
  uint32_t col_offset = 0;
  uint32_t cols = 0;
  // The planner's estimate (ms, bytes); negative times: not given.
  double fwd_compute = -1;
  double fwd_comms = -1;
  double bwd_compute = -1;
  double bwd_comms = -1;
  uint64_t hbm_bytes = 0;
  uint64_t ddr_bytes = 0;

  bool has_estimate() const { return fwd_compute >= 0 && bwd_compute >= 0; }
};

struct PlannedTable {
  std::string name;
  uint64_t rows = 0;
  uint32_t dim = 0;
  double pooling = 1.0;  // average lookups per sample
  DType dtype = DType::kFp32;
  ShardingType sharding = ShardingType::kTableWise;
  std::string kernel = "fused";  // informational for gen: the compute time carries its effect
  std::vector<PlannedShard> shards;
};

// The planner's per-rank totals, carried along for people and scripts (gen does not use them).
struct PlannedRank {
  double fwd_compute = 0;
  double fwd_comms = 0;
  double bwd_compute = 0;
  double bwd_comms = 0;
  uint64_t hbm_bytes = 0;
  uint64_t ddr_bytes = 0;
};

struct DlrmShardPlan {
  uint32_t world_size = 1;
  uint32_t local_world_size = 1;  // ranks per host: TWRW and TWCW stay within one
  uint32_t batch_size = 0;        // samples per rank the estimates are for (0: unknown)
  std::string model;              // the model (preset or file) the tables came from, if any
  std::string planner;            // informational
  std::vector<PlannedTable> tables;
  std::vector<PlannedRank> ranks;  // empty, or one per rank

  // True when every shard carries compute estimates.
  bool has_estimates() const;
};

// Checks the plan as the loader does (messages name the table and shard).
Status validate_dlrm_shard_plan(const DlrmShardPlan& plan);
// Reads a plan file (docs/models/sharding.md). Errors name the file, line or table and shard.
Expected<DlrmShardPlan> load_dlrm_shard_plan(const std::string& path);
// The plan as JSON text (stable key order, shortest round-trip numbers), and written to a file.
std::string dlrm_shard_plan_json(const DlrmShardPlan& plan);
Status write_dlrm_shard_plan(const DlrmShardPlan& plan, const std::string& path);

}  // namespace orrery::gen
