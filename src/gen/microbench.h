// gen/microbench.h: one-collective traces in the shape of ASTRA-sim's microbenchmarks.
//
// Each rank's file holds GlobalMetadata{version "0.0.4"} and one COMM_COLL_NODE named
// "<collective>_<n>npus_<size>" (is_cpu_op false, comm_type, comm_size), exactly as
// astra-sim/examples/workload/microbenchmarks: the files are byte-identical to those. Node ids
// continue across ranks as ASTRA-sim's generator numbers them (rank r's collective has id r). With
// a compute time, a COMP_NODE (duration_micros) precedes the collective, which depends on it by
// data (ids 2r and 2r+1). Point-to-point "send-recv" writes a ring exchange instead: rank r sends
// to r+1 and receives from r-1 (tag 0). docs/formats/configs.md has the details.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "chakra/trace_set.h"
#include "core/error.h"

namespace orrery::gen {

enum class MicrobenchKind : uint8_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBroadcast,
  kReduce,
  kGather,
  kScatter,
  kBarrier,
  kSendRecv,
};

// "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast", "reduce", "gather",
// "scatter", "barrier", "send-recv" (also with underscores). Error listing the names otherwise.
Expected<MicrobenchKind> parse_microbench_kind(std::string_view name);

struct MicrobenchSpec {
  MicrobenchKind kind = MicrobenchKind::kAllReduce;
  uint64_t bytes = 0;       // comm_size (per-rank buffer; per-rank input for all-gather)
  uint32_t ranks = 0;       // at least 1
  uint64_t compute_us = 0;  // a COMP node before the collective when nonzero
  std::string pg_name;      // written as the collective's pg_name attribute when not empty
};

// Writes <prefix>.<r>.et for every rank (creating the folder of the prefix if needed). Returns the
// paths written.
Expected<std::vector<std::string>> write_microbench(const MicrobenchSpec& spec,
                                                    const std::string& prefix);

// The same traces in memory, named `name` (what write_microbench would write, node for node).
Expected<std::shared_ptr<const chakra::TraceSet>> build_microbench(
    const MicrobenchSpec& spec, const std::string& name = "microbenchmark");

}  // namespace orrery::gen
