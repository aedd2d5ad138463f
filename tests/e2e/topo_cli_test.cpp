// `orrery topo` and `orrery run` on graph topology files, as a user runs them.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "e2e/run_command.h"

namespace orrery {
namespace topo_cli_test {

class TopoCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("orrery-topo-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(file(name)) << text;
    return file(name);
  }
  std::filesystem::path dir_;
};

TEST_F(TopoCli, generate_then_summarize_the_reference_clos) {
  const std::string clos = file("clos.yml");
  CommandResult gen = run_orrery({"topo", "generate", "clos2", "-o", clos});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  EXPECT_NE(gen.err.find("wrote " + clos + ": 128 NPUs, 16 switches, 384 links"), std::string::npos)
      << gen.err;
  CommandResult summary = run_orrery({"topo", "summarize", clos, "--json"});
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  // 8 leaves x 16 NPUs, 8 spines, 200 Gb/s everywhere: 4 leaves' 32 uplinks cut the halves.
  EXPECT_NE(summary.out.find("\"npus\": 128, \"switches\": 16, \"links\": 384, \"diameter\": 4"),
            std::string::npos)
      << summary.out;
  EXPECT_NE(summary.out.find("\"bisection_gbps\": 745.058"), std::string::npos) << summary.out;
  EXPECT_NE(summary.out.find("\"oversubscription\": 2,"), std::string::npos) << summary.out;
  CommandResult text = run_orrery({"topo", "summarize", clos});
  EXPECT_NE(text.out.find("oversubscription:  2:1"), std::string::npos) << text.out;
  CommandResult valid = run_orrery({"topo", "validate", clos});
  EXPECT_EQ(valid.exit_code, 0);
  EXPECT_NE(valid.out.find("valid: 128 NPUs, 16 switches, 384 links"), std::string::npos);
}

TEST_F(TopoCli, draw_a_small_torus_and_refuse_a_large_one) {
  const std::string torus = file("torus.yml");
  ASSERT_EQ(run_orrery({"topo", "generate", "torus", "dims=2x2", "-o", torus}).exit_code, 0);
  CommandResult dot = run_orrery({"topo", "draw", torus});
  ASSERT_EQ(dot.exit_code, 0) << dot.err;
  EXPECT_EQ(dot.out.rfind("graph \"torus-2x2\" {", 0), 0u) << dot.out;
  EXPECT_NE(dot.out.find("\"npu0\" -- \"npu1\" [label=\"25 GB/s, 500 ns\"];"), std::string::npos)
      << dot.out;
  const std::string rail = file("rail.yml");
  ASSERT_EQ(run_orrery({"topo", "generate", "rail", "-o", rail}).exit_code, 0);
  CommandResult big = run_orrery({"topo", "draw", rail});
  EXPECT_EQ(big.exit_code, 1);
  EXPECT_NE(big.err.find(rail + ": 1200 nodes is too many to draw legibly (limit 512"),
            std::string::npos)
      << big.err;
}

TEST_F(TopoCli, bad_input_gets_one_clear_message) {
  CommandResult param = run_orrery({"topo", "generate", "clos2", "leafs=4"});
  EXPECT_EQ(param.exit_code, 1);
  EXPECT_NE(param.err.find("orrery: error: generator clos2: unknown parameter 'leafs'"),
            std::string::npos)
      << param.err;
  CommandResult value = run_orrery({"topo", "generate", "rail", "nodes=100"});
  EXPECT_EQ(value.exit_code, 1);
  EXPECT_NE(value.err.find("rail: nodes (100) must be a multiple of nodes-per-leaf (32)"),
            std::string::npos)
      << value.err;
  const std::string broken = write(
      "broken.yml", "npus: 2\nswitches: [s]\nlinks:\n  - [npu0, s, 1, 1]\n  - [npu7, s, 1, 1]\n");
  CommandResult check = run_orrery({"topo", "validate", broken});
  EXPECT_EQ(check.exit_code, 1);
  EXPECT_NE(check.err.find(broken + ":5: link endpoint 'npu7' is neither an NPU"),
            std::string::npos)
      << check.err;
}

TEST_F(TopoCli, run_takes_a_graph_file_with_every_backend) {
  const std::string clos = file("clos.yml");
  ASSERT_EQ(run_orrery({"topo", "generate", "clos2", "leaves=2", "npus_per_leaf=4", "spines=2",
                        "-o", clos})
                .exit_code,
            0);
  ASSERT_EQ(run_orrery({"gen", "microbench", "--collective", "all-to-all", "--size", "1MiB",
                        "--ranks", "8", "-o", file("w/a2a")})
                .exit_code,
            0);
  const std::string sys = write(
      "sys.json",
      "{\"scheduling-policy\": \"LIFO\", \"endpoint-delay\": 10, \"active-chunks-per-dimension\": "
      "1, \"preferred-dataset-splits\": 1, \"all-reduce-implementation\": [\"ring\", \"ring\"], "
      "\"all-gather-implementation\": [\"ring\", \"ring\"], \"reduce-scatter-implementation\": "
      "[\"ring\", \"ring\"], \"all-to-all-implementation\": [\"direct\", \"direct\"], "
      "\"collective-optimization\": \"localBWAware\", \"local-mem-bw\": 1600}");
  for (const char* backend : {"analytical", "flow", "congestion-aware"}) {
    CommandResult run =
        run_orrery({"run", "-w", file("w/a2a"), "-s", sys, "-n", clos, "--backend", backend, "-q"});
    EXPECT_EQ(run.exit_code, 0) << backend << ": " << run.err;
    EXPECT_NE(run.out.find("1 collectives"), std::string::npos) << run.out;
  }
  CommandResult refused =
      run_orrery({"run", "-w", file("w/a2a"), "-s", sys, "-n", clos, "--backend", "garnet", "-q"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("garnet"), std::string::npos) << refused.err;
}

}  // namespace topo_cli_test
}  // namespace orrery
