#include "design/libra_solver.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include <glpk.h>
#include <nlopt.h>

namespace orrery::design {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A small LP over GLPK: columns with bounds and costs, rows sum a x (relation) b. Indices are
// 0-based here and shifted to GLPK's 1-based arrays inside.
class Lp {
 public:
  Lp() : lp_(glp_create_prob()) {}
  ~Lp() { glp_delete_prob(lp_); }
  Lp(const Lp&) = delete;
  Lp& operator=(const Lp&) = delete;

  int add_column(double lower, double upper, double cost) {
    const int col = glp_add_cols(lp_, 1);
    if (std::isfinite(lower) && std::isfinite(upper)) {
      glp_set_col_bnds(lp_, col, lower == upper ? GLP_FX : GLP_DB, lower, upper);
    } else if (std::isfinite(lower)) {
      glp_set_col_bnds(lp_, col, GLP_LO, lower, 0.0);
    } else if (std::isfinite(upper)) {
      glp_set_col_bnds(lp_, col, GLP_UP, 0.0, upper);
    } else {
      glp_set_col_bnds(lp_, col, GLP_FR, 0.0, 0.0);
    }
    glp_set_obj_coef(lp_, col, cost);
    return col - 1;
  }
  void set_cost(int col, double cost) { glp_set_obj_coef(lp_, col + 1, cost); }
  void add_row(const std::vector<std::pair<int, double>>& terms, Relation relation, double rhs) {
    const int row = glp_add_rows(lp_, 1);
    const int type = relation == Relation::kEqual       ? GLP_FX
                     : relation == Relation::kLessEqual ? GLP_UP
                                                        : GLP_LO;
    glp_set_row_bnds(lp_, row, type, rhs, rhs);
    std::vector<int> index(1, 0);
    std::vector<double> value(1, 0.0);
    for (const auto& [col, coefficient] : terms) {
      if (coefficient == 0) continue;
      index.push_back(col + 1);
      value.push_back(coefficient);
    }
    glp_set_mat_row(lp_, row, static_cast<int>(index.size() - 1), index.data(), value.data());
  }
  enum class Status { kOptimal, kInfeasible, kUnbounded, kFailed };
  // Solves; `maximize` flips the direction. `warm`: start from the last solve's basis with the
  // dual simplex, as cutting planes want (rows added since keep it dual feasible), instead of
  // presolving and solving from scratch, which grows with every round of cuts.
  Status solve(bool maximize, bool warm = false) {
    glp_set_obj_dir(lp_, maximize ? GLP_MAX : GLP_MIN);
    glp_smcp parm;
    glp_init_smcp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    parm.presolve = warm ? GLP_OFF : GLP_ON;
    if (warm) parm.meth = GLP_DUALP;  // falls back to the primal simplex when it must
    glp_term_out(GLP_OFF);  // GLPK prints scaling notes otherwise
    glp_scale_prob(lp_, GLP_SF_AUTO);
    const int code = glp_simplex(lp_, &parm);
    if (code == GLP_ENOPFS) return Status::kInfeasible;
    if (code == GLP_ENODFS) return Status::kUnbounded;
    if (code != 0) return Status::kFailed;
    switch (glp_get_status(lp_)) {
      case GLP_OPT:
        return Status::kOptimal;
      case GLP_NOFEAS:
        return Status::kInfeasible;
      case GLP_UNBND:
        return Status::kUnbounded;
      default:
        return Status::kFailed;
    }
  }
  double value() const { return glp_get_obj_val(lp_); }
  double column(int col) const { return glp_get_col_prim(lp_, col + 1); }

