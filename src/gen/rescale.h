// gen/rescale.h: change the data-parallel degree of an existing trace set without re-tracing.
//
// A trace set of N ranks whose numbering puts the data-parallel index at stride S,
// rank = inner + S (d + D outer) with inner < S and d < D (Megatron-LM's order: inner = tensor and
// context ranks, outer = pipeline stages; S = 1 for pure data parallelism), becomes a set of
// N D' / D ranks: new rank (inner, d', outer) runs the program of old rank (inner, d' mod D, outer)
// with its communication rewritten.
//
// Communicator groups (from the comm-group file; pg_name "" or "0" is every rank) fall in two
// kinds, and any other group is refused with its id named:
// - replica groups: every member has the same d (tensor, context, pipeline, ...). Each new replica
//   d' gets a copy of the groups of replica d' mod D, with the members moved to d'.
// - data groups: the members are a set of (inner, outer) pairs times every d (data, data x
//   context, every rank). They grow to the same pairs times every d'.
// Sends and receives must stay within a replica (pipeline messages); their peers move to d'.
//
// Sizes. With BatchScaling::kPerRank (default) every replica keeps its samples, so the global batch
// grows by D'/D: programs are unchanged except the all-gathers over data groups, whose per-rank
// input is a 1/(group size) shard of parameters (ZeRO, FSDP) and scales by D/D'; all-reduces,
// reduce-scatters (comm_size is the whole buffer), broadcasts and reduces keep their size; nodes
// working on the shard a data-group reduce-scatter leaves (its data descendants up to a data-group
// all-gather: ZeRO's optimizer steps) scale by D/D' too. This is exact: it equals generating the
// larger plan directly. With BatchScaling::kGlobal the global batch
// is fixed, so each replica runs D/D' times its samples: compute nodes (num_ops, tensor_size,
// duration_micros), replica-group collectives and sends/receives scale by D/D'; data-group
// collectives and shard nodes are sized as above. This is linear in the batch and so approximate
// for work that does not depend on it (unsharded optimizer steps, weight reads in tensor_size).
//
// All-to-all, gather and scatter over a data group (e.g. DLRM's embedding exchange) depend on how
// the model is sharded and are refused: regenerate such workloads instead. Process groups defined
// in METADATA nodes are refused too (rewrite them into a comm-group file first).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace orrery::gen {

enum class BatchScaling : uint8_t { kPerRank, kGlobal };
// "per-rank" or "global". Error listing them.
Expected<BatchScaling> parse_batch_scaling(std::string_view name);

struct RescaleSpec {
  std::string workload;     // a rank file or a prefix (<prefix>.<r>.et)
  std::string comm_groups;  // comm-group file; empty: only pg_name ""/"0" (every rank) allowed
  uint32_t from_dp = 0;     // D
  uint32_t to_dp = 0;       // D'
  uint32_t stride = 0;      // S; 0: found from the groups (a data group of D members, stride S)
  BatchScaling batch = BatchScaling::kPerRank;
  std::string output;  // prefix: <output>.<rank>.et and <output>.json
  bool gzip = false;
  size_t threads = 0;  // 0: one per core
};

struct RescaleResult {
  uint32_t old_ranks = 0;
  uint32_t new_ranks = 0;
  uint32_t stride = 0;
  size_t replica_groups = 0;  // groups of the input, by kind
  size_t data_groups = 0;
  size_t new_groups = 0;  // groups written
  uint64_t nodes = 0;     // nodes written over all ranks
  std::vector<std::string> rank_files;
  std::string group_file;
};

// Reads the trace set, checks that it can be rescaled (errors name the file, node or group) and
// writes the new one. Deterministic: the output does not depend on the thread count.
Expected<RescaleResult> rescale_traces(const RescaleSpec& spec);

}  // namespace orrery::gen
