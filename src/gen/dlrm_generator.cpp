#include "gen/dlrm_generator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "core/checked.h"
#include "core/json_config.h"
#include "gen/common.h"

namespace orrery::gen {

namespace {

using ChakraProtoMsg::ALL_GATHER;
using ChakraProtoMsg::ALL_REDUCE;
using ChakraProtoMsg::ALL_TO_ALL;
using ChakraProtoMsg::REDUCE_SCATTER;

constexpr uint32_t kAllRanks = 1;  // the one communicator group: every rank

Error model_error(std::string message) {
  return Error(ErrorKind::kInvalidArgument, std::move(message));
}

std::vector<EmbeddingTable> tables_of(std::initializer_list<uint64_t> rows) {
  std::vector<EmbeddingTable> tables;
  for (uint64_t count : rows) tables.push_back({count, 1});
  return tables;
}

std::vector<DlrmModel> make_presets() {
  std::vector<DlrmModel> presets;
  // MLPerf Training's DLRM (v0.7-v2.1): Criteo 1TB click logs, tables capped at 40 M rows,
  // one-hot features (pooling 1), the DLRM repository's --max-ind-range=40000000 configuration.
  DlrmModel mlperf;
  mlperf.name = "dlrm-mlperf";
  mlperf.dense_features = 13;
  mlperf.bottom_mlp = {512, 256, 128};
  mlperf.top_mlp = {1024, 1024, 512, 256, 1};
  mlperf.dim = 128;
  mlperf.tables = tables_of({39884406, 39043,    17289,    7420,     20263,  3,     7120, 1543, 63,
                             38532951, 2953546,  403346,   10,       2208,   11938, 155,  4,    976,
                             14,       39979771, 25641295, 39664984, 585935, 12972, 108,  36});
  presets.push_back(mlperf);
  // The DLRM repository's Criteo Kaggle (Display Advertising Challenge) configuration.
  DlrmModel kaggle;
  kaggle.name = "dlrm-kaggle";
  kaggle.dense_features = 13;
  kaggle.bottom_mlp = {512, 256, 64, 16};
  kaggle.top_mlp = {512, 256, 1};
  kaggle.dim = 16;
  kaggle.tables = tables_of({1396,  550,  1761917, 507795, 290, 21,     11948,   608,  3,
                             58176, 5237, 1497287, 3127,   26,  12153,  1068715, 10,   4836,
                             2085,  4,    1312273, 17,     15,  110946, 91,      72655});
  presets.push_back(kaggle);
  return presets;
}

std::string preset_names() {
  std::string names;
  for (const DlrmModel& model : dlrm_presets())
    names += fmt::format("{}{}", names.empty() ? "" : ", ", model.name);
  return names;
}

// A JSON array of positive integers (or, when `scalar_ok`, one integer) under `key`.
Expected<std::vector<uint64_t>> get_int_list(const JsonConfig& config, const char* key,
                                             bool scalar_ok) {
  const nlohmann::json& value = config.doc().at(key);
  std::vector<uint64_t> out;
  auto take = [&](const nlohmann::json& item) -> Status {
    if (!item.is_number_integer() || item.get<int64_t>() < 1) {
      return config.error(key,
                          fmt::format("expected positive integers, found {}", json_excerpt(item)));
    }
    out.push_back(item.get<uint64_t>());
    return Status::ok();
  };
  if (value.is_array() && !value.empty()) {
    for (const nlohmann::json& item : value) {
      if (Status status = take(item); !status) return status.error();
    }
    return out;
  }
  if (scalar_ok && value.is_number()) {
    if (Status status = take(value); !status) return status.error();
    return out;
  }
  return config.error(key,
                      fmt::format("expected {}a non-empty array of positive integers, found {}",
                                  scalar_ok ? "an integer or " : "", json_excerpt(value)));
}

constexpr std::array<const char*, 10> kDlrmKeys = {
    "name", "base",   "dense_features", "bottom_mlp", "top_mlp",
    "dim",  "tables", "rows",           "pooling",    "dtype"};

uint32_t narrow(uint64_t value) { return static_cast<uint32_t>(value); }

// One MLP layer of `samples` samples: matrix product (samples x in by in x out; the backward
// products have their own shapes, as gen llm's), bias and activation.
GemmShape mlp_shape(uint64_t samples, uint64_t in, uint64_t out) { return {samples, out, in, 1}; }
OpCost mlp_forward(uint64_t samples, uint64_t in, uint64_t out, uint64_t e) {
  return {2 * samples * in * out + 2 * samples * out,
          (samples * in + in * out + out + samples * out) * e, mlp_shape(samples, in, out)};
}
OpCost mlp_dgrad(uint64_t samples, uint64_t in, uint64_t out, uint64_t e) {
  return {2 * samples * in * out + samples * out, (samples * out + in * out + samples * in) * e,
          mlp_shape(samples, in, out).dgrad()};
}
OpCost mlp_wgrad(uint64_t samples, uint64_t in, uint64_t out, uint64_t e) {
  return {2 * samples * in * out + samples * out,
          (samples * in + samples * out + in * out + out) * e, mlp_shape(samples, in, out).wgrad()};
}
// SGD: w -= lr g, two operations per parameter; reads weight and gradient, writes the weight.
OpCost sgd_cost(uint64_t params, uint64_t e) { return {2 * params, 3 * params * e}; }

struct MlpLayer {
  std::string name;
  uint64_t in = 0;
  uint64_t out = 0;
  uint64_t params() const { return in * out + out; }
};

std::vector<MlpLayer> mlp_layers(const DlrmModel& model) {
  std::vector<MlpLayer> layers;
  uint64_t in = model.dense_features;
  for (size_t index = 0; index < model.bottom_mlp.size(); ++index) {
    layers.push_back({fmt::format("bottom{}", index), in, model.bottom_mlp[index]});
    in = model.bottom_mlp[index];
  }
  in = model.interaction_width();
  for (size_t index = 0; index < model.top_mlp.size(); ++index) {
    layers.push_back({fmt::format("top{}", index), in, model.top_mlp[index]});
    in = model.top_mlp[index];
  }
  return layers;
}

}  // namespace

uint64_t DlrmModel::interaction_width() const {
  const uint64_t vectors = tables.size() + 1;
  return dim + vectors * (vectors - 1) / 2;
}

uint64_t DlrmModel::dense_parameters() const {
  uint64_t params = 0;
  for (const MlpLayer& layer : mlp_layers(*this)) params += layer.params();
  return params;
}

uint64_t DlrmModel::embedding_parameters() const {
  uint64_t rows = 0;
  for (const EmbeddingTable& table : tables) rows += table.rows;
  return rows * dim;
}

uint64_t DlrmModel::lookups_per_sample() const {
  uint64_t lookups = 0;
  for (const EmbeddingTable& table : tables) lookups += table.pooling;
  return lookups;
}

Status validate_dlrm_model(const DlrmModel& model) {
  if (model.dense_features == 0) return model_error("dense_features must be at least 1");
  if (model.bottom_mlp.empty()) return model_error("bottom_mlp needs at least one layer");
  if (model.top_mlp.empty()) return model_error("top_mlp needs at least one layer");
  for (const auto* mlp : {&model.bottom_mlp, &model.top_mlp}) {
    for (uint32_t width : *mlp) {
      if (width == 0) return model_error("an MLP layer has width 0");
    }
  }
  if (model.dim == 0) return model_error("dim (the embedding dimension) must be at least 1");
  if (model.bottom_mlp.back() != model.dim) {
    return model_error(fmt::format(
        "bottom_mlp ends in {} but dim is {} (the dot interaction needs the bottom MLP's output "
        "to be an embedding-sized vector)",
        model.bottom_mlp.back(), model.dim));
  }
  if (model.tables.empty()) return model_error("a DLRM needs at least one embedding table");
  if (model.tables.size() > (1U << 16)) {
    return model_error(fmt::format("{} tables: expected at most 65,536", model.tables.size()));
  }
  for (size_t index = 0; index < model.tables.size(); ++index) {
    if (model.tables[index].rows == 0)
      return model_error(fmt::format("table {} has 0 rows", index));
    if (model.tables[index].pooling == 0) {
      return model_error(fmt::format("table {} has pooling factor 0", index));
    }
  }
  return Status::ok();
}

const std::vector<DlrmModel>& dlrm_presets() {
  static const std::vector<DlrmModel> presets = make_presets();
  return presets;
}

Expected<DlrmModel> load_dlrm_file(const std::string& path) {
  Expected<JsonConfig> config = JsonConfig::load(path);
  if (!config) return config.error();
  const nlohmann::json& doc = config->doc();
  if (!doc.is_object()) {
    return Error::make(ErrorKind::kConfig, "{}: expected a JSON object of DLRM fields, found {}",
                       path, json_excerpt(doc));
  }
  for (const auto& [key, value] : doc.items()) {
    if (std::find(kDlrmKeys.begin(), kDlrmKeys.end(), key) == kDlrmKeys.end()) {
      std::string keys;
      for (const char* name : kDlrmKeys)
        keys += fmt::format("{}{}", keys.empty() ? "" : ", ", name);
      return config->error(key, fmt::format("unknown DLRM field (expected one of {})", keys));
    }
  }
  DlrmModel model;
  model.name = std::filesystem::path(path).stem().string();
  Expected<std::optional<std::string>> base = config->get_string("base");
  if (!base) return base.error();
  if (base->has_value()) {
    const auto& presets = dlrm_presets();
    auto found = std::find_if(presets.begin(), presets.end(),
                              [&](const DlrmModel& preset) { return preset.name == **base; });
    if (found == presets.end()) {
      return config->error(
          "base", fmt::format("unknown preset '{}' (expected {})", **base, preset_names()));
    }
    const std::string name = model.name;
    model = *found;
    model.name = name;
  }
  Expected<std::optional<std::string>> name = config->get_string("name");
  if (!name) return name.error();
  if (name->has_value()) model.name = **name;
  constexpr int64_t kMax = std::numeric_limits<uint32_t>::max();
  Expected<std::optional<int64_t>> dense = config->get_int("dense_features", 1, kMax);
  if (!dense) return dense.error();
  if (dense->has_value()) model.dense_features = narrow(static_cast<uint64_t>(**dense));
  Expected<std::optional<int64_t>> dim = config->get_int("dim", 1, kMax);
  if (!dim) return dim.error();
  for (const char* key : {"bottom_mlp", "top_mlp"}) {
    if (!doc.contains(key)) continue;
    Expected<std::vector<uint64_t>> widths = get_int_list(*config, key, false);
    if (!widths) return widths.error();
    std::vector<uint32_t>& mlp =
        std::string_view(key) == "bottom_mlp" ? model.bottom_mlp : model.top_mlp;
    mlp.clear();
    for (uint64_t width : *widths) {
      if (width > static_cast<uint64_t>(kMax)) return config->error(key, "a width is too large");
      mlp.push_back(narrow(width));
    }
  }
  if (dim->has_value()) {
    model.dim = narrow(static_cast<uint64_t>(**dim));
    // A new dimension without a new bottom MLP: the bottom MLP's last layer follows it.
    if (!doc.contains("bottom_mlp") && !model.bottom_mlp.empty())
      model.bottom_mlp.back() = model.dim;
  }
  if (doc.contains("tables")) {
    Expected<std::vector<uint64_t>> tables = get_int_list(*config, "tables", true);
    if (!tables) return tables.error();
    model.tables.clear();
    if (doc.at("tables").is_array()) {
      for (uint64_t rows : *tables) model.tables.push_back({rows, 1});
    } else {
      if (!doc.contains("rows")) {
        return config->error("tables", "a table count needs \"rows\" (rows of every table)");
      }
      if (tables->front() > (1U << 16)) return config->error("tables", "expected at most 65,536");
      model.tables.assign(tables->front(), EmbeddingTable{});
    }
  }
  if (doc.contains("rows")) {
    Expected<std::optional<int64_t>> rows =
        config->get_int("rows", 1, std::numeric_limits<int64_t>::max());
    if (!rows) return rows.error();
    for (EmbeddingTable& table : model.tables) table.rows = static_cast<uint64_t>(**rows);
  }
  if (doc.contains("pooling")) {
    Expected<std::vector<uint64_t>> pooling = get_int_list(*config, "pooling", true);
    if (!pooling) return pooling.error();
    if (pooling->size() != 1 && pooling->size() != model.tables.size()) {
      return config->error("pooling", fmt::format("{} pooling factors for {} tables (give one for "
                                                  "all, or one per table)",
                                                  pooling->size(), model.tables.size()));
    }
    for (size_t index = 0; index < model.tables.size(); ++index) {
      const uint64_t value = (*pooling)[pooling->size() == 1 ? 0 : index];
      if (value > (1U << 20)) return config->error("pooling", "a pooling factor is too large");
      model.tables[index].pooling = narrow(value);
    }
  }
  Expected<std::optional<std::string>> dtype = config->get_string("dtype");
  if (!dtype) return dtype.error();
  if (dtype->has_value()) {
    Expected<DType> parsed = parse_dtype(**dtype);
    if (!parsed) return config->error("dtype", parsed.error().message());
    model.dtype = *parsed;
  }
  if (Status status = validate_dlrm_model(model); !status) {
    return Error::make(ErrorKind::kConfig, "{}: {}", path, status.error().message());
  }
  return model;
}

Expected<DlrmModel> resolve_dlrm_model(std::string_view name_or_path) {
  for (const DlrmModel& preset : dlrm_presets()) {
    if (preset.name == name_or_path) return preset;
  }
  const std::string path(name_or_path);
  std::error_code ec;
  if (std::filesystem::exists(path, ec) || name_or_path.ends_with(".json")) {
    return load_dlrm_file(path);
  }
  return Error::make(ErrorKind::kInvalidArgument,
                     "unknown model '{}' (expected a preset: {}; or a JSON model file)",
                     name_or_path, preset_names());
}

Expected<Sharding> parse_sharding(std::string_view name) {
  if (name == "table" || name == "table-wise" || name == "tw") return Sharding::kTable;
  if (name == "row" || name == "row-wise" || name == "rw") return Sharding::kRow;
  if (name == "column" || name == "column-wise" || name == "cw") return Sharding::kColumn;
  return Error::make(ErrorKind::kInvalidArgument,
                     "unknown sharding '{}' (expected table, row or column)", name);
}

std::string_view sharding_name(Sharding sharding) {
  switch (sharding) {
    case Sharding::kTable:
      return "table-wise";
    case Sharding::kRow:
      return "row-wise";
    case Sharding::kColumn:
      return "column-wise";
  }
  return "?";
}

Status validate_dlrm_plan(const DlrmModel& model, const DlrmPlan& plan) {
  if (Status status = validate_dlrm_model(model); !status) return status;
  if (plan.ranks == 0 || plan.ranks > kMaxRanks) {
    return model_error(fmt::format("--ranks {}: expected 1 to {}", plan.ranks, kMaxRanks));
  }
  if (plan.global_batch == 0) return model_error("missing --global-batch (samples per iteration)");
  if (plan.global_batch % plan.ranks != 0) {
    return model_error(fmt::format(
        "--global-batch {} is not a multiple of --ranks {} (every rank runs the MLPs on B / N "
        "samples)",
        plan.global_batch, plan.ranks));
  }
  if (plan.placement) {
    if (plan.placement->world_size != plan.ranks) {
      return model_error(fmt::format("--ranks {} differs from the plan's world size {}", plan.ranks,
                                     plan.placement->world_size));
    }
    if (plan.placement->tables.size() != model.tables.size()) {
      return model_error(fmt::format("the plan has {} tables, the model {}",
                                     plan.placement->tables.size(), model.tables.size()));
    }
  }
  if (!plan.placement && plan.sharding == Sharding::kColumn && model.dim % plan.ranks != 0) {
    return model_error(fmt::format(
        "--sharding column splits every table into --ranks {} column blocks: it does not divide "
        "the embedding dimension {}",
        plan.ranks, model.dim));
  }
  // The largest sizes (B T P x N indices, B T d element bytes) stay within what a run simulates:
  // 2^50 bytes per collective (core/checked.h), an upper bound computed in doubles (no wrap).
  const double largest = static_cast<double>(plan.global_batch) *
                         static_cast<double>(model.lookups_per_sample() + model.tables.size()) *
                         static_cast<double>(std::max<uint64_t>(model.dim, plan.ranks)) * 8.0;
  if (largest > static_cast<double>(kMaxBytes)) {
    return model_error(fmt::format(
        "--global-batch {}: the largest collective could carry about {} bytes, more than 2^50 "
        "(1 PiB), the largest size orrery simulates",
        plan.global_batch, format_number(largest)));
  }
  return Status::ok();
}

namespace {

uint64_t ceil_u64(double value) { return static_cast<uint64_t>(std::ceil(value)); }

// Lookups and pooled outputs of one planned shard per iteration: TW/CW/TWCW blocks see every
// sample's lookups of their table and write B vectors of their columns; a row block of RW (TWRW)
// sees 1/N (1/Lw) of the lookups and writes partial sums for every sample; a DP replica serves
// its own b samples.
TableShard placed_shard(const DlrmShardPlan& placement, uint32_t table_index,
                        const PlannedShard& shard, uint64_t global_batch) {
  const PlannedTable& table = placement.tables[table_index];
  const double big_b = static_cast<double>(global_batch);
  TableShard out;
  out.table = table_index;
  out.rows = shard.rows;
  out.dim = shard.cols;
  out.outputs = global_batch;
  switch (table.sharding) {
    case ShardingType::kTableWise:
    case ShardingType::kColumnWise:
    case ShardingType::kTableColumnWise:
      out.lookups = ceil_u64(big_b * table.pooling);
      break;
    case ShardingType::kRowWise:
      out.lookups = ceil_u64(big_b * table.pooling / placement.world_size);
      break;
    case ShardingType::kTableRowWise:
      out.lookups = ceil_u64(big_b * table.pooling / placement.local_world_size);
      break;
    case ShardingType::kDataParallel:
      out.outputs = global_batch / placement.world_size;
      out.lookups = ceil_u64(static_cast<double>(out.outputs) * table.pooling);
      break;
  }
  return out;
}

}  // namespace

std::vector<TableShard> table_shards(const DlrmModel& model, const DlrmPlan& plan, uint32_t rank) {
  std::vector<TableShard> shards;
  if (plan.placement) {
    const DlrmShardPlan& placement = *plan.placement;
    for (uint32_t index = 0; index < placement.tables.size(); ++index) {
      for (const PlannedShard& shard : placement.tables[index].shards) {
        if (shard.rank == rank) {
          shards.push_back(placed_shard(placement, index, shard, plan.global_batch));
        }
      }
    }
    return shards;
  }
  const uint64_t n = plan.ranks;
  const uint64_t batch = plan.global_batch;
  for (uint32_t index = 0; index < model.tables.size(); ++index) {
    const EmbeddingTable& table = model.tables[index];
    TableShard shard;
    shard.table = index;
    shard.outputs = batch;
    switch (plan.sharding) {
      case Sharding::kTable:
        if (index % n != rank) continue;
        shard.rows = table.rows;
        shard.dim = model.dim;
        shard.lookups = batch * table.pooling;
        break;
      case Sharding::kRow: {
        // Row blocks of ceil(R / N); the last ranks may hold fewer (or none). Indices are hashed
        // uniformly: each block sees B P / N lookups on average.
        const uint64_t block = ceil_div(table.rows, n);
        const uint64_t first = std::min<uint64_t>(block * rank, table.rows);
        shard.rows = std::min<uint64_t>(block, table.rows - first);
        shard.dim = model.dim;
        shard.lookups = ceil_div(batch * table.pooling, n);
        break;
      }
      case Sharding::kColumn:
        shard.rows = table.rows;
        shard.dim = narrow(model.dim / n);
        shard.lookups = batch * table.pooling;
        break;
    }
    shards.push_back(shard);
  }
  return shards;
}

DlrmComm dlrm_comm(const DlrmModel& model, const DlrmPlan& plan) {
  DlrmComm comm;
  if (plan.ranks == 1) return comm;
  const uint64_t n = plan.ranks;
  const uint64_t e = dtype_bytes(model.dtype);
  const uint64_t b = plan.local_batch();
  const uint64_t big_b = plan.global_batch;
  const uint64_t tables = model.tables.size();
  const uint64_t d = model.dim;
  const uint64_t lookups = model.lookups_per_sample();
  switch (plan.sharding) {
    case Sharding::kTable:
      // Each rank sends its b samples' indices to the owners of the tables, and sends back the
      // pooled vectors of its tables for every sample: B x |tables on the rank| x d. The
      // simulator's all-to-all has one size for all ranks: the largest rank's (ceil(T / N)).
      comm.index_all_to_all = b * lookups * kIndexBytes;
      comm.output_dist = big_b * ceil_div(tables, n) * d * e;
      comm.grad_dist = comm.output_dist;
      break;
    case Sharding::kRow:
      // Indices go to the row block that holds them; every rank computes partial sums for every
      // sample and table, reduce-scattered so that each rank keeps its b samples' sums; backward
      // all-gathers their gradients.
      comm.index_all_to_all = b * lookups * kIndexBytes;
      comm.output_dist = big_b * tables * d * e;
      comm.output_type = REDUCE_SCATTER;
      comm.grad_dist = b * tables * d * e;
      comm.grad_type = ALL_GATHER;
      break;
    case Sharding::kColumn:
      // Every column block needs every index of its table; each returns d / N columns.
      comm.index_all_to_all = b * lookups * kIndexBytes * n;
      comm.output_dist = big_b * tables * (d / n) * e;
      comm.grad_dist = comm.output_dist;
      break;
  }
  for (const MlpLayer& layer : mlp_layers(model)) comm.mlp_all_reduce.push_back(layer.params() * e);
  return comm;
}

DlrmPlacedComm dlrm_placed_comm(const DlrmModel& model, const DlrmPlan& plan, uint32_t rank) {
  (void)model;
  DlrmPlacedComm comm;
  if (!plan.placement) return comm;
  const DlrmShardPlan& placement = *plan.placement;
  const uint32_t n = placement.world_size;
  const uint32_t lw = placement.local_world_size;
  const uint32_t hosts = n / lw;
  const double b = static_cast<double>(plan.local_batch());
  const uint64_t big_b = plan.global_batch;
  // Per sample: lookups and pooled bytes that each rank's TW/CW/TWCW shards serve, that each
  // host's TWRW tables serve, and that the RW tables serve (every rank a block).
  std::vector<double> lookups_on(n, 0);
  std::vector<uint64_t> bytes_on(n, 0);
  std::vector<double> host_lookups(hosts, 0);
  std::vector<uint64_t> host_bytes(hosts, 0);
  double row_lookups = 0;
  uint64_t row_bytes = 0;
  for (const PlannedTable& table : placement.tables) {
    const uint64_t e = dtype_bytes(table.dtype);
    switch (table.sharding) {
      case ShardingType::kTableWise:
      case ShardingType::kColumnWise:
      case ShardingType::kTableColumnWise:
        for (const PlannedShard& shard : table.shards) {
          lookups_on[shard.rank] += table.pooling;
          bytes_on[shard.rank] += shard.cols * e;
        }
        break;
      case ShardingType::kTableRowWise:
        host_lookups[table.shards[0].rank / lw] += table.pooling;
        host_bytes[table.shards[0].rank / lw] += table.dim * e;
        break;
      case ShardingType::kRowWise:
        row_lookups += table.pooling;
        row_bytes += table.dim * e;
        break;
      case ShardingType::kDataParallel:
        comm.dp_all_reduce += table.rows * table.dim * e;
        break;
    }
  }
  const uint32_t host = rank / lw;
  comm.index_to.assign(n, 0);
  comm.index_from.assign(n, 0);
  comm.output_to.assign(n, 0);
  comm.output_from.assign(n, 0);
  // Indices from rank `src` to rank `dst`: its b samples' lookups that dst's shards serve (an
  // even share of a row-wise table's); pooled vectors from `src` to `dst`: dst's b samples of
  // src's TW/CW columns, and, across hosts between ranks of the same local index, of the TWRW
  // sums the host reduce-scatter left on src.
  auto indices = [&](uint32_t dst) {
    return ceil_u64(b * (lookups_on[dst] + host_lookups[dst / lw] / lw + row_lookups / n)) *
           kIndexBytes;
  };
  auto pooled = [&](uint32_t src, uint32_t dst) {
    uint64_t bytes = plan.local_batch() * bytes_on[src];
    if (src / lw != dst / lw && src % lw == dst % lw) {
      bytes += plan.local_batch() * host_bytes[src / lw];
    }
    return bytes;
  };
  for (uint32_t peer = 0; peer < n; ++peer) {
    if (peer == rank) continue;
    comm.index_to[peer] = indices(peer);
    comm.index_from[peer] = indices(rank);
    comm.output_to[peer] = pooled(rank, peer);
    comm.output_from[peer] = pooled(peer, rank);
  }
  if (lw > 1 && host_bytes[host] > 0) {
    comm.host_reduce_scatter = big_b * host_bytes[host];
    comm.host_all_gather = big_b / lw * host_bytes[host];
    comm.host_group = hosts == 1 ? kAllRanks : kAllRanks + 1 + host;
  }
  if (n > 1 && row_bytes > 0) {
    comm.row_reduce_scatter = big_b * row_bytes;
    comm.row_all_gather = plan.local_batch() * row_bytes;
  }
  if (n == 1) comm.dp_all_reduce = 0;
  return comm;
}

std::vector<StageMemory> estimate_dlrm_memory(const DlrmModel& model, const DlrmPlan& plan) {
  const uint64_t e = dtype_bytes(model.dtype);
  const uint64_t b = plan.local_batch();
  const uint64_t dense = model.dense_parameters();
  uint64_t mlp_outputs = model.dense_features;
  for (uint32_t width : model.bottom_mlp) mlp_outputs += width;
  for (uint32_t width : model.top_mlp) mlp_outputs += width;
  const uint64_t vectors = model.tables.size() + 1;
  // What backward needs of the MLPs and the interaction, for the rank's b samples: every layer's
  // input and output, the interaction's input vectors and its output, and the pooled embeddings
  // the rank received.
  const uint64_t local_activations =
      (b * mlp_outputs + b * vectors * model.dim + b * model.interaction_width()) * e;
  std::vector<StageMemory> ranks;
  for (uint32_t rank = 0; rank < plan.ranks; ++rank) {
    StageMemory memory;
    memory.stage = rank;
    uint64_t embedding = 0;
    uint64_t pooled = 0;
    uint64_t indices = 0;
    for (const TableShard& shard : table_shards(model, plan, rank)) {
      embedding += shard.rows * shard.dim;
      pooled += shard.outputs * shard.dim;
      indices += shard.lookups;
    }
    memory.parameters = embedding + dense;
    memory.memory.weights = memory.parameters * e;
    memory.memory.gradients = dense * e;  // embedding gradients are applied row by row, fused
    memory.memory.optimizer = 0;          // SGD keeps no state
    memory.memory.activations = local_activations + pooled * e + indices * kIndexBytes;
    memory.in_flight = 1;
    ranks.push_back(memory);
  }
  return ranks;
}

namespace {

class DlrmBuilder {
 public:
  DlrmBuilder(const DlrmModel& model, const DlrmPlan& plan, uint32_t rank)
      : model_(model), plan_(plan), rank_(rank), e_(dtype_bytes(model.dtype)) {}

