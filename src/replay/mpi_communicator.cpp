// The one file of orrery that includes MPI (Open MPI's C API).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <thread>

#include "replay/communicator.h"

namespace orrery::replay {

namespace {

MPI_Datatype mpi_type(DType type) {
  switch (type) {
    case DType::kFloat:
      return MPI_FLOAT;
    case DType::kDouble:
      return MPI_DOUBLE;
    case DType::kHalf:
    case DType::kBFloat16:
    case DType::kInt16:
      return MPI_INT16_T;  // 16-bit floats summed as integers: same bytes and work
    case DType::kComplexFloat:
      return MPI_C_FLOAT_COMPLEX;
    case DType::kComplexDouble:
      return MPI_C_DOUBLE_COMPLEX;
    case DType::kInt8:
      return MPI_INT8_T;
    case DType::kUInt8:
    case DType::kBool:
      return MPI_UINT8_T;
    case DType::kInt32:
      return MPI_INT32_T;
    case DType::kInt64:
      return MPI_INT64_T;
  }
  return MPI_BYTE;
}

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<size_t>(std::max(length, 0)));
}

int to_int(uint64_t value) { return static_cast<int>(std::min<uint64_t>(value, INT32_MAX)); }

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(int rank, int size, bool serialized)
      : rank_(static_cast<uint32_t>(rank)),
        size_(static_cast<uint32_t>(size)),
        serialized_(serialized) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    MPI_Get_library_version(version, &length);
    library_ = std::string(version, static_cast<size_t>(std::max(length, 0)));
    library_ = library_.substr(0, library_.find(','));
  }
  ~MpiCommunicator() override {
    for (auto& [ranks, comm] : comms_) {
      if (comm != MPI_COMM_WORLD && comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
    }
    MPI_Finalize();
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  uint32_t rank() const override { return rank_; }
  uint32_t size() const override { return size_; }
  std::string description() const override {
    return fmt::format("MPI ({}), {} processes", library_, size_);
  }
  bool serialized_threads() const override { return serialized_; }

  Status prepare_groups(const std::vector<std::vector<uint32_t>>& groups) override {
    for (const std::vector<uint32_t>& ranks : groups) {
      if (comms_.count(ranks) != 0) continue;
      if (ranks.size() == size_) {
        comms_[ranks] = MPI_COMM_WORLD;
        continue;
      }
      MPI_Group world = MPI_GROUP_NULL;
      MPI_Group group = MPI_GROUP_NULL;
      MPI_Comm_group(MPI_COMM_WORLD, &world);
      std::vector<int> members(ranks.begin(), ranks.end());
      MPI_Group_incl(world, static_cast<int>(members.size()), members.data(), &group);
      MPI_Comm comm = MPI_COMM_NULL;
      // The tag tells apart groups created at the same time by overlapping sets of ranks.
      const int code =
          MPI_Comm_create_group(MPI_COMM_WORLD, group, static_cast<int>(comms_.size()), &comm);
      MPI_Group_free(&group);
      MPI_Group_free(&world);
      if (code != MPI_SUCCESS) {
        return Error::make(ErrorKind::kInvalidArgument,
                           "cannot make the MPI communicator of ranks {}: {}",
                           fmt::join(ranks, ","), mpi_error(code));
      }
      comms_[ranks] = comm;
    }
    return Status::ok();
  }

  // Waits for `pending`, testing it with growing pauses (1 us doubling to 100 us) rather than
  // spinning: Open MPI's blocking calls poll a core at full speed, which on a shared or
  // oversubscribed machine takes the core from the computation it should overlap (c10d's Gloo
  // backend sleeps in the kernel instead). Each test also drives the operation's progress.
  static int wait_gently(MPI_Request& pending) {
    int done = 0;
    std::chrono::microseconds pause(1);
    while (true) {
      const int code = MPI_Test(&pending, &done, MPI_STATUS_IGNORE);
      if (code != MPI_SUCCESS || done != 0) return code;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(100));
    }
  }

  Status run(const CommRequest& request) override {
    const auto found = comms_.find(*request.group);
    if (found == comms_.end()) {
      return Error::make(ErrorKind::kInvalidArgument, "no communicator for ranks {}",
                         fmt::join(*request.group, ","));
    }
    MPI_Comm comm = found->second;
    const int n = static_cast<int>(request.group->size());
    const MPI_Datatype type = mpi_type(request.dtype);
    const uint64_t element = dtype_bytes(request.dtype);
    const int count = to_int(request.bytes / element);
    int code = MPI_SUCCESS;
    MPI_Request pending = MPI_REQUEST_NULL;
    switch (request.kind) {
      case CommOpKind::kAllReduce:
        code = MPI_Iallreduce(MPI_IN_PLACE, request.send, count, type,
                              request.dtype == DType::kBool ? MPI_MAX : MPI_SUM, comm, &pending);
        break;
      case CommOpKind::kBroadcast:
        code =
            MPI_Ibcast(request.send, count, type, static_cast<int>(request.root), comm, &pending);
        break;
      case CommOpKind::kAllGather:
        code = MPI_Iallgather(request.send, to_int(request.bytes), MPI_BYTE, request.recv,
                              to_int(request.bytes), MPI_BYTE, comm, &pending);
        break;
      case CommOpKind::kReduceScatter:
        code = MPI_Ireduce_scatter_block(request.send, request.recv, count / n, type, MPI_SUM, comm,
                                         &pending);
        break;
      case CommOpKind::kAllToAll:
        if (request.send_bytes.empty()) {
          code = MPI_Ialltoall(request.send, to_int(request.bytes / static_cast<uint64_t>(n)),
                               MPI_BYTE, request.recv,
                               to_int(request.bytes / static_cast<uint64_t>(n)), MPI_BYTE, comm,
                               &pending);
        } else {
          std::vector<int> send_counts(request.send_bytes.size());
          std::vector<int> recv_counts(request.recv_bytes.size());
          std::transform(request.send_bytes.begin(), request.send_bytes.end(), send_counts.begin(),
                         to_int);
          std::transform(request.recv_bytes.begin(), request.recv_bytes.end(), recv_counts.begin(),
                         to_int);
          std::vector<int> send_at(send_counts.size(), 0);
          std::vector<int> recv_at(recv_counts.size(), 0);
          std::exclusive_scan(send_counts.begin(), send_counts.end(), send_at.begin(), 0);
          std::exclusive_scan(recv_counts.begin(), recv_counts.end(), recv_at.begin(), 0);
          code = MPI_Ialltoallv(request.send, send_counts.data(), send_at.data(), MPI_BYTE,
                                request.recv, recv_counts.data(), recv_at.data(), MPI_BYTE, comm,
                                &pending);
          if (code == MPI_SUCCESS) code = wait_gently(pending);  // the counts live here
        }
        break;
      case CommOpKind::kReduce:
        code = MPI_Ireduce(request.send, request.recv, count, type, MPI_SUM,
                           static_cast<int>(request.root), comm, &pending);
        break;
      case CommOpKind::kGather:
        code = MPI_Igather(request.send, to_int(request.bytes), MPI_BYTE, request.recv,
                           to_int(request.bytes), MPI_BYTE, static_cast<int>(request.root), comm,
                           &pending);
        break;
      case CommOpKind::kScatter:
        code =
            MPI_Iscatter(request.send, to_int(request.bytes / static_cast<uint64_t>(n)), MPI_BYTE,
                         request.recv, to_int(request.bytes / static_cast<uint64_t>(n)), MPI_BYTE,
                         static_cast<int>(request.root), comm, &pending);
        break;
      case CommOpKind::kBarrier:
        code = MPI_Ibarrier(comm, &pending);
        break;
      case CommOpKind::kSend:
        code = MPI_Isend(request.send, to_int(request.bytes), MPI_BYTE,
                         static_cast<int>(request.peer), request.tag, MPI_COMM_WORLD, &pending);
        break;
      case CommOpKind::kRecv:
        code = MPI_Irecv(request.recv, to_int(request.bytes), MPI_BYTE,
                         static_cast<int>(request.peer), request.tag, MPI_COMM_WORLD, &pending);
        break;
    }
    if (code == MPI_SUCCESS && pending != MPI_REQUEST_NULL) code = wait_gently(pending);
    if (code != MPI_SUCCESS) {
      return Error::make(ErrorKind::kInvalidArgument, "MPI {} of {} bytes failed: {}",
                         comm_op_name(request.kind), request.bytes, mpi_error(code));
    }
    return Status::ok();
  }

  Status barrier() override {
    const int code = MPI_Barrier(MPI_COMM_WORLD);
    if (code != MPI_SUCCESS)
      return Error::make(ErrorKind::kInvalidArgument, "MPI barrier failed: {}", mpi_error(code));
    return Status::ok();
  }

  Expected<std::vector<std::string>> all_gather_text(const std::string& mine) override {
    int length = to_int(mine.size());
    std::vector<int> lengths(size_, 0);
    MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD);
    std::vector<int> at(size_, 0);
    std::exclusive_scan(lengths.begin(), lengths.end(), at.begin(), 0);
    std::string all(static_cast<size_t>(at.back() + lengths.back()), '\0');
    const int code = MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(),
                                    at.data(), MPI_CHAR, MPI_COMM_WORLD);
    if (code != MPI_SUCCESS) {
      return Error::make(ErrorKind::kInvalidArgument, "MPI all-gather failed: {}", mpi_error(code));
    }
    std::vector<std::string> texts;
    for (uint32_t rank = 0; rank < size_; ++rank) {
      texts.push_back(
          all.substr(static_cast<size_t>(at[rank]), static_cast<size_t>(lengths[rank])));
    }
    return texts;
  }

 private:
  uint32_t rank_;
  uint32_t size_;
  bool serialized_;
  std::string library_;
  std::map<std::vector<uint32_t>, MPI_Comm> comms_;
};

}  // namespace

Expected<std::unique_ptr<Communicator>> make_mpi_communicator(int* argc, char*** argv) {
  int provided = MPI_THREAD_SINGLE;
  const int code = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  if (code != MPI_SUCCESS)
    return Error::make(ErrorKind::kInvalidArgument, "MPI does not start: {}", mpi_error(code));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<Communicator>(
      new MpiCommunicator(rank, size, provided >= MPI_THREAD_SERIALIZED));
}

}  // namespace orrery::replay
