#include "design/sweep_report.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "core/markup.h"
#include "core/units.h"

namespace orrery::design {

namespace {

// The parts of an iteration, in drawing order.
constexpr std::array<const char*, 8> kPartNames = {"compute",    "exposed tp", "exposed cp",
                                                   "exposed ep", "exposed pp", "exposed dp",
                                                   "bubble",     "offload"};
constexpr std::array<const char*, 8> kPartColors = {"#4e79a7", "#f28e2b", "#edc948", "#b07aa1",
                                                    "#76b7b2", "#e15759", "#bab0ac", "#59a14f"};

std::array<double, 8> parts_of(const PointResult& r) {
  return {r.compute_ns,    r.exposed_ns[0], r.exposed_ns[1], r.exposed_ns[2],
          r.exposed_ns[3], r.exposed_ns[4], r.bubble_ns,     r.offload_ns};
}

std::string ms(double ns) { return fmt::format("{:.3f}", ns / 1e6); }

// The axes that vary among the points that ran (the ones worth showing per point).
std::vector<size_t> varying_axes(const SweepAnswers& a) {
  std::vector<size_t> axes;
  for (const AxisSensitivity& s : a.sensitivity) axes.push_back(s.axis);
  std::sort(axes.begin(), axes.end());
  return axes;
}

std::string point_label(const StoredSweep& sweep, const std::vector<size_t>& axes, size_t row) {
  std::vector<std::string> parts;
  for (size_t axis : axes) {
    parts.push_back(fmt::format("{}={}", sweep.axes[axis].name,
                                value_text(sweep, axis, sweep.rows[row].axes[axis])));
  }
  return fmt::format("{}", fmt::join(parts, " "));
}

std::string breakdown_svg(const StoredSweep& sweep, const std::vector<size_t>& rows) {
  const double bar = 22, gap = 8, left = 80, right = 20, top = 40, width = 900;
  const double height = top + static_cast<double>(rows.size()) * (bar + gap) + 50;
  double longest = 0;
  for (size_t row : rows) longest = std::max(longest, sweep.rows[row].result.iteration_ns);
  if (longest <= 0) longest = 1;
  auto px = [&](double ns) { return ns / longest * (width - left - right); };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  double x = left;
  for (size_t p = 0; p < kPartNames.size(); ++p) {
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"12\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{:.1f}\" "
        "y=\"22\">{}</text>\n",
        x, kPartColors[p], x + 16, kPartNames[p]);
    x += 100;
  }
  double y = top;
  for (size_t row : rows) {
    const PointResult& r = sweep.rows[row].result;
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">point {}</text>\n",
                       left - 6, y + bar * 0.7, r.id);
    double at = left;
    const std::array<double, 8> parts = parts_of(r);
    for (size_t p = 0; p < parts.size(); ++p) {
      if (parts[p] <= 0) continue;
      svg += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\"><title>point "
          "{}: {} {} ms</title></rect>\n",
          at, y, px(parts[p]), bar, kPartColors[p], r.id, kPartNames[p], ms(parts[p]));
      at += px(parts[p]);
    }
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{} ms</text>\n", at + 4, y + bar * 0.7,
                       ms(r.iteration_ns));
    y += bar + gap;
  }
  svg += "</svg>\n";
  return svg;
}

