#include "design/sweep_cost.h"

#include <algorithm>

#include "core/units.h"
#include "memory/remote_memory.h"

namespace orrery::design {

double point_cost(const SweepSpec& spec, const ClusterPoint& cluster) {
  const SweepCosts& c = spec.costs;
  double each = c.accelerator + c.per_tflops * cluster.peak_tflops +
                c.hbm_per_gib * static_cast<double>(cluster.hbm_bytes) / kGiB +
                c.hbm_per_gbps * cluster.hbm_gbps;
  for (size_t d = 0; d < cluster.network.size() && d < spec.network.size(); ++d) {
    each += spec.network[d].cost_per_gbps * cluster.network[d].bandwidth_gbps;
  }
  if (cluster.expansion_bytes > 0) {
    each += (c.expansion_per_gib * static_cast<double>(cluster.expansion_bytes) / kGiB +
             c.expansion_per_gbps * cluster.expansion_gbps) /
            static_cast<double>(spec.expansion_shared_by);
  }
  return each * static_cast<double>(cluster.accelerators);
}

StageOffload stage_offload(const gen::StageMemory& stage, uint32_t set, uint32_t layers,
                           uint64_t micro_batches, bool recompute) {
  const gen::MemoryBreakdown& m = stage.memory;
  const uint64_t l = std::max<uint32_t>(layers, 1);
  const uint64_t in_flight = std::max<uint64_t>(stage.in_flight, 1);
  StageOffload out;
  out.hbm = m.total();
  if ((set & kOffloadOptimizer) != 0) {
    out.hbm -= m.optimizer;
    out.hbm += 2 * m.optimizer / l;
    out.tier += m.optimizer;
    out.exposed += 2 * m.optimizer;  // read and written once per step
    out.exposed_accesses += 2 * l;
  }
  if ((set & kOffloadWeights) != 0) {
    const uint64_t held = m.weights + m.gradients;
    out.hbm -= held;
    out.hbm += 2 * held / l;
    out.tier += held;
    const uint64_t passes = recompute ? 3 : 2;
    out.overlapped += micro_batches * (passes * m.weights + 2 * m.gradients);
    out.overlapped_accesses += micro_batches * l * (passes + 2);
  }
  if ((set & kOffloadActivations) != 0) {
    out.hbm -= m.activations;
    out.hbm += 2 * m.activations / (l * in_flight);
    out.tier += m.activations;
    out.overlapped += 2 * micro_batches * (m.activations / in_flight);
    out.overlapped_accesses += 2 * micro_batches * l;
  }
  return out;
}

double offload_time_ns(const StageOffload& offload, double compute_ns, double gbps,
                       double latency_ns, uint32_t shared_by) {
  // Every accelerator sharing a device streams at the same time: each gets its share of the
  // bandwidth (the FIFO of a per-node or pooled remote memory, served in turn).
  memory::RemoteMemoryConfig config;
  config.type = memory::MemoryType::kPerNpu;
  config.latency_ns = latency_ns;
  config.bandwidth_gbps = gbps / static_cast<double>(std::max<uint32_t>(shared_by, 1));
  const memory::RemoteMemory tier(config, 1);
  auto traffic = [&](uint64_t bytes, uint64_t accesses) {
    if (bytes == 0 || accesses == 0) return 0.0;
    return static_cast<double>(accesses) * tier.cost(bytes / accesses).ns();
  };
  const double overlapped = traffic(offload.overlapped, offload.overlapped_accesses);
  const double exposed = traffic(offload.exposed, offload.exposed_accesses);
  return std::max(0.0, overlapped - compute_ns) + exposed;
}

}  // namespace orrery::design
