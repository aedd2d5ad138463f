// hardware/preset.h: named descriptions of real machines (presets/hardware/*.yaml), turned into
// the system configuration and network the simulator takes.
//
// A preset is a documented YAML file of public specifications: the GPU (peak dense BF16 FLOP/s,
// HBM bandwidth, memory), the node (GPUs, NVLink generation, links and bandwidth, NVSwitch and
// whether it reduces in-switch (NVLS), the default NIC kind), the fabric, the collective algorithm
// (`nccl` by default), the `nccl` block of what NCCL's kernels achieve (sys::NcclTuning) and the
// `compute` block of what its kernels achieve (sys::ComputeModel, docs/models/compute.md). NIC
// kinds (presets/hardware/nics.yaml: hdr200x8, ndr400x8, roce400x8, efa100x32, tcpxo200x8) give a
// node's scale-out network. The presets ship inside the binary; a name that is not one of them is
// read as a file. Every key is checked: an unknown key, a missing one or a value out of range is
// an Error naming the file, the line and the key (so a typo is never silently a default).
//
// build_hardware(preset, nodes, nic) makes:
//   network: dimension 0 a Switch of the node's GPUs at the NVLink bandwidth per GPU; with nodes >
//   1,
//     dimension 1 a Switch of the nodes (a rail: the same GPU of every node) at the NIC bandwidth
//     per GPU (the node's NICs shared by its GPUs). Latencies are 0: a collective's latencies are
//     the nccl model's (which has the NIC's); point-to-point messages see bandwidth only.
//   system: the collective algorithm for every dimension and collective, one chunk per collective,
//     local-mem-bw = HBM bandwidth, the roofline at the GPU's peak, the nccl tuning (with the NIC's
//     efficiency and latency), and the compute model, which times GPU compute in the roofline's
//     place.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "network/graph_yaml.h"
#include "system/system_config.h"

namespace orrery::hw {

struct NicKind {
  std::string name;
  std::string description;
  uint32_t count = 0;     // NICs per node
  double gbit = 0;        // line rate of one NIC, Gb/s (10^9 bits per second)
  std::string transport;  // infiniband, roce, efa, tcpxo
  double efficiency = 1;  // share of line rate achieved
  double latency_us = 0;  // one-way through the fabric
  // All NICs of a node together, GB/s (10^9 bytes per second) per direction.
  double node_gbps() const { return count * gbit / 8.0; }
};

struct HardwarePreset {
  std::string name;
  std::string source;  // the file it came from ("builtin:<name>.yaml" for a shipped preset)
  std::string description;
  std::string gpu_model;
  double peak_tflops = 0;  // dense BF16
  double hbm_gbps = 0;     // GB/s
  double memory_gib = 0;
  uint32_t gpus_per_node = 0;
  uint32_t nvlink_generation = 0;
  uint32_t nvlink_links = 0;
  double nvlink_gbps = 0;  // per GPU per direction
  std::string nvswitch_model;
  uint32_t nvswitch_count = 0;
  bool nvls = false;
  std::string default_nic;
  std::string fabric;
  std::string collective_algorithm = "nccl";
  sys::NcclTuning nccl;  // `nvls` follows the NVSwitch's
  // The per-operation compute model (`compute:` block; peak and HBM bandwidth are the gpu's).
  sys::ComputeModel compute;
};

// The shipped presets' names, sorted, and the NIC kinds' names in file order.
std::vector<std::string> preset_names();
std::vector<std::string> nic_kind_names();

// A shipped preset by name, or else a preset file at that path. Errors: kIo (no such preset or
// file: the message lists the shipped names), kParse / kConfig naming file, line and key.
Expected<HardwarePreset> load_preset(std::string_view name_or_file);
// The same from text, as if read from `file_name`.
Expected<HardwarePreset> parse_preset(std::string_view text, std::string_view file_name);

// A NIC kind by name (Error kConfig listing the kinds).
Expected<NicKind> nic_kind(std::string_view name);

struct Hardware {
  HardwarePreset preset;
  NicKind nic;
  uint32_t nodes = 1;
  uint32_t gpus_per_node = 0;
  std::string description;  // "dgx-h100 x 2 nodes, ndr400x8" for reports
  std::shared_ptr<const sys::SystemConfig> system;
  std::shared_ptr<const net::NetworkDescription> network;
};

// The machine of `nodes` nodes (1 to 2^16) with NIC kind `nic` ("" = the preset's default).
// `gpus_per_node` below the preset's (1 node only) uses that many GPUs of one node (0 = all).
Expected<Hardware> build_hardware(const HardwarePreset& preset, uint32_t nodes,
                                  std::string_view nic, uint32_t gpus_per_node = 0);

}  // namespace orrery::hw
