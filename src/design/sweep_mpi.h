// design/sweep_mpi.h: a sweep spread over the ranks of an MPI job (Open MPI, C API).
//
// Under `mpirun -np N orrery sweep FILE --db results.sqlite`, every rank reads the sweep file and
// expands the same points; rank 0 alone opens the database, decides the points that need no
// simulation and deals units (sweep_run.h) one at a time to whichever rank asks, its own threads
// included; the other ranks evaluate what they are dealt on their threads and send the results
// back, and rank 0 writes them. A rank asks again as soon as it has a thread free, so fast and slow
// units balance themselves. The database is the one a single process writes, row for row, since a
// point's result depends on the point alone. Results travel as JSON whose numbers round-trip
// exactly. Ranks whose sweep file differs from rank 0's (another hash) are refused.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "design/sweep_file.h"
#include "design/sweep_run.h"
#include "design/sweep_space.h"

namespace orrery::design {

class MpiWorld {
 public:
  // Initializes MPI when mpirun (or another PMI launcher) started this process, else nullptr: a
  // plain `orrery sweep` never touches MPI.
  static std::unique_ptr<MpiWorld> init_if_launched();
  ~MpiWorld();  // MPI_Finalize
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Ends every rank of the job (after an error on one of them).
  [[noreturn]] void abort(int code);

  // Rank 0: the other ranks as RemoteWorkers for run_sweep. `hash` is this rank's sweep hash.
  std::unique_ptr<RemoteWorkers> coordinator(const std::string& hash);
  // Ranks above 0: asks rank 0 for units until it says stop, evaluating them on `threads` threads.
  Status serve(const SweepSpec& spec, const std::vector<SweepPoint>& points, size_t threads,
               const std::string& hash);

 private:
  MpiWorld(int rank, int size) : rank_(rank), size_(size) {}
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace orrery::design
