#include "system/compute_model.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/checked.h"

namespace orrery::sys {

namespace {

double ceil_div(uint64_t a, uint64_t b) {
  return std::ceil(static_cast<double>(a) / static_cast<double>(b));
}

double memory_seconds(const ComputeModel& model, uint64_t bytes) {
  return static_cast<double>(bytes) / (model.hbm_gbps * 1e9 * model.memory_efficiency);
}

}  // namespace

double gemm_wave_efficiency(const ComputeModel& model, const GemmShape& shape) {
  if (model.tile_m == 0 || model.tile_n == 0 || model.sms == 0 || !shape.valid()) return 1.0;
  const double tiles_m = ceil_div(shape.m, model.tile_m);
  const double tiles_n = ceil_div(shape.n, model.tile_n);
  const double tiles = tiles_m * tiles_n * static_cast<double>(shape.batch);
  const double waves = std::ceil(tiles / model.sms);
  // Useful output area over the area the launched waves could have computed.
  const double useful = static_cast<double>(shape.m) * static_cast<double>(shape.n) *
                        static_cast<double>(shape.batch);
  const double launched = waves * model.sms * model.tile_m * model.tile_n;
  return std::min(1.0, useful / launched);
}

double gemm_efficiency(const ComputeModel& model, const GemmShape& shape) {
  const double k = static_cast<double>(shape.k);
  const double inner = shape.valid() ? k / (k + model.gemm_k_half) : 1.0;
  return model.gemm_efficiency * inner * gemm_wave_efficiency(model, shape);
}

double gemm_seconds(const ComputeModel& model, const GemmShape& shape, uint64_t flops,
                    uint64_t bytes) {
  const double compute =
      static_cast<double>(flops) / (model.peak_tflops * 1e12 * gemm_efficiency(model, shape));
  return model.launch_us * 1e-6 + std::max(compute, memory_seconds(model, bytes));
}

double kernel_seconds(const ComputeModel& model, uint64_t flops, uint64_t bytes) {
  const double compute =
      static_cast<double>(flops) / (model.peak_tflops * 1e12 * model.gemm_efficiency);
  return model.launch_us * 1e-6 + std::max(compute, memory_seconds(model, bytes));
}

ComputeModel while_communicating(const ComputeModel& model) {
  if (model.comm_sms == 0 || model.sms == 0) return model;
  ComputeModel out = model;
  out.sms = model.comm_sms < model.sms ? model.sms - model.comm_sms : 1;
  out.peak_tflops = model.peak_tflops * out.sms / model.sms;
  out.comm_sms = 0;
  return out;
}

SimTime compute_model_time(const ComputeModel& model, uint64_t flops, uint64_t bytes,
                           const GemmShape* shape) {
  const double seconds = shape != nullptr && shape->valid()
                             ? gemm_seconds(model, *shape, flops, bytes)
                             : kernel_seconds(model, flops, bytes);
  // Saturates instead of the undefined cast of an out-of-range double: a saturated time passes
  // the run's time limit and is reported there.
  return SimTime::from_ps(saturating_trunc_i64(std::floor(seconds * 1e12)));
}

uint64_t gemm_flops(const GemmShape& shape) {
  return saturating_mul(saturating_mul(saturating_mul(2 * shape.m, shape.n), shape.k), shape.batch);
}

std::string describe(const ComputeModel& model) {
  std::string tile = model.tile_m == 0 || model.tile_n == 0
                         ? std::string("no tile model")
                         : fmt::format("{} SMs, tile {}x{}", model.sms, model.tile_m, model.tile_n);
  return fmt::format(
      "GEMM {:.3g}% of {:.6g} TFLOP/s (k half {:.4g}, {}), memory {:.3g}% of {:.6g} GB/s, "
      "launch {:.3g} us{}",
      model.gemm_efficiency * 100, model.peak_tflops, model.gemm_k_half, tile,
      model.memory_efficiency * 100, model.hbm_gbps, model.launch_us,
      model.comm_sms == 0 ? std::string()
                          : fmt::format(", {} SMs held while communicating", model.comm_sms));
}

}  // namespace orrery::sys
