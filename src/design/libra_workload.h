// design/libra_workload.h: LIBRA workloads derived from a Chakra trace set or an `orrery gen llm`
// plan (docs/models/libra.md, "Workloads from traces").
//
// One rank's trace stands for the iteration (LIBRA models one NPU; every rank of a data- or
// tensor-parallel job does the same work). Its nodes are read in file order: GPU compute adds to
// the current phase's compute time, and every collective closes a phase, which becomes one LIBRA
// layer (named after the collective node) whose forward phase holds that compute and the
// collective. Compute left after the last collective is a layer of its own. Compute is timed as
// `orrery run` times it: by the roofline of the system file (num_ops and tensor_size, when the file
// enables it and the node has FLOPs), else by duration_micros. A node with FLOPs but no duration
// and no roofline is an error rather than the 1 ns the simulator would give it. A collective's
// bytes are its comm_size (LIBRA's S: the per-rank buffer, or the per-rank input of an all-gather,
// as in the simulator). Its communicator group must be a sub-grid of the network (every combination
// of a set of coordinates in each dimension): its group size in dimension d is the number of
// coordinates it takes there, -1 when it takes one. Point-to-point messages, CPU operations and
// collectives LIBRA does not model (broadcast, reduce, gather, scatter, barrier) are left out and
// counted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chakra/trace_graph.h"
#include "core/error.h"
#include "design/libra_model.h"
#include "gen/llm_generator.h"
#include "gen/llm_options.h"
#include "chakra/comm_groups.h"

namespace orrery::design {

// How compute nodes are timed: the roofline of a system file, or recorded durations only.
struct ComputeTiming {
  bool roofline = false;
  double peak_tflops = 0;
  double mem_bw = 0;   // bytes per ns (decimal GB/s)
  std::string system;  // the file it came from ("" = durations only)
};

// Reads the roofline settings of an ASTRA-sim system file ("" gives durations only).
Expected<ComputeTiming> load_compute_timing(const std::string& system_path);

// A derived workload and what went into it.
struct DerivedWorkload {
  std::vector<Layer> layers;
  std::string source;              // the trace file or plan it came from
  uint32_t rank = 0;               // the rank whose trace it is
  double compute_ns = 0;           // total GPU compute
  uint64_t timed_by_duration = 0;  // compute nodes timed by duration_micros
  uint64_t timed_by_roofline = 0;  // compute nodes timed by the roofline
  uint64_t collectives = 0;        // collectives in the workload
  uint64_t single_rank = 0;        // collectives over one rank (no traffic), left out
  uint64_t unmodelled = 0;         // broadcast, reduce, gather, scatter, barrier: left out
  uint64_t point_to_point = 0;     // sends and receives: left out
  uint64_t point_to_point_bytes = 0;
  uint64_t cpu_nodes = 0;  // CPU operations: left out

  // One line: "rank 0 of gpt.%.et: 96 collectives, 123.4 ms of compute (96 nodes by the roofline
  // of system.json), left out: 4 point-to-point messages (8 MB)".
  std::string summary() const;
};

// Group size per dimension of a group of ranks on a network with `dims` (rank = c0 + n0 (c1 + n1
// (c2 ...)), as orrery's and ASTRA-sim's networks number them): the number of coordinates it takes
// in each dimension, -1 for one. Error when the ranks are not a sub-grid of the network, or lie
// outside it.
Expected<std::vector<int32_t>> group_dimension_sizes(const std::vector<uint32_t>& ranks,
                                                     const std::vector<Dimension>& dims);

// The workload of `rank` from its trace graph and the job's communicator groups.
Expected<DerivedWorkload> workload_from_graph(const chakra::TraceGraph& graph,
                                              const chakra::CommGroups& groups, uint32_t rank,
                                              const std::vector<Dimension>& dims,
                                              const ComputeTiming& timing);

// The workload of `rank` from a trace set (<prefix>.<rank>.et or one file) whose rank count must
// equal the network's NPUs. Groups come from `groups_file` ("" = <prefix>.json when it exists, as
// `orrery gen` writes it) and from the rank's METADATA nodes.
Expected<DerivedWorkload> workload_from_trace(const std::string& prefix,
                                              const std::string& groups_file, uint32_t rank,
                                              const std::vector<Dimension>& dims,
                                              const ComputeTiming& timing);

// The workload of `rank` of an `orrery gen llm` plan, built in memory (no files): the same nodes
// and groups `orrery gen llm` would write. The plan's rank count must equal the network's NPUs.
Expected<DerivedWorkload> workload_from_llm(const gen::LlmGenerator& generator, uint32_t rank,
                                            const std::vector<Dimension>& dims,
                                            const ComputeTiming& timing);

// `orrery gen llm`'s options as written on its command line ("--model gpt3-175b --tp 8 --sp"),
// by name. Error for a word that is not an option.
Expected<std::vector<std::pair<std::string, std::string>>> parse_llm_plan_text(
    std::string_view text);

// Derives the workload `source` describes on a network of `dims`: from its trace set, or from its
// `orrery gen llm` options. Errors say where the source was given.
Expected<DerivedWorkload> derive_workload(const WorkloadSource& source,
                                          const std::vector<Dimension>& dims);

}  // namespace orrery::design
