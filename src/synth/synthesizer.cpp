#include "synth/synthesizer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>

#include "chakra/trace_file.h"
#include "chakra/trace_set.h"
#include "chakra/validation.h"
#include "core/parallel.h"
#include "core/text_file.h"
#include "core/units.h"
#include "synth/baseline.h"
#include "synth/corpus.h"
#include "synth/metrics.h"
#include "synth/model_file.h"
#include "synth/random.h"
#include "synth/trace_writer.h"

namespace orrery::synth {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A scratch folder: the one given, or a fresh temporary one removed at the end.
class Scratch {
 public:
  Scratch() = default;
  Status open(const std::string& given) {
    if (!given.empty()) {
      path_ = given;
      return Status::ok();
    }
    Expected<fs::path> temp = temp_folder();
    if (!temp) return temp.error();
    static std::atomic<uint32_t> counter{0};
    path_ = (*temp / fmt::format("orrery-synth-{}-{}", ::getpid(), counter.fetch_add(1))).string();
    owned_ = true;
    return Status::ok();
  }
  ~Scratch() {
    if (owned_) {
      std::error_code ignored;
      fs::remove_all(path_, ignored);
    }
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool owned_ = false;
};

// The graphs of a corpus cut to the model's window, as in training.
std::vector<Dag> windowed(const std::vector<Dag>& graphs, uint32_t window, WindowReport* report) {
  std::vector<Dag> out;
  for (const Dag& graph : graphs) {
    for (Dag& piece : fit_to_window(graph, window, report)) out.push_back(std::move(piece));
  }
  return out;
}

std::array<double, 3> raw_label(const Dag& dag, const SimFigures& figures) {
  return {std::log10(std::max(figures.time_ns, 1.0)),
          std::log10(static_cast<double>(dag_totals(dag).flops) + 1.0), figures.comm_fraction};
}

struct LoadedModel {
  ModelFile file;
  LayerDagConfig config;
  Codebook codebook;
  Baseline baseline;
  std::vector<std::array<double, 3>> raw_labels;
  std::array<double, 3> low{}, high{};
  Platform platform;
  uint32_t window = 256;

