#include "synth/graph_synthesizer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/core.h>

#include "synth/baseline.h"
#include "synth/graphs.h"
#include "synth/metrics.h"
#include "synth/model_file.h"
#include "synth/random.h"

namespace orrery::synth {
namespace {

using Clock = std::chrono::steady_clock;

// A label the log scale can take (a target at or below zero is refused before).
constexpr double kSmallestLabel = 1e-300;

// `value` mapped to [0, 1] by the training range (0.5 when the range is a point).
float scale_label(double value, double low, double high) {
  const double span = high - low;
  return span > 0 ? static_cast<float>(std::clamp((value - low) / span, 0.0, 1.0)) : 0.5f;
}

// The networks see one attribute: the category; the five others have a single class.
std::array<uint32_t, kAttrCount> graph_classes(uint32_t categories) {
  std::array<uint32_t, kAttrCount> classes{};
  classes.fill(1);
  classes[0] = categories;
  return classes;
}

struct GraphModel {
  ModelFile file;
  LayerDagConfig config;
  Baseline baseline;
  uint32_t categories = 0;
  std::string label;
  bool log_scale = false;
  double low = 0, high = 0;    // of the conditioned value (log10 y when log_scale)
  std::vector<double> labels;  // the training labels, in the training set's order
  uint32_t window = 256;

