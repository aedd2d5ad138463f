// replay/session.h: one rank's replay: a check pass, warm-up iterations and measured iterations.
//
// run_session() runs the plan's operators in start order, iteration after iteration:
//   - the first pass is a check: every compute operator runs once, and one that throws is skipped
//     from then on, with libtorch's message as the reason; then `warmup` iterations, then
//     `iterations` measured ones, each timed in wall time (steady clock) and CPU time (the
//     process's, every thread), every rank starting it together (a barrier, outside the timing);
//   - communication runs on its own thread, in issue order, as c10d's backends run it beside the
//     computation: a later operator that reads or writes one of a pending collective's tensors
//     waits for it first (that is where the original waited), and every iteration ends when its
//     communication has (SessionOptions::async_comm false runs each collective where it was
//     issued, blocking);
//   - communication ops get their group's ranks from the trace's process groups (pg_name) or the
//     whole job; before the first pass every rank's sequence of collectives per group (type and
//     bytes) and of sends and receives is compared across ranks, and any disagreement stops the
//     replay with the first difference named (rather than hanging in MPI).
// Ops that cannot run here (not built, a group larger than the job the replay runs) are skipped
// with the reason, identically on every rank.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "replay/communicator.h"
#include "replay/executor.h"
#include "replay/plan.h"

namespace orrery::replay {

struct SessionOptions {
  int warmup = 5;
  int iterations = 10;
  bool async_comm = true;
  // Ranks of the job the trace came from (the files of a --dir set); 0: not known, the replay's
  // process count stands for it.
  uint32_t job_ranks = 0;
};

struct OpResult {
  bool replayed = false;
  std::string reason;            // why it was skipped
  std::vector<int64_t> samples;  // ns, one per measured iteration
};

// One communication op, as it was run.
struct CommResult {
  size_t op = 0;  // index in the plan
  CommOpKind kind = CommOpKind::kAllReduce;
  uint64_t bytes = 0;
  std::vector<uint32_t> group;
};

struct SessionResult {
  std::vector<OpResult> ops;  // per plan op
  std::vector<CommResult> comms;
  std::vector<int64_t> iteration_wall_ns;
  std::vector<int64_t> iteration_cpu_ns;
  std::vector<int64_t> comm_wait_ns;  // per iteration: time compute waited for communication
  int warmup = 0;
  int iterations = 0;
  uint32_t rank = 0;
  uint32_t world = 1;
  std::string communicator;
  std::vector<std::string> notes;
};

// How each communication op of `plan` maps onto `world` processes: its request and group, or why
// it cannot run. Exposed for tests.
struct CommSetup {
  std::optional<CommRequest> request;  // group and buffers left unset
  std::vector<uint32_t> group;
  std::string reason;
};
std::vector<CommSetup> plan_communication(const ReplayPlan& plan, uint32_t rank, uint32_t world,
                                          uint32_t job_ranks, std::vector<std::string>& notes);

// What each rank's communication must agree on, one line per op: "group 0,1: all-reduce 1068144 B".
std::string comm_signature(const std::vector<CommSetup>& setups, uint32_t rank);
// Checks every rank's signature against the others'; the first disagreement, or ok.
Status check_signatures(const std::vector<std::string>& signatures);

Expected<SessionResult> run_session(const ReplayPlan& plan, Executor& executor,
                                    Communicator& communicator, const SessionOptions& options);

}  // namespace orrery::replay
