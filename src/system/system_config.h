// system/system_config.h: ASTRA-sim's system configuration file (JSON), read unchanged.
//
// Every key ASTRA-sim 2.x reads is accepted with its meaning (docs/formats/configs.md); a value of
// the wrong kind or range is an Error naming file, line and key. Keys ASTRA-sim ignores in 2.x
// (boost-mode, L, o, g, G, ...) are accepted and listed in `ignored_keys`; keys nobody knows are
// listed in `unknown_keys` so the command line can warn about typos.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "system/compute_model.h"

namespace orrery::sys {

enum class SchedulingPolicy : uint8_t { kLifo, kFifo, kExplicit };
enum class CollectiveOptimization : uint8_t { kBaseline, kLocalBwAware };

// A collective algorithm for one dimension, or for all ranks at once (the "one*" variants).
enum class AlgorithmKind : uint8_t {
  kRing,
  kDirect,  // window = n - 1, or `window` for directN
  kHalvingDoubling,
  kDoubleBinaryTree,  // all-reduce only
  kOneRing,           // flat over all ranks of the group
  kOneDirect,
  kOneHalvingDoubling,
  kInSwitch,  // orrery: the Switch of the dimension reduces (or gathers) inside the network
  kNccl,      // orrery: NCCL's algorithms and protocols as its tuning model times them
              // (system/nccl_model.h); one phase over the whole group, like the one* variants
};

struct Algorithm {
  AlgorithmKind kind = AlgorithmKind::kRing;
  uint32_t window = 0;  // direct/oneDirect: messages in flight (0 = n - 1)
  bool operator==(const Algorithm&) const = default;
};

// "ring", "direct", "direct4", "halvingDoubling", "doubleBinaryTree", "oneRing", "oneDirect",
// "oneDirect8", "oneHalvingDoubling", and orrery's "inSwitch" (in-network collectives on a Switch
// dimension; not for all-to-all) and "nccl" (system/nccl_model.h). Error (kConfig) otherwise,
// listing the accepted names.
Expected<Algorithm> parse_algorithm(std::string_view name);
// The name as written in a configuration file.
std::string algorithm_name(const Algorithm& algorithm);

// preferred-dataset-splits above this is an error: the run's work grows with its square.
inline constexpr int64_t kMaxDatasetSplits = 65536;
// Above this a warning says the run will be slow (about 0.05 s per collective, growing squared).
inline constexpr uint32_t kSlowDatasetSplits = 4096;

// What NCCL's kernels achieve on this machine, for the `nccl` algorithm's timing
// (system/nccl_model.h); the link bandwidths come from the network. NCCL's own choice of algorithm
// and protocol uses its public tuning constants, not these: like NCCL, the model may pick what is
// not the fastest. Hardware presets set them (presets/hardware/*.yaml); a system file that names
// `nccl` gets these defaults. Protocol arrays are indexed LL, LL128, Simple.
// The GPU generation NCCL tunes for: its choice's per-channel bandwidth caps depend on it. kUnknown
// (a system file without a hardware preset) has the choice use the machine's figures instead.
enum class NcclArch : uint8_t { kUnknown, kVolta, kAmpere, kHopper, kBlackwell };

struct NcclTuning {
  NcclArch arch = NcclArch::kUnknown;          // set by hardware presets from the NVLink generation
  double launch_us = 6.0;                      // fixed cost per collective: launch, completion
  uint32_t channels = 16;                      // channels (rings) NCCL runs at once
  double ring_efficiency = 0.77;               // Simple ring bus bandwidth / NVLink bandwidth
  double ll_fraction = 0;                      // LL bus bandwidth / Simple's (0: 1/4 or 1/3)
  double ll128_channel_gbps = 16.7;            // LL128 bus bandwidth cap per channel, GB/s
  double ll128_net_fraction = 0;               // LL128 across nodes / Simple's (0: NCCL's rules)
  double nvlink_hop_us[3] = {0.47, 1.9, 3.4};  // latency per ring step within a node
  double net_hop_us[3] = {2.7, 4.0, 9.6};      // latency per ring step across nodes
  bool nvls = false;                           // the NVLink switch reduces in-switch (NVLS)
  double nvls_efficiency = 0.6;                // NVLS algorithm bandwidth / NVLink bandwidth
  double nvls_latency_us = 25.0;               // NVLS latency beyond the launch
  // NVLS moves a buffer in chunks, each channel (CTA) syncing with the switch per chunk; NCCL
  // shrinks the chunk for buffers that would not fill its channels x heads enough times, and the
  // per-chunk sync then costs bandwidth (the steps of measured NVLS curves at 1 and 2 GiB).
  uint32_t nvls_channels = 16;         // NCCL's NVLS channels (16 Hopper; 24 Blackwell in a node)
  uint32_t nvls_chunk_bytes = 131072;  // NCCL_NVLS_CHUNKSIZE, the largest chunk
  double nvls_chunk_us = 0;            // sync per chunk and channel (0: chunks cost nothing)
  double nvls_fill_chunks = 0;         // chunks a channel's pipeline holds before one completes
  double net_efficiency = 0.9;         // network bandwidth achieved / NIC line rate
  // NCCL_ALGO and NCCL_PROTO: the algorithms and protocols NCCL may pick, one bit per
  // sys::NcclAlgorithm and sys::NcclProtocol value (nccl_model.h); all by default.
  uint8_t algorithms = 0xff;
  uint8_t protocols = 0xff;
  bool operator==(const NcclTuning&) const = default;
};

struct SystemConfig {
  std::string path;  // the file it came from ("" for defaults)

