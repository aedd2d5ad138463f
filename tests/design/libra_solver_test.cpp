// The LIBRA optimizer: closed-form optima, a brute-force grid on random convex instances, LIBRA's
// own workloads, budgets and the cost objective.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <numeric>

#include "design/libra_input.h"
#include "design/libra_solver.h"

// Some inputs are the public files in ../shared/data; without that folder these tests skip.
#define SKIP_WITHOUT_SHARED_DATA()                            \
  if (!std::filesystem::is_directory(ORRERY_SHARED_DATA_DIR)) \
  GTEST_SKIP() << "no " ORRERY_SHARED_DATA_DIR

namespace orrery::design {
namespace libra_solver_test {

LinearConstraint constraint(const std::string& text, size_t dims) {
  Expected<LinearConstraint> c = parse_constraint(text, dims);
  EXPECT_TRUE(c) << c.error().message();
  return *c;
}

Problem single_collective(CollectiveKind kind, double bytes, std::vector<int32_t> groups) {
  Problem problem;
  problem.dimensions = {{TopologyKind::kRing, 16, ""},
                        {TopologyKind::kFullyConnected, 8, ""},
                        {TopologyKind::kSwitch, 32, ""}};
  Layer layer;
  layer.name = "only";
  layer.phases[2] = {1000.0, kind, bytes, std::move(groups)};
  problem.layers = {layer};
  problem.constraints = {constraint("sum = 500", 3)};
  return problem;
}

TEST(LibraSolver, single_collective_under_a_sum_gets_bandwidth_proportional_to_its_traffic) {
  // All-reduce of 1 GB over 16 x 8 x 32: m = (1.875e9, 1.09375e8, 4.8447e6); the optimum has
  // equal m_d / B_d, so B_d = 500 m_d / sum(m) and the time is compute + sum(m) / 500.
  const Problem problem = single_collective(CollectiveKind::kAllReduce, 1e9, {16, 8, 32});
  const std::vector<double> m = dimension_traffic(CollectiveKind::kAllReduce, 1e9, {16, 8, 32});
  const double total = std::accumulate(m.begin(), m.end(), 0.0);
  Expected<Solution> solution = solve(problem);
  ASSERT_TRUE(solution) << solution.error().message();
  for (size_t d = 0; d < 3; ++d) {
    EXPECT_NEAR(solution->optimum.bandwidth[d], 500.0 * m[d] / total, 1e-6 * 500) << "dim " << d;
  }
  EXPECT_NEAR(solution->optimum.time_ns, 1000.0 + total / 500.0, 1e-7 * (total / 500.0));
  EXPECT_TRUE(solution->certificate.convex);
  EXPECT_LT(solution->certificate.gap, 1e-7);
  EXPECT_GE(solution->certificate.gap, -1e-9);
  // The equal split (500/3 each) is slower by sum(m) / (3 max m)... exactly max(m) x 3 / sum(m).
  ASSERT_TRUE(solution->has_equal);
  const double equal_comm = *std::max_element(m.begin(), m.end()) / (500.0 / 3);
  EXPECT_NEAR(solution->equal.comm_ns, equal_comm, 1e-9 * equal_comm);
}

TEST(LibraSolver, unused_dimension_gets_no_bandwidth_when_the_total_is_fixed) {
  // All-to-all over dimensions 0 and 2 only: m = (S 15/16, 0, S 31/32).
  const Problem problem = single_collective(CollectiveKind::kAllToAll, 3.2e7, {16, -1, 32});
  Expected<Solution> solution = solve(problem);
  ASSERT_TRUE(solution) << solution.error().message();
  const double m0 = 3.2e7 * 15 / 16, m2 = 3.2e7 * 31 / 32;
  EXPECT_NEAR(solution->optimum.bandwidth[1], 0.0, 1e-6);
  EXPECT_NEAR(solution->optimum.bandwidth[0], 500 * m0 / (m0 + m2), 1e-5);
  EXPECT_LT(solution->certificate.gap, 1e-7);
}

// A deterministic generator (SplitMix64), so the instances are the same everywhere.
struct Random {
  uint64_t state;
  double uniform() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  }
};

// The minimum over a grid of (B0, B1) with B2 = S - B0 - B1, refined three times around the best
// cell by a factor of 20.
double grid_minimum(const TrafficModel& model, const std::vector<LinearConstraint>& constraints,
                    double total) {
  double best = INFINITY, c0 = total / 2, c1 = total / 2, half = total / 2;
  for (int level = 0; level < 4; ++level) {
    const int steps = 400;
    double next0 = c0, next1 = c1;
    for (int i = 0; i <= steps; ++i) {
      for (int j = 0; j <= steps; ++j) {
        const double b0 = c0 - half + 2 * half * i / steps;
        const double b1 = c1 - half + 2 * half * j / steps;
        const std::vector<double> bw{b0, b1, total - b0 - b1};
        if (constraint_violation(constraints, bw) > 1e-9 * total) continue;
        const double t = iteration_time_ns(model, bw);
        if (t < best) {
          best = t;
          next0 = b0;
          next1 = b1;
        }
      }
    }
    c0 = next0;
    c1 = next1;
    half /= 20;
  }
  return best;
}

TEST(LibraSolver, random_convex_instances_match_a_brute_force_grid_to_a_thousandth) {
  Random random{20261129};
  const CollectiveKind kinds[] = {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter,
                                  CollectiveKind::kAllGather, CollectiveKind::kAllToAll};
  for (int instance = 0; instance < 12; ++instance) {
    Problem problem;
    problem.dimensions = {{TopologyKind::kRing, 8, ""},
                          {TopologyKind::kFullyConnected, 4, ""},
                          {TopologyKind::kSwitch, 16, ""}};
    const int layers = 1 + static_cast<int>(random.uniform() * 4);
    for (int l = 0; l < layers; ++l) {
      Layer layer;
      layer.name = fmt::format("l{}", l);
      for (Phase& phase : layer.phases) {
        phase.compute_ns = 1e4 * random.uniform();
        phase.collective = kinds[static_cast<size_t>(random.uniform() * 4)];
        phase.bytes = 1e6 * (0.1 + random.uniform());
        phase.groups = {random.uniform() < 0.7 ? 8 : -1, random.uniform() < 0.7 ? 4 : -1,
                        random.uniform() < 0.7 ? 16 : -1};
      }
      problem.layers.push_back(layer);
    }
    const double total = 100 + 900 * random.uniform();
    problem.constraints = {constraint(fmt::format("sum = {}", total), 3)};
    if (instance % 3 == 1) problem.constraints.push_back(constraint("B0 >= B1", 3));
    if (instance % 3 == 2) {
      problem.constraints.push_back(constraint(fmt::format("B2 <= {}", total * 0.2), 3));
    }
    Expected<TrafficModel> model = build_traffic_model(problem);
    ASSERT_TRUE(model) << model.error().message();
    Expected<Solution> solution = solve(problem);
    ASSERT_TRUE(solution) << "instance " << instance << ": " << solution.error().message();
    const double grid = grid_minimum(*model, problem.constraints, total);
    const double found = solution->optimum.time_ns;
    EXPECT_LE(std::fabs(found - grid), 1e-3 * grid) << "instance " << instance;
    EXPECT_LE(found, grid * (1 + 1e-9)) << "instance " << instance << ": grid beat the solver";
    EXPECT_LT(solution->certificate.gap, 1e-6) << "instance " << instance;
    EXPECT_LE(solution->certificate.lower_bound_ns, grid * (1 + 1e-9)) << "instance " << instance;
  }
}

std::string libra_input(const std::string& relative) {
  return std::string(ORRERY_SHARED_DATA_DIR) + "/astra-sim+libra/inputs/" + relative;
}

Problem libra_problem(const std::string& workload, const std::string& dims) {
  Problem problem;
  Expected<std::vector<Dimension>> network =
      load_libra_network(libra_input("network/" + dims + "_network.yml"));
  EXPECT_TRUE(network) << network.error().message();
  problem.dimensions = *network;
  Expected<std::vector<Layer>> layers =
      load_libra_workload(libra_input("workload/" + workload + ".txt"));
  EXPECT_TRUE(layers) << layers.error().message();
  problem.layers = *layers;
  auto groups =
      load_libra_communicator(libra_input("communicator/" + workload + "_" + dims + ".yml"));
  EXPECT_TRUE(groups) << groups.error().message();
  apply_communicator(*groups, problem.layers);
  auto cost = load_libra_cost_model(libra_input("cost_model/" + dims + "_cost_model.yml"));
  EXPECT_TRUE(cost) << cost.error().message();
  problem.cost_model = *cost;
  problem.constraints = {constraint("sum = 500", problem.dimensions.size())};
  return problem;
}

TEST(LibraSolver, libra_workloads_are_certified_optimal_and_beat_the_equal_split) {
  SKIP_WITHOUT_SHARED_DATA();
  for (const char* workload : {"GPT_3", "MSFT_1T", "ResNet_50"}) {
    for (const char* dims : {"3d", "4d"}) {
      const Problem problem = libra_problem(workload, dims);
      Expected<Solution> solution = solve(problem);
      ASSERT_TRUE(solution) << workload << " " << dims << ": " << solution.error().message();
      EXPECT_LT(solution->certificate.gap, 1e-6) << workload << " " << dims;
      EXPECT_LT(solution->certificate.max_violation, 1e-6) << workload << " " << dims;
      ASSERT_TRUE(solution->has_equal);
      EXPECT_NEAR(solution->equal.bandwidth[0], 500.0 / static_cast<double>(dims[0] - '0'), 1e-9);
      // Never worse than the equal split, which is feasible.
      EXPECT_LE(solution->optimum.time_ns, solution->equal.time_ns * (1 + 1e-12));
      EXPECT_GE(solution->certificate.lower_bound_ns, 0.0);
    }
  }
}

TEST(LibraSolver, resnet_on_3d_puts_bandwidth_where_the_all_reduce_traffic_is) {
  SKIP_WITHOUT_SHARED_DATA();
  // ResNet-50 is pure data parallel: every collective is an all-reduce over 16 x 8 x 32, so the
  // optimum is B proportional to m = 2S(15/16, 7/(8 x 16), 31/(32 x 128)) whatever S is.
  const Problem problem = libra_problem("ResNet_50", "3d");
  Expected<Solution> solution = solve(problem);
  ASSERT_TRUE(solution);
  const double m0 = 15.0 / 16, m1 = 7.0 / 128, m2 = 31.0 / 4096, sum = m0 + m1 + m2;
  EXPECT_NEAR(solution->optimum.bandwidth[0], 500 * m0 / sum, 1e-4);
  EXPECT_NEAR(solution->optimum.bandwidth[1], 500 * m1 / sum, 1e-4);
  EXPECT_NEAR(solution->optimum.bandwidth[2], 500 * m2 / sum, 1e-4);
}

TEST(LibraSolver, libra_multiple_constraints_hold_at_the_optimum) {
  SKIP_WITHOUT_SHARED_DATA();
  // LIBRA's "multiple" example: sum 1000, B0 = 500, B0 >= B1 >= B2, B2 + B3 = 200 (4-D).
  Problem problem = libra_problem("GPT_3", "4d");
  problem.constraints.clear();
  for (const char* text : {"sum = 1000", "B0 = 500", "B0 >= B1", "B1 >= B2", "B2 + B3 = 200"}) {
    problem.constraints.push_back(constraint(text, 4));
  }
  Expected<Solution> solution = solve(problem);
  ASSERT_TRUE(solution) << solution.error().message();
  const std::vector<double>& b = solution->optimum.bandwidth;
  EXPECT_NEAR(b[0], 500, 1e-6);
  EXPECT_NEAR(b[0] + b[1] + b[2] + b[3], 1000, 1e-6);
  EXPECT_NEAR(b[1], 300, 1e-6);  // forced: B1 = 1000 - 500 - 200
  EXPECT_NEAR(b[2] + b[3], 200, 1e-6);
  EXPECT_LE(b[2], b[1] + 1e-9);
  EXPECT_FALSE(solution->has_equal);  // no equal split satisfies B0 = 500 and the sum
  EXPECT_LT(solution->certificate.gap, 1e-6);
}

TEST(LibraSolver, budget_caps_the_cost_and_costs_time) {
  SKIP_WITHOUT_SHARED_DATA();
  Problem problem = libra_problem("MSFT_1T", "3d");
  Expected<Solution> free = solve(problem);
  ASSERT_TRUE(free);
  problem.objective = Objective::kPerfOptBudget;
  problem.budget = free->optimum.cost * 0.9;
  Expected<Solution> limited = solve(problem);
  ASSERT_TRUE(limited) << limited.error().message();
  EXPECT_LE(limited->optimum.cost, problem.budget * (1 + 1e-9));
  EXPECT_GT(limited->optimum.time_ns, free->optimum.time_ns);
  EXPECT_LT(limited->certificate.gap, 1e-6);
}

TEST(LibraSolver, budget_below_the_cheapest_network_is_an_error) {
  SKIP_WITHOUT_SHARED_DATA();
  Problem problem = libra_problem("MSFT_1T", "3d");
  problem.objective = Objective::kPerfOptBudget;
  problem.budget = 1.0;
  Expected<Solution> solution = solve(problem);
  ASSERT_FALSE(solution);
  EXPECT_NE(solution.error().message().find("below the cheapest"), std::string::npos)
      << solution.error().message();
}

TEST(LibraSolver, perf_per_cost_is_no_worse_than_any_frontier_point) {
  SKIP_WITHOUT_SHARED_DATA();
  Problem problem = libra_problem("GPT_3", "3d");
  problem.objective = Objective::kPerfPerCost;
  Expected<Solution> solution = solve(problem);
  ASSERT_TRUE(solution) << solution.error().message();
  const double product = solution->optimum.time_ns * solution->optimum.cost;
  ASSERT_FALSE(solution->frontier.empty());
  for (const FrontierPoint& point : solution->frontier) {
    EXPECT_LE(product, point.allocation.time_ns * point.allocation.cost * (1 + 1e-12));
  }
  EXPECT_FALSE(solution->certificate.convex);
}

TEST(LibraSolver, frontier_time_falls_as_the_budget_grows) {
  SKIP_WITHOUT_SHARED_DATA();
  // ResNet-50 on 3-D: the cheap end leaves the FC and Switch dimensions a few GB/s against ~500 on
  // the ring, the badly scaled case that once stalled SLSQP at its start.
  for (const char* workload : {"GPT_3", "ResNet_50", "MSFT_1T"}) {
    const Problem problem = libra_problem(workload, "3d");
    Expected<std::vector<FrontierPoint>> frontier = sweep_frontier(problem, 16);
    ASSERT_TRUE(frontier) << frontier.error().message();
    ASSERT_GE(frontier->size(), 6u);
    for (size_t k = 1; k < frontier->size(); ++k) {
      EXPECT_LE((*frontier)[k].allocation.time_ns,
                (*frontier)[k - 1].allocation.time_ns * (1 + 1e-9));
      EXPECT_LE((*frontier)[k].allocation.cost, (*frontier)[k].budget * (1 + 1e-9));
      EXPECT_LT((*frontier)[k].gap, 1e-6) << "budget " << (*frontier)[k].budget;
    }
    // The top of the sweep is the unconstrained optimum's cost, so its time is the optimum's.
    Expected<Solution> best = solve(problem);
    ASSERT_TRUE(best);
    EXPECT_NEAR(frontier->back().allocation.time_ns, best->optimum.time_ns,
                1e-9 * best->optimum.time_ns)
        << workload;
  }
}

TEST(LibraSolver, infeasible_constraints_are_an_error) {
  Problem problem = single_collective(CollectiveKind::kAllReduce, 1e6, {16, 8, 32});
  problem.constraints.push_back(constraint("B0 >= 600", 3));
  Expected<Solution> solution = solve(problem);
  ASSERT_FALSE(solution);
  EXPECT_NE(solution.error().message().find("infeasible"), std::string::npos)
      << solution.error().message();
}

TEST(LibraSolver, dimension_forced_to_zero_while_carrying_traffic_is_an_error) {
  Problem problem = single_collective(CollectiveKind::kAllReduce, 1e6, {16, 8, 32});
  problem.constraints.push_back(constraint("B1 = 0", 3));
  Expected<Solution> solution = solve(problem);
  ASSERT_FALSE(solution);
  EXPECT_NE(solution.error().message().find("dimension 1 carries traffic"), std::string::npos)
      << solution.error().message();
}

TEST(LibraSolver, unbounded_bandwidth_is_an_error) {
  Problem problem = single_collective(CollectiveKind::kAllReduce, 1e6, {16, 8, 32});
  problem.constraints = {constraint("B0 >= 10", 3)};
  Expected<Solution> solution = solve(problem);
  ASSERT_FALSE(solution);
  EXPECT_NE(solution.error().message().find("unbounded"), std::string::npos)
      << solution.error().message();
}

TEST(LibraSolver, same_problem_gives_bit_identical_answers) {
  SKIP_WITHOUT_SHARED_DATA();
  const Problem problem = libra_problem("GPT_3", "4d");
  Expected<Solution> a = solve(problem);
  Expected<Solution> b = solve(problem);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->optimum.bandwidth, b->optimum.bandwidth);
  EXPECT_EQ(a->certificate.lower_bound_ns, b->certificate.lower_bound_ns);
}

}  // namespace libra_solver_test
}  // namespace orrery::design
