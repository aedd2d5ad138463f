// Perturbations (sim/perturbation.h): slow ranks lengthen a data-parallel step by their extra
// compute on the critical path exactly; class mode splits by speed and agrees with the full
// simulation; noise is seeded, mean 1 and turns the fast paths off; a degraded dimension is the
// network with that bandwidth; failures leave the goodput of Daly's closed form (sim/goodput.h).
#include <gtest/gtest.h>

#include <cmath>

#include "sim/goodput.h"
#include "sim/perturbation.h"
#include "sim/sim_test_support.h"

namespace orrery::sim {
namespace perturbation_test {

using test::add_attr;
using test::Node;
using test::run_ok;

constexpr uint64_t kLayers = 4;
constexpr uint64_t kComputeUs = 500;
constexpr int64_t kBytes = 1 << 20;

// A data-parallel backward pass: layer i computes for kComputeUs after layer i-1, then its
// gradients are all-reduced over `group` while the next layer computes.
std::vector<Node> dp_step(const std::string& group = "") {
  std::vector<Node> nodes;
  for (uint64_t layer = 1; layer <= kLayers; ++layer) {
    Node compute = layer == 1 ? test::comp_node(layer) : test::comp_node(layer, {layer - 1});
    compute.set_duration_micros(kComputeUs);
    nodes.push_back(compute);
    Node reduce = test::coll_node(100 + layer, ChakraProtoMsg::ALL_REDUCE, kBytes, {layer});
    if (!group.empty()) add_attr(reduce, "pg_name").set_string_val(group);
    nodes.push_back(reduce);
  }
  return nodes;
}

test::RunInputs dp_inputs(uint32_t ranks) {
  test::RunInputs in;
  in.traces = test::same_trace(dp_step(), ranks);
  in.system = test::system_json("ring", 1);
  in.network = test::network_yaml("Ring", std::to_string(ranks), "50", "500");
  return in;
}

TEST(Perturbation, a_straggler_lengthens_a_data_parallel_step_by_its_extra_compute) {
  const sim::RunResult healthy = run_ok(dp_inputs(8));
  EXPECT_EQ(healthy.mode, "symmetric");
  for (const double s : {1.5, 2.0, 3.25}) {
    test::RunInputs in = dp_inputs(8);
    in.perturbation = fmt::format("compute:\n  - ranks: \"3\"\n    factor: {}\n", s);
    const sim::RunResult slow = run_ok(in);
    // Every layer's compute of rank 3 is on the critical path; the collectives after it start
    // when rank 3 joins and take what they took.
    const auto extra = static_cast<int64_t>(kLayers * kComputeUs * 1'000'000 * (s - 1));
    EXPECT_EQ(slow.end.ps() - healthy.end.ps(), extra) << "s = " << s;
    // The ring's last messages reach the others first: rank 3 ends the step.
    for (const workload::RankResult& rank : slow.rank_results)
      EXPECT_LE(rank.finish.ps(), slow.rank_results[3].finish.ps()) << "rank " << rank.rank;
    EXPECT_EQ(slow.rank_results[3].finish, slow.end);
    EXPECT_EQ(slow.rank_results[3].gpu_compute.ps(),
              static_cast<int64_t>(kLayers * kComputeUs * 1'000'000 * s));
    EXPECT_EQ(slow.rank_results[2].gpu_compute, healthy.rank_results[2].gpu_compute);
    // The symmetric path and the classes see the slow rank and step aside, saying why.
    EXPECT_EQ(slow.mode, "full");
    EXPECT_NE(slow.fast_path_note.find("perturb.yml: rank 3 computes at a factor of"),
              std::string::npos)
        << slow.fast_path_note;
  }
}

TEST(Perturbation, one_factor_on_every_rank_keeps_the_symmetric_path) {
  test::RunInputs in = dp_inputs(8);
  const sim::RunResult healthy = run_ok(in);
  in.perturbation = "compute:\n  - ranks: all\n    factor: 2\n";
  const sim::RunResult slow = run_ok(in);
  EXPECT_EQ(slow.mode, "symmetric");
  EXPECT_EQ(slow.end.ps() - healthy.end.ps(), int64_t{kLayers * kComputeUs * 1'000'000});
}

// Two groups of four on a [4, 2] network, each all-reducing inside itself: alike traces, one
// class without a perturbation.
test::RunInputs two_groups() {
  test::RunInputs in;
  std::vector<std::vector<Node>> ranks;
  for (uint32_t rank = 0; rank < 8; ++rank) ranks.push_back(dp_step(rank < 4 ? "1" : "2"));
  in.traces = test::traces_of(ranks);
  in.system = test::system_json("ring", 2);
  in.network = test::network_yaml("Ring, Ring", "4, 2", "50, 25", "500, 500");
  in.comm_groups = R"({"1": [0, 1, 2, 3], "2": [4, 5, 6, 7]})";
  return in;
}

TEST(Perturbation, class_mode_splits_ranks_by_speed_and_agrees_with_every_rank_simulated) {
  // The second group's ranks are twice as slow.
  test::RunInputs in = two_groups();
  in.perturbation = "compute:\n  - ranks: 4-7\n    factor: 2\n";
  const sim::RunResult classes = run_ok(in);
  EXPECT_EQ(classes.mode, "classes") << classes.fast_path_note;
  EXPECT_EQ(classes.simulated_ranks, 2u);
  in.settings.fast_path = false;
  const sim::RunResult full = run_ok(in);
  ASSERT_EQ(full.rank_results.size(), 8u);
  for (uint32_t rank = 0; rank < 8; ++rank) {
    EXPECT_EQ(classes.rank_results[rank].finish, full.rank_results[rank].finish) << rank;
    EXPECT_EQ(classes.rank_results[rank].gpu_compute, full.rank_results[rank].gpu_compute) << rank;
  }
  EXPECT_EQ(full.rank_results[4].gpu_compute.ps(), 2 * full.rank_results[0].gpu_compute.ps());
  EXPECT_GT(full.rank_results[4].finish, full.rank_results[0].finish);
}

TEST(Perturbation, a_slow_rank_in_a_group_of_fast_ones_falls_back_naming_the_factors) {
  // As above, but one slow rank in the first group: its group mixes classes.
  test::RunInputs in = two_groups();
  in.perturbation = "compute:\n  - ranks: \"1\"\n    factor: 1.5\n";
  const sim::RunResult result = run_ok(in);
  EXPECT_EQ(result.mode, "full");
  EXPECT_NE(result.fast_path_note.find("the perturbation gives them compute factors"),
            std::string::npos)
      << result.fast_path_note;
}

TEST(Perturbation, noise_is_seeded_has_mean_one_and_turns_the_fast_paths_off) {
  // 8 ranks x 400 independent compute nodes of 100 us, no communication.
  std::vector<Node> nodes;
  for (uint64_t id = 1; id <= 400; ++id) {
    Node node = test::comp_node(id);
    node.set_duration_micros(100);
    nodes.push_back(node);
  }
  test::RunInputs in;
  in.traces = test::same_trace(nodes, 8);
  in.system = test::system_json("ring", 1);
  in.network = test::network_yaml("Ring", "8", "50", "500");
  in.perturbation = "noise:\n  sigma: 0.1\n  seed: 7\n";
  const sim::RunResult first = run_ok(in);
  const sim::RunResult again = run_ok(in);
  EXPECT_EQ(first.mode, "full");
  EXPECT_NE(first.fast_path_note.find("operator noise differs from rank to rank"),
            std::string::npos);
  double total = 0;
  for (uint32_t rank = 0; rank < 8; ++rank) {
    EXPECT_EQ(first.rank_results[rank].finish, again.rank_results[rank].finish);
    total += first.rank_results[rank].gpu_compute.seconds();
  }
  EXPECT_NE(first.rank_results[0].finish, first.rank_results[1].finish);
  // 3,200 draws of a mean-1 lognormal with sigma 0.1: the mean is within 4 standard errors
  // (0.1 / sqrt(3200) = 0.0018) of 1.
  const double mean = total / (8 * 400 * 100e-6);
  EXPECT_NEAR(mean, 1.0, 4 * 0.1 / std::sqrt(3200.0));
  in.perturbation = "noise:\n  sigma: 0.1\n  seed: 8\n";
  EXPECT_NE(run_ok(in).rank_results[0].finish, first.rank_results[0].finish);
}

TEST(Perturbation, drawn_factors_follow_their_distributions) {
  Expected<Perturbation> tail = parse_perturbation(
      "compute:\n  - ranks: all\n    distribution: tail\n    fraction: 0.1\n    factor: 1.5\n"
      "    seed: 3\n",
      "p.yml");
  ASSERT_TRUE(tail) << tail.error().message();
  Expected<std::vector<double>> factors = compute_factors(*tail, 10000);
  ASSERT_TRUE(factors);
  size_t slow = 0;
  for (double factor : *factors) {
    EXPECT_TRUE(factor == 1.0 || factor == 1.5) << factor;
    slow += factor == 1.5 ? 1 : 0;
  }
  // Binomial(10000, 0.1): mean 1000, standard deviation 30.
  EXPECT_NEAR(static_cast<double>(slow), 1000.0, 4 * 30.0);
  EXPECT_EQ(*compute_factors(*tail, 10000), *factors);  // the same seed, the same ranks

  Expected<Perturbation> lognormal = parse_perturbation(
      "compute:\n  - ranks: 0-9999\n    distribution: lognormal\n    sigma: 0.2\n"
      "  - ranks: \"0\"\n    factor: 10\n",
      "p.yml");
  ASSERT_TRUE(lognormal) << lognormal.error().message();
  Expected<std::vector<double>> drawn = compute_factors(*lognormal, 10000);
  ASSERT_TRUE(drawn);
  double log_sum = 0, log_square = 0;
  for (size_t rank = 1; rank < drawn->size(); ++rank) {
    log_sum += std::log((*drawn)[rank]);
    log_square += std::log((*drawn)[rank]) * std::log((*drawn)[rank]);
  }
  const double n = 9999;
  EXPECT_NEAR(log_sum / n, 0.0, 4 * 0.2 / std::sqrt(n));
  EXPECT_NEAR(std::sqrt(log_square / n - (log_sum / n) * (log_sum / n)), 0.2, 0.01);
  // Entries multiply.
  Expected<std::vector<double>> alone = compute_factors(
      *parse_perturbation(
          "compute:\n  - ranks: 0-9999\n    distribution: lognormal\n    sigma: 0.2\n", "p.yml"),
      10000);
  EXPECT_DOUBLE_EQ((*drawn)[0], 10 * (*alone)[0]);
}

TEST(Perturbation, a_degraded_dimension_is_the_network_with_that_bandwidth) {
  test::RunInputs in = dp_inputs(8);
  in.perturbation = "links:\n  - dimension: 0\n    factor: 0.5\n";
  const sim::RunResult degraded = run_ok(in);
  test::RunInputs half = dp_inputs(8);
  half.network = test::network_yaml("Ring", "8", "25", "500");
  const sim::RunResult expected = run_ok(half);
  EXPECT_EQ(degraded.end, expected.end);
  EXPECT_EQ(degraded.mode, "symmetric");
  EXPECT_GT(degraded.end, run_ok(dp_inputs(8)).end);
}

TEST(Perturbation, a_degraded_cable_of_a_graph_slows_the_messages_crossing_it) {
  // Two NPUs through one switch; a 64 MiB all-reduce at 50 GB/s, then with npu0's cable at 10%.
  test::RunInputs in;
  in.traces = test::same_trace({test::coll_node(1, ChakraProtoMsg::ALL_REDUCE, 64 << 20)}, 2);
  in.system = test::system_json("ring", 1, /*splits=*/1, /*active=*/1, /*endpoint_delay=*/0);
  in.network =
      "name: pair\nnpus: 2\nswitches: [s]\nlogical: [[Switch, 2]]\nlinks:\n"
      "  - [npu0, s, 50, 0]\n  - [npu1, s, 50, 0]\n";
  in.settings.backend = "flow";
  in.settings.backend_options.rounding = net::TimeRounding::kExact;
  const sim::RunResult healthy = run_ok(in);
  in.perturbation = "links:\n  - between: [npu0, s]\n    factor: 0.1\n";
  const sim::RunResult degraded = run_ok(in);
  // A two-rank ring sends half the buffer each way twice (reduce-scatter, all-gather), one
  // message at a time, every one through npu0's cable: 2 x 32 MiB at 5 GB/s instead of 50; the
  // rest (the reduction) is unchanged.
  const double cable_s = 2 * 32.0 * 1048576 / 1073741824.0;
  EXPECT_NEAR(degraded.end.seconds() - healthy.end.seconds(), cable_s / 5 - cable_s / 50, 1e-9);
  EXPECT_GT(healthy.end.seconds(), cable_s / 50);
}

TEST(Perturbation, bad_files_are_refused_with_file_line_and_key) {
  const std::pair<std::string, std::string> cases[] = {
      {"compute:\n  - ranks: \"3\"\n    factr: 2\n",
       "perturb.yml:3: compute entry: unknown key 'factr'"},
      {"compute:\n  - factor: 2\n", "perturb.yml:2: compute entry: key 'ranks' is missing"},
      {"compute:\n  - ranks: \"3\"\n    factor: -1\n",
       "perturb.yml:3: key 'factor': -1 is out of range"},
      {"compute:\n  - ranks: 9-2\n    factor: 2\n",
       "perturb.yml:2: key 'ranks': range '9-2' runs backwards"},
      {"compute:\n  - ranks: \"0\"\n    distribution: pareto\n",
       "perturb.yml:3: key 'distribution': found 'pareto'"},
      {"noise: 0.1\n", "perturb.yml:1: noise: expected a mapping"},
      {"straggle: 1\n", "perturb.yml:1: perturbation: unknown key 'straggle'"},
      {"links:\n  - factor: 0.5\n",
       "perturb.yml:2: links entry: give either 'dimension' or 'between'"},
      {"goodput:\n  restart_s: 10\n", "perturb.yml:2: goodput: key 'mtbf_hours' is missing"},
      {[] {
         std::string many = "compute:\n";
         for (int k = 0; k < 257; ++k) many += "  - ranks: all\n    factor: 1.01\n";
         return many;
       }(),
       "perturb.yml:2: compute: 257 entries; at most 256"},
  };
  for (const auto& [text, message] : cases) {
    Expected<Perturbation> parsed = parse_perturbation(text, "perturb.yml");
    ASSERT_FALSE(parsed) << text;
    EXPECT_NE(parsed.error().message().find(message), std::string::npos)
        << parsed.error().message();
  }
  // Found when the scenario is made: ranks, dimensions and nodes the job does not have.
  const std::pair<std::string, std::string> resolved[] = {
      {"compute:\n  - ranks: 0-8\n    factor: 2\n",
       "perturb.yml:2: compute entry: rank 8 is beyond the job's 8 ranks"},
      {"links:\n  - dimension: 1\n    factor: 2\n",
       "perturb.yml:2: links entry: dimension 1 is beyond the network's 1 dimensions"},
      {"links:\n  - between: [npu0, npu1]\n    factor: 2\n",
       "perturb.yml:2: links entry: 'between' names graph nodes"},
  };
  for (const auto& [text, message] : resolved) {
    test::RunInputs in = dp_inputs(8);
    in.perturbation = text;
    Expected<sim::RunResult> result = test::simulate(in);
    ASSERT_FALSE(result) << text;
    EXPECT_NE(result.error().message().find(message), std::string::npos)
        << result.error().message();
  }
}

TEST(Goodput, failures_over_a_long_horizon_leave_dalys_closed_form) {
  // 1,024 components of 10,000 h MTBF (system MTBF 9.77 h), 120 s checkpoints, 600 s restarts,
  // 12.5 s iterations, 200,000 h: about 20,000 failures.
  GoodputSpec spec;
  spec.mtbf_hours = 10000;
  spec.checkpoint_s = 120;
  spec.restart_s = 600;
  spec.horizon_hours = 200000;
  spec.seed = 11;
  Expected<GoodputResult> result = compute_goodput(spec, 12.5, 1024);
  ASSERT_TRUE(result) << result.error().message();
  const double mtbf = 10000 * 3600.0 / 1024;
  EXPECT_DOUBLE_EQ(result->system_mtbf_s, mtbf);
  EXPECT_DOUBLE_EQ(result->young_interval_s, std::sqrt(2 * 120 * mtbf));
  // The interval is Daly's optimum in whole iterations.
  EXPECT_NEAR(result->interval_s, result->daly_interval_s, 12.5 / 2);
  EXPECT_EQ(result->interval_s, 12.5 * static_cast<double>(result->iterations_per_checkpoint));
  const double tau = result->interval_s;
  const double daly = tau / (mtbf * std::exp(600 / mtbf) * (std::exp((tau + 120) / mtbf) - 1));
  EXPECT_NEAR(result->daly, daly, 1e-12);
  EXPECT_NEAR(result->simulated, daly, 0.02 * daly);
  std::printf("goodput: simulated %.5f, Daly %.5f, Young %.5f, %llu failures, interval %.1f s\n",
              result->simulated, daly, result->young,
              static_cast<unsigned long long>(result->failures), tau);
  EXPECT_NEAR(result->simulated, daly, 0.005);  // in fact much closer
  EXPECT_NEAR(static_cast<double>(result->failures), 200000 * 3600.0 / mtbf, 600);
  // Young's first order is close at this optimum; the interval is better than half or double it.
  EXPECT_NEAR(result->young, daly, 0.01);
  for (const double other : {tau / 2, tau * 2}) {
    GoodputSpec fixed = spec;
    fixed.interval_s = other;
    EXPECT_LT(compute_goodput(fixed, 12.5, 1024)->daly, daly);
  }
  // The same seed gives the same draws; another seed other draws near the same figure.
  EXPECT_EQ(compute_goodput(spec, 12.5, 1024)->failures, result->failures);
  spec.seed = 12;
  const GoodputResult other = *compute_goodput(spec, 12.5, 1024);
  EXPECT_NE(other.failures, result->failures);
  EXPECT_NEAR(other.simulated, daly, 0.005);
}

TEST(Goodput, a_run_reports_the_goodput_of_its_iteration) {
  test::RunInputs in = dp_inputs(8);
  in.perturbation =
      "goodput:\n  mtbf_hours: 1000\n  checkpoint_s: 1\n  restart_s: 10\n"
      "  interval_s: 60\n  horizon_hours: 1000\n";
  const sim::RunResult result = run_ok(in);
  ASSERT_TRUE(result.goodput.has_value());
  EXPECT_EQ(result.goodput->components, 8u);
  EXPECT_DOUBLE_EQ(result.goodput->iteration_s, result.end.seconds());
  EXPECT_EQ(result.goodput->iterations_per_checkpoint,
            static_cast<uint64_t>(std::round(60 / result.end.seconds())));
  EXPECT_EQ(result.mode, "symmetric");  // failures do not change what one iteration does
}

TEST(Perturbation, a_mixed_a100_and_h100_data_parallel_step_runs_at_the_a100s_pace) {
  // Roofline systems: the run's is an H100 (989 TFLOP/s); ranks 0-3 are A100s (312) by a hardware
  // entry; both at 2,039 GB/s, which also times the collectives' reductions. Each layer is a
  // 2^40-FLOP GEMM on 2^30 bytes: compute-bound on both, so it takes 2^40 / peak (whole ns).
  test::TempDir dir;
  const std::string h100 = test::system_json("ring", 1, 4, 1, 10, 2039, "localBWAware",
                                             ", \"roofline-enabled\": 1, \"peak-perf\": 989");
  const std::string a100 = test::system_json("ring", 1, 4, 1, 10, 2039, "localBWAware",
                                             ", \"roofline-enabled\": 1, \"peak-perf\": 312");
  std::ofstream(dir.file("a100.json")) << a100;
  std::vector<Node> nodes;
  for (uint64_t layer = 1; layer <= kLayers; ++layer) {
    Node compute = layer == 1 ? test::comp_node(layer) : test::comp_node(layer, {layer - 1});
    compute.set_duration_micros(0);
    add_attr(compute, "num_ops").set_uint64_val(uint64_t{1} << 40);
    add_attr(compute, "tensor_size").set_uint64_val(uint64_t{1} << 30);
    nodes.push_back(compute);
    nodes.push_back(test::coll_node(100 + layer, ChakraProtoMsg::ALL_REDUCE, kBytes, {layer}));
  }
  auto run = [&](const std::string& system, const std::string& perturbation) {
    test::RunInputs in;
    in.traces = test::same_trace(nodes, 8);
    in.system = system;
    in.network = test::network_yaml("Ring", "8", "50", "500");
    in.settings.backend_options.rounding = net::TimeRounding::kExact;
    in.perturbation = perturbation;
    Expected<sim::Scenario> scenario = [&]() -> Expected<sim::Scenario> {
      if (perturbation.empty()) return test::make_scenario(in);
      // A file, so that the system file is found beside it.
      std::ofstream(dir.file("perturb.yml")) << perturbation;
      in.perturbation.clear();
      Expected<sim::Scenario> plain = test::make_scenario(in);
      if (!plain) return plain.error();
      sim::Scenario::Inputs inputs = plain->inputs();
      Expected<Perturbation> loaded = load_perturbation(dir.file("perturb.yml"));
      if (!loaded) return loaded.error();
      inputs.perturbation = std::make_shared<const Perturbation>(std::move(*loaded));
      return sim::Scenario::create(std::move(inputs));
    }();
    EXPECT_TRUE(scenario) << scenario.error().message();
    Expected<sim::RunResult> result = sim::simulate(*scenario);
    EXPECT_TRUE(result) << result.error().message();
    return std::move(*result);
  };
  const sim::RunResult all_h100 = run(h100, "");
  const sim::RunResult all_a100 = run(a100, "");
  const sim::RunResult mixed = run(h100, "hardware:\n  - ranks: 0-3\n    system: a100.json\n");
  const auto gemm_ps = [](int64_t tflops) { return (int64_t{1} << 40) / (tflops * 1000) * 1000; };
  EXPECT_EQ(mixed.rank_results[0].gpu_compute.ps(), 4 * gemm_ps(312));
  EXPECT_EQ(mixed.rank_results[7].gpu_compute.ps(), 4 * gemm_ps(989));
  EXPECT_EQ(mixed.rank_results[7].gpu_compute, all_h100.rank_results[7].gpu_compute);
  // The collectives wait for the A100s: the step is the all-A100 step, to the picosecond.
  EXPECT_EQ(mixed.end, all_a100.end);
  EXPECT_GT(mixed.end, all_h100.end);
  EXPECT_EQ(mixed.mode, "full");
  EXPECT_NE(mixed.fast_path_note.find("rank 4 computes as the run's system, rank 0 as a100.json"),
            std::string::npos)
      << mixed.fast_path_note;
  // Every rank on the A100 entry keeps the symmetric path and is the A100 run.
  const sim::RunResult entry = run(h100, "hardware:\n  - ranks: all\n    system: a100.json\n");
  EXPECT_EQ(entry.mode, "symmetric");
  EXPECT_EQ(entry.end, all_a100.end);
}

// 8 NPUs, 2 per leaf on 4 leaves, two spines; every cable 50 GB/s, 100 ns; ECMP over the spines.
std::string two_spine_clos() {
  std::string text =
      "name: clos8\nnpus: 8\nswitches: [leaf0, leaf1, leaf2, leaf3, spine0, spine1]\n"
      "logical: [[Switch, 8]]\nlinks:\n";
  for (int npu = 0; npu < 8; ++npu)
    text += fmt::format("  - [npu{}, leaf{}, 50, 100]\n", npu, npu / 2);
  for (int leaf = 0; leaf < 4; ++leaf) {
    for (int spine = 0; spine < 2; ++spine)
      text += fmt::format("  - [leaf{}, spine{}, 50, 100]\n", leaf, spine);
  }
  return text;
}

test::RunInputs clos_inputs() {
  test::RunInputs in;
  in.traces = test::same_trace(dp_step(), 8);
  in.system = test::system_json("direct", 1, /*splits=*/4, /*active=*/1, /*endpoint_delay=*/0);
  in.network = two_spine_clos();
  in.settings.backend = "flow";
  in.settings.backend_options.rounding = net::TimeRounding::kExact;
  return in;
}

// Bytes the run put on the links between `a` and `b` (both directions).
uint64_t bytes_between(const sim::RunResult& result, const test::RunInputs& in,
                       const std::string& a, const std::string& b) {
  Expected<net::NetworkDescription> network = net::parse_network_yaml(in.network, "net.yml");
  uint64_t bytes = 0;
  for (const net::LinkStats& link : result.links) {
    const std::string src = network->graph->node_name(link.src);
    const std::string dst = network->graph->node_name(link.dst);
    if ((src == a && dst == b) || (src == b && dst == a)) bytes += link.bytes;
  }
  return bytes;
}

TEST(Failures, a_failed_spine_reroutes_over_the_other_and_slows_the_step) {
  test::RunInputs in = clos_inputs();
  const sim::RunResult healthy = run_ok(in);
  ASSERT_GT(bytes_between(healthy, in, "leaf0", "spine0"), 0u);
  // From the start: nothing crosses spine0, everything crosses spine1, and the step is slower
  // (all-to-all-like direct all-reduce traffic on half the spine capacity).
  in.perturbation = "failures:\n  - at_ns: 0\n    switch: spine0\n";
  const sim::RunResult failed = run_ok(in);
  for (const char* leaf : {"leaf0", "leaf1", "leaf2", "leaf3"}) {
    EXPECT_EQ(bytes_between(failed, in, leaf, "spine0"), 0u) << leaf;
    EXPECT_GT(bytes_between(failed, in, leaf, "spine1"), 0u) << leaf;
  }
  EXPECT_GT(failed.end, healthy.end);
  // Halfway: spine0 carries some of the traffic, less than when healthy; the step ends between.
  in.perturbation = fmt::format("failures:\n  - at_ns: {}\n    between: [leaf0, spine0]\n",
                                healthy.end.ns_truncated() / 2);
  const sim::RunResult midway = run_ok(in);
  const uint64_t before = bytes_between(midway, in, "leaf0", "spine0");
  EXPECT_GT(before, 0u);
  EXPECT_LT(before, bytes_between(healthy, in, "leaf0", "spine0"));
  EXPECT_GE(midway.end, healthy.end);
  EXPECT_LE(midway.end, failed.end);
  std::printf("failures: healthy %.3f us, leaf0-spine0 cut midway %.3f us, spine0 down %.3f us\n",
              healthy.end.seconds() * 1e6, midway.end.seconds() * 1e6, failed.end.seconds() * 1e6);
}

TEST(Failures, a_failure_that_cuts_an_npu_off_or_names_nothing_is_refused) {
  test::RunInputs in = clos_inputs();
  const std::pair<std::string, std::string> cases[] = {
      {"failures:\n  - at_ns: 1000\n    between: [npu3, leaf1]\n",
       "after the failure of the cable npu3-leaf1 at 1000 ns, the network is broken"},
      {"failures:\n  - at_ns: 0\n    switch: spine7\n",
       "perturb.yml:2: failures entry: the graph has no node 'spine7'"},
      {"failures:\n  - at_ns: 0\n    switch: npu1\n",
       "perturb.yml:2: failures entry: npu1 is an NPU, not a switch"},
      {"failures:\n  - switch: spine0\n", "perturb.yml:2: failures entry: key 'at_ns' is missing"},
      {"failures:\n  - at_ns: 0\n    rank: 1\n    switch: spine0\n",
       "perturb.yml:2: failures entry: give one of 'between', 'switch', 'dimension' or 'rank'"},
  };
  for (const auto& [text, message] : cases) {
    in.perturbation = text;
    Expected<sim::RunResult> result = test::simulate(in);
    ASSERT_FALSE(result) << text;
    EXPECT_NE(result.error().message().find(message), std::string::npos)
        << result.error().message();
  }
  // ASTRA-sim's dimensions have no cables or routes: their failures are a dimension's.
  test::RunInputs astra = dp_inputs(8);
  astra.perturbation = "failures:\n  - at_ns: 0\n    between: [npu0, npu1]\n";
  Expected<sim::RunResult> result = test::simulate(astra);
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message().find(
                "on ASTRA-sim's dimensions give 'dimension', 'ranks' and 'surviving'"),
            std::string::npos)
      << result.error().message();
}

// The busy time of every link of `result` with NPU `npu` at an end, and of the others.
std::pair<SimTime, SimTime> busy_at(const sim::RunResult& result, net::NodeId npu) {
  SimTime at, others;
  for (const net::LinkStats& link : result.links)
    (link.src == npu || link.dst == npu ? at : others) += link.busy;
  return {at, others};
}

TEST(Failures, a_dimension_of_astra_sims_network_keeps_what_survives_of_its_bandwidth) {
  for (const char* backend : {"analytical", "congestion-aware"}) {
    SCOPED_TRACE(backend);
    test::RunInputs in = dp_inputs(8);
    in.settings.backend = backend;
    const sim::RunResult healthy = run_ok(in);
    test::RunInputs half = in;
    half.network = test::network_yaml("Ring", "8", "25", "500");
    const sim::RunResult slow = run_ok(half);
    ASSERT_GT(slow.end, healthy.end);

    // At every NPU from the start: the network at half the bandwidth, exactly.
    in.perturbation =
        "failures:\n  - at_ns: 0\n    dimension: 0\n    ranks: all\n    surviving: 0.5\n";
    const sim::RunResult everywhere = run_ok(in);
    EXPECT_EQ(everywhere.end, slow.end);
    EXPECT_EQ(everywhere.mode, "full");
    EXPECT_NE(everywhere.fast_path_note.find("perturb.yml:2: dimension 0 at ranks all fails "
                                             "during the run"),
              std::string::npos)
        << everywhere.fast_path_note;

    // At NPU 3 only: its four ring links serialize twice as long (a picosecond of rounding per
    // message at most), the others as when healthy; the step ends in between.
    in.perturbation =
        "failures:\n  - at_ns: 0\n    dimension: 0\n    ranks: \"3\"\n    surviving: 0.5\n";
    const sim::RunResult one = run_ok(in);
    const auto [healthy_at, healthy_others] = busy_at(healthy, 3);
    const auto [one_at, one_others] = busy_at(one, 3);
    uint64_t messages_at = 0;
    for (const net::LinkStats& link : one.links)
      messages_at += link.src == 3 || link.dst == 3 ? link.messages : 0;
    ASSERT_GT(messages_at, 0u);
    EXPECT_NEAR(static_cast<double>(one_at.ps()), 2.0 * static_cast<double>(healthy_at.ps()),
                static_cast<double>(messages_at));
    EXPECT_EQ(one_others, healthy_others);
    EXPECT_GT(one.end, healthy.end);
    EXPECT_LT(one.end, everywhere.end);

    // Halfway through: what started before went at full speed (less busy time than failed
    // from the start), and the last all-reduce, which ends the step after the last layer's 2 ms
    // of compute, starts after the failure: the step ends as when failed from the start.
    in.perturbation = fmt::format(
        "failures:\n  - at_ns: {}\n    dimension: 0\n    ranks: all\n    surviving: 0.5\n",
        healthy.end.ns_truncated() / 2);
    const sim::RunResult midway = run_ok(in);
    EXPECT_EQ(midway.end, everywhere.end);
    auto total_busy = [](const sim::RunResult& result) {
      SimTime busy;
      for (const net::LinkStats& link : result.links) busy += link.busy;
      return busy;
    };
    EXPECT_GT(total_busy(midway), total_busy(healthy));
    EXPECT_LT(total_busy(midway), total_busy(everywhere));

    // Nothing left at NPU 3 from 1 ms on: the messages that need its links never arrive, and
    // the run says which ranks wait and which messages were cut off.
    in.perturbation = "failures:\n  - at_ns: 1000000\n    dimension: 0\n    ranks: \"3\"\n";
    Expected<sim::RunResult> cut = test::simulate(in);
    ASSERT_FALSE(cut);
    EXPECT_EQ(cut.error().kind(), ErrorKind::kDeadlock);
    const std::string& message = cut.error().message();
    EXPECT_NE(message.find("the run cannot finish"), std::string::npos) << message;
    EXPECT_NE(message.find("perturb.yml:2: dimension 0 at ranks 3 failed at 1,000,000 ns with "
                           "nothing surviving"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("undeliverable:"), std::string::npos) << message;
    EXPECT_NE(message.find("-> rank 3, "), std::string::npos) << message;
  }
}

TEST(Failures, a_dimension_failure_that_names_nothing_or_runs_where_it_cannot_is_refused) {
  const std::pair<std::string, std::string> cases[] = {
      {"failures:\n  - at_ns: 0\n    dimension: 1\n    ranks: all\n",
       "perturb.yml:2: failures entry: dimension 1 is beyond the network's 1 dimensions"},
      {"failures:\n  - at_ns: 0\n    dimension: 0\n    ranks: 4-8\n",
       "perturb.yml:2: failures entry: rank 8 is beyond the job's 8 ranks"},
      {"failures:\n  - at_ns: 0\n    dimension: 0\n",
       "perturb.yml:2: failures entry: a dimension's failure needs 'ranks'"},
      {"failures:\n  - at_ns: 0\n    rank: 2\n    surviving: 0.5\n",
       "perturb.yml:2: failures entry: 'ranks' and 'surviving' go with 'dimension'"},
      {"failures:\n  - at_ns: 0\n    dimension: 0\n    ranks: all\n    surviving: 1\n",
       "perturb.yml:5: key 'surviving': 1 is no failure"},
      {"failures:\n  - at_ns: 0\n    dimension: 0\n    ranks: all\n    surviving: 1.5\n",
       "perturb.yml:5: key 'surviving': 1.5 is out of range"},
  };
  for (const auto& [text, message] : cases) {
    test::RunInputs in = dp_inputs(8);
    in.perturbation = text;
    Expected<sim::RunResult> result = test::simulate(in);
    ASSERT_FALSE(result) << text;
    EXPECT_NE(result.error().message().find(message), std::string::npos)
        << result.error().message();
  }
  test::RunInputs graph = clos_inputs();
  graph.perturbation = "failures:\n  - at_ns: 0\n    dimension: 0\n    ranks: all\n";
  Expected<sim::RunResult> result = test::simulate(graph);
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message().find("perturb.yml:2: failures entry: 'dimension' fails on "
                                          "ASTRA-sim's networks"),
            std::string::npos)
      << result.error().message();
  test::RunInputs flow = dp_inputs(8);
  flow.settings.backend = "flow";
  flow.perturbation = "failures:\n  - at_ns: 0\n    dimension: 0\n    ranks: all\n";
  result = test::simulate(flow);
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message().find("a dimension's failure needs an ASTRA-sim network and "
                                          "the analytical or congestion-aware backend (not flow)"),
            std::string::npos)
      << result.error().message();
}

