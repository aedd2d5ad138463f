#include "replay/session.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "chakra/comm_groups.h"
#include "core/units.h"

namespace orrery::replay {

namespace {

using ChakraProtoMsg::CollectiveCommType;

std::optional<CommOpKind> collective_kind(CollectiveCommType type) {
  switch (type) {
    case ChakraProtoMsg::ALL_REDUCE:
      return CommOpKind::kAllReduce;
    case ChakraProtoMsg::BROADCAST:
      return CommOpKind::kBroadcast;
    case ChakraProtoMsg::ALL_GATHER:
      return CommOpKind::kAllGather;
    case ChakraProtoMsg::REDUCE_SCATTER:
      return CommOpKind::kReduceScatter;
    case ChakraProtoMsg::ALL_TO_ALL:
      return CommOpKind::kAllToAll;
    case ChakraProtoMsg::REDUCE:
      return CommOpKind::kReduce;
    case ChakraProtoMsg::GATHER:
      return CommOpKind::kGather;
    case ChakraProtoMsg::SCATTER:
      return CommOpKind::kScatter;
    case ChakraProtoMsg::BARRIER:
      return CommOpKind::kBarrier;
    default:
      return std::nullopt;
  }
}

int64_t process_cpu_ns() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

int64_t steady_ns() {
  return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now().time_since_epoch())
                                  .count());
}

// The communication thread: requests run in issue order; the main thread waits for a sequence
// number.
class CommWorker {
 public:
  explicit CommWorker(Communicator& communicator) : communicator_(communicator) {
    thread_ = std::thread([this] { loop(); });
  }
  ~CommWorker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  CommWorker(const CommWorker&) = delete;
  CommWorker& operator=(const CommWorker&) = delete;

  // Queues `request`; its time is written to *elapsed when it completes. Returns its number.
  uint64_t issue(const CommRequest* request, int64_t* elapsed) {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back({request, elapsed});
    wake_.notify_all();
    return issued_++;
  }
  // Waits until request `number` (and every one before it) has completed; the first failure.
  Status wait(uint64_t number) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return completed_ > number || failure_; });
    if (failure_) return *failure_;
    return Status::ok();
  }
  Status wait_all() {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return completed_ == issued_ || failure_; });
    if (failure_) return *failure_;
    return Status::ok();
  }
  uint64_t completed() {
    std::lock_guard<std::mutex> lock(mutex_);
    return completed_;
  }

 private:
  struct Item {
    const CommRequest* request;
    int64_t* elapsed;
  };

  void loop() {
    while (true) {
      Item item{};
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        item = queue_.front();
        queue_.pop_front();
      }
      const int64_t start = steady_ns();
      const Status status = failure_ ? Status::ok() : communicator_.run(*item.request);
      const int64_t end = steady_ns();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        *item.elapsed = end - start;
        if (!status && !failure_) failure_ = status.error();
        ++completed_;
      }
      done_.notify_all();
    }
  }

  Communicator& communicator_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::deque<Item> queue_;
  uint64_t issued_ = 0;
  uint64_t completed_ = 0;
  bool stopping_ = false;
  std::optional<Error> failure_;
};

}  // namespace

