// TorchRec's cost and storage model (design/shard_model.h): the test vectors of TorchRec's own
// tests (torchrec/distributed/planner/tests/test_shard_estimators.py) to 1e-9 relative, and
// hand-computed cases for every sharding type on two hosts.
#include "design/shard_model.h"

#include <gtest/gtest.h>

#include <cmath>

namespace orrery::design {
namespace shard_model_test {

using gen::ShardingType;

#define EXPECT_REL(actual, expected)                                    \
  EXPECT_LE(std::abs((actual) - (expected)), 1e-9 * std::abs(expected)) \
      << #actual << " = " << (actual) << ", expected " << (expected)

// TorchRec's test table: 100 rows x 10 columns of fp32, pooling 1, on 2 ranks of one host, batch
// 512 per rank, every default (HBM 897 GB/s, HBM-to-DDR 32 GB/s, intra-host 600 GB/s, cross-host
// 12.5 GB/s, cache load factor 0.2).
ShardTable test_table() { return ShardTable{"table_0", 100, 10, 1.0, gen::DType::kFp32}; }

ShardPerf perf_of(ShardingType type, ShardKernel kernel, const ShardCluster& cluster = {}) {
  const ShardTable table = test_table();
  return shard_perf(table, type, kernel, cluster, shard_blocks(table, type, cluster)[0]);
}

TEST(ShardModel, torchrec_vectors_data_parallel) {
  const ShardPerf perf = perf_of(ShardingType::kDataParallel, ShardKernel::kDense);
  EXPECT_REL(perf.fwd_compute, 9.356002212235228e-05);
  EXPECT_EQ(perf.fwd_comms, 0.0);
  EXPECT_REL(perf.bwd_compute, 1.8712004424470456e-04);
  EXPECT_REL(perf.bwd_comms, 2.25593945387348e-04);
}

TEST(ShardModel, torchrec_vectors_table_column_and_table_column_wise) {
  for (ShardingType type :
       {ShardingType::kTableWise, ShardingType::kColumnWise, ShardingType::kTableColumnWise}) {
    SCOPED_TRACE(std::string(gen::sharding_type_name(type)));
    const ShardPerf fused = perf_of(type, ShardKernel::kFused);
    EXPECT_REL(fused.fwd_compute, 3.27460077428233e-04);
    EXPECT_REL(fused.fwd_comms, 6.357828776041667e-05);
    EXPECT_REL(fused.bwd_compute, 6.54920154856466e-04);
    EXPECT_REL(fused.bwd_comms, 6.357828776041667e-05);
    const ShardPerf uvm = perf_of(type, ShardKernel::kUvm);
    EXPECT_REL(uvm.fwd_compute, 0.09179115295410156);
    EXPECT_REL(uvm.bwd_compute, 0.18358230590820312);
    EXPECT_REL(uvm.fwd_comms, 6.357828776041667e-05);
    const ShardPerf caching = perf_of(type, ShardKernel::kUvmCaching);
    EXPECT_REL(caching.fwd_compute, 0.01432837509527439);
    EXPECT_REL(caching.bwd_compute, 0.02865675019054878);
  }
}

TEST(ShardModel, torchrec_vectors_row_and_table_row_wise) {
  // With one host TWRW is row-wise over the host: the same numbers.
  for (ShardingType type : {ShardingType::kRowWise, ShardingType::kTableRowWise}) {
    SCOPED_TRACE(std::string(gen::sharding_type_name(type)));
    const ShardPerf fused = perf_of(type, ShardKernel::kFused);
    EXPECT_REL(fused.fwd_compute, 6.804365245261984e-05);
    EXPECT_REL(fused.fwd_comms, 6.357828776041667e-05);
    EXPECT_REL(fused.bwd_compute, 1.360873049052397e-04);
    EXPECT_REL(fused.bwd_comms, 1.6798276699240525e-04);
    const ShardPerf uvm = perf_of(type, ShardKernel::kUvm);
    EXPECT_REL(uvm.fwd_compute, 0.019073486328125);
    EXPECT_REL(uvm.bwd_comms, 0.029329458872477215);
  }
}

TEST(ShardModel, torchrec_storage_vectors) {
  // _calculate_storage_specific_sizes(storage=100, shape=(10, 5, 3), two shards of half): the
  // table as 50 rows of 3 columns.
  const std::vector<ShardBlock> halves = {{0, 25, 0, 3}, {25, 25, 0, 3}};
  EXPECT_EQ(
      storage_specific_sizes(100, 50, 3, halves, ShardingType::kTableRowWise, ShardOptimizer::kSgd),
      (std::vector<uint64_t>{50, 50}));
  EXPECT_EQ(
      storage_specific_sizes(100, 50, 3, halves, ShardingType::kColumnWise, ShardOptimizer::kAdam),
      (std::vector<uint64_t>{150, 150}));
  EXPECT_EQ(storage_specific_sizes(100, 50, 3, halves, ShardingType::kTableRowWise,
                                   ShardOptimizer::kNone),
            (std::vector<uint64_t>{50, 50}));
  EXPECT_EQ(storage_specific_sizes(100, 50, 3, halves, ShardingType::kDataParallel,
                                   ShardOptimizer::kRowWiseAdagrad),
            (std::vector<uint64_t>{134, 134}));
}

TEST(ShardModel, shard_blocks_follow_torchrec) {
  ShardCluster cluster;
  cluster.world_size = 4;
  cluster.local_world_size = 2;
  // Row blocks of ceil(5 / 4) = 2: [2, 2, 1, 0].
  const std::vector<ShardBlock> rows =
      shard_blocks({"t", 5, 8, 1, gen::DType::kFp32}, ShardingType::kRowWise, cluster);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].rows, 2u);
  EXPECT_EQ(rows[1].rows, 2u);
  EXPECT_EQ(rows[2].rows, 1u);
  EXPECT_EQ(rows[3].rows, 0u);
  EXPECT_EQ(rows[2].row_offset, 4u);
  // TWRW: over the host's 2 ranks.
  const std::vector<ShardBlock> twrw =
      shard_blocks({"t", 5, 8, 1, gen::DType::kFp32}, ShardingType::kTableRowWise, cluster);
  ASSERT_EQ(twrw.size(), 2u);
  EXPECT_EQ(twrw[0].rows, 3u);
  EXPECT_EQ(twrw[1].rows, 2u);
  // Column blocks: 256 -> 2 x 128, 512 -> 4 x 128, 192 (no multiple of 4 in [128, 192) divides
  // it) and 64 -> whole.
  auto widths = [&](uint32_t dim) {
    std::vector<uint32_t> out;
    for (const ShardBlock& block :
         shard_blocks({"t", 10, dim, 1, gen::DType::kFp32}, ShardingType::kColumnWise, cluster)) {
      out.push_back(block.cols);
    }
    return out;
  };
  EXPECT_EQ(widths(256), (std::vector<uint32_t>{128, 128}));
  EXPECT_EQ(widths(512), (std::vector<uint32_t>{128, 128, 128, 128}));
  EXPECT_EQ(widths(192), (std::vector<uint32_t>{192}));
  EXPECT_EQ(widths(64), (std::vector<uint32_t>{64}));
  EXPECT_EQ(widths(400), (std::vector<uint32_t>{200, 200}));
  EXPECT_EQ(
      shard_blocks({"t", 10, 8, 1, gen::DType::kFp32}, ShardingType::kDataParallel, cluster).size(),
      4u);
}

