// orrery sweep's library: a sweep run on a thread pool gives, row for row, what each point gives
// evaluated alone; the rules and the memory reject points with their reason; a database is resumed
// without repeating a point; bad sweep files get one error naming the file, the line and the key.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>

#include <fmt/format.h>
#include <string>
#include <vector>

#include "design/sweep_answers.h"
#include "design/sweep_eval.h"
#include "design/sweep_file.h"
#include "design/sweep_run.h"
#include "design/sweep_space.h"
#include "design/sweep_store.h"

namespace orrery::design {
namespace sweep_test {

const std::string kSmall = std::string(ORRERY_TEST_DATA_DIR) + "/sweep/small.yml";

std::string temp_db(const std::string& name) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("orrery-sweep-test-" + std::to_string(::getpid()) + "-" + name + ".sqlite");
  std::filesystem::remove(path);
  return path.string();
}

StoredSweep run_into(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                     const std::string& db, size_t threads) {
  Expected<std::unique_ptr<SweepStore>> store = SweepStore::open(db, spec, points.size());
  EXPECT_TRUE(store) << store.error().message();
  SweepRunOptions options;
  options.threads = threads;
  Expected<SweepProgress> progress = run_sweep(spec, points, **store, options);
  EXPECT_TRUE(progress) << progress.error().message();
  store->reset();
  Expected<StoredSweep> stored = read_sweep_db(db);
  EXPECT_TRUE(stored) << stored.error().message();
  return *stored;
}

TEST(Sweep, PoolRunEqualsEveryPointAlone) {
  Expected<SweepSpec> spec = load_sweep_file(kSmall);
  ASSERT_TRUE(spec) << spec.error().message();
  Expected<std::vector<SweepPoint>> points = expand_sweep(*spec);
  ASSERT_TRUE(points) << points.error().message();
  // 2 HBM sizes x 2 bandwidths x (tp {1, 4} x pp {1, 2} x micro-batch {1, 2}, and tp 3 x pp
  // {1, 2}: no dp divides the rest, one refused point per branch).
  ASSERT_EQ(points->size(), 40u);
  const std::string db = temp_db("pool");
  const StoredSweep stored = run_into(*spec, *points, db, 2);
  ASSERT_EQ(stored.rows.size(), points->size());
  uint64_t ok = 0, rejected = 0;
  for (const SweepPoint& point : *points) {
    const PointResult alone = evaluate_point(*spec, point, 1);
    const PointResult& row = stored.rows[point.id].result;
    EXPECT_EQ(row, alone) << "point " << point.id;
    EXPECT_EQ(stored.rows[point.id].axes, axis_values(*spec, point)) << "point " << point.id;
    if (row.status == PointStatus::kOk) {
      ++ok;
      EXPECT_GT(row.iteration_ns, 0);
      EXPECT_GE(row.iteration_ns, row.compute_ns);
      EXPECT_GT(row.events, 0u);
    } else if (row.status == PointStatus::kRejected) {
      ++rejected;
      EXPECT_FALSE(row.reason.empty());
    }
  }
  EXPECT_GT(ok, 0u);
  EXPECT_GT(rejected, 0u);
  // Faster links on the data-parallel dimension never make the best plan slower.
  const SweepAnswers answers = answer_sweep(stored);
  ASSERT_FALSE(answers.best.empty());
  EXPECT_GE(answers.cluster_spread, 1.0);
  std::filesystem::remove(db);
}

TEST(Sweep, ThreadCountDoesNotChangeRows) {
  Expected<SweepSpec> spec = load_sweep_file(kSmall);
  ASSERT_TRUE(spec);
  Expected<std::vector<SweepPoint>> points = expand_sweep(*spec);
  ASSERT_TRUE(points);
  const std::string one = temp_db("one"), two = temp_db("two");
  const StoredSweep a = run_into(*spec, *points, one, 1);
  const StoredSweep b = run_into(*spec, *points, two, 2);
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (size_t i = 0; i < a.rows.size(); ++i) {
    EXPECT_EQ(a.rows[i].axes, b.rows[i].axes) << i;
    EXPECT_EQ(a.rows[i].result, b.rows[i].result) << i;
  }
  std::filesystem::remove(one);
  std::filesystem::remove(two);
}

TEST(Sweep, RejectionsSayWhy) {
  Expected<SweepSpec> spec = load_sweep_file(kSmall);
  ASSERT_TRUE(spec);
  Expected<std::vector<SweepPoint>> points = expand_sweep(*spec);
  ASSERT_TRUE(points);
  bool divisibility = false, batch = false, memory = false;
  for (const SweepPoint& point : *points) {
    const PointResult result = evaluate_point(*spec, point);
    if (result.status != PointStatus::kRejected) continue;
    divisibility = divisibility ||
                   result.reason.find("tp x cp x pp = 3 does not divide the 16 accelerators") !=
                       std::string::npos;
    batch = batch || result.reason.find("--global-batch 16 is smaller than --micro-batch x --dp") !=
                         std::string::npos;
    if (point.cluster.hbm_bytes == 512ull << 20 && point.reason.empty() &&
        result.reason.find("GiB") != std::string::npos) {
      memory = true;
      // The memory that does not fit is counted.
      EXPECT_GT(result.need_bytes, point.cluster.hbm_bytes) << result.reason;
    }
  }
  EXPECT_TRUE(divisibility);
  EXPECT_TRUE(batch);
  EXPECT_TRUE(memory);
}

TEST(Sweep, ResumeRunsOnlyTheMissingPoints) {
  Expected<SweepSpec> spec = load_sweep_file(kSmall);
  ASSERT_TRUE(spec);
  Expected<std::vector<SweepPoint>> points = expand_sweep(*spec);
  ASSERT_TRUE(points);
  const std::string db = temp_db("resume");
  // A first run that stopped after the first 20 points.
  std::vector<SweepPoint> first(points->begin(), points->begin() + 20);
  {
    Expected<std::unique_ptr<SweepStore>> store = SweepStore::open(db, *spec, points->size());
    ASSERT_TRUE(store);
    std::vector<PointResult> results;
    for (const SweepPoint& p : first) results.push_back(evaluate_point(*spec, p));
    ASSERT_TRUE((*store)->write(first, results));
  }
  Expected<std::unique_ptr<SweepStore>> store = SweepStore::open(db, *spec, points->size());
  ASSERT_TRUE(store);
  SweepRunOptions options;
  options.threads = 2;
  Expected<SweepProgress> progress = run_sweep(*spec, *points, **store, options);
  ASSERT_TRUE(progress) << progress.error().message();
  EXPECT_EQ(progress->stored, 20u);
  EXPECT_EQ(progress->done, points->size());
  EXPECT_EQ(progress->ok + progress->rejected + progress->failed, points->size() - 20);
  store->reset();
  Expected<StoredSweep> stored = read_sweep_db(db);
  ASSERT_TRUE(stored);
  ASSERT_EQ(stored->rows.size(), points->size());
  for (size_t i = 0; i < stored->rows.size(); ++i) EXPECT_EQ(stored->rows[i].result.id, i);
  std::filesystem::remove(db);
}

TEST(Sweep, DatabaseOfAnotherSweepIsRefused) {
  Expected<SweepSpec> spec = load_sweep_file(kSmall);
  ASSERT_TRUE(spec);
  const std::string db = temp_db("other");
  ASSERT_TRUE(SweepStore::open(db, *spec, 1));
  Expected<SweepSpec> other = parse_sweep_file(kSmall, spec->text + "\n# changed\n");
  ASSERT_TRUE(other);
  Expected<std::unique_ptr<SweepStore>> store = SweepStore::open(db, *other, 1);
  ASSERT_FALSE(store);
  EXPECT_NE(store.error().message().find(db), std::string::npos) << store.error().message();
  std::filesystem::remove(db);
}

// Runs `sql` on the database at `path`.
void tamper(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  sqlite3_close(db);
}

TEST(Sweep, ADamagedDatabaseIsOneErrorNamingItAndWhatIsWrong) {
  // std::stoull and std::stod threw on these meta values and ended `orrery sweep report`; an
  // unknown status counted as a rejection; an infinite time ranked first or last.
  Expected<SweepSpec> spec = load_sweep_file(kSmall);
  ASSERT_TRUE(spec);
  Expected<std::vector<SweepPoint>> points = expand_sweep(*spec);
  ASSERT_TRUE(points);
  const std::string good = temp_db("good");
  const StoredSweep stored = run_into(*spec, *points, good, 1);
  uint64_t ok = 0;
  while (ok < stored.rows.size() && stored.rows[ok].result.status != PointStatus::kOk) ++ok;
  ASSERT_LT(ok, stored.rows.size());
  const std::string db = temp_db("damaged");
  for (const auto& [sql, message] : std::vector<std::pair<std::string, std::string>>{
           {"UPDATE meta SET value = '99999999999999999999' WHERE key = 'points'",
            "meta 'points' is '99999999999999999999', not a whole number"},
           {"UPDATE meta SET value = '16x' WHERE key = 'global_batch'",
            "meta 'global_batch' is '16x', not a whole number"},
           {"UPDATE meta SET value = '1000000' WHERE key = 'dimensions'",
            "meta 'dimensions' is '1000000', not a whole number up to 32767"},
           {"UPDATE meta SET value = '1e6,x' WHERE key = 'budgets'",
            "meta 'budgets' entry 'x' is not a number"},
           {fmt::format("UPDATE points SET status = 'done' WHERE id = {}", ok),
            fmt::format("point {}: status 'done' is not ok, rejected or failed", ok)},
           {fmt::format("UPDATE points SET iteration_ns = 1e999 WHERE id = {}", ok),
            fmt::format("point {}: an infinite iteration time, cost or throughput", ok)}}) {
    std::filesystem::copy_file(good, db, std::filesystem::copy_options::overwrite_existing);
    tamper(db, sql);
    Expected<StoredSweep> read = read_sweep_db(db);
    ASSERT_FALSE(read) << sql;
    EXPECT_EQ(read.error().message(), db + ": " + message);
  }
  // Budgets are read back as written.
  std::filesystem::copy_file(good, db, std::filesystem::copy_options::overwrite_existing);
  tamper(db, "UPDATE meta SET value = '1000000,2.5e6' WHERE key = 'budgets'");
  Expected<StoredSweep> read = read_sweep_db(db);
  ASSERT_TRUE(read) << read.error().message();
  EXPECT_EQ(read->budgets, (std::vector<double>{1e6, 2.5e6}));
  std::filesystem::remove(good);
  std::filesystem::remove(db);
}

TEST(Sweep, DlrmShardingPlans) {
  const std::string text =
      "workload: {dlrm: dlrm-kaggle, global_batch: 2048}\n"
      "cluster:\n"
      "  accelerators: [8, 16]\n"
      "  peak_tflops: 312\n"
      "  hbm_capacity: 80GiB\n"
      "  hbm_bandwidth: 2039\n"
      "  network: [{topology: Switch, size: rest, bandwidth: [25, 100]}]\n"
      "plan: {sharding: all}\n";
  Expected<SweepSpec> spec = parse_sweep_file("dlrm.yml", text);
  ASSERT_TRUE(spec) << spec.error().message();
  Expected<std::vector<SweepPoint>> points = expand_sweep(*spec);
  ASSERT_TRUE(points);
  ASSERT_EQ(points->size(), 12u);  // 2 sizes x 2 bandwidths x table, row, column
  const std::string db = temp_db("dlrm");
  const StoredSweep stored = run_into(*spec, *points, db, 2);
  ASSERT_EQ(stored.rows.size(), 12u);
  for (const SweepPoint& point : *points) {
    const PointResult& row = stored.rows[point.id].result;
    EXPECT_EQ(row, evaluate_point(*spec, point)) << point.id;
    EXPECT_EQ(row.status, PointStatus::kOk) << row.reason;
  }
  // The same plan on 4x the bandwidth is faster (the embedding all-to-all is exposed).
  EXPECT_LT(stored.rows[3].result.iteration_ns, stored.rows[0].result.iteration_ns);
  std::filesystem::remove(db);
}

// The cuts fall where a group of the plan ends inside a Switch or FullyConnected dimension, nest,
// and keep each part's kind, bandwidth and latency; rings and cuts that do not divide are left.
TEST(SweepNetwork, CutsFallWhereThePlansGroupsEndInsideADimension) {
  const DimensionPoint node{"Switch", 8, 300, 700}, fabric{"Switch", 128, 25, 3000};
  const auto sizes = [](const SplitNetwork& s) {
    std::vector<uint32_t> out;
    for (const DimensionPoint& d : s.dims) out.push_back(d.size);
    return out;
  };
  // tp 4, dp 256 on 8-GPU nodes: the data-parallel group is 2 in the node x 128 nodes.
  const SplitNetwork dp = split_network({node, fabric}, {4, 4, 4, 1024});
  EXPECT_EQ(sizes(dp), (std::vector<uint32_t>{4, 2, 128}));
  EXPECT_EQ(dp.original, (std::vector<size_t>{0, 0, 1}));
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(dp.dims[k].topology, "Switch");
    EXPECT_EQ(dp.dims[k].bandwidth_gbps, 300);
    EXPECT_EQ(dp.dims[k].latency_ns, 700);
  }
  EXPECT_EQ(dp.dims[2].bandwidth_gbps, 25);
  // tp 2, cp 2: two cuts in the node; the last boundary is the whole fabric (no cut).
  EXPECT_EQ(sizes(split_network({node, fabric}, {2, 4, 4, 1024})),
            (std::vector<uint32_t>{2, 2, 2, 128}));
  // Groups that fill the node: nothing to cut. tp 16 ends inside the fabric: it is cut there.
  EXPECT_EQ(sizes(split_network({node, fabric}, {8, 8, 8, 1024})), (std::vector<uint32_t>{8, 128}));
  EXPECT_EQ(sizes(split_network({node, fabric}, {16, 16, 16, 1024})),
            (std::vector<uint32_t>{8, 2, 64}));
  // A ring keeps its hops; 3 does not divide 8; 6 does not nest in 4.
  EXPECT_EQ(sizes(split_network({{"Ring", 8, 300, 700}, fabric}, {4, 4, 4, 1024})),
            (std::vector<uint32_t>{8, 128}));
  EXPECT_EQ(sizes(split_network({node, fabric}, {3, 3, 3, 1024})), (std::vector<uint32_t>{8, 128}));
  EXPECT_EQ(sizes(split_network({{"FullyConnected", 12, 300, 700}}, {4, 6, 6, 12})),
            (std::vector<uint32_t>{4, 3}));
}