  std::vector<float> scale(const std::array<double, 3>& raw) const {
    std::vector<float> out;
    for (size_t idx = 0; idx < config.labels; ++idx) {
      const double span = high[idx] - low[idx];
      out.push_back(
          span > 0 ? static_cast<float>(std::clamp((raw[idx] - low[idx]) / span, 0.0, 1.0)) : 0.5f);
    }
    return out;
  }
};

Expected<LoadedModel> load_model(const std::string& path) {
  Expected<ModelFile> file = read_model_file(path);
  if (!file) return file.error();
  LoadedModel model;
  const nlohmann::json& meta = file->meta;
  auto fail = [&](const std::string& what) {
    return Error::make(ErrorKind::kParse, "{}: {}", path, what);
  };
  if (file->format() != "orrery synth LayerDAG") return fail("not a LayerDAG model");
  if (!meta.contains("config") || !meta.contains("codebook") || !meta.contains("baseline")) {
    return fail("the header lacks config, codebook or baseline");
  }
  Expected<LayerDagConfig> config = LayerDagConfig::from_json(meta["config"]);
  if (!config) return config.error().with_context(path);
  Expected<Codebook> codebook = Codebook::from_json(meta["codebook"]);
  if (!codebook) return codebook.error().with_context(path);
  Expected<Baseline> baseline = Baseline::from_json(meta["baseline"]);
  if (!baseline) return baseline.error().with_context(path);
  model.config = std::move(*config);
  model.codebook = std::move(*codebook);
  model.baseline = std::move(*baseline);
  try {
    const auto& labels = meta.at("labels");
    model.low = labels.at("low").get<std::array<double, 3>>();
    model.high = labels.at("high").get<std::array<double, 3>>();
    model.raw_labels = labels.at("table").get<std::vector<std::array<double, 3>>>();
    model.platform.ranks = meta.at("platform").at("ranks").get<uint32_t>();
    model.window = meta.at("window").get<uint32_t>();
  } catch (const nlohmann::json::exception& error) {
    return fail(std::string("bad labels, platform or window: ") + error.what());
  }
  if (model.codebook.class_counts() != model.config.classes) {
    return fail("the codebook's classes differ from the networks'");
  }
  model.file = std::move(*file);
  return model;
}

}  // namespace

uint64_t fit_corpus_fields(LayerDagConfig& config, const std::vector<EncodedDag>& graphs) {
  for (size_t attr = 0; attr < kAttrCount; ++attr)
    config.marginals[attr].assign(config.classes[attr], 0.0);
  uint64_t nodes = 0, edges = 0, non_sources = 0;
  config.max_layer_size = 1;
  config.max_layers = 1;
  for (const EncodedDag& graph : graphs) {
    nodes += graph.size();
    edges += graph.edges.size();
    non_sources += graph.size() - (graph.layers() > 0 ? graph.layer_start[1] : 0);
    config.max_layers = std::max(config.max_layers, graph.layers());
    for (uint32_t layer = 0; layer < graph.layers(); ++layer) {
      config.max_layer_size =
          std::max(config.max_layer_size, graph.layer_start[layer + 1] - graph.layer_start[layer]);
    }
    for (const NodeClasses& x : graph.x) {
      for (size_t attr = 0; attr < kAttrCount; ++attr) config.marginals[attr][x[attr]] += 1;
    }
  }
  for (auto& marginal : config.marginals) {
    for (double& value : marginal) value /= static_cast<double>(std::max<uint64_t>(nodes, 1));
  }
  config.mean_in_degree =
      non_sources > 0 ? static_cast<double>(edges) / static_cast<double>(non_sources) : 1.0;
  return nodes;
}

nlohmann::json training_meta(const TrainOptions& options,
                             const std::vector<ModuleReport>& modules) {
  nlohmann::json reports = nlohmann::json::array();
  for (const ModuleReport& report : modules) {
    reports.push_back({{"module", module_name(report.module)},
                       {"examples", report.examples},
                       {"steps", report.steps},
                       {"validation_loss", report.validation_loss},
                       {"best_step", report.best_step}});
  }
  return {{"seed", options.seed},
          {"steps", options.steps},
          {"batch", options.batch},
          {"learning_rate", options.learning_rate},
          {"modules", reports}};
}

Correlation correlation_of(const std::vector<double>& predicted, const std::vector<double>& truth) {
  return {pearson(predicted, truth), spearman(predicted, truth),
          mean_absolute_error(predicted, truth)};
}

nlohmann::json correlation_json(const Correlation& c) {
  return {{"pearson", c.pearson}, {"spearman", c.spearman}, {"mae", c.mae}};
}

nlohmann::json mmd_json(const std::map<std::string, std::pair<double, double>>& mmd) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, pair] : mmd)
    out[name] = {{"model", pair.first}, {"baseline", pair.second}};
  return out;
}

std::string format_mmd(const std::map<std::string, std::pair<double, double>>& mmd) {
  std::string out =
      "MMD^2 (Gaussian kernel on total variation, sigma 1): model vs baseline, lower is closer\n";
  uint32_t wins = 0;
  for (const auto& [name, pair] : mmd) {
    const bool win = pair.first < pair.second;
    wins += win;
    out += fmt::format("  {:<16} {:>10.5f} {:>10.5f}{}\n", name, pair.first, pair.second,
                       win ? "  *" : "");
  }
  out += fmt::format("  model closer on {} of {} statistics\n", wins, mmd.size());
  return out;
}

