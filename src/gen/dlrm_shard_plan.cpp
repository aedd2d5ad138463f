#include "gen/dlrm_shard_plan.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "core/json_config.h"
#include "core/text_file.h"

namespace orrery::gen {

namespace {

constexpr const char* kFormat = "orrery-dlrm-shard-plan";

Error shard_plan_error(std::string message) {
  return Error(ErrorKind::kConfig, std::move(message));
}

std::string table_label(const DlrmShardPlan& plan, size_t index) {
  return fmt::format("table {} ('{}')", index, plan.tables[index].name);
}

// Blocks [offset, offset + size) that follow each other from 0 to `total`.
template <typename Get>
Status check_tiling(size_t count, uint64_t total, Get get, const std::string& where,
                    const char* what) {
  uint64_t next = 0;
  for (size_t index = 0; index < count; ++index) {
    const auto [offset, size] = get(index);
    if (offset != next) {
      return shard_plan_error(
          fmt::format("{} shard {}: {} start at {}, expected {} (shards tile the "
                      "table in order)",
                      where, index, what, offset, next));
    }
    next = offset + size;
  }
  if (next != total) {
    return shard_plan_error(
        fmt::format("{}: the shards cover {} of its {} {}", where, next, total, what));
  }
  return Status::ok();
}

Expected<uint64_t> get_uint(const JsonConfig& config, const nlohmann::json& object, const char* key,
                            const std::string& where, uint64_t max) {
  if (!object.contains(key)) {
    return config.error("tables", fmt::format("{}: missing '{}'", where, key));
  }
  const nlohmann::json& value = object.at(key);
  if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<uint64_t>() > max) {
    return config.error("tables", fmt::format("{}: '{}' expected an integer from 0 to {}, found {}",
                                              where, key, max, json_excerpt(value)));
  }
  return value.get<uint64_t>();
}

Expected<double> get_double(const JsonConfig& config, const nlohmann::json& object, const char* key,
                            const std::string& where, double fallback) {
  if (!object.contains(key)) return fallback;
  const nlohmann::json& value = object.at(key);
  if (!value.is_number() || !(value.get<double>() >= 0) || !std::isfinite(value.get<double>())) {
    return config.error("tables", fmt::format("{}: '{}' expected a number >= 0, found {}", where,
                                              key, json_excerpt(value)));
  }
  return value.get<double>();
}

Status check_keys(const JsonConfig& config, const nlohmann::json& object,
                  std::initializer_list<const char*> keys, const std::string& where) {
  for (const auto& item : object.items()) {
    if (std::find_if(keys.begin(), keys.end(),
                     [&](const char* key) { return item.key() == key; }) == keys.end()) {
      std::string names;
      for (const char* key : keys) names += fmt::format("{}{}", names.empty() ? "" : ", ", key);
      return config.error("tables", fmt::format("{}: unknown key '{}' (expected one of {})", where,
                                                item.key(), names));
    }
  }
  return Status::ok();
}

// [offset, count] of a shard's rows or columns.
Expected<std::pair<uint64_t, uint64_t>> get_range(const JsonConfig& config,
                                                  const nlohmann::json& shard, const char* key,
                                                  const std::string& where) {
  if (!shard.contains(key)) {
    return config.error("tables", fmt::format("{}: missing '{}' ([offset, count])", where, key));
  }
  const nlohmann::json& value = shard.at(key);
  if (!value.is_array() || value.size() != 2 || !value[0].is_number_integer() ||
      !value[1].is_number_integer() || value[0].get<int64_t>() < 0 || value[1].get<int64_t>() < 0) {
    return config.error("tables", fmt::format("{}: '{}' expected [offset, count], found {}", where,
                                              key, json_excerpt(value)));
  }
  return std::pair{value[0].get<uint64_t>(), value[1].get<uint64_t>()};
}

void append_number(std::string& out, double value) { out += fmt::format("{}", value); }

}  // namespace

Expected<ShardingType> parse_sharding_type(std::string_view name) {
  if (name == "tw" || name == "table_wise" || name == "table-wise") return ShardingType::kTableWise;
  if (name == "rw" || name == "row_wise" || name == "row-wise") return ShardingType::kRowWise;
  if (name == "cw" || name == "column_wise" || name == "column-wise") {
    return ShardingType::kColumnWise;
  }
  if (name == "twrw" || name == "table_row_wise" || name == "table-row-wise") {
    return ShardingType::kTableRowWise;
  }
  if (name == "twcw" || name == "table_column_wise" || name == "table-column-wise") {
    return ShardingType::kTableColumnWise;
  }
  if (name == "dp" || name == "data_parallel" || name == "data-parallel") {
    return ShardingType::kDataParallel;
  }
  return Error::make(ErrorKind::kInvalidArgument,
                     "unknown sharding type '{}' (expected tw, rw, cw, twrw, twcw or dp)", name);
}