  RankProgram build() {
    const DlrmComm comm = dlrm_comm(model_, plan_);
    const bool distributed = plan_.ranks > 1;
    const uint64_t b = plan_.local_batch();
    const std::vector<MlpLayer> layers = mlp_layers(model_);
    const size_t bottom = model_.bottom_mlp.size();
    OpCost lookup;
    OpCost update;
    for (const TableShard& shard : table_shards(model_, plan_, rank_)) {
      // Sum pooling: one addition per element read; reads the rows and indices, writes the
      // pooled vectors.
      lookup.flops += shard.lookups * shard.dim;
      lookup.bytes +=
          (shard.lookups + shard.outputs) * shard.dim * e_ + shard.lookups * kIndexBytes;
      // Fused backward and SGD on the touched rows: scale and subtract every gradient element
      // from its row (read the gradient of the pooled vector, read and write the row).
      update.flops += 2 * shard.lookups * shard.dim;
      update.bytes +=
          (shard.outputs + 2 * shard.lookups) * shard.dim * e_ + shard.lookups * kIndexBytes;
    }
    // A rank without tables (table-wise, T < N) still takes part in the all-to-alls; its lookup
    // and update nodes cost nothing and the executor passes over them.
    // Forward: sparse path.
    ProgRef pooled = kNoNode;
    std::vector<ProgRef> placed_pooled;  // with a placement: every part the interaction waits for
    if (plan_.placement) {
      placed_pooled = placed_forward(lookup);
    } else {
      ProgRef indices = kNoNode;
      if (distributed) {
        indices = program_.collective("emb.index_all_to_all", ALL_TO_ALL, comm.index_all_to_all,
                                      kAllRanks, {});
      }
      const ProgRef looked_up = program_.compute("emb.lookup", lookup, {indices});
      pooled = looked_up;
      if (distributed) {
        pooled = program_.collective(
            comm.output_type == ALL_TO_ALL ? "emb.output_all_to_all" : "emb.output_reduce_scatter",
            comm.output_type, comm.output_dist, kAllRanks, {looked_up});
      }
    }
    // Dense path: bottom MLP.
    ProgRef x = kNoNode;
    for (size_t index = 0; index < bottom; ++index) {
      x = program_.compute(layers[index].name + ".fwd",
                           mlp_forward(b, layers[index].in, layers[index].out, e_), {x});
    }
    const uint64_t vectors = model_.tables.size() + 1;
    const uint64_t width = model_.interaction_width();
    // Dot interaction: Z Z^T of the (T + 1) x d vectors of every sample (the full product, as
    // torch.bmm computes it), the lower triangle gathered and concatenated with the bottom output.
    const OpCost interaction{2 * b * vectors * vectors * model_.dim,
                             (b * vectors * model_.dim + b * width) * e_,
                             GemmShape{vectors, vectors, model_.dim, b}};
    x = program_.compute("interaction.fwd", interaction, {x, pooled});
    program_.depend(x, placed_pooled);
    for (size_t index = bottom; index < layers.size(); ++index) {
      x = program_.compute(layers[index].name + ".fwd",
                           mlp_forward(b, layers[index].in, layers[index].out, e_), {x});
    }
    // Binary cross-entropy on the logit: sigmoid, log and the mean, a few operations per sample.
    const ProgRef loss = program_.compute("loss", {5 * b, 2 * b * e_}, {x});
    ProgRef grad = program_.compute("loss.bwd", {2 * b, 2 * b * e_}, {loss});

    // Backward, top MLP down to the interaction; per layer the weight gradient feeds its
    // all-reduce and SGD step in the background.
    std::vector<ProgRef> steps;
    auto reduce_and_step = [&](size_t index, ProgRef wgrad) {
      ProgRef reduced = wgrad;
      if (distributed) {
        reduced =
            program_.collective(layers[index].name + ".grad_all_reduce", ALL_REDUCE,
                                comm.mlp_all_reduce[index], kAllRanks, {wgrad}, Lane::kBackground);
      }
      steps.push_back(program_.compute(layers[index].name + ".sgd",
                                       sgd_cost(layers[index].params(), e_), {reduced},
                                       Lane::kBackground));
    };
    for (size_t index = layers.size(); index-- > bottom;) {
      const MlpLayer& layer = layers[index];
      const ProgRef dgrad =
          program_.compute(layer.name + ".dgrad", mlp_dgrad(b, layer.in, layer.out, e_), {grad});
      const ProgRef wgrad =
          program_.compute(layer.name + ".wgrad", mlp_wgrad(b, layer.in, layer.out, e_), {grad});
      reduce_and_step(index, wgrad);
      grad = dgrad;
    }
    const ProgRef interaction_grad =
        program_.compute("interaction.bwd",
                         // Autograd of Z Z^T: one product per operand, each of the forward's size.
                         {2 * interaction.flops, (b * width + 2 * b * vectors * model_.dim) * e_,
                          GemmShape{vectors, model_.dim, vectors, 2 * b}},
                         {grad});
    // Sparse backward: the pooled vectors' gradients back to the shards, then the fused update.
    if (plan_.placement) {
      placed_backward(update, interaction_grad);
    } else {
      ProgRef emb_grad = interaction_grad;
      if (distributed) {
        emb_grad = program_.collective(
            comm.grad_type == ALL_TO_ALL ? "emb.grad_all_to_all" : "emb.grad_all_gather",
            comm.grad_type, comm.grad_dist, kAllRanks, {interaction_grad});
      }
      program_.compute("emb.update", update, {emb_grad});
    }
    // Bottom MLP backward; its first layer needs no input gradient (the dense features).
    grad = interaction_grad;
    for (size_t index = bottom; index-- > 0;) {
      const MlpLayer& layer = layers[index];
      const ProgRef wgrad =
          program_.compute(layer.name + ".wgrad", mlp_wgrad(b, layer.in, layer.out, e_), {grad});
      if (index > 0) {
        grad =
            program_.compute(layer.name + ".dgrad", mlp_dgrad(b, layer.in, layer.out, e_), {grad});
      }
      reduce_and_step(index, wgrad);
    }
    if (plan_.placement) order_collectives();
    return std::move(program_);
  }