Expected<TrainSummary> train_model(const TrainSettings& settings, const std::string& output,
                                   const Log& log) {
  auto say = [&](const std::string& line) {
    if (log) log(line);
  };
  if (Status valid = check_training_setup(settings.window, settings.sizes, settings.training);
      !valid) {
    return valid.error();
  }
  TrainSummary summary;
  Expected<Corpus> corpus = load_corpus(settings.corpus, settings.threads);
  if (!corpus) return corpus.error();
  summary.sets = static_cast<uint32_t>(corpus->sets.size());
  summary.rank_programs = static_cast<uint32_t>(corpus->graphs.size());
  summary.duplicates = corpus->duplicates;
  summary.notes = corpus->notes;
  std::vector<Dag> graphs = windowed(corpus->graphs, settings.window, &summary.window);
  if (graphs.size() < 2) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "{}: {} rank program(s) after windowing; training needs at least 2",
                       settings.corpus, graphs.size());
  }
  say(fmt::format(
      "corpus {}: {} trace sets, {} distinct rank programs ({} duplicate ranks), {} "
      "training graphs (window {} nodes: {} coarsened, {} split)",
      settings.corpus, summary.sets, summary.rank_programs, summary.duplicates, graphs.size(),
      settings.window, summary.window.graphs_coarsened, summary.window.graphs_split));

  // Labels: every training graph simulated as an SPMD job.
  std::vector<std::array<double, 3>> raw(graphs.size(), {0, 0, 0});
  const auto label_start = Clock::now();
  if (settings.condition) {
    Scratch scratch;
    if (Status opened = scratch.open(settings.scratch); !opened) return opened.error();
    Expected<SimulationBench> bench = SimulationBench::create(settings.platform, scratch.path());
    if (!bench) return bench.error();
    std::vector<std::optional<Error>> errors(graphs.size());
    parallel_for(graphs.size(), settings.threads, [&](size_t idx) {
      Expected<SimFigures> figures = bench->simulate(graphs[idx], fmt::format("label_{}", idx));
      if (figures) {
        raw[idx] = raw_label(graphs[idx], *figures);
      } else {
        errors[idx] = figures.error();
      }
    });
    std::vector<Dag> kept;
    std::vector<std::array<double, 3>> kept_raw;
    for (size_t idx = 0; idx < graphs.size(); ++idx) {
      if (errors[idx]) {
        summary.notes.push_back(errors[idx]->message() + " (not simulated: left out of training)");
        continue;
      }
      kept.push_back(std::move(graphs[idx]));
      kept_raw.push_back(raw[idx]);
    }
    graphs = std::move(kept);
    raw = std::move(kept_raw);
    if (graphs.size() < 2) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "{}: fewer than 2 training graphs simulate on the evaluation platform",
                         settings.corpus);
    }
  }
  summary.label_seconds = seconds_since(label_start);

  CodebookOptions codebook_options = settings.codebook;
  const Codebook codebook = Codebook::fit(graphs, codebook_options);
  std::vector<EncodedDag> encoded;
  for (const Dag& graph : graphs) encoded.push_back(encode_dag(layer_dag(graph), codebook));
  const Baseline baseline = Baseline::fit(encoded, settings.window);

  LayerDagConfig config = settings.sizes;
  config.classes = codebook.class_counts();
  const uint64_t nodes = fit_corpus_fields(config, encoded);
  config.max_nodes = settings.window;
  config.labels = settings.condition ? static_cast<uint32_t>(kLabelNames.size()) : 0;
  summary.training_graphs = static_cast<uint32_t>(graphs.size());
  summary.training_nodes = nodes;

  std::array<double, 3> low{0, 0, 0}, high{0, 0, 0};
  if (!raw.empty()) {
    low = high = raw[0];
    for (const auto& row : raw) {
      for (size_t idx = 0; idx < 3; ++idx) {
        low[idx] = std::min(low[idx], row[idx]);
        high[idx] = std::max(high[idx], row[idx]);
      }
    }
  }
  std::vector<TrainingGraph> training;
  for (size_t idx = 0; idx < encoded.size(); ++idx) {
    TrainingGraph graph{encoded[idx], {}};
    for (size_t comp = 0; comp < config.labels; ++comp) {
      const double span = high[comp] - low[comp];
      graph.label.push_back(span > 0 ? static_cast<float>((raw[idx][comp] - low[comp]) / span)
                                     : 0.5f);
    }
    training.push_back(std::move(graph));
  }

  LayerDag model = LayerDag::create(config, settings.training.seed);
  summary.parameters = model.parameter_counts();
  say(
      fmt::format("LayerDAG: hidden {}, {} message-passing rounds, {} + {} diffusion steps; "
                  "parameters {} (layer size), {} (attributes), {} (edges); {} layers at most, "
                  "{} nodes a layer at most",
                  config.hidden, config.mpnn_layers, config.node_steps, config.edge_steps,
                  summary.parameters[0], summary.parameters[1], summary.parameters[2],
                  config.max_layers, config.max_layer_size));
  const auto train_start = Clock::now();
  TrainOptions options = settings.training;
  options.log = log;
  Expected<std::vector<ModuleReport>> reports = model.train(training, options);
  if (!reports) return reports.error();
  summary.modules = *reports;
  summary.train_seconds = seconds_since(train_start);

  ModelFile file;
  file.meta["format"] = "orrery synth LayerDAG";
  file.meta["config"] = config.to_json();
  file.meta["codebook"] = codebook.to_json();
  file.meta["baseline"] = baseline.to_json();
  file.meta["labels"] = {{"names", kLabelNames}, {"low", low}, {"high", high}, {"table", raw}};
  file.meta["platform"] = {{"ranks", settings.platform.ranks}};
  file.meta["window"] = settings.window;
  file.meta["corpus"] = {{"sets", summary.sets},
                         {"rank_programs", summary.rank_programs},
                         {"training_graphs", summary.training_graphs},
                         {"training_nodes", summary.training_nodes}};
  file.meta["training"] = training_meta(settings.training, summary.modules);
  file.tensors = model.weights();
  if (Status status = write_model_file(output, file); !status) return status.error();
  return summary;
}

