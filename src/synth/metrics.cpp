#include "synth/metrics.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>

namespace orrery::synth {
namespace {

// 1..8 -> 0..7; 9-16 -> 8; 17-32 -> 9; 33-64 -> 10; 65+ -> 11 (0 counts as the first bin).
size_t size_bin(uint32_t size) {
  if (size <= 8) return size == 0 ? 0 : size - 1;
  if (size <= 16) return 8;
  if (size <= 32) return 9;
  return size <= 64 ? 10 : 11;
}

// 0..8 -> 0..8; 9-16 -> 9; 17-32 -> 10; 33+ -> 11.
size_t degree_bin(uint32_t degree) {
  if (degree <= 8) return degree;
  if (degree <= 16) return 9;
  return degree <= 32 ? 10 : 11;
}

size_t log2_bin(uint32_t value) {
  return std::min<size_t>(static_cast<size_t>(std::bit_width(value)), 19);
}

void normalize(Histogram& histogram) {
  const double total = std::accumulate(histogram.begin(), histogram.end(), 0.0);
  if (total > 0) {
    for (double& value : histogram) value /= total;
  }
}

}  // namespace

std::map<std::string, Histogram> structural_statistics(const EncodedDag& graph) {
  std::map<std::string, Histogram> stats;
  Dag shape;
  shape.nodes.resize(graph.size());
  shape.edges = graph.edges;
  const std::vector<uint32_t> level = kahn_levels(shape);
  const uint32_t depth = graph.size() == 0 ? 0 : *std::max_element(level.begin(), level.end()) + 1;
  std::vector<uint32_t> layer_sizes(depth, 0);
  for (uint32_t value : level) ++layer_sizes[value];
  Histogram& layers = stats["layer_size"] = Histogram(12, 0.0);
  for (uint32_t size : layer_sizes) layers[size_bin(size)] += 1;

  std::vector<uint32_t> in(graph.size(), 0), out(graph.size(), 0);
  for (const auto& [parent, child] : graph.edges) {
    ++out[parent];
    ++in[child];
  }
  Histogram& in_degree = stats["in_degree"] = Histogram(12, 0.0);
  Histogram& out_degree = stats["out_degree"] = Histogram(12, 0.0);
  for (uint32_t node = 0; node < graph.size(); ++node) {
    in_degree[degree_bin(in[node])] += 1;
    out_degree[degree_bin(out[node])] += 1;
  }
  Histogram& nodes = stats["nodes"] = Histogram(20, 0.0);
  nodes[log2_bin(graph.size())] = 1;
  Histogram& depths = stats["depth"] = Histogram(20, 0.0);
  depths[log2_bin(depth)] = 1;
  for (auto& [name, histogram] : stats) normalize(histogram);
  return stats;
}

Histogram class_histogram(const EncodedDag& graph, size_t attr, uint32_t classes) {
  Histogram histogram(std::max<uint32_t>(classes, 1), 0.0);
  for (const NodeClasses& node : graph.x) {
    histogram[std::min<size_t>(node[attr], histogram.size() - 1)] += 1;
  }
  normalize(histogram);
  return histogram;
}

std::map<std::string, Histogram> graph_statistics(const EncodedDag& graph,
                                                  const Codebook& codebook) {
  std::map<std::string, Histogram> stats = structural_statistics(graph);
  const auto classes = codebook.class_counts();
  for (size_t attr = 0; attr < kAttrCount; ++attr) {
    stats[std::string(attr_name(static_cast<Attr>(attr)))] =
        class_histogram(graph, attr, classes[attr]);
  }
  constexpr size_t kCollectives = kNodeKindCount - static_cast<size_t>(NodeKind::kAllReduce);
  Histogram& mix = stats["collective_mix"] = Histogram(kCollectives + 1, 0.0);
  for (const NodeClasses& node : graph.x) {
    const auto kind = static_cast<NodeKind>(node[0]);
    if (is_collective(kind))
      mix[static_cast<size_t>(kind) - static_cast<size_t>(NodeKind::kAllReduce)] += 1;
  }
  if (std::accumulate(mix.begin(), mix.end(), 0.0) == 0) mix[kCollectives] = 1;
  normalize(mix);
  return stats;
}

std::map<std::string, std::pair<double, double>> mmd_table(const std::vector<EncodedDag>& real,
                                                           const std::vector<EncodedDag>& model,
                                                           const std::vector<EncodedDag>& baseline,
                                                           const GraphStatistics& statistics) {
  auto stats_of = [&](const std::vector<EncodedDag>& graphs) {
    std::map<std::string, std::vector<Histogram>> out;
    for (const EncodedDag& graph : graphs) {
      for (auto& [name, histogram] : statistics(graph)) out[name].push_back(std::move(histogram));
    }
    return out;
  };
  const auto real_stats = stats_of(real);
  const auto model_stats = stats_of(model);
  const auto base_stats = stats_of(baseline);
  std::map<std::string, std::pair<double, double>> table;
  for (const auto& [name, histograms] : real_stats) {
    const auto m = model_stats.find(name);
    const auto b = base_stats.find(name);
    table[name] = {m == model_stats.end() ? 0.0 : mmd_squared(histograms, m->second),
                   b == base_stats.end() ? 0.0 : mmd_squared(histograms, b->second)};
  }
  return table;
}

double total_variation(const Histogram& a, const Histogram& b) {
  const size_t size = std::max(a.size(), b.size());
  double sum = 0;
  for (size_t idx = 0; idx < size; ++idx) {
    const double pa = idx < a.size() ? a[idx] : 0.0;
    const double pb = idx < b.size() ? b[idx] : 0.0;
    sum += std::abs(pa - pb);
  }
  return sum / 2;
}

double mmd_squared(const std::vector<Histogram>& x, const std::vector<Histogram>& y, double sigma) {
  if (x.empty() || y.empty()) return 0;
  auto kernel = [&](const Histogram& a, const Histogram& b) {
    const double d = total_variation(a, b);
    return std::exp(-d * d / (2 * sigma * sigma));
  };
  auto mean_kernel = [&](const std::vector<Histogram>& a, const std::vector<Histogram>& b) {
    double sum = 0;
    for (const Histogram& p : a) {
      for (const Histogram& q : b) sum += kernel(p, q);
    }
    return sum / (static_cast<double>(a.size()) * static_cast<double>(b.size()));
  };
  return std::max(0.0, mean_kernel(x, x) + mean_kernel(y, y) - 2 * mean_kernel(x, y));
}

double wasserstein1(std::vector<double> a, std::vector<double> b) {
  if (a.empty() || b.empty()) return 0;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  // Integral of |F_a - F_b| over the merged breakpoints.
  std::vector<double> points = a;
  points.insert(points.end(), b.begin(), b.end());
  std::sort(points.begin(), points.end());
  double distance = 0;
  size_t ia = 0, ib = 0;
  for (size_t idx = 0; idx + 1 < points.size(); ++idx) {
    while (ia < a.size() && a[ia] <= points[idx]) ++ia;
    while (ib < b.size() && b[ib] <= points[idx]) ++ib;
    const double fa = static_cast<double>(ia) / static_cast<double>(a.size());
    const double fb = static_cast<double>(ib) / static_cast<double>(b.size());
    distance += std::abs(fa - fb) * (points[idx + 1] - points[idx]);
  }
  return distance;
}

double pearson(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = std::min(a.size(), b.size());
  if (n < 2) return 0;
  const double ma = std::accumulate(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), 0.0) /
                    static_cast<double>(n);
  const double mb = std::accumulate(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n), 0.0) /
                    static_cast<double>(n);
  double sab = 0, saa = 0, sbb = 0;
  for (size_t idx = 0; idx < n; ++idx) {
    sab += (a[idx] - ma) * (b[idx] - mb);
    saa += (a[idx] - ma) * (a[idx] - ma);
    sbb += (b[idx] - mb) * (b[idx] - mb);
  }
  if (saa <= 0 || sbb <= 0) return 0;
  return sab / std::sqrt(saa * sbb);
}

namespace {

std::vector<double> ranks_of(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return values[x] < values[y]; });
  std::vector<double> ranks(values.size());
  for (size_t first = 0; first < order.size();) {
    size_t last = first;
    while (last + 1 < order.size() && values[order[last + 1]] == values[order[first]]) ++last;
    const double rank = (static_cast<double>(first) + static_cast<double>(last)) / 2;  // ties: mean
    for (size_t idx = first; idx <= last; ++idx) ranks[order[idx]] = rank;
    first = last + 1;
  }
  return ranks;
}

}  // namespace

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  return pearson(ranks_of(a), ranks_of(b));
}

double mean_absolute_error(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = std::min(a.size(), b.size());
  if (n == 0) return 0;
  double sum = 0;
  for (size_t idx = 0; idx < n; ++idx) sum += std::abs(a[idx] - b[idx]);
  return sum / static_cast<double>(n);
}

}  // namespace orrery::synth