std::vector<CommSetup> plan_communication(const ReplayPlan& plan, uint32_t rank, uint32_t world,
                                          uint32_t job_ranks, std::vector<std::string>& notes) {
  std::vector<CommSetup> setups(plan.ops.size());
  // The job: the ranks of the trace set, else the largest group size a collective records.
  uint32_t recorded_size = 0;
  for (const ReplayOp& op : plan.ops) {
    if (op.comm) recorded_size = std::max(recorded_size, op.comm->group_size);
  }
  const uint32_t job = std::max({world, job_ranks, job_ranks == 0 ? recorded_size : 0u});
  // The trace's process groups; a list naming ranks beyond the job says how large the job was.
  std::optional<chakra::CommGroups> groups;
  for (const uint32_t size : {job, 4096u}) {
    chakra::CommGroups candidate(size);
    bool ok = true;
    for (const std::string& text : plan.process_group_texts) {
      if (!chakra::add_groups_from_metadata(text, plan.path, candidate)) {
        ok = false;
        break;
      }
    }
    if (ok) {
      groups = std::move(candidate);
      break;
    }
  }
  if (!groups) {
    notes.push_back(
        "the trace's process groups do not read: every collective runs over the "
        "whole job");
    groups.emplace(job);
  }
  bool whole_job_used = false;
  for (size_t index = 0; index < plan.ops.size(); ++index) {
    const ReplayOp& op = plan.ops[index];
    if (op.kind != OpKind::kComm || !op.comm) continue;
    const CommOp& comm = *op.comm;
    CommSetup& setup = setups[index];
    const chakra::CommGroup* group = groups->find(comm.spec.pg_name);
    std::vector<uint32_t> ranks;
    if (group == nullptr || comm.spec.pg_name.empty() || comm.spec.pg_name == "0") {
      if (group == nullptr && !comm.spec.pg_name.empty()) {
        setup.reason = fmt::format("process group '{}' is not among the trace's process groups",
                                   comm.spec.pg_name);
        continue;
      }
      for (uint32_t at = 0; at < job; ++at) ranks.push_back(at);
      if (group != nullptr && !group->ranks.empty()) ranks = group->ranks;
      whole_job_used = true;
    } else {
      ranks = group->ranks;
    }
    if (ranks.size() > world ||
        std::any_of(ranks.begin(), ranks.end(), [world](uint32_t r) { return r >= world; })) {
      setup.reason =
          fmt::format("its group has {} ranks ({}) and the replay runs {} process{}", ranks.size(),
                      fmt::join(ranks, ","), world, world == 1 ? "" : "es");
      continue;
    }
    if (std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) {
      setup.reason = fmt::format("rank {} is not in its group ({})", rank, fmt::join(ranks, ","));
      continue;
    }
    CommRequest request;
    request.dtype = comm.dtype;
    request.bytes = comm.spec.bytes;
    request.root = comm.root;
    request.tag = static_cast<int>(comm.spec.tag);
    if (comm.spec.name.kind == convert::CommKind::kCollective) {
      const std::optional<CommOpKind> kind = collective_kind(comm.spec.name.type);
      if (!kind) {
        setup.reason = "a collective of a type the replay does not run";
        continue;
      }
      request.kind = *kind;
    } else {
      request.kind =
          comm.spec.name.kind == convert::CommKind::kSend ? CommOpKind::kSend : CommOpKind::kRecv;
      std::optional<int64_t> peer = comm.spec.peer_global_rank;
      if (!peer && comm.spec.peer_group_rank && *comm.spec.peer_group_rank >= 0 &&
          static_cast<size_t>(*comm.spec.peer_group_rank) < ranks.size()) {
        peer = ranks[static_cast<size_t>(*comm.spec.peer_group_rank)];
      }
      if (!peer || *peer < 0 || static_cast<uint64_t>(*peer) >= world) {
        setup.reason = "its peer rank is not known, or not among the replay's processes";
        continue;
      }
      request.peer = static_cast<uint32_t>(*peer);
    }
    const uint64_t element = dtype_bytes(comm.dtype);
    if (request.kind != CommOpKind::kBarrier && request.bytes % element != 0) {
      setup.reason = fmt::format("{} bytes is not a whole number of {} elements", request.bytes,
                                 dtype_name(comm.dtype));
      continue;
    }
    if (request.kind == CommOpKind::kAllToAll && comm.input_splits.size() == ranks.size() &&
        comm.output_splits.size() == ranks.size() && comm.row_bytes > 0) {
      for (const int64_t rows : comm.input_splits)
        request.send_bytes.push_back(static_cast<uint64_t>(std::max<int64_t>(rows, 0)) *
                                     comm.row_bytes);
      for (const int64_t rows : comm.output_splits)
        request.recv_bytes.push_back(static_cast<uint64_t>(std::max<int64_t>(rows, 0)) *
                                     comm.row_bytes);
    }
    if (request.root < 0 || static_cast<size_t>(request.root) >= ranks.size()) request.root = 0;
    setup.group = std::move(ranks);
    setup.request = std::move(request);
  }
  if (whole_job_used && job_ranks == 0 && recorded_size == 0) {
    notes.push_back(fmt::format(
        "the trace does not say how many ranks its job had: collectives over the whole job run "
        "over the replay's {} process{}",
        world, world == 1 ? "" : "es"));
  }
  return setups;
}