Expected<SampleSummary> sample_traces(const SampleSettings& settings, const Log& log) {
  const auto start = Clock::now();
  Expected<LoadedModel> model = load_model(settings.model);
  if (!model) return model.error();
  SampleSummary summary;
  summary.ranks = settings.ranks != 0 ? settings.ranks : model->platform.ranks;
  if (summary.ranks == 0)
    return Error::make(ErrorKind::kInvalidArgument, "--ranks must be positive");
  const uint32_t windows = std::max<uint32_t>(settings.windows, 1);
  const uint32_t total = settings.count * windows;
  Rng rng(settings.seed);

  // The label every sample is generated for.
  const bool targeted =
      settings.target_time_ns || settings.target_flops || settings.target_comm_fraction;
  std::array<std::optional<double>, 3> target;
  if (settings.target_time_ns) target[0] = std::log10(std::max(*settings.target_time_ns, 1.0));
  if (settings.target_flops) target[1] = std::log10(*settings.target_flops + 1.0);
  target[2] = settings.target_comm_fraction;
  if (targeted && model->config.labels == 0) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "{}: the model was trained without labels (--no-condition); it takes no "
                       "target",
                       settings.model);
  }
  // The label is scaled by the training range and clamped to it: say so where a target lies out.
  constexpr std::array<const char*, 3> kTargetNames = {"time", "FLOPs", "communication share"};
  const auto target_text = [](size_t idx, double value) {
    if (idx == 0) return format_duration_ns(std::pow(10.0, value));
    if (idx == 1) return fmt::format("{:.3g}", std::pow(10.0, value) - 1.0);
    return fmt::format("{:.3g}", value);
  };
  for (size_t idx = 0; idx < std::min<size_t>(3, model->config.labels); ++idx) {
    if (!target[idx] || (*target[idx] >= model->low[idx] && *target[idx] <= model->high[idx]))
      continue;
    const double nearest = std::clamp(*target[idx], model->low[idx], model->high[idx]);
    const std::string range =
        model->low[idx] == model->high[idx]
            ? target_text(idx, model->low[idx]) + " (all of them)"
            : target_text(idx, model->low[idx]) + " to " + target_text(idx, model->high[idx]);
    summary.notes.push_back(fmt::format(
        "target {} {} lies outside the training graphs' {}: the samples are conditioned on {}",
        kTargetNames[idx], target_text(idx, *target[idx]), range, target_text(idx, nearest)));
  }
  std::vector<std::vector<float>> labels;
  if (!model->raw_labels.empty() && model->config.labels > 0) {
    std::array<double, 3> chosen = model->raw_labels[0];
    if (targeted) {
      // The training graph nearest on the given components (in scaled units) fills the others.
      double best = std::numeric_limits<double>::infinity();
      for (const auto& row : model->raw_labels) {
        const std::vector<float> scaled = model->scale(row);
        double distance = 0;
        for (size_t idx = 0; idx < 3; ++idx) {
          if (!target[idx]) continue;
          std::array<double, 3> probe = row;
          probe[idx] = *target[idx];
          const double wanted = model->scale(probe)[idx];
          const double gap = wanted - static_cast<double>(scaled[idx]);
          distance += gap * gap;
        }
        if (distance < best) {
          best = distance;
          chosen = row;
        }
      }
      for (size_t idx = 0; idx < 3; ++idx) {
        if (target[idx]) chosen[idx] = *target[idx];
      }
      for (uint32_t idx = 0; idx < total; ++idx) labels.push_back(model->scale(chosen));
    } else {
      for (uint32_t idx = 0; idx < total; ++idx) {
        labels.push_back(model->scale(
            model->raw_labels[rng.below(static_cast<uint32_t>(model->raw_labels.size()))]));
      }
    }
  } else {
    labels.assign(total, std::vector<float>{});
  }
  if (!labels.empty()) summary.label = labels[0];

  std::vector<EncodedDag> graphs;
  if (settings.baseline) {
    for (uint32_t idx = 0; idx < total; ++idx)
      graphs.push_back(model->baseline.sample(rng, summary.ranks));
  } else {
    LayerDag network = LayerDag::create(model->config, 0);
    if (Status status = network.load_weights(model->file.tensors); !status) {
      return status.error().with_context(settings.model);
    }
    SampleOptions options;
    options.seed = settings.seed;
    options.batch = settings.batch;
    options.ranks = summary.ranks;
    graphs = network.sample(labels, options);
  }
  std::error_code error;
  fs::create_directories(settings.output, error);
  if (error) {
    return Error::make(ErrorKind::kIo, "{}: cannot create the folder: {}", settings.output,
                       error.message());
  }
  for (uint32_t sample = 0; sample < settings.count; ++sample) {
    std::vector<Dag> parts;
    for (uint32_t window = 0; window < windows; ++window) {
      parts.push_back(decode_dag(graphs[sample * windows + window], model->codebook,
                                 &summary.dropped_attributes));
    }
    Dag dag = windows == 1 ? std::move(parts[0]) : chain_dags(parts);
    dag.ranks = summary.ranks;
    TraceSetOptions options;
    options.ranks = summary.ranks;
    options.generator = fmt::format("orrery synth sample{} (seed {}, sample {})",
                                    settings.baseline ? " --baseline" : "", settings.seed, sample);
    const std::string prefix =
        (fs::path(settings.output) / fmt::format("sample_{:05}", sample)).string();
    Expected<TraceSetReport> written = write_trace_set(dag, prefix, options);
    if (!written) return written.error();
    summary.nodes += written->nodes;
    summary.partners_added += written->partners_added;
    summary.collective_orderings += written->collective_orderings;
    summary.whole_job_fallbacks += written->whole_job_fallbacks;
    ++summary.samples;
  }
  summary.seconds = seconds_since(start);
  if (log) {
    log(fmt::format("wrote {} samples of {} ranks to {} ({:.1f} nodes a rank on average)",
                    summary.samples, summary.ranks, settings.output,
                    summary.samples ? static_cast<double>(summary.nodes) / summary.samples : 0.0));
  }
  return summary;
}