std::string_view sharding_type_name(ShardingType type) {
  switch (type) {
    case ShardingType::kTableWise:
      return "tw";
    case ShardingType::kRowWise:
      return "rw";
    case ShardingType::kColumnWise:
      return "cw";
    case ShardingType::kTableRowWise:
      return "twrw";
    case ShardingType::kTableColumnWise:
      return "twcw";
    case ShardingType::kDataParallel:
      return "dp";
  }
  return "?";
}

bool DlrmShardPlan::has_estimates() const {
  for (const PlannedTable& table : tables) {
    for (const PlannedShard& shard : table.shards) {
      if (!shard.has_estimate()) return false;
    }
  }
  return !tables.empty();
}

Status validate_dlrm_shard_plan(const DlrmShardPlan& plan) {
  if (plan.world_size == 0 || plan.world_size > (1U << 20)) {
    return shard_plan_error(fmt::format("world_size {}: expected 1 to 1,048,576", plan.world_size));
  }
  if (plan.local_world_size == 0 || plan.world_size % plan.local_world_size != 0) {
    return shard_plan_error(fmt::format("world_size {} is not a multiple of local_world_size {}",
                                        plan.world_size, plan.local_world_size));
  }
  if (plan.tables.empty()) return shard_plan_error("the plan has no tables");
  if (!plan.ranks.empty() && plan.ranks.size() != plan.world_size) {
    return shard_plan_error(fmt::format("'ranks' lists {} ranks, expected world_size {}",
                                        plan.ranks.size(), plan.world_size));
  }
  const uint32_t w = plan.world_size;
  const uint32_t lw = plan.local_world_size;
  for (size_t index = 0; index < plan.tables.size(); ++index) {
    const PlannedTable& table = plan.tables[index];
    const std::string where = table_label(plan, index);
    if (table.rows == 0) return shard_plan_error(where + ": 0 rows");
    if (table.dim == 0) return shard_plan_error(where + ": dimension 0");
    if (!(table.pooling > 0) || !std::isfinite(table.pooling)) {
      return shard_plan_error(
          fmt::format("{}: pooling factor {} (expected > 0)", where, table.pooling));
    }
    if (table.shards.empty()) return shard_plan_error(where + ": no shards");
    for (size_t s = 0; s < table.shards.size(); ++s) {
      if (table.shards[s].rank >= w) {
        return shard_plan_error(fmt::format("{} shard {}: rank {} is outside the world of {} ranks",
                                            where, s, table.shards[s].rank, w));
      }
    }
    const auto& shards = table.shards;
    auto rows_of = [&](size_t s) { return std::pair{shards[s].row_offset, shards[s].rows}; };
    auto cols_of = [&](size_t s) {
      return std::pair<uint64_t, uint64_t>{shards[s].col_offset, shards[s].cols};
    };
    auto whole = [&](size_t s, bool rows, bool cols) -> Status {
      if (rows && (shards[s].row_offset != 0 || shards[s].rows != table.rows)) {
        return shard_plan_error(
            fmt::format("{} shard {}: expected all {} rows", where, s, table.rows));
      }
      if (cols && (shards[s].col_offset != 0 || shards[s].cols != table.dim)) {
        return shard_plan_error(
            fmt::format("{} shard {}: expected all {} columns", where, s, table.dim));
      }
      return Status::ok();
    };
    // Uniform types: one shard per rank of the world (RW, DP) or of one host (TWRW).
    auto distinct_ranks = [&](size_t expected, bool one_host) -> Status {
      if (shards.size() != expected) {
        return shard_plan_error(fmt::format("{}: {} shards, expected {} ({} sharding)", where,
                                            shards.size(), expected,
                                            sharding_type_name(table.sharding)));
      }
      std::set<uint32_t> seen;
      for (size_t s = 0; s < shards.size(); ++s) {
        if (!seen.insert(shards[s].rank).second) {
          return shard_plan_error(fmt::format("{} shard {}: rank {} already holds a shard of it",
                                              where, s, shards[s].rank));
        }
        if (one_host && shards[s].rank / lw != shards[0].rank / lw) {
          return shard_plan_error(fmt::format(
              "{} shard {}: rank {} is on host {}, shard 0 on host {} ({} stays within a host "
              "of {} ranks)",
              where, s, shards[s].rank, shards[s].rank / lw, shards[0].rank / lw,
              sharding_type_name(table.sharding), lw));
        }
      }
      return Status::ok();
    };
    Status status = Status::ok();
    switch (table.sharding) {
      case ShardingType::kTableWise:
        if (shards.size() != 1) {
          return shard_plan_error(
              fmt::format("{}: {} shards, expected 1 (table-wise)", where, shards.size()));
        }
        status = whole(0, true, true);
        break;
      case ShardingType::kColumnWise:
      case ShardingType::kTableColumnWise:
        for (size_t s = 0; s < shards.size() && status; ++s) status = whole(s, true, false);
        if (status) status = check_tiling(shards.size(), table.dim, cols_of, where, "columns");
        if (status && table.sharding == ShardingType::kTableColumnWise) {
          for (size_t s = 1; s < shards.size(); ++s) {
            if (shards[s].rank / lw != shards[0].rank / lw) {
              return shard_plan_error(fmt::format(
                  "{} shard {}: rank {} is on host {}, shard 0 on host {} (twcw stays within a "
                  "host of {} ranks)",
                  where, s, shards[s].rank, shards[s].rank / lw, shards[0].rank / lw, lw));
            }
          }
        }
        break;
      case ShardingType::kRowWise:
      case ShardingType::kTableRowWise:
        status = distinct_ranks(table.sharding == ShardingType::kRowWise ? w : lw,
                                table.sharding == ShardingType::kTableRowWise);
        for (size_t s = 0; s < shards.size() && status; ++s) status = whole(s, false, true);
        if (status) status = check_tiling(shards.size(), table.rows, rows_of, where, "rows");
        break;
      case ShardingType::kDataParallel:
        status = distinct_ranks(w, false);
        for (size_t s = 0; s < shards.size() && status; ++s) status = whole(s, true, true);
        break;
    }
    if (!status) return status;
  }
  return Status::ok();
}