// Two hosts of 8 (W = 16, Lw = 8), batch 1,024 per rank, a 1,000,000 x 256 fp16 table looked up
// 20 times per sample; bandwidths in bytes/ms as TorchRec writes them.
class ShardHandComputed : public ::testing::Test {
 protected:
  ShardHandComputed() {
    cluster.world_size = 16;
    cluster.local_world_size = 8;
    cluster.batch_size = 1024;
  }
  ShardPerf perf(ShardingType type, ShardKernel kernel, size_t shard = 0) const {
    return shard_perf(table, type, kernel, cluster, shard_blocks(table, type, cluster)[shard]);
  }

  ShardCluster cluster;
  ShardTable table{"big", 1000000, 256, 20.0, gen::DType::kFp16};
  const double gb = 1024.0 * 1024.0 * 1024.0 / 1000.0;
  const double hbm = 897 * gb;
  const double intra = 600 * gb;
  const double inter = 12.5 * gb;
  // I = 20 x 1,024 = 20,480 lookups per rank's batch; O = 1,024 pooled outputs.
  const double inputs = 20480;
  const double outputs = 1024;
};

TEST_F(ShardHandComputed, table_wise) {
  // input 20,480 x 16 x 8 B; lookup 20,480 x 16 x 256 x 2 B; output 1,024 x 16 x 256 x 2 B.
  const double input = 20480.0 * 16 * 8;
  const double lookup = 20480.0 * 16 * 256 * 2;
  const double output = 1024.0 * 16 * 256 * 2;
  const ShardPerf tw = perf(ShardingType::kTableWise, ShardKernel::kFused);
  EXPECT_REL(tw.fwd_compute, (input + lookup + output) / hbm);  // d >= 128: no penalty
  EXPECT_REL(tw.fwd_compute, 0.18562308389074694);
  EXPECT_REL(tw.fwd_comms, output / inter);  // W > Lw: cross-host
  EXPECT_REL(tw.fwd_comms, 0.625);
  EXPECT_REL(tw.bwd_compute, 2 * tw.fwd_compute);
  EXPECT_REL(tw.bwd_comms, tw.fwd_comms);
  // UVM: HBM-to-DDR / 10 = 3.2 GB/s.
  const ShardPerf uvm = perf(ShardingType::kTableWise, ShardKernel::kUvm);
  EXPECT_REL(uvm.fwd_compute, (input + lookup + output) / (3.2 * gb));
}