 private:
  glp_prob* lp_;
};

// The problem in the optimizer's terms: constraints plus an optional budget row.
struct Setup {
  const TrafficModel* model = nullptr;
  std::vector<LinearConstraint> constraints;  // user constraints (+ budget as a row)
  std::vector<bool> carries;                  // dimension d carries some traffic
};

void add_constraints(Lp& lp, const Setup& setup, const std::vector<int>& bw_cols) {
  for (const LinearConstraint& constraint : setup.constraints) {
    std::vector<std::pair<int, double>> terms;
    for (size_t dim = 0; dim < bw_cols.size(); ++dim) {
      terms.emplace_back(bw_cols[dim], constraint.coefficients[dim]);
    }
    lp.add_row(terms, constraint.relation, constraint.rhs);
  }
}

// max beta such that B_d >= beta (`equal`: B_d == beta) for the dimensions in `which`.
struct BetaResult {
  Lp::Status status = Lp::Status::kFailed;
  double beta = 0;
  std::vector<double> bw;
};
BetaResult max_min_bandwidth(const Setup& setup, const std::vector<bool>& which, bool equal) {
  const size_t dims = setup.carries.size();
  Lp lp;
  std::vector<int> cols;
  for (size_t dim = 0; dim < dims; ++dim) cols.push_back(lp.add_column(0.0, kInf, 0.0));
  const int beta = lp.add_column(-kInf, kInf, 1.0);
  add_constraints(lp, setup, cols);
  for (size_t dim = 0; dim < dims; ++dim) {
    if (!which[dim]) continue;
    lp.add_row({{cols[dim], 1.0}, {beta, -1.0}}, equal ? Relation::kEqual : Relation::kGreaterEqual,
               0.0);
  }
  BetaResult result;
  result.status = lp.solve(true);
  if (result.status == Lp::Status::kOptimal) {
    result.beta = lp.column(beta);
    for (size_t dim = 0; dim < dims; ++dim)
      result.bw.push_back(std::max(0.0, lp.column(cols[dim])));
  }
  return result;
}

// Optimizes one linear function of B over the constraints.
Lp::Status optimize_linear(const Setup& setup, const std::vector<double>& cost, bool maximize,
                           double& value) {
  Lp lp;
  std::vector<int> cols;
  for (size_t dim = 0; dim < cost.size(); ++dim)
    cols.push_back(lp.add_column(0.0, kInf, cost[dim]));
  add_constraints(lp, setup, cols);
  const Lp::Status status = lp.solve(maximize);
  if (status == Lp::Status::kOptimal) value = lp.value();
  return status;
}

// Scaled variables for NLopt: B_d = scale_d * y_d (scale_d: the start's bandwidth, so y starts
// at 1 even when a budget leaves a dimension a thousandth of another's), t_p = unit_p * tau_p,
// with a_{p,d} = m_{p,d} / (scale_d * unit_p) at most one, and objective weights
// c_p = count_p * unit_p / reference.
struct Scaled {
  size_t dims = 0;
  size_t collectives = 0;
  std::vector<double> scale;  // by dimension
  double reference = 1;
  std::vector<double> unit;                      // by collective
  std::vector<double> weight;                    // c_p
  std::vector<std::pair<size_t, size_t>> pairs;  // (p, d) with traffic
  std::vector<double> a;                         // by pair
  std::vector<LinearConstraint> rows;            // constraints in y, normalised
  int evaluations = 0;
};

double objective_fn(unsigned n, const double* x, double* grad, void* data) {
  Scaled& s = *static_cast<Scaled*>(data);
  ++s.evaluations;
  double value = 0;
  for (size_t p = 0; p < s.collectives; ++p) value += s.weight[p] * x[s.dims + p];
  if (grad != nullptr) {
    for (size_t i = 0; i < n; ++i) grad[i] = i < s.dims ? 0.0 : s.weight[i - s.dims];
  }
  return value;
}

void epigraph_fn(unsigned m, double* result, unsigned n, const double* x, double* grad,
                 void* data) {
  const Scaled& s = *static_cast<const Scaled*>(data);
  if (grad != nullptr) std::fill(grad, grad + size_t{m} * n, 0.0);
  for (size_t i = 0; i < m; ++i) {
    const auto [p, d] = s.pairs[i];
    const double y = x[d];
    result[i] = s.a[i] / y - x[s.dims + p];
    if (grad != nullptr) {
      grad[i * n + d] = -s.a[i] / (y * y);
      grad[i * n + s.dims + p] = -1.0;
    }
  }
}

double linear_fn(unsigned n, const double* x, double* grad, void* data) {
  const LinearConstraint& row = *static_cast<const LinearConstraint*>(data);
  // NLopt wants g(x) <= 0 (or == 0): a >= row is negated, value and gradient alike.
  const double sign = row.relation == Relation::kGreaterEqual ? -1.0 : 1.0;
  double value = -row.rhs;
  for (size_t i = 0; i < row.coefficients.size(); ++i) value += row.coefficients[i] * x[i];
  if (grad != nullptr) {
    for (size_t i = 0; i < n; ++i) {
      grad[i] = i < row.coefficients.size() ? sign * row.coefficients[i] : 0.0;
    }
  }
  return sign * value;
}

struct NlpResult {
  std::vector<double> bw;
  int evaluations = 0;
};

// Kelley's cutting planes on the outer approximation: a lower bound on min T, and the best
// feasible allocation the LP visited (an upper bound).
struct Bound {
  double lower = -kInf;
  int cuts = 0;
  std::vector<double> best_bw;
  double best_time = kInf;
};

Bound lower_bound(const Setup& setup, const Scaled& s, const std::vector<double>& upper,
                  const std::vector<std::vector<double>>& points, int rounds) {
  const TrafficModel& model = *setup.model;
  Lp lp;
  std::vector<int> y_cols, tau_cols;
  for (size_t d = 0; d < s.dims; ++d) {
    y_cols.push_back(
        lp.add_column(0.0, std::isfinite(upper[d]) ? upper[d] / s.scale[d] : kInf, 0.0));
  }
  for (size_t p = 0; p < s.collectives; ++p) {
    tau_cols.push_back(lp.add_column(0.0, kInf, s.weight[p]));
  }
  Setup scaled_setup = setup;
  for (LinearConstraint& row : scaled_setup.constraints) {
    for (size_t d = 0; d < s.dims; ++d) row.coefficients[d] *= s.scale[d];
  }
  add_constraints(lp, scaled_setup, y_cols);
  Bound bound;
  // Where to cut a dimension the LP left without bandwidth: halfway down from the last such point
  // (any tangent is valid; a cut at y = 0 is not defined).
  std::vector<double> probe(s.dims, 1.0);
  auto add_cuts = [&](std::vector<double> y) {
    for (size_t d = 0; d < s.dims; ++d) {
      if (y[d] > 1e-9 * probe[d]) {
        probe[d] = std::min(probe[d], y[d]);
      } else {
        probe[d] *= 0.5;
        y[d] = probe[d];
      }
    }
    for (size_t i = 0; i < s.pairs.size(); ++i) {
      const auto [p, d] = s.pairs[i];
      // a / y >= a / yh * (2 - y / yh): the tangent at yh.
      lp.add_row({{tau_cols[p], 1.0}, {y_cols[d], s.a[i] / (y[d] * y[d])}}, Relation::kGreaterEqual,
                 2.0 * s.a[i] / y[d]);
      ++bound.cuts;
    }
  };
  for (const std::vector<double>& bw : points) {
    std::vector<double> y(s.dims);
    for (size_t d = 0; d < s.dims; ++d) y[d] = bw[d] / s.scale[d];
    add_cuts(y);
  }
  for (int round = 0; round < rounds; ++round) {
    const Lp::Status st = lp.solve(false, round > 0);
    if (st != Lp::Status::kOptimal) break;
    const double lower = model.compute_ns + lp.value() * s.reference;
    bound.lower = std::max(bound.lower, lower);
    std::vector<double> y(s.dims), bw(s.dims);
    for (size_t d = 0; d < s.dims; ++d) {
      y[d] = std::max(0.0, lp.column(y_cols[d]));
      bw[d] = y[d] * s.scale[d];
    }
    const double time = iteration_time_ns(model, bw);
    if (time < bound.best_time) {
      bound.best_time = time;
      bound.best_bw = bw;
    }
    if (std::isfinite(bound.best_time) &&
        bound.best_time - bound.lower <= 1e-12 * bound.best_time) {
      break;
    }
    add_cuts(y);
  }
  return bound;
}

struct Solved {
  std::vector<double> bw;
  Certificate certificate;
  int evaluations = 0;
};

// PerfOpt over `setup` (whose constraints may include a budget row).
Expected<Solved> solve_perf(const Setup& setup, const SolverOptions& options) {
  const TrafficModel& model = *setup.model;
  const size_t dims = setup.carries.size();

  // A start where every dimension that carries traffic has as much bandwidth as possible.
  BetaResult start = max_min_bandwidth(setup, setup.carries, false);
  if (start.status == Lp::Status::kInfeasible) {
    return Error::make(ErrorKind::kConfig, "the constraints admit no bandwidths (infeasible)");
  }
  std::vector<double> upper(dims, kInf);
  for (size_t dim = 0; dim < dims; ++dim) {
    std::vector<double> unit(dims, 0.0);
    unit[dim] = 1.0;
    double value = 0;
    const Lp::Status status = optimize_linear(setup, unit, true, value);
    if (status == Lp::Status::kOptimal) upper[dim] = value;
    if (status == Lp::Status::kInfeasible) {
      return Error::make(ErrorKind::kConfig, "the constraints admit no bandwidths (infeasible)");
    }
    if (setup.carries[dim] && status == Lp::Status::kOptimal && !(value > 1e-9)) {
      return Error::make(ErrorKind::kConfig,
                         "dimension {} carries traffic but the constraints allow it no bandwidth",
                         dim);
    }
  }
  for (const CollectiveTraffic& collective : model.collectives) {
    bool bounded = false;
    for (size_t dim = 0; dim < dims; ++dim) {
      bounded = bounded || (collective.bytes_per_dim[dim] > 0 && std::isfinite(upper[dim]));
    }
    if (!bounded) {
      return Error::make(ErrorKind::kConfig,
                         "{}: every dimension it uses has unbounded bandwidth under the "
                         "constraints (add a total such as 'sum = 500' or upper bounds)",
                         collective.label);
    }
  }
  if (start.status != Lp::Status::kOptimal) {
    // Unbounded max-min: cap the start at the largest finite upper bound.
    double cap = 1.0;
    for (double u : upper) {
      if (std::isfinite(u)) cap = std::max(cap, u);
    }
    Setup capped = setup;
    for (size_t dim = 0; dim < dims; ++dim) {
      std::vector<double> row(dims, 0.0);
      row[dim] = 1.0;
      capped.constraints.push_back({row, Relation::kLessEqual, cap, "cap"});
    }
    start = max_min_bandwidth(capped, setup.carries, false);
    if (start.status != Lp::Status::kOptimal) {
      return Error::make(ErrorKind::kConfig, "no feasible start found for the constraints");
    }
  }

  Scaled s;
  s.dims = dims;
  s.collectives = model.collectives.size();
  double sum = 0;
  int counted = 0;
  for (size_t dim = 0; dim < dims; ++dim) {
    if (start.bw[dim] > 0) {
      sum += start.bw[dim];
      ++counted;
    }
  }
  const double mean = counted > 0 ? sum / counted : 1.0;
  for (size_t dim = 0; dim < dims; ++dim) {
    s.scale.push_back(start.bw[dim] > 1e-9 * mean ? start.bw[dim] : mean);
  }
  s.reference = 0;
  for (size_t p = 0; p < s.collectives; ++p) {
    const CollectiveTraffic& collective = model.collectives[p];
    double largest = 0;
    for (size_t dim = 0; dim < dims; ++dim) {
      largest = std::max(largest, collective.bytes_per_dim[dim] / s.scale[dim]);
    }
    s.unit.push_back(largest);
    s.reference += collective.count * s.unit.back();
    for (size_t dim = 0; dim < dims; ++dim) {
      if (collective.bytes_per_dim[dim] > 0) {
        s.pairs.emplace_back(p, dim);
        s.a.push_back(collective.bytes_per_dim[dim] / (s.scale[dim] * s.unit.back()));
      }
    }
  }
  if (s.collectives == 0) {
    // Nothing to optimise: every feasible allocation takes the compute time.
    Solved solved;
    solved.bw = start.bw;
    solved.certificate = {true, model.compute_ns, 0.0, 0, 0.0};
    return solved;
  }
  for (size_t p = 0; p < s.collectives; ++p) {
    s.weight.push_back(model.collectives[p].count * s.unit[p] / s.reference);
  }
  for (const LinearConstraint& constraint : setup.constraints) {
    LinearConstraint row = constraint;
    double norm = std::fabs(row.rhs);
    for (size_t dim = 0; dim < dims; ++dim) {
      row.coefficients[dim] *= s.scale[dim];
      norm = std::max(norm, std::fabs(row.coefficients[dim]));
    }
    if (norm == 0) norm = 1;
    for (double& c : row.coefficients) c /= norm;
    row.rhs /= norm;
    s.rows.push_back(row);
  }

  const size_t n = dims + s.collectives;
  std::unique_ptr<nlopt_opt_s, decltype(&nlopt_destroy)> opt(
      nlopt_create(NLOPT_LD_SLSQP, static_cast<unsigned>(n)), &nlopt_destroy);
  std::vector<double> lower(n, 0.0), upper_scaled(n, HUGE_VAL), x(n, 0.0);
  for (size_t dim = 0; dim < dims; ++dim) {
    lower[dim] = setup.carries[dim] ? 1e-9 : 0.0;
    if (std::isfinite(upper[dim])) upper_scaled[dim] = upper[dim] / s.scale[dim];
    x[dim] = std::clamp(start.bw[dim] / s.scale[dim], lower[dim], upper_scaled[dim]);
  }
  for (size_t i = 0; i < s.pairs.size(); ++i) {
    const auto [p, d] = s.pairs[i];
    x[dims + p] = std::max(x[dims + p], s.a[i] / x[d]);
  }
  nlopt_set_lower_bounds(opt.get(), lower.data());
  nlopt_set_upper_bounds(opt.get(), upper_scaled.data());
  nlopt_set_min_objective(opt.get(), objective_fn, &s);
  std::vector<double> tolerances(s.pairs.size(), 1e-12);
  nlopt_add_inequality_mconstraint(opt.get(), static_cast<unsigned>(s.pairs.size()), epigraph_fn,
                                   &s, tolerances.data());
  for (LinearConstraint& row : s.rows) {
    if (row.relation == Relation::kEqual) {
      nlopt_add_equality_constraint(opt.get(), linear_fn, &row, 1e-12);
    } else {
      nlopt_add_inequality_constraint(opt.get(), linear_fn, &row, 1e-12);
    }
  }
  nlopt_set_xtol_rel(opt.get(), options.tolerance);
  nlopt_set_ftol_rel(opt.get(), options.tolerance * 1e-2);
  nlopt_set_maxeval(opt.get(), options.max_evaluations);
  // SLSQP can stop early on a tiny step (its quasi-Newton model gone stale); restarting from
  // where it stopped resets the model. Stop when a restart no longer improves the objective.
  auto run_slsqp = [&](std::vector<double> x0) -> std::pair<bool, std::vector<double>> {
    double value = 0;
    nlopt_result code = nlopt_optimize(opt.get(), x0.data(), &value);
    const auto ok = [](nlopt_result r) {
      return r > 0 || r == NLOPT_ROUNDOFF_LIMITED || r == NLOPT_MAXEVAL_REACHED;
    };
    for (int restart = 0; restart < options.restarts && ok(code); ++restart) {
      std::vector<double> again = x0;
      double improved = 0;
      const nlopt_result next = nlopt_optimize(opt.get(), again.data(), &improved);
      if (!ok(next) || !(improved < value)) break;
      const bool converged = value - improved <= 1e-13 * std::fabs(value);
      x0 = std::move(again);
      value = improved;
      if (converged) break;
    }
    std::vector<double> bw(dims);
    for (size_t dim = 0; dim < dims; ++dim) bw[dim] = x0[dim] * s.scale[dim];
    return {ok(code), bw};
  };
  auto start_x = [&](const std::vector<double>& bw) {
    std::vector<double> x0(n, 0.0);
    for (size_t dim = 0; dim < dims; ++dim) {
      x0[dim] = std::clamp(bw[dim] / s.scale[dim], lower[dim], upper_scaled[dim]);
    }
    for (size_t i = 0; i < s.pairs.size(); ++i) {
      const auto [p, d] = s.pairs[i];
      x0[dims + p] = std::max(x0[dims + p], s.a[i] / x0[d]);
    }
    return x0;
  };
  // Feasibility is judged per constraint relative to its own scale (a budget in $ and a sum in
  // GB/s alike), on the normalised rows.
  auto feasible = [&](const std::vector<double>& bw) {
    std::vector<double> y(dims);
    for (size_t dim = 0; dim < dims; ++dim) y[dim] = bw[dim] / s.scale[dim];
    return constraint_violation(s.rows, y) <= 1e-9;
  };

  Solved solved;
  double best_time = kInf;
  auto consider = [&](const std::vector<double>& bw) {
    if (bw.empty() || !feasible(bw)) return;
    const double time = iteration_time_ns(model, bw);
    if (time < best_time) {
      best_time = time;
      solved.bw = bw;
    }
  };
  const auto [first_ok, first] = run_slsqp(x);
  if (first_ok) consider(first);
  // Kelley's cutting planes: a lower bound, and a second opinion on the optimum. When the LP
  // found a better point than SLSQP, SLSQP polishes that one.
  std::vector<std::vector<double>> points{start.bw};
  if (!solved.bw.empty()) points.push_back(solved.bw);
  Bound bound = lower_bound(setup, s, upper, points, options.cut_rounds);
  if (!bound.best_bw.empty() && bound.best_time < best_time) {
    consider(bound.best_bw);  // kept only when feasible beyond the LP's tolerance
    const auto [again_ok, again] = run_slsqp(start_x(bound.best_bw));
    if (again_ok) consider(again);
  }
  if (solved.bw.empty()) {
    return Error::make(ErrorKind::kConfig, "the optimizer found no feasible bandwidths");
  }
  if (bound.lower < best_time * (1 - 1e-9)) {
    // Cut again at the answer: at an optimum its tangents alone prove it.
    const Bound again = lower_bound(setup, s, upper, {start.bw, solved.bw}, options.cut_rounds);
    bound.lower = std::max(bound.lower, again.lower);
    bound.cuts = again.cuts;
  }
  solved.evaluations = s.evaluations;
  solved.certificate.convex = true;
  solved.certificate.lower_bound_ns = bound.lower;
  solved.certificate.gap = (best_time - bound.lower) / best_time;
  solved.certificate.cuts = bound.cuts;
  solved.certificate.max_violation = constraint_violation(setup.constraints, solved.bw);
  return solved;
}

Setup make_setup(const Problem& problem, const TrafficModel& model) {
  Setup setup;
  setup.model = &model;
  setup.constraints = problem.constraints;
  setup.carries.assign(problem.dimensions.size(), false);
  for (const CollectiveTraffic& collective : model.collectives) {
    for (size_t dim = 0; dim < setup.carries.size(); ++dim) {
      if (collective.bytes_per_dim[dim] > 0) setup.carries[dim] = true;
    }
  }
  return setup;
}

void add_budget(Setup& setup, const TrafficModel& model, double budget) {
  setup.constraints.push_back(
      {model.unit_cost, Relation::kLessEqual, budget, fmt::format("cost <= {}", budget)});
}

bool has_cost_model(const TrafficModel& model) {
  return std::any_of(model.unit_cost.begin(), model.unit_cost.end(),
                     [](double c) { return c > 0; });
}

}  // namespace