  float scale(double y) const {
    return scale_label(log_scale ? std::log10(std::max(y, kSmallestLabel)) : y, low, high);
  }
};

Expected<GraphModel> load_graph_model(const std::string& path) {
  Expected<ModelFile> file = read_model_file(path);
  if (!file) return file.error();
  const nlohmann::json& meta = file->meta;
  auto fail = [&](const std::string& what) {
    return Error::make(ErrorKind::kParse, "{}: {}", path, what);
  };
  if (file->format() != kGraphModelFormat) {
    return fail("not a model trained on a graph set (orrery synth train --graphs)");
  }
  GraphModel model;
  if (!meta.contains("config") || !meta.contains("baseline")) {
    return fail("the header lacks config or baseline");
  }
  Expected<LayerDagConfig> config = LayerDagConfig::from_json(meta["config"]);
  if (!config) return config.error().with_context(path);
  Expected<Baseline> baseline = Baseline::from_json(meta["baseline"]);
  if (!baseline) return baseline.error().with_context(path);
  model.config = std::move(*config);
  model.baseline = std::move(*baseline);
  try {
    model.categories = meta.at("categories").get<uint32_t>();
    const auto& labels = meta.at("labels");
    model.label = labels.at("name").get<std::string>();
    model.log_scale = labels.at("log").get<bool>();
    model.low = labels.at("low").get<double>();
    model.high = labels.at("high").get<double>();
    model.labels = labels.at("table").get<std::vector<double>>();
    model.window = meta.at("window").get<uint32_t>();
  } catch (const nlohmann::json::exception& error) {
    return fail(std::string("bad categories, labels or window: ") + error.what());
  }
  if (model.categories == 0 || model.config.classes != graph_classes(model.categories)) {
    return fail("the categories differ from the networks' classes");
  }
  if (model.labels.empty()) return fail("the label table is empty");
  model.file = std::move(*file);
  return model;
}

}  // namespace

Expected<bool> is_graph_model(const std::string& path) {
  Expected<ModelFile> file = read_model_file(path);
  if (!file) return file.error();
  return file->format() == kGraphModelFormat;
}

Expected<GraphTrainSummary> train_graph_model(const GraphTrainSettings& settings,
                                              const std::string& output, const Log& log) {
  if (Status valid = check_training_setup(settings.window, settings.sizes, settings.training);
      !valid) {
    return valid.error();
  }
  GraphSetIssues issues;
  Expected<GraphSet> set = read_graph_set(settings.graphs, &issues);
  if (!set) return set.error();
  if (issues.invalid > 0) return Error::make(ErrorKind::kParse, "{}", issues.reasons.front());
  if (set->graphs.size() < 2) {
    return Error::make(ErrorKind::kInvalidArgument, "{}: {} graph(s); training needs at least 2",
                       settings.graphs, set->graphs.size());
  }
  const bool condition = settings.condition && !set->label.empty();
  if (settings.condition && !condition && log) {
    log(fmt::format("{}: the graphs carry no label; training without conditioning",
                    settings.graphs));
  }
  GraphTrainSummary summary;
  summary.graphs = static_cast<uint32_t>(set->graphs.size());
  summary.categories = set->categories;
  summary.duplicate_edges = issues.duplicate_edges;
  std::vector<TrainingGraph> training;
  std::vector<EncodedDag> encoded;
  std::vector<double> labels;
  for (size_t idx = 0; idx < set->graphs.size(); ++idx) {
    const LabelledGraph& graph = set->graphs[idx];
    if (graph.x.size() > settings.window) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "{}: graph {} has {} nodes, more than the window of {} (raise --window)",
                         settings.graphs, idx, graph.x.size(), settings.window);
    }
    encoded.push_back(encode_graph(graph));
    labels.push_back(graph.y);
  }
  LayerDagConfig config = settings.sizes;
  config.classes = graph_classes(set->categories);
  summary.nodes = fit_corpus_fields(config, encoded);
  config.max_nodes = settings.window;
  config.labels = condition ? 1 : 0;
  const Baseline baseline = Baseline::fit(encoded, settings.window);

  // Labels positive throughout (runtimes, say) are conditioned on their logarithm: they span
  // decades, and a linear scale would crowd most graphs into a corner of [0, 1].
  const bool log_scale =
      condition && std::all_of(labels.begin(), labels.end(), [](double y) { return y > 0; });
  std::vector<double> conditioned = labels;
  if (log_scale) {
    for (double& value : conditioned) value = std::log10(value);
  }
  const auto [low, high] = std::minmax_element(conditioned.begin(), conditioned.end());
  for (size_t idx = 0; idx < encoded.size(); ++idx) {
    TrainingGraph graph{encoded[idx], {}};
    if (condition) graph.label.push_back(scale_label(conditioned[idx], *low, *high));
    training.push_back(std::move(graph));
  }
  LayerDag model = LayerDag::create(config, settings.training.seed);
  summary.parameters = model.parameter_counts();
  if (log) {
    log(fmt::format(
        "graph set {}: {} graphs, {} nodes, {} categories{}; {} layers at most, {} "
        "nodes a layer at most, mean in-degree {:.3f}",
        settings.graphs, summary.graphs, summary.nodes, summary.categories,
        condition ? fmt::format(", conditioned on {}{}", log_scale ? "log10 " : "", set->label)
                  : "",
        config.max_layers, config.max_layer_size, config.mean_in_degree));
  }
  const auto start = Clock::now();
  TrainOptions options = settings.training;
  options.log = log;
  Expected<std::vector<ModuleReport>> reports = model.train(training, options);
  if (!reports) return reports.error();
  summary.modules = *reports;
  summary.train_seconds = std::chrono::duration<double>(Clock::now() - start).count();

  ModelFile file;
  file.meta["format"] = kGraphModelFormat;
  file.meta["config"] = config.to_json();
  file.meta["baseline"] = baseline.to_json();
  file.meta["categories"] = set->categories;
  file.meta["labels"] = {{"name", condition ? set->label : ""},
                         {"log", log_scale},
                         {"low", *low},
                         {"high", *high},
                         {"table", labels}};
  file.meta["window"] = settings.window;
  file.meta["corpus"] = {{"graphs", summary.graphs}, {"nodes", summary.nodes}};
  file.meta["training"] = training_meta(settings.training, summary.modules);
  file.tensors = model.weights();
  if (Status status = write_model_file(output, file); !status) return status.error();
  return summary;
}

