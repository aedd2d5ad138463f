// partition/inference_trace.h: a partitioned model's inference as Chakra traces, and its latency.
//
// write_inference_traces() writes <prefix>.<worker>.et for every worker: for each dense/conv layer
// in order, the sends of the activations other workers need from this one (after the compute
// that produced them), the receives of the ones it needs, its compute on the inputs it holds
// (which can overlap the receives), then its compute on the received inputs; at the end every
// worker sends its outputs to worker 0. Compute nodes carry num_ops (2 x multiply-adds) and
// tensor_size (the weights and activations they touch) for the roofline model; message sizes are
// values x bytes per value, all for a batch of `batch` inferences. Tags number the layers from 1
// (the gather: layers + 1). The files pass `orrery trace validate --strict` and `orrery run`.
//
// simulate_latency() runs those traces in orrery's simulator (sim::run_simulation, ASTRA-sim's
// system and network files) and returns the time the last worker finishes, in nanoseconds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "partition/partitioner.h"

namespace orrery::partition {

struct TraceOptions {
  int64_t batch = 1;
  int64_t bytes_per_value = 4;
  std::string generator;  // recorded in each file's metadata
};

// Returns the paths written, by worker.
Expected<std::vector<std::string>> write_inference_traces(const Partition& partition,
                                                          const std::string& prefix,
                                                          const TraceOptions& options);

Expected<int64_t> simulate_latency(const std::string& prefix, const std::string& system,
                                   const std::string& network);

}  // namespace orrery::partition
