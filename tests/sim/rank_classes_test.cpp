// Rank classes (sim/rank_classes.h, system/peer_model.h) against full simulation: which plans give
// how many classes and why others fall back, and a randomized suite (plans of gen llm, gen dlrm
// and gen inference on random networks, both analytical backends) in which the default run must
// give exactly what --fast-path off gives: every rank's times, every collective, every link.
// ORRERY_CLASS_CASES sets the suite's case count (default 40), ORRERY_CLASS_SEED its seed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>
#include <tuple>

#include "gen/dlrm_generator.h"
#include "gen/gen_test_support.h"
#include "gen/inference_generator.h"
#include "gen/llm_generator.h"
#include "sim/rank_classes.h"
#include "sim/sim_test_support.h"

namespace orrery::sim {
namespace rank_classes_test {

using ChakraProtoMsg::Node;

Node p2p(uint64_t id, bool send, uint32_t peer, int tag, int64_t bytes,
         std::initializer_list<uint64_t> deps = {}) {
  Node node = test::make_node(
      id, send ? ChakraProtoMsg::COMM_SEND_NODE : ChakraProtoMsg::COMM_RECV_NODE, deps);
  test::add_attr(node, send ? "comm_dst" : "comm_src").set_int32_val(static_cast<int32_t>(peer));
  test::add_attr(node, "comm_tag").set_int32_val(tag);
  test::add_attr(node, "comm_size").set_int64_val(bytes);
  return node;
}

Node compute(uint64_t id, uint64_t micros, std::initializer_list<uint64_t> deps = {}) {
  Node node = test::make_node(id, ChakraProtoMsg::COMP_NODE, deps);
  node.set_duration_micros(micros);
  test::add_attr(node, "is_cpu_op").set_bool_val(false);
  return node;
}

Node group_coll(uint64_t id, ChakraProtoMsg::CollectiveCommType type, int64_t bytes,
                const std::string& group, std::initializer_list<uint64_t> deps = {}) {
  Node node = test::coll_node(id, type, bytes, deps);
  test::add_attr(node, "pg_name").set_string_val(group);
  return node;
}

// Every figure of two runs, compared exactly; collectives in the order listed (one order in every
// mode).
void expect_same_results(const RunResult& fast, const RunResult& full, const std::string& what) {
  ASSERT_EQ(fast.rank_results.size(), full.rank_results.size()) << what;
  for (size_t rank = 0; rank < full.rank_results.size(); ++rank) {
    const auto& a = fast.rank_results[rank];
    const auto& b = full.rank_results[rank];
    ASSERT_EQ(a.rank, b.rank);
    ASSERT_EQ(a.finish, b.finish) << "rank " << rank << "\n" << what;
    ASSERT_EQ(a.gpu_compute, b.gpu_compute) << "rank " << rank;
    ASSERT_EQ(a.cpu_compute, b.cpu_compute) << "rank " << rank;
    ASSERT_EQ(a.memory, b.memory) << "rank " << rank;
    ASSERT_EQ(a.comm_active, b.comm_active) << "rank " << rank;
    ASSERT_EQ(a.comm_exposed, b.comm_exposed) << "rank " << rank;
    ASSERT_EQ(a.busy, b.busy) << "rank " << rank;
    ASSERT_EQ(a.completed, b.completed) << "rank " << rank;
    ASSERT_EQ(a.collectives, b.collectives) << "rank " << rank;
    ASSERT_EQ(a.sends, b.sends) << "rank " << rank;
    ASSERT_EQ(a.recvs, b.recvs) << "rank " << rank;
  }
  ASSERT_EQ(fast.end, full.end);
  const auto& a = fast.collectives;
  const auto& b = full.collectives;
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t idx = 0; idx < a.size(); ++idx) {
    ASSERT_EQ(a[idx].group, b[idx].group) << idx;
    ASSERT_EQ(a[idx].sequence, b[idx].sequence) << idx;
    ASSERT_EQ(a[idx].type, b[idx].type) << idx;
    ASSERT_EQ(a[idx].bytes, b[idx].bytes) << idx;
    ASSERT_EQ(a[idx].ranks, b[idx].ranks) << idx;
    ASSERT_EQ(a[idx].first_issue, b[idx].first_issue) << "collective " << idx << "\n" << what;
    ASSERT_EQ(a[idx].last_finish, b[idx].last_finish) << "collective " << idx << "\n" << what;
  }
  ASSERT_EQ(fast.messages, full.messages) << what;
  ASSERT_EQ(fast.links.size(), full.links.size()) << what;
  for (size_t idx = 0; idx < full.links.size(); ++idx) {
    const auto& x = fast.links[idx];
    const auto& y = full.links[idx];
    ASSERT_EQ(x.link, y.link) << idx;
    ASSERT_EQ(x.src, y.src) << idx;
    ASSERT_EQ(x.dst, y.dst) << idx;
    ASSERT_EQ(x.bytes, y.bytes) << "link " << idx << "\n" << what;
    ASSERT_EQ(x.messages, y.messages) << "link " << idx;
    ASSERT_EQ(x.busy, y.busy) << "link " << idx;
    ASSERT_EQ(x.peak_queue, y.peak_queue) << "link " << idx << "\n" << what;
  }
  ASSERT_EQ(fast.dimensions.size(), full.dimensions.size());
  for (size_t dim = 0; dim < full.dimensions.size(); ++dim) {
    ASSERT_EQ(fast.dimensions[dim].bytes, full.dimensions[dim].bytes);
    ASSERT_EQ(fast.dimensions[dim].links_used, full.dimensions[dim].links_used);
    ASSERT_EQ(fast.dimensions[dim].busy, full.dimensions[dim].busy);
  }
  ASSERT_EQ(fast.peak_memory, full.peak_memory);
}

struct Pair {
  RunResult fast;
  RunResult full;
};

// The run with the fast path on and off; both must succeed.
std::optional<Pair> run_both(test::RunInputs inputs, const std::string& what) {
  inputs.settings.fast_path = true;
  Expected<RunResult> fast = test::simulate(inputs);
  inputs.settings.fast_path = false;
  Expected<RunResult> full = test::simulate(inputs);
  EXPECT_TRUE(fast) << fast.error().message() << "\n" << what;
  EXPECT_TRUE(full) << full.error().message() << "\n" << what;
  if (!fast || !full) return std::nullopt;
  EXPECT_EQ(full->mode, "full");
  return Pair{std::move(*fast), std::move(*full)};
}

// Pairs (2k, 2k + 1) exchange a message each way after some compute; rank `slow` (if any)
// computes longer.
test::RunInputs pair_exchange(uint32_t ranks, int slow = -1) {
  std::vector<std::vector<Node>> traces(ranks);
  for (uint32_t rank = 0; rank < ranks; ++rank) {
    const uint32_t peer = rank ^ 1u;
    traces[rank] = {compute(1, static_cast<int>(rank) == slow ? 70 : 30),
                    p2p(2, true, peer, 7, 1 << 20, {1}), p2p(3, false, peer, 7, 1 << 20, {1}),
                    compute(4, 20, {2, 3})};
  }
  test::RunInputs inputs;
  inputs.traces = test::traces_of(traces);
  inputs.system = test::system_json("ring", 2);
  inputs.network =
      test::network_yaml("Ring, Switch", fmt::format("2, {}", ranks / 2), "50, 25", "500, 1000");
  return inputs;
}

TEST(RankClasses, pairs_exchanging_messages_are_one_class) {
  std::optional<Pair> runs = run_both(pair_exchange(8), "pairs");
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->fast.mode, "classes");
  EXPECT_EQ(runs->fast.simulated_ranks, 1u);
  EXPECT_FALSE(runs->fast.symmetric);
  // The compute, then 500 ns + 1 MiB at 50 GB/s (19,531.25 ns at 50 GiB/s, truncated), then the
  // compute.
  EXPECT_EQ(runs->full.rank_results[5].finish, SimTime::from_ns(30000 + 20031 + 20000));
  expect_same_results(runs->fast, runs->full, "pairs");
}

