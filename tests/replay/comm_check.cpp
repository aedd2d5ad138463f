// replay_comm_check: one rank of a check of the replay's communicators. Every operation a replay
// issues (each collective, point to point, the all-gather of reports) runs over the world and,
// with three processes, over the groups {0, 2} and {1}, with contents whose results are known in
// closed form; each result is compared and every mismatch printed. Exit 0 when all hold.
//   mpirun -np 3 replay_comm_check               (MPI)
//   RANK=r WORLD_SIZE=3 replay_comm_check STORE  (Gloo, the processes meeting in STORE)
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "replay/communicator.h"

namespace {

using orrery::replay::CommOpKind;
using orrery::replay::CommRequest;
using orrery::replay::Communicator;
using orrery::replay::DType;

int failures = 0;
uint32_t me = 0;

void expect(bool holds, const std::string& what) {
  if (holds) return;
  fmt::print(stderr, "rank {}: {}\n", me, what);
  ++failures;
}

void run(Communicator& comm, const CommRequest& request, const std::string& what) {
  const orrery::Status done = comm.run(request);
  expect(static_cast<bool>(done), what + ": " + (done ? "" : done.error().message()));
}

template <typename T>
std::vector<T> filled(size_t count, T value) {
  return std::vector<T>(count, value);
}

void check_group(Communicator& comm, const std::vector<uint32_t>& group) {
  const uint32_t g = static_cast<uint32_t>(group.size());
  const uint32_t i =
      static_cast<uint32_t>(std::find(group.begin(), group.end(), me) - group.begin());
  const uint32_t sum_ranks = std::accumulate(group.begin(), group.end(), 0U);
  const std::string in = fmt::format("group {}", fmt::join(group, ","));
  CommRequest base;
  base.group = &group;

  {  // all-reduce of floats, large enough for Gloo's and MPI's pipelined algorithms
    const size_t count = 300'000;
    std::vector<float> data(count);
    for (size_t j = 0; j < count; ++j) data[j] = static_cast<float>(me + 1 + j % 7);
    CommRequest request = base;
    request.kind = CommOpKind::kAllReduce;
    request.send = data.data();
    request.bytes = count * sizeof(float);
    run(comm, request, in + " all-reduce float");
    bool same = true;
    for (size_t j = 0; j < count; ++j)
      same = same && data[j] == static_cast<float>(sum_ranks + g + g * (j % 7));
    expect(same, in + " all-reduce float: wrong sum");
  }
  {  // all-reduce of 64-bit and 16-bit integers, and of booleans (a logical or)
    std::vector<int64_t> longs(1000);
    for (size_t j = 0; j < longs.size(); ++j)
      longs[j] = (int64_t{1} << 40) * me + static_cast<int64_t>(j);
    CommRequest request = base;
    request.kind = CommOpKind::kAllReduce;
    request.dtype = DType::kInt64;
    request.send = longs.data();
    request.bytes = longs.size() * 8;
    run(comm, request, in + " all-reduce int64");
    expect(longs[999] == (int64_t{1} << 40) * sum_ranks + 999 * int64_t{g},
           in + " all-reduce int64: wrong sum");
    std::vector<uint16_t> halves = filled<uint16_t>(513, static_cast<uint16_t>(me + 1));
    request.dtype = DType::kHalf;
    request.send = halves.data();
    request.bytes = halves.size() * 2;
    run(comm, request, in + " all-reduce half");
    expect(halves[512] == sum_ranks + g, in + " all-reduce half: not summed as 16-bit integers");
    std::vector<uint8_t> flags = filled<uint8_t>(10, me == group.back() ? 1 : 0);
    request.dtype = DType::kBool;
    request.send = flags.data();
    request.bytes = flags.size();
    run(comm, request, in + " all-reduce bool");
    expect(flags[9] == 1, in + " all-reduce bool: not the maximum");
  }
  {  // broadcast from the group's last member
    std::vector<uint8_t> data = filled<uint8_t>(4096, i == g - 1 ? 0xAB : 0);
    CommRequest request = base;
    request.kind = CommOpKind::kBroadcast;
    request.dtype = DType::kUInt8;
    request.send = data.data();
    request.bytes = data.size();
    request.root = g - 1;
    run(comm, request, in + " broadcast");
    expect(data[4095] == 0xAB && data[0] == 0xAB, in + " broadcast: not the root's");
  }
  {  // all-gather
    std::vector<uint8_t> send = filled<uint8_t>(64, static_cast<uint8_t>(me));
    std::vector<uint8_t> recv(64 * g, 0xFF);
    CommRequest request = base;
    request.kind = CommOpKind::kAllGather;
    request.dtype = DType::kUInt8;
    request.send = send.data();
    request.recv = recv.data();
    request.bytes = 64;
    run(comm, request, in + " all-gather");
    for (uint32_t b = 0; b < g; ++b)
      expect(recv[b * 64] == group[b] && recv[b * 64 + 63] == group[b],
             fmt::format("{} all-gather: block {} is not rank {}'s", in, b, group[b]));
  }
  {  // reduce-scatter: block b of every input goes, summed, to member b
    const size_t k = 1000;
    std::vector<float> send(k * g);
    for (uint32_t b = 0; b < g; ++b)
      std::fill(send.begin() + b * k, send.begin() + (b + 1) * k, static_cast<float>(me + b));
    std::vector<float> recv(k, -1.0F);
    CommRequest request = base;
    request.kind = CommOpKind::kReduceScatter;
    request.send = send.data();
    request.recv = recv.data();
    request.bytes = send.size() * sizeof(float);
    run(comm, request, in + " reduce-scatter");
    expect(recv[0] == static_cast<float>(sum_ranks + g * i) && recv[k - 1] == recv[0],
           fmt::format("{} reduce-scatter: {} where {} sums to {}", in, recv[0], i,
                       sum_ranks + g * i));
  }
  {  // all-to-all, equal parts and uneven ones
    std::vector<uint8_t> send(16 * g);
    for (uint32_t b = 0; b < g; ++b)
      std::fill(send.begin() + b * 16, send.begin() + (b + 1) * 16,
                static_cast<uint8_t>(me * 16 + b));
    std::vector<uint8_t> recv(16 * g, 0xFF);
    CommRequest request = base;
    request.kind = CommOpKind::kAllToAll;
    request.dtype = DType::kUInt8;
    request.send = send.data();
    request.recv = recv.data();
    request.bytes = send.size();
    run(comm, request, in + " all-to-all");
    for (uint32_t b = 0; b < g; ++b)
      expect(recv[b * 16 + 15] == group[b] * 16 + i,
             fmt::format("{} all-to-all: part {} is not from rank {}", in, b, group[b]));
    std::vector<uint8_t> uneven_send;
    std::vector<uint64_t> send_bytes;
    std::vector<uint64_t> recv_bytes;
    for (uint32_t b = 0; b < g; ++b) {
      send_bytes.push_back((i + 1) * (b + 1) * 8);
      recv_bytes.push_back((b + 1) * (i + 1) * 8);
      uneven_send.insert(uneven_send.end(), send_bytes.back(), static_cast<uint8_t>(me * 10 + b));
    }
    std::vector<uint8_t> uneven_recv(std::accumulate(recv_bytes.begin(), recv_bytes.end(), 0UL));
    request.send = uneven_send.data();
    request.recv = uneven_recv.data();
    request.bytes = uneven_send.size();
    request.send_bytes = send_bytes;
    request.recv_bytes = recv_bytes;
    run(comm, request, in + " all-to-all (uneven)");
    size_t at = 0;
    for (uint32_t b = 0; b < g; ++b) {
      at += recv_bytes[b];
      expect(uneven_recv[at - 1] == group[b] * 10 + i,
             fmt::format("{} all-to-all (uneven): part {} is not from rank {}", in, b, group[b]));
    }
  }
  {  // reduce to member 0
    std::vector<float> send = filled(2000, static_cast<float>(me + 1));
    std::vector<float> recv(2000, 0.0F);
    CommRequest request = base;
    request.kind = CommOpKind::kReduce;
    request.send = send.data();
    request.recv = recv.data();
    request.bytes = send.size() * sizeof(float);
    request.root = 0;
    run(comm, request, in + " reduce");
    if (i == 0)
      expect(recv[1999] == static_cast<float>(sum_ranks + g), in + " reduce: wrong sum at root");
  }
  {  // gather to the last member, scatter from member 0
    std::vector<uint8_t> send = filled<uint8_t>(32, static_cast<uint8_t>(me + 50));
    std::vector<uint8_t> recv(32 * g, 0);
    CommRequest request = base;
    request.kind = CommOpKind::kGather;
    request.dtype = DType::kUInt8;
    request.send = send.data();
    request.recv = recv.data();
    request.bytes = 32;
    request.root = g - 1;
    run(comm, request, in + " gather");
    if (i == g - 1) {
      for (uint32_t b = 0; b < g; ++b)
        expect(recv[b * 32 + 31] == group[b] + 50, fmt::format("{} gather: block {}", in, b));
    }
    std::vector<uint8_t> parts(32 * g);
    for (uint32_t b = 0; b < g; ++b)
      std::fill(parts.begin() + b * 32, parts.begin() + (b + 1) * 32,
                static_cast<uint8_t>(100 + b));
    std::vector<uint8_t> mine(32, 0);
    request.kind = CommOpKind::kScatter;
    request.send = parts.data();
    request.recv = mine.data();
    request.bytes = parts.size();
    request.root = 0;
    run(comm, request, in + " scatter");
    expect(mine[0] == 100 + i && mine[31] == 100 + i, in + " scatter: not this member's part");
  }
  CommRequest barrier = base;
  barrier.kind = CommOpKind::kBarrier;
  run(comm, barrier, in + " barrier");
}

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<Communicator> comm;
  if (orrery::replay::launched_by_mpi()) {
    auto made = orrery::replay::make_mpi_communicator(&argc, &argv);
    if (!made) {
      fmt::print(stderr, "{}\n", made.error().message());
      return 2;
    }
    comm = std::move(*made);
  } else {
    const char* rank = std::getenv("RANK");
    const char* world = std::getenv("WORLD_SIZE");
    if (argc != 2 || rank == nullptr || world == nullptr) {
      fmt::print(stderr, "usage: RANK=r WORLD_SIZE=n {} STORE, or under mpirun\n", argv[0]);
      return 2;
    }
    auto made = orrery::replay::make_gloo_communicator(static_cast<uint32_t>(std::atoi(rank)),
                                                       static_cast<uint32_t>(std::atoi(world)),
                                                       argv[1], "127.0.0.1");
    if (!made) {
      fmt::print(stderr, "{}\n", made.error().message());
      return 2;
    }
    comm = std::move(*made);
  }
  me = comm->rank();
  const uint32_t n = comm->size();
  std::vector<uint32_t> world(n);
  std::iota(world.begin(), world.end(), 0U);
  std::vector<std::vector<uint32_t>> groups{world};
  if (n == 3) groups = {{0, 1, 2}, {0, 2}, {1}};
  std::vector<std::vector<uint32_t>> mine;
  for (const auto& group : groups) {
    if (std::find(group.begin(), group.end(), me) != group.end()) mine.push_back(group);
  }
  std::sort(mine.begin(), mine.end());
  if (orrery::Status made = comm->prepare_groups(mine); !made) {
    fmt::print(stderr, "rank {}: {}\n", me, made.error().message());
    return 1;
  }
  for (const auto& group : mine) check_group(*comm, group);

