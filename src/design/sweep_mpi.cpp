// The only file of orrery that calls MPI.
#include "design/sweep_mpi.h"

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

namespace orrery::design {

namespace {

enum Tag : int { kRequest = 1, kAssign = 2, kResult = 3, kBye = 4 };

nlohmann::json to_json(const PointResult& r) {
  return {{"id", r.id},
          {"status", static_cast<int>(r.status)},
          {"reason", r.reason},
          {"offloaded", r.offloaded},
          {"iteration_ns", r.iteration_ns},
          {"compute_ns", r.compute_ns},
          {"exposed_ns", r.exposed_ns},
          {"bubble_ns", r.bubble_ns},
          {"offload_ns", r.offload_ns},
          {"dim_utilization", r.dim_utilization},
          {"hbm_bytes", r.hbm_bytes},
          {"need_bytes", r.need_bytes},
          {"expansion_bytes", r.expansion_bytes},
          {"cost", r.cost},
          {"throughput", r.throughput},
          {"events", r.events}};
}

PointResult from_json(const nlohmann::json& j) {
  PointResult r;
  r.id = j.at("id").get<uint64_t>();
  r.status = static_cast<PointStatus>(j.at("status").get<int>());
  r.reason = j.at("reason").get<std::string>();
  r.offloaded = j.at("offloaded").get<std::string>();
  r.iteration_ns = j.at("iteration_ns").get<double>();
  r.compute_ns = j.at("compute_ns").get<double>();
  r.exposed_ns = j.at("exposed_ns").get<std::array<double, kCommKinds>>();
  r.bubble_ns = j.at("bubble_ns").get<double>();
  r.offload_ns = j.at("offload_ns").get<double>();
  r.dim_utilization = j.at("dim_utilization").get<std::vector<double>>();
  r.hbm_bytes = j.at("hbm_bytes").get<uint64_t>();
  r.need_bytes = j.at("need_bytes").get<uint64_t>();
  r.expansion_bytes = j.at("expansion_bytes").get<uint64_t>();
  r.cost = j.at("cost").get<double>();
  r.throughput = j.at("throughput").get<double>();
  r.events = j.at("events").get<uint64_t>();
  return r;
}

void send_bytes(const void* data, size_t size, int to, int tag) {
  MPI_Send(data, static_cast<int>(size), MPI_BYTE, to, tag, MPI_COMM_WORLD);
}

// A pending message from `source` (MPI_ANY_SOURCE for any), received whole; false when none.
bool receive(int source, int& from, int& tag, std::string& bytes) {
  int flag = 0;
  MPI_Status status;
  MPI_Iprobe(source, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status);
  if (flag == 0) return false;
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  bytes.assign(static_cast<size_t>(count), '\0');
  MPI_Recv(bytes.data(), count, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, MPI_COMM_WORLD,
           MPI_STATUS_IGNORE);
  from = status.MPI_SOURCE;
  tag = status.MPI_TAG;
  return true;
}

class Coordinator final : public RemoteWorkers {
 public:
  Coordinator(int size, std::string hash) : size_(size), hash_(std::move(hash)) {}

  Status poll(const std::function<std::vector<uint64_t>()>& next,
              const std::function<void(std::vector<PointResult>)>& done) override {
    int from = 0, tag = 0;
    std::string bytes;
    while (receive(MPI_ANY_SOURCE, from, tag, bytes)) {
      switch (tag) {
        case kRequest: {
          if (bytes != hash_) {
            return Error::make(ErrorKind::kInvalidArgument,
                               "MPI rank {} read a sweep file with hash {}, rank 0 one with hash "
                               "{}: every rank must read the same file",
                               from, bytes, hash_);
          }
          const std::vector<uint64_t> ids = next();
          send_bytes(ids.data(), ids.size() * sizeof(uint64_t), from, kAssign);
          break;
        }
        case kResult: {
          std::vector<PointResult> results;
          for (const nlohmann::json& j : nlohmann::json::parse(bytes))
            results.push_back(from_json(j));
          done(std::move(results));
          break;
        }
        case kBye:
          ++byes_;
          break;
        default:
          return Error::make(ErrorKind::kInvalidArgument, "MPI rank {} sent tag {}", from, tag);
      }
    }
    return Status::ok();
  }

  bool finished() const override { return byes_ + 1 >= size_; }

 private:
  int size_;
  std::string hash_;
  int byes_ = 0;
};

}  // namespace

std::unique_ptr<MpiWorld> MpiWorld::init_if_launched() {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr && std::getenv("PMIX_RANK") == nullptr &&
      std::getenv("PMI_RANK") == nullptr) {
    return nullptr;
  }
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<MpiWorld>(new MpiWorld(rank, size));
}

MpiWorld::~MpiWorld() { MPI_Finalize(); }

void MpiWorld::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

std::unique_ptr<RemoteWorkers> MpiWorld::coordinator(const std::string& hash) {
  return std::make_unique<Coordinator>(size_, hash);
}

Status MpiWorld::serve(const SweepSpec& spec, const std::vector<SweepPoint>& points, size_t threads,
                       const std::string& hash) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::vector<uint64_t>> queue;  // dealt, not yet taken by a thread
  std::deque<std::vector<PointResult>> results;
  size_t processing = 0;
  bool stopped = false;  // rank 0 has no more units
  size_t in_flight = 0;  // requests without an answer
  auto next = [&]() -> std::vector<uint64_t> {
    std::unique_lock<std::mutex> lock(mutex);
    wake.wait(lock, [&]() { return !queue.empty() || (stopped && in_flight == 0); });
    if (queue.empty()) return {};
    std::vector<uint64_t> ids = std::move(queue.front());
    queue.pop_front();
    ++processing;
    return ids;
  };
  auto done = [&](std::vector<PointResult> unit) {
    std::lock_guard<std::mutex> lock(mutex);
    --processing;
    results.push_back(std::move(unit));
  };
  std::thread pool([&]() { run_units(spec, points, threads, next, done); });

  while (true) {
    bool busy = false;
    std::deque<std::vector<PointResult>> outgoing;
    bool finished = false;
    {
      std::lock_guard<std::mutex> lock(mutex);
      while (!stopped && in_flight + queue.size() + processing < threads) {
        send_bytes(hash.data(), hash.size(), 0, kRequest);
        ++in_flight;
      }
      outgoing.swap(results);
    }
    for (const std::vector<PointResult>& unit : outgoing) {
      nlohmann::json list = nlohmann::json::array();
      for (const PointResult& r : unit) list.push_back(to_json(r));
      const std::string text = list.dump();
      send_bytes(text.data(), text.size(), 0, kResult);
      busy = true;
    }
    int from = 0, tag = 0;
    std::string bytes;
    while (receive(0, from, tag, bytes)) {
      busy = true;
      if (tag != kAssign) continue;
      std::lock_guard<std::mutex> lock(mutex);
      --in_flight;
      if (bytes.empty()) {
        stopped = true;
      } else {
        std::vector<uint64_t> ids(bytes.size() / sizeof(uint64_t));
        std::memcpy(ids.data(), bytes.data(), bytes.size());
        queue.push_back(std::move(ids));
      }
    }
    wake.notify_all();
    {
      std::lock_guard<std::mutex> lock(mutex);
      finished = stopped && in_flight == 0 && queue.empty() && processing == 0 && results.empty();
    }
    if (finished) break;
    if (!busy) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  wake.notify_all();
  pool.join();
  send_bytes(nullptr, 0, 0, kBye);
  return Status::ok();
}

}  // namespace orrery::design
