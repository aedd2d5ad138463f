// The Hungarian algorithm against brute force on random small matrices, and balanced placements.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "partition/assignment.h"

namespace orrery::partition {
namespace assignment_test {

Matrix random_matrix(int64_t rows, int64_t cols, std::mt19937_64& rng, bool integers) {
  std::uniform_real_distribution<double> real(-10.0, 10.0);
  std::uniform_int_distribution<int> small(0, 4);  // many ties
  Matrix m(rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) m(r, c) = integers ? small(rng) : real(rng);
  }
  return m;
}

double cost_of(const Matrix& cost, const std::vector<int64_t>& column_of) {
  double sum = 0.0;
  for (size_t r = 0; r < column_of.size(); ++r) sum += cost(static_cast<int64_t>(r), column_of[r]);
  return sum;
}

// The least cost over every injective map of rows to columns.
double brute_force(const Matrix& cost) {
  std::vector<int64_t> columns(static_cast<size_t>(cost.cols()));
  std::iota(columns.begin(), columns.end(), 0);
  double best = std::numeric_limits<double>::infinity();
  // Permutations of all columns; the first `rows` entries are the assignment.
  do {
    double sum = 0.0;
    for (int64_t r = 0; r < cost.rows(); ++r) sum += cost(r, columns[static_cast<size_t>(r)]);
    best = std::min(best, sum);
  } while (std::next_permutation(columns.begin(), columns.end()));
  return best;
}

void expect_injective(const std::vector<int64_t>& column_of, int64_t cols) {
  std::vector<int> used(static_cast<size_t>(cols), 0);
  for (int64_t c : column_of) {
    ASSERT_GE(c, 0);
    ASSERT_LT(c, cols);
    EXPECT_EQ(++used[static_cast<size_t>(c)], 1) << "column " << c << " used twice";
  }
}

TEST(Hungarian, matches_brute_force_on_random_square_and_rectangular_matrices) {
  std::mt19937_64 rng(7);
  int cases = 0;
  for (int64_t rows = 1; rows <= 7; ++rows) {
    for (int64_t cols = rows; cols <= std::min<int64_t>(rows + 2, 8); ++cols) {
      for (int trial = 0; trial < 12; ++trial) {
        const Matrix cost = random_matrix(rows, cols, rng, trial % 3 == 0);
        const std::vector<int64_t> column_of = solve_assignment(cost);
        ASSERT_EQ(static_cast<int64_t>(column_of.size()), rows);
        expect_injective(column_of, cols);
        EXPECT_NEAR(cost_of(cost, column_of), brute_force(cost), 1e-9)
            << rows << "x" << cols << " trial " << trial << "\n"
            << cost;
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 12 * (3 + 3 + 3 + 3 + 3 + 3 + 2));
}

TEST(Hungarian, finds_the_known_optimum_of_a_textbook_matrix) {
  // Rows 0, 1, 2 to columns 1, 0, 2: 1 + 2 + 2 = 5, the only assignment of cost 5.
  Matrix cost(3, 3);
  cost << 4, 1, 3, 2, 0, 5, 3, 2, 2;
  const std::vector<int64_t> column_of = solve_assignment(cost);
  EXPECT_EQ(column_of, (std::vector<int64_t>{1, 0, 2}));
}

TEST(Hungarian, is_deterministic_under_ties) {
  const Matrix cost = Matrix::Constant(5, 5, 1.0);
  EXPECT_EQ(solve_assignment(cost), solve_assignment(cost));
  EXPECT_NEAR(cost_of(cost, solve_assignment(cost)), 5.0, 0.0);
}

// Every placement of n units on K workers with sizes floor(n/K) or ceil(n/K).
double brute_force_balanced(const Matrix& cost) {
  const int64_t n = cost.rows();
  const auto k = static_cast<int32_t>(cost.cols());
  std::vector<int32_t> placement(static_cast<size_t>(n), 0);
  double best = std::numeric_limits<double>::infinity();
  while (true) {
    const std::vector<int64_t> sizes = worker_sizes(placement, k);
    const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
    if (*hi - *lo <= 1) {
      double sum = 0.0;
      for (int64_t u = 0; u < n; ++u) sum += cost(u, placement[static_cast<size_t>(u)]);
      best = std::min(best, sum);
    }
    int64_t i = 0;
    while (i < n && ++placement[static_cast<size_t>(i)] == k)
      placement[static_cast<size_t>(i++)] = 0;
    if (i == n) break;
  }
  return best;
}

TEST(BalancedAssignment, matches_brute_force_and_keeps_workers_within_one_unit) {
  std::mt19937_64 rng(11);
  for (int64_t n = 1; n <= 8; ++n) {
    for (int32_t k = 1; k <= 3; ++k) {
      for (int trial = 0; trial < 4; ++trial) {
        const Matrix cost = random_matrix(n, k, rng, trial % 2 == 0);
        const std::vector<int32_t> placement = balanced_assignment(cost);
        const std::vector<int64_t> sizes = worker_sizes(placement, k);
        for (int64_t size : sizes) {
          EXPECT_TRUE(size == n / k || size == n / k + 1) << n << " on " << k;
        }
        double sum = 0.0;
        for (int64_t u = 0; u < n; ++u) sum += cost(u, placement[static_cast<size_t>(u)]);
        EXPECT_NEAR(sum, brute_force_balanced(cost), 1e-9) << n << " units, " << k << " workers";
      }
    }
  }
}

TEST(BalancedAssignment, puts_units_where_they_are_cheapest_when_capacity_allows) {
  // Units 0 and 3 prefer worker 1, units 1 and 2 worker 0.
  Matrix cost(4, 2);
  cost << 5, 0, 0, 5, 0, 5, 5, 0;
  EXPECT_EQ(balanced_assignment(cost), (std::vector<int32_t>{1, 0, 0, 1}));
}

TEST(ContiguousPlacement, gives_the_first_workers_the_extra_units) {
  EXPECT_EQ(contiguous_placement(10, 4), (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(worker_sizes(contiguous_placement(10, 8), 8),
            (std::vector<int64_t>{2, 2, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(contiguous_placement(3, 1), (std::vector<int32_t>{0, 0, 0}));
}

}  // namespace assignment_test
}  // namespace orrery::partition
