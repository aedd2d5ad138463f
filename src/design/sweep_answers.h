// design/sweep_answers.h: what a sweep's rows answer (COMET's questions).
//
// From the rows of a database (sweep_store.h), over the points that ran (status ok):
// - the best points: the fastest iterations (ties: lower cost, then lower id);
// - the best point within each budget (the sweep file's `budgets`, else the costs of the Pareto
//   frontier);
// - the Pareto frontier of iteration time against cost: the points no other point beats on both
//   (ties on both: the lowest id), by ascending cost;
// - the sensitivity of every axis with two or more values among them: for each value the best
//   time of the points holding it; the axis's spread is the slowest of those bests over the
//   fastest (1: the axis does not matter to the best time), axes ordered by spread;
// - the spread between cluster configurations: each cluster (every non-plan axis) at its best
//   plan, the slowest over the fastest (COMET's "up to 7.7x");
// - the gain from memory expansion: the best time with nothing offloaded over the best time with
//   something offloaded, overall and within each budget (COMET's "up to 1.4x");
// - the rejections, counted by reason with the numbers taken out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "design/sweep_store.h"

namespace orrery::design {

struct AxisSensitivity {
  size_t axis = 0;                                   // index into StoredSweep::axes
  std::vector<std::pair<std::string, size_t>> best;  // (value as text, row of its best point)
  double spread = 1;
};

struct BudgetAnswer {
  double budget = 0;
  std::optional<size_t> best;             // row, fastest within the budget
  std::optional<size_t> best_no_offload;  // row, fastest within it that offloads nothing
};

struct ReasonCount {
  std::string pattern;  // the reason with its numbers replaced by '#'
  std::string example;
  uint64_t count = 0;
};

struct SweepAnswers {
  uint64_t rows = 0, ok = 0, rejected = 0, failed = 0;
  std::vector<size_t> best;    // rows, fastest first
  std::vector<size_t> pareto;  // rows, by ascending cost
  std::vector<BudgetAnswer> budgets;
  std::vector<AxisSensitivity> sensitivity;
  std::optional<size_t> fastest_cluster, slowest_cluster;  // rows: the best point of each
  double cluster_spread = 0;                               // 0: fewer than two clusters ran
  uint64_t clusters = 0;
  std::optional<size_t> best_no_offload, best_offload;  // rows
  double expansion_gain = 0;         // best without offload / best with (0: one side is empty)
  std::vector<ReasonCount> reasons;  // by count, most first
};

// `top`: how many best points to list.
SweepAnswers answer_sweep(const StoredSweep& sweep, size_t top = 10);

// An axis value as text ("8", "312", "1f1b").
std::string value_text(const StoredSweep& sweep, size_t axis, const Value& value);

// The answers as plain text (what `orrery sweep` prints at the end).
std::string format_answers(const StoredSweep& sweep, const SweepAnswers& answers);

}  // namespace orrery::design
