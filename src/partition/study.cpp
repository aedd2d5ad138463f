#include "partition/study.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "core/markup.h"
#include "core/units.h"

namespace orrery::partition {

const MethodStudy* Study::find(Method method) const {
  for (const MethodStudy& m : methods) {
    if (m.method == method) return &m;
  }
  return nullptr;
}

namespace {

struct Point {
  Evaluation evaluation;
  Partition partition;
};

Expected<Point> evaluate(Partitioner& partitioner, Method method, PartitionOptions options,
                         double keep, const Dataset& test) {
  options.keep = keep;
  Expected<Partition> part = partitioner.run(method, options);
  if (!part) return part.error();
  Point point;
  point.evaluation.keep = keep;
  point.evaluation.accuracy = accuracy(forward(part->model, test.features), test.labels);
  point.evaluation.traffic_values = part->traffic_values();
  point.evaluation.flops_per_worker = part->flops_per_worker();
  point.partition = std::move(*part);
  return point;
}

}  // namespace

Expected<Study> run_study(Partitioner& partitioner, int64_t calibration_rows, const Dataset& test,
                          const StudyOptions& options) {
  const Model& model = partitioner.model();
  if (Status valid = check_dataset(test, model); !valid) return valid.error();
  if (Status valid = partitioner.check_workers(options.partition.workers); !valid) {
    return valid.error();
  }
  if (!(options.max_drop >= 0.0)) {
    return Error::make(ErrorKind::kInvalidArgument, "the accuracy drop must be >= 0");
  }
  Study study;
  study.workers = options.partition.workers;
  study.bytes_per_value = options.bytes_per_value;
  study.max_drop = options.max_drop;
  study.calibration_rows = calibration_rows;
  study.test_rows = test.rows();
  study.unpartitioned_accuracy = accuracy(forward(model, test.features), test.labels);
  study.full_traffic = partitioner.full_traffic(options.partition.workers);
  const double target = study.unpartitioned_accuracy - options.max_drop - 1e-12;

  std::vector<double> grid;
  if (options.keep) {
    grid = {*options.keep};
  } else {
    for (int32_t i = 0; i + 1 < options.grid_points; ++i) grid.push_back(std::pow(2.0, -0.5 * i));
    grid.push_back(0.0);
  }
  for (Method method : options.methods) {
    MethodStudy ms;
    ms.method = method;
    // The contiguous split keeps everything, whatever the budget.
    const std::vector<double> shares =
        method == Method::kContiguous ? std::vector<double>{1.0} : grid;
    std::vector<Point> points;
    for (double keep : shares) {
      Expected<Point> p = evaluate(partitioner, method, options.partition, keep, test);
      if (!p) return p.error();
      points.push_back(std::move(*p));
    }
    auto best_index = [&]() {
      int64_t best = -1;
      for (size_t i = 0; i < points.size(); ++i) {
        const Evaluation& e = points[i].evaluation;
        if (e.accuracy < target) continue;
        if (best < 0 ||
            e.traffic_values < points[static_cast<size_t>(best)].evaluation.traffic_values) {
          best = static_cast<int64_t>(i);
        }
      }
      return best;
    };
    int64_t best = best_index();
    if (!options.keep && best >= 0 && method != Method::kContiguous) {
      // Bisection between the best share and the next smaller one of the grid.
      double hi = points[static_cast<size_t>(best)].evaluation.keep;
      double lo = 0.0;
      for (double keep : grid) {
        if (keep < hi) {
          lo = keep;
          break;
        }
      }
      if (lo < hi) {
        for (int32_t step = 0; step < options.refine_steps; ++step) {
          const double mid = 0.5 * (lo + hi);
          Expected<Point> p = evaluate(partitioner, method, options.partition, mid, test);
          if (!p) return p.error();
          const bool holds = p->evaluation.accuracy >= target;
          points.push_back(std::move(*p));
          (holds ? hi : lo) = mid;
        }
      }
      best = best_index();
    }
    ms.within_drop = best >= 0;
    if (best < 0) {
      // Nothing holds the accuracy: the operating point is the most accurate one.
      best = 0;
      for (size_t i = 1; i < points.size(); ++i) {
        if (points[i].evaluation.accuracy > points[static_cast<size_t>(best)].evaluation.accuracy) {
          best = static_cast<int64_t>(i);
        }
      }
    }
    ms.operating = points[static_cast<size_t>(best)].evaluation;
    ms.partition = std::move(points[static_cast<size_t>(best)].partition);
    for (Point& p : points) ms.curve.push_back(p.evaluation);
    std::stable_sort(ms.curve.begin(), ms.curve.end(),
                     [](const Evaluation& a, const Evaluation& b) { return a.keep > b.keep; });
    study.methods.push_back(std::move(ms));
  }
  study.latency_ns.assign(study.methods.size(), std::nullopt);
  return study;
}

namespace {

nlohmann::json evaluation_json(const Evaluation& e, int64_t bytes_per_value) {
  nlohmann::json j;
  j["accuracy"] = e.accuracy;
  j["traffic_bytes"] = e.traffic_values * bytes_per_value;
  j["flops_per_worker"] = e.flops_per_worker;
  j["keep"] = e.keep;
  return j;
}

}  // namespace

nlohmann::json study_json(const Study& study) {
  nlohmann::json out;
  out["workers"] = study.workers;
  out["unpartitioned_accuracy"] = study.unpartitioned_accuracy;
  out["max_accuracy_drop"] = study.max_drop;
  out["bytes_per_value"] = study.bytes_per_value;
  out["calibration_rows"] = study.calibration_rows;
  out["test_rows"] = study.test_rows;
  int64_t full = 0;
  for (int64_t v : study.full_traffic) full += v;
  out["full_layer_traffic_bytes"] = full * study.bytes_per_value;
  nlohmann::json methods = nlohmann::json::object();
  for (size_t i = 0; i < study.methods.size(); ++i) {
    const MethodStudy& m = study.methods[i];
    nlohmann::json j = evaluation_json(m.operating, study.bytes_per_value);
    j["within_accuracy_drop"] = m.within_drop;
    if (study.latency_ns[i]) j["latency_ns"] = *study.latency_ns[i];
    nlohmann::json layers = nlohmann::json::array();
    for (const LayerPlan& plan : m.partition.layers) {
      nlohmann::json layer;
      layer["layer"] = m.partition.model.layers[plan.layer].name;
      layer["traffic_bytes"] =
          static_cast<int64_t>(std::llround(plan.traffic.sum())) * study.bytes_per_value;
      layers.push_back(layer);
    }
    j["layers"] = layers;
    nlohmann::json curve = nlohmann::json::array();
    for (const Evaluation& e : m.curve) curve.push_back(evaluation_json(e, study.bytes_per_value));
    j["curve"] = curve;
    methods[std::string(method_name(m.method))] = j;
  }
  out["methods"] = methods;
  return out;
}

std::string format_study(const Study& study) {
  std::string out;
  int64_t full = 0;
  for (int64_t v : study.full_traffic) full += v;
  out += fmt::format(
      "workers {}, unpartitioned accuracy {:.2f}% on {} test rows, target within "
      "{:.2f} points\n",
      study.workers, 100.0 * study.unpartitioned_accuracy, study.test_rows, 100.0 * study.max_drop);
  out += fmt::format("{:<11} {:>6} {:>9} {:>14} {:>9} {:>16} {:>12}\n", "method", "keep",
                     "accuracy", "traffic B/inf", "vs contig", "max FLOPs/worker", "latency");
  const MethodStudy* contiguous = study.find(Method::kContiguous);
  for (size_t i = 0; i < study.methods.size(); ++i) {
    const MethodStudy& m = study.methods[i];
    const Evaluation& e = m.operating;
    const int64_t bytes = e.traffic_values * study.bytes_per_value;
    std::string ratio = "-";
    if (contiguous && bytes > 0) {
      ratio = fmt::format("{:.2f}x", static_cast<double>(contiguous->operating.traffic_values) /
                                         static_cast<double>(e.traffic_values));
    } else if (contiguous && bytes == 0) {
      ratio = "inf";
    }
    const int64_t max_flops =
        e.flops_per_worker.empty()
            ? 0
            : *std::max_element(e.flops_per_worker.begin(), e.flops_per_worker.end());
    std::string latency = "-";
    if (study.latency_ns[i])
      latency = fmt::format("{:.3f} us", static_cast<double>(*study.latency_ns[i]) / 1e3);
    out += fmt::format("{:<11} {:>6.4f} {:>8.2f}% {:>14} {:>9} {:>16} {:>12}{}\n",
                       method_name(m.method), e.keep, 100.0 * e.accuracy,
                       format_count(static_cast<uint64_t>(bytes)), ratio,
                       format_count(static_cast<uint64_t>(max_flops)), latency,
                       m.within_drop ? "" : "  (no budget holds the accuracy)");
  }
  out += fmt::format("contiguous split, every weight kept: {} B per inference over the layers\n",
                     format_count(static_cast<uint64_t>(full * study.bytes_per_value)));
  return out;
}

std::string study_svg(const Study& study, const std::string& title) {
  constexpr double kWidth = 720, kHeight = 440, kLeft = 70, kRight = 150, kTop = 40, kBottom = 55;
  const double plot_w = kWidth - kLeft - kRight;
  const double plot_h = kHeight - kTop - kBottom;
  double max_traffic = 1.0;
  double min_acc = study.unpartitioned_accuracy - std::max(0.05, 3 * study.max_drop);
  for (const MethodStudy& m : study.methods) {
    for (const Evaluation& e : m.curve) {
      max_traffic =
          std::max(max_traffic, static_cast<double>(e.traffic_values * study.bytes_per_value));
    }
  }
  min_acc = std::max(0.0, std::floor(min_acc * 20.0) / 20.0);
  const double max_acc =
      std::min(1.0, std::ceil((study.unpartitioned_accuracy + 0.005) * 100.0) / 100.0);
  auto x_of = [&](double bytes) { return kLeft + plot_w * bytes / max_traffic; };
  auto y_of = [&](double acc) {
    const double clamped = std::clamp(acc, min_acc, max_acc);
    return kTop + plot_h * (max_acc - clamped) / (max_acc - min_acc);
  };
  static constexpr const char* kColors[] = {"#d62728", "#1f77b4", "#7f7f7f", "#2ca02c", "#9467bd"};
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"{0}\" height=\"{1}\" "
      "fill=\"white\"/>\n<text x=\"{2}\" y=\"22\" font-size=\"14\">{3}</text>\n",
      kWidth, kHeight, kLeft, escape_markup(title));
  // Axes and ticks.
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" "
      "stroke=\"#444\"/>\n",
      kLeft, kTop, plot_w, plot_h);
  for (int i = 0; i <= 5; ++i) {
    const double bytes = max_traffic * i / 5.0;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                       x_of(bytes), kTop + plot_h + 16,
                       format_count(static_cast<uint64_t>(std::llround(bytes))));
  }
  for (double acc = min_acc; acc <= max_acc + 1e-9; acc += 0.01) {
    if (std::fmod(std::round(acc * 100.0), max_acc - min_acc > 0.1 ? 5.0 : 1.0) != 0.0) continue;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{:.0f}%</text>\n",
                       kLeft - 6, y_of(acc) + 4, acc * 100.0);
  }
  svg += fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">cross-worker traffic "
      "per inference (bytes)</text>\n",
      kLeft + plot_w / 2, kHeight - 14);
  svg += fmt::format(
      "<text transform=\"translate(18,{:.1f}) rotate(-90)\" "
      "text-anchor=\"middle\">test accuracy</text>\n",
      kTop + plot_h / 2);
  // The unpartitioned accuracy and the target below it.
  for (const double acc :
       {study.unpartitioned_accuracy, study.unpartitioned_accuracy - study.max_drop}) {
    svg += fmt::format(
        "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#999\" "
        "stroke-dasharray=\"4 3\"/>\n",
        kLeft, kLeft + plot_w, y_of(acc), y_of(acc));
  }
  for (size_t i = 0; i < study.methods.size(); ++i) {
    const MethodStudy& m = study.methods[i];
    const char* color = kColors[static_cast<size_t>(m.method) % 5];
    std::vector<Evaluation> by_traffic = m.curve;
    std::stable_sort(by_traffic.begin(), by_traffic.end(),
                     [](const Evaluation& a, const Evaluation& b) {
                       return a.traffic_values < b.traffic_values;
                     });
    std::string points;
    for (const Evaluation& e : by_traffic) {
      points += fmt::format("{:.1f},{:.1f} ",
                            x_of(static_cast<double>(e.traffic_values * study.bytes_per_value)),
                            y_of(e.accuracy));
    }
    svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n",
                       color, points);
    const Evaluation& op = m.operating;
    svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" fill=\"{}\"/>\n",
                       x_of(static_cast<double>(op.traffic_values * study.bytes_per_value)),
                       y_of(op.accuracy), color);
    const double ly = kTop + 14 + 18 * static_cast<double>(i);
    svg += fmt::format(
        "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"{3}\" "
        "stroke-width=\"2\"/><text x=\"{4}\" y=\"{5:.1f}\">{6}</text>\n",
        kWidth - kRight + 12, kWidth - kRight + 32, ly, color, kWidth - kRight + 38, ly + 4,
        method_name(m.method));
  }
  svg += fmt::format(
      "<text x=\"{}\" y=\"{:.1f}\" fill=\"#666\">dashed: unpartitioned, and {:.1f} "
      "points below; dots: operating points</text>\n",
      kLeft, kTop - 6, 100.0 * study.max_drop);
  svg += "</svg>\n";
  return svg;
}

}  // namespace orrery::partition
