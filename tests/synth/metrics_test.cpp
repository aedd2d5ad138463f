#include <gtest/gtest.h>

#include <cmath>

#include "synth/metrics.h"
#include "synth_test_support.h"

namespace orrery::synth {
namespace metrics_test {

TEST(Metrics, wasserstein_of_shifted_samples_is_the_shift) {
  EXPECT_NEAR(wasserstein1({1, 2, 3}, {3, 4, 5}), 2.0, 1e-12);
  EXPECT_NEAR(wasserstein1({0, 1}, {0, 1}), 0.0, 1e-12);
  // {0} against {0, 1}: half the mass moves by 1.
  EXPECT_NEAR(wasserstein1({0}, {0, 1}), 0.5, 1e-12);
}

TEST(Metrics, correlations_and_errors_by_hand) {
  EXPECT_NEAR(pearson({1, 2, 3, 4}, {2, 4, 6, 8}), 1.0, 1e-12);
  EXPECT_NEAR(pearson({1, 2, 3}, {3, 2, 1}), -1.0, 1e-12);
  // Monotone but not linear: Spearman 1, Pearson below.
  EXPECT_NEAR(spearman({1, 2, 3, 4}, {1, 8, 27, 64}), 1.0, 1e-12);
  EXPECT_LT(pearson({1, 2, 3, 4}, {1, 8, 27, 1000}), 0.9);
  EXPECT_NEAR(mean_absolute_error({1, 2, 3}, {2, 2, 5}), 1.0, 1e-12);
}

TEST(Metrics, mmd_is_zero_for_equal_sets_and_closed_form_for_two_points) {
  const Histogram a = {1, 0}, b = {0, 1};
  EXPECT_NEAR(mmd_squared({a, b}, {a, b}), 0.0, 1e-12);
  // One graph each, TV 1: k(a, a) + k(b, b) - 2 k(a, b) = 2 - 2 exp(-1/2).
  EXPECT_NEAR(mmd_squared({a}, {b}), 2 - 2 * std::exp(-0.5), 1e-12);
  EXPECT_NEAR(total_variation({0.5, 0.5}, {1.0}), 0.5, 1e-12);
}

TEST(Metrics, statistics_of_a_small_graph) {
  // c0 -> c1 -> all-reduce; c0 -> all-reduce.
  const Dag dag = test::make_dag(
      {test::compute(10, 10), test::compute(20, 20), test::collective(NodeKind::kAllReduce, 64)},
      {{0, 1}, {1, 2}, {0, 2}});
  const Codebook book = Codebook::fit({dag}, {});
  const EncodedDag encoded = encode_dag(layer_dag(dag), book);
  const auto stats = graph_statistics(encoded, book);
  // Three layers of one node each.
  EXPECT_DOUBLE_EQ(stats.at("layer_size")[0], 1.0);
  // In-degrees 0, 1, 2.
  EXPECT_NEAR(stats.at("in_degree")[0], 1.0 / 3, 1e-12);
  EXPECT_NEAR(stats.at("in_degree")[2], 1.0 / 3, 1e-12);
  EXPECT_NEAR(stats.at("kind")[static_cast<size_t>(NodeKind::kCompute)], 2.0 / 3, 1e-12);
  EXPECT_DOUBLE_EQ(stats.at("collective_mix")[0], 1.0);  // all all-reduce
  EXPECT_DOUBLE_EQ(stats.at("nodes")[2], 1.0);           // 3 nodes: bin 2-3
  EXPECT_DOUBLE_EQ(stats.at("depth")[2], 1.0);
}

}  // namespace metrics_test
}  // namespace orrery::synth
