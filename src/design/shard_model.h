// design/shard_model.h: what one embedding table costs under each sharding, as TorchRec's planner
// estimates it.
//
// TorchRec (pytorch/torchrec, torchrec/distributed/planner/shard_estimators.py) rates a sharding
// option of a table by per-shard forward and backward compute and communication times (ms) and
// per-shard HBM and DDR storage (bytes). This component is that model, written from its published
// formulas (docs/models/sharding.md states every term): table-wise (TW), row-wise (RW), column-wise
// (CW), table-row-wise (TWRW: row-wise within one host), table-column-wise (TWCW) and data-parallel
// (DP) shards; HBM-resident ("fused"), UVM and UVM-caching kernels (DP uses TorchRec's "dense"
// kernel). The test vectors of TorchRec's own tests come out to 1e-9 relative
// (tests/design/shard_model_test.cpp). Pure functions of plain data; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "gen/dlrm_shard_plan.h"

namespace orrery::design {

using gen::ShardingType;

enum class ShardKernel : uint8_t { kFused, kUvm, kUvmCaching, kDense };
// "fused" (also "hbm"), "uvm", "uvm-caching" (also "uvm_caching"), "dense".
Expected<ShardKernel> parse_shard_kernel(std::string_view name);

// Whether a sharding type splits a table into blocks of one width (row-wise, data-parallel): its
// blocks are interchangeable, which the cost model and the planner both rely on.
bool uniform_type(ShardingType type);
std::string_view shard_kernel_name(ShardKernel kernel);

enum class ShardOptimizer : uint8_t { kNone, kSgd, kAdam, kAdagrad, kRowWiseAdagrad };
// "none", "sgd", "adam", "adagrad", "rowwise-adagrad".
Expected<ShardOptimizer> parse_shard_optimizer(std::string_view name);
std::string_view shard_optimizer_name(ShardOptimizer optimizer);

// TorchRec's constants: bandwidths are in bytes per ms, written as TorchRec writes them
// (GB/s x 1024^3 / 1000).
inline constexpr double kGiBpsToBytesPerMs = 1024.0 * 1024.0 * 1024.0 / 1000.0;

// The devices and the network, and the planner's batch. Defaults are TorchRec's.
struct ShardCluster {
  uint32_t world_size = 2;        // W: ranks
  uint32_t local_world_size = 2;  // Lw: ranks per host (W is a multiple of it)
  uint64_t hbm_bytes = 32ULL << 30;
  uint64_t ddr_bytes = 128ULL << 30;
  double hbm_bw = 897 * kGiBpsToBytesPerMs;        // device memory
  double ddr_bw = 51 * kGiBpsToBytesPerMs;         // host memory
  double hbm_to_ddr_bw = 32 * kGiBpsToBytesPerMs;  // PCIe between them (UVM)
  double intra_host_bw = 600 * kGiBpsToBytesPerMs;
  double inter_host_bw = 12.5 * kGiBpsToBytesPerMs;
  uint32_t batch_size = 512;  // samples per rank
  double cache_load_factor = 0.2;
  double bwd_compute_multiplier = 2.0;
  double reserved_fraction = 0.15;  // of HBM and DDR, held back as a margin
  ShardOptimizer optimizer = ShardOptimizer::kNone;

  uint32_t hosts() const { return world_size / local_world_size; }
};

// Errors name the flag ("--world-size 12 is not a multiple of --local-world-size 8").
Status validate_shard_cluster(const ShardCluster& cluster);

// One embedding table as the planner sees it.
struct ShardTable {
  std::string name;
  uint64_t rows = 0;
  uint32_t dim = 0;
  double pooling = 1.0;  // average lookups per sample
  gen::DType dtype = gen::DType::kFp32;
};
// Errors name the table ("table 'ads': pooling factor 0 (expected > 0)").
Status validate_shard_table(const ShardTable& table);

// Forward and backward compute and communication of one shard, in ms.
struct ShardPerf {
  double fwd_compute = 0;
  double fwd_comms = 0;
  double bwd_compute = 0;
  double bwd_comms = 0;

  double total() const { return fwd_compute + fwd_comms + bwd_compute + bwd_comms; }
  ShardPerf& operator+=(const ShardPerf& other);
};

struct ShardStorage {
  uint64_t hbm = 0;
  uint64_t ddr = 0;

