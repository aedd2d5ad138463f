// synth/metrics.h: how far synthetic graphs are from real ones.
//
// Every graph is summarised by normalized histograms, one per statistic (graph_statistics):
//   layer_size   sizes of its Kahn layers (1..8, 9-16, 17-32, 33-64, 65+)
//   in_degree, out_degree  of its nodes (0..8, 9-16, 17-32, 33+)
//   kind, group, flops, tensor_bytes, comm_bytes, duration   the class of every node (codebook)
//   collective_mix  the kinds of its collectives (an extra bin: none at all)
//   nodes, depth    one count in a log2 bin (0, 1, 2-3, 4-7, ...)
// Two sets of graphs are compared per statistic by the squared maximum mean discrepancy with the
// Gaussian kernel on the total-variation distance, k(p, q) = exp(-TV(p, q)^2 / (2 sigma^2)),
// sigma = 1 (the kernel of GRAN's graph statistics; biased V-statistic, >= 0). One-dimensional
// figures (simulated time, communication share) are compared by the Wasserstein-1 distance of
// their empirical distributions; predictions by Pearson and Spearman correlation and the mean
// absolute error.
#pragma once

#include <functional>

#include <map>
#include <string>
#include <vector>

#include "synth/codebook.h"

namespace orrery::synth {

using Histogram = std::vector<double>;

// The statistics above, by name, for `graph` (its own layers are recomputed from its edges).
std::map<std::string, Histogram> graph_statistics(const EncodedDag& graph,
                                                  const Codebook& codebook);
// Only those that read no attribute: layer_size, in_degree, out_degree, nodes, depth.
std::map<std::string, Histogram> structural_statistics(const EncodedDag& graph);
// The normalized histogram of attribute `attr` over `classes` classes (larger classes count as the
// last).
Histogram class_histogram(const EncodedDag& graph, size_t attr, uint32_t classes);

// MMD^2 of every statistic `statistics` gives the real graphs, against the model's graphs and
// against the baseline's: statistic -> (model, baseline).
using GraphStatistics = std::function<std::map<std::string, Histogram>(const EncodedDag&)>;
std::map<std::string, std::pair<double, double>> mmd_table(const std::vector<EncodedDag>& real,
                                                           const std::vector<EncodedDag>& model,
                                                           const std::vector<EncodedDag>& baseline,
                                                           const GraphStatistics& statistics);

double total_variation(const Histogram& a, const Histogram& b);
double mmd_squared(const std::vector<Histogram>& x, const std::vector<Histogram>& y,
                   double sigma = 1.0);

double wasserstein1(std::vector<double> a, std::vector<double> b);
double pearson(const std::vector<double>& a, const std::vector<double>& b);
double spearman(const std::vector<double>& a, const std::vector<double>& b);
double mean_absolute_error(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace orrery::synth
