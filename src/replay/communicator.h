// replay/communicator.h: real collectives and point-to-point messages between replay processes.
//
// One process per rank, connected by MPI (when the process was started by mpirun, Open MPI's or
// any launcher that sets the PMI/PMIx environment) or by Gloo over TCP (the processes meet in a
// FileStore directory; `orrery replay --backend gloo` starts them itself), or a local communicator
// for a single process. A request names its group by global ranks; the MPI communicator makes
// one MPI communicator per distinct group (prepare_groups(), collective over every rank, in the
// same order everywhere) and runs the operation on raw buffers. Values do not matter to a replay,
// only bytes and work: reductions of 16-bit floats are summed as 16-bit integers (the same bytes
// and the same reduction work, not the same values).
//
// Thread use: every call may come from one thread at a time (MPI_THREAD_SERIALIZED); the session
// makes its calls from its communication thread while iterations run, and from the main thread
// between them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "replay/plan.h"

namespace orrery::replay {

enum class CommOpKind : uint8_t {
  kAllReduce,
  kBroadcast,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kReduce,
  kGather,
  kScatter,
  kBarrier,
  kSend,
  kRecv,
};
const char* comm_op_name(CommOpKind kind);

struct CommRequest {
  CommOpKind kind = CommOpKind::kAllReduce;
  const std::vector<uint32_t>* group = nullptr;  // global ranks, ascending, with this rank
  DType dtype = DType::kFloat;
  // Buffers: `send` holds the input (in place for all-reduce and broadcast), `recv` the output.
  void* send = nullptr;
  void* recv = nullptr;
  uint64_t bytes = 0;  // this rank's input; all-gather receives bytes x group size
  int64_t root = 0;    // a rank of the group (broadcast, reduce, gather, scatter)
  uint32_t peer = 0;   // a global rank (send, receive)
  int tag = 0;
  // all-to-all with uneven parts: bytes to and from each rank of the group; empty: equal parts.
  std::vector<uint64_t> send_bytes;
  std::vector<uint64_t> recv_bytes;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual uint32_t rank() const = 0;
  virtual uint32_t size() const = 0;
  // "MPI (Open MPI v4.1.4), 2 processes" or "one process".
  virtual std::string description() const = 0;
  // Whether requests may come from a thread other than the one that created the communicator.
  virtual bool serialized_threads() const = 0;
  // Creates what the groups need; every rank calls it with its groups before the first request,
  // in ascending order of the rank lists.
  virtual Status prepare_groups(const std::vector<std::vector<uint32_t>>& groups) = 0;
  // Runs one request to completion.
  virtual Status run(const CommRequest& request) = 0;
  virtual Status barrier() = 0;
  // Every rank's `mine`, by rank (a collective over all ranks).
  virtual Expected<std::vector<std::string>> all_gather_text(const std::string& mine) = 0;

 protected:
  Communicator() = default;
  Communicator(const Communicator&) = default;
  Communicator& operator=(const Communicator&) = default;
};

// Whether this process was started by an MPI launcher (mpirun, srun with PMI/PMIx).
bool launched_by_mpi();
// The MPI communicator (initialises MPI; finalised when destroyed). Defined in
// mpi_communicator.cpp, the one file that includes MPI.
Expected<std::unique_ptr<Communicator>> make_mpi_communicator(int* argc, char*** argv);
// The Gloo communicator: this process is `rank` of `size`, all of which call this with the same
// `store_dir` (a FileStore: a directory every process can reach, on one machine or a shared file
// system), reachable at `hostname` ("" for the machine's name). Collectives are Gloo's; Gloo has
// no reduce-scatter, which runs as the direct algorithm (an all-to-all and a local sum). A rank
// waits at most 30 minutes (c10d's default) for the others at a collective. Defined in
// gloo_communicator.cpp, the one file that includes Gloo.
Expected<std::unique_ptr<Communicator>> make_gloo_communicator(uint32_t rank, uint32_t size,
                                                               const std::string& store_dir,
                                                               const std::string& hostname);
// A communicator of one process: groups of one rank, run locally.
std::unique_ptr<Communicator> make_local_communicator();

// The request's parts for a group of `size` ranks: what this rank sends and receives in total.
uint64_t request_recv_bytes(const CommRequest& request, size_t size);

}  // namespace orrery::replay