// Hears the activities of a few ranks, as a sweep's breakdown does.
class WatchFew final : public workload::RunObserver {
 public:
  explicit WatchFew(std::vector<workload::Rank> ranks) : ranks_(std::move(ranks)) {}
  std::span<const workload::Rank> watched_ranks() const override { return ranks_; }
  void on_representatives(const std::vector<workload::Rank>& representative_of) override {
    representative_of_ = representative_of;
  }
  void on_activity(const workload::ActivityRecord& record, const chakra::TraceGraph&) override {
    for (const workload::Rank rank : ranks_) {
      const workload::Rank heard = representative_of_.empty() ? rank : representative_of_[rank];
      if (heard == record.rank) {
        seen[rank].emplace_back(record.node, static_cast<int>(record.activity), record.start,
                                record.end);
      }
    }
  }
  std::map<workload::Rank, std::vector<std::tuple<chakra::NodeIndex, int, SimTime, SimTime>>> seen;

 private:
  std::vector<workload::Rank> ranks_;
  std::vector<workload::Rank> representative_of_;
};

// An observer that names its ranks keeps class mode and hears each one as it would in a full run
// (through its class's representative); one that watches every rank keeps the run full.
TEST(RankClasses, an_observer_of_a_few_ranks_keeps_class_mode_and_hears_them_as_in_full) {
  std::map<bool, WatchFew> observers;
  std::map<bool, RunResult> results;
  for (const bool fast : {true, false}) {
    test::RunInputs inputs = pair_exchange(8);
    inputs.settings.fast_path = fast;
    Expected<Scenario> scenario = test::make_scenario(inputs);
    ASSERT_TRUE(scenario) << scenario.error().message();
    WatchFew& observer = observers.emplace(fast, WatchFew({0, 5, 7})).first->second;
    Simulation simulation(std::move(*scenario));
    simulation.add_observer(observer);
    Expected<RunResult> result = simulation.run();
    ASSERT_TRUE(result) << result.error().message();
    results.emplace(fast, std::move(*result));
  }
  EXPECT_EQ(results.at(true).mode, "classes");
  EXPECT_EQ(results.at(false).mode, "full");
  // The same activities at the same times; those ending in one instant may be heard in another
  // order (the order of events differs between the modes).
  for (const workload::Rank rank : {0u, 5u, 7u}) {
    auto fast = observers.at(true).seen[rank];
    auto full = observers.at(false).seen[rank];
    ASSERT_EQ(fast.size(), 4u) << rank;  // compute, send, receive, compute
    std::sort(fast.begin(), fast.end());
    std::sort(full.begin(), full.end());
    EXPECT_EQ(fast, full) << rank;
  }
}