  if (n >= 2) {  // point to point on the world, tags kept apart
    std::vector<uint8_t> message(1000, me == 0 ? 7 : 0);
    std::vector<uint8_t> answer(500, me == 1 ? 9 : 0);
    CommRequest request;
    request.group = &world;
    request.kind = me == 0 ? CommOpKind::kSend : CommOpKind::kRecv;
    if (me <= 1) {
      request.send = message.data();
      request.recv = message.data();
      request.bytes = message.size();
      request.peer = 1 - me;
      request.tag = 3;
      run(*comm, request, "send 0 to 1");
      request.kind = me == 1 ? CommOpKind::kSend : CommOpKind::kRecv;
      request.send = answer.data();
      request.recv = answer.data();
      request.bytes = answer.size();
      request.tag = 4;
      run(*comm, request, "send 1 to 0");
      expect(message[999] == 7 && answer[499] == 9, "send and receive: wrong contents");
    }
  }
  auto texts = comm->all_gather_text(me == 1 ? "" : fmt::format("rank {} says hello", me));
  expect(static_cast<bool>(texts), "all-gather of texts failed");
  if (texts) {
    expect(texts->size() == n, "all-gather of texts: wrong count");
    for (uint32_t r = 0; r < texts->size(); ++r) {
      expect((*texts)[r] == (r == 1 ? "" : fmt::format("rank {} says hello", r)),
             fmt::format("all-gather of texts: rank {}'s is '{}'", r, (*texts)[r]));
    }
  }
  expect(static_cast<bool>(comm->barrier()), "world barrier failed");
  if (failures == 0)
    fmt::print("rank {}: every operation as expected ({})\n", me, comm->description());
  return failures == 0 ? 0 : 1;
}