TEST_F(ShardHandComputed, column_wise_blocks_of_128) {
  // Two 128-wide blocks; each reads every index, the lookup and output of its 128 columns; at
  // d = 128 the kernel takes no penalty.
  const double input = 20480.0 * 16 * 8;
  const double lookup = 20480.0 * 16 * 128 * 2;
  const double output = 1024.0 * 16 * 128 * 2;
  for (ShardingType type : {ShardingType::kColumnWise, ShardingType::kTableColumnWise}) {
    const ShardPerf cw = perf(type, ShardKernel::kFused, 1);
    EXPECT_REL(cw.fwd_compute, (input + lookup + output) / hbm);
    EXPECT_REL(cw.fwd_comms, output / inter);
    EXPECT_REL(cw.bwd_comms, output / inter);
  }
  // A 96-wide table pays the half-block penalty (1.15), a 48-wide one the quarter (1.75; its
  // lookup reads at least 32 columns either way).
  table.dim = 96;
  const ShardPerf half = perf(ShardingType::kColumnWise, ShardKernel::kFused);
  EXPECT_REL(half.fwd_compute,
             (20480.0 * 16 * 8 + 20480.0 * 16 * 96 * 2 + 1024.0 * 16 * 96 * 2) * 1.15 / hbm);
  table.dim = 16;
  const ShardPerf quarter = perf(ShardingType::kTableWise, ShardKernel::kFused);
  EXPECT_REL(quarter.fwd_compute,
             (20480.0 * 16 * 8 + 20480.0 * 16 * 32 * 2 + 1024.0 * 16 * 16 * 2) * 1.75 / hbm);
}

TEST_F(ShardHandComputed, row_wise) {
  // Each of the 16 blocks sees I / 16 of the lookups but writes partial sums for every output.
  const double input = 20480.0 / 16 * 16 * 8;
  const double lookup = 20480.0 / 16 * 16 * 256 * 2;
  const double output = 1024.0 * 16 * 256 * 2;
  const ShardPerf rw = perf(ShardingType::kRowWise, ShardKernel::kFused);
  EXPECT_REL(rw.fwd_compute, (input + lookup + output) / hbm);
  EXPECT_REL(rw.fwd_comms, output / inter);  // reduce-scatter across hosts
  EXPECT_REL(rw.bwd_compute, 2 * rw.fwd_compute);
  EXPECT_REL(rw.bwd_comms, output / inter + output * 2.455 / hbm);  // all-gather + batched copy
  EXPECT_EQ(shard_blocks(table, ShardingType::kRowWise, cluster)[0].rows, 62500u);
}