Allocation evaluate(const TrafficModel& model, const std::vector<double>& bandwidth) {
  Allocation allocation;
  allocation.bandwidth = bandwidth;
  allocation.comm_ns = communication_time_ns(model, bandwidth);
  allocation.time_ns = model.compute_ns + allocation.comm_ns;
  allocation.cost = network_cost(model, bandwidth);
  return allocation;
}

Expected<std::vector<FrontierPoint>> sweep_frontier(const Problem& problem, int points,
                                                    const SolverOptions& options) {
  Expected<TrafficModel> model = build_traffic_model(problem);
  if (!model) return model.error();
  if (!has_cost_model(*model)) {
    return Error::make(ErrorKind::kConfig, "a cost sweep needs a cost model");
  }
  if (points < 1) return Error::make(ErrorKind::kInvalidArgument, "{} sweep points", points);
  Setup setup = make_setup(problem, *model);
  Expected<Solved> best = solve_perf(setup, options);
  if (!best) return best.error();
  const double top = network_cost(*model, best->bw);
  double cheapest = 0;
  if (optimize_linear(setup, model->unit_cost, false, cheapest) != Lp::Status::kOptimal) {
    return Error::make(ErrorKind::kConfig, "the cheapest feasible network cannot be found");
  }
  std::vector<FrontierPoint> frontier;
  for (int k = 1; k <= points; ++k) {
    const double budget =
        cheapest + (top - cheapest) * static_cast<double>(k) / static_cast<double>(points);
    Setup limited = setup;
    add_budget(limited, *model, budget);
    Expected<Solved> solved = solve_perf(limited, options);
    if (!solved) continue;  // too little budget to give every used dimension bandwidth
    frontier.push_back({budget, evaluate(*model, solved->bw), solved->certificate.gap});
  }
  return frontier;
}

