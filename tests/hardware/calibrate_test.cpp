// `orrery calibrate`: a table made by known compute-model parameters gives them back (GEMMs on
// both bounds, memory kernels), the error summary is exact, and every bad table is one error
// naming the file, the line and the column.
#include "hardware/calibrate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "e2e/run_command.h"
#include "hardware/preset.h"

namespace orrery::hw {
namespace calibrate_test {

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

sys::ComputeModel truth() {
  Expected<HardwarePreset> p = load_preset("dgx-a100");
  sys::ComputeModel m = p ? p->compute : sys::ComputeModel{};
  m.gemm_efficiency = 0.83;
  m.gemm_k_half = 200;
  m.memory_efficiency = 0.78;
  m.launch_us = 3.5;
  return m;
}

// A TSV of GEMMs (a grid of shapes, some skinny enough to be memory-bound) and memory kernels,
// timed by `model` (microseconds with 17 significant digits).
std::string table_of(const sys::ComputeModel& model) {
  std::string text = "# generated from known parameters\nkind\tm\tn\tk\tbatch\tbytes\ttime_us\n";
  for (uint64_t m : {512u, 2048u, 8192u}) {
    for (uint64_t n : {1024u, 4096u, 12288u}) {
      for (uint64_t k : {8u, 64u, 256u, 1024u, 8192u}) {
        const sys::GemmShape shape{m, n, k, 1};
        const uint64_t bytes = 2 * (m * k + k * n + m * n);
        const double us = sys::gemm_seconds(model, shape, sys::gemm_flops(shape), bytes) * 1e6;
        text += fmt::format("gemm\t{}\t{}\t{}\t1\t\t{:.17g}\n", m, n, k, us);
      }
    }
  }
  // A GEMM whose operands cross HBM many times (bytes given): on its memory bound.
  {
    const sys::GemmShape shape{4096, 4096, 1024, 1};
    const uint64_t bytes = uint64_t{8} << 30;
    const double us = sys::gemm_seconds(model, shape, sys::gemm_flops(shape), bytes) * 1e6;
    text += fmt::format("gemm\t4096\t4096\t1024\t1\t{}\t{:.17g}\n", bytes, us);
  }
  for (uint64_t bytes : {uint64_t{1} << 16, uint64_t{1} << 20, uint64_t{1} << 24, uint64_t{1} << 28,
                         uint64_t{1} << 31}) {
    const double us = sys::kernel_seconds(model, bytes / 4, bytes) * 1e6;
    text += fmt::format("memory\t\t\t\t\t{}\t{:.17g}\n", bytes, us);
  }
  return text;
}

TEST(Calibrate, recovers_the_parameters_a_table_was_made_with) {
  const sys::ComputeModel known = truth();
  Expected<std::vector<OpSample>> samples = parse_op_table(table_of(known), "ops.tsv");
  ASSERT_TRUE(samples) << samples.error().message();
  ASSERT_EQ(samples->size(), 46u + 5u);
  sys::ComputeModel start = known;
  start.gemm_efficiency = 0.5;
  start.gemm_k_half = 10;
  start.memory_efficiency = 0.5;
  start.launch_us = 0;
  Expected<CalibrationFit> fit = fit_compute_model(*samples, start);
  ASSERT_TRUE(fit) << fit.error().message();
  EXPECT_NEAR(fit->model.gemm_efficiency, 0.83, 1e-9);
  EXPECT_NEAR(fit->model.gemm_k_half, 200, 1e-6);
  EXPECT_NEAR(fit->model.memory_efficiency, 0.78, 1e-9);
  EXPECT_NEAR(fit->model.launch_us, 3.5, 1e-6);
  EXPECT_GT(fit->iterations, 1);  // the many-bytes GEMM moved to the memory bound
  ASSERT_EQ(fit->errors.size(), 2u);
  EXPECT_EQ(fit->errors[0].kind, "gemm");
  EXPECT_EQ(fit->errors[0].rows, 46u);
  EXPECT_LT(fit->errors[0].worst, 1e-9);
  EXPECT_EQ(fit->errors[1].kind, "memory");
  EXPECT_LT(fit->errors[1].worst, 1e-9);
  const std::string yaml = compute_block_yaml(*fit, "ops.tsv");
  EXPECT_CONTAINS(yaml, "compute:\n  gemm_efficiency: 0.8300\n  gemm_k_half: 200.00\n");
  EXPECT_CONTAINS(yaml, "  memory_efficiency: 0.7800\n  launch_us: 3.500\n");
  // The block is a valid preset block: it parses back to the same parameters.
}

TEST(Calibrate, noisy_times_give_their_error_per_kind) {
  const sys::ComputeModel known = truth();
  Expected<std::vector<OpSample>> samples = parse_op_table(table_of(known), "ops.tsv");
  ASSERT_TRUE(samples);
  // +10% on one memory kernel: the fit moves a little and names that row as the worst.
  (*samples)[48].seconds *= 1.10;
  Expected<CalibrationFit> fit = fit_compute_model(*samples, known);
  ASSERT_TRUE(fit);
  ASSERT_EQ(fit->errors.size(), 2u);
  EXPECT_EQ(fit->errors[1].worst_line, (*samples)[48].line);
  EXPECT_GT(fit->errors[1].worst, 0.05);
  EXPECT_LT(fit->errors[1].worst, 0.11);
  EXPECT_LT(fit->errors[0].median, 0.02);
}

std::string table_error(const std::string& text) {
  Expected<std::vector<OpSample>> samples = parse_op_table(text, "t.csv");
  return samples ? std::string("(no error)") : samples.error().message();
}

TEST(Calibrate, bad_tables_name_file_line_and_column) {
  EXPECT_EQ(table_error("kind,m,n,k,time_us\ngemm,1,2,3,4.5\n"), "(no error)");
  EXPECT_CONTAINS(table_error("kind,m,n,q,time_us\n"),
                  "t.csv:1: column 'q' is not one of kind, m, n, k");
  EXPECT_CONTAINS(table_error("kind,m,n,k\n"), "t.csv:1: the header has no 'time_us' column");
  EXPECT_CONTAINS(table_error("kind,m,m,time_us\n"), "t.csv:1: column 'm' appears twice");
  EXPECT_CONTAINS(table_error("# c\nkind,m,n,k,time_us\ngemm,1,2,3,4\nconv,1,2,3,4\n"),
                  "t.csv:4: column 'kind': 'conv' is not gemm or memory");
  EXPECT_CONTAINS(table_error("kind,m,n,k,time_us\ngemm,1,2,3\n"),
                  "t.csv:2: 4 cells, the header has 5 columns");
  EXPECT_CONTAINS(table_error("kind,m,n,k,time_us\ngemm,1,x,3,4\n"),
                  "t.csv:2: column 'n': 'x' is not a whole number");
  EXPECT_CONTAINS(table_error("kind,m,n,k,time_us\ngemm,1,,3,4\n"),
                  "t.csv:2: column 'n' is empty (needed for this kind)");
  EXPECT_CONTAINS(table_error("kind,bytes,time_us\nmemory,100,-1\n"),
                  "t.csv:2: column 'time_us': '-1' is not a time above 0");
  EXPECT_CONTAINS(table_error("kind,bytes,time_us\nmemory,100,nan\n"),
                  "t.csv:2: column 'time_us': 'nan' is not a time above 0");
  EXPECT_CONTAINS(table_error("kind,time_us\nmemory,3\n"), "t.csv:2: column 'bytes' is empty");
  EXPECT_CONTAINS(table_error("kind,time_us\n"), "t.csv: no rows after the header");
  EXPECT_CONTAINS(table_error("# only a comment\n"), "t.csv: no header line");
}

TEST(Calibrate, tables_that_cannot_determine_the_curve_say_why) {
  const sys::ComputeModel known = truth();
  Expected<std::vector<OpSample>> one_k = parse_op_table(
      "kind\tm\tn\tk\ttime_us\ngemm\t1024\t1024\t512\t40\n"
      "gemm\t2048\t1024\t512\t70\ngemm\t4096\t1024\t512\t130\n",
      "k.tsv");
  ASSERT_TRUE(one_k);
  Expected<CalibrationFit> fit = fit_compute_model(*one_k, known);
  ASSERT_FALSE(fit);
  EXPECT_CONTAINS(fit.error().message(), "all have k = 512: gemm_k_half cannot be told");
  // Times a thousand times too short (nanoseconds given as microseconds): efficiency above 1.
  std::string text = "kind,m,n,k,time_us\n";
  for (uint64_t m : {1024u, 4096u}) {
    for (uint64_t k : {256u, 1024u, 4096u}) {
      const sys::GemmShape s{m, 4096, k, 1};
      text += fmt::format("gemm,{},4096,{},{:.17g}\n", m, k,
                          sys::gemm_seconds(known, s, sys::gemm_flops(s), 0) * 1e3);
    }
  }
  Expected<std::vector<OpSample>> fast = parse_op_table(text, "fast.csv");
  ASSERT_TRUE(fast);
  Expected<CalibrationFit> bad = fit_compute_model(*fast, known);
  ASSERT_FALSE(bad);
  EXPECT_CONTAINS(bad.error().message(), "are the times in microseconds");
}

CommandResult orrery(const std::vector<std::string>& args) {
  return run_program(ORRERY_BINARY, args);
}

TEST(Calibrate, the_command_prints_a_block_a_preset_accepts) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "orrery_calibrate_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string table = (dir / "ops.tsv").string();
  std::ofstream(table) << table_of(truth());
  const std::string block = (dir / "compute.yaml").string();
  CommandResult r = orrery({"calibrate", "--hardware", "dgx-a100", "--table", table, "-o", block});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "  gemm_efficiency: 0.8300\n");
  EXPECT_CONTAINS(r.out, "gemm         46          0.00%          0.00%");
  // The block pasted into a copy of the preset loads as one.
  Expected<HardwarePreset> base = load_preset("dgx-a100");
  ASSERT_TRUE(base);
  std::ifstream original_in(std::string(ORRERY_TEST_DATA_DIR) +
                            "/../../presets/hardware/dgx-a100.yaml");
  std::string original((std::istreambuf_iterator<char>(original_in)), {});
  original = original.substr(0, original.find("\ncompute:\n") + 1);
  std::ifstream block_in(block);
  const std::string fitted((std::istreambuf_iterator<char>(block_in)), {});
  Expected<HardwarePreset> edited = parse_preset(original + fitted, "edited.yaml");
  ASSERT_TRUE(edited) << edited.error().message();
  EXPECT_NEAR(edited->compute.gemm_efficiency, 0.83, 1e-4);
  EXPECT_NEAR(edited->compute.launch_us, 3.5, 1e-3);
  // A bad table: one message naming file and line, exit code 1.
  std::ofstream(table) << "kind,m,n,k,time_us\ngemm,1,2,three,4\n";
  CommandResult bad = orrery({"calibrate", "--hardware", "dgx-a100", "--table", table});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_CONTAINS(bad.err, table + ":2: column 'k': 'three' is not a whole number");
  std::filesystem::remove_all(dir);
}

}  // namespace calibrate_test
}  // namespace orrery::hw