TEST_F(ShardHandComputed, table_row_wise) {
  // Row-wise within one host: I / 8 lookups per block; a reduce-scatter inside the host and an
  // all-to-all of Lw / W = 1/2 of the output across hosts.
  const double input = 20480.0 / 8 * 16 * 8;
  const double lookup = 20480.0 / 8 * 16 * 256 * 2;
  const double output = 1024.0 * 16 * 256 * 2;
  const ShardPerf twrw = perf(ShardingType::kTableRowWise, ShardKernel::kFused);
  EXPECT_REL(twrw.fwd_compute, (input + lookup + output) / hbm);
  EXPECT_REL(twrw.fwd_comms, output / intra + output * 0.5 / inter);
  EXPECT_REL(twrw.bwd_comms, output / intra + output * 2.455 / hbm);
  EXPECT_EQ(shard_blocks(table, ShardingType::kTableRowWise, cluster)[0].rows, 125000u);
}

TEST_F(ShardHandComputed, data_parallel) {
  // Every rank looks up its own batch at HBM / 2; the gradient of the whole table (512 MB) is
  // all-reduced over n = min(W / Lw, 2) = 2 nodes at 12.5 GB/s x 8 NICs, (2n - 1) / n of it,
  // not doubled (W = 2 Lw); plus the optimizer's element-wise kernels (9.22 passes).
  const double table_bytes = 1000000.0 * 256 * 2;
  const ShardPerf dp = perf(ShardingType::kDataParallel, ShardKernel::kDense);
  EXPECT_REL(dp.fwd_compute, (20480.0 * 8 + 20480.0 * 256 * 2 + 1024.0 * 256 * 2) / (hbm / 2));
  EXPECT_EQ(dp.fwd_comms, 0.0);
  EXPECT_REL(dp.bwd_comms, table_bytes * 1.5 / (inter * 8) + table_bytes * 9.22 / (hbm / 2));
  // Beyond two hosts the all-reduce doubles.
  cluster.world_size = 32;
  const ShardPerf wide = perf(ShardingType::kDataParallel, ShardKernel::kDense);
  EXPECT_REL(wide.bwd_comms, 2 * table_bytes * 1.5 / (inter * 8) + table_bytes * 9.22 / (hbm / 2));
}

TEST_F(ShardHandComputed, storage_per_kernel) {
  // Table-wise, fused: the 512 MB table, Adam's two moments, and the shard's input (20,480 x 16 x
  // 8 B) and output (1,024 x 16 x 256 x 2 B) buffers in HBM.
  cluster.optimizer = ShardOptimizer::kAdam;
  const uint64_t table_bytes = 1000000ULL * 256 * 2;
  const uint64_t io = 20480ULL * 16 * 8 + 1024ULL * 16 * 256 * 2;
  auto storage = [&](ShardingType type, ShardKernel kernel) {
    return shard_storages(table, type, kernel, cluster, shard_blocks(table, type, cluster));
  };
  const ShardStorage fused = storage(ShardingType::kTableWise, ShardKernel::kFused)[0];
  EXPECT_EQ(fused.hbm, 3 * table_bytes + io);
  EXPECT_EQ(fused.ddr, 0u);
  const ShardStorage uvm = storage(ShardingType::kTableWise, ShardKernel::kUvm)[0];
  EXPECT_EQ(uvm.hbm, io);
  EXPECT_EQ(uvm.ddr, 3 * table_bytes);
  // UVM caching: 20% of the table cached in HBM (with its optimizer state) and 4 + 0.2 x 16 bytes
  // of cache state per row.
  const ShardStorage cached = storage(ShardingType::kTableWise, ShardKernel::kUvmCaching)[0];
  EXPECT_EQ(cached.hbm, 3 * (table_bytes / 5) + 1000000ULL * 72 / 10 + io);
  EXPECT_EQ(cached.ddr, 3 * table_bytes);
  // Row-wise: a 16th of the table per rank, each block's input (I / 16 x 16 x 8 B) and output.
  const ShardStorage rw = storage(ShardingType::kRowWise, ShardKernel::kFused)[0];
  EXPECT_EQ(rw.hbm, 3 * table_bytes / 16 + 20480ULL * 8 + 1024ULL * 16 * 256 * 2);
  // Data-parallel: the whole table on every rank, the local batch's buffers.
  const ShardStorage dp = storage(ShardingType::kDataParallel, ShardKernel::kDense)[3];
  EXPECT_EQ(dp.hbm, 3 * table_bytes + 20480ULL * 8 + 1024ULL * 256 * 2);
}