  SchedulingPolicy scheduling_policy = SchedulingPolicy::kLifo;
  CollectiveOptimization collective_optimization = CollectiveOptimization::kBaseline;
  uint32_t preferred_dataset_splits = 1;     // chunks per collective
  uint32_t active_chunks_per_dimension = 1;  // chunks in flight per dimension queue
  int64_t endpoint_delay_ns = 10;            // per message at the endpoint (and per chunk start)
  bool endpoint_delay_given = false;         // whether the file set it (--injection-scale needs it)
  std::optional<double> local_mem_bw_gbps;   // decimal GB/s: bytes per ns; reductions, roofline

  // One entry per network dimension (checked against the network when a run is built).
  std::vector<Algorithm> all_reduce;
  std::vector<Algorithm> all_gather;
  std::vector<Algorithm> reduce_scatter;
  std::vector<Algorithm> all_to_all;
  // "*-implementation-custom": trace prefixes of a collective given as its own Chakra graph,
  // resolved to existing paths (relative to the working directory, else to the file's folder or
  // one of its ancestors, as ASTRA-sim's examples assume).
  std::vector<std::string> all_reduce_custom;
  std::vector<std::string> all_gather_custom;
  std::vector<std::string> reduce_scatter_custom;
  std::vector<std::string> all_to_all_custom;

  // For the `nccl` algorithm (its defaults when the file names nccl without tuning).
  NcclTuning nccl;

  bool roofline_enabled = false;
  std::optional<double> peak_perf_tflops;
  // Per-operation compute (hardware presets only; system files keep ASTRA-sim's roofline).
  std::optional<ComputeModel> compute;
  bool replay_only = false;
  bool track_local_mem = false;
  bool trace_enabled = false;

  std::vector<std::string> ignored_keys;  // known to ASTRA-sim, without effect in 2.x
  std::vector<std::string> unknown_keys;  // not an ASTRA-sim key at all
  // Legal values the run will regret (preferred-dataset-splits above kSlowDatasetSplits), each a
  // complete message with the file and line.
  std::vector<std::string> warnings;
};

// Reads an ASTRA-sim system file. Errors (kIo, kParse, kConfig) name the file, line and key:
// unknown algorithm names, a splits or active-chunks value below 1, a negative endpoint delay,
// a non-positive local-mem-bw or peak-perf, roofline enabled without peak-perf, an unknown
// scheduling policy or collective optimization, a custom collective whose rank files do not exist.
Expected<SystemConfig> load_system_config(const std::string& path);

// The same from text (for tests), as if read from `path`.
Expected<SystemConfig> parse_system_config(const std::string& path, std::string text);

}  // namespace orrery::sys
