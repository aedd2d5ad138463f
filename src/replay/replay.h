// replay/replay.h: `orrery replay` as a library call: traces in, one rank's measured replay out.
//
// replay() reads this rank's host trace (a file, or rank r of a --dir set: convert/rank_directory.h
// pairs each rank's host trace with its profiler trace), builds the plan (replay/plan.h), links
// the profiler trace's times (replay/recorded_times.h), builds the operators (replay/executor.h),
// runs the session (replay/session.h) and reports (replay/report.h). Every rank calls it; rank 0
// receives every rank's JSON. With `emit_chakra`, each rank also writes <prefix>.<rank>.et: the
// trace converted by orrery convert (host ops, collectives, process groups), restricted to the
// replayed iteration, with every replayed operator's measured mean as its duration (and each
// collective's, which the simulator uses in replay-only mode), so that `orrery run` simulates what
// was measured; matrix products and convolutions also get num_ops and tensor_size
// (replay/op_cost.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/host_trace.h"
#include "core/error.h"
#include "replay/communicator.h"
#include "replay/plan.h"
#include "replay/report.h"
#include "replay/session.h"

namespace orrery::replay {

struct ReplayOptions {
  std::string trace;             // one host trace (with `profile`, its profiler trace), or
  std::string profile;           //
  std::string dir;               // a directory of ranks
  std::optional<uint32_t> rank;  // with `dir` and one process: the rank to replay alone
  std::optional<int64_t> iteration;
  int warmup = 5;
  int iterations = 10;
  int threads = 0;
  uint64_t seed = 0;
  bool async_comm = true;
  bool flush_subnormals = true;  // ExecutorOptions::flush_subnormals
  bool autograd = false;         // ExecutorOptions::autograd
  std::string emit_chakra;       // "" for none
};

struct ReplayOutcome {
  RankReport report;
  std::vector<nlohmann::json> ranks;  // every rank's rank_json (rank 0 only; others: its own)
  std::string emitted;                // the .et file written, if any
  uint64_t emitted_nodes = 0;
};

Expected<ReplayOutcome> replay(const ReplayOptions& options, Communicator& communicator);

// The Chakra trace of one replayed rank (see above); returns the number of nodes written.
Expected<uint64_t> emit_chakra(const convert::HostTrace& host, const ReplayPlan& plan,
                               const SessionResult& session, uint32_t world,
                               const std::string& path);

}  // namespace orrery::replay
