// synth/synthesizer.h: what `orrery synth train | sample | eval` do, as library calls.
//
// train_model(): corpus folder -> rank programs (synth/corpus.h) -> windows (synth/layers.h) ->
//   codebook -> labels (each window simulated as an SPMD job on the evaluation platform:
//   log10 simulated time, log10 FLOPs, communication share; scaled to [0, 1] by the corpus range)
//   -> the baseline's counts and the LayerDAG networks, trained -> the model file.
// sample_traces(): model file -> graphs (LayerDAG, or the baseline) -> trace sets
//   <out>/sample_<i>.<r>.et and <out>/sample_<i>.json. Labels: the given targets, the components
//   not given taken from the training graph nearest on the given ones; without targets, the label
//   of a training graph drawn at random (as LayerDAG samples with real labels).
// evaluate(): real traces (windowed as in training) against a folder of synthetic trace sets and
//   against as many baseline samples: validity (every rank file passes strict validation and the
//   set simulates to completion), MMD per statistic (synth/metrics.h), Wasserstein distances of
//   log10 simulated time and of the communication share, and the surrogate test (a regressor of
//   log10 simulated time trained on the synthetic graphs, tested on the real ones).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "synth/codebook.h"
#include "synth/layerdag.h"
#include "synth/layers.h"
#include "synth/simulate.h"

namespace orrery::synth {

using Log = std::function<void(const std::string&)>;

// Label components, in order.
inline constexpr std::array<const char*, 3> kLabelNames = {"log10_time_ns", "log10_flops",
                                                           "comm_fraction"};

struct TrainSettings {
  std::string corpus;     // folder of traces
  uint32_t window = 256;  // most nodes the model sees of one graph
  CodebookOptions codebook;
  LayerDagConfig sizes;  // the size fields; the corpus fields are filled in
  TrainOptions training;
  Platform platform;      // where labels are simulated
  bool condition = true;  // condition on the labels
  size_t threads = 1;     // corpus reading, label simulations (0: one per core); not the networks
  std::string scratch;    // a folder for simulation files ("": a temporary one)
};

struct TrainSummary {
  uint32_t sets = 0;
  uint32_t rank_programs = 0;
  uint32_t duplicates = 0;
  uint32_t training_graphs = 0;
  uint64_t training_nodes = 0;
  WindowReport window;
  std::vector<std::string> notes;
  std::array<uint64_t, kModuleCount> parameters{};
  std::vector<ModuleReport> modules;
  double label_seconds = 0;
  double train_seconds = 0;
};

Expected<TrainSummary> train_model(const TrainSettings& settings, const std::string& output,
                                   const Log& log);

struct SampleSettings {
  std::string model;
  std::string output;  // folder
  uint32_t count = 100;
  uint64_t seed = 1;
  uint32_t ranks = 0;    // 0: the model's evaluation ranks
  uint32_t windows = 1;  // windows chained into one trace
  uint32_t batch = 32;
  bool baseline = false;  // sample the baseline instead of LayerDAG
  std::optional<double> target_time_ns, target_flops, target_comm_fraction;
};

struct SampleSummary {
  uint32_t samples = 0;
  uint64_t nodes = 0;  // per rank, over all samples
  uint32_t partners_added = 0;
  uint32_t collective_orderings = 0;  // edges that order two collectives of one communicator
  uint32_t whole_job_fallbacks = 0;
  uint32_t dropped_attributes = 0;
  uint32_t ranks = 0;
  std::vector<float> label;  // the label of the first sample (scaled)
  // Targets beyond the training graphs' range, which the model cannot extrapolate to: each says
  // the range and the nearest end the samples were conditioned on.
  std::vector<std::string> notes;
  double seconds = 0;
};

Expected<SampleSummary> sample_traces(const SampleSettings& settings, const Log& log);

struct EvalSettings {
  std::string model;
  std::string real;               // folder of held-out traces
  std::string synthetic;          // folder of synthetic trace sets
  uint32_t baseline_samples = 0;  // 0: as many as synthetic sets
  uint64_t seed = 1;
  size_t threads = 1;
  std::string scratch;
  bool surrogate = true;
  SurrogateOptions surrogate_options;
};

struct Correlation {
  double pearson = 0, spearman = 0, mae = 0;
};

struct EvalReport {
  uint32_t real_graphs = 0;
  uint32_t synthetic_sets = 0;
  uint32_t baseline_samples = 0;
  double validity = 0;               // of the synthetic sets
  double baseline_validity = 0;      // of the baseline samples
  std::vector<std::string> invalid;  // why, for the first few invalid synthetic sets
  std::map<std::string, std::pair<double, double>> mmd;          // statistic -> (model, baseline)
  std::map<std::string, std::pair<double, double>> wasserstein;  // figure -> (model, baseline)
  // Mean of each figure: real, model, baseline.
  std::map<std::string, std::array<double, 3>> means;
  bool surrogate = false;
  SurrogateReadout surrogate_readout = SurrogateReadout::kLogSum;
  Correlation surrogate_model, surrogate_baseline;
};

Expected<EvalReport> evaluate(const EvalSettings& settings, const Log& log);
nlohmann::json eval_to_json(const EvalReport& report);
std::string format_eval(const EvalReport& report);

// Shared by the trace synthesizer above and the graph-set one (synth/graph_synthesizer.h).
// The corpus fields of `config` (class marginals, widest layer, deepest graph, mean in-degree)
// from the encoded training graphs, whose node count it returns. config.classes must be set.
uint64_t fit_corpus_fields(LayerDagConfig& config, const std::vector<EncodedDag>& graphs);
// The "training" entry of a model file's header.
nlohmann::json training_meta(const TrainOptions& options, const std::vector<ModuleReport>& modules);
// A surrogate's predictions against the truth; and as {"pearson", "spearman", "mae"}.
Correlation correlation_of(const std::vector<double>& predicted, const std::vector<double>& truth);
nlohmann::json correlation_json(const Correlation& correlation);
// The MMD table as JSON: statistic -> {"model", "baseline"}.
nlohmann::json mmd_json(const std::map<std::string, std::pair<double, double>>& mmd);
// The MMD table of an eval report (statistic -> model, baseline), with the count of wins.
std::string format_mmd(const std::map<std::string, std::pair<double, double>>& mmd);

}  // namespace orrery::synth