TEST(RankClasses, a_straggler_splits_its_class_and_its_partner_s) {
  std::optional<Pair> runs = run_both(pair_exchange(8, 5), "straggler");
  ASSERT_TRUE(runs);
  // Rank 5 computes longer; rank 4 waits for it; every other pair is as before.
  EXPECT_EQ(runs->fast.mode, "classes");
  EXPECT_EQ(runs->fast.simulated_ranks, 3u);
  EXPECT_EQ(runs->full.rank_results[0].finish, SimTime::from_ns(30000 + 20031 + 20000));
  EXPECT_EQ(runs->full.rank_results[4].finish, SimTime::from_ns(70000 + 20031 + 20000));
  expect_same_results(runs->fast, runs->full, "straggler");
}

// Four tensor-parallel groups of two on a Ring(2) x Ring(4) network, all-reducing.
test::RunInputs tensor_groups(int slow = -1) {
  std::vector<std::vector<Node>> traces(8);
  for (uint32_t rank = 0; rank < 8; ++rank) {
    traces[rank] = {
        compute(1, static_cast<int>(rank) == slow ? 70 : 30),
        group_coll(2, ChakraProtoMsg::ALL_REDUCE, 1 << 20, fmt::format("{}", rank / 2 + 1), {1}),
        compute(3, 10, {2})};
  }
  test::RunInputs inputs;
  inputs.traces = test::traces_of(traces);
  inputs.system = test::system_json("ring", 2);
  inputs.network = test::network_yaml("Ring, Ring", "2, 4", "50, 25", "500, 1000");
  inputs.comm_groups = R"({"1": [0, 1], "2": [2, 3], "3": [4, 5], "4": [6, 7]})";
  return inputs;
}

TEST(RankClasses, groups_inside_one_class_mirror_and_expand_their_collectives) {
  std::optional<Pair> runs = run_both(tensor_groups(), "tp groups");
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->fast.mode, "classes");
  EXPECT_EQ(runs->fast.simulated_ranks, 1u);
  EXPECT_EQ(runs->fast.collectives.size(), 4u);  // one per group, expanded from one
  expect_same_results(runs->fast, runs->full, "tp groups");
}

