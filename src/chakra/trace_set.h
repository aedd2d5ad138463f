// chakra/trace_set.h: the files of a multi-rank trace, found from what the user typed.
//
// Tools are given either one .et file or a `<prefix>` whose ranks are `<prefix>.<r>.et` (or
// `.et.gz`), r = 0 .. n-1, as ASTRA-sim expects. resolve_trace_files() finds them and insists the
// ranks are contiguous from 0, so a missing rank file is named rather than silently skipped.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"

namespace orrery::chakra {

struct TraceFiles {
  // One path per rank, index = rank. A single file given directly is rank 0.
  std::vector<std::string> paths;
  // True when `paths` came from a prefix.
  bool from_prefix = false;
};

// `target` is a file (used as it is) or a prefix. Cost: one directory listing.
Expected<TraceFiles> resolve_trace_files(const std::string& target);

// As resolve_trace_files, for rank files ending in one of `suffixes` (".json"), earlier ones
// preferred when a rank has several.
Expected<TraceFiles> resolve_rank_files(const std::string& target,
                                        const std::vector<std::string>& suffixes);

// The path of rank `rank` under `prefix` ("<prefix>.<rank>.et").
std::string rank_trace_path(const std::string& prefix, uint64_t rank);

}  // namespace orrery::chakra