std::string pareto_svg(const StoredSweep& sweep, const SweepAnswers& a,
                       const std::vector<size_t>& axes) {
  const double width = 900, height = 500, left = 90, right = 30, top = 30, bottom = 60;
  double x_min = INFINITY, x_max = 0, y_min = INFINITY, y_max = 0;
  for (const StoredRow& row : sweep.rows) {
    if (row.result.status != PointStatus::kOk) continue;
    x_min = std::min(x_min, row.result.cost);
    x_max = std::max(x_max, row.result.cost);
    y_min = std::min(y_min, row.result.iteration_ns);
    y_max = std::max(y_max, row.result.iteration_ns);
  }
  if (!(x_max > x_min)) {
    x_min = x_min * 0.9;
    x_max = x_max * 1.1 + 1;
  }
  if (!(y_max > y_min)) {
    y_min = y_min * 0.9;
    y_max = y_max * 1.1 + 1;
  }
  // Times spread over orders of magnitude: a logarithmic time axis.
  const double ly_min = std::log10(y_min), ly_max = std::log10(y_max);
  const double pad_x = 0.04 * (x_max - x_min), pad_y = 0.04 * (ly_max - ly_min) + 1e-9;
  auto px = [&](double c) {
    return left + (c - x_min + pad_x) / (x_max - x_min + 2 * pad_x) * (width - left - right);
  };
  auto py = [&](double t) {
    return height - bottom -
           (std::log10(t) - ly_min + pad_y) / (ly_max - ly_min + 2 * pad_y) *
               (height - top - bottom);
  };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<line x1=\"{2}\" y1=\"{3}\" x2=\"{4}\" y2=\"{3}\" stroke=\"black\"/>\n"
      "<line x1=\"{2}\" y1=\"{5}\" x2=\"{2}\" y2=\"{3}\" stroke=\"black\"/>\n",
      width, height, left, height - bottom, width - right, top);
  for (int k = 0; k <= 5; ++k) {
    const double c = x_min + (x_max - x_min) * k / 5.0;
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:.4g}</text>\n",
        px(c), height - bottom, top, height - bottom + 16, c / 1e6);
    const double t = std::pow(10.0, ly_min + (ly_max - ly_min) * k / 5.0);
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:.4g}</text>\n",
        left, py(t), width - right, left - 6, py(t) + 4, t / 1e6);
  }
  svg += fmt::format(
      "<text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\">cluster cost (million $)</text>\n"
      "<text x=\"18\" y=\"{2}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {2})\">iteration "
      "time (ms, log scale)</text>\n",
      (left + width - right) / 2, height - 16, (top + height - bottom) / 2);
  for (size_t row = 0; row < sweep.rows.size(); ++row) {
    const PointResult& r = sweep.rows[row].result;
    if (r.status != PointStatus::kOk) continue;
    svg += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\" "
        "fill-opacity=\"0.5\"><title>point "
        "{}: {} ms, ${:.4g}M</title></circle>\n",
        px(r.cost), py(r.iteration_ns), r.offloaded == "none" ? "#4e79a7" : "#59a14f", r.id,
        ms(r.iteration_ns), r.cost / 1e6);
  }
  std::string line;
  for (size_t row : a.pareto) {
    line += fmt::format("{:.1f},{:.1f} ", px(sweep.rows[row].result.cost),
                        py(sweep.rows[row].result.iteration_ns));
  }
  svg += fmt::format(
      "<polyline points=\"{}\" fill=\"none\" stroke=\"#e15759\" stroke-width=\"2\"/>\n", line);
  for (size_t row : a.pareto) {
    const PointResult& r = sweep.rows[row].result;
    svg += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#e15759\"><title>Pareto point {}: {} "
        "ms, ${:.4g}M, {}</title></circle>\n",
        px(r.cost), py(r.iteration_ns), r.id, ms(r.iteration_ns), r.cost / 1e6,
        escape_markup(point_label(sweep, axes, row)));
  }
  svg += fmt::format(
      "<circle cx=\"{0}\" cy=\"{1}\" r=\"4\" fill=\"#4e79a7\"/><text x=\"{2}\" y=\"{3}\">nothing "
      "offloaded</text><circle cx=\"{0}\" cy=\"{4}\" r=\"4\" fill=\"#59a14f\"/><text x=\"{2}\" "
      "y=\"{5}\">offload to the expansion tier</text><circle cx=\"{0}\" cy=\"{6}\" r=\"4\" "
      "fill=\"#e15759\"/><text x=\"{2}\" y=\"{7}\">Pareto frontier</text>\n",
      width - right - 200, top + 10, width - right - 190, top + 14, top + 28, top + 32, top + 46,
      top + 50);
  svg += "</svg>\n";
  return svg;
}