Expected<DlrmShardPlan> load_dlrm_shard_plan(const std::string& path) {
  Expected<JsonConfig> loaded = JsonConfig::load(path);
  if (!loaded) return loaded.error();
  const JsonConfig& config = *loaded;
  const nlohmann::json& doc = config.doc();
  if (!doc.is_object()) {
    return Error::make(ErrorKind::kConfig, "{}: expected a JSON object (a shard plan), found {}",
                       path, json_excerpt(doc));
  }
  constexpr std::array<const char*, 9> kKeys = {"format",           "version",    "world_size",
                                                "local_world_size", "batch_size", "model",
                                                "planner",          "tables",     "ranks"};
  for (const auto& item : doc.items()) {
    if (std::find(kKeys.begin(), kKeys.end(), item.key()) == kKeys.end()) {
      return config.error(item.key(),
                          "unknown key (expected format, version, world_size, "
                          "local_world_size, batch_size, model, planner, tables, ranks)");
    }
  }
  Expected<std::optional<std::string>> format = config.get_string("format");
  if (!format) return format.error();
  if (format->has_value() && **format != kFormat) {
    return config.error("format",
                        fmt::format("'{}' is not a shard plan (expected '{}')", **format, kFormat));
  }
  DlrmShardPlan plan;
  Expected<std::optional<int64_t>> world = config.get_int("world_size", 1, 1 << 20);
  if (!world) return world.error();
  if (!world->has_value()) return config.error("world_size", "missing (the number of ranks)");
  plan.world_size = static_cast<uint32_t>(**world);
  Expected<std::optional<int64_t>> local = config.get_int("local_world_size", 1, 1 << 20);
  if (!local) return local.error();
  plan.local_world_size = local->has_value() ? static_cast<uint32_t>(**local) : plan.world_size;
  Expected<std::optional<int64_t>> batch = config.get_int("batch_size", 0, 1LL << 32);
  if (!batch) return batch.error();
  plan.batch_size = batch->has_value() ? static_cast<uint32_t>(**batch) : 0;
  for (auto [key, target] :
       {std::pair{"model", &plan.model}, std::pair{"planner", &plan.planner}}) {
    Expected<std::optional<std::string>> text = config.get_string(key);
    if (!text) return text.error();
    if (text->has_value()) *target = **text;
  }
  if (!doc.contains("tables") || !doc.at("tables").is_array()) {
    return config.error("tables", "expected an array of tables");
  }
  const auto& tables = doc.at("tables");
  for (size_t index = 0; index < tables.size(); ++index) {
    const nlohmann::json& item = tables[index];
    std::string where = fmt::format("table {}", index);
    if (!item.is_object()) return config.error("tables", where + ": expected an object");
    PlannedTable table;
    if (item.contains("name") && item.at("name").is_string()) {
      table.name = item.at("name").get<std::string>();
      where += fmt::format(" ('{}')", table.name);
    } else {
      table.name = fmt::format("t{}", index);
    }
    if (Status status = check_keys(
            config, item,
            {"name", "rows", "dim", "pooling", "dtype", "sharding", "kernel", "shards"}, where);
        !status) {
      return status.error();
    }
    Expected<uint64_t> rows = get_uint(config, item, "rows", where, 1ULL << 48);
    if (!rows) return rows.error();
    table.rows = *rows;
    Expected<uint64_t> dim = get_uint(config, item, "dim", where, 1U << 16);
    if (!dim) return dim.error();
    table.dim = static_cast<uint32_t>(*dim);
    Expected<double> pooling = get_double(config, item, "pooling", where, 1.0);
    if (!pooling) return pooling.error();
    table.pooling = *pooling;
    if (item.contains("dtype")) {
      Expected<DType> dtype = item.at("dtype").is_string()
                                  ? parse_dtype(item.at("dtype").get<std::string>())
                                  : Expected<DType>(Error(ErrorKind::kConfig, "not a string"));
      if (!dtype) return config.error("tables", where + ": dtype: " + dtype.error().message());
      table.dtype = *dtype;
    }
    if (!item.contains("sharding") || !item.at("sharding").is_string()) {
      return config.error("tables", where + ": missing 'sharding' (tw, rw, cw, twrw, twcw, dp)");
    }
    Expected<ShardingType> type = parse_sharding_type(item.at("sharding").get<std::string>());
    if (!type) return config.error("tables", where + ": " + type.error().message());
    table.sharding = *type;
    if (item.contains("kernel")) {
      if (!item.at("kernel").is_string()) {
        return config.error("tables", where + ": 'kernel' expected a string");
      }
      table.kernel = item.at("kernel").get<std::string>();
    }
    if (!item.contains("shards") || !item.at("shards").is_array()) {
      return config.error("tables", where + ": missing 'shards' (an array)");
    }
    const auto& shards = item.at("shards");
    for (size_t s = 0; s < shards.size(); ++s) {
      const nlohmann::json& entry = shards[s];
      const std::string shard_where = fmt::format("{} shard {}", where, s);
      if (!entry.is_object()) return config.error("tables", shard_where + ": expected an object");
      if (Status status = check_keys(config, entry,
                                     {"rank", "rows", "cols", "fwd_compute", "fwd_comms",
                                      "bwd_compute", "bwd_comms", "hbm", "ddr"},
                                     shard_where);
          !status) {
        return status.error();
      }
      PlannedShard shard;
      Expected<uint64_t> rank = get_uint(config, entry, "rank", shard_where, 1U << 20);
      if (!rank) return rank.error();
      shard.rank = static_cast<uint32_t>(*rank);
      Expected<std::pair<uint64_t, uint64_t>> shard_rows =
          get_range(config, entry, "rows", shard_where);
      if (!shard_rows) return shard_rows.error();
      Expected<std::pair<uint64_t, uint64_t>> shard_cols =
          get_range(config, entry, "cols", shard_where);
      if (!shard_cols) return shard_cols.error();
      if (shard_cols->first > table.dim || shard_cols->second > table.dim) {
        return config.error("tables", shard_where + ": 'cols' outside the table's dimension");
      }
      shard.row_offset = shard_rows->first;
      shard.rows = shard_rows->second;
      shard.col_offset = static_cast<uint32_t>(shard_cols->first);
      shard.cols = static_cast<uint32_t>(shard_cols->second);
      for (auto [key, target] :
           {std::pair{"fwd_compute", &shard.fwd_compute}, std::pair{"fwd_comms", &shard.fwd_comms},
            std::pair{"bwd_compute", &shard.bwd_compute},
            std::pair{"bwd_comms", &shard.bwd_comms}}) {
        Expected<double> value = get_double(config, entry, key, shard_where, -1);
        if (!value) return value.error();
        *target = *value;
      }
      for (auto [key, target] :
           {std::pair{"hbm", &shard.hbm_bytes}, std::pair{"ddr", &shard.ddr_bytes}}) {
        if (!entry.contains(key)) continue;
        Expected<uint64_t> value = get_uint(config, entry, key, shard_where, 1ULL << 60);
        if (!value) return value.error();
        *target = *value;
      }
      table.shards.push_back(shard);
    }
    plan.tables.push_back(std::move(table));
  }
  if (doc.contains("ranks")) {
    if (!doc.at("ranks").is_array()) return config.error("ranks", "expected an array");
    for (const nlohmann::json& entry : doc.at("ranks")) {
      PlannedRank rank;
      if (!entry.is_object()) return config.error("ranks", "expected objects");
      for (auto [key, target] :
           {std::pair{"fwd_compute", &rank.fwd_compute}, std::pair{"fwd_comms", &rank.fwd_comms},
            std::pair{"bwd_compute", &rank.bwd_compute}, std::pair{"bwd_comms", &rank.bwd_comms}}) {
        if (entry.contains(key) && entry.at(key).is_number()) *target = entry.at(key).get<double>();
      }
      for (auto [key, target] :
           {std::pair{"hbm", &rank.hbm_bytes}, std::pair{"ddr", &rank.ddr_bytes}}) {
        if (entry.contains(key) && entry.at(key).is_number_unsigned()) {
          *target = entry.at(key).get<uint64_t>();
        }
      }
      plan.ranks.push_back(rank);
    }
  }
  if (Status status = validate_dlrm_shard_plan(plan); !status) {
    return Error::make(ErrorKind::kConfig, "{}: {}", path, status.error().message());
  }
  return plan;
}