// With tp 4 on 8-GPU nodes the data-parallel ring leaves the node; its time depends on the
// network between nodes, which carries its traffic. (Unsplit, ASTRA-sim's lowest-dimension rule
// would time those hops on the node's switch: the same time at any fabric bandwidth, 0 use.)
TEST(Sweep, DataParallelGroupsAcrossNodesPayTheNetworkBetweenThem) {
  const std::string text =
      "workload: {llm: small_model.json, global_batch: 16}\n"
      "cluster:\n"
      "  accelerators: 32\n"
      "  peak_tflops: 312\n"
      "  hbm_capacity: 80GiB\n"
      "  hbm_bandwidth: 2039\n"
      "  network:\n"
      "    - {topology: Switch, size: 8, bandwidth: 300, latency: 700}\n"
      "    - {topology: Switch, size: rest, bandwidth: [5, 50], latency: 3000}\n"
      "plan: {tp: [4], pp: [1], micro_batch: [1], zero: [1, 3]}\n";
  const std::string file = std::string(ORRERY_TEST_DATA_DIR) + "/sweep/split.yml";
  Expected<SweepSpec> spec = parse_sweep_file(file, text);
  ASSERT_TRUE(spec) << spec.error().message();
  Expected<std::vector<SweepPoint>> points = expand_sweep(*spec);
  ASSERT_TRUE(points);
  ASSERT_EQ(points->size(), 4u);
  std::vector<PointResult> rows;
  for (const SweepPoint& point : *points) {
    rows.push_back(evaluate_point(*spec, point));
    ASSERT_EQ(rows.back().status, PointStatus::kOk) << rows.back().reason;
    EXPECT_EQ(point.plan.dp, 8u);
    ASSERT_EQ(rows.back().dim_utilization.size(), 2u);
    EXPECT_GT(rows.back().dim_utilization[1], 0.0) << point.id;
    EXPECT_LE(rows.back().dim_utilization[1], 1.0) << point.id;
  }
  const auto at = [&](uint32_t zero, double gbps) -> const PointResult& {
    for (size_t i = 0; i < points->size(); ++i)
      if ((*points)[i].plan.zero == zero && (*points)[i].cluster.network[1].bandwidth_gbps == gbps)
        return rows[i];
    ADD_FAILURE() << "no point with zero " << zero << " at " << gbps;
    return rows[0];
  };
  const size_t dp = static_cast<size_t>(CommKind::kData);
  for (uint32_t zero : {1u, 3u}) {
    EXPECT_GT(at(zero, 5).iteration_ns, at(zero, 50).iteration_ns) << zero;
    EXPECT_GT(at(zero, 5).exposed_ns[dp], at(zero, 50).exposed_ns[dp]) << zero;
    EXPECT_EQ(at(zero, 5).compute_ns, at(zero, 50).compute_ns) << zero;
  }
}

