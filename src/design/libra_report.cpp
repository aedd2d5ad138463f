#include "design/libra_report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/markup.h"

namespace orrery::design {

namespace {

std::vector<double> traffic_per_dim(const TrafficModel& model, size_t dims) {
  std::vector<double> traffic(dims, 0.0);
  for (const CollectiveTraffic& c : model.collectives) {
    for (size_t d = 0; d < dims; ++d) traffic[d] += c.count * c.bytes_per_dim[d];
  }
  return traffic;
}

std::string ms(double ns) { return fmt::format("{:.4f} ms", ns / 1e6); }

std::string speedup_line(const char* what, const Allocation& other, const Allocation& optimum,
                         bool priced) {
  std::string line = fmt::format("{:<12} {} (optimum is {:.4f}x faster)", what, ms(other.time_ns),
                                 other.time_ns / optimum.time_ns);
  if (priced && other.cost > 0) {
    line += fmt::format(", cost ${:.6g} (optimum {:+.2f}%)", other.cost,
                        100.0 * (optimum.cost - other.cost) / other.cost);
  }
  return line;
}

nlohmann::json allocation_json(const Allocation& a) {
  return {{"bandwidth_gbps", a.bandwidth},
          {"time_ns", a.time_ns},
          {"communication_ns", a.comm_ns},
          {"cost", a.cost}};
}

}  // namespace

std::string format_libra_table(const Problem& problem, const TrafficModel& model,
                               const Solution& solution) {
  const size_t dims = problem.dimensions.size();
  const bool priced =
      std::any_of(model.unit_cost.begin(), model.unit_cost.end(), [](double c) { return c > 0; });
  const std::vector<double> traffic = traffic_per_dim(model, dims);
  std::string out = fmt::format(
      "LIBRA: {} on {} dimensions ({} NPUs), objective {}, {} layers, {} distinct collectives\n",
      problem.workload_name.empty() ? "workload" : problem.workload_name, dims, model.npus,
      objective_name(solution.objective), problem.layers.size(), model.collectives.size());
  out += fmt::format("{:>3}  {:<14} {:>5} {:>12} {:>10} {:>10} {:>14} {:>12} {:>12}\n", "dim",
                     "topology", "size", "optimal GB/s", "equal GB/s", "given GB/s",
                     "traffic MB/it", "busy ms", "cost $");
  for (size_t d = 0; d < dims; ++d) {
    const double b = solution.optimum.bandwidth[d];
    out += fmt::format(
        "{:>3}  {:<14} {:>5} {:>12.3f} {:>10} {:>10} {:>14.3f} {:>12.4f} {:>12.6g}\n", d,
        topology_name(problem.dimensions[d].kind), problem.dimensions[d].size, b,
        solution.has_equal ? fmt::format("{:.3f}", solution.equal.bandwidth[d]) : "-",
        solution.has_baseline ? fmt::format("{:.3f}", solution.baseline.bandwidth[d]) : "-",
        traffic[d] / 1e6, b > 0 ? traffic[d] / b / 1e6 : 0.0, model.unit_cost[d] * b);
  }
  out +=
      fmt::format("{:<12} {} (compute {} + communication {})", "optimum",
                  ms(solution.optimum.time_ns), ms(model.compute_ns), ms(solution.optimum.comm_ns));
  if (priced) out += fmt::format(", cost ${:.6g}", solution.optimum.cost);
  out += "\n";
  if (solution.has_equal) {
    out += speedup_line("equal split", solution.equal, solution.optimum, priced) + "\n";
  } else {
    out += "equal split  not allowed by the constraints\n";
  }
  if (solution.has_baseline) {
    out += speedup_line("given", solution.baseline, solution.optimum, priced);
    if (solution.baseline_violation > 1e-9) {
      out += fmt::format(" [violates the constraints by {:.6g} GB/s]", solution.baseline_violation);
    }
    out += "\n";
  }
  if (solution.certificate.convex) {
    out += fmt::format(
        "certificate  convex; lower bound {} from {} tangent cuts (GLPK), gap {:.2e}, constraint "
        "violation {:.1e}\n",
        ms(solution.certificate.lower_bound_ns), solution.certificate.cuts,
        // A bound above the time by a few ulps is rounding, shown as 0; JSON keeps the raw value.
        solution.certificate.gap > -1e-12 ? std::max(0.0, solution.certificate.gap)
                                          : solution.certificate.gap,
        solution.certificate.max_violation);
  } else {
    out += fmt::format(
        "certificate  none: time x cost is not convex; minimum over a 24-budget frontier refined "
        "by golden section (time x cost = {:.6g} ms x $)\n",
        solution.optimum.time_ns / 1e6 * solution.optimum.cost);
  }
  return out;
}

nlohmann::json libra_json(const Problem& problem, const TrafficModel& model,
                          const Solution& solution) {
  const size_t dims = problem.dimensions.size();
  const std::vector<double> traffic = traffic_per_dim(model, dims);
  nlohmann::json out;
  out["workload"] = problem.workload_name;
  out["objective"] = objective_name(solution.objective);
  out["npus"] = model.npus;
  out["compute_ns"] = model.compute_ns;
  if (solution.objective == Objective::kPerfOptBudget) out["budget"] = problem.budget;
  nlohmann::json dimensions = nlohmann::json::array();
  for (size_t d = 0; d < dims; ++d) {
    dimensions.push_back({{"topology", topology_name(problem.dimensions[d].kind)},
                          {"size", problem.dimensions[d].size},
                          {"cost_dimension", problem.dimensions[d].cost_dimension},
                          {"traffic_bytes", traffic[d]},
                          {"unit_cost", model.unit_cost[d]},
                          {"optimal_gbps", solution.optimum.bandwidth[d]}});
  }
  out["dimensions"] = dimensions;
  nlohmann::json constraints = nlohmann::json::array();
  for (const LinearConstraint& c : problem.constraints) constraints.push_back(c.text);
  out["constraints"] = constraints;
  out["optimum"] = allocation_json(solution.optimum);
  if (solution.has_equal) {
    out["equal_split"] = allocation_json(solution.equal);
    out["equal_split"]["speedup"] = solution.equal.time_ns / solution.optimum.time_ns;
    if (solution.equal.cost > 0) {
      out["equal_split"]["cost_change"] =
          (solution.optimum.cost - solution.equal.cost) / solution.equal.cost;
    }
  }
  if (solution.has_baseline) {
    out["given"] = allocation_json(solution.baseline);
    out["given"]["speedup"] = solution.baseline.time_ns / solution.optimum.time_ns;
    out["given"]["constraint_violation"] = solution.baseline_violation;
    if (solution.baseline.cost > 0) {
      out["given"]["cost_change"] =
          (solution.optimum.cost - solution.baseline.cost) / solution.baseline.cost;
    }
  }
  out["certificate"] = {{"convex", solution.certificate.convex},
                        {"lower_bound_ns", solution.certificate.lower_bound_ns},
                        {"gap", solution.certificate.gap},
                        {"cuts", solution.certificate.cuts},
                        {"max_violation_gbps", solution.certificate.max_violation}};
  nlohmann::json collectives = nlohmann::json::array();
  for (const CollectiveTraffic& c : model.collectives) {
    collectives.push_back(
        {{"first", c.label}, {"count", c.count}, {"bytes_per_dim", c.bytes_per_dim}});
  }
  out["collectives"] = collectives;
  return out;
}

namespace {}  // namespace

std::string frontier_svg(const Problem& problem, const Solution& solution,
                         const std::vector<FrontierPoint>& frontier) {
  struct Mark {
    double cost, time;
    const char* label;
    const char* color;
  };
  std::vector<Mark> marks;
  marks.push_back({solution.optimum.cost, solution.optimum.time_ns, "optimum", "#d62728"});
  if (solution.has_equal) {
    marks.push_back({solution.equal.cost, solution.equal.time_ns, "equal split", "#1f77b4"});
  }
  if (solution.has_baseline) {
    marks.push_back({solution.baseline.cost, solution.baseline.time_ns, "given", "#2ca02c"});
  }
  double x_min = INFINITY, x_max = -INFINITY, y_min = INFINITY, y_max = -INFINITY;
  auto extend = [&](double x, double y) {
    if (!std::isfinite(x) || !std::isfinite(y)) return;
    x_min = std::min(x_min, x);
    x_max = std::max(x_max, x);
    y_min = std::min(y_min, y);
    y_max = std::max(y_max, y);
  };
  for (const FrontierPoint& p : frontier) extend(p.allocation.cost, p.allocation.time_ns);
  for (const Mark& m : marks) extend(m.cost, m.time);
  if (!(x_max > x_min)) {
    x_min -= 1;
    x_max += 1;
  }
  if (!(y_max > y_min)) {
    y_min -= 1;
    y_max += 1;
  }
  // Time axis from zero-ish would hide the differences: pad 5% around the data instead.
  const double x_pad = 0.05 * (x_max - x_min), y_pad = 0.05 * (y_max - y_min);
  x_min -= x_pad;
  x_max += x_pad;
  y_min -= y_pad;
  y_max += y_pad;
  const double width = 720, height = 460, left = 90, right = 30, top = 50, bottom = 60;
  auto px = [&](double x) { return left + (x - x_min) / (x_max - x_min) * (width - left - right); };
  auto py = [&](double y) {
    return height - bottom - (y - y_min) / (y_max - y_min) * (height - top - bottom);
  };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"24\" font-size=\"15\">LIBRA time-versus-cost frontier: {3} ({4} "
      "dimensions)</text>\n",
      width, height, left,
      escape_markup(problem.workload_name.empty() ? "workload" : problem.workload_name),
      problem.dimensions.size());
  // Axes and ticks.
  svg += fmt::format(
      "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n"
      "<line x1=\"{0}\" y1=\"{3}\" x2=\"{0}\" y2=\"{1}\" stroke=\"black\"/>\n",
      left, height - bottom, width - right, top);
  for (int k = 0; k <= 5; ++k) {
    const double x = x_min + (x_max - x_min) * k / 5.0, y = y_min + (y_max - y_min) * k / 5.0;
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ccc\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:.4g}</text>\n",
        px(x), height - bottom, top, height - bottom + 16, x / 1e6);
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ccc\"/>"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:.5g}</text>\n",
        left, py(y), width - right, left - 6, py(y) + 4, y / 1e6);
  }
  svg += fmt::format(
      "<text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\">network cost (million $)</text>\n"
      "<text x=\"18\" y=\"{2}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {2})\">iteration "
      "time (ms)</text>\n",
      (left + width - right) / 2, height - 16, (top + height - bottom) / 2);
  // The frontier.
  std::string points;
  for (const FrontierPoint& p : frontier) {
    if (!std::isfinite(p.allocation.time_ns)) continue;
    points += fmt::format("{:.1f},{:.1f} ", px(p.allocation.cost), py(p.allocation.time_ns));
  }
  svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#555\" stroke-width=\"2\"/>\n",
                     points);
  for (const FrontierPoint& p : frontier) {
    if (!std::isfinite(p.allocation.time_ns)) continue;
    std::string bw;
    for (double b : p.allocation.bandwidth) bw += fmt::format("{:.1f} ", b);
    svg += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"#555\"><title>budget ${:.6g}: {:.4f} "
        "ms, B = {}GB/s</title></circle>\n",
        px(p.allocation.cost), py(p.allocation.time_ns), p.budget, p.allocation.time_ns / 1e6, bw);
  }
  double legend_y = top + 10;
  for (const Mark& m : marks) {
    svg += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"6\" fill=\"none\" stroke=\"{}\" "
        "stroke-width=\"2.5\"/>\n",
        px(m.cost), py(m.time), m.color);
    svg += fmt::format(
        "<circle cx=\"{0}\" cy=\"{1:.1f}\" r=\"6\" fill=\"none\" stroke=\"{2}\" "
        "stroke-width=\"2.5\"/><text x=\"{3}\" y=\"{4:.1f}\">{5}: {6:.4f} ms, ${7:.4g}M</text>\n",
        width - right - 250, legend_y, m.color, width - right - 238, legend_y + 4, m.label,
        m.time / 1e6, m.cost / 1e6);
    legend_y += 20;
  }
  svg += "</svg>\n";
  return svg;
}

