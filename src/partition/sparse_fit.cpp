#include "partition/sparse_fit.h"

#include <cassert>
#include <cmath>

#include <Eigen/Dense>

namespace orrery::partition {

LayerGram make_layer_gram(const Matrix& inputs, const Matrix& targets, const Matrix& weight,
                          std::vector<int64_t> group_first, double ridge_scale) {
  const int64_t d = inputs.cols() + 1;
  assert(weight.cols() == d && weight.rows() == targets.cols());
  LayerGram g;
  g.gram.resize(d, d);
  g.gram.topLeftCorner(d - 1, d - 1).noalias() = inputs.transpose() * inputs;
  const Vector sums = inputs.colwise().sum().transpose();
  g.gram.col(d - 1).head(d - 1) = sums;
  g.gram.row(d - 1).head(d - 1) = sums.transpose();
  g.gram(d - 1, d - 1) = static_cast<double>(inputs.rows());
  g.cross.resize(d, targets.cols());
  g.cross.topRows(d - 1).noalias() = inputs.transpose() * targets;
  g.cross.row(d - 1) = targets.colwise().sum();
  g.energy = targets.colwise().squaredNorm().transpose();
  const double ridge = ridge_scale * g.gram.diagonal().mean();
  g.gram.diagonal().array() += ridge;
  g.cross += ridge * weight.transpose();
  g.prior = ridge * weight.transpose().array().square();
  g.group_first = std::move(group_first);
  return g;
}

WorkerFit::WorkerFit(const LayerGram& gram, std::vector<int64_t> outputs)
    : g_(gram),
      outputs_(std::move(outputs)),
      available_(static_cast<size_t>(gram.groups()), 0),
      v_(gram.columns(), gram.columns()),
      coef_(gram.columns(), gram.outputs()),
      residual_(gram.cross),
      diag_(gram.gram.diagonal()),
      prior_(Vector::Zero(gram.outputs())),
      explained_(Vector::Zero(gram.outputs())) {
  basis_.reserve(static_cast<size_t>(gram.columns()));
  add_column(gram.columns() - 1);
  prior_ += g_.prior.row(gram.columns() - 1).transpose();
}

void WorkerFit::add_column(int64_t column) {
  const double r = diag_(column);
  // A column the basis already spans (to rounding) adds nothing; leaving it out keeps the factor
  // well conditioned.
  if (!(r > 1e-12 * g_.gram(column, column))) return;
  const double scale = 1.0 / std::sqrt(r);
  const auto m = static_cast<int64_t>(basis_.size());
  Vector v = g_.gram.col(column);
  if (m > 0) v.noalias() -= v_.leftCols(m) * v_.row(column).head(m).transpose();
  v *= scale;
  const Vector w = residual_.row(column).transpose() * scale;
  v_.col(m) = v;
  coef_.row(m) = w.transpose();
  residual_.noalias() -= v * w.transpose();
  diag_.array() -= v.array().square();
  explained_.array() += w.array().square();
  basis_.push_back(column);
}

void WorkerFit::add_group(int64_t group) {
  auto& flag = available_[static_cast<size_t>(group)];
  if (flag) return;
  flag = 1;
  const auto first = g_.group_first[static_cast<size_t>(group)];
  const auto last = g_.group_first[static_cast<size_t>(group) + 1];
  for (int64_t c = first; c < last; ++c) {
    add_column(c);
    prior_ += g_.prior.row(c).transpose();
  }
}

bool WorkerFit::add_block(const std::vector<int64_t>& columns) {
  const auto s = static_cast<int64_t>(columns.size());
  const auto m = static_cast<int64_t>(basis_.size());
  const int64_t d = g_.columns();
  Matrix block(s, s);
  Matrix rows(s, m);
  Matrix gram_cols(d, s);
  Matrix correlations(s, g_.outputs());
  for (int64_t i = 0; i < s; ++i) {
    const int64_t ci = columns[static_cast<size_t>(i)];
    rows.row(i) = v_.row(ci).head(m);
    gram_cols.col(i) = g_.gram.col(ci);
    correlations.row(i) = residual_.row(ci);
    for (int64_t j = 0; j < s; ++j) block(i, j) = g_.gram(ci, columns[static_cast<size_t>(j)]);
  }
  if (m > 0) {
    block.noalias() -= rows * rows.transpose();
    gram_cols.noalias() -= v_.leftCols(m) * rows.transpose();
  }
  const Eigen::LLT<Matrix> chol(block);
  if (chol.info() != Eigen::Success) return false;
  const Matrix factor = chol.matrixL();
  for (int64_t i = 0; i < s; ++i) {
    const int64_t ci = columns[static_cast<size_t>(i)];
    if (!(factor(i, i) * factor(i, i) > 1e-12 * g_.gram(ci, ci))) return false;
  }
  // New basis columns V_S = B L^-T and coefficients L^-1 (residual correlations of S).
  const Matrix v = factor.triangularView<Eigen::Lower>().solve(gram_cols.transpose()).transpose();
  const Matrix w = factor.triangularView<Eigen::Lower>().solve(correlations);
  v_.block(0, m, d, s) = v;
  coef_.block(m, 0, s, g_.outputs()) = w;
  residual_.noalias() -= v * w;
  diag_ -= v.rowwise().squaredNorm();
  explained_ += w.colwise().squaredNorm().transpose();
  basis_.insert(basis_.end(), columns.begin(), columns.end());
  return true;
}

void WorkerFit::add_groups(const std::vector<int64_t>& groups) {
  std::vector<int64_t> columns;
  for (int64_t group : groups) {
    auto& flag = available_[static_cast<size_t>(group)];
    if (flag) continue;
    flag = 1;
    const auto first = g_.group_first[static_cast<size_t>(group)];
    const auto last = g_.group_first[static_cast<size_t>(group) + 1];
    for (int64_t c = first; c < last; ++c) {
      columns.push_back(c);
      prior_ += g_.prior.row(c).transpose();
    }
  }
  if (columns.empty() || add_block(columns)) return;
  for (int64_t c : columns) add_column(c);
}

double WorkerFit::gain(int64_t group) const {
  if (has_group(group)) return 0.0;
  const auto first = g_.group_first[static_cast<size_t>(group)];
  const auto q = g_.group_first[static_cast<size_t>(group) + 1] - first;
  const auto m = static_cast<int64_t>(basis_.size());
  double penalty = 0.0;
  for (int64_t j : outputs_) penalty += g_.prior.block(first, j, q, 1).sum();
  if (q == 1) {
    const double r = diag_(first);
    if (!(r > 1e-12 * g_.gram(first, first))) return -penalty;
    double sum = 0.0;
    for (int64_t j : outputs_) sum += residual_(first, j) * residual_(first, j);
    return sum / r - penalty;
  }
  // The residual Gram block of the group's columns and its correlations with the outputs.
  Matrix block = g_.gram.block(first, first, q, q);
  if (m > 0) block.noalias() -= v_.block(first, 0, q, m) * v_.block(first, 0, q, m).transpose();
  block.diagonal().array() += 1e-12 * g_.gram.diagonal().segment(first, q).array();
  Matrix z(q, static_cast<int64_t>(outputs_.size()));
  for (size_t k = 0; k < outputs_.size(); ++k)
    z.col(static_cast<int64_t>(k)) = residual_.block(first, outputs_[k], q, 1);
  const Eigen::LDLT<Matrix> solver(block);
  return (z.array() * solver.solve(z).array()).sum() - penalty;
}

double WorkerFit::loss(int64_t output) const {
  return g_.energy(output) + prior_(output) - explained_(output);
}

Matrix WorkerFit::weights() const {
  const auto m = static_cast<int64_t>(basis_.size());
  // No input kept, or no unit of this layer on the worker (more workers than the layer has
  // units): nothing to solve, and Eigen's triangular solve of an empty system binds a reference
  // through a null pointer.
  if (m == 0 || outputs_.empty()) {
    return Matrix::Zero(static_cast<int64_t>(outputs_.size()), g_.columns());
  }
  Matrix factor(m, m);  // L: rows of V at the basis columns
  for (int64_t i = 0; i < m; ++i) factor.row(i) = v_.row(basis_[static_cast<size_t>(i)]).head(m);
  Matrix rhs(m, static_cast<int64_t>(outputs_.size()));
  for (size_t k = 0; k < outputs_.size(); ++k) {
    rhs.col(static_cast<int64_t>(k)) = coef_.col(outputs_[k]).head(m);
  }
  // L' b = coef: the coefficients of the basis columns.
  const Matrix beta = factor.triangularView<Eigen::Lower>().transpose().solve(rhs);
  Matrix out = Matrix::Zero(static_cast<int64_t>(outputs_.size()), g_.columns());
  for (int64_t i = 0; i < m; ++i) out.col(basis_[static_cast<size_t>(i)]) = beta.row(i).transpose();
  return out;
}

}  // namespace orrery::partition