std::string dlrm_shard_plan_json(const DlrmShardPlan& plan) {
  std::string out;
  out += fmt::format("{{\n  \"format\": \"{}\",\n  \"version\": 1,\n", kFormat);
  out += fmt::format("  \"world_size\": {},\n  \"local_world_size\": {},\n  \"batch_size\": {},\n",
                     plan.world_size, plan.local_world_size, plan.batch_size);
  out += "  \"model\": ";
  append_json_string(out, plan.model);
  out += ",\n  \"planner\": ";
  append_json_string(out, plan.planner);
  out += ",\n  \"tables\": [";
  for (size_t index = 0; index < plan.tables.size(); ++index) {
    const PlannedTable& table = plan.tables[index];
    out += index == 0 ? "\n    {\"name\": " : ",\n    {\"name\": ";
    append_json_string(out, table.name);
    out += fmt::format(", \"rows\": {}, \"dim\": {}, \"pooling\": ", table.rows, table.dim);
    append_number(out, table.pooling);
    out += fmt::format(", \"dtype\": \"{}\", \"sharding\": \"{}\", \"kernel\": ",
                       dtype_name(table.dtype), sharding_type_name(table.sharding));
    append_json_string(out, table.kernel);
    out += ", \"shards\": [";
    for (size_t s = 0; s < table.shards.size(); ++s) {
      const PlannedShard& shard = table.shards[s];
      out += fmt::format("{}\n      {{\"rank\": {}, \"rows\": [{}, {}], \"cols\": [{}, {}]",
                         s == 0 ? "" : ",", shard.rank, shard.row_offset, shard.rows,
                         shard.col_offset, shard.cols);
      if (shard.has_estimate()) {
        out += fmt::format(
            ", \"fwd_compute\": {}, \"fwd_comms\": {}, \"bwd_compute\": {}, "
            "\"bwd_comms\": {}",
            shard.fwd_compute, std::max(shard.fwd_comms, 0.0), shard.bwd_compute,
            std::max(shard.bwd_comms, 0.0));
      }
      out += fmt::format(", \"hbm\": {}, \"ddr\": {}}}", shard.hbm_bytes, shard.ddr_bytes);
    }
    out += "]}";
  }
  out += "\n  ]";
  if (!plan.ranks.empty()) {
    out += ",\n  \"ranks\": [";
    for (size_t rank = 0; rank < plan.ranks.size(); ++rank) {
      const PlannedRank& r = plan.ranks[rank];
      out += fmt::format(
          "{}\n    {{\"rank\": {}, \"fwd_compute\": {}, \"fwd_comms\": {}, "
          "\"bwd_compute\": {}, \"bwd_comms\": {}, \"hbm\": {}, \"ddr\": {}}}",
          rank == 0 ? "" : ",", rank, r.fwd_compute, r.fwd_comms, r.bwd_compute, r.bwd_comms,
          r.hbm_bytes, r.ddr_bytes);
    }
    out += "\n  ]";
  }
  out += "\n}\n";
  return out;
}

Status write_dlrm_shard_plan(const DlrmShardPlan& plan, const std::string& path) {
  return write_text_file(path, dlrm_shard_plan_json(plan));
}

}  // namespace orrery::gen
