#include "design/shard_model.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/checked.h"
#include "core/units.h"

namespace orrery::design {

namespace {

// TorchRec's empirical constants (planner/constants.py).
constexpr double kBatchedCopyFactor = 2.455;   // RW/TWRW backward: copying the gradient buffers
constexpr uint32_t kFullBlockDim = 128;        // FBGEMM's kernel: 32 threads x 4-vectors
constexpr double kHalfBlockPenalty = 1.15;     // 64 <= d < 128
constexpr double kQuarterBlockPenalty = 1.75;  // d < 64
constexpr double kDpElementwiseFactor = 9.22;  // DP: SGD, fill and unary kernels over the table
constexpr uint32_t kMinLookupDim = 32;         // the kernel reads at least 32 columns per row
constexpr uint32_t kMinColumnBlock = 128;      // CW blocks are at least this wide
constexpr double kIndexBytes = 8;              // int64 indices (TBE converts int32 anyway)
constexpr double kKjtCopies = 20;              // two pipelined batches of ten copies each
constexpr double kDenseFactor = 6;             // dense weights, optimizer (~2x), DDP (~3x)

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

__extension__ using u128 = unsigned __int128;

uint64_t ceil_u64(double value) { return static_cast<uint64_t>(std::ceil(value)); }

}  // namespace

bool uniform_type(ShardingType type) {
  return type == ShardingType::kRowWise || type == ShardingType::kDataParallel;
}

Expected<ShardKernel> parse_shard_kernel(std::string_view name) {
  if (name == "fused" || name == "hbm") return ShardKernel::kFused;
  if (name == "uvm" || name == "fused_uvm") return ShardKernel::kUvm;
  if (name == "uvm-caching" || name == "uvm_caching" || name == "fused_uvm_caching") {
    return ShardKernel::kUvmCaching;
  }
  if (name == "dense") return ShardKernel::kDense;
  return Error::make(ErrorKind::kInvalidArgument,
                     "unknown kernel '{}' (expected fused, uvm, uvm-caching or dense)", name);
}

std::string_view shard_kernel_name(ShardKernel kernel) {
  switch (kernel) {
    case ShardKernel::kFused:
      return "fused";
    case ShardKernel::kUvm:
      return "uvm";
    case ShardKernel::kUvmCaching:
      return "uvm-caching";
    case ShardKernel::kDense:
      return "dense";
  }
  return "?";
}

Expected<ShardOptimizer> parse_shard_optimizer(std::string_view name) {
  if (name == "none") return ShardOptimizer::kNone;
  if (name == "sgd") return ShardOptimizer::kSgd;
  if (name == "adam") return ShardOptimizer::kAdam;
  if (name == "adagrad") return ShardOptimizer::kAdagrad;
  if (name == "rowwise-adagrad" || name == "rowwise_adagrad") {
    return ShardOptimizer::kRowWiseAdagrad;
  }
  return Error::make(ErrorKind::kInvalidArgument,
                     "unknown optimizer '{}' (expected none, sgd, adam, adagrad or "
                     "rowwise-adagrad)",
                     name);
}

std::string_view shard_optimizer_name(ShardOptimizer optimizer) {
  switch (optimizer) {
    case ShardOptimizer::kNone:
      return "none";
    case ShardOptimizer::kSgd:
      return "sgd";
    case ShardOptimizer::kAdam:
      return "adam";
    case ShardOptimizer::kAdagrad:
      return "adagrad";
    case ShardOptimizer::kRowWiseAdagrad:
      return "rowwise-adagrad";
  }
  return "?";
}

Status validate_shard_cluster(const ShardCluster& cluster) {
  auto fail = [](std::string message) {
    return Status(Error(ErrorKind::kInvalidArgument, std::move(message)));
  };
  if (cluster.world_size == 0 || cluster.world_size > (1U << 20)) {
    return fail(fmt::format("--world-size {}: expected 1 to 1,048,576", cluster.world_size));
  }
  if (cluster.local_world_size == 0 || cluster.world_size % cluster.local_world_size != 0) {
    return fail(
        fmt::format("--world-size {} is not a multiple of --local-world-size {} (ranks per host)",
                    cluster.world_size, cluster.local_world_size));
  }
  if (cluster.batch_size == 0) return fail("--batch 0: expected at least one sample per rank");
  for (const auto& [value, flag] :
       {std::pair{cluster.hbm_bw, "--hbm-bw"}, std::pair{cluster.ddr_bw, "--ddr-bw"},
        std::pair{cluster.hbm_to_ddr_bw, "--hbm-to-ddr-bw"},
        std::pair{cluster.intra_host_bw, "--intra-host-bw"},
        std::pair{cluster.inter_host_bw, "--inter-host-bw"}}) {
    // As every link bandwidth (docs/numbers.md): 1e300 GB/s made every time 0.000000 ms.
    if (const double gbps = value / kGiBpsToBytesPerMs; !in_range(gbps, kMinGbps, kMaxGbps)) {
      return fail(fmt::format("{}: {}", flag, range_message(gbps, kMinGbps, kMaxGbps, "GB/s")));
    }
  }
  if (!(cluster.cache_load_factor > 0 && cluster.cache_load_factor <= 1)) {
    return fail(fmt::format("--cache-load-factor {}: expected a fraction in (0, 1]",
                            cluster.cache_load_factor));
  }
  if (!(cluster.reserved_fraction >= 0 && cluster.reserved_fraction < 1)) {
    return fail(
        fmt::format("--reserved {}: expected a fraction in [0, 1)", cluster.reserved_fraction));
  }
  if (!(cluster.bwd_compute_multiplier > 0)) return fail("the backward multiplier must be > 0");
  return Status::ok();
}

Status validate_shard_table(const ShardTable& table) {
  auto fail = [&](std::string what) {
    return Status(Error::make(ErrorKind::kInvalidArgument, "table '{}': {}", table.name, what));
  };
  if (table.rows == 0) return fail("0 rows (expected at least 1)");
  if (table.rows > (1ULL << 48)) return fail(fmt::format("{} rows is too many", table.rows));
  if (table.dim == 0) return fail("dimension 0 (expected at least 1)");
  if (table.dim > (1U << 16)) return fail(fmt::format("dimension {} is too large", table.dim));
  if (!(table.pooling > 0) || !std::isfinite(table.pooling) || table.pooling > 1e6) {
    return fail(fmt::format("pooling factor {} (expected a number of lookups per sample > 0)",
                            table.pooling));
  }
  return Status::ok();
}

ShardPerf& ShardPerf::operator+=(const ShardPerf& other) {
  fwd_compute += other.fwd_compute;
  fwd_comms += other.fwd_comms;
  bwd_compute += other.bwd_compute;
  bwd_comms += other.bwd_comms;
  return *this;
}

ShardStorage& ShardStorage::operator+=(const ShardStorage& other) {
  hbm += other.hbm;
  ddr += other.ddr;
  return *this;
}

std::vector<ShardBlock> shard_blocks(const ShardTable& table, ShardingType type,
                                     const ShardCluster& cluster) {
  std::vector<ShardBlock> blocks;
  auto row_blocks = [&](uint32_t devices) {
    // ceil(R / n) rows each; the rank after the last full block gets the rest, later ranks none
    // (TorchRec's block sizes: [2, 2, 1, 0] for 5 rows on 4 ranks).
    const uint64_t block = ceil_div(table.rows, devices);
    uint64_t offset = 0;
    for (uint32_t index = 0; index < devices; ++index) {
      const uint64_t rows = std::min(block, table.rows - offset);
      blocks.push_back({offset, rows, 0, table.dim});
      offset += rows;
    }
  };
  switch (type) {
    case ShardingType::kTableWise:
      blocks.push_back({0, table.rows, 0, table.dim});
      break;
    case ShardingType::kRowWise:
      row_blocks(cluster.world_size);
      break;
    case ShardingType::kTableRowWise:
      row_blocks(cluster.local_world_size);
      break;
    case ShardingType::kColumnWise:
    case ShardingType::kTableColumnWise: {
      // The first multiple of 4 in [128, C) that divides C, else C itself.
      uint32_t width = table.dim;
      for (uint32_t candidate = kMinColumnBlock; candidate < table.dim; ++candidate) {
        if (table.dim % candidate == 0 && candidate % 4 == 0) {
          width = candidate;
          break;
        }
      }
      for (uint32_t offset = 0; offset < table.dim; offset += width) {
        blocks.push_back({0, table.rows, offset, width});
      }
      break;
    }
    case ShardingType::kDataParallel:
      for (uint32_t rank = 0; rank < cluster.world_size; ++rank) {
        blocks.push_back({0, table.rows, 0, table.dim});
      }
      break;
  }
  return blocks;
}

double kernel_bandwidth(const ShardCluster& cluster, ShardKernel kernel) {
  const double c = cluster.cache_load_factor;
  switch (kernel) {
    case ShardKernel::kFused:
      return cluster.hbm_bw;
    case ShardKernel::kDense:
      return 0.5 * cluster.hbm_bw;
    case ShardKernel::kUvm:
      return cluster.hbm_to_ddr_bw / 10;
    case ShardKernel::kUvmCaching:
      return (c * cluster.hbm_bw + (1 - c) * cluster.hbm_to_ddr_bw) / 10;
  }
  return cluster.hbm_bw;
}

ShardPerf shard_perf(const ShardTable& table, ShardingType type, ShardKernel kernel,
                     const ShardCluster& cluster, const ShardBlock& block) {
  const double w = cluster.world_size;
  const double lw = cluster.local_world_size;
  const double element = gen::dtype_bytes(table.dtype);
  const double d = block.cols;
  const double device_bw = kernel_bandwidth(cluster, kernel);
  // One feature per table, one pooling per sample: I = L x B inputs, O = B pooled outputs.
  const double inputs = table.pooling * cluster.batch_size;
  const double outputs = cluster.batch_size;
  const double mult = cluster.bwd_compute_multiplier;
  const double comms_bw =
      cluster.world_size > cluster.local_world_size ? cluster.inter_host_bw : cluster.intra_host_bw;
  ShardPerf perf;
  switch (type) {
    case ShardingType::kTableWise:
    case ShardingType::kColumnWise:
    case ShardingType::kTableColumnWise: {
      const double input_read = std::ceil(inputs * w * kIndexBytes);
      const double lookup = inputs * w * std::max<double>(d, kMinLookupDim) * element;
      const double out = outputs * w * d * element;
      double penalty = 1;
      if (block.cols < kFullBlockDim) {
        penalty = block.cols >= 64 ? kHalfBlockPenalty : kQuarterBlockPenalty;
      }
      perf.fwd_compute = (input_read + lookup + out) * penalty / device_bw;
      perf.fwd_comms = out / comms_bw;
      perf.bwd_compute = perf.fwd_compute * mult;
      perf.bwd_comms = out / comms_bw;
      break;
    }
    case ShardingType::kRowWise: {
      const double shard_inputs = inputs / w;
      const double input_read = std::ceil(shard_inputs * w * kIndexBytes);
      const double lookup = shard_inputs * w * d * element;
      const double out = outputs * w * d * element;
      perf.fwd_compute = (input_read + lookup + out) / device_bw;
      perf.fwd_comms = out / comms_bw;
      perf.bwd_compute = perf.fwd_compute * mult;
      perf.bwd_comms = out / comms_bw + out * kBatchedCopyFactor / device_bw;
      break;
    }
    case ShardingType::kTableRowWise: {
      const double shard_inputs = inputs / lw;
      const double input_read = std::ceil(shard_inputs * w * kIndexBytes);
      const double lookup = shard_inputs * w * d * element;
      const double out = outputs * w * d * element;
      // Reduce-scatter within the host, then an all-to-all across hosts of Lw / W of it.
      perf.fwd_comms = out / cluster.intra_host_bw;
      if (cluster.world_size > cluster.local_world_size) {
        perf.fwd_comms += out * (lw / w) / cluster.inter_host_bw;
      }
      perf.fwd_compute = (input_read + lookup + out) / device_bw;
      perf.bwd_compute = perf.fwd_compute * mult;
      perf.bwd_comms = out / cluster.intra_host_bw + out * kBatchedCopyFactor / device_bw;
      break;
    }
    case ShardingType::kDataParallel: {
      const double input_read = std::ceil(inputs * kIndexBytes);
      const double lookup = inputs * d * element;
      const double out = outputs * d * element;
      const double table_bytes = static_cast<double>(block.rows) * d * element;
      perf.fwd_compute = (input_read + lookup + out) / device_bw;
      // NCCL's ring all-reduce moves (2n - 1) / n of the gradient, n nodes (capped at 2), over one
      // NIC per GPU; beyond two hosts the inter-host links bind twice as hard.
      const double nodes = std::min(w / lw, 2.0);
      double all_reduce = table_bytes * (2 * nodes - 1) / nodes / (cluster.inter_host_bw * lw);
      if (cluster.world_size > 2 * cluster.local_world_size) all_reduce *= 2;
      perf.bwd_compute = perf.fwd_compute * mult;
      perf.bwd_comms = all_reduce + table_bytes * kDpElementwiseFactor / device_bw;
      break;
    }
  }
  return perf;
}

std::vector<uint64_t> storage_specific_sizes(uint64_t storage, uint64_t table_rows,
                                             uint32_t table_cols,
                                             const std::vector<ShardBlock>& blocks,
                                             ShardingType type, ShardOptimizer optimizer,
                                             double cache_load) {
  double multiplier = 0;
  switch (optimizer) {
    case ShardOptimizer::kNone:
    case ShardOptimizer::kSgd:
      multiplier = 0;
      break;
    case ShardOptimizer::kAdam:
      multiplier = 2;
      break;
    case ShardOptimizer::kRowWiseAdagrad:
      multiplier = 1.0 / table_cols;
      break;
    case ShardOptimizer::kAdagrad:
      multiplier = 1;
      break;
  }
  const u128 table_elements = u128{table_rows} * table_cols;
  std::vector<uint64_t> sizes;
  for (const ShardBlock& block : blocks) {
    // ceil(storage x shard elements / table elements), exactly (the product exceeds 64 bits).
    const uint64_t tensor =
        type == ShardingType::kDataParallel
            ? storage
            : static_cast<uint64_t>((u128{storage} * block.rows * block.cols + table_elements - 1) /
                                    table_elements);
    const uint64_t state = ceil_u64(static_cast<double>(tensor) * multiplier);
    const uint64_t cache =
        cache_load < 0 ? 0 : ceil_u64(static_cast<double>(block.rows) * (4 + cache_load * 16));
    sizes.push_back(cache + tensor + state);
  }
  return sizes;
}

std::vector<ShardStorage> shard_storages(const ShardTable& table, ShardingType type,
                                         ShardKernel kernel, const ShardCluster& cluster,
                                         const std::vector<ShardBlock>& blocks) {
  const double element = gen::dtype_bytes(table.dtype);
  const double w = cluster.world_size;
  const double lw = cluster.local_world_size;
  const double inputs = table.pooling * cluster.batch_size;
  const double outputs = cluster.batch_size;
  const uint64_t table_bytes = table.rows * table.dim * gen::dtype_bytes(table.dtype);
  uint64_t hbm = 0;
  uint64_t ddr = 0;
  bool cached = false;
  switch (kernel) {
    case ShardKernel::kFused:
    case ShardKernel::kDense:
      hbm = table_bytes;
      break;
    case ShardKernel::kUvm:
      ddr = table_bytes;
      break;
    case ShardKernel::kUvmCaching:
      ddr = table_bytes;
      hbm =
          static_cast<uint64_t>(std::llround(static_cast<double>(ddr) * cluster.cache_load_factor));
      cached = true;
      break;
  }
  const std::vector<uint64_t> hbm_sizes =
      storage_specific_sizes(hbm, table.rows, table.dim, blocks, type, cluster.optimizer,
                             cached ? cluster.cache_load_factor : -1);
  const std::vector<uint64_t> ddr_sizes =
      storage_specific_sizes(ddr, table.rows, table.dim, blocks, type, cluster.optimizer);
  std::vector<ShardStorage> storages;
  for (size_t index = 0; index < blocks.size(); ++index) {
    const ShardBlock& block = blocks[index];
    const bool empty = block.rows == 0 || block.cols == 0;
    double input = 0;
    double output = 0;
    switch (type) {
      case ShardingType::kDataParallel:
        input = std::ceil(inputs * kIndexBytes);
        output = std::ceil(outputs * table.dim * element);
        break;
      case ShardingType::kTableWise:
        input = std::ceil(inputs * w * kIndexBytes);
        output = std::ceil(outputs * w * table.dim * element);
        break;
      case ShardingType::kColumnWise:
      case ShardingType::kTableColumnWise:
        input = std::ceil(inputs * w * kIndexBytes);
        output = std::ceil(outputs * w * block.cols * element);
        break;
      case ShardingType::kRowWise:
        input = empty ? 0 : std::ceil(inputs / w * w * kIndexBytes);
        output = empty ? 0 : std::ceil(outputs * w * block.cols * element);
        break;
      case ShardingType::kTableRowWise:
        input = empty ? 0 : std::ceil(inputs / lw * w * kIndexBytes);
        output = empty ? 0 : std::ceil(outputs * w * block.cols * element);
        break;
    }
    storages.push_back(
        {hbm_sizes[index] + static_cast<uint64_t>(input) + static_cast<uint64_t>(output),
         ddr_sizes[index]});
  }
  return storages;
}

Expected<ShardStorage> device_capacity(const ShardCluster& cluster,
                                       const std::vector<ShardTable>& tables,
                                       uint64_t dense_parameter_bytes) {
  const double keep = 1 - cluster.reserved_fraction;
  ShardStorage capacity{static_cast<uint64_t>(keep * static_cast<double>(cluster.hbm_bytes)),
                        static_cast<uint64_t>(keep * static_cast<double>(cluster.ddr_bytes))};
  double lookups = 0;
  for (const ShardTable& table : tables) lookups += table.pooling;
  const uint64_t kjt = ceil_u64(static_cast<double>(cluster.batch_size) * lookups * kIndexBytes) *
                       static_cast<uint64_t>(kKjtCopies);
  const uint64_t dense = static_cast<uint64_t>(kDenseFactor) * dense_parameter_bytes;
  if (dense + kjt > capacity.hbm) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "the dense parameters ({} x6) and input buffers ({}) alone need {} of the "
                       "{} of HBM each device offers after the {:.0f}% reserve",
                       format_bytes(dense_parameter_bytes), format_bytes(kjt),
                       format_bytes(dense + kjt), format_bytes(capacity.hbm),
                       cluster.reserved_fraction * 100);
  }
  capacity.hbm -= dense + kjt;
  return capacity;
}

