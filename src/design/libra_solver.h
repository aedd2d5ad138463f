// design/libra_solver.h: optimal per-dimension bandwidths for a LIBRA problem, with a certificate.
//
// PerfOpt minimises compute + sum_p w_p t_p subject to m_{p,d} / B_d <= t_p and the linear
// constraints: a convex program (m / B is convex for B > 0), solved with NLopt's SLSQP in scaled
// variables from a strictly feasible start (GLPK finds it). Optimality is certified by an outer
// approximation: replacing every m / B_d by its tangents at the solution (and at the points the LP
// visits, Kelley's cutting planes) gives an LP whose optimum, found by GLPK, is a lower bound on
// the true optimum; the gap between the solution's time and that bound is reported.
// PerfOptBudget adds cost(B) <= budget (still convex). PerfPerCost minimises time x cost, which is
// not convex: it is found on the time-versus-cost frontier (a sweep of budgets, then a
// golden-section search on the budget), and reported as not certified.
// Deterministic: the same problem gives bit-identical results.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "design/libra_model.h"

namespace orrery::design {

// One evaluated network: bandwidths and what they give.
struct Allocation {
  std::vector<double> bandwidth;  // GB/s per NPU, by dimension
  double time_ns = 0;             // iteration time
  double comm_ns = 0;             // its communication part
  double cost = 0;                // $ (0 without a cost model)
};

struct Certificate {
  bool convex = false;        // the objective solved is convex, so the bound is meaningful
  double lower_bound_ns = 0;  // no feasible allocation is faster than this
  double gap = 0;             // (time - lower bound) / time
  int cuts = 0;               // tangent cuts in the last LP
  double max_violation = 0;   // largest constraint violation, in its own units ($ for a budget)
};

struct FrontierPoint {
  double budget = 0;
  Allocation allocation;
  double gap = 0;  // the certificate's relative gap at this budget
};

struct Solution {
  Objective objective = Objective::kPerfOpt;
  Allocation optimum;
  Certificate certificate;
  bool has_equal = false;     // an equal split satisfies the constraints
  Allocation equal;           // the largest equal split that does
  bool has_baseline = false;  // the problem named a given network
  Allocation baseline;
  double baseline_violation = 0;
  std::vector<FrontierPoint> frontier;  // filled by sweep_frontier
  int evaluations = 0;                  // NLopt objective evaluations
};

struct SolverOptions {
  double tolerance = 1e-10;  // relative, on the scaled variables
  int max_evaluations = 20000;
  int cut_rounds = 30;  // Kelley rounds for the lower bound
  int restarts = 50;    // SLSQP restarts from its own answer while they improve it
};

// Solves `problem` for its objective. Errors: infeasible constraints, a dimension that carries
// traffic but is forced to zero bandwidth, unbounded bandwidth (PerfOpt without an upper limit),
// a budget below the cheapest feasible network, a cost objective without a cost model.
Expected<Solution> solve(const Problem& problem, const SolverOptions& options = {});

// The time-optimal network for `points` budgets evenly spaced between the cheapest feasible
// network (excluded) and the cost of the unconstrained PerfOpt optimum (included).
Expected<std::vector<FrontierPoint>> sweep_frontier(const Problem& problem, int points,
                                                    const SolverOptions& options = {});

// Evaluates one allocation.
Allocation evaluate(const TrafficModel& model, const std::vector<double>& bandwidth);

}  // namespace orrery::design