 private:
  static constexpr int32_t kIndexTag = 1;

  // With a placement, ranks reach their collectives at different times (their shards differ), so
  // a background all-reduce could take one rank's communication slot while a peer holds its own
  // for a host collective the first has yet to issue: a deadlock. Every collective therefore waits
  // (a control dependency) for the one created before it, as collectives on one NCCL stream run in
  // issue order; every rank's collectives are then a subsequence of one global order.
  void order_collectives() {
    ProgRef previous = kNoNode;
    for (ProgRef ref = 0; ref < program_.size(); ++ref) {
      if (program_.node(ref).kind != ProgKind::kCollective) continue;
      if (previous != kNoNode) program_.depend(ref, previous, /*control=*/true);
      previous = ref;
    }
  }
  static constexpr int32_t kOutputTag = 2;
  static constexpr int32_t kGradTag = 3;

  // The planner's estimate of the rank's shards (ms, summed), scaled from the planner's batch to
  // this one (TorchRec's compute is linear in the batch), in whole microseconds.
  uint64_t estimate_us(bool forward) const {
    const DlrmShardPlan& placement = *plan_.placement;
    double total = 0;
    for (const PlannedTable& table : placement.tables) {
      for (const PlannedShard& shard : table.shards) {
        if (shard.rank == rank_) total += forward ? shard.fwd_compute : shard.bwd_compute;
      }
    }
    const double scale = placement.batch_size == 0
                             ? 1.0
                             : static_cast<double>(plan_.local_batch()) / placement.batch_size;
    if (total <= 0) return 0;
    return std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(total * scale * 1000)));
  }

