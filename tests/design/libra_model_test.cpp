// The LIBRA traffic and cost model against hand-computed figures.
#include <gtest/gtest.h>

#include "design/libra_model.h"

namespace orrery::design {
namespace libra_model_test {

TEST(LibraTraffic, all_reduce_walks_dimensions_dividing_the_chunk) {
  // 2 S (n-1)/n in each dimension, S shrinking by n: S = 1200, groups 4 x 3.
  const std::vector<double> m = dimension_traffic(CollectiveKind::kAllReduce, 1200, {4, 3});
  ASSERT_EQ(m.size(), 2u);
  EXPECT_DOUBLE_EQ(m[0], 2 * 1200.0 * 3 / 4);  // 1800
  EXPECT_DOUBLE_EQ(m[1], 2 * 300.0 * 2 / 3);   // 400
}

TEST(LibraTraffic, unused_dimension_moves_nothing_and_keeps_the_chunk) {
  const std::vector<double> m = dimension_traffic(CollectiveKind::kReduceScatter, 800, {-1, 8, 2});
  EXPECT_DOUBLE_EQ(m[0], 0.0);
  EXPECT_DOUBLE_EQ(m[1], 800.0 * 7 / 8);  // 700
  EXPECT_DOUBLE_EQ(m[2], 100.0 * 1 / 2);  // 50
}

TEST(LibraTraffic, all_gather_starts_from_the_last_dimension_and_grows) {
  // Reverse walk: dim 1 first: 100 x (3-1) = 200, chunk 300; dim 0: 300 x (4-1) = 900.
  const std::vector<double> m = dimension_traffic(CollectiveKind::kAllGather, 100, {4, 3});
  EXPECT_DOUBLE_EQ(m[1], 200.0);
  EXPECT_DOUBLE_EQ(m[0], 900.0);
}

TEST(LibraTraffic, all_to_all_keeps_the_chunk) {
  const std::vector<double> m = dimension_traffic(CollectiveKind::kAllToAll, 1000, {4, 5});
  EXPECT_DOUBLE_EQ(m[0], 750.0);
  EXPECT_DOUBLE_EQ(m[1], 800.0);
}

Problem two_dim_problem() {
  Problem problem;
  problem.dimensions = {{TopologyKind::kRing, 4, "A"}, {TopologyKind::kSwitch, 8, "B"}};
  Layer layer;
  layer.name = "l0";
  layer.phases[0] = {100.0, CollectiveKind::kAllReduce, 1000.0, {4, 8}};
  layer.phases[2] = {50.0, CollectiveKind::kAllReduce, 1000.0, {4, 8}};
  problem.layers = {layer};
  problem.cost_model = {{"A", {2.0, 0, 0}}, {"B", {3.0, 5.0, 7.0}}};
  return problem;
}

TEST(LibraModel, identical_collectives_merge_and_time_is_compute_plus_slowest_dimension) {
  Expected<TrafficModel> model = build_traffic_model(two_dim_problem());
  ASSERT_TRUE(model) << model.error().message();
  EXPECT_DOUBLE_EQ(model->compute_ns, 150.0);
  ASSERT_EQ(model->collectives.size(), 1u);
  EXPECT_DOUBLE_EQ(model->collectives[0].count, 2.0);
  // m = (1500, 2 x 250 x 7/8 = 437.5); at B = (10, 5): max(150, 87.5) = 150 per collective.
  EXPECT_DOUBLE_EQ(iteration_time_ns(*model, {10, 5}), 150.0 + 2 * 150.0);
}

TEST(LibraModel, cost_is_npus_times_unit_costs_with_switch_and_nic_on_switch_dimensions) {
  Expected<TrafficModel> model = build_traffic_model(two_dim_problem());
  ASSERT_TRUE(model);
  EXPECT_EQ(model->npus, 32u);
  // 32 x (2 x 10 + (3 + 5 + 7) x 5) = 32 x 95 = 3040.
  EXPECT_DOUBLE_EQ(network_cost(*model, {10, 5}), 3040.0);
}

TEST(LibraModel, group_larger_than_its_dimension_is_an_error_naming_the_layer) {
  Problem problem = two_dim_problem();
  problem.layers[0].phases[0].groups = {5, 8};
  Expected<TrafficModel> model = build_traffic_model(problem);
  ASSERT_FALSE(model);
  EXPECT_NE(model.error().message().find("layer 'l0' forward"), std::string::npos)
      << model.error().message();
  EXPECT_NE(model.error().message().find("group size 5 in dimension 0"), std::string::npos);
}

TEST(LibraModel, switch_dimension_without_nic_cost_is_an_error) {
  Problem problem = two_dim_problem();
  problem.cost_model[1].second.nic = 0;
  Expected<TrafficModel> model = build_traffic_model(problem);
  ASSERT_FALSE(model);
  EXPECT_NE(model.error().message().find("'B'"), std::string::npos) << model.error().message();
}

}  // namespace libra_model_test
}  // namespace orrery::design
