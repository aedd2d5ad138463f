// design/sweep_file.h: the sweep file of `orrery sweep` (docs/formats/sweep.md), read and checked.
//
// A sweep file (YAML) names one workload (a transformer of `orrery gen llm`, or a DLRM model of
// `orrery gen dlrm`, with its global batch), the cluster axes (accelerators, peak FLOP/s and the
// fraction of it compute reaches, HBM capacity and bandwidth, every network dimension's topology,
// size, bandwidth and latency, the memory expansion tier's capacity, bandwidth and latency), the
// plan axes (tp, cp, pp, dp, ep, micro-batch, sequence parallelism, ZeRO, recomputation,
// schedule, virtual stages, offload; DLRM: sharding), the unit costs of every part and the
// constraints (memory must fit, a cost budget). Each axis is a value, a list, a range
// ({from, to, step} or {from, to, times}) or, for plan axes, `all`: every value the divisibility
// rules allow given the axes before it (sweep_space.h). Every mistake is an error naming the file,
// the line and the key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "gen/dlrm_generator.h"
#include "gen/transformer_model.h"

namespace orrery::design {

// The values of one axis. `all` (plan axes only) leaves `values` empty.
template <typename T>
struct Axis {
  std::vector<T> values;
  bool all = false;
  int line = 0;  // where the file gives it (0: the default)
};

enum class SweepWorkload : uint8_t { kLlm, kDlrm };

// What can be moved to the expansion tier, as bits of an offload set.
enum OffloadBits : uint32_t {
  kOffloadOptimizer = 1,
  kOffloadActivations = 2,
  kOffloadWeights = 4,
};
inline constexpr uint32_t kOffloadAll = 7;
// An offload axis value: a set of the bits above, or `auto` (the fastest set that fits).
struct OffloadChoice {
  bool automatic = false;
  uint32_t set = 0;
  bool operator==(const OffloadChoice&) const = default;
};
// "none", "optimizer", "activations", "weights", joined with '+' ("optimizer+activations"), "all"
// or "auto".
Expected<OffloadChoice> parse_offload(std::string_view text);
std::string offload_name(const OffloadChoice& choice);
std::string offload_set_name(uint32_t set);

struct DimensionSpec {
  std::string topology = "Switch";  // Ring, FullyConnected or Switch (ASTRA-sim's names)
  Axis<uint32_t> size;              // 0 = "rest": the accelerators the other dimensions leave
  Axis<double> bandwidth_gbps;      // per link and direction, as ASTRA-sim's network files say
  Axis<double> latency_ns;
  double cost_per_gbps = 0;  // dollars per GB/s of one accelerator's bandwidth in this dimension
  std::string all_reduce = "ring";  // the system's implementation on this dimension
  std::string all_to_all = "direct";
  int line = 0;
};

struct SweepCosts {
  double accelerator = 0;        // dollars per accelerator, without memory
  double per_tflops = 0;         // dollars per TFLOP/s of peak, per accelerator
  double hbm_per_gib = 0;        // dollars per GiB of HBM
  double hbm_per_gbps = 0;       // dollars per GB/s of HBM bandwidth
  double expansion_per_gib = 0;  // dollars per GiB of the expansion tier
  double expansion_per_gbps = 0;
};

struct SweepSpec {
  std::string path;  // the file
  std::string text;  // its bytes (their hash ties a database to the sweep)
  std::string name;

  SweepWorkload workload = SweepWorkload::kLlm;
  std::string model_name;  // the preset or file as given
  gen::TransformerModel llm;
  gen::DlrmModel dlrm;
  uint64_t global_batch = 0;
  uint32_t seq = 0;  // 0: the model's

  // Cluster axes.
  Axis<uint32_t> accelerators;
  Axis<double> peak_tflops;
  Axis<double> efficiency;  // fraction of peak the compute reaches: the roofline's ceiling
  Axis<uint64_t> hbm_bytes;
  Axis<double> hbm_gbps;  // decimal GB/s (the roofline's memory bandwidth)
  std::vector<DimensionSpec> network;
  Axis<uint64_t> expansion_bytes;  // of one expansion device (0: no expansion tier)
  Axis<double> expansion_gbps;     // of one expansion device, decimal GB/s
  Axis<double> expansion_latency_ns;
  uint32_t expansion_shared_by = 1;  // accelerators sharing one device (1: per accelerator)

  // Plan axes (transformers).
  Axis<uint32_t> tp, cp, pp, dp, ep;
  Axis<uint64_t> micro_batch;
  Axis<bool> sp, recompute;
  Axis<uint32_t> zero;
  Axis<std::string> schedule;  // 1f1b, interleaved
  Axis<uint32_t> virtual_stages;
  Axis<OffloadChoice> offload;
  // Plan axis (DLRM).
  Axis<std::string> sharding;  // table, row, column

  // The simulated system.
  std::string backend = "analytical";
  std::string scheduling = "LIFO";
  uint32_t splits = 4;  // preferred-dataset-splits
  double endpoint_delay_ns = 10;

  SweepCosts costs;
  bool memory_must_fit = true;
  double budget = 0;            // dollars; 0 = none
  std::vector<double> budgets;  // for the answers: the best point within each
};

// Reads and checks a sweep file. Errors: "sweep.yml:12: key 'tpp': unknown plan axis (tp, cp,
// ...)", values of the wrong kind, empty lists, ranges that do not end, `all` on a cluster axis,
// an unknown model, plan axes of the other workload kind.
Expected<SweepSpec> load_sweep_file(const std::string& path);
Expected<SweepSpec> parse_sweep_file(const std::string& path, std::string text);

}  // namespace orrery::design
