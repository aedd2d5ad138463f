#include "partition/assignment.h"

#include <algorithm>
#include <cassert>
#include <limits>

namespace orrery::partition {

std::vector<int64_t> solve_assignment(const Matrix& cost) {
  const int64_t rows = cost.rows();
  const int64_t cols = cost.cols();
  assert(rows <= cols && "solve_assignment: more rows than columns");
  assert(cost.allFinite() && "solve_assignment: a cost that is not finite");
  // Row-major copy: the inner loop scans one row.
  std::vector<double> a(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) a[static_cast<size_t>(r * cols + c)] = cost(r, c);
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // Index 0 of the column arrays is a virtual column holding the row being inserted; rows are
  // numbered from 1 in `owner` (0 = free column).
  const auto ncols = static_cast<size_t>(cols + 1);
  std::vector<double> row_potential(static_cast<size_t>(rows + 1), 0.0);
  std::vector<double> col_potential(ncols, 0.0);
  std::vector<int64_t> owner(ncols, 0);
  std::vector<size_t> previous(ncols, 0);
  std::vector<double> slack(ncols);
  std::vector<char> visited(ncols);
  for (int64_t row = 1; row <= rows; ++row) {
    // Dijkstra on reduced costs from the new row to the nearest free column, growing the tree of
    // visited columns; potentials keep every reduced cost non-negative.
    owner[0] = row;
    size_t col = 0;
    std::fill(slack.begin(), slack.end(), kInf);
    std::fill(visited.begin(), visited.end(), 0);
    do {
      visited[col] = 1;
      const int64_t from = owner[col];
      const double* from_costs = &a[static_cast<size_t>((from - 1) * cols)];
      double delta = kInf;
      size_t next = 0;
      for (size_t c = 1; c < ncols; ++c) {
        if (visited[c]) continue;
        const double reduced =
            from_costs[c - 1] - row_potential[static_cast<size_t>(from)] - col_potential[c];
        if (reduced < slack[c]) {
          slack[c] = reduced;
          previous[c] = col;
        }
        if (slack[c] < delta) {
          delta = slack[c];
          next = c;
        }
      }
      for (size_t c = 0; c < ncols; ++c) {
        if (visited[c]) {
          row_potential[static_cast<size_t>(owner[c])] += delta;
          col_potential[c] -= delta;
        } else {
          slack[c] -= delta;
        }
      }
      col = next;
    } while (owner[col] != 0);
    // Flip the alternating path back to the virtual column.
    while (col != 0) {
      const size_t back = previous[col];
      owner[col] = owner[back];
      col = back;
    }
  }
  std::vector<int64_t> column_of(static_cast<size_t>(rows), -1);
  for (size_t c = 1; c < ncols; ++c) {
    if (owner[c] != 0) column_of[static_cast<size_t>(owner[c] - 1)] = static_cast<int64_t>(c - 1);
  }
  return column_of;
}

std::vector<int32_t> balanced_assignment(const Matrix& cost) {
  const int64_t units = cost.rows();
  const auto workers = static_cast<int32_t>(cost.cols());
  const int64_t base = units / workers;
  const int64_t extra = units % workers;
  // Each worker has `base` slots at its cost and, when units do not divide evenly, one more slot
  // at its cost plus a penalty larger than any difference the other slots can make, so that the
  // optimum uses exactly `extra` of them (every worker then holds base or base + 1 units).
  const double spread = cost.size() == 0 ? 0.0 : cost.maxCoeff() - cost.minCoeff();
  const double penalty = extra == 0 ? 0.0 : (spread + 1.0) * static_cast<double>(units + 1);
  const int64_t per_worker = base + (extra > 0 ? 1 : 0);
  Matrix slots(units, per_worker * workers);
  for (int32_t w = 0; w < workers; ++w) {
    for (int64_t s = 0; s < per_worker; ++s) {
      const double add = s == base ? penalty : 0.0;
      slots.col(w * per_worker + s) = cost.col(w).array() + add;
    }
  }
  const std::vector<int64_t> slot = solve_assignment(slots);
  std::vector<int32_t> worker(static_cast<size_t>(units));
  for (size_t u = 0; u < worker.size(); ++u) worker[u] = static_cast<int32_t>(slot[u] / per_worker);
  return worker;
}

std::vector<int32_t> contiguous_placement(int64_t units, int32_t workers) {
  std::vector<int32_t> placement(static_cast<size_t>(units));
  const int64_t base = units / workers;
  const int64_t extra = units % workers;
  int64_t unit = 0;
  for (int32_t w = 0; w < workers; ++w) {
    const int64_t size = base + (w < extra ? 1 : 0);
    for (int64_t i = 0; i < size; ++i) placement[static_cast<size_t>(unit++)] = w;
  }
  return placement;
}

std::vector<int64_t> worker_sizes(const std::vector<int32_t>& placement, int32_t workers) {
  std::vector<int64_t> sizes(static_cast<size_t>(workers), 0);
  for (int32_t w : placement) ++sizes[static_cast<size_t>(w)];
  return sizes;
}

}  // namespace orrery::partition
