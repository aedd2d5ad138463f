// synth/graph_synthesizer.h: `orrery synth train --graphs | sample | eval` on graph sets
// (synth/graphs.h) instead of traces: LayerDAG's own benchmark, the TPU Tile kernel graphs.
//
// train_graph_model(): graph set -> Kahn layers -> the baseline and the three LayerDAG networks,
//   conditioned on each graph's label y (log10 y when every label is positive; scaled to [0, 1]
//   by the training range), one attribute (the category) -> a model file whose header says
//   "orrery synth LayerDAG graphs".
// sample_graphs(): one graph per label, written as a graph set with the label each was generated
//   for. Without a target the labels are the training labels in order (LayerDAG's evaluation
//   protocol: a synthetic copy of the training set), repeated when more are asked for.
// evaluate_graphs(): real held-out graphs against the synthetic set and as many baseline samples
//   (given the same labels): validity (acyclic, categories in range, at least one node), MMD of
//   layer sizes, degrees, node counts, depth and the category histogram, and LayerDAG's surrogate
//   test: a regressor of y trained on the synthetic graphs with their labels, tested on the real
//   ones (Pearson, Spearman, MAE), beside the same regressor trained on the real training graphs
//   when given (`reference`), the figure a perfect generator would reach. No surrogate when either
//   set carries no label.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "synth/layerdag.h"
#include "synth/synthesizer.h"

namespace orrery::synth {

inline constexpr const char* kGraphModelFormat = "orrery synth LayerDAG graphs";

// True when `path` is a model file trained on a graph set (read from its header).
Expected<bool> is_graph_model(const std::string& path);

struct GraphTrainSettings {
  std::string graphs;     // graph set file
  uint32_t window = 256;  // most nodes of one graph (a larger graph is an error naming it)
  LayerDagConfig sizes;
  TrainOptions training;
  bool condition = true;  // condition on y (needs a labelled set)
};

struct GraphTrainSummary {
  uint32_t graphs = 0;
  uint64_t nodes = 0;
  uint32_t categories = 0;
  uint32_t duplicate_edges = 0;
  std::array<uint64_t, kModuleCount> parameters{};
  std::vector<ModuleReport> modules;
  double train_seconds = 0;
};

Expected<GraphTrainSummary> train_graph_model(const GraphTrainSettings& settings,
                                              const std::string& output, const Log& log);

struct GraphSampleSettings {
  std::string model;
  std::string output;  // graph set file
  uint32_t count = 0;  // 0: one per training label
  uint64_t seed = 1;
  uint32_t batch = 32;
  bool baseline = false;
  std::optional<double> target;  // one label for every graph
};

struct GraphSampleSummary {
  uint32_t graphs = 0;
  uint64_t nodes = 0;
  double seconds = 0;
};

Expected<GraphSampleSummary> sample_graphs(const GraphSampleSettings& settings, const Log& log);

struct GraphEvalSettings {
  std::string model;
  std::string real;       // graph set: the held-out graphs
  std::string synthetic;  // graph set from sample_graphs
  std::string reference;  // graph set: the real training graphs ("": no reference surrogate)
  uint32_t baseline_samples = 0;  // 0: as many as synthetic graphs
  uint64_t seed = 1;
  bool surrogate = true;
  SurrogateOptions surrogate_options;
};

struct GraphEvalReport {
  uint32_t real_graphs = 0;
  uint32_t synthetic_graphs = 0;  // read, valid or not
  uint32_t baseline_samples = 0;
  double validity = 0;
  double baseline_validity = 0;
  std::vector<std::string> invalid;
  std::map<std::string, std::pair<double, double>> mmd;  // statistic -> (model, baseline)
  std::string label;                                     // what the surrogate predicts
  bool surrogate = false;
  SurrogateReadout surrogate_readout = SurrogateReadout::kLogSum;
  Correlation surrogate_model, surrogate_baseline;
  std::optional<Correlation> surrogate_reference;
};

Expected<GraphEvalReport> evaluate_graphs(const GraphEvalSettings& settings, const Log& log);
nlohmann::json graph_eval_to_json(const GraphEvalReport& report);
std::string format_graph_eval(const GraphEvalReport& report);

}  // namespace orrery::synth