// Rank files derived from one template may come out of a parallel load with the template's own
// rank not first: the first graph of the tables then holds patches of its own. Here every rank is
// the template renamed: its tensor-parallel group always, its data-parallel group on even ranks
// only (the template's is the odd ranks'), so rank 0, the first graph, patched a node that odd
// ranks did not: each rank's communication must be read from its own values, or rank 1 would be
// taken to run on the even ranks' group and the run would fall back to full simulation.
TEST(RankClasses, ranks_derived_from_a_template_whose_first_graph_is_patched) {
  const chakra::TraceGraph base = test::build_graph(
      {compute(1, 30), group_coll(2, ChakraProtoMsg::ALL_REDUCE, 1 << 20, "7", {1}),
       group_coll(3, ChakraProtoMsg::ALL_GATHER, 1 << 18, "6", {2}), compute(4, 10, {3})});
  const std::vector<chakra::NodeIndex> candidates = base.renamable_nodes();
  std::vector<chakra::TraceGraph> graphs;
  for (uint32_t rank = 0; rank < 8; ++rank) {
    chakra::TraceGraph::Renaming renaming;
    if (rank % 2 == 0) renaming.groups.emplace_back("6", "5");
    renaming.groups.emplace_back("7", std::to_string(rank / 2 + 1));
    graphs.push_back(chakra::TraceGraph::renamed_from(base, renaming, candidates));
  }
  ASSERT_EQ(graphs[0].patched_count(), 2u);
  ASSERT_EQ(graphs[1].patched_count(), 1u);
  test::RunInputs inputs;
  inputs.traces = chakra::TraceSet::from_graphs("w", std::move(graphs));
  inputs.system = test::system_json("ring", 2);
  inputs.network = test::network_yaml("Ring, Ring", "2, 4", "50, 25", "500, 1000");
  inputs.comm_groups = R"({"1": [0, 1], "2": [2, 3], "3": [4, 5], "4": [6, 7],
                           "5": [0, 2, 4, 6], "6": [1, 3, 5, 7]})";
  std::optional<Pair> runs = run_both(inputs, "patched first graph");
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->fast.mode, "classes") << runs->fast.fast_path_note;
  expect_same_results(runs->fast, runs->full, "patched first graph");
}

TEST(RankClasses, a_straggler_inside_a_group_falls_back_with_the_reason) {
  std::optional<Pair> runs = run_both(tensor_groups(3), "tp straggler");
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->fast.mode, "full");
  EXPECT_EQ(runs->fast.simulated_ranks, 8u);
  EXPECT_CONTAINS(runs->fast.fast_path_note,
                  "group '2', whose ranks 2 and 3 are in different "
                  "classes: their traces differ");
  expect_same_results(runs->fast, runs->full, "tp straggler");
}

// Two pipeline stages of four replicas on Ring(4) x Ring(2) (stage = second coordinate): stage 0
// computes 30 us and sends its activations to the next stage, stage 1 computes 50 us; then both
// all-reduce over {r, r + 4} (a group across the two classes, as tied embeddings are).
TEST(RankClasses, a_group_across_classes_runs_among_the_representatives) {
  std::vector<std::vector<Node>> traces(8);
  for (uint32_t rank = 0; rank < 8; ++rank) {
    const bool first = rank < 4;
    traces[rank] = {
        compute(1, first ? 30 : 50), p2p(2, first, first ? rank + 4 : rank - 4, 3, 1 << 18, {1}),
        group_coll(3, ChakraProtoMsg::ALL_REDUCE, 1 << 20, fmt::format("{}", rank % 4 + 1), {2}),
        compute(4, 10, {3})};
  }
  test::RunInputs inputs;
  inputs.traces = test::traces_of(traces);
  inputs.system = test::system_json("ring", 2);
  inputs.network = test::network_yaml("Ring, Ring", "4, 2", "50, 25", "500, 1000");
  inputs.comm_groups = R"({"1": [0, 4], "2": [1, 5], "3": [2, 6], "4": [3, 7]})";
  std::optional<Pair> runs = run_both(inputs, "across classes");
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->fast.mode, "classes") << runs->fast.fast_path_note;
  EXPECT_EQ(runs->fast.simulated_ranks, 2u);
  EXPECT_EQ(runs->fast.collectives.size(), 4u);
  expect_same_results(runs->fast, runs->full, "across classes");
}

// Groups of two that are not sub-grids of Ring(2) x Ring(4) run one ring over their ranks.
test::RunInputs unaligned_groups(const std::string& groups, const std::vector<uint32_t>& group_of) {
  test::RunInputs inputs = tensor_groups();
  inputs.comm_groups = groups;
  std::vector<std::vector<Node>> traces(8);
  for (uint32_t rank = 0; rank < 8; ++rank) {
    traces[rank] = {compute(1, 30), group_coll(2, ChakraProtoMsg::ALL_REDUCE, 1 << 20,
                                               fmt::format("{}", group_of[rank]), {1})};
  }
  inputs.traces = test::traces_of(traces);
  return inputs;
}