std::string comm_signature(const std::vector<CommSetup>& setups, uint32_t rank) {
  std::string out = fmt::format("rank {}\n", rank);
  for (const CommSetup& setup : setups) {
    if (!setup.request) continue;
    const CommRequest& request = *setup.request;
    if (request.kind == CommOpKind::kSend || request.kind == CommOpKind::kRecv) {
      out += fmt::format("{} {} {} {} {}\n", request.kind == CommOpKind::kSend ? "s" : "r",
                         request.peer, request.tag, request.bytes, 0);
    } else {
      out += fmt::format("c {} {} {} {}\n", fmt::join(setup.group, ","), comm_op_name(request.kind),
                         request.bytes, request.root);
    }
  }
  return out;
}

Status check_signatures(const std::vector<std::string>& signatures) {
  // group -> rank -> collectives; (from, to) -> sends; (to, from) -> receives.
  std::map<std::string, std::map<uint32_t, std::vector<std::string>>> collectives;
  std::map<std::pair<uint32_t, uint32_t>, std::vector<std::string>> sends;
  std::map<std::pair<uint32_t, uint32_t>, std::vector<std::string>> receives;
  for (uint32_t rank = 0; rank < signatures.size(); ++rank) {
    std::istringstream lines(signatures[rank]);
    std::string line;
    std::getline(lines, line);  // "rank r"
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      std::string what;
      fields >> what;
      if (what == "c") {
        std::string group;
        std::string kind;
        uint64_t bytes = 0;
        int64_t root = 0;
        fields >> group >> kind >> bytes >> root;
        collectives[group][rank].push_back(fmt::format(
            "{} of {}{}", kind, format_bytes(bytes),
            kind == "broadcast" || kind == "reduce" || kind == "gather" || kind == "scatter"
                ? fmt::format(" from group rank {}", root)
                : ""));
      } else {
        uint32_t peer = 0;
        int tag = 0;
        uint64_t bytes = 0;
        fields >> peer >> tag >> bytes;
        const std::string entry = fmt::format("tag {}, {}", tag, format_bytes(bytes));
        if (what == "s") {
          sends[{rank, peer}].push_back(entry);
        } else {
          receives[{peer, rank}].push_back(entry);
        }
      }
    }
  }
  for (const auto& [group, by_rank] : collectives) {
    std::vector<std::string> members;
    std::istringstream split(group);
    for (std::string member; std::getline(split, member, ',');) members.push_back(member);
    const std::vector<std::string> empty;
    const uint32_t first = static_cast<uint32_t>(std::stoul(members.front()));
    // A named reference: clang 14 does not let a lambda capture a structured binding (C++20's
    // P1091, which GCC has).
    const auto& lists = by_rank;
    const auto list_of = [&](uint32_t rank) -> const std::vector<std::string>& {
      const auto found = lists.find(rank);
      return found == lists.end() ? empty : found->second;
    };
    for (const std::string& member : members) {
      const uint32_t rank = static_cast<uint32_t>(std::stoul(member));
      const std::vector<std::string>& a = list_of(first);
      const std::vector<std::string>& b = list_of(rank);
      for (size_t at = 0; at < std::max(a.size(), b.size()); ++at) {
        if (at < a.size() && at < b.size() && a[at] == b[at]) continue;
        return Error::make(
            ErrorKind::kTrace,
            "the ranks' traces disagree on the collectives of group {}: collective {} is {} on "
            "rank {} and {} on rank {} (a replay would hang)",
            group, at + 1, at < a.size() ? a[at] : "missing", first,
            at < b.size() ? b[at] : "missing", rank);
      }
    }
  }
  std::set<std::pair<uint32_t, uint32_t>> pairs;
  for (const auto& [pair, list] : sends) pairs.insert(pair);
  for (const auto& [pair, list] : receives) pairs.insert(pair);
  for (const auto& pair : pairs) {
    const std::vector<std::string> empty;
    const auto sent = sends.find(pair);
    const auto received = receives.find(pair);
    const std::vector<std::string>& a = sent == sends.end() ? empty : sent->second;
    const std::vector<std::string>& b = received == receives.end() ? empty : received->second;
    for (size_t at = 0; at < std::max(a.size(), b.size()); ++at) {
      if (at < a.size() && at < b.size() && a[at] == b[at]) continue;
      return Error::make(ErrorKind::kTrace,
                         "the ranks' traces disagree on the messages from rank {} to rank {}: "
                         "message {} is sent as {} and received as {} (a replay would hang)",
                         pair.first, pair.second, at + 1, at < a.size() ? a[at] : "missing",
                         at < b.size() ? b[at] : "missing");
    }
  }
  return Status::ok();
}

