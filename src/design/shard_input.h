// design/shard_input.h: the embedding tables a sharding plan is for, from where users keep them.
//
// Tables come from `orrery gen dlrm`'s presets and JSON model files (gen/dlrm_generator.h: every
// table has the model's dimension and data type; the MLPs give the dense parameters the planner
// reserves on every device), or from a CSV file with a header row naming its columns: `rows` and
// `dim` required, `name`, `pooling` and `dtype` optional (docs/models/sharding.md). Errors name the
// file, the line and the column.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "design/shard_model.h"
#include "gen/dlrm_generator.h"

namespace orrery::design {

struct ShardTables {
  std::vector<ShardTable> tables;
  uint64_t dense_parameter_bytes = 0;  // the model's MLPs (0 for a CSV)
  std::string source;                  // the preset name or the file
};

// The tables of a DLRM model (a preset or a model file), named t0, t1, ...
ShardTables tables_from_dlrm(const gen::DlrmModel& model, std::string source);

// A CSV of tables: a header row, then one table per line; blank lines and lines starting with '#'
// are skipped. `dtype` is the default data type for tables that do not give one.
Expected<ShardTables> parse_tables_csv(std::string_view text, const std::string& path,
                                       gen::DType dtype = gen::DType::kFp32);
Expected<ShardTables> load_tables_csv(const std::string& path,
                                      gen::DType dtype = gen::DType::kFp32);

}  // namespace orrery::design
