// design/sweep_run.h: a whole sweep run: the missing points evaluated on a thread pool (and on
// other MPI ranks), written to the store as they finish.
//
// plan_sweep_work() takes the points the store does not hold yet, decides the ones that need no
// simulation (rules, budget, memory: sweep_eval.h's precheck) and groups the rest into units of
// one workload each, ordered by their first point id. run_sweep() writes the decided points, then
// hands units to `threads` worker threads (each generates its unit's trace set once and simulates
// its points) and to remote workers when given; the calling thread alone writes to the store, in
// one transaction per batch of finished points, and reports progress. Results do not depend on the
// number of threads or ranks, nor on the order units finish in.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/error.h"
#include "design/sweep_eval.h"
#include "design/sweep_file.h"
#include "design/sweep_space.h"
#include "design/sweep_store.h"

namespace orrery::design {

struct SweepWork {
  std::vector<PointResult> decided;          // rejected without simulation, by id
  std::vector<std::vector<uint64_t>> units;  // point ids of one workload each, by first id
  uint64_t stored = 0;                       // points the store held already
};
// `stored[id]` != 0: the point has a row (a shorter vector: the rest have none).
SweepWork plan_sweep_work(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                          const std::vector<uint8_t>& stored);

struct SweepProgress {
  uint64_t total = 0;   // points in the sweep
  uint64_t stored = 0;  // rows before this run
  uint64_t done = 0;    // rows now (stored included)
  uint64_t ok = 0;      // evaluated by this run, by status
  uint64_t rejected = 0;
  uint64_t failed = 0;
  uint64_t simulated = 0;    // points of this run that ran a simulation (or failed in one)
  uint64_t to_simulate = 0;  // points of this run that need one
  double seconds = 0;        // since the run started
};

// Where units go besides the local threads (MPI ranks: design/sweep_mpi.h). Called only from the
// thread that runs run_sweep.
class RemoteWorkers {
 public:
  virtual ~RemoteWorkers() = default;
  // Serves requests and collects results without blocking: `next` deals the next unit (empty: no
  // more), `done` takes the results of a finished unit.
  virtual Status poll(const std::function<std::vector<uint64_t>()>& next,
                      const std::function<void(std::vector<PointResult>)>& done) = 0;
  // Every remote worker has stopped.
  virtual bool finished() const = 0;
};

struct SweepRunOptions {
  size_t threads = 0;                                  // worker threads here; 0 = one per core
  std::function<void(const SweepProgress&)> progress;  // about five times a second, and at the end
  RemoteWorkers* remote = nullptr;
};

// Runs the missing points of `points` and writes them to `store`. Returns the final progress.
Expected<SweepProgress> run_sweep(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                                  SweepStore& store, const SweepRunOptions& options);

// Evaluates units on `threads` threads: `next` gives a unit's ids (empty: stop), `done` receives
// its results. Both are called from the worker threads, under the caller's locking. For MPI
// workers, and the local pool of run_sweep.
void run_units(const SweepSpec& spec, const std::vector<SweepPoint>& points, size_t threads,
               const std::function<std::vector<uint64_t>()>& next,
               const std::function<void(std::vector<PointResult>)>& done);

}  // namespace orrery::design