Expected<SessionResult> run_session(const ReplayPlan& plan, Executor& executor,
                                    Communicator& communicator, const SessionOptions& options) {
  SessionResult result;
  result.warmup = options.warmup;
  result.iterations = options.iterations;
  result.rank = communicator.rank();
  result.world = communicator.size();
  result.communicator = communicator.description();
  result.ops.resize(plan.ops.size());

  std::vector<CommSetup> setups = plan_communication(plan, communicator.rank(), communicator.size(),
                                                     options.job_ranks, result.notes);
  for (size_t index = 0; index < plan.ops.size(); ++index) {
    const ReplayOp& op = plan.ops[index];
    OpResult& outcome = result.ops[index];
    outcome.replayed = true;
    if (op.kind == OpKind::kUnsupported) {
      outcome.replayed = false;
      outcome.reason = op.reason;
    } else if (op.kind == OpKind::kCompute) {
      if (const std::optional<std::string>& failure = executor.build_failure(index)) {
        outcome.replayed = false;
        outcome.reason = *failure;
      }
    } else if (!setups[index].request) {
      outcome.replayed = false;
      outcome.reason = setups[index].reason;
    }
  }

  // Every rank must issue the same collectives; say so now rather than hang in MPI.
  Expected<std::vector<std::string>> signatures =
      communicator.all_gather_text(comm_signature(setups, communicator.rank()));
  if (!signatures) return signatures.error();
  if (Status agreed = check_signatures(*signatures); !agreed) return agreed.error();
  std::set<std::vector<uint32_t>> groups;
  for (const CommSetup& setup : setups) {
    if (setup.request) groups.insert(setup.group);
  }
  if (Status made = communicator.prepare_groups({groups.begin(), groups.end()}); !made)
    return made.error();

  // Buffers of the communication (values do not matter: one send and one receive buffer per op).
  std::vector<std::vector<unsigned char>> send_buffers(plan.ops.size());
  std::vector<std::vector<unsigned char>> recv_buffers(plan.ops.size());
  for (size_t index = 0; index < plan.ops.size(); ++index) {
    if (!setups[index].request) continue;
    CommRequest& request = *setups[index].request;
    request.group = &setups[index].group;
    const size_t n = setups[index].group.size();
    uint64_t send_bytes = request.bytes;
    if (!request.send_bytes.empty()) {
      send_bytes = 0;
      for (const uint64_t part : request.send_bytes) send_bytes += part;
    }
    send_buffers[index].assign(std::max<uint64_t>(send_bytes, 1), 0);
    recv_buffers[index].assign(std::max<uint64_t>(request_recv_bytes(request, n), 1), 0);
    request.send = send_buffers[index].data();
    request.recv = recv_buffers[index].data();
    result.comms.push_back({index, request.kind, request.bytes, setups[index].group});
  }

  std::vector<std::vector<uint32_t>> touched(plan.ops.size());
  for (size_t index = 0; index < plan.ops.size(); ++index)
    touched[index] = op_storages(plan, plan.ops[index]);

  const bool async = options.async_comm && communicator.serialized_threads();
  if (options.async_comm && !async)
    result.notes.push_back("MPI offers no thread support here: collectives run where issued");
  std::optional<CommWorker> worker;
  if (async) worker.emplace(communicator);

  std::vector<int64_t> elapsed(plan.ops.size(), 0);
  const int passes = 1 + options.warmup + options.iterations;
  for (int pass = 0; pass < passes; ++pass) {
    const bool measured = pass > options.warmup;
    executor.restore();  // untimed: every pass starts from the same state
    executor.time_backward_ops(!measured);
    if (Status together = communicator.barrier(); !together) return together.error();
    struct Pending {
      uint64_t number;
      size_t op;
    };
    std::vector<Pending> pending;
    int64_t waited = 0;
    const int64_t cpu_start = process_cpu_ns();
    const int64_t start = steady_ns();
    for (size_t index = 0; index < plan.ops.size(); ++index) {
      OpResult& outcome = result.ops[index];
      if (!outcome.replayed) continue;
      const ReplayOp& op = plan.ops[index];
      if (op.kind == OpKind::kComm) {
        const CommRequest& request = *setups[index].request;
        if (worker) {
          pending.push_back({worker->issue(&request, &elapsed[index]), index});
        } else {
          const int64_t begin = steady_ns();
          if (Status done = communicator.run(request); !done) return done.error();
          elapsed[index] = steady_ns() - begin;
        }
        continue;
      }
      // Wait for the pending collectives whose tensors this op uses.
      if (worker && !pending.empty()) {
        std::optional<uint64_t> wait_for;
        for (const Pending& item : pending) {
          if (share_storage(touched[index], touched[item.op])) wait_for = item.number;
        }
        if (wait_for) {
          const int64_t begin = steady_ns();
          if (Status done = worker->wait(*wait_for); !done) return done.error();
          waited += steady_ns() - begin;
          const uint64_t completed = worker->completed();
          pending.erase(
              std::remove_if(pending.begin(), pending.end(),
                             [completed](const Pending& item) { return item.number < completed; }),
              pending.end());
        }
      }
      Expected<int64_t> time = executor.run(index);
      if (!time) {
        // An op that throws is skipped from then on, on this rank (compute is local).
        outcome.replayed = false;
        outcome.reason = time.error().message();
        outcome.samples.clear();
        continue;
      }
      elapsed[index] = *time;
    }
    if (worker) {
      const int64_t begin = steady_ns();
      if (Status done = worker->wait_all(); !done) return done.error();
      waited += steady_ns() - begin;
    }
    const int64_t end = steady_ns();
    const int64_t cpu_end = process_cpu_ns();
    if (!measured) continue;
    result.iteration_wall_ns.push_back(end - start);
    result.iteration_cpu_ns.push_back(cpu_end - cpu_start);
    result.comm_wait_ns.push_back(waited);
    for (size_t index = 0; index < plan.ops.size(); ++index) {
      if (result.ops[index].replayed) result.ops[index].samples.push_back(elapsed[index]);
    }
  }
  if (Status together = communicator.barrier(); !together) return together.error();
  return result;
}

}  // namespace orrery::replay