Expected<GraphSampleSummary> sample_graphs(const GraphSampleSettings& settings, const Log& log) {
  const auto start = Clock::now();
  Expected<GraphModel> model = load_graph_model(settings.model);
  if (!model) return model.error();
  if (settings.target && model->config.labels == 0) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "{}: the model was trained without labels; it takes no target",
                       settings.model);
  }
  if (settings.target && model->log_scale && !(*settings.target > 0)) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "{}: the model conditions on log10 of its labels; the target {} is not "
                       "positive",
                       settings.model, *settings.target);
  }
  const uint32_t count =
      settings.count != 0 ? settings.count : static_cast<uint32_t>(model->labels.size());
  std::vector<double> raw;
  std::vector<std::vector<float>> scaled;
  for (uint32_t idx = 0; idx < count; ++idx) {
    raw.push_back(settings.target ? *settings.target : model->labels[idx % model->labels.size()]);
    scaled.push_back(model->config.labels > 0 ? std::vector<float>{model->scale(raw.back())}
                                              : std::vector<float>{});
  }
  std::vector<EncodedDag> graphs;
  if (settings.baseline) {
    Rng rng(settings.seed);
    for (uint32_t idx = 0; idx < count; ++idx) graphs.push_back(model->baseline.sample(rng, 1));
  } else {
    LayerDag network = LayerDag::create(model->config, 0);
    if (Status status = network.load_weights(model->file.tensors); !status) {
      return status.error().with_context(settings.model);
    }
    SampleOptions options;
    options.seed = settings.seed;
    options.batch = settings.batch;
    options.ranks = 1;
    graphs = network.sample(scaled, options);
  }
  GraphSet set;
  set.categories = model->categories;
  set.label = model->label;
  GraphSampleSummary summary;
  for (uint32_t idx = 0; idx < count; ++idx) {
    set.graphs.push_back(decode_graph(graphs[idx], raw[idx]));
    summary.nodes += graphs[idx].size();
  }
  summary.graphs = count;
  if (Status status = write_graph_set(settings.output, set); !status) return status.error();
  summary.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (log) {
    log(fmt::format("wrote {} graphs to {} ({:.1f} nodes a graph on average){}", count,
                    settings.output, count ? static_cast<double>(summary.nodes) / count : 0.0,
                    settings.baseline ? " from the baseline" : ""));
  }
  return summary;
}

Expected<GraphEvalReport> evaluate_graphs(const GraphEvalSettings& settings, const Log& log) {
  Expected<GraphModel> model = load_graph_model(settings.model);
  if (!model) return model.error();
  auto same_categories = [&](const GraphSet& set) -> Status {
    if (set.categories != model->categories) {
      return Error::make(ErrorKind::kInvalidArgument, "{}: {} categories, the model has {}",
                         set.source, set.categories, model->categories);
    }
    return {};
  };
  Expected<GraphSet> real = read_graph_set(settings.real);
  if (!real) return real.error();
  if (Status status = same_categories(*real); !status) return status.error();
  if (real->graphs.empty()) {
    return Error::make(ErrorKind::kInvalidArgument, "{}: no graphs", settings.real);
  }
  GraphSetIssues issues;
  Expected<GraphSet> synthetic = read_graph_set(settings.synthetic, &issues);
  if (!synthetic) return synthetic.error();
  if (Status status = same_categories(*synthetic); !status) return status.error();

  // Baseline samples, given the synthetic graphs' labels in order, checked by the same reader.
  GraphSet base;
  base.categories = model->categories;
  base.label = synthetic->label;
  GraphSetIssues base_issues;
  {
    const uint32_t count =
        settings.baseline_samples != 0
            ? settings.baseline_samples
            : std::max<uint32_t>(static_cast<uint32_t>(synthetic->graphs.size() + issues.invalid),
                                 1);
    Rng rng(settings.seed);
    for (uint32_t idx = 0; idx < count; ++idx) {
      const double y = synthetic->graphs.empty()
                           ? model->labels[idx % model->labels.size()]
                           : synthetic->graphs[idx % synthetic->graphs.size()].y;
      base.graphs.push_back(decode_graph(model->baseline.sample(rng, 1), y));
    }
    Expected<GraphSet> checked =
        graph_set_from_json(graph_set_to_json(base), "baseline samples", &base_issues);
    if (!checked) return checked.error();
    base = std::move(*checked);
  }
  if (log) {
    log(fmt::format(
        "real: {} graphs; synthetic: {} graphs, {} valid; baseline: {} samples, {} "
        "valid",
        real->graphs.size(), synthetic->graphs.size() + issues.invalid, synthetic->graphs.size(),
        base.graphs.size() + base_issues.invalid, base.graphs.size()));
  }

  GraphEvalReport report;
  report.real_graphs = static_cast<uint32_t>(real->graphs.size());
  report.synthetic_graphs = static_cast<uint32_t>(synthetic->graphs.size()) + issues.invalid;
  report.baseline_samples = static_cast<uint32_t>(base.graphs.size()) + base_issues.invalid;
  auto fraction = [](size_t valid, uint32_t total) {
    return total ? static_cast<double>(valid) / total : 0.0;
  };
  report.validity = fraction(synthetic->graphs.size(), report.synthetic_graphs);
  report.baseline_validity = fraction(base.graphs.size(), report.baseline_samples);
  report.invalid = issues.reasons;

  auto encode_all = [](const GraphSet& set) {
    std::vector<EncodedDag> out;
    for (const LabelledGraph& graph : set.graphs) out.push_back(encode_graph(graph));
    return out;
  };
  const std::vector<EncodedDag> real_graphs = encode_all(*real);
  const std::vector<EncodedDag> model_graphs = encode_all(*synthetic);
  const std::vector<EncodedDag> base_graphs = encode_all(base);
  report.mmd = mmd_table(real_graphs, model_graphs, base_graphs, [&](const EncodedDag& graph) {
    return labelled_graph_statistics(graph, model->categories);
  });

  report.label = real->label;
  // A model trained without labels samples unlabelled graphs: nothing to train a regressor on.
  if (settings.surrogate && !real->label.empty() && !synthetic->label.empty()) {
    std::vector<double> truth;
    for (const LabelledGraph& graph : real->graphs) truth.push_back(graph.y);
    auto correlate = [&](const std::vector<EncodedDag>& graphs, const GraphSet& set) {
      if (graphs.size() < 2) return Correlation{};
      std::vector<double> targets;
      for (const LabelledGraph& graph : set.graphs) targets.push_back(graph.y);
      const std::vector<double> predicted = fit_and_predict_surrogate(
          graphs, targets, real_graphs, model->config.classes, settings.surrogate_options);
      return correlation_of(predicted, truth);
    };
    report.surrogate = true;
    report.surrogate_readout = settings.surrogate_options.readout;
    report.surrogate_model = correlate(model_graphs, *synthetic);
    report.surrogate_baseline = correlate(base_graphs, base);
    if (!settings.reference.empty()) {
      Expected<GraphSet> reference = read_graph_set(settings.reference);
      if (!reference) return reference.error();
      if (Status status = same_categories(*reference); !status) return status.error();
      report.surrogate_reference = correlate(encode_all(*reference), *reference);
    }
  }
  return report;
}