TEST(RankClasses, a_ring_over_a_group_that_is_not_a_sub_grid_mirrors_when_distances_agree) {
  // {0, 2}: coordinate 0 in the first dimension, 0 and 1 of four in the second; every group is
  // one hop of the second dimension apart.
  std::optional<Pair> runs =
      run_both(unaligned_groups(R"({"1": [0, 2], "2": [1, 3], "3": [4, 6], "4": [5, 7]})",
                                {1, 2, 1, 2, 3, 4, 3, 4}),
               "unaligned");
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->fast.mode, "classes") << runs->fast.fast_path_note;
  EXPECT_EQ(runs->fast.simulated_ranks, 1u);
  expect_same_results(runs->fast, runs->full, "unaligned");
}

TEST(RankClasses, a_ring_over_ranks_at_other_distances_falls_back) {
  // {4, 7} differ in both dimensions (the first is the lowest: one hop of 50 GB/s), {0, 2} only
  // in the second (25 GB/s).
  std::optional<Pair> runs =
      run_both(unaligned_groups(R"({"1": [0, 2], "2": [1, 3], "3": [4, 7], "4": [5, 6]})",
                                {1, 2, 1, 2, 3, 4, 4, 3}),
               "unaligned, other distances");
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->fast.mode, "full");
  EXPECT_CONTAINS(runs->fast.fast_path_note,
                  "group '3' (rank 4 node 2) is not a sub-grid of the network and rank 4 is at "
                  "another distance from the member 1 places on than rank 0 is from its own");
  expect_same_results(runs->fast, runs->full, "unaligned, other distances");
}

// The nccl model runs one phase over every group (its barrier's messages go 1, 2, 4, ... members
// on, then the phase takes NCCL's time): groups whose members are alike at those distances mirror
// as rings do, sub-grids or not, and give exactly what full simulation gives.
TEST(RankClasses, nccl_groups_whose_members_are_alike_mirror) {
  test::RunInputs tp = tensor_groups();
  tp.system = test::system_json("nccl", 2);
  std::optional<Pair> runs = run_both(tp, "nccl tp groups");
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->fast.mode, "classes") << runs->fast.fast_path_note;
  EXPECT_EQ(runs->fast.simulated_ranks, 1u);
  expect_same_results(runs->fast, runs->full, "nccl tp groups");
  // Every rank in one group on Ring(2) x Ring(4): at 1, 2 and 4 members on, every member is one,
  // one and two hops away, as rank 0 is. Symmetry does not take nccl; one class does.
  std::vector<std::vector<Node>> traces(8);
  for (uint32_t rank = 0; rank < 8; ++rank) {
    traces[rank] = {compute(1, 30), test::coll_node(2, ChakraProtoMsg::ALL_REDUCE, 1 << 20, {1}),
                    test::coll_node(3, ChakraProtoMsg::ALL_GATHER, 1 << 16, {2})};
  }
  test::RunInputs world = tp;
  world.traces = test::traces_of(traces);
  world.comm_groups.clear();
  runs = run_both(world, "nccl world");
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->fast.mode, "classes") << runs->fast.fast_path_note;
  EXPECT_EQ(runs->fast.simulated_ranks, 1u);
  expect_same_results(runs->fast, runs->full, "nccl world");
}

TEST(RankClasses, an_nccl_group_whose_members_are_at_other_distances_falls_back) {
  // {0, 1, 2} on Ring(4) x Ring(2): rank 2's next member, rank 0, is two hops back.
  test::RunInputs inputs = unaligned_groups(
      R"({"1": [0, 1, 2], "2": [4, 5, 6], "3": [3], "4": [7]})", {1, 1, 1, 3, 2, 2, 2, 4});
  inputs.system = test::system_json("nccl", 2);
  inputs.network = test::network_yaml("Ring, Ring", "4, 2", "50, 25", "500, 1000");
  std::optional<Pair> runs = run_both(inputs, "nccl, other distances");
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->fast.mode, "full");
  EXPECT_CONTAINS(runs->fast.fast_path_note,
                  "runs one nccl phase over its ranks and rank 2 is at another distance from the "
                  "member 1 places on than rank 0 is from its own");
  expect_same_results(runs->fast, runs->full, "nccl, other distances");
}