  // Sends to rank + k and receives from rank - k, k = 1 .. N - 1 (a shift per step: every rank
  // sends to a different peer at a time); messages of 0 bytes are not written.
  void exchange(const char* name, int32_t tag, const std::vector<uint64_t>& to,
                const std::vector<uint64_t>& from, const std::vector<ProgRef>& after,
                std::vector<ProgRef>& received) {
    const uint32_t n = plan_.ranks;
    for (uint32_t k = 1; k < n; ++k) {
      const uint32_t src = (rank_ + n - k) % n;
      if (from[src] > 0) {
        received.push_back(program_.recv(fmt::format("{}_recv", name), src, tag, from[src]));
      }
    }
    for (uint32_t k = 1; k < n; ++k) {
      const uint32_t dst = (rank_ + k) % n;
      if (to[dst] == 0) continue;
      const ProgRef sent = program_.send(fmt::format("{}_send", name), dst, tag, to[dst], {});
      program_.depend(sent, after);
    }
  }

  // Forward with a placement: indices to the shards (point to point: sizes differ by peer), the
  // lookup, the TWRW reduce-scatter within the host and the RW one over every rank, then the
  // pooled vectors to the ranks whose samples they are. Returns what the interaction waits for.
  std::vector<ProgRef> placed_forward(const OpCost& geometric) {
    const DlrmPlacedComm comm = dlrm_placed_comm(model_, plan_, rank_);
    std::vector<ProgRef> indices;
    exchange("emb.index", kIndexTag, comm.index_to, comm.index_from, {}, indices);
    const ProgRef lookup =
        plan_.placement->has_estimates()
            ? program_.timed("emb.lookup", estimate_us(true), geometric.bytes, {})
            : program_.compute("emb.lookup", geometric, {});
    program_.depend(lookup, indices);
    std::vector<ProgRef> ready{lookup};
    if (comm.host_reduce_scatter > 0) {
      ready.push_back(program_.collective("emb.host_reduce_scatter", REDUCE_SCATTER,
                                          comm.host_reduce_scatter, comm.host_group, {lookup}));
    }
    std::vector<ProgRef> pooled = ready;
    if (comm.row_reduce_scatter > 0) {
      pooled.push_back(program_.collective("emb.row_reduce_scatter", REDUCE_SCATTER,
                                           comm.row_reduce_scatter, kAllRanks, {lookup}));
    }
    exchange("emb.output", kOutputTag, comm.output_to, comm.output_from, ready, pooled);
    return pooled;
  }