Expected<Solution> solve(const Problem& problem, const SolverOptions& options) {
  Expected<TrafficModel> model = build_traffic_model(problem);
  if (!model) return model.error();
  Setup setup = make_setup(problem, *model);
  const size_t dims = problem.dimensions.size();

  Solution solution;
  solution.objective = problem.objective;
  if (problem.objective != Objective::kPerfOpt && !has_cost_model(*model)) {
    return Error::make(ErrorKind::kConfig, "objective {} needs a cost model",
                       objective_name(problem.objective));
  }

  // The equal split: the largest B with every B_d = B that the constraints allow.
  {
    std::vector<bool> all(dims, true);
    BetaResult equal = max_min_bandwidth(setup, all, true);
    if (equal.status == Lp::Status::kOptimal && equal.beta > 0) {
      solution.has_equal = true;
      solution.equal = evaluate(*model, std::vector<double>(dims, equal.beta));
    }
  }
  if (!problem.baseline.empty()) {
    if (problem.baseline.size() != dims) {
      return Error::make(ErrorKind::kConfig,
                         "the given network has {} bandwidths for {} dimensions",
                         problem.baseline.size(), dims);
    }
    solution.has_baseline = true;
    solution.baseline = evaluate(*model, problem.baseline);
    solution.baseline_violation = constraint_violation(problem.constraints, problem.baseline);
  }

  if (problem.objective == Objective::kPerfOpt || problem.objective == Objective::kPerfOptBudget) {
    if (problem.objective == Objective::kPerfOptBudget) {
      if (!(problem.budget > 0)) {
        return Error::make(ErrorKind::kConfig, "objective PerfOptBudget needs a budget > 0");
      }
      double cheapest = 0;
      if (optimize_linear(setup, model->unit_cost, false, cheapest) == Lp::Status::kOptimal &&
          problem.budget < cheapest) {
        return Error::make(ErrorKind::kConfig,
                           "budget {:.6g} is below the cheapest network the constraints allow "
                           "({:.6g})",
                           problem.budget, cheapest);
      }
      add_budget(setup, *model, problem.budget);
    }
    Expected<Solved> solved = solve_perf(setup, options);
    if (!solved) return solved.error();
    solution.optimum = evaluate(*model, solved->bw);
    solution.certificate = solved->certificate;
    solution.evaluations = solved->evaluations;
    return solution;
  }

  // PerfPerCost: minimise time x cost along the frontier, then refine the budget by golden-section
  // search around the best sweep point.
  constexpr int kSweep = 24;
  Expected<std::vector<FrontierPoint>> frontier = sweep_frontier(problem, kSweep, options);
  if (!frontier) return frontier.error();
  if (frontier->empty()) return Error::make(ErrorKind::kConfig, "no feasible budget found");
  auto product = [](const Allocation& a) { return a.time_ns * a.cost; };
  size_t best = 0;
  for (size_t k = 1; k < frontier->size(); ++k) {
    if (product((*frontier)[k].allocation) < product((*frontier)[best].allocation)) best = k;
  }
  Allocation best_allocation = (*frontier)[best].allocation;
  double lo = best > 0 ? (*frontier)[best - 1].budget : (*frontier)[best].budget * 0.5;
  double hi = best + 1 < frontier->size() ? (*frontier)[best + 1].budget : (*frontier)[best].budget;
  auto at_budget = [&](double budget) -> Allocation {
    Setup limited = setup;
    add_budget(limited, *model, budget);
    Expected<Solved> solved = solve_perf(limited, options);
    if (!solved) {
      Allocation none;
      none.time_ns = kInf;
      none.cost = kInf;
      return none;
    }
    return evaluate(*model, solved->bw);
  };
  const double ratio = (std::sqrt(5.0) - 1.0) / 2.0;
  double x1 = hi - ratio * (hi - lo), x2 = lo + ratio * (hi - lo);
  Allocation a1 = at_budget(x1), a2 = at_budget(x2);
  for (int iteration = 0; iteration < 40 && hi - lo > 1e-9 * hi; ++iteration) {
    if (product(a1) <= product(a2)) {
      hi = x2;
      x2 = x1;
      a2 = a1;
      x1 = hi - ratio * (hi - lo);
      a1 = at_budget(x1);
    } else {
      lo = x1;
      x1 = x2;
      a1 = a2;
      x2 = lo + ratio * (hi - lo);
      a2 = at_budget(x2);
    }
  }
  for (const Allocation* candidate : {&a1, &a2}) {
    if (product(*candidate) < product(best_allocation)) best_allocation = *candidate;
  }
  solution.optimum = best_allocation;
  solution.certificate.convex = false;
  solution.certificate.max_violation =
      constraint_violation(problem.constraints, best_allocation.bandwidth);
  solution.frontier = std::move(*frontier);
  return solution;
}

}  // namespace orrery::design