  ShardStorage& operator+=(const ShardStorage& other);
  bool fits_in(const ShardStorage& capacity) const {
    return hbm <= capacity.hbm && ddr <= capacity.ddr;
  }
};

// The block of a table one shard holds.
struct ShardBlock {
  uint64_t row_offset = 0;
  uint64_t rows = 0;
  uint32_t col_offset = 0;
  uint32_t cols = 0;
};

// The blocks of `table` under `type` (TorchRec's shard sizes): TW one block; RW W row blocks of
// ceil(R / W) (the last smaller, later ones empty); TWRW the same over Lw; CW and TWCW column
// blocks of the first multiple of 4 at or above 128 that divides the dimension (else the whole
// dimension); DP W copies of the table.
std::vector<ShardBlock> shard_blocks(const ShardTable& table, ShardingType type,
                                     const ShardCluster& cluster);

// The device bandwidth of a kernel (bytes per ms): fused = HBM, dense = HBM / 2, UVM =
// HBM-to-DDR / 10, UVM caching = (c HBM + (1 - c) HBM-to-DDR) / 10.
double kernel_bandwidth(const ShardCluster& cluster, ShardKernel kernel);

// The perf of one shard of `cols` columns (and, for DP, the whole table's gradient).
ShardPerf shard_perf(const ShardTable& table, ShardingType type, ShardKernel kernel,
                     const ShardCluster& cluster, const ShardBlock& block);

// The storage of every shard (TorchRec's calculate_shard_storages, no pipelining): the table's
// bytes in HBM (fused, dense), in DDR (UVM) or in DDR with c of it cached in HBM plus the cache's
// bookkeeping (UVM caching), split by shard, plus optimizer state, plus the shard's input and
// output buffers in HBM.
std::vector<ShardStorage> shard_storages(const ShardTable& table, ShardingType type,
                                         ShardKernel kernel, const ShardCluster& cluster,
                                         const std::vector<ShardBlock>& blocks);

// TorchRec's _calculate_storage_specific_sizes: a table's `storage` bytes split over the shards
// (ceil(storage x shard elements / table elements); DP: the whole), times (1 + the optimizer's
// multiplier: SGD/none 0, Adam 2, row-wise Adagrad 1 / cols, others 1), plus, when `cache_load`
// is set, ceil(shard rows x (4 + 16 c)) of cache state. Exposed for its test vectors.
std::vector<uint64_t> storage_specific_sizes(uint64_t storage, uint64_t table_rows,
                                             uint32_t table_cols,
                                             const std::vector<ShardBlock>& blocks,
                                             ShardingType type, ShardOptimizer optimizer,
                                             double cache_load = -1);

// What each device offers the tables: (1 - reserved) of HBM and DDR, less the dense parameters
// (x6: weights, optimizer state and DDP buffers, as TorchRec's heuristic reservation) and the
// input batch's indices (x20: two pipelined batches of ten copies) in HBM. `dense_parameter_bytes`
// is the MLPs' bytes (0 when unknown).
Expected<ShardStorage> device_capacity(const ShardCluster& cluster,
                                       const std::vector<ShardTable>& tables,
                                       uint64_t dense_parameter_bytes);

// One way to shard one table: its blocks with their perf and storage. `shards[i]` goes to rank i
// for uniform types (RW, DP) and, for TWRW, to local rank i of the host the planner picks.
struct ShardOption {
  uint32_t table = 0;
  ShardingType type = ShardingType::kTableWise;
  ShardKernel kernel = ShardKernel::kFused;
  std::vector<ShardBlock> blocks;
  std::vector<ShardPerf> perfs;
  std::vector<ShardStorage> storages;

  double total_perf() const;
  ShardStorage total_storage() const;
};

ShardOption make_shard_option(uint32_t table_index, const ShardTable& table, ShardingType type,
                              ShardKernel kernel, const ShardCluster& cluster);

// Every (type, kernel) of `types` x `kernels` for each table (DP with the dense kernel only, once),
// in that order. Empty shards (RW of a tiny table) are kept: every rank takes part.
std::vector<ShardOption> enumerate_shard_options(uint32_t table_index, const ShardTable& table,
                                                 const std::vector<ShardingType>& types,
                                                 const std::vector<ShardKernel>& kernels,
                                                 const ShardCluster& cluster);

}  // namespace orrery::design