nlohmann::json graph_eval_to_json(const GraphEvalReport& report) {
  nlohmann::json out;
  out["validity"] = report.validity;
  out["baseline_validity"] = report.baseline_validity;
  out["real_graphs"] = report.real_graphs;
  out["synthetic_graphs"] = report.synthetic_graphs;
  out["baseline_samples"] = report.baseline_samples;
  out["invalid"] = report.invalid;
  out["mmd"] = mmd_json(report.mmd);
  if (report.surrogate) {
    out["surrogate"] = {{"readout", readout_name(report.surrogate_readout)},
                        {"label", report.label},
                        {"model", correlation_json(report.surrogate_model)},
                        {"baseline", correlation_json(report.surrogate_baseline)}};
    if (report.surrogate_reference) {
      out["surrogate"]["real_training"] = correlation_json(*report.surrogate_reference);
    }
  }
  return out;
}

std::string format_graph_eval(const GraphEvalReport& report) {
  std::string out =
      fmt::format("validity            {:.1f}% of {} synthetic graphs (baseline {:.1f}% of {})\n",
                  100 * report.validity, report.synthetic_graphs, 100 * report.baseline_validity,
                  report.baseline_samples);
  for (const std::string& reason : report.invalid) out += "  invalid: " + reason + "\n";
  out += fmt::format("real graphs         {}\n", report.real_graphs);
  out += format_mmd(report.mmd);
  if (report.surrogate) {
    out +=
        fmt::format("surrogate ({}; {} readout; trained on each set, tested on the real graphs)\n",
                    report.label, readout_name(report.surrogate_readout));
    auto line = [](const char* name, const Correlation& c) {
      return fmt::format("  {:<16} Pearson {:.3f}, Spearman {:.3f}, MAE {:.3f}\n", name, c.pearson,
                         c.spearman, c.mae);
    };
    out += line("model", report.surrogate_model);
    out += line("baseline", report.surrogate_baseline);
    if (report.surrogate_reference) out += line("real training", *report.surrogate_reference);
  }
  return out;
}

}  // namespace orrery::synth
