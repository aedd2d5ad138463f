// system/compute_model.h: how long a GPU kernel takes, per operation, on a machine whose compute
// model a hardware preset describes (its `compute:` block; docs/models/compute.md).
//
// ASTRA-sim's roofline runs every kernel at min(peak, bandwidth x intensity). Real kernels do not:
// a matrix product (GEMM) reaches a fraction of the tensor-core peak that depends on its shape
// (small and skinny products fill fewer streaming multiprocessors and pipeline a short inner loop),
// memory-bound kernels reach a fraction of the HBM bandwidth, and every kernel pays a launch. The
// model, for one kernel of `flops` operations touching `bytes` bytes:
//
//   GEMM (shape m x k by k x n, `batch` of them; gemm_m/gemm_n/gemm_k/gemm_batch attributes):
//     efficiency = gemm_efficiency x k / (k + gemm_k_half) x wave(m, n, batch)
//     wave       = useful tile area / launched tile area: ceil(m/tile_m) ceil(n/tile_n) batch tiles
//                  run in ceil(tiles / sms) waves of `sms` tiles (wave quantization), and a partial
//                  tile computes its padding (tile quantization); 1 when tile_m or tile_n is 0
//     time       = launch + max(flops / (peak x efficiency), bytes / (hbm x memory_efficiency))
//   any other kernel (no shape: element-wise, norms, reductions, the optimizer):
//     time       = launch + max(flops / (peak x gemm_efficiency), bytes / (hbm x
//     memory_efficiency))
//
// Times are whole picoseconds, rounded down; zero FLOPs and zero bytes take only the launch. The
// model is a pure function of its parameters: deterministic, and monotone in flops and bytes.
//
// While the rank communicates, the collective library's kernels hold `comm_sms` of the SMs (NCCL
// runs one thread block per channel, each on an SM of its own, for as long as the collective or
// send/receive is in flight, waiting included): a kernel then runs on the others, with their share
// of the peak and waves of that many tiles (while_communicating). Memory-bound kernels keep the
// HBM bandwidth (the library's own HBM traffic is not modelled).
#pragma once

#include <cstdint>
#include <string>

#include "core/time.h"

namespace orrery::sys {

// The parameters (a preset's `compute:` block; defaults are overwritten by the preset's figures).
struct ComputeModel {
  double peak_tflops = 0;        // dense tensor-core peak (the preset's gpu.peak_tflops)
  double hbm_gbps = 0;           // HBM bandwidth, decimal GB/s (the preset's gpu.hbm_gbps)
  double gemm_efficiency = 0.8;  // fraction of peak a large, square GEMM sustains
  double gemm_k_half = 128;      // inner dimension at which the k-loop loses half of that
  uint32_t sms = 108;            // streaming multiprocessors (one tile per SM per wave)
  uint32_t tile_m = 256;         // output tile of the GEMM kernel (0: no wave/tile model)
  uint32_t tile_n = 128;
  double memory_efficiency = 0.85;  // fraction of HBM bandwidth memory-bound kernels reach
  double launch_us = 4.0;           // fixed cost per kernel (launch and tail), microseconds
  uint32_t comm_sms = 0;  // SMs the collective library holds while the rank communicates (< sms)
  bool operator==(const ComputeModel&) const = default;
};

// The model of a kernel that runs while the rank communicates: sms - comm_sms SMs, the peak
// scaled by their share. The model itself when comm_sms is 0.
ComputeModel while_communicating(const ComputeModel& model);

// A GEMM's shape: batch products of (m x k) by (k x n). All zero: not a GEMM.
struct GemmShape {
  uint64_t m = 0, n = 0, k = 0, batch = 1;
  bool valid() const { return m > 0 && n > 0 && k > 0 && batch > 0; }
};

// The fraction of peak a GEMM of this shape reaches (before the memory bound).
double gemm_efficiency(const ComputeModel& model, const GemmShape& shape);
// The fraction lost to wave and tile quantization alone (1 without a tile).
double gemm_wave_efficiency(const ComputeModel& model, const GemmShape& shape);
// One GEMM's time in seconds, unrounded (the calibration fits against it).
double gemm_seconds(const ComputeModel& model, const GemmShape& shape, uint64_t flops,
                    uint64_t bytes);
// One kernel without a shape, in seconds.
double kernel_seconds(const ComputeModel& model, uint64_t flops, uint64_t bytes);
// Either, rounded down to whole picoseconds (saturating); `shape` may be null.
SimTime compute_model_time(const ComputeModel& model, uint64_t flops, uint64_t bytes,
                           const GemmShape* shape);
// 2 m n k batch: the operations of a GEMM of this shape.
uint64_t gemm_flops(const GemmShape& shape);

// A one-line description for reports: "GEMM 80% of 312 TFLOP/s (k/2 128, 108 SMs, tile 256x128),
// memory 85% of 2039 GB/s, launch 4 us".
std::string describe(const ComputeModel& model);

}  // namespace orrery::sys