namespace {

struct Checked {
  bool valid = false;
  std::string reason;
  SimFigures figures;
};

// Strict validation of every rank file of the set, then a simulation on `bench`.
Checked check_trace_set(const std::string& prefix, const std::string& group_file,
                        const SimulationBench& bench) {
  Checked out;
  Expected<chakra::TraceFiles> files = chakra::resolve_trace_files(prefix);
  if (!files) {
    out.reason = files.error().message();
    return out;
  }
  for (const std::string& path : files->paths) {
    Expected<chakra::TraceGraph> graph = chakra::load_trace(path);
    if (!graph) {
      out.reason = graph.error().message();
      return out;
    }
    const chakra::ValidationReport report = chakra::validate_trace(*graph);
    if (!report.passes(chakra::ValidationMode::kStrict)) {
      out.reason =
          fmt::format("{}: strict validation: {}", path,
                      report.diagnostics().empty() ? "failed" : report.diagnostics()[0].message);
      return out;
    }
  }
  std::error_code ignored;
  Expected<SimFigures> figures =
      bench.simulate_trace_set(prefix, fs::exists(group_file, ignored) ? group_file : "");
  if (!figures) {
    out.reason = figures.error().message();
    return out;
  }
  out.figures = *figures;
  out.valid = true;
  return out;
}

struct Side {
  std::vector<EncodedDag> graphs;  // valid ones
  std::vector<double> log_time, comm;
  uint32_t total = 0, valid = 0;
  std::vector<std::string> invalid;
};

}  // namespace