std::string frontier_html(const Problem& problem, const Solution& solution,
                          const std::vector<FrontierPoint>& frontier) {
  const std::string name =
      escape_markup(problem.workload_name.empty() ? "workload" : problem.workload_name);
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>LIBRA frontier: {0}</title>\n<style>\n"
      "body {{ font-family: sans-serif; margin: 2em; color: #222; }}\n"
      "table {{ border-collapse: collapse; margin-top: 1em; }}\n"
      "th, td {{ border: 1px solid #bbb; padding: 0.25em 0.6em; text-align: right; }}\n"
      "th {{ background: #eee; }}\n</style>\n</head>\n<body>\n"
      "<h1>LIBRA time-versus-cost frontier: {0}</h1>\n",
      name);
  auto bandwidths = [](const std::vector<double>& bw) {
    std::string text;
    for (size_t d = 0; d < bw.size(); ++d)
      text += fmt::format("{}{:.2f}", d == 0 ? "" : " / ", bw[d]);
    return text;
  };
  html += "<ul>\n";
  html += fmt::format(
      "<li>optimum ({}): {:.4f} ms, ${:.4g}M, B = {} GB/s{}</li>\n",
      objective_name(solution.objective), solution.optimum.time_ns / 1e6,
      solution.optimum.cost / 1e6, bandwidths(solution.optimum.bandwidth),
      // A gap below zero is rounding (the bound equals the time): shown as 0.
      solution.certificate.convex
          ? fmt::format(", certified gap {:.2g}", std::max(0.0, solution.certificate.gap))
          : ", not certified");
  if (solution.has_equal) {
    html += fmt::format("<li>equal split: {:.4f} ms, ${:.4g}M, B = {} GB/s</li>\n",
                        solution.equal.time_ns / 1e6, solution.equal.cost / 1e6,
                        bandwidths(solution.equal.bandwidth));
  }
  if (solution.has_baseline) {
    html += fmt::format("<li>given network: {:.4f} ms, ${:.4g}M, B = {} GB/s</li>\n",
                        solution.baseline.time_ns / 1e6, solution.baseline.cost / 1e6,
                        bandwidths(solution.baseline.bandwidth));
  }
  html += "</ul>\n";
  html += frontier_svg(problem, solution, frontier);
  html += "<table>\n<tr><th>budget ($M)</th><th>cost ($M)</th><th>time (ms)</th>";
  for (size_t d = 0; d < problem.dimensions.size(); ++d) {
    html += fmt::format("<th>B{} (GB/s)</th>", d);
  }
  html += "<th>gap</th></tr>\n";
  for (const FrontierPoint& p : frontier) {
    html += fmt::format("<tr><td>{:.6g}</td><td>{:.6g}</td><td>{:.4f}</td>", p.budget / 1e6,
                        p.allocation.cost / 1e6, p.allocation.time_ns / 1e6);
    for (const double b : p.allocation.bandwidth) html += fmt::format("<td>{:.2f}</td>", b);
    html += fmt::format("<td>{:.2g}</td></tr>\n", std::max(0.0, p.gap));
  }
  html += "</table>\n</body>\n</html>\n";
  return html;
}

}  // namespace orrery::design
