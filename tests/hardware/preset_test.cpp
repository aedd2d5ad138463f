// Hardware presets: the shipped files' values, the machine they build, and every bad-input path.
#include <gtest/gtest.h>

#include <string>

#include "hardware/preset.h"
#include "system/nccl_model.h"

namespace orrery::hw {
namespace preset_test {

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

std::string error_of(const std::string& text) {
  Expected<HardwarePreset> preset = parse_preset(text, "p.yaml");
  return preset ? std::string("(no error)") : preset.error().message();
}

// A valid preset to break one key at a time.
const char* const kValid =
    "name: test\n"
    "description: a test node\n"
    "gpu:\n"
    "  model: G\n"
    "  peak_tflops: 100\n"
    "  hbm_gbps: 1000\n"
    "  memory_gib: 16\n"
    "node:\n"
    "  gpus: 4\n"
    "  nvlink:\n"
    "    generation: 3\n"
    "    links_per_gpu: 4\n"
    "    gbps: 100\n"
    "  nvswitch:\n"
    "    model: S\n"
    "    count: 1\n"
    "    nvls: false\n"
    "  nic: hdr200x8\n"
    "fabric: test fabric\n";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(Preset, shipped_presets_are_the_four_of_the_issue) {
  EXPECT_EQ(preset_names(),
            (std::vector<std::string>{"dgx-a100", "dgx-h100", "hgx-b200", "hgx-h200"}));
  EXPECT_EQ(nic_kind_names(), (std::vector<std::string>{"hdr200x8", "ndr400x8", "roce400x8",
                                                        "efa100x32", "tcpxo200x8"}));
  for (const std::string& name : preset_names()) {
    Expected<HardwarePreset> preset = load_preset(name);
    ASSERT_TRUE(preset) << preset.error().message();
    EXPECT_EQ(preset->name, name);
    EXPECT_EQ(preset->collective_algorithm, "nccl");
    EXPECT_EQ(preset->gpus_per_node, 8u);
  }
}

TEST(Preset, dgx_h100_values_come_from_its_file) {
  Expected<HardwarePreset> p = load_preset("dgx-h100");
  ASSERT_TRUE(p) << p.error().message();
  EXPECT_EQ(p->source, "builtin:dgx-h100.yaml");
  EXPECT_DOUBLE_EQ(p->peak_tflops, 989.4);
  EXPECT_DOUBLE_EQ(p->hbm_gbps, 3350);
  EXPECT_DOUBLE_EQ(p->memory_gib, 80);
  EXPECT_EQ(p->nvlink_generation, 4u);
  EXPECT_EQ(p->nvlink_links, 18u);
  EXPECT_DOUBLE_EQ(p->nvlink_gbps, 450);
  EXPECT_EQ(p->nvswitch_count, 4u);
  EXPECT_TRUE(p->nvls);
  EXPECT_TRUE(p->nccl.nvls);
  EXPECT_EQ(p->default_nic, "ndr400x8");
  EXPECT_DOUBLE_EQ(p->nccl.launch_us, 3.5);
  EXPECT_EQ(p->nccl.channels, 16u);
  EXPECT_DOUBLE_EQ(p->nccl.nvlink_hop_us[1], 1.1);
  EXPECT_EQ(p->nccl.nvls_channels, 16u);
  EXPECT_EQ(p->nccl.nvls_chunk_bytes, 131072u);
  EXPECT_DOUBLE_EQ(p->nccl.nvls_chunk_us, 0.28);
  Expected<HardwarePreset> a100 = load_preset("dgx-a100");
  ASSERT_TRUE(a100);
  EXPECT_FALSE(a100->nvls);
  EXPECT_DOUBLE_EQ(a100->peak_tflops, 312);
  EXPECT_DOUBLE_EQ(a100->nvlink_gbps, 300);
}

TEST(Preset, nic_kinds_are_their_line_rates) {
  Expected<NicKind> ndr = nic_kind("ndr400x8");
  ASSERT_TRUE(ndr);
  EXPECT_EQ(ndr->count, 8u);
  EXPECT_DOUBLE_EQ(ndr->gbit, 400);
  EXPECT_DOUBLE_EQ(ndr->node_gbps(), 400);  // 8 x 400 Gb/s = 400 GB/s
  Expected<NicKind> efa = nic_kind("efa100x32");
  ASSERT_TRUE(efa);
  EXPECT_EQ(efa->count, 32u);
  EXPECT_DOUBLE_EQ(efa->node_gbps(), 400);
  Expected<NicKind> tcpxo = nic_kind("tcpxo200x8");
  ASSERT_TRUE(tcpxo);
  EXPECT_DOUBLE_EQ(tcpxo->node_gbps(), 200);
  Expected<NicKind> bad = nic_kind("ib");
  ASSERT_FALSE(bad);
  EXPECT_CONTAINS(bad.error().message(), "unknown NIC kind 'ib' (expected one of hdr200x8, ");
}

TEST(Preset, two_a100_nodes_build_nvlink_and_rail_dimensions) {
  Expected<HardwarePreset> p = load_preset("dgx-a100");
  ASSERT_TRUE(p);
  Expected<Hardware> hw = build_hardware(*p, 2, "");
  ASSERT_TRUE(hw) << hw.error().message();
  const net::Topology& topology = hw->network->logical;
  ASSERT_EQ(topology.dimension_count(), 2u);
  EXPECT_EQ(topology.rank_count(), 16u);
  EXPECT_EQ(topology.dimension(0).kind, net::TopologyKind::kSwitch);
  EXPECT_EQ(topology.size(0), 8u);
  EXPECT_EQ(topology.size(1), 2u);
  // 300 GB/s of NVLink per GPU; 8 x 200 Gb/s HDR = 200 GB/s per node, 25 GB/s per GPU's rail.
  EXPECT_NEAR(topology.dimension(0).bandwidth.bytes_per_second(), 300e9, 1.0);
  EXPECT_NEAR(topology.dimension(1).bandwidth.bytes_per_second(), 25e9, 1.0);
  EXPECT_EQ(topology.dimension(0).latency, SimTime());
  const sys::SystemConfig& system = *hw->system;
  ASSERT_EQ(system.all_reduce.size(), 2u);
  EXPECT_EQ(system.all_reduce[0].kind, sys::AlgorithmKind::kNccl);
  EXPECT_EQ(system.all_to_all[1].kind, sys::AlgorithmKind::kNccl);
  EXPECT_EQ(system.preferred_dataset_splits, 1u);
  EXPECT_DOUBLE_EQ(*system.local_mem_bw_gbps, 2039);
  EXPECT_TRUE(system.roofline_enabled);
  EXPECT_DOUBLE_EQ(*system.peak_perf_tflops, 312);
  EXPECT_DOUBLE_EQ(system.nccl.net_efficiency, 0.94);      // hdr200x8's
  EXPECT_DOUBLE_EQ(system.nccl.net_hop_us[0], 2.7 + 2.0);  // plus the NIC's latency
  EXPECT_EQ(hw->description, "dgx-a100 x 2 nodes, hdr200x8");
  Expected<Hardware> efa = build_hardware(*p, 4, "efa100x32");
  ASSERT_TRUE(efa);
  EXPECT_NEAR(efa->network->logical.dimension(1).bandwidth.bytes_per_second(), 50e9, 1.0);
  EXPECT_EQ(efa->network->logical.size(1), 4u);
  Expected<Hardware> four = build_hardware(*p, 1, "", 4);
  ASSERT_TRUE(four);
  EXPECT_EQ(four->network->logical.rank_count(), 4u);
  EXPECT_EQ(four->network->logical.dimension_count(), 1u);
}

TEST(Preset, bad_machines_are_errors) {
  Expected<HardwarePreset> p = load_preset("dgx-h100");
  ASSERT_TRUE(p);
  EXPECT_CONTAINS(build_hardware(*p, 0, "").error().message(), "--nodes 0: expected 1 to 65536");
  EXPECT_CONTAINS(build_hardware(*p, 2, "myrinet").error().message(),
                  "--nic: unknown NIC kind 'myrinet'");
  EXPECT_CONTAINS(build_hardware(*p, 1, "", 9).error().message(), "9 GPUs per node");
  EXPECT_CONTAINS(build_hardware(*p, 1, "", 1).error().message(), "at least 2");
}

TEST(Preset, unknown_presets_and_files_name_the_shipped_ones) {
  Expected<HardwarePreset> missing = load_preset("dgx-z100");
  ASSERT_FALSE(missing);
  EXPECT_CONTAINS(missing.error().message(),
                  "--hardware dgx-z100: neither a preset (dgx-a100, dgx-h100, hgx-b200, hgx-h200)");
}

TEST(Preset, a_valid_file_parses) {
  Expected<HardwarePreset> p = parse_preset(kValid, "p.yaml");
  ASSERT_TRUE(p) << p.error().message();
  EXPECT_EQ(p->gpus_per_node, 4u);
  // Without an nccl block the tuning is the defaults, for the GPU generation NVLink names.
  EXPECT_EQ(p->nccl, [] {
    sys::NcclTuning defaults;
    defaults.arch = sys::NcclArch::kAmpere;
    return defaults;
  }());
  // NCCL_ALGO and NCCL_PROTO as the machine's NCCL runs with them.
  Expected<HardwarePreset> restricted =
      parse_preset(std::string(kValid) + "nccl:\n  algo: ^nvls\n  proto: LL128,Simple\n", "p.yaml");
  ASSERT_TRUE(restricted) << restricted.error().message();
  EXPECT_EQ(sys::nccl_allowed_text(restricted->nccl),
            "NCCL_ALGO=ring,tree,nvls-tree NCCL_PROTO=LL128,Simple");
  // LL128's share across nodes and NVLS's pipeline fill (0 by default: NCCL's rules, no fill).
  Expected<HardwarePreset> tuned = parse_preset(
      std::string(kValid) + "nccl:\n  ll128_net_fraction: 0.79\n  nvls_fill_chunks: 15\n",
      "p.yaml");
  ASSERT_TRUE(tuned) << tuned.error().message();
  EXPECT_DOUBLE_EQ(tuned->nccl.ll128_net_fraction, 0.79);
  EXPECT_DOUBLE_EQ(tuned->nccl.nvls_fill_chunks, 15.0);
  EXPECT_EQ(parse_preset(replaced(kValid, "generation: 3", "generation: 4"), "p.yaml")->nccl.arch,
            sys::NcclArch::kHopper);
  EXPECT_EQ(parse_preset(replaced(kValid, "generation: 3", "generation: 7"), "p.yaml")->nccl.arch,
            sys::NcclArch::kBlackwell);
  EXPECT_EQ(parse_preset(replaced(kValid, "generation: 3", "generation: 1"), "p.yaml")->nccl.arch,
            sys::NcclArch::kUnknown);
}

TEST(Preset, errors_name_file_line_and_key) {
  EXPECT_CONTAINS(error_of(replaced(kValid, "  peak_tflops: 100\n", "  peek_tflops: 100\n")),
                  "p.yaml:5: key 'gpu.peek_tflops': unknown key (expected model, peak_tflops,");
  EXPECT_CONTAINS(error_of(replaced(kValid, "  gpus: 4\n", "")), "key 'node.gpus': missing");
  EXPECT_CONTAINS(error_of(replaced(kValid, "  hbm_gbps: 1000\n", "  hbm_gbps: fast\n")),
                  "p.yaml:6: key 'gpu.hbm_gbps': expected a number");
  EXPECT_CONTAINS(error_of(replaced(kValid, "    gbps: 100\n", "    gbps: -5\n")),
                  "p.yaml:13: key 'node.nvlink.gbps': -5 is out of range");
  EXPECT_CONTAINS(error_of(replaced(kValid, "    nvls: false\n", "    nvls: maybe\n")),
                  "p.yaml:17: key 'node.nvswitch.nvls': expected true or false");
  EXPECT_CONTAINS(error_of(replaced(kValid, "  nic: hdr200x8\n", "  nic: hdr100\n")),
                  "p.yaml:18: key 'node.nic': unknown NIC kind 'hdr100'");
  EXPECT_CONTAINS(error_of(std::string(kValid) + "collective_algorithm: rng\n"),
                  "p.yaml:20: key 'collective_algorithm': unknown collective algorithm \"rng\"");
  EXPECT_CONTAINS(error_of(std::string(kValid) + "nccl:\n  channels: 0\n"),
                  "p.yaml:21: key 'nccl.channels': 0 is out of range (expected 1 to 64)");
  EXPECT_CONTAINS(error_of(std::string(kValid) + "nccl:\n  nvls_chunk_bytes: 100\n"),
                  "p.yaml:21: key 'nccl.nvls_chunk_bytes': 100 is out of range (expected 4096 to");
  EXPECT_CONTAINS(
      error_of(std::string(kValid) + "nccl:\n  ll128_net_fraction: 1.5\n"),
      "p.yaml:21: key 'nccl.ll128_net_fraction': 1.5 is out of range (expected 0 to 1)");
  EXPECT_CONTAINS(error_of(std::string(kValid) + "nccl:\n  nvls_fill_chunks: -1\n"),
                  "p.yaml:21: key 'nccl.nvls_fill_chunks': -1 is out of range (expected 0 to");
  EXPECT_CONTAINS(error_of(std::string(kValid) + "nccl:\n  net_hop_us: [1, 2]\n"),
                  "p.yaml:21: key 'nccl.net_hop_us': expected 3 numbers [LL, LL128, Simple]");
  EXPECT_CONTAINS(error_of(std::string(kValid) + "nccl:\n  algo: ring,collnet\n"),
                  "p.yaml:21: key 'nccl.algo': NCCL_ALGO 'ring,collnet': 'collnet' is NCCL's but "
                  "not modelled");
  EXPECT_CONTAINS(error_of(std::string(kValid) + "nccl:\n  proto: [LL]\n"),
                  "p.yaml:21: key 'nccl.proto': expected text");
  EXPECT_CONTAINS(error_of(std::string(kValid) + "extra: 1\n"),
                  "p.yaml:20: key 'extra': unknown key");
  EXPECT_CONTAINS(error_of("name: [unclosed\n"), "p.yaml");
  EXPECT_CONTAINS(error_of("- a\n- b\n"), "p.yaml:1: the file: expected a mapping of keys");
}

}  // namespace preset_test
}  // namespace orrery::hw