Expected<EvalReport> evaluate(const EvalSettings& settings, const Log& log) {
  auto say = [&](const std::string& line) {
    if (log) log(line);
  };
  Expected<LoadedModel> model = load_model(settings.model);
  if (!model) return model.error();
  Scratch scratch;
  if (Status opened = scratch.open(settings.scratch); !opened) return opened.error();
  std::map<uint32_t, SimulationBench> benches;  // by rank count
  auto bench_for = [&](uint32_t ranks) -> Expected<const SimulationBench*> {
    auto it = benches.find(ranks);
    if (it == benches.end()) {
      Platform platform = model->platform;
      platform.ranks = ranks;
      Expected<SimulationBench> bench = SimulationBench::create(
          platform, (fs::path(scratch.path()) / fmt::format("ranks{}", ranks)).string());
      if (!bench) return bench.error();
      it = benches.emplace(ranks, std::move(*bench)).first;
    }
    return &it->second;
  };
  Expected<const SimulationBench*> platform_bench = bench_for(model->platform.ranks);
  if (!platform_bench) return platform_bench.error();

  // Real graphs: windowed as in training, simulated as SPMD jobs.
  Expected<Corpus> real = load_corpus(settings.real, settings.threads);
  if (!real) return real.error();
  const std::vector<Dag> real_graphs = windowed(real->graphs, model->window, nullptr);
  Side real_side;
  {
    std::vector<std::optional<SimFigures>> figures(real_graphs.size());
    parallel_for(real_graphs.size(), settings.threads, [&](size_t idx) {
      Expected<SimFigures> result =
          (*platform_bench)->simulate(real_graphs[idx], fmt::format("real_{}", idx));
      if (result) figures[idx] = *result;
    });
    for (size_t idx = 0; idx < real_graphs.size(); ++idx) {
      ++real_side.total;
      if (!figures[idx]) continue;
      ++real_side.valid;
      real_side.graphs.push_back(encode_dag(layer_dag(real_graphs[idx]), model->codebook));
      real_side.log_time.push_back(std::log10(std::max(figures[idx]->time_ns, 1.0)));
      real_side.comm.push_back(figures[idx]->comm_fraction);
    }
  }
  if (real_side.graphs.empty()) {
    return Error::make(ErrorKind::kInvalidArgument, "{}: no real graph simulates", settings.real);
  }
  say(fmt::format("real: {} graphs from {} trace sets ({} simulate)", real_side.total,
                  real->sets.size(), real_side.valid));

  // Synthetic sets: as their files are.
  Expected<Corpus> synthetic = load_corpus(settings.synthetic, settings.threads);
  if (!synthetic) return synthetic.error();
  Side model_side;
  {
    const size_t sets = synthetic->sets.size();
    std::vector<uint32_t> ranks(sets, 0);
    std::vector<const Dag*> first(sets, nullptr);
    for (size_t idx = 0; idx < synthetic->graphs.size(); ++idx) {
      const uint32_t set = synthetic->graph_set[idx];
      if (first[set] == nullptr) first[set] = &synthetic->graphs[idx];
    }
    for (size_t set = 0; set < sets; ++set) {
      Expected<chakra::TraceFiles> files = chakra::resolve_trace_files(synthetic->sets[set]);
      ranks[set] = files ? std::max<uint32_t>(static_cast<uint32_t>(files->paths.size()), 2) : 2;
      Expected<const SimulationBench*> bench = bench_for(ranks[set]);
      if (!bench) return bench.error();
    }
    std::vector<Checked> checked(sets);
    parallel_for(sets, settings.threads, [&](size_t set) {
      const std::string& prefix = synthetic->sets[set];
      checked[set] = check_trace_set(prefix, prefix + ".json", benches.at(ranks[set]));
    });
    for (size_t set = 0; set < sets; ++set) {
      ++model_side.total;
      if (!checked[set].valid || first[set] == nullptr) {
        if (model_side.invalid.size() < 5) {
          model_side.invalid.push_back(checked[set].valid ? synthetic->sets[set] + ": no graph"
                                                          : checked[set].reason);
        }
        continue;
      }
      ++model_side.valid;
      model_side.graphs.push_back(encode_dag(layer_dag(*first[set]), model->codebook));
      model_side.log_time.push_back(std::log10(std::max(checked[set].figures.time_ns, 1.0)));
      model_side.comm.push_back(checked[set].figures.comm_fraction);
    }
  }
  say(fmt::format("synthetic: {} trace sets, {} valid", model_side.total, model_side.valid));

  // Baseline samples, written, checked and simulated the same way.
  Side base_side;
  {
    const uint32_t count = settings.baseline_samples != 0 ? settings.baseline_samples
                                                          : std::max<uint32_t>(model_side.total, 1);
    Rng rng(settings.seed);
    std::vector<Dag> samples;
    for (uint32_t idx = 0; idx < count; ++idx) {
      samples.push_back(
          decode_dag(model->baseline.sample(rng, model->platform.ranks), model->codebook));
    }
    std::vector<Checked> checked(count);
    std::vector<Dag> programs(count);
    parallel_for(count, settings.threads, [&](size_t idx) {
      const std::string prefix =
          (fs::path(scratch.path()) / fmt::format("baseline_{}", idx)).string();
      TraceSetOptions options;
      options.ranks = model->platform.ranks;
      Expected<TraceSetReport> written = write_trace_set(samples[idx], prefix, options);
      if (!written) {
        checked[idx].reason = written.error().message();
        return;
      }
      programs[idx] = std::move(written->program);
      checked[idx] = check_trace_set(prefix, written->group_file, **platform_bench);
      std::error_code ignored;
      for (const std::string& file : written->rank_files) fs::remove(file, ignored);
      fs::remove(written->group_file, ignored);
    });
    for (uint32_t idx = 0; idx < count; ++idx) {
      ++base_side.total;
      if (!checked[idx].valid) continue;
      ++base_side.valid;
      base_side.graphs.push_back(encode_dag(layer_dag(programs[idx]), model->codebook));
      base_side.log_time.push_back(std::log10(std::max(checked[idx].figures.time_ns, 1.0)));
      base_side.comm.push_back(checked[idx].figures.comm_fraction);
    }
  }
  say(fmt::format("baseline: {} samples, {} valid", base_side.total, base_side.valid));

  EvalReport report;
  report.real_graphs = real_side.valid;
  report.synthetic_sets = model_side.total;
  report.baseline_samples = base_side.total;
  report.validity = model_side.total ? static_cast<double>(model_side.valid) / model_side.total : 0;
  report.baseline_validity =
      base_side.total ? static_cast<double>(base_side.valid) / base_side.total : 0;
  report.invalid = model_side.invalid;

  report.mmd =
      mmd_table(real_side.graphs, model_side.graphs, base_side.graphs,
                [&](const EncodedDag& graph) { return graph_statistics(graph, model->codebook); });
  report.wasserstein["log10_time_ns"] = {wasserstein1(real_side.log_time, model_side.log_time),
                                         wasserstein1(real_side.log_time, base_side.log_time)};
  report.wasserstein["comm_fraction"] = {wasserstein1(real_side.comm, model_side.comm),
                                         wasserstein1(real_side.comm, base_side.comm)};
  auto average = [](const std::vector<double>& values) {
    double sum = 0;
    for (double value : values) sum += value;
    return values.empty() ? 0.0 : sum / static_cast<double>(values.size());
  };
  report.means["log10_time_ns"] = {average(real_side.log_time), average(model_side.log_time),
                                   average(base_side.log_time)};
  report.means["comm_fraction"] = {average(real_side.comm), average(model_side.comm),
                                   average(base_side.comm)};

  if (settings.surrogate) {
    // Graphs far past the window (chained windows) are left out: the regressor pads every batch
    // to its largest graph.
    const uint32_t limit = 4 * model->window;
    auto correlate = [&](const Side& side) {
      std::vector<EncodedDag> graphs;
      std::vector<double> times;
      for (size_t idx = 0; idx < side.graphs.size(); ++idx) {
        if (side.graphs[idx].size() > limit) continue;
        graphs.push_back(side.graphs[idx]);
        times.push_back(side.log_time[idx]);
      }
      if (graphs.size() < 2) return Correlation{};
      const std::vector<double> predicted = fit_and_predict_surrogate(
          graphs, times, real_side.graphs, model->config.classes, settings.surrogate_options);
      return correlation_of(predicted, real_side.log_time);
    };
    report.surrogate = true;
    report.surrogate_readout = settings.surrogate_options.readout;
    report.surrogate_model = correlate(model_side);
    report.surrogate_baseline = correlate(base_side);
  }
  return report;
}

