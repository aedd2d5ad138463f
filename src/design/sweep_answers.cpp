#include "design/sweep_answers.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/units.h"

namespace orrery::design {

namespace {

// Faster, then cheaper, then the lower id.
bool better(const StoredRow& a, const StoredRow& b) {
  if (a.result.iteration_ns != b.result.iteration_ns) {
    return a.result.iteration_ns < b.result.iteration_ns;
  }
  if (a.result.cost != b.result.cost) return a.result.cost < b.result.cost;
  return a.result.id < b.result.id;
}

std::string pattern_of(const std::string& reason) {
  std::string out;
  bool in_number = false;
  for (size_t i = 0; i < reason.size(); ++i) {
    const char c = reason[i];
    const bool digit = std::isdigit(static_cast<unsigned char>(c)) != 0;
    const bool joins = in_number && (c == '.' || c == ',') && i + 1 < reason.size() &&
                       std::isdigit(static_cast<unsigned char>(reason[i + 1])) != 0;
    if (digit || joins) {
      if (!in_number) out += '#';
      in_number = true;
      continue;
    }
    in_number = false;
    out += c;
  }
  return out;
}

std::string ms(double ns) { return fmt::format("{:.3f} ms", ns / 1e6); }

}  // namespace

std::string value_text(const StoredSweep& sweep, size_t axis, const Value& value) {
  switch (sweep.axes[axis].type) {
    case ColumnType::kText:
      return value.text;
    case ColumnType::kInteger:
      return fmt::format("{}", static_cast<int64_t>(std::llround(value.number)));
    case ColumnType::kReal:
      return fmt::format("{}", value.number);
  }
  return value.text;
}

SweepAnswers answer_sweep(const StoredSweep& sweep, size_t top) {
  SweepAnswers a;
  a.rows = sweep.rows.size();
  std::vector<size_t> ok;
  for (size_t i = 0; i < sweep.rows.size(); ++i) {
    switch (sweep.rows[i].result.status) {
      case PointStatus::kOk:
        ++a.ok;
        ok.push_back(i);
        break;
      case PointStatus::kRejected:
        ++a.rejected;
        break;
      case PointStatus::kFailed:
        ++a.failed;
        break;
    }
  }
  const auto by_row = [&](size_t x, size_t y) { return better(sweep.rows[x], sweep.rows[y]); };

  // Best points.
  a.best = ok;
  std::sort(a.best.begin(), a.best.end(), by_row);
  if (a.best.size() > top) a.best.resize(top);

  // Pareto frontier: by cost, keeping each point faster than every cheaper one.
  std::vector<size_t> by_cost = ok;
  std::sort(by_cost.begin(), by_cost.end(), [&](size_t x, size_t y) {
    const PointResult& p = sweep.rows[x].result;
    const PointResult& q = sweep.rows[y].result;
    if (p.cost != q.cost) return p.cost < q.cost;
    return better(sweep.rows[x], sweep.rows[y]);
  });
  double fastest = INFINITY;
  for (size_t row : by_cost) {
    if (sweep.rows[row].result.iteration_ns < fastest) {
      a.pareto.push_back(row);
      fastest = sweep.rows[row].result.iteration_ns;
    }
  }

  // Budgets: the file's, else five steps up to the most expensive point that ran.
  std::vector<double> budgets = sweep.budgets;
  if (budgets.empty() && !by_cost.empty()) {
    const double low = sweep.rows[by_cost.front()].result.cost;
    const double high = sweep.rows[by_cost.back()].result.cost;
    for (int k = 1; k <= 5; ++k) budgets.push_back(low + (high - low) * k / 5.0);
    budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
  }
  for (double budget : budgets) {
    BudgetAnswer answer;
    answer.budget = budget;
    for (size_t row : ok) {
      const PointResult& r = sweep.rows[row].result;
      if (r.cost > budget) continue;
      if (!answer.best || better(sweep.rows[row], sweep.rows[*answer.best])) answer.best = row;
      if (r.offloaded == "none" && (!answer.best_no_offload ||
                                    better(sweep.rows[row], sweep.rows[*answer.best_no_offload]))) {
        answer.best_no_offload = row;
      }
    }
    a.budgets.push_back(answer);
  }

  // Sensitivity of each axis.
  for (size_t axis = 0; axis < sweep.axes.size(); ++axis) {
    std::vector<std::pair<std::string, size_t>> best;
    std::vector<double> order;  // numeric value (or first appearance) per entry
    std::map<std::string, size_t> index;
    for (size_t row : ok) {
      const Value& v = sweep.rows[row].axes[axis];
      const std::string text = value_text(sweep, axis, v);
      const auto [it, inserted] = index.emplace(text, best.size());
      if (inserted) {
        best.emplace_back(text, row);
        order.push_back(sweep.axes[axis].type == ColumnType::kText
                            ? static_cast<double>(best.size())
                            : v.number);
      } else if (better(sweep.rows[row], sweep.rows[best[it->second].second])) {
        best[it->second].second = row;
      }
    }
    if (best.size() < 2) continue;
    std::vector<size_t> perm(best.size());
    for (size_t k = 0; k < perm.size(); ++k) perm[k] = k;
    std::stable_sort(perm.begin(), perm.end(),
                     [&](size_t x, size_t y) { return order[x] < order[y]; });
    AxisSensitivity s;
    s.axis = axis;
    double low = INFINITY, high = 0;
    for (size_t k : perm) {
      s.best.push_back(best[k]);
      const double t = sweep.rows[best[k].second].result.iteration_ns;
      low = std::min(low, t);
      high = std::max(high, t);
    }
    s.spread = low > 0 ? high / low : 1;
    a.sensitivity.push_back(std::move(s));
  }
  std::stable_sort(
      a.sensitivity.begin(), a.sensitivity.end(),
      [](const AxisSensitivity& x, const AxisSensitivity& y) { return x.spread > y.spread; });

  // Clusters at their best plans.
  std::map<std::string, size_t> cluster_best;
  for (size_t row : ok) {
    std::string key;
    for (size_t axis = 0; axis < sweep.plan_axes_from; ++axis) {
      key += value_text(sweep, axis, sweep.rows[row].axes[axis]) + "|";
    }
    auto [it, inserted] = cluster_best.emplace(key, row);
    if (!inserted && better(sweep.rows[row], sweep.rows[it->second])) it->second = row;
  }
  a.clusters = cluster_best.size();
  for (const auto& [key, row] : cluster_best) {
    if (!a.fastest_cluster || better(sweep.rows[row], sweep.rows[*a.fastest_cluster])) {
      a.fastest_cluster = row;
    }
    if (!a.slowest_cluster || better(sweep.rows[*a.slowest_cluster], sweep.rows[row])) {
      a.slowest_cluster = row;
    }
  }
  if (cluster_best.size() >= 2) {
    a.cluster_spread = sweep.rows[*a.slowest_cluster].result.iteration_ns /
                       sweep.rows[*a.fastest_cluster].result.iteration_ns;
  }

  // Memory expansion.
  for (size_t row : ok) {
    std::optional<size_t>& side =
        sweep.rows[row].result.offloaded == "none" ? a.best_no_offload : a.best_offload;
    if (!side || better(sweep.rows[row], sweep.rows[*side])) side = row;
  }
  if (a.best_no_offload && a.best_offload) {
    a.expansion_gain = sweep.rows[*a.best_no_offload].result.iteration_ns /
                       sweep.rows[*a.best_offload].result.iteration_ns;
  }

  // Rejections by reason.
  std::map<std::string, size_t> reason_index;
  for (const StoredRow& row : sweep.rows) {
    if (row.result.status == PointStatus::kOk) continue;
    const std::string pattern = pattern_of(row.result.reason);
    const auto [it, inserted] = reason_index.emplace(pattern, a.reasons.size());
    if (inserted) a.reasons.push_back({pattern, row.result.reason, 0});
    ++a.reasons[it->second].count;
  }
  std::stable_sort(a.reasons.begin(), a.reasons.end(),
                   [](const ReasonCount& x, const ReasonCount& y) { return x.count > y.count; });
  return a;
}

std::string format_answers(const StoredSweep& sweep, const SweepAnswers& a) {
  auto describe = [&](size_t row) {
    std::vector<std::string> parts;
    for (size_t axis = 0; axis < sweep.axes.size(); ++axis) {
      bool varies = false;
      for (const AxisSensitivity& s : a.sensitivity) varies = varies || s.axis == axis;
      if (!varies) continue;
      parts.push_back(fmt::format("{}={}", sweep.axes[axis].name,
                                  value_text(sweep, axis, sweep.rows[row].axes[axis])));
    }
    const PointResult& r = sweep.rows[row].result;
    return fmt::format("point {}: {} (${:.4g}M{}) {}", r.id, ms(r.iteration_ns), r.cost / 1e6,
                       r.offloaded == "none" ? "" : ", offload " + r.offloaded,
                       fmt::join(parts, " "));
  };
  std::string out = fmt::format("{}: {} points: {} ran, {} rejected, {} failed\n", sweep.name,
                                format_count(a.rows), format_count(a.ok), format_count(a.rejected),
                                format_count(a.failed));
  if (!a.best.empty()) out += fmt::format("best     {}\n", describe(a.best.front()));
  if (a.cluster_spread > 0) {
    out += fmt::format("clusters {} at their best plans: the slowest is {:.2f}x the fastest\n",
                       a.clusters, a.cluster_spread);
  }
  if (a.expansion_gain > 0) {
    out += fmt::format("expansion: best with offload {}, without {}: {:.2f}x\n",
                       ms(sweep.rows[*a.best_offload].result.iteration_ns),
                       ms(sweep.rows[*a.best_no_offload].result.iteration_ns), a.expansion_gain);
  }
  for (const AxisSensitivity& s : a.sensitivity) {
    std::vector<std::string> values;
    for (const auto& [text, row] : s.best) {
      values.push_back(fmt::format("{} {}", text, ms(sweep.rows[row].result.iteration_ns)));
    }
    out += fmt::format("axis {:<16} {:.2f}x  ({})\n", sweep.axes[s.axis].name, s.spread,
                       fmt::join(values, ", "));
  }
  out += fmt::format("pareto   {} points from ${:.4g}M\n", a.pareto.size(),
                     a.pareto.empty() ? 0.0 : sweep.rows[a.pareto.front()].result.cost / 1e6);
  for (size_t k = 0; k < a.reasons.size() && k < 5; ++k) {
    out +=
        fmt::format("rejected {} x {}\n", format_count(a.reasons[k].count), a.reasons[k].example);
  }
  return out;
}

}  // namespace orrery::design
