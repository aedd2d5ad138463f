// The per-operation compute model: closed forms of the GEMM curve, wave quantization and
// memory-bound kernels; the presets' `compute:` blocks and their errors; and a gen llm trace run on
// a preset, whose compute time is the model's sum over its nodes.
#include "system/compute_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "chakra/trace_file.h"
#include "e2e/run_command.h"
#include "hardware/preset.h"

namespace orrery {
namespace compute_model_test {

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

sys::ComputeModel a100_like() {
  sys::ComputeModel m;
  m.peak_tflops = 312;
  m.hbm_gbps = 2000;
  m.gemm_efficiency = 0.9;
  m.gemm_k_half = 128;
  m.sms = 108;
  m.tile_m = 256;
  m.tile_n = 128;
  m.memory_efficiency = 0.8;
  m.launch_us = 2;
  return m;
}

TEST(ComputeModel, a_gemm_that_fills_whole_waves_runs_at_the_k_curve) {
  const sys::ComputeModel m = a100_like();
  // 27 x 32 = 864 tiles of 256 x 128 = 8 waves of 108 SMs exactly: no quantization.
  const sys::GemmShape shape{27 * 256, 32 * 128, 4096, 1};
  EXPECT_DOUBLE_EQ(sys::gemm_wave_efficiency(m, shape), 1.0);
  EXPECT_DOUBLE_EQ(sys::gemm_efficiency(m, shape), 0.9 * 4096.0 / (4096.0 + 128.0));
  const uint64_t flops = sys::gemm_flops(shape);
  EXPECT_EQ(flops, 2ull * 27 * 256 * 32 * 128 * 4096);
  const double seconds =
      2e-6 + static_cast<double>(flops) / (312e12 * 0.9 * 4096.0 / (4096.0 + 128.0));
  EXPECT_EQ(sys::compute_model_time(m, flops, 1000, &shape).ps(),
            static_cast<int64_t>(std::floor(seconds * 1e12)));
}

TEST(ComputeModel, one_tile_past_a_wave_costs_a_whole_wave) {
  const sys::ComputeModel m = a100_like();
  // 109 tiles: two waves of 108, the second nearly empty.
  const sys::GemmShape shape{109 * 256, 128, 8192, 1};
  EXPECT_DOUBLE_EQ(sys::gemm_wave_efficiency(m, shape), 109.0 / 216.0);
  // A partial tile computes its padding: m = 100 in one 256-row tile, 108 of them in one wave.
  const sys::GemmShape ragged{100, 108 * 128, 8192, 1};
  EXPECT_DOUBLE_EQ(sys::gemm_wave_efficiency(m, ragged), 100.0 / 256.0);
  // Batches add tiles: 4 x (2 x 2) = 16 tiles in one wave of 108.
  const sys::GemmShape batched{512, 256, 64, 4};
  EXPECT_DOUBLE_EQ(sys::gemm_wave_efficiency(m, batched), 16.0 / 108.0);
  // No tile: no quantization.
  sys::ComputeModel flat = m;
  flat.tile_m = flat.tile_n = 0;
  EXPECT_DOUBLE_EQ(sys::gemm_wave_efficiency(flat, shape), 1.0);
}

TEST(ComputeModel, smaller_and_skinnier_gemms_reach_less_of_peak) {
  const sys::ComputeModel m = a100_like();
  double previous = 0;
  for (uint64_t size : {256u, 1024u, 4096u, 16384u}) {
    const double e = sys::gemm_efficiency(m, {size, size, size, 1});
    EXPECT_GT(e, previous) << size;
    previous = e;
  }
  EXPECT_LT(sys::gemm_efficiency(m, {8192, 8192, 64, 1}),
            sys::gemm_efficiency(m, {8192, 8192, 8192, 1}));
}

TEST(ComputeModel, memory_bound_kernels_take_their_bytes_at_the_achieved_bandwidth) {
  const sys::ComputeModel m = a100_like();
  // 1 GB at 80% of 2,000 GB/s: 625 us, plus 2 us of launch; the few FLOPs do not matter.
  EXPECT_EQ(sys::compute_model_time(m, 1000, 1'000'000'000, nullptr).ps(), 627'000'000);
  // A GEMM of tiny k is memory-bound too: its bytes bound it below.
  const sys::GemmShape thin{65536, 65536, 1, 1};
  const uint64_t bytes = 2ull * 65536 * 65536 * 2;
  EXPECT_GE(sys::compute_model_time(m, sys::gemm_flops(thin), bytes, &thin).ps(),
            static_cast<int64_t>(
                std::floor((2e-6 + static_cast<double>(bytes) / (2000e9 * 0.8)) * 1e12)) -
                1);
  // Nothing to do still pays the launch.
  EXPECT_EQ(sys::compute_model_time(m, 0, 0, nullptr).ps(), 2'000'000);
}

TEST(ComputeModel, shipped_presets_carry_their_compute_blocks) {
  for (const char* name : {"dgx-a100", "dgx-h100", "hgx-h200", "hgx-b200"}) {
    Expected<hw::HardwarePreset> p = hw::load_preset(name);
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_DOUBLE_EQ(p->compute.peak_tflops, p->peak_tflops) << name;
    EXPECT_DOUBLE_EQ(p->compute.hbm_gbps, p->hbm_gbps) << name;
    Expected<hw::Hardware> machine = hw::build_hardware(*p, 2, "");
    ASSERT_TRUE(machine);
    ASSERT_TRUE(machine->system->compute.has_value());
    EXPECT_EQ(*machine->system->compute, p->compute);
  }
  Expected<hw::HardwarePreset> a100 = hw::load_preset("dgx-a100");
  ASSERT_TRUE(a100);
  EXPECT_DOUBLE_EQ(a100->compute.gemm_efficiency, 0.89);
  EXPECT_EQ(a100->compute.sms, 108u);
  // One SM per NCCL channel while communicating.
  for (const char* name : {"dgx-a100", "dgx-h100", "hgx-h200", "hgx-b200"}) {
    Expected<hw::HardwarePreset> p = hw::load_preset(name);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->compute.comm_sms, p->nccl.channels) << name;
  }
  // Beside communication: 96 of 108 SMs and their share of the peak; the model alone otherwise.
  const sys::ComputeModel beside = sys::while_communicating(a100->compute);
  EXPECT_EQ(beside.sms, 96u);
  EXPECT_DOUBLE_EQ(beside.peak_tflops, a100->compute.peak_tflops * 96 / 108);
  EXPECT_EQ(beside.comm_sms, 0u);
  sys::ComputeModel none = a100->compute;
  none.comm_sms = 0;
  EXPECT_EQ(sys::while_communicating(none), none);
}

std::string preset_error(const std::string& compute_block) {
  const std::string text =
      "name: t\ndescription: d\ngpu:\n  model: G\n  peak_tflops: 100\n  hbm_gbps: 1000\n"
      "  memory_gib: 16\nnode:\n  gpus: 4\n  nvlink:\n    generation: 3\n    links_per_gpu: 4\n"
      "    gbps: 100\n  nvswitch:\n    model: S\n    count: 1\n    nvls: false\n"
      "  nic: hdr200x8\nfabric: f\ncompute:\n" +
      compute_block;
  Expected<hw::HardwarePreset> p = hw::parse_preset(text, "p.yaml");
  return p ? std::string("(no error)") : p.error().message();
}

TEST(ComputeModel, bad_compute_blocks_name_file_line_and_key) {
  EXPECT_EQ(preset_error("  gemm_efficiency: 0.7\n  launch_us: 3\n"), "(no error)");
  EXPECT_CONTAINS(preset_error("  gemm_eficiency: 0.7\n"),
                  "p.yaml:21: key 'compute.gemm_eficiency': unknown key (expected gemm_efficiency");
  EXPECT_CONTAINS(
      preset_error("  gemm_efficiency: 1.5\n"),
      "p.yaml:21: key 'compute.gemm_efficiency': 1.5 is out of range (expected 0.01 to 1)");
  EXPECT_CONTAINS(preset_error("  sms: many\n"),
                  "p.yaml:21: key 'compute.sms': expected a whole number");
  EXPECT_CONTAINS(preset_error("  tile_m: 0\n"), "key 'compute.tile_m': tile_m and tile_n");
  EXPECT_CONTAINS(preset_error("  launch_us: -1\n"),
                  "p.yaml:21: key 'compute.launch_us': -1 is out of range");
  EXPECT_CONTAINS(preset_error("  - 1\n"), "p.yaml:21: key 'compute': expected a mapping of keys");
  EXPECT_CONTAINS(preset_error("  sms: 16\n  comm_sms: 16\n"),
                  "p.yaml:22: key 'compute.comm_sms': 16 SMs held while communicating leave none "
                  "of the 16 to compute");
  EXPECT_EQ(preset_error("  sms: 16\n  comm_sms: 4\n"), "(no error)");
}

CommandResult orrery(const std::vector<std::string>& args) {
  return run_program(ORRERY_BINARY, args);
}

// A gen llm trace of 8 data-parallel ranks on one DGX A100: with no SMs held by communication,
// rank 0's compute time is exactly the sum of the model's time for its nodes (nothing overlaps on
// one compute slot), GEMM nodes carry their shapes. With the shipped preset's 12 of 108 SMs held
// while the gradients are all-reduced, it lies between that sum and the sum at 96 SMs.
TEST(ComputeModel, gen_llm_trace_runs_at_the_models_times) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "orrery_compute_model_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string prefix = (dir / "t").string();
  CommandResult gen = orrery({"gen", "llm", "--model", "gpt3-6.7b", "--seq", "256", "--dp", "8",
                              "--tp", "1", "--pp", "1", "--global-batch", "8", "-o", prefix});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  Expected<chakra::TraceGraph> graph = chakra::load_trace(prefix + ".0.et");
  ASSERT_TRUE(graph) << graph.error().message();
  Expected<hw::HardwarePreset> preset = hw::load_preset("dgx-a100");
  ASSERT_TRUE(preset);
  const sys::ComputeModel& model = preset->compute;
  int64_t expected_ps = 0;
  int64_t slowed_ps = 0;  // every node beside communication
  int64_t nodes = 0;
  size_t gemms = 0;
  for (chakra::NodeIndex node = 0; node < graph->size(); ++node) {
    if (graph->type(node) != ChakraProtoMsg::COMP_NODE) continue;
    const uint64_t flops = graph->get_uint(node, "num_ops")->value_or(0);
    const uint64_t bytes = graph->get_uint(node, "tensor_size")->value_or(0);
    if (flops == 0) continue;
    sys::GemmShape shape;
    if (auto m = graph->get_uint(node, "gemm_m"); m && m->has_value()) {
      shape = {**m, graph->get_uint(node, "gemm_n")->value_or(0),
               graph->get_uint(node, "gemm_k")->value_or(0),
               graph->get_uint(node, "gemm_batch")->value_or(0)};
      ASSERT_TRUE(shape.valid()) << node;
      ++gemms;
    }
    expected_ps +=
        sys::compute_model_time(model, flops, bytes, shape.valid() ? &shape : nullptr).ps();
    slowed_ps += sys::compute_model_time(sys::while_communicating(model), flops, bytes,
                                         shape.valid() ? &shape : nullptr)
                     .ps();
    ++nodes;
  }
  EXPECT_GT(gemms, 32u * 8);  // every layer's products, forward and backward
  const auto compute_ns = [&](const std::string& hardware) {
    const std::string out = (dir / "o.json").string();
    CommandResult run = orrery({"run", "--hardware", hardware, "-w", prefix,
                                "--comm-group-configuration", prefix + ".json", "--output", out});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    std::ifstream in(out);
    const nlohmann::json result = nlohmann::json::parse(in);
    return static_cast<double>(result["ranks"][0]["compute_ns"].get<int64_t>());
  };
  // The shipped preset with comm_sms 0.
  std::string text;
  {
    std::ifstream in(std::string(ORRERY_TEST_DATA_DIR) + "/../../presets/hardware/dgx-a100.yaml");
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t at = text.find("comm_sms: 12");
  ASSERT_NE(at, std::string::npos);
  const std::string unheld = (dir / "a100.yaml").string();
  std::ofstream(unheld) << std::string(text).replace(at, 12, "comm_sms: 0");
  // Whole picoseconds per node, reported in nanoseconds (at most 1 ns of rounding per node).
  EXPECT_NEAR(compute_ns(unheld), static_cast<double>(expected_ps) / 1000.0,
              static_cast<double>(nodes));
  EXPECT_GT(expected_ps, 0);
  const double held = compute_ns("dgx-a100");
  EXPECT_GT(held, static_cast<double>(expected_ps) / 1000.0 + 1000.0);
  EXPECT_LT(held, static_cast<double>(slowed_ps) / 1000.0);
  std::filesystem::remove_all(dir);
}

}  // namespace compute_model_test
}  // namespace orrery
