// `orrery shard` as a user runs it: `estimate --json` prints TorchRec's test vectors, `plan` reads
// a CSV of tables and writes a plan that `orrery gen dlrm --plan` turns into traces that validate
// strictly and run, and bad input gives one message naming what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "chakra/trace_builder.h"
#include "e2e/run_command.h"

namespace orrery {
namespace shard_cli_test {

using test::TempDir;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

void expect_clean_failure(const CommandResult& result, const std::string& needle) {
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_EQ(result.err.rfind("orrery: error: ", 0), 0u) << result.err;
  EXPECT_CONTAINS(result.err, needle);
}

void expect_rel(const nlohmann::json& doc, const char* key, double expected) {
  ASSERT_TRUE(doc.contains(key)) << key;
  const double actual = doc.at(key).get<double>();
  EXPECT_LE(std::abs(actual - expected), 1e-9 * std::abs(expected)) << key << " = " << actual;
}

TEST(ShardCli, estimate_json_prints_torchrec_vectors) {
  // TorchRec's test table: 100 x 10 fp32, 2 ranks, batch 512.
  const CommandResult rw = run_orrery({"shard", "estimate", "--rows", "100", "--dim", "10",
                                       "--sharding", "rw", "--kernel", "fused", "--world-size", "2",
                                       "--local-world-size", "2", "--batch", "512", "--json"});
  ASSERT_EQ(rw.exit_code, 0) << rw.err;
  const nlohmann::json doc = nlohmann::json::parse(rw.out);
  expect_rel(doc, "fwd_compute", 6.804365245261984e-05);
  expect_rel(doc, "fwd_comms", 6.357828776041667e-05);
  expect_rel(doc, "bwd_compute", 1.360873049052397e-04);
  expect_rel(doc, "bwd_comms", 1.6798276699240525e-04);
  ASSERT_EQ(doc.at("shards").size(), 2u);
  EXPECT_EQ(doc.at("shards")[1].at("rows"), (nlohmann::json{50, 50}));
  // 50 rows x 10 x 4 B, the input (512 / 2 x 2 lookups x 8 B) and output (512 x 2 x 10 x 4 B).
  EXPECT_EQ(doc.at("hbm").get<uint64_t>(), 2000u + 4096 + 40960);
  const CommandResult uvm = run_orrery(
      {"shard", "estimate", "--rows", "100", "--dim", "10", "--kernel", "uvm", "--json"});
  ASSERT_EQ(uvm.exit_code, 0) << uvm.err;
  const nlohmann::json tw = nlohmann::json::parse(uvm.out);
  expect_rel(tw, "fwd_compute", 0.09179115295410156);
  EXPECT_EQ(tw.at("sharding"), "tw");
  EXPECT_EQ(tw.at("ddr").get<uint64_t>(), 4000u);
  const CommandResult dp = run_orrery(
      {"shard", "estimate", "--rows", "100", "--dim", "10", "--sharding", "dp", "--json"});
  ASSERT_EQ(dp.exit_code, 0) << dp.err;
  expect_rel(nlohmann::json::parse(dp.out), "bwd_comms", 2.25593945387348e-04);
}

TEST(ShardCli, estimate_table_and_bad_flags) {
  const CommandResult text =
      run_orrery({"shard", "estimate", "--rows", "1000000", "--dim", "256", "--sharding", "cw",
                  "--world-size", "16", "--local-world-size", "8"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_CONTAINS(text.out, "cw sharding, fused kernel; 16 ranks (2 hosts of 8)");
  EXPECT_CONTAINS(text.out, "0-1 each   1,000,000 rows x 128 cols");
  expect_clean_failure(
      run_orrery({"shard", "estimate", "--rows", "10", "--dim", "8", "--sharding", "zigzag"}),
      "--sharding: unknown sharding type 'zigzag'");
  expect_clean_failure(run_orrery({"shard", "estimate", "--rows", "10", "--dim", "8", "--sharding",
                                   "dp", "--kernel", "uvm"}),
                       "--sharding dp keeps a replica in HBM");
  expect_clean_failure(run_orrery({"shard", "estimate", "--rows", "10", "--dim", "8",
                                   "--world-size", "12", "--local-world-size", "8"}),
                       "--world-size 12 is not a multiple of --local-world-size 8");
  const CommandResult help = run_orrery({"shard", "estimate", "--help"});
  for (const char* flag : {"--rows", "--dim", "--pooling", "--dtype", "--sharding", "--kernel",
                           "--world-size", "--local-world-size", "--batch", "--json"}) {
    EXPECT_CONTAINS(help.out, flag);
  }
}

TEST(ShardCli, plan_gen_and_run) {
  TempDir dir;
  {
    std::ofstream csv(dir.file("tables.csv"));
    csv << "name,rows,dim,pooling\n"
           "ads,2000000,16,20\nusers,500000,16,5\nitems,100000,16,40\npages,20000,16,3\n"
           "tiny,100,16,1\nzip,40000,16,1\n";
  }
  const CommandResult plan =
      run_orrery({"shard", "plan", "--tables", dir.file("tables.csv"), "--world-size", "8",
                  "--local-world-size", "4", "--batch", "256", "-o", dir.file("plan.json")});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_CONTAINS(plan.out, "tables: 6 from ");
  EXPECT_CONTAINS(plan.out, "cluster: 8 ranks (2 hosts of 4), batch 256 per rank");
  EXPECT_CONTAINS(plan.out, "lower bound");
  EXPECT_CONTAINS(plan.out, "wrote " + dir.file("plan.json"));
  const CommandResult summary =
      run_orrery({"shard", "plan", "--tables", dir.file("tables.csv"), "--world-size", "8",
                  "--local-world-size", "4", "--batch", "256", "--json"});
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  const nlohmann::json doc = nlohmann::json::parse(summary.out);
  EXPECT_EQ(doc.at("ranks").size(), 8u);
  EXPECT_GE(doc.at("rating").get<double>(), doc.at("lower_bound").get<double>());
  // The CSV names no MLPs: gen needs --model.
  expect_clean_failure(
      run_orrery({"gen", "dlrm", "--plan", dir.file("plan.json"), "-o", dir.file("d/d")}),
      "give --model for the MLPs");
  const CommandResult gen = run_orrery({"gen", "dlrm", "--plan", dir.file("plan.json"), "--model",
                                        "dlrm-kaggle", "-o", dir.file("d/d")});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  EXPECT_CONTAINS(gen.out, "plan: 8 ranks (4 per host), tables placed by");
  EXPECT_CONTAINS(gen.out, "batch 2,048 samples (256 per rank)");
  EXPECT_CONTAINS(gen.out, "from the plan's estimates");
  EXPECT_CONTAINS(gen.out, "wrote 8 rank files");
  const CommandResult validate =
      run_orrery({"trace", "validate", "--strict", dir.file("d/d.0.et")});
  EXPECT_EQ(validate.exit_code, 0) << validate.out << validate.err;
  {
    std::ofstream(dir.file("sys.json"))
        << R"({"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 4, "all-reduce-implementation": ["ring", "ring"],
        "all-gather-implementation": ["ring", "ring"], "reduce-scatter-implementation": ["ring", "ring"],
        "all-to-all-implementation": ["direct", "direct"], "collective-optimization": "localBWAware",
        "local-mem-bw": 2000, "roofline-enabled": 1, "peak-perf": 300})";
    std::ofstream(dir.file("net.yml"))
        << "topology: [ Switch, Switch ]\nnpus_count: [ 4, 2 ]\nbandwidth: [ 600, 25 ]\n"
           "latency: [ 500, 2000 ]\n";
  }
  const CommandResult run =
      run_orrery({"run", "-w", dir.file("d/d"), "-g", dir.file("d/d.json"), "-s",
                  dir.file("sys.json"), "-n", dir.file("net.yml"), "-q"});
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  EXPECT_CONTAINS(run.out, "simulated time");
  // Flags the plan decides are refused.
  expect_clean_failure(run_orrery({"gen", "dlrm", "--plan", dir.file("plan.json"), "--model",
                                   "dlrm-kaggle", "--sharding", "row", "-o", dir.file("e/e")}),
                       "--sharding does not apply with --plan");
  expect_clean_failure(run_orrery({"gen", "dlrm", "--plan", dir.file("plan.json"), "--model",
                                   "dlrm-kaggle", "--ranks", "16", "-o", dir.file("e/e")}),
                       "--ranks 16 differs from the plan's world size 8");
}

TEST(ShardCli, infeasible_plan_names_the_table_and_missing_memory) {
  TempDir dir;
  {
    std::ofstream csv(dir.file("big.csv"));
    csv << "name,rows,dim\nsmall,1000,64\nhuge,100000000,256\n";
  }
  const CommandResult plan = run_orrery({"shard", "plan", "--tables", dir.file("big.csv"),
                                         "--world-size", "2", "--hbm", "16GiB", "--ddr", "32GiB"});
  expect_clean_failure(plan, "table 'huge'");
  EXPECT_CONTAINS(plan.err, "missing)");
  const CommandResult csv = run_orrery({"shard", "plan", "--tables", dir.file("missing.csv")});
  expect_clean_failure(csv, "missing.csv: cannot open");
  {
    std::ofstream bad(dir.file("bad.csv"));
    bad << "name,rows,dim\na,many,8\n";
  }
  expect_clean_failure(run_orrery({"shard", "plan", "--tables", dir.file("bad.csv")}),
                       "bad.csv:2: column 'rows': expected a positive integer, found 'many'");
  expect_clean_failure(run_orrery({"shard", "plan", "--world-size", "2"}),
                       "give the tables with --model");
}

}  // namespace shard_cli_test
}  // namespace orrery
