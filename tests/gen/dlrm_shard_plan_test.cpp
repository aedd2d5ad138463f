// Shard plan files (gen/dlrm_shard_plan.h) and `orrery gen dlrm --plan`'s placement
// (gen/dlrm_generator.h): the file round trip, errors that name the table and shard, per-peer
// exchange sizes by hand, every send matched by its receive, and the plan's compute estimates.
#include "gen/dlrm_shard_plan.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include "gen/dlrm_generator.h"

namespace orrery::gen {
namespace dlrm_shard_plan_test {

// 4 ranks on 2 hosts of 2. t0 TW on rank 1; t1 CW in two 16-column blocks on ranks 0 and 3; t2 RW;
// t3 TWRW on host 1 (ranks 2, 3); t4 DP. fp32.
DlrmShardPlan sample_plan() {
  DlrmShardPlan plan;
  plan.world_size = 4;
  plan.local_world_size = 2;
  plan.batch_size = 16;
  plan.model = "dlrm-kaggle";
  auto shard = [](uint32_t rank, uint64_t row_offset, uint64_t rows, uint32_t col_offset,
                  uint32_t cols, double fwd) {
    PlannedShard s;
    s.rank = rank;
    s.row_offset = row_offset;
    s.rows = rows;
    s.col_offset = col_offset;
    s.cols = cols;
    s.fwd_compute = fwd;
    s.fwd_comms = 0.01;
    s.bwd_compute = 2 * fwd;
    s.bwd_comms = 0.01;
    s.hbm_bytes = rows * cols * 4;
    return s;
  };
  plan.tables.push_back({"t0",
                         1000,
                         16,
                         2,
                         DType::kFp32,
                         ShardingType::kTableWise,
                         "fused",
                         {shard(1, 0, 1000, 0, 16, 0.5)}});
  plan.tables.push_back({"t1",
                         500,
                         32,
                         3,
                         DType::kFp32,
                         ShardingType::kColumnWise,
                         "fused",
                         {shard(0, 0, 500, 0, 16, 0.25), shard(3, 0, 500, 16, 16, 0.25)}});
  PlannedTable rw{"t2", 10, 16, 5, DType::kFp32, ShardingType::kRowWise, "uvm-caching", {}};
  for (uint32_t rank = 0; rank < 4; ++rank) {
    rw.shards.push_back(
        shard(rank, std::min<uint64_t>(3 * rank, 10), rank < 3 ? 3 : 1, 0, 16, 0.125));
  }
  plan.tables.push_back(rw);
  plan.tables.push_back({"t3",
                         200,
                         8,
                         4,
                         DType::kFp32,
                         ShardingType::kTableRowWise,
                         "fused",
                         {shard(2, 0, 100, 0, 8, 0.0625), shard(3, 100, 100, 0, 8, 0.0625)}});
  PlannedTable dp{"t4", 50, 16, 1, DType::kFp32, ShardingType::kDataParallel, "dense", {}};
  for (uint32_t rank = 0; rank < 4; ++rank) dp.shards.push_back(shard(rank, 0, 50, 0, 16, 0.03125));
  plan.tables.push_back(dp);
  return plan;
}

class ShardPlanFile : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::string error_of(const std::string& text) {
    Expected<DlrmShardPlan> plan = load_dlrm_shard_plan(write("bad.json", text));
    EXPECT_FALSE(plan);
    return plan ? std::string() : plan.error().message();
  }
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() /
        ("orrery-shard-plan-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(ShardPlanFile, round_trip_keeps_every_field) {
  const DlrmShardPlan plan = sample_plan();
  ASSERT_TRUE(validate_dlrm_shard_plan(plan));
  const std::string path = (dir_ / "plan.json").string();
  ASSERT_TRUE(write_dlrm_shard_plan(plan, path));
  Expected<DlrmShardPlan> loaded = load_dlrm_shard_plan(path);
  ASSERT_TRUE(loaded) << loaded.error().message();
  EXPECT_EQ(loaded->world_size, 4u);
  EXPECT_EQ(loaded->local_world_size, 2u);
  EXPECT_EQ(loaded->batch_size, 16u);
  EXPECT_EQ(loaded->model, "dlrm-kaggle");
  ASSERT_EQ(loaded->tables.size(), 5u);
  for (size_t t = 0; t < plan.tables.size(); ++t) {
    const PlannedTable& a = plan.tables[t];
    const PlannedTable& b = loaded->tables[t];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.rows, b.rows);
    EXPECT_EQ(a.dim, b.dim);
    EXPECT_EQ(a.pooling, b.pooling);
    EXPECT_EQ(a.sharding, b.sharding);
    EXPECT_EQ(a.kernel, b.kernel);
    ASSERT_EQ(a.shards.size(), b.shards.size());
    for (size_t s = 0; s < a.shards.size(); ++s) {
      EXPECT_EQ(a.shards[s].rank, b.shards[s].rank);
      EXPECT_EQ(a.shards[s].row_offset, b.shards[s].row_offset);
      EXPECT_EQ(a.shards[s].rows, b.shards[s].rows);
      EXPECT_EQ(a.shards[s].col_offset, b.shards[s].col_offset);
      EXPECT_EQ(a.shards[s].cols, b.shards[s].cols);
      EXPECT_EQ(a.shards[s].fwd_compute, b.shards[s].fwd_compute);  // shortest round trip
      EXPECT_EQ(a.shards[s].hbm_bytes, b.shards[s].hbm_bytes);
    }
  }
  EXPECT_TRUE(loaded->has_estimates());
  // The same plan gives the same bytes.
  EXPECT_EQ(dlrm_shard_plan_json(*loaded), dlrm_shard_plan_json(plan));
}

TEST_F(ShardPlanFile, errors_name_the_table_and_shard) {
  const std::string head =
      R"({"format": "orrery-dlrm-shard-plan", "world_size": 4, "local_world_size": 2, "tables": [)";
  EXPECT_NE(error_of(head + R"({"name": "a", "rows": 10, "dim": 8, "sharding": "tw", "shards": [)"
                            R"({"rank": 4, "rows": [0, 10], "cols": [0, 8]}]}]})")
                .find("table 0 ('a') shard 0: rank 4 is outside the world of 4 ranks"),
            std::string::npos);
  EXPECT_NE(error_of(head + R"({"name": "r", "rows": 10, "dim": 8, "sharding": "rw", "shards": [)"
                            R"({"rank": 0, "rows": [0, 5], "cols": [0, 8]},)"
                            R"({"rank": 1, "rows": [5, 5], "cols": [0, 8]}]}]})")
                .find("table 0 ('r'): 2 shards, expected 4 (rw sharding)"),
            std::string::npos);
  EXPECT_NE(error_of(head + R"({"name": "c", "rows": 10, "dim": 8, "sharding": "cw", "shards": [)"
                            R"({"rank": 0, "rows": [0, 10], "cols": [0, 4]},)"
                            R"({"rank": 1, "rows": [0, 10], "cols": [5, 3]}]}]})")
                .find("table 0 ('c') shard 1: columns start at 5, expected 4"),
            std::string::npos);
  EXPECT_NE(error_of(head + R"({"name": "h", "rows": 10, "dim": 8, "sharding": "twcw", "shards": [)"
                            R"({"rank": 0, "rows": [0, 10], "cols": [0, 4]},)"
                            R"({"rank": 2, "rows": [0, 10], "cols": [4, 4]}]}]})")
                .find("table 0 ('h') shard 1: rank 2 is on host 1, shard 0 on host 0"),
            std::string::npos);
  EXPECT_NE(error_of(head + R"({"name": "k", "rows": 10, "dim": 8, "sharding": "tw", "colour": 1, )"
                            R"("shards": []}]})")
                .find("table 0 ('k'): unknown key 'colour'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"world_size": 4, "tables": [], "extra": 1})").find("key 'extra'"),
            std::string::npos);
  EXPECT_NE(error_of(head + R"({"name": "s", "rows": 10, "dim": 8, "sharding": "zigzag", )"
                            R"("shards": []}]})")
                .find("unknown sharding type 'zigzag'"),
            std::string::npos);
}

DlrmGenerator placed_generator(uint64_t global_batch = 64) {
  Expected<DlrmModel> model = resolve_dlrm_model("dlrm-kaggle");
  EXPECT_TRUE(model);
  DlrmPlan plan;
  plan.ranks = 4;
  plan.global_batch = global_batch;
  plan.placement = std::make_shared<const DlrmShardPlan>(sample_plan());
  Expected<DlrmGenerator> generator = DlrmGenerator::create(*model, plan);
  EXPECT_TRUE(generator) << generator.error().message();
  return std::move(*generator);
}

TEST(DlrmPlacement, exchange_sizes_by_hand) {
  // B = 64, b = 16 per rank. Per sample, rank 1 serves t0 (2 lookups, 16 columns); ranks 0 and 3
  // t1's blocks (3 lookups, 16 columns each); host 1 t3 (4 lookups over its 2 ranks, 8 columns);
  // every rank a 1/4 share of t2 (5 lookups).
  const DlrmGenerator generator = placed_generator();
  const DlrmPlacedComm r0 = dlrm_placed_comm(generator.model(), generator.plan(), 0);
  EXPECT_EQ(r0.index_to[0], 0u);
  EXPECT_EQ(r0.index_to[1], 52u * 8);    // 16 x (2 + 5/4) = 52 indices
  EXPECT_EQ(r0.index_to[2], 52u * 8);    // 16 x (4/2 + 5/4)
  EXPECT_EQ(r0.index_to[3], 100u * 8);   // 16 x (3 + 4/2 + 5/4)
  EXPECT_EQ(r0.index_from[1], 68u * 8);  // every peer sends rank 0 16 x (3 + 5/4)
  // Pooled vectors to rank 0: from rank 1 its t0 columns (16 x 16 x 4 B); from rank 2 (host 1,
  // local 0, like rank 0) the t3 sums it holds after the host reduce-scatter (16 x 8 x 4 B); from
  // rank 3 (local 1) its t1 block only.
  EXPECT_EQ(r0.output_from[1], 16u * 16 * 4);
  EXPECT_EQ(r0.output_from[2], 16u * 8 * 4);
  EXPECT_EQ(r0.output_from[3], 16u * 16 * 4);
  EXPECT_EQ(r0.output_to[1], 16u * 16 * 4);  // rank 0's t1 block
  const DlrmPlacedComm r3 = dlrm_placed_comm(generator.model(), generator.plan(), 3);
  EXPECT_EQ(r3.output_to[1], 16u * (16 + 8) * 4);  // t1 block and t3 sums (same local rank 1)
  EXPECT_EQ(r3.host_reduce_scatter, 64u * 8 * 4);  // B x t3's 8 columns
  EXPECT_EQ(r3.host_all_gather, 32u * 8 * 4);      // B / Lw samples
  EXPECT_EQ(r3.host_group, 3u);                    // groups: 1 every rank, 2 host 0, 3 host 1
  EXPECT_EQ(r0.host_reduce_scatter, 0u);           // host 0 holds no TWRW table
  EXPECT_EQ(r0.row_reduce_scatter, 64u * 16 * 4);  // B x t2's 16 columns
  EXPECT_EQ(r0.row_all_gather, 16u * 16 * 4);
  EXPECT_EQ(r0.dp_all_reduce, 50u * 16 * 4);
  // Shards each rank holds: rank 3 has t1's second block, a t2 row block, a t3 row block and the
  // t4 replica; TW/CW blocks see every sample's lookups, row blocks a share.
  const std::vector<TableShard> shards = table_shards(generator.model(), generator.plan(), 3);
  ASSERT_EQ(shards.size(), 4u);
  EXPECT_EQ(shards[0].table, 1u);
  EXPECT_EQ(shards[0].lookups, 64u * 3);
  EXPECT_EQ(shards[1].lookups, 64u * 5 / 4);
  EXPECT_EQ(shards[2].lookups, 64u * 4 / 2);
  EXPECT_EQ(shards[3].lookups, 16u);
  EXPECT_EQ(shards[3].outputs, 16u);
}

TEST(DlrmPlacement, every_send_has_its_receive) {
  const DlrmGenerator generator = placed_generator();
  // (src, dst, tag) -> bytes, from the sends and from the receives.
  std::map<std::tuple<int, int, int>, uint64_t> sent, received;
  std::map<std::string, int> collectives;
  for (uint32_t rank = 0; rank < 4; ++rank) {
    const RankProgram program = generator.build(rank);
    for (size_t index = 0; index < program.size(); ++index) {
      const RankProgram::Node& node = program.node(static_cast<ProgRef>(index));
      if (node.kind == ProgKind::kSend) {
        EXPECT_TRUE(sent.emplace(std::tuple{int(rank), node.peer, node.tag}, node.bytes).second);
      } else if (node.kind == ProgKind::kRecv) {
        EXPECT_TRUE(
            received.emplace(std::tuple{node.peer, int(rank), node.tag}, node.bytes).second);
      } else if (node.kind == ProgKind::kCollective) {
        ++collectives[node.name + "@" + std::to_string(node.group)];
      }
    }
  }
  EXPECT_EQ(sent, received);
  // Indices between all 12 ordered pairs; pooled vectors (and gradients back) for 10: rank 2 holds
  // only TWRW rows, whose sums go across hosts to rank 0 alone.
  EXPECT_EQ(sent.size(), 12u + 10 + 10);
  // The host collectives only on host 1 (group 3), the RW ones on every rank.
  EXPECT_EQ(collectives["emb.host_reduce_scatter@3"], 2);
  EXPECT_EQ(collectives["emb.host_all_gather@3"], 2);
  EXPECT_EQ(collectives["emb.row_reduce_scatter@1"], 4);
  EXPECT_EQ(collectives["emb.dp_grad_all_reduce@1"], 4);
}

TEST(DlrmPlacement, collectives_run_in_one_order_on_every_rank) {
  // Each collective has a control dependency on the one created before it (by id on the rank:
  // the main lane's, then the background lane's gradient all-reduces), so no two ranks can take
  // two collectives in different orders.
  const DlrmGenerator generator = placed_generator();
  for (uint32_t rank = 0; rank < 4; ++rank) {
    const RankProgram program = generator.build(rank);
    std::vector<ChakraProtoMsg::Node> collectives;
    ASSERT_TRUE(program.emit([&](const ChakraProtoMsg::Node& node) {
      if (node.type() == ChakraProtoMsg::COMM_COLL_NODE) collectives.push_back(node);
      return Status::ok();
    }));
    ASSERT_GE(collectives.size(), 4u);
    size_t chained = 0;
    for (size_t index = 1; index < collectives.size(); ++index) {
      for (uint64_t parent : collectives[index].ctrl_deps()) {
        for (size_t before = 0; before < collectives.size(); ++before) {
          if (collectives[before].id() == parent) ++chained;
        }
      }
    }
    EXPECT_EQ(chained, collectives.size() - 1) << "rank " << rank;
  }
}

TEST(DlrmPlacement, compute_comes_from_the_plan_estimates_scaled_to_the_batch) {
  // Rank 3: t1 0.25 + t2 0.125 + t3 0.0625 + t4 0.03125 = 0.46875 ms forward at the plan's 16
  // samples per rank; at 32 per rank twice that: 937.5 us -> 938 (rounded), backward 1,875.
  const DlrmGenerator generator = placed_generator(128);
  const RankProgram program = generator.build(3);
  bool lookup = false;
  bool update = false;
  for (size_t index = 0; index < program.size(); ++index) {
    const RankProgram::Node& node = program.node(static_cast<ProgRef>(index));
    if (node.name == "emb.lookup") {
      lookup = true;
      EXPECT_EQ(node.duration_us, 938u);
      EXPECT_EQ(node.flops, 0u);
    }
    if (node.name == "emb.update") {
      update = true;
      EXPECT_EQ(node.duration_us, 1875u);
    }
  }
  EXPECT_TRUE(lookup && update);
  // The model's tables are the plan's: the interaction sees 5 tables.
  EXPECT_EQ(generator.model().tables.size(), 5u);
  EXPECT_EQ(generator.model().interaction_width(), 16u + 6 * 5 / 2);
}

TEST(DlrmPlacement, plan_and_flags_must_agree) {
  Expected<DlrmModel> model = resolve_dlrm_model("dlrm-kaggle");
  ASSERT_TRUE(model);
  DlrmPlan plan;
  plan.ranks = 8;
  plan.global_batch = 64;
  plan.placement = std::make_shared<const DlrmShardPlan>(sample_plan());
  Expected<DlrmGenerator> generator = DlrmGenerator::create(*model, plan);
  ASSERT_FALSE(generator);
  EXPECT_NE(generator.error().message().find("--ranks 8 differs from the plan's world size 4"),
            std::string::npos);
}

}  // namespace dlrm_shard_plan_test
}  // namespace orrery::gen