std::string sensitivity_svg(const StoredSweep& sweep, const SweepAnswers& a) {
  const double bar = 18, gap = 6, left = 160, width = 700, top = 10;
  const double height = top + static_cast<double>(a.sensitivity.size()) * (bar + gap) + 10;
  double widest = 1;
  for (const AxisSensitivity& s : a.sensitivity) widest = std::max(widest, s.spread);
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  double y = top;
  for (const AxisSensitivity& s : a.sensitivity) {
    // Bars grow with log(spread): 1x is no bar.
    const double length =
        std::log(s.spread) / std::log(widest > 1 ? widest : 2) * (width - left - 80);
    svg += fmt::format(
        "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text><rect x=\"{}\" y=\"{:.1f}\" "
        "width=\"{:.1f}\" height=\"{}\" fill=\"#4e79a7\"/><text x=\"{:.1f}\" "
        "y=\"{:.1f}\">{:.2f}x</text>\n",
        left - 6, y + bar * 0.75, escape_markup(sweep.axes[s.axis].name), left, y,
        std::max(length, 1.0), bar, left + std::max(length, 1.0) + 4, y + bar * 0.75, s.spread);
    y += bar + gap;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace

std::string sweep_report_html(const StoredSweep& sweep, const SweepAnswers& a) {
  const std::vector<size_t> axes = varying_axes(a);
  const std::string name = escape_markup(sweep.name);
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>orrery sweep: {0}</title>\n<style>\n"
      "body {{ font-family: sans-serif; margin: 2em; color: #222; max-width: 1200px; }}\n"
      "table {{ border-collapse: collapse; margin: 0.5em 0 1.5em 0; font-size: 13px; }}\n"
      "th, td {{ border: 1px solid #bbb; padding: 0.2em 0.5em; text-align: right; }}\n"
      "th {{ background: #eee; }}\ntd.l {{ text-align: left; }}\n"
      "pre {{ background: #f6f6f6; padding: 1em; overflow-x: auto; font-size: 12px; }}\n"
      "</style>\n</head>\n<body>\n<h1>orrery sweep: {0}</h1>\n",
      name);

  // ---- summary ----
  html += "<h2>Summary</h2>\n<ul>\n";
  html += fmt::format("<li>workload {}, global batch {}</li>\n", escape_markup(sweep.workload),
                      format_count(sweep.global_batch));
  html += fmt::format("<li>{} points of {}: {} simulated, {} rejected, {} failed</li>\n",
                      format_count(a.rows), format_count(sweep.points), format_count(a.ok),
                      format_count(a.rejected), format_count(a.failed));
  if (!a.best.empty()) {
    const PointResult& r = sweep.rows[a.best.front()].result;
    html += fmt::format("<li>best: point {}, {} ms per iteration, ${:.4g}M, {}</li>\n", r.id,
                        ms(r.iteration_ns), r.cost / 1e6,
                        escape_markup(point_label(sweep, axes, a.best.front())));
  }
  if (a.cluster_spread > 0) {
    html += fmt::format(
        "<li>{} cluster configurations, each at its best plan: the slowest (point {}) takes "
        "<b>{:.2f}x</b> the time of the fastest (point {})</li>\n",
        a.clusters, sweep.rows[*a.slowest_cluster].result.id, a.cluster_spread,
        sweep.rows[*a.fastest_cluster].result.id);
  }
  if (a.expansion_gain > 0) {
    html += fmt::format(
        "<li>memory expansion: the best point offloading to the expansion tier (point {}, {} ms) "
        "against the best offloading nothing (point {}, {} ms): <b>{:.2f}x</b></li>\n",
        sweep.rows[*a.best_offload].result.id, ms(sweep.rows[*a.best_offload].result.iteration_ns),
        sweep.rows[*a.best_no_offload].result.id,
        ms(sweep.rows[*a.best_no_offload].result.iteration_ns), a.expansion_gain);
  }
  html += "</ul>\n";

  // ---- best points ----
  if (!a.best.empty()) {
    html += "<h2>Best points</h2>\n";
    html += breakdown_svg(sweep, a.best);
    html += "<table>\n<tr><th>point</th>";
    for (size_t axis : axes)
      html += fmt::format("<th>{}</th>", escape_markup(sweep.axes[axis].name));
    html +=
        "<th>time (ms)</th><th>compute</th><th>tp</th><th>cp</th><th>ep</th><th>pp</th><th>dp</th>"
        "<th>bubble</th><th>offload</th><th>offloaded</th><th>HBM GiB</th><th>tier GiB</th>"
        "<th>cost $M</th><th>per s</th></tr>\n";
    for (size_t row : a.best) {
      const PointResult& r = sweep.rows[row].result;
      html += fmt::format("<tr><td>{}</td>", r.id);
      for (size_t axis : axes) {
        html += fmt::format("<td>{}</td>",
                            escape_markup(value_text(sweep, axis, sweep.rows[row].axes[axis])));
      }
      html += fmt::format("<td>{}</td><td>{}</td>", ms(r.iteration_ns), ms(r.compute_ns));
      for (double e : r.exposed_ns) html += fmt::format("<td>{}</td>", ms(e));
      html += fmt::format(
          "<td>{}</td><td>{}</td><td class=\"l\">{}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.4g}"
          "</td><td>{:.4g}</td></tr>\n",
          ms(r.bubble_ns), ms(r.offload_ns), escape_markup(r.offloaded),
          static_cast<double>(r.hbm_bytes) / kGiB, static_cast<double>(r.expansion_bytes) / kGiB,
          r.cost / 1e6, r.throughput);
    }
    html += "</table>\n";
  }

  // ---- Pareto ----
  if (a.ok > 0) {
    html += "<h2>Time against cost</h2>\n";
    html += pareto_svg(sweep, a, axes);
    html +=
        "<table>\n<tr><th>point</th><th>cost $M</th><th>time (ms)</th><th>offloaded</th>"
        "<th class=\"l\">configuration</th></tr>\n";
    for (size_t row : a.pareto) {
      const PointResult& r = sweep.rows[row].result;
      html += fmt::format(
          "<tr><td>{}</td><td>{:.4g}</td><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td>"
          "</tr>\n",
          r.id, r.cost / 1e6, ms(r.iteration_ns), escape_markup(r.offloaded),
          escape_markup(point_label(sweep, axes, row)));
    }
    html += "</table>\n";
  }

  // ---- budgets ----
  if (!a.budgets.empty()) {
    html +=
        "<h2>Best per budget</h2>\n<table>\n<tr><th>budget $M</th><th>best point</th>"
        "<th>time (ms)</th><th>offloaded</th><th>best without offload</th><th>time (ms)</th>"
        "<th>expansion gain</th></tr>\n";
    for (const BudgetAnswer& b : a.budgets) {
      html += fmt::format("<tr><td>{:.4g}</td>", b.budget / 1e6);
      if (b.best) {
        const PointResult& r = sweep.rows[*b.best].result;
        html += fmt::format("<td>{}</td><td>{}</td><td class=\"l\">{}</td>", r.id,
                            ms(r.iteration_ns), escape_markup(r.offloaded));
      } else {
        html += "<td>-</td><td>-</td><td>-</td>";
      }
      if (b.best_no_offload) {
        const PointResult& r = sweep.rows[*b.best_no_offload].result;
        html += fmt::format("<td>{}</td><td>{}</td>", r.id, ms(r.iteration_ns));
      } else {
        html += "<td>-</td><td>-</td>";
      }
      if (b.best && b.best_no_offload) {
        html += fmt::format("<td>{:.3f}x</td>", sweep.rows[*b.best_no_offload].result.iteration_ns /
                                                    sweep.rows[*b.best].result.iteration_ns);
      } else {
        html += "<td>-</td>";
      }
      html += "</tr>\n";
    }
    html += "</table>\n";
  }

  // ---- sensitivity ----
  if (!a.sensitivity.empty()) {
    html +=
        "<h2>Sensitivity</h2>\n<p>How far the best time moves along each axis: the slowest "
        "of the best times per value over the fastest.</p>\n";
    html += sensitivity_svg(sweep, a);
    html +=
        "<table>\n<tr><th>axis</th><th>spread</th><th class=\"l\">best time per value "
        "(ms)</th></tr>\n";
    for (const AxisSensitivity& s : a.sensitivity) {
      std::vector<std::string> values;
      for (const auto& [text, row] : s.best) {
        values.push_back(fmt::format("{}: {} (point {})", escape_markup(text),
                                     ms(sweep.rows[row].result.iteration_ns),
                                     sweep.rows[row].result.id));
      }
      html +=
          fmt::format("<tr><td>{}</td><td>{:.3f}x</td><td class=\"l\">{}</td></tr>\n",
                      escape_markup(sweep.axes[s.axis].name), s.spread, fmt::join(values, "; "));
    }
    html += "</table>\n";
  }

  // ---- rejections ----
  if (!a.reasons.empty()) {
    html +=
        "<h2>Rejected and failed points</h2>\n<table>\n<tr><th>points</th>"
        "<th class=\"l\">reason (an example)</th></tr>\n";
    for (const ReasonCount& r : a.reasons) {
      html += fmt::format("<tr><td>{}</td><td class=\"l\">{}</td></tr>\n", format_count(r.count),
                          escape_markup(r.example));
    }
    html += "</table>\n";
  }
  html += fmt::format("<h2>The sweep file</h2>\n<pre>{}</pre>\n</body>\n</html>\n",
                      escape_markup(sweep.sweep_file));
  return html;
}

}  // namespace orrery::design