TEST(RankClasses, other_backends_run_in_full_and_say_why) {
  test::RunInputs inputs = pair_exchange(8);
  inputs.settings.backend = "congestion-aware";
  std::optional<Pair> runs = run_both(inputs, "congestion-aware pairs");
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->fast.mode, "full");
  EXPECT_CONTAINS(runs->fast.fast_path_note,
                  "no rank classes: rank classes need the analytical backend");
  expect_same_results(runs->fast, runs->full, "congestion-aware pairs");
}

TEST(RankClasses, every_rank_alike_stays_the_symmetric_path) {
  std::vector<Node> trace = {compute(1, 30),
                             test::coll_node(2, ChakraProtoMsg::ALL_REDUCE, 1 << 20, {1})};
  test::RunInputs inputs;
  inputs.traces = test::same_trace(trace, 8);
  inputs.system = test::system_json("ring", 2);
  inputs.network = test::network_yaml("Ring, Switch", "2, 4", "50, 25", "500, 1000");
  std::optional<Pair> runs = run_both(inputs, "symmetric");
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->fast.mode, "symmetric");
  EXPECT_TRUE(runs->fast.symmetric);
  EXPECT_EQ(runs->fast.simulated_ranks, 1u);
  expect_same_results(runs->fast, runs->full, "symmetric");
}

// ---- generated plans ----

struct Generated {
  std::shared_ptr<const chakra::TraceSet> traces;
  std::shared_ptr<const chakra::CommGroups> groups;
  uint32_t ranks = 0;
  std::vector<uint32_t> layout;  // natural dimension sizes, innermost first (tp, dp, pp, ...)
  std::string description;
};

template <typename Rng>
uint64_t pick(Rng& rng, uint64_t low, uint64_t high) {
  return std::uniform_int_distribution<uint64_t>(low, high)(rng);
}

std::optional<Generated> random_plan(std::mt19937_64& rng) {
  Generated out;
  const uint64_t which = pick(rng, 0, 9);
  if (which < 6) {
    const uint32_t tp = 1u << pick(rng, 0, 2);
    const uint32_t pp = 1u << pick(rng, 0, 2);
    const uint32_t dp = 1u << pick(rng, 0, 2);
    const uint64_t micro = pick(rng, 1, 4);
    gen::ParallelPlan plan =
        test::plan_of(dp, tp, pp, dp * micro * pick(rng, 1, 2), pick(rng, 1, 2));
    plan.global_batch = plan.micro_batch * dp * micro;
    if (tp > 1 && pick(rng, 0, 2) == 0) plan.sp = true;
    if (dp > 1 && pick(rng, 0, 3) == 0) plan.zero = static_cast<uint32_t>(pick(rng, 1, 3));
    if (plan.ranks() < 2) return std::nullopt;
    Expected<gen::LlmGenerator> generator = gen::LlmGenerator::create(test::tiny_gpt(), plan);
    if (!generator) return std::nullopt;
    Expected<gen::BuiltTraces> built = gen::build_llm_traces(*generator, "llm", {});
    if (!built) return std::nullopt;
    out.traces = built->traces;
    out.groups = built->groups;
    out.ranks = plan.ranks();
    out.layout = {tp, dp, pp};
    out.description =
        fmt::format("gen llm tiny-gpt tp {} pp {} dp {} micro-batches {} sp {} zero {}", tp, pp, dp,
                    micro, plan.sp, plan.zero);
  } else if (which < 8) {
    gen::InferencePlan plan;
    plan.tp = 1u << pick(rng, 0, 2);
    plan.pp = 1u << pick(rng, 0, 2);
    const size_t requests = pick(rng, 1, 3);
    for (size_t idx = 0; idx < requests; ++idx)
      plan.prompt_lengths.push_back(static_cast<uint32_t>(32 * pick(rng, 1, 4)));
    plan.output_lengths = {static_cast<uint32_t>(pick(rng, 1, 3))};
    plan.micro_batches = static_cast<uint32_t>(pick(rng, 1, requests));
    if (plan.ranks() < 2) return std::nullopt;
    Expected<gen::InferenceGenerator> generator =
        gen::InferenceGenerator::create(test::tiny_gpt(), plan);
    if (!generator) return std::nullopt;
    Expected<gen::BuiltTraces> built = gen::build_inference_traces(*generator, "inference", {});
    if (!built) return std::nullopt;
    out.traces = built->traces;
    out.groups = built->groups;
    out.ranks = plan.ranks();
    out.layout = {plan.tp, plan.pp};
    out.description = fmt::format("gen inference tp {} pp {} requests {} micro-batches {}", plan.tp,
                                  plan.pp, requests, plan.micro_batches);
  } else {
    gen::DlrmModel model;
    model.name = "small";
    model.dense_features = 13;
    model.bottom_mlp = {64, 16};
    model.top_mlp = {64, 1};
    model.dim = 16;
    gen::DlrmPlan plan;
    plan.ranks = 1u << pick(rng, 1, 3);
    model.tables.assign(plan.ranks * pick(rng, 1, 2), gen::EmbeddingTable{1000, 3});
    plan.global_batch = 16 * plan.ranks;
    const gen::Sharding shardings[] = {gen::Sharding::kTable, gen::Sharding::kRow,
                                       gen::Sharding::kColumn};
    plan.sharding = shardings[pick(rng, 0, 2)];
    Expected<gen::DlrmGenerator> generator = gen::DlrmGenerator::create(model, plan);
    if (!generator) return std::nullopt;
    Expected<gen::BuiltTraces> built = gen::build_dlrm_traces(*generator, "dlrm", {});
    if (!built) return std::nullopt;
    out.traces = built->traces;
    out.groups = built->groups;
    out.ranks = plan.ranks;
    out.layout = {plan.ranks};
    out.description =
        fmt::format("gen dlrm ranks {} sharding {}", plan.ranks, gen::sharding_name(plan.sharding));
  }
  return out;
}

