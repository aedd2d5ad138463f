// convert/rank_directory.h: a directory of per-rank PyTorch traces to one Chakra trace per rank.
//
// A multi-rank job leaves one host trace (and often one Kineto trace) per rank, in any folder
// layout: the DLRM set of facebookresearch/param, for instance, unpacks to
//   dlrm_pytorch_et/dlrm_eg_<r>.json  and  dlrm_kineto/worker<r>_step_12.<time>.pt.trace.json.
// plan_rank_directory() finds the JSON files recursively and tells them apart by content (a host
// trace has "schema" and "nodes", a Kineto trace "traceEvents"). A rank comes from the file's
// contents (Kineto's distributedInfo.rank) or else from the number in its name ("rank3", "worker3",
// otherwise the last number: dlrm_eg_3.json). Host ranks must be 0..n-1 with no gaps or repeats.
// convert_rank_directory() converts the ranks in parallel to <prefix>.<r>.et, writes the
// communicator groups of all ranks to <prefix>.json, and checks that the ranks agree on their
// collectives (same count, types and sizes per process group), reporting any disagreement.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "convert/pytorch_converter.h"
#include "core/error.h"

namespace orrery::convert {

struct RankInputs {
  uint32_t rank = 0;
  std::string host;
  std::string device;       // "" when the rank has no Kineto trace
  std::string rank_source;  // "distributedInfo.rank", "file name"
};

struct DirectoryPlan {
  std::vector<RankInputs> ranks;     // index = rank
  std::vector<std::string> ignored;  // "path: why"
};

// Finds the rank files under `dir`. Errors: no host trace found, a rank that cannot be told, a rank
// claimed twice, a gap in the ranks.
Expected<DirectoryPlan> plan_rank_directory(const std::string& dir);

struct DirectoryReport {
  DirectoryPlan plan;
  std::vector<ConversionReport> ranks;
  std::vector<std::string> outputs;  // <prefix>.<r>.et
  std::string comm_group_path;       // <prefix>.json
  std::string comm_group_text;
  std::vector<std::string> warnings;  // ranks that disagree, groups left out
};

// Converts every rank of `dir` (on up to `threads` threads, 0: one per core).
Expected<DirectoryReport> convert_rank_directory(const std::string& dir, const std::string& prefix,
                                                 const ConvertOptions& options, size_t threads);

std::string format_directory_report(const DirectoryReport& report, size_t examples);

// The rank a file name gives: the number after "rank" or "worker", else the last number in the
// name (without its extensions). nullopt when the name holds no number.
std::optional<uint32_t> rank_from_file_name(const std::string& path);

}  // namespace orrery::convert
