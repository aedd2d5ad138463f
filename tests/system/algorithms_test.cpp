// The collective algorithms of system/algorithms/, one by one, driven through the CollectiveEngine
// alone (no workload): every rank issues one collective at time zero and the test checks the
// message count and each rank's finish time against the algorithm's closed form, endpoint delay E
// and reduction cost R included, on exact picosecond timing with one chunk. Message time
// d(m) = hops x latency + m / bandwidth is computed here independently, in integer picoseconds.
// The peer-model seam is checked too: mirror mode and a model of the test's own.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/event_engine.h"
#include "network/network_backend.h"
#include "system/algorithms/algorithms.h"
#include "system/collective_engine.h"

namespace orrery::sys {
namespace algorithms_test {

__extension__ using int128 = __int128;

constexpr uint64_t kGbps = 50;       // 2^30 bytes per second units
constexpr int64_t kLatencyNs = 500;  // per hop
constexpr int64_t kE = 10;           // endpoint delay, ns

int64_t serialization_ps(uint64_t bytes) {
  const int128 numerator = static_cast<int128>(bytes) * 1000000000000LL;
  const int128 denominator = static_cast<int128>(kGbps) << 30;
  return static_cast<int64_t>((numerator + denominator / 2) / denominator);
}
// One message of `bytes` over `hops` links.
int64_t d(uint64_t bytes, int64_t hops = 1) {
  return kLatencyNs * 1000 * hops + serialization_ps(bytes);
}
constexpr int64_t E = kE * 1000;  // ps

// Completion times per rank.
class Recorder final : public SystemListener {
 public:
  explicit Recorder(EventEngine& engine, uint32_t ranks) : engine_(engine), done(ranks, -1) {}
  void on_collective_done(Rank rank, uint64_t /*cookie*/) override {
    done[rank] = engine_.now().ps();
    ++count;
  }
  void on_send_done(Rank /*rank*/, uint64_t /*cookie*/) override {}
  void on_recv_done(Rank /*rank*/, uint64_t /*cookie*/) override {}
  EventEngine& engine_;
  std::vector<int64_t> done;
  uint32_t count = 0;
};

struct Case {
  std::vector<net::Dimension> dims;
  Algorithm algorithm{AlgorithmKind::kRing, 0};
  // 0: no reduction cost; else local-mem-bw in bytes per ns (R(m) = 3 floor(m / bw) ns).
  double local_mem_bw = 0;
  CollectiveOptimization optimization = CollectiveOptimization::kBaseline;
  EngineOptions options;
};

net::Dimension dim(net::TopologyKind kind, uint32_t size) {
  return net::Dimension{kind, size, net::Bandwidth::from_gbps(kGbps), SimTime::from_ns(kLatencyNs)};
}

// Runs `type` of `bytes` per rank on every rank (only rank 0 when `only_rank0`), returns the
// recorder; `messages` gets the engine's count.
struct Outcome {
  std::vector<int64_t> done;
  uint32_t completions = 0;
  uint64_t messages = 0;
};

Outcome run(const Case& setup, CollectiveType type, uint64_t bytes, bool only_rank0 = false) {
  EventEngine engine;
  Expected<net::Topology> topology = net::Topology::create(setup.dims);
  EXPECT_TRUE(topology) << topology.error().message();
  Expected<std::unique_ptr<net::NetworkBackend>> network =
      net::make_network_backend("analytical", engine, *topology, net::TimeRounding::kExact);
  EXPECT_TRUE(network) << network.error().message();
  SystemConfig config;
  config.endpoint_delay_ns = kE;
  config.preferred_dataset_splits = 1;
  config.active_chunks_per_dimension = 1;
  config.collective_optimization = setup.optimization;
  config.local_mem_bw_gbps = setup.local_mem_bw == 0 ? 1e18 : setup.local_mem_bw;
  const std::vector<Algorithm> list(setup.dims.size(), setup.algorithm);
  config.all_reduce = config.all_gather = config.reduce_scatter = config.all_to_all = list;
  Recorder recorder(engine, topology->rank_count());
  Expected<std::unique_ptr<CollectiveEngine>> collectives =
      CollectiveEngine::create(engine, **network, config, setup.options, recorder);
  EXPECT_TRUE(collectives) << collectives.error().message();
  const uint32_t issuers = only_rank0 ? 1 : topology->rank_count();
  for (Rank rank = 0; rank < issuers; ++rank) {
    CollectiveRequest request;
    request.type = type;
    request.bytes = bytes;
    Status status = (*collectives)->issue_collective(rank, request);
    EXPECT_TRUE(status) << status.error().message();
  }
  engine.run();
  EXPECT_FALSE((*collectives)->failure());
  EXPECT_EQ(recorder.count, issuers);
  return {recorder.done, recorder.count, (*collectives)->messages_sent()};
}

void expect_all(const Outcome& outcome, int64_t time) {
  for (size_t rank = 0; rank < outcome.done.size(); ++rank) {
    EXPECT_EQ(outcome.done[rank], time) << "rank " << rank;
  }
}

constexpr uint64_t kBytes = 1 << 20;
constexpr uint32_t kN = 8;

TEST(Algorithms, NamesOfTheObjectsTheRegistryHandsOut) {
  EXPECT_EQ(collective_algorithm(PhaseOp::kAllReduce, {AlgorithmKind::kRing, 0}).name(), "ring");
  EXPECT_EQ(collective_algorithm(PhaseOp::kAllReduce, {AlgorithmKind::kDirect, 3}).name(),
            "direct");
  EXPECT_EQ(
      collective_algorithm(PhaseOp::kReduceScatter, {AlgorithmKind::kHalvingDoubling, 0}).name(),
      "halvingDoubling");
  EXPECT_EQ(collective_algorithm(PhaseOp::kAllReduce, {AlgorithmKind::kDoubleBinaryTree, 0}).name(),
            "doubleBinaryTree");
  EXPECT_EQ(collective_algorithm(PhaseOp::kAllGather, {AlgorithmKind::kInSwitch, 0}).name(),
            "inSwitch");
  // The flat collectives have one algorithm whatever the configuration names.
  for (PhaseOp op : {PhaseOp::kBroadcast, PhaseOp::kReduce}) {
    EXPECT_EQ(collective_algorithm(op, {AlgorithmKind::kHalvingDoubling, 0}).name(), "chain");
  }
  for (PhaseOp op : {PhaseOp::kGather, PhaseOp::kScatter}) {
    EXPECT_EQ(collective_algorithm(op, {AlgorithmKind::kDirect, 0}).name(), "rooted");
  }
  EXPECT_EQ(collective_algorithm(PhaseOp::kBarrier, {AlgorithmKind::kRing, 0}).name(), "barrier");
  EXPECT_EQ(&collective_algorithm(PhaseOp::kAllReduce, {AlgorithmKind::kRing, 0}),
            &algorithms::ring());
}

// ring.cpp: 2(n-1) steps of E + d(x/n), then E; the first n-1 receives reduced.
TEST(RingAlgorithm, AllReduceStepsAndReductions) {
  Case setup;
  setup.dims = {dim(net::TopologyKind::kRing, kN)};
  const Outcome plain = run(setup, CollectiveType::kAllReduce, kBytes);
  EXPECT_EQ(plain.messages, uint64_t{kN} * 2 * (kN - 1));
  expect_all(plain, 2 * (kN - 1) * (E + d(kBytes / kN)) + E);

  setup.local_mem_bw = 4;  // bytes per ns
  const int64_t reduction = 3 * static_cast<int64_t>((kBytes / kN) / 4) * 1000;
  const Outcome reduced = run(setup, CollectiveType::kAllReduce, kBytes);
  expect_all(reduced, 2 * (kN - 1) * (E + d(kBytes / kN)) + E + (kN - 1) * reduction);
}

TEST(RingAlgorithm, ReduceScatterAllGatherAllToAll) {
  Case setup;
  setup.dims = {dim(net::TopologyKind::kRing, kN)};
  setup.local_mem_bw = 4;
  const int64_t reduction = 3 * static_cast<int64_t>((kBytes / kN) / 4) * 1000;
  const Outcome rs = run(setup, CollectiveType::kReduceScatter, kBytes);
  EXPECT_EQ(rs.messages, uint64_t{kN} * (kN - 1));
  expect_all(rs, E + (kN - 1) * (d(kBytes / kN) + E + reduction));
  // All-gather: n-1 messages of the whole per-rank input, nothing reduced.
  const Outcome ag = run(setup, CollectiveType::kAllGather, kBytes / kN);
  EXPECT_EQ(ag.messages, uint64_t{kN} * (kN - 1));
  expect_all(ag, (kN - 1) * (E + d(kBytes / kN)) + E);
  // All-to-all: n(n-1)/2 relayed steps of x/n.
  const Outcome a2a = run(setup, CollectiveType::kAllToAll, kBytes);
  EXPECT_EQ(a2a.messages, uint64_t{kN} * kN * (kN - 1) / 2);
  expect_all(a2a, kN * (kN - 1) / 2 * (E + d(kBytes / kN)) + E);
}

// direct.cpp on FullyConnected: n-1 messages at once, the second half after every first-half
// receive: E, d, E + R, d, E.
TEST(DirectAlgorithm, AllReduceTwoRoundsOfConcurrentMessages) {
  Case setup;
  setup.dims = {dim(net::TopologyKind::kFullyConnected, kN)};
  setup.algorithm = {AlgorithmKind::kDirect, 0};
  setup.local_mem_bw = 4;
  const int64_t reduction = 3 * static_cast<int64_t>((kBytes / kN) / 4) * 1000;
  const Outcome outcome = run(setup, CollectiveType::kAllReduce, kBytes);
  EXPECT_EQ(outcome.messages, uint64_t{kN} * 2 * (kN - 1));
  expect_all(outcome, 3 * E + 2 * d(kBytes / kN) + reduction);
  // All-to-all: n-1 messages of x/n at once.
  const Outcome a2a = run(setup, CollectiveType::kAllToAll, kBytes);
  EXPECT_EQ(a2a.messages, uint64_t{kN} * (kN - 1));
  expect_all(a2a, 2 * E + d(kBytes / kN));
}

// directN: a window of N messages; with N = 1 direct is a sequence of n-1 one-hop steps to
// successive members (1, 2, ... positions on): on a Ring they take 1, 2, ... hops.
TEST(DirectAlgorithm, WindowOfOneWalksRoundTheMembers) {
  Case setup;
  setup.dims = {dim(net::TopologyKind::kRing, 4)};
  setup.algorithm = {AlgorithmKind::kDirect, 1};
  const uint64_t bytes = 4096;
  const Outcome outcome = run(setup, CollectiveType::kReduceScatter, bytes);
  EXPECT_EQ(outcome.messages, 4u * 3u);
  // Distances 1, 2, 3: 3 positions on is one hop back on a Ring of 4.
  expect_all(outcome, E + (d(bytes / 4, 1) + E) + (d(bytes / 4, 2) + E) + (d(bytes / 4, 1) + E));
}

// halving_doubling.cpp on FullyConnected(8): log2 n = 3 steps of x/2, x/4, x/8 (reduce-scatter),
// x/8, x/4, x/2 (all-gather of x/8 per rank... sizes grow from the input).
TEST(HalvingDoublingAlgorithm, StepsHalveAndDouble) {
  Case setup;
  setup.dims = {dim(net::TopologyKind::kFullyConnected, kN)};
  setup.algorithm = {AlgorithmKind::kHalvingDoubling, 0};
  const Outcome rs = run(setup, CollectiveType::kReduceScatter, kBytes);
  EXPECT_EQ(rs.messages, uint64_t{kN} * 3);
  expect_all(rs, 4 * E + d(kBytes / 2) + d(kBytes / 4) + d(kBytes / 8));
  const Outcome ag = run(setup, CollectiveType::kAllGather, kBytes / 8);
  EXPECT_EQ(ag.messages, uint64_t{kN} * 3);
  expect_all(ag, 4 * E + d(kBytes / 8) + d(kBytes / 4) + d(kBytes / 2));
  // All-reduce: the reduce-scatter, its last step repeated at the turn, then back.
  const Outcome ar = run(setup, CollectiveType::kAllReduce, kBytes);
  EXPECT_EQ(ar.messages, uint64_t{kN} * 6);
  expect_all(ar, 7 * E + 2 * (d(kBytes / 2) + d(kBytes / 4) + d(kBytes / 8)));
  // Reductions: charged on the size of the next message; the last reduce-scatter receive is not
  // reduced: R(x/4) + R(x/8) for a reduce-scatter of 8.
  setup.local_mem_bw = 2;
  const auto r = [](uint64_t bytes) { return 3 * static_cast<int64_t>(bytes / 2) * 1000; };
  const Outcome reduced = run(setup, CollectiveType::kReduceScatter, kBytes);
  expect_all(reduced,
             4 * E + d(kBytes / 2) + d(kBytes / 4) + d(kBytes / 8) + r(kBytes / 4) + r(kBytes / 8));
}

// double_binary_tree.cpp on FullyConnected(4), chunk 0: 2 and 3 are leaves, 1 has child 3, 0 has
// children 1 and 2. Up: 3 -> 1 -> 0 and 2 -> 0; down the same way. Each receive E + R.
TEST(DoubleBinaryTreeAlgorithm, UpTheTreeAndBackDown) {
  Case setup;
  setup.dims = {dim(net::TopologyKind::kFullyConnected, 4)};
  setup.algorithm = {AlgorithmKind::kDoubleBinaryTree, 0};
  setup.local_mem_bw = 4;
  const uint64_t x = 1 << 16;
  const int64_t R = 3 * static_cast<int64_t>(x / 4) * 1000;
  const Outcome outcome = run(setup, CollectiveType::kAllReduce, x);
  EXPECT_EQ(outcome.messages, 2u * 3u);  // every edge once up and once down
  const int64_t dx = d(x);
  EXPECT_EQ(outcome.done[0], 3 * E + 2 * dx + 2 * R);  // the root turns the sum round
  EXPECT_EQ(outcome.done[1], 4 * E + 3 * dx + 3 * R);
  EXPECT_EQ(outcome.done[2], 4 * E + 3 * dx + 3 * R);
  EXPECT_EQ(outcome.done[3], 5 * E + 4 * dx + 4 * R);
}

// chain.cpp: member k of a broadcast finishes at (k+1) E + k d; a reduce mirrors it, reducing.
TEST(ChainAlgorithm, BroadcastAndReduceAlongTheGroup) {
  Case setup;
  setup.dims = {dim(net::TopologyKind::kFullyConnected, 4)};
  const uint64_t x = 1 << 16;
  const Outcome broadcast = run(setup, CollectiveType::kBroadcast, x);
  EXPECT_EQ(broadcast.messages, 3u);
  for (int64_t k = 0; k < 4; ++k) {
    EXPECT_EQ(broadcast.done[static_cast<size_t>(k)], (k + 1) * E + k * d(x)) << k;
  }
  setup.local_mem_bw = 4;
  const int64_t R = 3 * static_cast<int64_t>(x / 4) * 1000;
  const Outcome reduce = run(setup, CollectiveType::kReduce, x);
  EXPECT_EQ(reduce.messages, 3u);
  for (int64_t k = 0; k < 4; ++k) {
    const int64_t steps = 3 - k;  // receives before member k forwards
    EXPECT_EQ(reduce.done[static_cast<size_t>(k)], (steps + 1) * E + steps * (d(x) + R)) << k;
  }
}

// rooted.cpp: every member to (from) member 0 at once.
TEST(RootedAlgorithm, GatherAndScatter) {
  Case setup;
  setup.dims = {dim(net::TopologyKind::kFullyConnected, 4)};
  const uint64_t x = 1 << 16;
  const Outcome gather = run(setup, CollectiveType::kGather, x);
  EXPECT_EQ(gather.messages, 3u);
  EXPECT_EQ(gather.done[0], 2 * E + d(x));
  for (size_t k = 1; k < 4; ++k) EXPECT_EQ(gather.done[k], E) << k;
  const Outcome scatter = run(setup, CollectiveType::kScatter, x);
  EXPECT_EQ(scatter.messages, 3u);
  EXPECT_EQ(scatter.done[0], E);
  for (size_t k = 1; k < 4; ++k) EXPECT_EQ(scatter.done[k], 2 * E + d(x)) << k;
}

// barrier.cpp: ceil(log2 n) rounds of 1 byte to the member 2^k ahead.
TEST(BarrierAlgorithm, DisseminationRounds) {
  Case setup;
  setup.dims = {dim(net::TopologyKind::kFullyConnected, 5)};  // 3 rounds: distances 1, 2, 4
  const Outcome outcome = run(setup, CollectiveType::kBarrier, 0);
  EXPECT_EQ(outcome.messages, 5u * 3u);
  expect_all(outcome, 4 * E + 3 * d(1));
}

// in_switch.cpp: one hop up, one hop down: 2E + d(x) + d(down).
TEST(InSwitchAlgorithm, OneHopUpOneHopDown) {
  Case setup;
  setup.dims = {dim(net::TopologyKind::kSwitch, kN)};
  setup.algorithm = {AlgorithmKind::kInSwitch, 0};
  const Outcome ar = run(setup, CollectiveType::kAllReduce, kBytes);
  EXPECT_EQ(ar.messages, 2u * kN);
  expect_all(ar, 2 * E + 2 * d(kBytes));
  const Outcome rs = run(setup, CollectiveType::kReduceScatter, kBytes);
  expect_all(rs, 2 * E + d(kBytes) + d(kBytes / kN));
  const Outcome ag = run(setup, CollectiveType::kAllGather, kBytes / kN);
  expect_all(ag, 2 * E + d(kBytes / kN) + d(kBytes));
}

// Hierarchical phases: localBWAware on Ring(4) x Ring(2) runs reduce-scatter, all-reduce and an
// all-gather going anticlockwise; its time equals the sum of the three ring phases.
TEST(RingAlgorithm, HierarchicalPhasesInOrder) {
  Case setup;
  setup.dims = {dim(net::TopologyKind::kRing, 4), dim(net::TopologyKind::kRing, 2)};
  setup.optimization = CollectiveOptimization::kLocalBwAware;
  const Outcome outcome = run(setup, CollectiveType::kAllReduce, kBytes);
  const int64_t rs = 3 * (E + d(kBytes / 4)) + E;
  const int64_t ar = 2 * (E + d(kBytes / 8)) + E;
  const int64_t ag = 3 * (E + d(kBytes / 4)) + E;
  expect_all(outcome, rs + ar + ag);
  EXPECT_EQ(outcome.messages, 8u * (3 + 2 + 3));
}

// Mirror mode: rank 0 alone stands for every rank; its time is the full run's and the message
// count the network's.
TEST(PeerModel, MirrorModeMatchesFullSimulation) {
  for (Algorithm algorithm :
       {Algorithm{AlgorithmKind::kRing, 0}, Algorithm{AlgorithmKind::kDirect, 0},
        Algorithm{AlgorithmKind::kHalvingDoubling, 0}, Algorithm{AlgorithmKind::kInSwitch, 0}}) {
    Case setup;
    setup.dims = {dim(algorithm.kind == AlgorithmKind::kInSwitch
                          ? net::TopologyKind::kSwitch
                          : net::TopologyKind::kFullyConnected,
                      kN)};
    setup.algorithm = algorithm;
    setup.local_mem_bw = 16;
    const Outcome full = run(setup, CollectiveType::kAllReduce, kBytes);
    setup.options.mirror = true;
    setup.options.rounding = net::TimeRounding::kExact;
    const Outcome mirrored = run(setup, CollectiveType::kAllReduce, kBytes, /*only_rank0=*/true);
    EXPECT_EQ(mirrored.done[0], full.done[0]) << algorithm_name(algorithm);
    EXPECT_EQ(mirrored.messages, full.messages) << algorithm_name(algorithm);
    for (size_t rank = 1; rank < kN; ++rank) EXPECT_EQ(mirrored.done[rank], -1);
  }
}

// A peer model of the caller's replaces mirror mode: here every message is routed through it.
class CountingPeers final : public PeerModel {
 public:
  explicit CountingPeers(uint32_t ranks) : ranks_(ranks) {}
  uint32_t simulated_count() const override { return ranks_; }
  bool simulated(Rank /*rank*/) const override { return true; }
  uint32_t slot(Rank rank) const override { return rank; }
  MessageFate route(const CollectiveMessage& message, SimTime /*now*/) override {
    ++routed;
    if (message.pattern == MirrorPattern::kShift) ++shifts;
    MessageFate fate;
    fate.network_src = fate.arrives_from = message.src;
    fate.network_dst = fate.arrives_at = message.dst;
    return fate;
  }
  MessageFate route_switch_hop(Rank rank, uint32_t /*dim*/, bool /*up*/, uint64_t /*bytes*/,
                               SimTime /*now*/) override {
    MessageFate fate;
    fate.network_src = fate.network_dst = rank;
    return fate;
  }
  uint32_t switch_participants(Rank /*rank*/, uint32_t /*dim*/) const override { return ranks_; }
  uint64_t routed = 0;
  uint64_t shifts = 0;

 private:
  uint32_t ranks_;
};

TEST(PeerModel, EveryMessageAsksTheModel) {
  Case setup;
  setup.dims = {dim(net::TopologyKind::kRing, kN)};
  auto peers = std::make_shared<CountingPeers>(kN);
  setup.options.peers = peers;
  const Outcome outcome = run(setup, CollectiveType::kAllReduce, kBytes);
  expect_all(outcome, 2 * (kN - 1) * (E + d(kBytes / kN)) + E);
  EXPECT_EQ(peers->routed, outcome.messages);
  EXPECT_EQ(peers->shifts, outcome.messages);  // ring steps are shifts
}

}  // namespace algorithms_test
}  // namespace orrery::sys