nlohmann::json eval_to_json(const EvalReport& report) {
  nlohmann::json out;
  out["validity"] = report.validity;
  out["baseline_validity"] = report.baseline_validity;
  out["real_graphs"] = report.real_graphs;
  out["synthetic_sets"] = report.synthetic_sets;
  out["baseline_samples"] = report.baseline_samples;
  out["invalid"] = report.invalid;
  out["mmd"] = mmd_json(report.mmd);
  for (const auto& [name, pair] : report.wasserstein) {
    out["wasserstein"][name] = {{"model", pair.first}, {"baseline", pair.second}};
  }
  for (const auto& [name, values] : report.means) {
    out["mean"][name] = {{"real", values[0]}, {"model", values[1]}, {"baseline", values[2]}};
  }
  if (report.surrogate) {
    out["surrogate"] = {{"readout", readout_name(report.surrogate_readout)},
                        {"model", correlation_json(report.surrogate_model)},
                        {"baseline", correlation_json(report.surrogate_baseline)}};
  }
  return out;
}

std::string format_eval(const EvalReport& report) {
  std::string out;
  out += fmt::format(
      "validity            {:.1f}% of {} synthetic trace sets (baseline {:.1f}% of {})\n",
      100 * report.validity, report.synthetic_sets, 100 * report.baseline_validity,
      report.baseline_samples);
  for (const std::string& reason : report.invalid) out += "  invalid: " + reason + "\n";
  out += fmt::format("real graphs         {}\n", report.real_graphs);
  out += format_mmd(report.mmd);
  out += "Wasserstein-1 to the real distribution: model vs baseline\n";
  for (const auto& [name, pair] : report.wasserstein) {
    const auto& means = report.means.at(name);
    out += fmt::format(
        "  {:<16} {:>10.5f} {:>10.5f}   (means: real {:.4f}, model {:.4f}, baseline {:.4f})\n",
        name, pair.first, pair.second, means[0], means[1], means[2]);
  }
  if (report.surrogate) {
    out += fmt::format(
        "surrogate (log10 simulated time; {} readout; trained on synthetic, tested on real)\n",
        readout_name(report.surrogate_readout));
    out += fmt::format("  model            Pearson {:.3f}, Spearman {:.3f}, MAE {:.3f}\n",
                       report.surrogate_model.pearson, report.surrogate_model.spearman,
                       report.surrogate_model.mae);
    out += fmt::format("  baseline         Pearson {:.3f}, Spearman {:.3f}, MAE {:.3f}\n",
                       report.surrogate_baseline.pearson, report.surrogate_baseline.spearman,
                       report.surrogate_baseline.mae);
  }
  return out;
}

}  // namespace orrery::synth