// Every bad file: the message names the file and the line of the mistake.
struct BadFile {
  const char* text;
  const char* expected;  // in the message, after "bad.yml:"
};

TEST(Sweep, BadFilesNameFileLineAndKey) {
  const std::string head =
      "workload:\n"                           // 1
      "  llm: gpt3-175b\n"                    // 2
      "  global_batch: 64\n"                  // 3
      "cluster:\n"                            // 4
      "  accelerators: 64\n"                  // 5
      "  peak_tflops: 312\n"                  // 6
      "  hbm_capacity: 80GiB\n"               // 7
      "  hbm_bandwidth: 2039\n"               // 8
      "  network:\n"                          // 9
      "    - {size: 8, bandwidth: 300}\n"     // 10
      "    - {size: rest, bandwidth: 25}\n";  // 11
  ASSERT_TRUE(parse_sweep_file("bad.yml", head))
      << parse_sweep_file("bad.yml", head).error().message();
  const std::vector<BadFile> cases = {
      {"plan:\n  tpp: [1, 2]\n", "13:"},
      {"plan:\n  tp: []\n", "13:"},
      {"plan:\n  tp: {from: 8, to: 1, step: 1}\n", "13:"},
      {"plan:\n  tp: [1, two]\n", "13:"},
      {"plan:\n  sharding: [row]\n", "13:"},
      {"costs:\n  accelerator: -5\n", "13:"},
      {"constraints:\n  memory: maybe\n", "13:"},
      {"plan:\n  tp: [1\n", "14:"},  // YAML of its own: where the parser stopped
  };
  for (const BadFile& c : cases) {
    Expected<SweepSpec> spec = parse_sweep_file("bad.yml", head + c.text);
    ASSERT_FALSE(spec) << c.text;
    const std::string message = spec.error().message();
    EXPECT_NE(message.find(std::string("bad.yml:") + c.expected), std::string::npos)
        << c.text << " -> " << message;
  }
  // `all` is for plan axes only; an unknown model is named.
  Expected<SweepSpec> all =
      parse_sweep_file("bad.yml", std::string(head).replace(head.find("64\n  peak"), 2, "all"));
  ASSERT_FALSE(all);
  EXPECT_NE(all.error().message().find("bad.yml:5:"), std::string::npos) << all.error().message();
  Expected<SweepSpec> model =
      parse_sweep_file("bad.yml", std::string(head).replace(head.find("gpt3-175b"), 9, "gpt9"));
  ASSERT_FALSE(model);
  EXPECT_NE(model.error().message().find("bad.yml:2:"), std::string::npos)
      << model.error().message();
  EXPECT_NE(model.error().message().find("gpt9"), std::string::npos) << model.error().message();
}

}  // namespace sweep_test
}  // namespace orrery::design
