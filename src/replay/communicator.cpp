#include "replay/communicator.h"

#include <cstdlib>
#include <cstring>

namespace orrery::replay {

namespace {

// One process: every group is this rank alone, so a collective is at most a local copy.
class LocalCommunicator final : public Communicator {
 public:
  uint32_t rank() const override { return 0; }
  uint32_t size() const override { return 1; }
  std::string description() const override { return "one process (no MPI launcher)"; }
  bool serialized_threads() const override { return true; }
  Status prepare_groups(const std::vector<std::vector<uint32_t>>& groups) override {
    for (const std::vector<uint32_t>& group : groups) {
      if (group.size() != 1 || group[0] != 0) {
        return Error::make(
            ErrorKind::kInvalidArgument,
            "a group of {} ranks needs that many processes (mpirun -np, or --backend gloo)",
            group.size());
      }
    }
    return Status::ok();
  }
  Status run(const CommRequest& request) override {
    switch (request.kind) {
      case CommOpKind::kAllGather:
      case CommOpKind::kReduceScatter:
      case CommOpKind::kAllToAll:
      case CommOpKind::kReduce:
      case CommOpKind::kGather:
      case CommOpKind::kScatter:
        if (request.recv != nullptr && request.send != nullptr && request.bytes > 0)
          std::memcpy(request.recv, request.send, request_recv_bytes(request, 1));
        return Status::ok();
      case CommOpKind::kSend:
      case CommOpKind::kRecv:
        return Error::make(
            ErrorKind::kInvalidArgument,
            "a send or receive needs a second process (mpirun -np, or --backend gloo)");
      default:
        return Status::ok();
    }
  }
  Status barrier() override { return Status::ok(); }
  Expected<std::vector<std::string>> all_gather_text(const std::string& mine) override {
    return std::vector<std::string>{mine};
  }
};

}  // namespace

const char* comm_op_name(CommOpKind kind) {
  switch (kind) {
    case CommOpKind::kAllReduce:
      return "all-reduce";
    case CommOpKind::kBroadcast:
      return "broadcast";
    case CommOpKind::kAllGather:
      return "all-gather";
    case CommOpKind::kReduceScatter:
      return "reduce-scatter";
    case CommOpKind::kAllToAll:
      return "all-to-all";
    case CommOpKind::kReduce:
      return "reduce";
    case CommOpKind::kGather:
      return "gather";
    case CommOpKind::kScatter:
      return "scatter";
    case CommOpKind::kBarrier:
      return "barrier";
    case CommOpKind::kSend:
      return "send";
    case CommOpKind::kRecv:
      return "receive";
  }
  return "?";
}

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

std::unique_ptr<Communicator> make_local_communicator() {
  return std::make_unique<LocalCommunicator>();
}

uint64_t request_recv_bytes(const CommRequest& request, size_t size) {
  const uint64_t n = size == 0 ? 1 : size;
  switch (request.kind) {
    case CommOpKind::kAllGather:
    case CommOpKind::kGather:
      return request.bytes * n;
    case CommOpKind::kReduceScatter:
    case CommOpKind::kScatter:
      return request.bytes / n;
    case CommOpKind::kAllToAll: {
      if (request.recv_bytes.empty()) return request.bytes;
      uint64_t total = 0;
      for (const uint64_t part : request.recv_bytes) total += part;
      return total;
    }
    case CommOpKind::kRecv:
    case CommOpKind::kReduce:
      return request.bytes;
    default:
      return 0;
  }
}

}  // namespace orrery::replay