TEST(ShardModel, capacity_reserves_margin_dense_and_inputs) {
  ShardCluster cluster;  // 32 GiB HBM, 128 GiB DDR, 15% reserved
  const std::vector<ShardTable> tables = {test_table(), test_table()};
  Expected<ShardStorage> capacity = device_capacity(cluster, tables, 1000);
  ASSERT_TRUE(capacity) << capacity.error().message();
  // int(0.85 x 32 GiB) - 6 x 1,000 B of dense parameters - ceil(512 x 2 x 8 B) x 20 of indices.
  EXPECT_EQ(capacity->hbm, 29205777612ULL - 6000 - 8192 * 20);
  EXPECT_EQ(capacity->ddr, 116823110451ULL);
  cluster.hbm_bytes = 1 << 20;
  Expected<ShardStorage> none = device_capacity(cluster, tables, 1 << 20);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message().find("dense parameters"), std::string::npos);
}

TEST(ShardModel, bad_cluster_and_tables_are_named) {
  ShardCluster cluster;
  cluster.world_size = 12;
  cluster.local_world_size = 8;
  Status status = validate_shard_cluster(cluster);
  ASSERT_FALSE(status);
  EXPECT_NE(status.error().message().find("--world-size 12 is not a multiple of "
                                          "--local-world-size 8"),
            std::string::npos);
  Status table = validate_shard_table({"ads", 10, 8, 0.0, gen::DType::kFp32});
  ASSERT_FALSE(table);
  EXPECT_NE(table.error().message().find("table 'ads': pooling factor 0"), std::string::npos);
  // Bandwidths within the range of every link bandwidth: 1e300 GB/s made every time 0.
  ShardCluster fast;
  fast.inter_host_bw = 1e300 * kGiBpsToBytesPerMs;
  Status too_fast = validate_shard_cluster(fast);
  ASSERT_FALSE(too_fast);
  EXPECT_NE(too_fast.error().message().find(
                "--inter-host-bw: expected a number from 0.001 to 1e+09 GB/s, found 1e+300"),
            std::string::npos)
      << too_fast.error().message();
  fast.inter_host_bw = 12.5 * kGiBpsToBytesPerMs;
  EXPECT_TRUE(validate_shard_cluster(fast));
  EXPECT_FALSE(parse_shard_kernel("gpu"));
  EXPECT_EQ(*parse_shard_kernel("uvm-caching"), ShardKernel::kUvmCaching);
}

TEST(ShardModel, options_enumerate_types_and_kernels) {
  ShardCluster cluster;
  const std::vector<ShardOption> options = enumerate_shard_options(
      0, test_table(),
      {ShardingType::kTableWise, ShardingType::kRowWise, ShardingType::kDataParallel},
      {ShardKernel::kFused, ShardKernel::kUvm}, cluster);
  // TW x 2 kernels, RW x 2 kernels, DP once with the dense kernel.
  ASSERT_EQ(options.size(), 5u);
  EXPECT_EQ(options[4].kernel, ShardKernel::kDense);
  EXPECT_EQ(options[2].blocks.size(), 2u);
  // The option's time is the sum over its shards (TorchRec's total_perf).
  EXPECT_REL(options[2].total_perf(), 2 * options[2].perfs[0].total());
}

}  // namespace shard_model_test
}  // namespace orrery::design