  // Backward with a placement: the gradients back to the shards' ranks, the RW all-gather over
  // every rank and the TWRW one within the host, the fused update, and the DP tables' gradient
  // all-reduce with its SGD step in the background.
  void placed_backward(const OpCost& geometric, ProgRef interaction_grad) {
    const DlrmPlacedComm comm = dlrm_placed_comm(model_, plan_, rank_);
    std::vector<ProgRef> grads;
    exchange("emb.grad", kGradTag, comm.output_from, comm.output_to, {interaction_grad}, grads);
    std::vector<ProgRef> ready = grads;
    ready.push_back(interaction_grad);
    if (comm.row_all_gather > 0) {
      ready.push_back(program_.collective("emb.row_all_gather", ALL_GATHER, comm.row_all_gather,
                                          kAllRanks, {interaction_grad}));
    }
    if (comm.host_all_gather > 0) {
      const ProgRef gathered = program_.collective("emb.host_all_gather", ALL_GATHER,
                                                   comm.host_all_gather, comm.host_group, {});
      program_.depend(gathered, grads);
      program_.depend(gathered, interaction_grad);
      ready.push_back(gathered);
    }
    const ProgRef update =
        plan_.placement->has_estimates()
            ? program_.timed("emb.update", estimate_us(false), geometric.bytes, {})
            : program_.compute("emb.update", geometric, {});
    program_.depend(update, ready);
    if (comm.dp_all_reduce > 0) {
      const ProgRef reduced =
          program_.collective("emb.dp_grad_all_reduce", ALL_REDUCE, comm.dp_all_reduce, kAllRanks,
                              {update}, Lane::kBackground);
      program_.compute("emb.dp_sgd", sgd_cost(comm.dp_all_reduce / e_, e_), {reduced},
                       Lane::kBackground);
    }
  }