// A random network of `ranks`: usually the plan's own layout (its groups align), sometimes merged
// or split otherwise.
std::vector<uint32_t> random_sizes(std::mt19937_64& rng, const Generated& plan) {
  std::vector<uint32_t> sizes;
  for (uint32_t size : plan.layout) {
    if (size > 1) sizes.push_back(size);
  }
  const uint64_t how = pick(rng, 0, 4);
  if (how == 0 && sizes.size() > 1) {
    sizes[1] *= sizes[0];
    sizes.erase(sizes.begin());
  } else if (how == 1) {
    // A random factorization into powers of two (every plan's rank count is one).
    sizes.clear();
    uint32_t left = plan.ranks;
    while (left > 1 && sizes.size() < 2) {
      const auto factor =
          static_cast<uint32_t>(1u << pick(rng, 1, static_cast<uint64_t>(std::countr_zero(left))));
      sizes.push_back(factor);
      left /= factor;
    }
    if (left > 1) sizes.push_back(left);
  }
  if (sizes.empty()) sizes.push_back(plan.ranks);
  return sizes;
}

bool power_of_two(uint32_t value) { return (value & (value - 1)) == 0; }

struct SuiteCase {
  test::RunInputs inputs;
  std::string description;
};

std::optional<SuiteCase> random_case(std::mt19937_64& rng) {
  std::optional<Generated> plan = random_plan(rng);
  if (!plan) return std::nullopt;
  const std::vector<uint32_t> sizes = random_sizes(rng, *plan);
  const bool congestion_aware = pick(rng, 0, 3) == 0;
  std::vector<std::string> kinds;
  std::string kind_list, size_list, bw_list, lat_list;
  for (size_t dim = 0; dim < sizes.size(); ++dim) {
    kinds.emplace_back(
        std::array<const char*, 3>{"Ring", "FullyConnected", "Switch"}[pick(rng, 0, 2)]);
    const char* sep = dim ? ", " : "";
    kind_list += sep + kinds.back();
    size_list += fmt::format("{}{}", sep, sizes[dim]);
    bw_list += fmt::format("{}{}", sep, 25 * pick(rng, 1, 16));
    lat_list += fmt::format("{}{}", sep, 100 * pick(rng, 1, 20) + (pick(rng, 0, 1) ? 50 : 0));
  }
  auto algorithm = [&](size_t dim, bool all_to_all) -> std::string {
    std::vector<std::string> choices{"ring", "direct", fmt::format("direct{}", pick(rng, 1, 3))};
    if (power_of_two(sizes[dim])) choices.push_back("halvingDoubling");
    if (kinds[dim] == "Switch" && !all_to_all) choices.push_back("inSwitch");
    return choices[pick(rng, 0, choices.size() - 1)];
  };
  auto list = [&](bool all_to_all) {
    std::string text = "[";
    for (size_t dim = 0; dim < sizes.size(); ++dim)
      text += (dim ? ", \"" : "\"") + algorithm(dim, all_to_all) + "\"";
    return text + "]";
  };
  SuiteCase out;
  out.inputs.traces = plan->traces;
  out.inputs.network = test::network_yaml(kind_list, size_list, bw_list, lat_list);
  // A quarter of the cases run the nccl model for every collective, as the hardware presets do.
  const bool nccl = pick(rng, 0, 3) == 0;
  auto lists = [&](bool all_to_all) {
    if (!nccl) return list(all_to_all);
    std::string text = "[";
    for (size_t dim = 0; dim < sizes.size(); ++dim) text += dim ? ", \"nccl\"" : "\"nccl\"";
    return text + "]";
  };
  out.inputs.system = fmt::format(
      "{{\"scheduling-policy\": \"{}\", \"endpoint-delay\": {}, \"active-chunks-per-dimension\": "
      "{},\n \"preferred-dataset-splits\": {}, \"collective-optimization\": \"{}\", "
      "\"local-mem-bw\": {},\n \"all-reduce-implementation\": {}, "
      "\"reduce-scatter-implementation\": {},\n \"all-gather-implementation\": {}, "
      "\"all-to-all-implementation\": {}}}\n",
      pick(rng, 0, 1) ? "LIFO" : "FIFO", pick(rng, 0, 20), pick(rng, 1, 3), pick(rng, 1, 4),
      pick(rng, 0, 1) ? "baseline" : "localBWAware", 100 * pick(rng, 1, 20), lists(false),
      lists(false), lists(false), lists(true));
  out.inputs.settings.backend = congestion_aware ? "congestion-aware" : "analytical";
  out.inputs.settings.backend_options.rounding =
      pick(rng, 0, 1) ? net::TimeRounding::kAstraSim : net::TimeRounding::kExact;
  out.inputs.settings.threads = 1;
  out.inputs.charge_highest = pick(rng, 0, 3) == 0;  // --message-dimension highest
  out.description = fmt::format("{}{}\n{} backend{}\n{}{}", plan->description, nccl ? ", nccl" : "",
                                out.inputs.settings.backend,
                                out.inputs.charge_highest ? ", highest dimension" : "",
                                out.inputs.network, out.inputs.system);
  out.inputs.groups = plan->groups;
  return out;
}