TEST(Failures, a_rank_that_fails_stops_the_job_at_its_time) {
  test::RunInputs in = dp_inputs(8);
  const sim::RunResult healthy = run_ok(in);
  // Rank 5 fails during the third layer: every rank stops there, none finished.
  in.perturbation =
      "failures:\n  - at_ns: 1200000\n    rank: 5\n"
      "goodput:\n  mtbf_hours: 1000\n";
  const sim::RunResult stopped = run_ok(in);
  EXPECT_EQ(stopped.end, SimTime::from_us(1200));
  EXPECT_LT(stopped.end, healthy.end);
  EXPECT_NE(stopped.stopped.find("rank 5 failed at 1,200,000 ns: the job stopped with 0 of 8 ranks "
                                 "finished"),
            std::string::npos)
      << stopped.stopped;
  EXPECT_FALSE(stopped.goodput.has_value());  // no iteration to measure
  for (const workload::RankResult& rank : stopped.rank_results) {
    EXPECT_FALSE(rank.finished);
    EXPECT_GT(rank.completed, 0u);
  }
  // A failure after the end changes nothing.
  in.perturbation =
      fmt::format("failures:\n  - at_ns: {}\n    rank: 5\n", healthy.end.ns_truncated() + 1);
  const sim::RunResult late = run_ok(in);
  EXPECT_TRUE(late.stopped.empty());
  EXPECT_EQ(late.end, healthy.end);
}

}  // namespace perturbation_test
}  // namespace orrery::sim
