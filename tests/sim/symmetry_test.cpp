// The symmetric fast path (sim/symmetry.h) against full simulation: on randomized symmetric
// workloads, networks and system settings, simulating one representative rank must give exactly
// what simulating every rank gives: every rank's times, every collective, every link.
#include <gtest/gtest.h>

#include <random>

#include "sim/sim_test_support.h"

namespace orrery::sim {
namespace symmetry_test {

struct Case {
  std::string network;
  std::string system;
  std::vector<ChakraProtoMsg::Node> trace;
  uint32_t ranks = 1;
  net::TimeRounding rounding = net::TimeRounding::kAstraSim;
  std::string backend = "analytical";
  std::string description;
};

bool power_of_two(uint32_t value) { return (value & (value - 1)) == 0; }

// A random symmetric run. With `congestion_aware`, only what the congestion-aware fast path
// accepts: Ring and FullyConnected dimensions, every message one hop (ring everywhere, direct on
// FullyConnected).
Case random_case(std::mt19937_64& rng, bool congestion_aware = false) {
  auto pick = [&rng](uint64_t low, uint64_t high) {
    return std::uniform_int_distribution<uint64_t>(low, high)(rng);
  };
  Case out;
  const uint32_t dims = static_cast<uint32_t>(pick(1, 3));
  std::vector<std::string> kinds;
  std::vector<uint32_t> sizes;
  std::string kind_list, size_list, bw_list, lat_list;
  for (uint32_t dim = 0; dim < dims; ++dim) {
    const char* kind = std::array<const char*, 3>{"Ring", "FullyConnected",
                                                  "Switch"}[pick(0, congestion_aware ? 1 : 2)];
    const auto size = static_cast<uint32_t>(pick(2, dims == 1 ? 8 : 4));
    kinds.emplace_back(kind);
    sizes.push_back(size);
    out.ranks *= size;
    const char* sep = dim ? ", " : "";
    kind_list += sep + std::string(kind);
    size_list += fmt::format("{}{}", sep, size);
    bw_list += fmt::format("{}{}", sep, 25 * pick(1, 16));
    lat_list += fmt::format("{}{}", sep, 100 * pick(1, 20) + (pick(0, 1) ? 50 : 0));
  }
  out.network = test::network_yaml(kind_list, size_list, bw_list, lat_list);
  // Per collective and dimension, an algorithm that sends alike from every member.
  auto algorithm = [&](uint32_t dim, bool all_to_all) -> std::string {
    std::vector<std::string> choices{"ring", "direct", fmt::format("direct{}", pick(1, 3))};
    if (congestion_aware) {
      choices.resize(kinds[dim] == "FullyConnected" ? 2 : 1);
      return choices[pick(0, choices.size() - 1)];
    }
    if (power_of_two(sizes[dim])) choices.push_back("halvingDoubling");
    if (kinds[dim] == "Switch" && !all_to_all) choices.push_back("inSwitch");
    return choices[pick(0, choices.size() - 1)];
  };
  auto list = [&](bool all_to_all) {
    std::string text = "[";
    for (uint32_t dim = 0; dim < dims; ++dim)
      text += (dim ? ", \"" : "\"") + algorithm(dim, all_to_all) + "\"";
    return text + "]";
  };
  out.system = fmt::format(
      "{{\"scheduling-policy\": \"{}\", \"endpoint-delay\": {}, \"active-chunks-per-dimension\": "
      "{},\n"
      " \"preferred-dataset-splits\": {}, \"collective-optimization\": \"{}\", \"local-mem-bw\": "
      "{},\n"
      " \"all-reduce-implementation\": {}, \"reduce-scatter-implementation\": {},\n"
      " \"all-gather-implementation\": {}, \"all-to-all-implementation\": {}}}\n",
      pick(0, 1) ? "LIFO" : "FIFO", pick(0, 20), pick(1, 3), pick(1, 4),
      pick(0, 1) ? "baseline" : "localBWAware", 100 * pick(1, 20), list(false), list(false),
      list(false), list(true));
  // One trace for every rank: compute and collectives with random dependencies.
  const size_t nodes = pick(1, 8);
  for (uint64_t id = 1; id <= nodes; ++id) {
    std::initializer_list<uint64_t> none = {};
    ChakraProtoMsg::Node node;
    if (pick(0, 2) == 0) {
      node = test::make_node(id, ChakraProtoMsg::COMP_NODE, none);
      node.set_duration_micros(pick(0, 40));
      test::add_attr(node, "is_cpu_op").set_bool_val(pick(0, 3) == 0);
    } else {
      const ChakraProtoMsg::CollectiveCommType types[] = {
          ChakraProtoMsg::ALL_REDUCE, ChakraProtoMsg::REDUCE_SCATTER, ChakraProtoMsg::ALL_GATHER,
          ChakraProtoMsg::ALL_TO_ALL};
      node = test::coll_node(id, types[pick(0, 3)], static_cast<int64_t>(pick(1, 1 << 22)), none);
    }
    if (id > 1 && pick(0, 2) != 0) node.add_data_deps(pick(1, id - 1));
    out.trace.push_back(node);
  }
  out.rounding = pick(0, 1) ? net::TimeRounding::kAstraSim : net::TimeRounding::kExact;
  if (congestion_aware) out.backend = "congestion-aware";
  out.description = out.backend + "\n" + out.network + out.system;
  return out;
}

Expected<RunResult> run_case(const Case& c, bool fast_path) {
  test::RunInputs inputs;
  inputs.traces = test::same_trace(c.trace, c.ranks);
  inputs.system = c.system;
  inputs.network = c.network;
  inputs.settings.backend_options.rounding = c.rounding;
  inputs.settings.backend = c.backend;
  inputs.settings.fast_path = fast_path;
  return test::simulate(inputs);
}

void expect_case_fast_equals_full(const Case& c) {
  auto fast = run_case(c, true);
  auto full = run_case(c, false);
  ASSERT_TRUE(fast) << fast.error().message();
  ASSERT_TRUE(full) << full.error().message();
  ASSERT_TRUE(fast->symmetric) << fast->symmetry_note;
  ASSERT_FALSE(full->symmetric);
  ASSERT_EQ(fast->rank_results.size(), full->rank_results.size());
  for (size_t rank = 0; rank < full->rank_results.size(); ++rank) {
    const auto& a = fast->rank_results[rank];
    const auto& b = full->rank_results[rank];
    ASSERT_EQ(a.finish, b.finish) << "rank " << rank;
    EXPECT_EQ(a.gpu_compute, b.gpu_compute);
    EXPECT_EQ(a.cpu_compute, b.cpu_compute);
    EXPECT_EQ(a.comm_active, b.comm_active);
    EXPECT_EQ(a.comm_exposed, b.comm_exposed);
    EXPECT_EQ(a.busy, b.busy);
  }
  ASSERT_EQ(fast->collectives.size(), full->collectives.size());
  for (size_t idx = 0; idx < full->collectives.size(); ++idx) {
    EXPECT_EQ(fast->collectives[idx].first_issue, full->collectives[idx].first_issue);
    EXPECT_EQ(fast->collectives[idx].last_finish, full->collectives[idx].last_finish);
    EXPECT_EQ(fast->collectives[idx].bytes, full->collectives[idx].bytes);
  }
  EXPECT_EQ(fast->messages, full->messages);
  ASSERT_EQ(fast->links.size(), full->links.size());
  for (size_t idx = 0; idx < full->links.size(); ++idx) {
    const auto& a = fast->links[idx];
    const auto& b = full->links[idx];
    ASSERT_EQ(a.link, b.link);
    EXPECT_EQ(a.src, b.src);
    EXPECT_EQ(a.dst, b.dst);
    EXPECT_EQ(a.bytes, b.bytes) << "link " << a.link;
    EXPECT_EQ(a.busy, b.busy) << "link " << a.link;
    EXPECT_EQ(a.messages, b.messages) << "link " << a.link;
    EXPECT_EQ(a.peak_queue, b.peak_queue) << "link " << a.link;
  }
  EXPECT_LE(fast->events, full->events);
}

void expect_fast_equals_full(bool congestion_aware, int trials) {
  std::mt19937_64 rng(congestion_aware ? 20261130 : 20261129);
  int fast_runs = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const Case c = random_case(rng, congestion_aware);
    SCOPED_TRACE(fmt::format("trial {}\n{}", trial, c.description));
    expect_case_fast_equals_full(c);
    if (::testing::Test::HasFatalFailure()) return;
    ++fast_runs;
  }
  EXPECT_EQ(fast_runs, trials);
}

TEST(Symmetry, the_fast_path_equals_full_simulation_on_randomized_symmetric_runs) {
  expect_fast_equals_full(/*congestion_aware=*/false, 60);
}

// Soak run 2653 (docs/fuzzing.md): on a dimension of 0 ns latency and 400 GB/s, a message of
// fewer than 400 bytes takes 0 ns once truncated as ASTRA-sim does. The full run counts it on its
// link (peak_queue 1); the fast path's intervals of zero length used to count nothing (0).
TEST(Symmetry, messages_of_zero_duration_count_in_the_fast_paths_peak_queue) {
  for (const ChakraProtoMsg::CollectiveCommType type :
       {ChakraProtoMsg::ALL_GATHER, ChakraProtoMsg::ALL_REDUCE, ChakraProtoMsg::ALL_TO_ALL}) {
    Case c;
    c.ranks = 16;
    c.network = test::network_yaml("Ring, Ring", "4, 4", "400, 12.5", "0, 2500.5");
    c.system =
        "{\"scheduling-policy\": \"FIFO\", \"endpoint-delay\": 7, "
        "\"active-chunks-per-dimension\": 2,\n"
        " \"preferred-dataset-splits\": 8, \"all-reduce-implementation\": [\"ring\", \"ring\"],\n"
        " \"all-gather-implementation\": [\"halvingDoubling\", \"direct\"],\n"
        " \"reduce-scatter-implementation\": [\"ring\", \"ring\"],\n"
        " \"all-to-all-implementation\": [\"direct\", \"halvingDoubling\"],\n"
        " \"collective-optimization\": \"localBWAware\", \"local-mem-bw\": 50}\n";
    // Chunks of 128 bytes: 0.32 ns per message on dimension 0, 0 ns once truncated.
    c.trace.push_back(test::coll_node(1, type, 1024, {}));
    SCOPED_TRACE(fmt::format("collective type {}", static_cast<int>(type)));
    expect_case_fast_equals_full(c);
  }
}

TEST(Symmetry, with_congestion_the_fast_path_equals_full_simulation_when_every_message_is_one_hop) {
  expect_fast_equals_full(/*congestion_aware=*/true, 60);
}

TEST(Symmetry, anything_that_breaks_symmetry_falls_back_and_says_why) {
  test::MicroRun run;
  run.system = test::system_json("ring", 1);
  run.network = test::network_yaml("Switch", "8", "50", "500");
  run.backend = "congestion-aware";
  auto contention = test::run_micro(run);
  ASSERT_TRUE(contention);
  EXPECT_FALSE(contention->symmetric);
  EXPECT_EQ(contention->symmetry_note,
            "congestion-aware: the Switch of dimension 0 merges senders on its downlinks");
  run.system = test::system_json("direct", 1);
  run.network = test::network_yaml("Ring", "8", "50", "500");
  auto crossing = test::run_micro(run);
  ASSERT_TRUE(crossing);
  EXPECT_FALSE(crossing->symmetric);
  EXPECT_EQ(crossing->symmetry_note,
            "congestion-aware: direct in dimension 0 crosses links of other ranks");

  // One rank computes longer before the collective: a straggler.
  std::vector<std::vector<ChakraProtoMsg::Node>> ranks;
  for (int rank = 0; rank < 4; ++rank) {
    auto compute = test::make_node(1, ChakraProtoMsg::COMP_NODE);
    compute.set_duration_micros(rank == 2 ? 30 : 10);
    ranks.push_back({compute, test::coll_node(2, ChakraProtoMsg::ALL_REDUCE, 1 << 20, {1})});
  }
  test::RunInputs inputs;
  inputs.traces = test::traces_of(ranks);
  inputs.system = test::system_json("ring", 1);
  inputs.network = test::network_yaml("Ring", "4", "50", "500");
  auto straggler = test::simulate(inputs);
  ASSERT_TRUE(straggler) << straggler.error().message();
  EXPECT_FALSE(straggler->symmetric);
  EXPECT_EQ(straggler->symmetry_note, "rank 2 runs a different trace than rank 0");
  // Everyone waits for the straggler: no rank finishes before its 30 us of compute are over.
  for (const auto& rank : straggler->rank_results) EXPECT_GT(rank.finish, SimTime::from_us(30));
}

TEST(Symmetry, uniform_runs_every_rank_on_one_trace) {
  const std::vector<ChakraProtoMsg::Node> trace{
      test::coll_node(1, ChakraProtoMsg::ALL_REDUCE, 64 << 20)};
  test::RunInputs inputs;
  inputs.traces = test::traces_of({trace});
  inputs.system = test::system_json("ring", 2);
  inputs.network = test::network_yaml("Ring, Switch", "16, 64", "200, 50", "500, 1000");
  auto missing = test::simulate(inputs);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message(),
            "w: the network (net.yml) has 1024 ranks but the workload has 1 rank file(s); rank 1 "
            "is missing");
  std::vector<chakra::TraceGraph> graphs;
  graphs.push_back(test::build_graph(trace));
  inputs.traces = chakra::TraceSet::from_graphs("w", std::move(graphs), {}, /*uniform=*/true);
  auto result = test::simulate(inputs);
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_TRUE(result->symmetric);
  EXPECT_EQ(result->rank_results.size(), 1024u);
  EXPECT_EQ(result->rank_results[1023].finish, result->end);
}

}  // namespace symmetry_test
}  // namespace orrery::sim