double ShardOption::total_perf() const {
  double total = 0;
  for (const ShardPerf& perf : perfs) total += perf.total();
  return total;
}

ShardStorage ShardOption::total_storage() const {
  ShardStorage total;
  for (const ShardStorage& storage : storages) total += storage;
  return total;
}

ShardOption make_shard_option(uint32_t table_index, const ShardTable& table, ShardingType type,
                              ShardKernel kernel, const ShardCluster& cluster) {
  ShardOption option;
  option.table = table_index;
  option.type = type;
  option.kernel = kernel;
  option.blocks = shard_blocks(table, type, cluster);
  option.perfs.reserve(option.blocks.size());
  // Uniform shards of one table mostly share a shape: compute each distinct block once.
  for (size_t index = 0; index < option.blocks.size(); ++index) {
    const ShardBlock& block = option.blocks[index];
    if (index > 0 && uniform_type(type) && block.cols == option.blocks[index - 1].cols &&
        block.rows == option.blocks[index - 1].rows) {
      option.perfs.push_back(option.perfs.back());
    } else {
      option.perfs.push_back(shard_perf(table, type, kernel, cluster, block));
    }
  }
  option.storages = shard_storages(table, type, kernel, cluster, option.blocks);
  return option;
}

std::vector<ShardOption> enumerate_shard_options(uint32_t table_index, const ShardTable& table,
                                                 const std::vector<ShardingType>& types,
                                                 const std::vector<ShardKernel>& kernels,
                                                 const ShardCluster& cluster) {
  std::vector<ShardOption> options;
  for (ShardingType type : types) {
    if (type == ShardingType::kDataParallel) {
      options.push_back(make_shard_option(table_index, table, type, ShardKernel::kDense, cluster));
      continue;
    }
    for (ShardKernel kernel : kernels) {
      if (kernel == ShardKernel::kDense) continue;
      options.push_back(make_shard_option(table_index, table, type, kernel, cluster));
    }
  }
  return options;
}

}  // namespace orrery::design