uint32_t env_count(const char* name, uint32_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  return static_cast<uint32_t>(std::strtoul(text, nullptr, 10));
}

TEST(RankClasses, randomized_generated_plans_give_what_full_simulation_gives) {
  const uint32_t cases = env_count("ORRERY_CLASS_CASES", 40);
  std::mt19937_64 rng(env_count("ORRERY_CLASS_SEED", 19));
  uint32_t ran = 0;
  std::map<std::string, uint32_t> modes;
  uint32_t totals_checked = 0;
  while (ran < cases) {
    std::optional<SuiteCase> c = random_case(rng);
    if (!c) continue;
    ++ran;
    std::optional<Pair> runs = run_both(c->inputs, c->description);
    ASSERT_TRUE(runs) << c->description;
    ++modes[runs->fast.mode];
    if (std::getenv("ORRERY_CLASS_VERBOSE") != nullptr) {
      std::cout << runs->fast.mode << " (" << runs->fast.simulated_ranks
                << " simulated): " << c->description.substr(0, c->description.find('\n')) << "\n  "
                << runs->fast.fast_path_note << "\n";
    }
    expect_same_results(runs->fast, runs->full, c->description);
    if (HasFatalFailure()) return;
    if (runs->fast.mode == "classes") {
      // Without queue peaks (as sweeps run) a class run keeps totals per route instead of every
      // message: every figure is the same, and every link's peak is 0.
      test::RunInputs totals = c->inputs;
      totals.settings.fast_path = true;
      totals.settings.link_queue_peaks = false;
      Expected<RunResult> summed = test::simulate(totals);
      ASSERT_TRUE(summed) << summed.error().message();
      EXPECT_EQ(summed->mode, "classes");
      RunResult full = runs->full;
      for (net::LinkStats& link : full.links) link.peak_queue = 0;
      expect_same_results(*summed, full, "without queue peaks: " + c->description);
      if (HasFatalFailure()) return;
      ++totals_checked;
    }
  }
  EXPECT_EQ(totals_checked, modes["classes"]);
  for (const auto& [mode, count] : modes) std::cout << "  " << mode << ": " << count << " cases\n";
  // Most generated plans have alike ranks: class mode must have run for some.
  EXPECT_GT(modes["classes"], cases / 10);
}

}  // namespace rank_classes_test
}  // namespace orrery::sim
