// DLRM traces: the presets' published shapes, every communication against its closed form for
// each sharding, FLOPs and memory from the model, and bad models and plans named.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "gen/dlrm_generator.h"
#include "gen/gen_test_support.h"
#include "sim/sim_test_support.h"

namespace orrery::gen {
namespace dlrm_generator_test {

using ChakraProtoMsg::ALL_GATHER;
using ChakraProtoMsg::ALL_REDUCE;
using ChakraProtoMsg::ALL_TO_ALL;
using ChakraProtoMsg::REDUCE_SCATTER;

using test::small_dlrm;

DlrmPlan plan_of(uint32_t ranks, uint64_t batch, Sharding sharding) {
  DlrmPlan plan;
  plan.ranks = ranks;
  plan.global_batch = batch;
  plan.sharding = sharding;
  return plan;
}

struct Coll {
  std::string name;
  ChakraProtoMsg::CollectiveCommType type;
  uint64_t bytes;
  bool operator==(const Coll&) const = default;
};

void PrintTo(const Coll& coll, std::ostream* out) {
  *out << coll.name << " " << ChakraProtoMsg::CollectiveCommType_Name(coll.type) << " "
       << coll.bytes;
}

// The collectives of the main lane (the embedding exchange) in program order, then those of the
// background lane (the gradient all-reduces).
std::vector<Coll> collectives(const RankProgram& program) {
  std::vector<Coll> out;
  for (const Lane lane : {Lane::kMain, Lane::kBackground}) {
    for (ProgRef ref = 0; ref < program.size(); ++ref) {
      const RankProgram::Node& node = program.node(ref);
      if (node.kind != ProgKind::kCollective || node.lane != lane) continue;
      EXPECT_EQ(node.group, 1u) << node.name;
      out.push_back({node.name, node.comm_type, node.bytes});
    }
  }
  return out;
}

// The gradient all-reduces, in backward order: top layers last to first, then bottom.
std::vector<Coll> mlp_all_reduces() {
  // (in x out + out) x 4 bytes: bottom 13x64, 64x16; top 52x64, 64x1.
  return {{"top1.grad_all_reduce", ALL_REDUCE, (64 * 1 + 1) * 4},
          {"top0.grad_all_reduce", ALL_REDUCE, (52 * 64 + 64) * 4},
          {"bottom1.grad_all_reduce", ALL_REDUCE, (64 * 16 + 16) * 4},
          {"bottom0.grad_all_reduce", ALL_REDUCE, (13 * 64 + 64) * 4}};
}

std::vector<Coll> with_reduces(std::vector<Coll> sparse) {
  for (const Coll& coll : mlp_all_reduces()) sparse.push_back(coll);
  return sparse;
}

TEST(DlrmModel, mlperf_preset_has_the_published_shape) {
  Expected<DlrmModel> model = resolve_dlrm_model("dlrm-mlperf");
  ASSERT_TRUE(model) << model.error().message();
  EXPECT_EQ(model->tables.size(), 26u);
  // Criteo 1TB with tables capped at 40 M rows: 187,767,399 rows of 128.
  EXPECT_EQ(model->embedding_parameters(), 187767399ULL * 128);
  // 479 = 128 + 27 x 26 / 2: the top MLP's input in the DLRM repository.
  EXPECT_EQ(model->interaction_width(), 479u);
  // Bottom 13-512-256-128 and top 479-1024-1024-512-256-1, weights and biases.
  const uint64_t bottom = 13 * 512 + 512 + 512 * 256 + 256 + 256 * 128 + 128;
  const uint64_t top =
      479 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 512 + 512 + 512 * 256 + 256 + 256 * 1 + 1;
  EXPECT_EQ(model->dense_parameters(), bottom + top);
  EXPECT_EQ(model->dense_parameters(), 2368897u);
  EXPECT_EQ(model->lookups_per_sample(), 26u);
}

TEST(DlrmComm, table_wise_all_to_alls_carry_b_tables_per_rank_d) {
  const DlrmModel model = small_dlrm();
  const DlrmPlan plan = plan_of(4, 64, Sharding::kTable);
  Expected<DlrmGenerator> gen = DlrmGenerator::create(model, plan);
  ASSERT_TRUE(gen) << gen.error().message();
  // b = 16: indices b x T P x 8 = 16 x 24 x 8; pooled vectors B x (T / N) x d x 4 = 64 x 2 x 16
  // x 4.
  const std::vector<Coll> expected =
      with_reduces({{"emb.index_all_to_all", ALL_TO_ALL, 16 * 24 * 8},
                    {"emb.output_all_to_all", ALL_TO_ALL, 64 * 2 * 16 * 4},
                    {"emb.grad_all_to_all", ALL_TO_ALL, 64 * 2 * 16 * 4}});
  for (uint32_t rank = 0; rank < 4; ++rank) EXPECT_EQ(collectives(gen->build(rank)), expected);
  // Every pooled vector of the global batch is sent once: the per-rank buffers add up to B T d.
  uint64_t sent = 0;
  for (uint32_t rank = 0; rank < 4; ++rank) {
    for (const TableShard& shard : table_shards(model, plan, rank))
      sent += shard.outputs * shard.dim;
  }
  EXPECT_EQ(sent * 4, 4 * dlrm_comm(model, plan).output_dist);
}

TEST(DlrmComm, table_wise_with_uneven_tables_sizes_the_all_to_all_by_the_fullest_rank) {
  // 10 tables on 4 ranks: ranks 0 and 1 hold 3, ranks 2 and 3 hold 2.
  const DlrmModel model = small_dlrm(10);
  const DlrmPlan plan = plan_of(4, 64, Sharding::kTable);
  EXPECT_EQ(table_shards(model, plan, 0).size(), 3u);
  EXPECT_EQ(table_shards(model, plan, 3).size(), 2u);
  EXPECT_EQ(dlrm_comm(model, plan).output_dist, 64u * 3 * 16 * 4);
  EXPECT_EQ(dlrm_comm(model, plan).index_all_to_all, 16u * 30 * 8);
}

TEST(DlrmComm, row_wise_reduce_scatters_partial_sums_and_all_gathers_their_gradients) {
  Expected<DlrmGenerator> gen = DlrmGenerator::create(small_dlrm(), plan_of(4, 64, Sharding::kRow));
  ASSERT_TRUE(gen) << gen.error().message();
  // Partial sums of every sample and table: B T d x 4 = 64 x 8 x 16 x 4; gradients of the rank's
  // b samples: 16 x 8 x 16 x 4 in, gathered.
  const std::vector<Coll> expected =
      with_reduces({{"emb.index_all_to_all", ALL_TO_ALL, 16 * 24 * 8},
                    {"emb.output_reduce_scatter", REDUCE_SCATTER, 64 * 8 * 16 * 4},
                    {"emb.grad_all_gather", ALL_GATHER, 16 * 8 * 16 * 4}});
  for (uint32_t rank = 0; rank < 4; ++rank) EXPECT_EQ(collectives(gen->build(rank)), expected);
  // Rows 1,000 in blocks of 250; lookups B P / N = 48 per table and rank.
  for (const TableShard& shard : table_shards(small_dlrm(), plan_of(4, 64, Sharding::kRow), 3)) {
    EXPECT_EQ(shard.rows, 250u);
    EXPECT_EQ(shard.lookups, 48u);
  }
}

TEST(DlrmComm, column_wise_sends_every_index_to_every_block_and_d_over_n_columns_back) {
  Expected<DlrmGenerator> gen =
      DlrmGenerator::create(small_dlrm(), plan_of(4, 64, Sharding::kColumn));
  ASSERT_TRUE(gen) << gen.error().message();
  // Indices b T P x 8 to each of the 4 blocks; pooled d / 4 = 4 columns: B T 4 x 4.
  const std::vector<Coll> expected =
      with_reduces({{"emb.index_all_to_all", ALL_TO_ALL, 16 * 24 * 8 * 4},
                    {"emb.output_all_to_all", ALL_TO_ALL, 64 * 8 * 4 * 4},
                    {"emb.grad_all_to_all", ALL_TO_ALL, 64 * 8 * 4 * 4}});
  for (uint32_t rank = 0; rank < 4; ++rank) EXPECT_EQ(collectives(gen->build(rank)), expected);
}

TEST(DlrmComm, one_rank_writes_no_communication) {
  Expected<DlrmGenerator> gen = DlrmGenerator::create(small_dlrm(), plan_of(1, 64, Sharding::kRow));
  ASSERT_TRUE(gen) << gen.error().message();
  EXPECT_TRUE(collectives(gen->build(0)).empty());
}

uint64_t node_flops(const RankProgram& program, const std::string& name) {
  for (ProgRef ref = 0; ref < program.size(); ++ref) {
    if (program.node(ref).name == name) return program.node(ref).flops;
  }
  ADD_FAILURE() << "no node " << name;
  return 0;
}

TEST(DlrmFlops, lookups_and_mlps_follow_the_model_under_every_sharding) {
  const DlrmModel model = small_dlrm();
  for (Sharding sharding : {Sharding::kTable, Sharding::kRow, Sharding::kColumn}) {
    Expected<DlrmGenerator> gen = DlrmGenerator::create(model, plan_of(4, 64, sharding));
    ASSERT_TRUE(gen) << gen.error().message();
    uint64_t lookup = 0;
    uint64_t update = 0;
    for (uint32_t rank = 0; rank < 4; ++rank) {
      const RankProgram program = gen->build(rank);
      lookup += node_flops(program, "emb.lookup");
      update += node_flops(program, "emb.update");
      // Per rank, b = 16 samples: a layer is 2 b in out + 2 b out forward (bias, ReLU).
      EXPECT_EQ(node_flops(program, "bottom0.fwd"), 2u * 16 * 13 * 64 + 2 * 16 * 64);
      EXPECT_EQ(node_flops(program, "top0.fwd"), 2u * 16 * 52 * 64 + 2 * 16 * 64);
      EXPECT_EQ(node_flops(program, "top0.dgrad"), 2u * 16 * 52 * 64 + 16 * 64);
      // The interaction: Z Z^T over 9 vectors of 16 per sample.
      EXPECT_EQ(node_flops(program, "interaction.fwd"), 2u * 16 * 9 * 9 * 16);
      EXPECT_EQ(node_flops(program, "top1.sgd"), 2u * (64 + 1));
    }
    // Sum pooling adds every looked-up element once: B x sum P x d over the ranks, whatever the
    // sharding (B P = 192 divides by N, so the row-wise split is exact); the update twice that.
    EXPECT_EQ(lookup, 64u * 24 * 16) << sharding_name(sharding);
    EXPECT_EQ(update, 2u * 64 * 24 * 16) << sharding_name(sharding);
  }
}

// The products carry their shapes (gemm_m/n/k/batch, for the compute model), whose FLOPs are the
// node's matrix work: forward samples x in by in x out, backward with the transposed shapes, the
// interaction a batch of (T + 1) x d by d x (T + 1) products, twice over in backward.
TEST(DlrmFlops, matrix_products_carry_their_shapes) {
  Expected<DlrmGenerator> gen =
      DlrmGenerator::create(small_dlrm(), plan_of(4, 64, Sharding::kTable));
  ASSERT_TRUE(gen) << gen.error().message();
  const RankProgram program = gen->build(0);
  const auto shape = [&](const std::string& name) {
    for (ProgRef ref = 0; ref < program.size(); ++ref)
      if (program.node(ref).name == name) return program.node(ref).gemm;
    ADD_FAILURE() << "no node " << name;
    return GemmShape{};
  };
  const auto same = [](const GemmShape& a, const GemmShape& b) {
    return a.m == b.m && a.n == b.n && a.k == b.k && a.batch == b.batch;
  };
  EXPECT_TRUE(same(shape("bottom0.fwd"), {16, 64, 13, 1}));
  EXPECT_TRUE(same(shape("top0.dgrad"), {16, 52, 64, 1}));
  EXPECT_TRUE(same(shape("top0.wgrad"), {52, 64, 16, 1}));
  EXPECT_TRUE(same(shape("interaction.fwd"), {9, 9, 16, 16}));
  EXPECT_TRUE(same(shape("interaction.bwd"), {9, 16, 9, 32}));
  // A product's FLOPs: 2 m n k batch; the layer adds its bias and activation on top.
  const auto products = [](const GemmShape& g) { return 2 * g.m * g.n * g.k * g.batch; };
  EXPECT_EQ(products(shape("interaction.fwd")), node_flops(program, "interaction.fwd"));
  EXPECT_EQ(products(shape("interaction.bwd")), node_flops(program, "interaction.bwd"));
  EXPECT_EQ(products(shape("bottom0.fwd")) + 2 * 16 * 64, node_flops(program, "bottom0.fwd"));
  EXPECT_EQ(products(shape("top0.wgrad")) + 16 * 64, node_flops(program, "top0.wgrad"));
  EXPECT_FALSE(shape("top1.sgd").valid());
}

TEST(DlrmMemory, each_rank_holds_its_shards_and_every_mlp) {
  DlrmModel model = small_dlrm();
  model.tables[0].rows = 5000;  // table 0 lives on rank 0 table-wise
  const uint64_t dense = model.dense_parameters();
  const auto table = estimate_dlrm_memory(model, plan_of(4, 64, Sharding::kTable));
  ASSERT_EQ(table.size(), 4u);
  // Rank 0 holds tables 0 and 4: 5,000 + 1,000 rows of 16; rank 1 tables 1 and 5.
  EXPECT_EQ(table[0].memory.weights, (6000 * 16 + dense) * 4);
  EXPECT_EQ(table[1].memory.weights, (2000 * 16 + dense) * 4);
  EXPECT_EQ(table[0].memory.gradients, dense * 4);
  EXPECT_EQ(table[0].memory.optimizer, 0u);
  const auto row = estimate_dlrm_memory(model, plan_of(4, 64, Sharding::kRow));
  // Row blocks: table 0 in 1,250-row blocks, the others in 250.
  EXPECT_EQ(row[2].memory.weights, ((1250 + 7 * 250) * 16 + dense) * 4);
  const auto column = estimate_dlrm_memory(model, plan_of(4, 64, Sharding::kColumn));
  EXPECT_EQ(column[1].memory.weights, ((5000 + 7 * 1000) * 4 + dense) * 4);
}

TEST(DlrmModel, model_files_override_a_preset_and_bad_ones_name_the_key) {
  test::TempDir dir;
  test::write_text(dir.file("m.json"),
                   "{\n  \"base\": \"dlrm-mlperf\",\n  \"tables\": 4,\n  \"rows\": 100,\n"
                   "  \"pooling\": [1, 2, 3, 4],\n  \"dim\": 64\n}\n");
  Expected<DlrmModel> model = resolve_dlrm_model(dir.file("m.json"));
  ASSERT_TRUE(model) << model.error().message();
  EXPECT_EQ(model->name, "m");
  EXPECT_EQ(model->tables.size(), 4u);
  EXPECT_EQ(model->tables[3].rows, 100u);
  EXPECT_EQ(model->tables[3].pooling, 4u);
  EXPECT_EQ(model->dim, 64u);
  EXPECT_EQ(model->bottom_mlp, (std::vector<uint32_t>{512, 256, 64}));
  EXPECT_EQ(model->lookups_per_sample(), 10u);

  test::write_text(dir.file("bad.json"), "{\n  \"tables\": 4,\n  \"rowz\": 100\n}\n");
  Expected<DlrmModel> bad = resolve_dlrm_model(dir.file("bad.json"));
  ASSERT_FALSE(bad);
  EXPECT_CONTAINS(bad.error().message(), "bad.json:3");
  EXPECT_CONTAINS(bad.error().message(), "rowz");
  test::write_text(dir.file("dim.json"),
                   "{\"base\": \"dlrm-kaggle\", \"bottom_mlp\": [64, 32], \"dim\": 16}");
  Expected<DlrmModel> mismatch = resolve_dlrm_model(dir.file("dim.json"));
  ASSERT_FALSE(mismatch);
  EXPECT_CONTAINS(mismatch.error().message(), "bottom_mlp ends in 32 but dim is 16");
  EXPECT_FALSE(resolve_dlrm_model("dlrm-nope"));
}

TEST(DlrmPlan, bad_plans_name_the_flag) {
  Expected<DlrmGenerator> batch =
      DlrmGenerator::create(small_dlrm(), plan_of(16, 1000, Sharding::kTable));
  ASSERT_FALSE(batch);
  EXPECT_CONTAINS(batch.error().message(), "--global-batch 1000 is not a multiple of --ranks 16");
  Expected<DlrmGenerator> column =
      DlrmGenerator::create(small_dlrm(), plan_of(32, 64, Sharding::kColumn));
  ASSERT_FALSE(column);
  EXPECT_CONTAINS(column.error().message(), "does not divide the embedding dimension 16");
  EXPECT_FALSE(DlrmGenerator::create(small_dlrm(), plan_of(4, 0, Sharding::kRow)));
  EXPECT_FALSE(parse_sharding("diagonal"));
  EXPECT_EQ(*parse_sharding("row-wise"), Sharding::kRow);
}

}  // namespace dlrm_generator_test
}  // namespace orrery::gen
