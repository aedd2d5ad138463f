// partition/sparse_fit.h: L0-constrained least squares for one layer, by group OMP in Gram form.
//
// A layer computes T = Z W^T, Z = [its unfolded inputs, 1] (one row per calibration sample and
// output position, the last column the bias). Its inputs come in groups (one input neuron, or the
// kernel columns of one input channel); a worker may use a group when it holds it or receives it.
// For the output units J placed on one worker and the groups A available there, the refit weights
// minimise
//     sum_{j in J} ||Z_A b_j - t_j||^2 + ridge ||b_j - w_{j,A}||^2
// (ridge pulls toward the trained weights, so that with every input available and exact inputs
// the answer is the trained layer). LayerGram holds Z'Z and Z'T once per layer; WorkerFit grows
// the available set one group at a time by Gram-Schmidt on the Gram matrix (a Cholesky factor
// grown column by column), keeping every group's exact gain current: adding group g lowers the
// objective by trace(Z_g' R_g^-1 Z_g) - ridge ||w_{J,g}||^2, R_g and Z_g the residual Gram block
// and correlations of g. Greedy selection by that gain is orthogonal matching pursuit over groups
// (orthogonal least squares). Costs per added column: O(D (m + outputs)), D columns, m chosen.
#pragma once

#include <cstdint>
#include <vector>

#include "partition/model.h"

namespace orrery::partition {

struct LayerGram {
  Matrix gram;    // D x D: Z'Z + ridge I
  Matrix cross;   // D x outputs: Z'T + ridge W'
  Vector energy;  // outputs: ||t_j||^2
  Matrix prior;   // D x outputs: ridge w_jc^2, the prior's share of each column
  // Groups: columns [group_first[g], group_first[g + 1]); column D - 1 (bias) is in none.
  std::vector<int64_t> group_first;
  int64_t groups() const { return static_cast<int64_t>(group_first.size()) - 1; }
  int64_t columns() const { return gram.rows(); }
  int64_t outputs() const { return cross.cols(); }
};

// inputs: Z without the ones column (rows x D-1); targets: T (rows x outputs); weight: the trained
// W with the bias as its last column (outputs x D). ridge_scale times the mean diagonal of Z'Z is
// the ridge. group_first as in LayerGram (first entry 0, last D - 1).
LayerGram make_layer_gram(const Matrix& inputs, const Matrix& targets, const Matrix& weight,
                          std::vector<int64_t> group_first, double ridge_scale);

class WorkerFit {
 public:
  // Starts with only the bias column available; `outputs` are the units whose gains count.
  WorkerFit(const LayerGram& gram, std::vector<int64_t> outputs);

  // Makes group g available (no effect when it already is).
  void add_group(int64_t group);
  // Makes several groups available at once: one blocked Cholesky step (the same result as adding
  // them one by one, to rounding, in a fraction of the time), column by column when the block is
  // numerically singular.
  void add_groups(const std::vector<int64_t>& groups);
  bool has_group(int64_t group) const { return available_[static_cast<size_t>(group)] != 0; }
  // The objective decrease of making g available, for the outputs of this worker.
  double gain(int64_t group) const;
  // The objective of output j (any unit, placed here or not) with the groups available now.
  double loss(int64_t output) const;
  // The refit weights of the outputs: rows in `outputs` order, D columns (zero where a column is
  // not available; the last column is the bias).
  Matrix weights() const;
  const std::vector<int64_t>& outputs() const { return outputs_; }

 private:
  void add_column(int64_t column);
  bool add_block(const std::vector<int64_t>& columns);

  const LayerGram& g_;
  std::vector<int64_t> outputs_;
  std::vector<uint8_t> available_;  // per group
  std::vector<int64_t> basis_;      // columns in the factor, in order
  Matrix v_;          // D x m: G[:, basis] L^-T (rows at basis columns: the Cholesky factor L)
  Matrix coef_;       // m x outputs: L^-1 C[basis, :]
  Matrix residual_;   // D x outputs: C - V coef (residual correlations)
  Vector diag_;       // D: residual Gram diagonal
  Vector prior_;      // outputs: prior energy of the available columns
  Vector explained_;  // outputs: squared norm of coef's columns
};

}  // namespace orrery::partition
