// design/sweep_cost.h: what a sweep point's cluster costs, and what its memory holds.
//
// Cost (dollars, linear in every part, as COMET and Calculon price a cluster):
//   accelerators x (accelerator + per_tflops x peak + hbm_per_gib x HBM GiB
//                   + hbm_per_gbps x HBM GB/s + sum over dimensions d of cost_d x bandwidth_d
//                   + (expansion_per_gib x tier GiB + expansion_per_gbps x tier GB/s) / shared_by)
// where an expansion device (capacity, bandwidth) is shared by `shared_by` accelerators.
//
// Memory (transformers): the memory estimate of gen/memory_estimate.h per pipeline stage, with an
// offload set moving parts of it to the expansion tier (docs/models/sweep.md):
//   optimizer    the optimizer states live in the tier; the step streams them in and out block
//                by block (HBM keeps two blocks' worth)
//   weights      weights and gradients live in the tier; every forward and backward pass of a
//                micro-batch streams each layer's weights in, and each backward pass reads and
//                writes its gradients (HBM keeps two layers' worth)
//   activations  what backward needs is written to the tier after each layer's forward and read
//                back before its backward (HBM keeps two layers' worth of one micro-batch)
// A stage fits when what stays in HBM fits the HBM capacity and what moved fits its share of the
// tier (capacity / shared_by). The time of that traffic is the remote memory model's
// (memory/remote_memory.h: latency + bytes / bandwidth per access, the bandwidth divided among
// the accelerators sharing a device, as they all stream at once): the weight and activation
// traffic overlaps the stage's compute (prefetched a layer ahead), so only what exceeds the compute
// time is exposed; the optimizer traffic happens in the step after the pipeline flushes, fully
// exposed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "design/sweep_file.h"
#include "design/sweep_space.h"
#include "gen/memory_estimate.h"

namespace orrery::design {

double point_cost(const SweepSpec& spec, const ClusterPoint& cluster);

// One pipeline stage under one offload set.
struct StageOffload {
  uint64_t hbm = 0;         // bytes that stay in HBM, buffers included
  uint64_t tier = 0;        // bytes in the expansion tier
  uint64_t overlapped = 0;  // bytes moved per iteration while compute runs (weights, activations)
  uint64_t overlapped_accesses = 0;
  uint64_t exposed = 0;  // bytes moved per iteration in the optimizer step
  uint64_t exposed_accesses = 0;
};

// The stage's memory under `set` (kOffload* bits). `layers` is the number of layers the stage
// holds (at least 1), `micro_batches` the micro-batches per iteration, `recompute` whether the
// forward runs again before the backward (the weights are read a third time).
StageOffload stage_offload(const gen::StageMemory& stage, uint32_t set, uint32_t layers,
                           uint64_t micro_batches, bool recompute);

// Exposed time (ns) of one stage's offload traffic given its compute time (ns), on a tier of
// `gbps` (decimal GB/s, per device) and `latency_ns` shared by `shared_by` accelerators.
double offload_time_ns(const StageOffload& offload, double compute_ns, double gbps,
                       double latency_ns, uint32_t shared_by);

}  // namespace orrery::design