  const DlrmModel& model_;
  const DlrmPlan& plan_;
  uint32_t rank_;
  uint64_t e_;
  RankProgram program_;
};

}  // namespace

Expected<DlrmGenerator> DlrmGenerator::create(DlrmModel model, DlrmPlan plan) {
  if (plan.placement) {
    // The plan's tables replace the model's. Tables of another width than the model's dimension
    // are taken as projected to it before the interaction (the projection is not modelled).
    if (Status status = validate_dlrm_shard_plan(*plan.placement); !status) return status.error();
    model.tables.clear();
    for (const PlannedTable& table : plan.placement->tables) {
      model.tables.push_back(
          {table.rows, static_cast<uint32_t>(std::max<int64_t>(1, std::llround(table.pooling)))});
    }
  }
  if (Status status = validate_dlrm_plan(model, plan); !status) return status.error();
  return DlrmGenerator(std::move(model), plan);
}

RankProgram DlrmGenerator::build(uint32_t rank) const {
  return DlrmBuilder(model_, plan_, rank).build();
}

namespace {

// One group of every rank (the embedding all-to-alls and the dense all-reduces span all).
std::vector<std::vector<uint32_t>> group_list(const DlrmGenerator& generator) {
  std::vector<std::vector<uint32_t>> groups;
  if (generator.ranks() > 1) {
    std::vector<uint32_t> all(generator.ranks());
    for (uint32_t rank = 0; rank < generator.ranks(); ++rank) all[rank] = rank;
    groups.push_back(std::move(all));
  }
  // With a placement across hosts: one group per host (groups 2 .., the TWRW collectives).
  const DlrmShardPlan* placement = generator.plan().placement.get();
  if (placement != nullptr && placement->local_world_size > 1 &&
      placement->local_world_size < placement->world_size) {
    bool twrw = false;
    for (const PlannedTable& table : placement->tables) {
      twrw = twrw || table.sharding == ShardingType::kTableRowWise;
    }
    const uint32_t lw = placement->local_world_size;
    for (uint32_t host = 0; twrw && host < placement->world_size / lw; ++host) {
      std::vector<uint32_t> members(lw);
      for (uint32_t local = 0; local < lw; ++local) members[local] = host * lw + local;
      groups.push_back(std::move(members));
    }
  }
  return groups;
}

}  // namespace

Expected<GeneratedTraces> write_dlrm_traces(const DlrmGenerator& generator,
                                            const std::string& prefix,
                                            const RankFileOptions& options) {
  return write_trace_set(
      generator.ranks(), prefix, options,
      [&](uint32_t rank) -> Expected<RankProgram> { return generator.build(rank); },
      group_list(generator));
}

Expected<BuiltTraces> build_dlrm_traces(const DlrmGenerator& generator, const std::string& name,
                                        const RankFileOptions& options) {
  return build_trace_set(
      generator.ranks(), name, options,
      [&](uint32_t rank) -> Expected<RankProgram> { return generator.build(rank); },
      group_list(generator));
}

}  // namespace orrery::gen
