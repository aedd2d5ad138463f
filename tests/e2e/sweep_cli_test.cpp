// orrery sweep end to end: the verb writes the database and CSV, a second run of the same command
// evaluates nothing, the same sweep under `mpirun -np 2` writes the same rows, the report is one
// page, and a bad sweep file gets one message naming its file and line (exit code 1).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "run_command.h"

namespace orrery {
namespace sweep_cli_test {

const std::string kSmall = std::string(ORRERY_TEST_DATA_DIR) + "/sweep/small.yml";

std::filesystem::path temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("orrery-sweep-e2e-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(SweepCli, RunsResumesAndExports) {
  const auto dir = temp_dir("run");
  const std::string db = (dir / "small.sqlite").string(), csv = (dir / "small.csv").string();
  CommandResult r = run_orrery({"sweep", kSmall, "--db", db, "--csv", csv, "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("small: 40 points; 0 stored before, 40 evaluated now"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("points/s"), std::string::npos) << r.out;
  const std::string table = read_whole_file(csv);
  size_t lines = 0;
  for (char c : table) lines += c == '\n' ? 1u : 0u;
  EXPECT_EQ(lines, 41u);  // header and one row per point
  EXPECT_NE(table.find("rejected,tp x cp x pp = 3 does not divide the 16 accelerators"),
            std::string::npos);
  // The same command again: every point is stored, none is evaluated twice.
  r = run_orrery({"sweep", kSmall, "--db", db, "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("40 stored before, 0 evaluated now"), std::string::npos) << r.out;
  // The report.
  const std::string html = (dir / "small.html").string();
  r = run_orrery({"sweep", "report", db, "-o", html});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string page = read_whole_file(html);
  EXPECT_NE(page.find("<svg"), std::string::npos);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(SweepCli, MpiRunWritesTheSameRows) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) GTEST_SKIP() << "no mpirun";
  const auto dir = temp_dir("mpi");
  const std::string one = (dir / "one.csv").string(), two = (dir / "two.csv").string();
  CommandResult r = run_orrery(
      {"sweep", kSmall, "--db", (dir / "one.sqlite").string(), "--csv", one, "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Under ASan, Open MPI's own allocations (its reduction ops, components it unloads at exit) are
  // reported as leaks when the ranks exit: the MPI ranks run without leak detection (mpirun passes
  // the variable on); the one-process run above keeps it.
  if (const char* asan = std::getenv("ASAN_OPTIONS"); asan != nullptr)
    setenv("ASAN_OPTIONS", (std::string(asan) + ":detect_leaks=0").c_str(), 1);
  r = run_program("mpirun",
                  {"--allow-run-as-root", "--oversubscribe", "-np", "2", ORRERY_BINARY, "sweep",
                   kSmall, "--db", (dir / "two.sqlite").string(), "--csv", two, "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("on rank 0 of 2"), std::string::npos) << r.out;
  const std::string a = read_whole_file(one), b = read_whole_file(two);
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  std::filesystem::remove_all(dir);
}

// The bundled sweeps read and count as docs/models/sweep.md says: the GPT-3 175B sweep (3,168
// points, 312 refused by the rules) and the Transformer-1T studies (576 and 144, every one valid).
TEST(SweepCli, BundledSweepsCountTheirPoints) {
  const std::string examples = std::string(ORRERY_TEST_DATA_DIR) + "/../../examples/sweep/";
  CommandResult r = run_orrery({"sweep", examples + "gpt3_175b_1024.yml", "--count"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("gpt3-175b-1024: 3,168 points (312 refused by the rules)"),
            std::string::npos)
      << r.out;
  r = run_orrery({"sweep", examples + "transformer_1t.yml", "--count"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("transformer-1t: 576 points (0 refused by the rules)"), std::string::npos)
      << r.out;
  r = run_orrery({"sweep", examples + "transformer_1t_tight.yml", "--count"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("transformer-1t-tight: 144 points (0 refused by the rules)"),
            std::string::npos)
      << r.out;
}

TEST(SweepCli, BadFileNamesFileAndLine) {
  const auto dir = temp_dir("bad");
  const std::string path = (dir / "bad.yml").string();
  std::ofstream(path) << "workload:\n  llm: gpt3-175b\n  global_batch: 64\ncluster:\n"
                         "  accelerators: 64\n  peak_tflops: 312\n  hbm_capacity: 80GiB\n"
                         "  hbm_bandwidth: 2039\n  network:\n    - {size: 64, bandwidth: 25}\n"
                         "plan:\n  tp: [1, 2]\n  pipeline: [1, 2]\n";
  const CommandResult r = run_orrery({"sweep", path, "--db", (dir / "x.sqlite").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(path + ":13:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pipeline"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "x.sqlite"));
  std::filesystem::remove_all(dir);
}

}  // namespace sweep_cli_test
}  // namespace orrery
