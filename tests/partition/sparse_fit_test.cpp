// Group OMP in Gram form: exact least squares, exact gains, and subset choice on known designs.
#include <gtest/gtest.h>

#include <random>

#include <Eigen/Dense>

#include "partition/sparse_fit.h"

namespace orrery::partition {
namespace sparse_fit_test {

Matrix gaussian(int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  Matrix m(rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) m(r, c) = normal(rng);
  }
  return m;
}

std::vector<int64_t> singletons(int64_t columns) {
  std::vector<int64_t> first;
  for (int64_t c = 0; c <= columns; ++c) first.push_back(c);
  return first;
}

// The ridge objective of the columns `available` (plus the bias) solved directly.
double direct_objective(const Matrix& z, const Vector& t, const Vector& w,
                        const std::vector<int64_t>& available, double ridge, Vector* beta_out) {
  std::vector<int64_t> cols = available;
  cols.push_back(z.cols());  // the bias
  Matrix za(z.rows(), static_cast<int64_t>(cols.size()));
  Vector wa(static_cast<int64_t>(cols.size()));
  for (size_t i = 0; i < cols.size(); ++i) {
    const auto c = static_cast<int64_t>(i);
    za.col(c) = cols[i] == z.cols() ? Vector::Ones(z.rows()) : Vector(z.col(cols[i]));
    wa(c) = w(cols[i]);
  }
  const Matrix a = za.transpose() * za + ridge * Matrix::Identity(za.cols(), za.cols());
  const Vector beta = a.ldlt().solve(za.transpose() * t + ridge * wa);
  if (beta_out) *beta_out = beta;
  return (za * beta - t).squaredNorm() + ridge * (beta - wa).squaredNorm();
}

TEST(WorkerFit, refit_weights_and_loss_are_the_direct_ridge_least_squares_solution) {
  const Matrix z = gaussian(60, 6, 1);
  const Matrix w_true = gaussian(3, 7, 2);  // 3 outputs, 6 inputs + bias
  Matrix zb(60, 7);
  zb << z, Vector::Ones(60);
  const Matrix t = zb * w_true.transpose() + 0.3 * gaussian(60, 3, 3);
  const double ridge_scale = 0.01;
  const LayerGram gram = make_layer_gram(z, t, w_true, singletons(6), ridge_scale);
  const double ridge = ridge_scale * (zb.transpose() * zb).diagonal().mean();
  WorkerFit fit(gram, {0, 2});
  for (int64_t g : {4, 1, 3}) fit.add_group(g);
  const Matrix weights = fit.weights();
  for (int64_t k = 0; k < 2; ++k) {
    const int64_t j = k == 0 ? 0 : 2;
    Vector beta;
    const double objective =
        direct_objective(z, t.col(j), w_true.row(j).transpose(), {1, 3, 4}, ridge, &beta);
    EXPECT_NEAR(fit.loss(j), objective, 1e-8 * objective);
    // Columns 1, 3, 4, then the bias; the others are zero.
    EXPECT_NEAR(weights(k, 1), beta(0), 1e-9);
    EXPECT_NEAR(weights(k, 3), beta(1), 1e-9);
    EXPECT_NEAR(weights(k, 4), beta(2), 1e-9);
    EXPECT_NEAR(weights(k, 6), beta(3), 1e-9);
    EXPECT_EQ(weights(k, 0), 0.0);
    EXPECT_EQ(weights(k, 2), 0.0);
    EXPECT_EQ(weights(k, 5), 0.0);
  }
  // Output 1 is not this worker's, but its loss on these columns is known too.
  EXPECT_NEAR(fit.loss(1),
              direct_objective(z, t.col(1), w_true.row(1).transpose(), {1, 3, 4}, ridge, nullptr),
              1e-8 * fit.loss(1));
}

TEST(WorkerFit, gain_is_the_exact_objective_decrease_for_single_and_grouped_columns) {
  const Matrix z = gaussian(80, 9, 4);
  const Matrix w = gaussian(4, 10, 5);
  Matrix zb(80, 10);
  zb << z, Vector::Ones(80);
  const Matrix t = zb * w.transpose() + 0.5 * gaussian(80, 4, 6);
  for (const std::vector<int64_t>& first :
       {singletons(9), std::vector<int64_t>{0, 3, 6, 9}}) {  // single columns; groups of three
    const LayerGram gram = make_layer_gram(z, t, w, first, 0.05);
    WorkerFit fit(gram, {1, 3});
    fit.add_group(0);
    for (int64_t g = 1; g < gram.groups(); ++g) {
      WorkerFit with = fit;
      const double before = fit.loss(1) + fit.loss(3);
      with.add_group(g);
      EXPECT_NEAR(fit.gain(g), before - with.loss(1) - with.loss(3), 1e-9 * before)
          << "group " << g << " of " << gram.groups();
    }
  }
}

TEST(WorkerFit, blocked_and_column_by_column_growth_agree) {
  const Matrix z = gaussian(50, 8, 7);
  const Matrix w = gaussian(2, 9, 8);
  const Matrix t = gaussian(50, 2, 9);
  const LayerGram gram = make_layer_gram(z, t, w, singletons(8), 1e-3);
  WorkerFit one(gram, {0, 1});
  WorkerFit block(gram, {0, 1});
  for (int64_t g : {0, 2, 5, 7}) one.add_group(g);
  block.add_groups({0, 2, 5, 7});
  EXPECT_NEAR(one.loss(0), block.loss(0), 1e-9 * one.loss(0));
  EXPECT_NEAR(one.loss(1), block.loss(1), 1e-9 * one.loss(1));
  EXPECT_LT((one.weights() - block.weights()).cwiseAbs().maxCoeff(), 1e-9);
  EXPECT_NEAR(one.gain(3), block.gain(3), 1e-9 * std::abs(one.gain(3)) + 1e-12);
}

TEST(WorkerFit, with_every_input_and_exact_targets_the_refit_is_the_trained_layer) {
  const Matrix z = gaussian(40, 5, 10);
  const Matrix w = gaussian(3, 6, 11);
  Matrix zb(40, 6);
  zb << z, Vector::Ones(40);
  const LayerGram gram = make_layer_gram(z, zb * w.transpose(), w, singletons(5), 0.1);
  WorkerFit fit(gram, {0, 1, 2});
  fit.add_groups({0, 1, 2, 3, 4});
  EXPECT_LT((fit.weights() - w).cwiseAbs().maxCoeff(), 1e-9);
  EXPECT_NEAR(fit.loss(0), 0.0, 1e-9);
}

TEST(WorkerFit, greedy_choice_is_the_best_subset_on_orthogonal_inputs) {
  // Orthogonal, zero-mean inputs: each column's gain is independent of the others, so the
  // greedy order is the best subset of every size (checked against every subset of two).
  Matrix a = gaussian(64, 7, 12);
  a.col(0).setOnes();  // the columns after it in Q are orthogonal to the bias column
  const Matrix q = a.householderQr().householderQ() * Matrix::Identity(64, 7);
  const Matrix z = q.rightCols(6);
  const Matrix coeffs = (Vector(6) << 3.0, -0.5, 2.0, 0.1, -4.0, 1.0).finished();
  const Matrix t = z * coeffs;
  const LayerGram gram = make_layer_gram(z, t, Matrix::Zero(1, 7), singletons(6), 0.0);
  WorkerFit fit(gram, {0});
  double best_gain = -1;
  int64_t first = -1;
  for (int64_t g = 0; g < 6; ++g) {
    if (fit.gain(g) > best_gain) {
      best_gain = fit.gain(g);
      first = g;
    }
  }
  EXPECT_EQ(first, 4);  // |-4| is the largest coefficient
  fit.add_group(first);
  double second_gain = -1;
  int64_t second = -1;
  for (int64_t g = 0; g < 6; ++g) {
    if (g != first && fit.gain(g) > second_gain) {
      second_gain = fit.gain(g);
      second = g;
    }
  }
  fit.add_group(second);
  double best_pair = std::numeric_limits<double>::infinity();
  for (int64_t u = 0; u < 6; ++u) {
    for (int64_t v = u + 1; v < 6; ++v) {
      best_pair =
          std::min(best_pair, direct_objective(z, t.col(0), Vector::Zero(7), {u, v}, 0.0, nullptr));
    }
  }
  EXPECT_EQ(second, 0);
  EXPECT_NEAR(fit.loss(0), best_pair, 1e-9 * (1.0 + best_pair));
}

}  // namespace sparse_fit_test
}  // namespace orrery::partition
