// `orrery synth` (the orrery-synth executable, exec'd by orrery): a generative model of traces.
//
//   orrery synth train --corpus DIR -o model.pt [--window 256] [--hidden 64] [--steps 2000] ...
//   orrery synth sample --model model.pt -n 100 -o out/ [--target-time 5ms] [--baseline] ...
//   orrery synth eval --model model.pt --real held-out/ --synthetic out/ [--json]
// and on graph sets (synth/graphs.h; LayerDAG's TPU Tile benchmark):
//   orrery synth train --graphs train.json -o tile.pt ...
//   orrery synth sample --model tile.pt -o samples.json [-n N] [--target-label Y]
//   orrery synth eval --model tile.pt --real test.json --synthetic samples.json [--reference F]
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <string>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/validators.h"
#include "synth/graph_synthesizer.h"
#include "synth/synthesizer.h"

#ifndef ORRERY_VERSION
#define ORRERY_VERSION "unknown"
#endif

namespace orrery::cli {
namespace {

// The options among `names` given on `command`'s line, "--a, --b".
std::string given(const CLI::App& command, std::initializer_list<const char*> names) {
  std::string out;
  for (const char* name : names) {
    if (command.count(name) > 0) out += (out.empty() ? "" : ", ") + std::string(name);
  }
  return out;
}

// An Error when options that only traces use were given for a graph set.
Status refuse_trace_options(const std::string& options, const std::string& what) {
  if (options.empty()) return {};
  return Error::make(ErrorKind::kInvalidArgument, "{} takes no trace option ({})", what, options);
}

// "5ms", "250us", "1.5s", "12000" (ns) -> nanoseconds.
Expected<double> parse_duration_ns(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  double scale = 0;
  if (unit.empty() || unit == "ns") scale = 1;
  if (unit == "us") scale = 1e3;
  if (unit == "ms") scale = 1e6;
  if (unit == "s") scale = 1e9;
  if (used == 0 || scale == 0 || !(value > 0) || !std::isfinite(value)) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "'{}' is not a positive duration (e.g. 5ms, 250us, 1.5s or 12000 for ns)",
                       text);
  }
  return value * scale;
}

Expected<double> parse_positive(const std::string& text, const char* what) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(value >= 0) || !std::isfinite(value)) {
    return Error::make(ErrorKind::kInvalidArgument, "{}: '{}' is not a non-negative number", what,
                       text);
  }
  return value;
}

struct TrainFlags {
  synth::TrainSettings settings;
  std::string graphs;         // a graph set instead of a trace corpus
  std::string trace_options;  // trace-only options given, for the graph-set check
  std::string output;
  bool no_condition = false;
  bool quiet = false;
};

void print_modules(const std::vector<synth::ModuleReport>& modules) {
  for (const synth::ModuleReport& report : modules) {
    fmt::print(
        "{:<11} {:>6} examples, {} steps in {:.1f} s, best validation loss {:.4f} (step {})\n",
        synth::module_name(report.module), report.examples, report.steps, report.seconds,
        report.validation_loss, report.best_step);
  }
}

uintmax_t file_bytes(const std::string& path) {
  std::error_code error;
  const auto bytes = std::filesystem::file_size(path, error);
  return error ? 0 : bytes;
}

int run_train_graphs(const TrainFlags& flags, const synth::Log& log) {
  if (Status status = refuse_trace_options(flags.trace_options, "a graph set (--graphs)");
      !status) {
    return report_error(status.error());
  }
  synth::GraphTrainSettings settings;
  settings.graphs = flags.graphs;
  settings.window = flags.settings.window;
  settings.sizes = flags.settings.sizes;
  settings.training = flags.settings.training;
  settings.condition = flags.settings.condition;
  Expected<synth::GraphTrainSummary> summary =
      synth::train_graph_model(settings, flags.output, log);
  if (!summary) return report_error(summary.error());
  if (!flags.quiet) print_modules(summary->modules);
  fmt::print(
      "wrote {}: {} graphs ({} nodes, {} categories, {} duplicate edges merged), {} parameters, "
      "{} bytes, trained in {:.1f} s\n",
      flags.output, summary->graphs, summary->nodes, summary->categories, summary->duplicate_edges,
      summary->parameters[0] + summary->parameters[1] + summary->parameters[2],
      file_bytes(flags.output), summary->train_seconds);
  return 0;
}

int run_train(TrainFlags& flags) {
  synth::TrainSettings& settings = flags.settings;
  settings.condition = !flags.no_condition;
  if (settings.sizes.hidden % settings.sizes.heads != 0) {
    return report_error(Error::make(ErrorKind::kInvalidArgument,
                                    "--hidden {} is not a multiple of --heads {}",
                                    settings.sizes.hidden, settings.sizes.heads));
  }
  if (settings.corpus.empty() == flags.graphs.empty()) {
    return report_error(Error::make(ErrorKind::kInvalidArgument,
                                    "give exactly one of --corpus DIR (traces) and --graphs FILE "
                                    "(a graph set)"));
  }
  const synth::Log log = [&](const std::string& line) {
    if (!flags.quiet) fmt::print("{}\n", line);
    std::fflush(stdout);
  };
  if (!flags.graphs.empty()) return run_train_graphs(flags, log);
  Expected<synth::TrainSummary> summary = synth::train_model(settings, flags.output, log);
  if (!summary) return report_error(summary.error());
  for (const std::string& note : summary->notes) fmt::print(stderr, "orrery: warning: {}\n", note);
  if (!flags.quiet) {
    fmt::print("labels: {} training graphs simulated in {:.1f} s\n", summary->training_graphs,
               summary->label_seconds);
    print_modules(summary->modules);
  }
  fmt::print(
      "wrote {}: {} training graphs ({} nodes), {} parameters, {} bytes, trained in {:.1f} s\n",
      flags.output, summary->training_graphs, summary->training_nodes,
      summary->parameters[0] + summary->parameters[1] + summary->parameters[2],
      file_bytes(flags.output), summary->train_seconds);
  return 0;
}

struct SampleFlags {
  synth::SampleSettings settings;
  bool count_given = false;
  std::string trace_options;           // trace-only options given
  std::optional<double> target_label;  // graph models
  std::string target_time, target_flops, target_comm;
  bool quiet = false;
};

int run_sample_graphs(const SampleFlags& flags) {
  if (Status status =
          refuse_trace_options(flags.trace_options, flags.settings.model + ", a graph-set model,");
      !status) {
    return report_error(status.error());
  }
  if (!flags.target_time.empty() || !flags.target_flops.empty() || !flags.target_comm.empty()) {
    return report_error(Error::make(ErrorKind::kInvalidArgument,
                                    "{}: a graph-set model takes --target-label, not "
                                    "--target-time, --target-flops or --target-comm",
                                    flags.settings.model));
  }
  if (flags.target_label && !std::isfinite(*flags.target_label)) {
    return report_error(
        Error::make(ErrorKind::kInvalidArgument, "--target-label must be a finite number"));
  }
  synth::GraphSampleSettings settings;
  settings.model = flags.settings.model;
  settings.output = flags.settings.output;
  settings.count = flags.count_given ? flags.settings.count : 0;
  settings.seed = flags.settings.seed;
  settings.batch = flags.settings.batch;
  settings.baseline = flags.settings.baseline;
  settings.target = flags.target_label;
  const synth::Log log = [&](const std::string& line) {
    if (!flags.quiet) fmt::print("{}\n", line);
  };
  Expected<synth::GraphSampleSummary> summary = synth::sample_graphs(settings, log);
  if (!summary) return report_error(summary.error());
  return 0;
}

int run_sample(SampleFlags& flags) {
  synth::SampleSettings& settings = flags.settings;
  if (!flags.target_time.empty()) {
    Expected<double> ns = parse_duration_ns(flags.target_time);
    if (!ns) return report_error(ns.error().with_context("--target-time"));
    settings.target_time_ns = *ns;
  }
  if (!flags.target_flops.empty()) {
    Expected<double> flops = parse_positive(flags.target_flops, "--target-flops");
    if (!flops) return report_error(flops.error());
    settings.target_flops = *flops;
  }
  if (!flags.target_comm.empty()) {
    Expected<double> share = parse_positive(flags.target_comm, "--target-comm");
    if (!share || *share > 1) {
      return report_error(Error::make(ErrorKind::kInvalidArgument,
                                      "--target-comm: '{}' is not a fraction in [0, 1]",
                                      flags.target_comm));
    }
    settings.target_comm_fraction = *share;
  }
  // Flags are checked before the model is read, so a bad one is named even without a model.
  Expected<bool> graph_model = synth::is_graph_model(settings.model);
  if (!graph_model) return report_error(graph_model.error());
  if (*graph_model) return run_sample_graphs(flags);
  if (flags.target_label) {
    return report_error(Error::make(ErrorKind::kInvalidArgument,
                                    "{}: --target-label is for models trained on a graph set; a "
                                    "trace model takes --target-time, --target-flops, "
                                    "--target-comm",
                                    settings.model));
  }
  const synth::Log log = [&](const std::string& line) {
    if (!flags.quiet) fmt::print("{}\n", line);
  };
  Expected<synth::SampleSummary> summary = synth::sample_traces(settings, log);
  if (!summary) return report_error(summary.error());
  for (const std::string& note : summary->notes) fmt::print(stderr, "orrery: warning: {}\n", note);
  if (!flags.quiet) {
    fmt::print(
        "  {} partner sends/receives added, {} collective orderings added (two collectives of "
        "one communicator that no path ordered), {} collectives on the whole job (group shape "
        "did not fit), {} attributes dropped (not used by their node kind), {:.1f} s\n",
        summary->partners_added, summary->collective_orderings, summary->whole_job_fallbacks,
        summary->dropped_attributes, summary->seconds);
  }
  return 0;
}

struct EvalFlags {
  synth::EvalSettings settings;
  std::string reference;      // graph models
  std::string trace_options;  // trace-only options given
  bool json = false;
  bool no_surrogate = false;
  bool quiet = false;
};

int run_eval(EvalFlags& flags) {
  flags.settings.surrogate = !flags.no_surrogate;
  const synth::Log log = [&](const std::string& line) {
    if (!flags.quiet && !flags.json) fmt::print("{}\n", line);
  };
  Expected<bool> graph_model = synth::is_graph_model(flags.settings.model);
  if (!graph_model) return report_error(graph_model.error());
  if (*graph_model) {
    if (Status status = refuse_trace_options(flags.trace_options,
                                             flags.settings.model + ", a graph-set model,");
        !status) {
      return report_error(status.error());
    }
    synth::GraphEvalSettings settings;
    settings.model = flags.settings.model;
    settings.real = flags.settings.real;
    settings.synthetic = flags.settings.synthetic;
    settings.reference = flags.reference;
    settings.baseline_samples = flags.settings.baseline_samples;
    settings.seed = flags.settings.seed;
    settings.surrogate = flags.settings.surrogate;
    settings.surrogate_options = flags.settings.surrogate_options;
    Expected<synth::GraphEvalReport> report = synth::evaluate_graphs(settings, log);
    if (!report) return report_error(report.error());
    if (flags.json) {
      fmt::print("{}\n", synth::graph_eval_to_json(*report).dump(2));
    } else {
      fmt::print("{}", synth::format_graph_eval(*report));
    }
    return 0;
  }
  if (!flags.reference.empty()) {
    return report_error(Error::make(ErrorKind::kInvalidArgument,
                                    "--reference is for models trained on a graph set"));
  }
  Expected<synth::EvalReport> report = synth::evaluate(flags.settings, log);
  if (!report) return report_error(report.error());
  if (flags.json) {
    fmt::print("{}\n", synth::eval_to_json(*report).dump(2));
  } else {
    fmt::print("{}", synth::format_eval(*report));
  }
  return 0;
}

}  // namespace
}  // namespace orrery::cli

int main(int argc, char** argv) {
  using namespace orrery;
  CLI::App app{
      "orrery synth: learn a generative model of execution traces (LayerDAG) and sample synthetic "
      "Chakra traces that keep their statistics"};
  app.name("orrery synth");
  app.set_version_flag("--version", std::string("orrery ") + ORRERY_VERSION);
  app.require_subcommand(1);
  int exit_code = 0;

  cli::TrainFlags train;
  synth::TrainSettings& ts = train.settings;
  CLI::App* train_cmd = app.add_subcommand("train",
                                           "Train the three LayerDAG networks (layer size, "
                                           "attributes, edges) and the baseline on a corpus");
  train_cmd->add_option("--corpus", ts.corpus,
                        "Folder of .et files and trace sets (searched recursively)");
  train_cmd->add_option("--graphs", train.graphs,
                        "A graph set (JSON: categorical DAGs with a label each, as "
                        "scripts/tpu_tile_to_json.py writes LayerDAG's TPU Tile graphs) instead "
                        "of traces");
  train_cmd->add_option("-o,--output", train.output, "Model file to write (e.g. model.pt)")
      ->required();
  train_cmd
      ->add_option("--window", ts.window,
                   "Most nodes of one graph the model sees; larger traces are coarsened, then cut "
                   "into layer windows")
      ->check(cli::whole_number_at_least(2))
      ->capture_default_str();
  train_cmd
      ->add_option("--bins", ts.codebook.bins,
                   "Classes per magnitude (FLOPs, bytes, communication size, duration)")
      ->check(cli::whole_number_at_least(1))
      ->capture_default_str();
  train_cmd
      ->add_option("--max-groups", ts.codebook.max_groups,
                   "Communicator group shapes kept besides the whole job")
      ->capture_default_str();
  train_cmd->add_option("--hidden", ts.sizes.hidden, "Hidden size of every network")
      ->check(cli::whole_number_at_least(1))
      ->capture_default_str();
  train_cmd->add_option("--mpnn-layers", ts.sizes.mpnn_layers, "Message-passing rounds per encoder")
      ->capture_default_str();
  train_cmd->add_option("--embed", ts.sizes.attr_embed, "Embedding size per node attribute")
      ->check(cli::whole_number_at_least(1))
      ->capture_default_str();
  train_cmd->add_option("--heads", ts.sizes.heads, "Attention heads over a layer's new nodes")
      ->check(cli::whole_number_at_least(1))
      ->capture_default_str();
  train_cmd->add_option("--node-steps", ts.sizes.node_steps, "Diffusion steps for node attributes")
      ->check(cli::whole_number_at_least(1))
      ->capture_default_str();
  train_cmd->add_option("--edge-steps", ts.sizes.edge_steps, "Diffusion steps for edges")
      ->check(cli::whole_number_at_least(1))
      ->capture_default_str();
  train_cmd->add_option("--steps", ts.training.steps, "Optimizer steps per network")
      ->check(cli::whole_number_at_least(1))
      ->capture_default_str();
  train_cmd
      ->add_option("--batch", ts.training.batch, "Examples (graph so far, next layer) per step")
      ->check(cli::whole_number_at_least(1))
      ->capture_default_str();
  train_cmd->add_option("--lr", ts.training.learning_rate, "Adam learning rate")
      ->check(cli::finite_number(1e-12, 1e3))
      ->capture_default_str();
  train_cmd
      ->add_option("--eval-every", ts.training.eval_every,
                   "Steps between validation losses (the best weights are kept)")
      ->check(cli::whole_number_at_least(1))
      ->capture_default_str();
  train_cmd->add_option("--seed", ts.training.seed, "Seed of initialization, batches and noise")
      ->capture_default_str();
  train_cmd
      ->add_option("--threads", ts.threads,
                   "Threads reading the corpus and simulating labels (0: one per core); the "
                   "networks run on one thread, so the model file is the same for every count")
      ->check(cli::thread_count())
      ->capture_default_str();
  train_cmd
      ->add_option("--ranks", ts.platform.ranks,
                   "Ranks of the SPMD job every graph is simulated as (labels, eval)")
      ->check(cli::whole_number_at_least(2))
      ->capture_default_str();
  train_cmd->add_option("--system", ts.platform.system,
                        "ASTRA-sim system file for the label simulations (default: built in)");
  train_cmd->add_option("--network", ts.platform.network,
                        "ASTRA-sim network file for the label simulations (default: one switch)");
  train_cmd->add_flag("--no-condition", train.no_condition,
                      "Train without labels (no simulation; sample takes no target)");
  train_cmd->add_option("--scratch", ts.scratch,
                        "Folder for simulation files (default: a temporary one)");
  train_cmd->add_flag("-q,--quiet", train.quiet, "Only the final line");
  train_cmd->callback([&] {
    train.trace_options = cli::given(
        *train_cmd, {"--bins", "--max-groups", "--ranks", "--system", "--network", "--scratch"});
    exit_code = cli::run_train(train);
  });

  cli::SampleFlags sample;
  synth::SampleSettings& ss = sample.settings;
  CLI::App* sample_cmd =
      app.add_subcommand("sample", "Sample synthetic trace sets from a trained model");
  sample_cmd->add_option("--model", ss.model, "Model file from `orrery synth train`")->required();
  sample_cmd
      ->add_option("-n,--count", ss.count,
                   "Trace sets to write (graph-set models: graphs, default one per training "
                   "label)")
      ->check(cli::whole_number_at_least(1))
      ->capture_default_str();
  sample_cmd
      ->add_option("-o,--output", ss.output,
                   "Folder: sample_<i>.<rank>.et and sample_<i>.json (graph-set models: the "
                   "graph set file to write)")
      ->required();
  sample_cmd->add_option("--seed", ss.seed, "Seed of the sampling")->capture_default_str();
  sample_cmd
      ->add_option("--ranks", ss.ranks,
                   "Ranks of every trace set (default: the model's evaluation job)")
      ->check(cli::whole_number_at_least(1));
  sample_cmd
      ->add_option("--windows", ss.windows,
                   "Windows chained into one trace (for traces larger than the window)")
      ->check(cli::whole_number_at_least(1))
      ->capture_default_str();
  sample_cmd->add_option("--batch", ss.batch, "Graphs generated together")
      ->check(cli::whole_number_at_least(1))
      ->capture_default_str();
  sample_cmd->add_flag("--baseline", ss.baseline, "Sample the non-neural baseline instead");
  sample_cmd->add_option("--target-time", sample.target_time,
                         "Condition on a simulated iteration time (5ms, 250us, ns)");
  sample_cmd->add_option("--target-flops", sample.target_flops,
                         "Condition on the total FLOPs of a rank");
  sample_cmd->add_option("--target-comm", sample.target_comm,
                         "Condition on the communication share of the time (0 to 1)");
  sample_cmd->add_option("--target-label", sample.target_label,
                         "Graph-set models: condition every graph on this label (default: the "
                         "training labels in order)");
  sample_cmd->add_flag("-q,--quiet", sample.quiet, "No summary");
  sample_cmd->callback([&] {
    sample.count_given = sample_cmd->count("--count") > 0;
    sample.trace_options = cli::given(*sample_cmd, {"--ranks", "--windows"});
    exit_code = cli::run_sample(sample);
  });

  cli::EvalFlags eval;
  synth::EvalSettings& es = eval.settings;
  CLI::App* eval_cmd = app.add_subcommand("eval",
                                          "Compare synthetic traces and the baseline with real "
                                          "ones: validity, MMD, simulated time, surrogate");
  eval_cmd->add_option("--model", es.model, "Model file (codebook, baseline, evaluation job)")
      ->required();
  eval_cmd
      ->add_option("--real", es.real,
                   "Folder of real (held-out) traces (graph-set models: a graph set)")
      ->required();
  eval_cmd
      ->add_option("--synthetic", es.synthetic,
                   "Folder of synthetic trace sets (graph-set models: the sampled graph set)")
      ->required();
  eval_cmd->add_option("--reference", eval.reference,
                       "Graph-set models: the real training graphs, for the surrogate a perfect "
                       "generator would give");
  eval_cmd
      ->add_option("--baseline-samples", es.baseline_samples,
                   "Baseline samples (0: as many as synthetic sets)")
      ->capture_default_str();
  eval_cmd->add_option("--seed", es.seed, "Seed of the baseline samples and the surrogate")
      ->capture_default_str();
  eval_cmd
      ->add_option("--surrogate-steps", es.surrogate_options.steps,
                   "Training steps of the surrogate regressor")
      ->check(cli::whole_number_at_least(1))
      ->capture_default_str();
  // A word checked by name, then mapped: a CheckedTransformer to the enum would print its
  // mapping ("{log-sum->0,sum->1} OR {0,1}") in the help and in its error.
  const std::string log_sum(synth::readout_name(synth::SurrogateReadout::kLogSum));
  const std::string sum(synth::readout_name(synth::SurrogateReadout::kSum));
  eval_cmd
      ->add_option_function<std::string>(
          "--surrogate-readout",
          [&es, sum](const std::string& name) {
            es.surrogate_options.readout =
                name == sum ? synth::SurrogateReadout::kSum : synth::SurrogateReadout::kLogSum;
          },
          "How the surrogate pools its node states: log-sum (the log of summed positive "
          "node costs) or sum (their sum, batch-normalized)")
      ->check(CLI::IsMember({log_sum, sum}, CLI::ignore_case))
      ->default_str(log_sum);
  eval_cmd->add_flag("--no-surrogate", eval.no_surrogate, "Skip the surrogate test");
  eval_cmd
      ->add_option("--threads", es.threads,
                   "Threads reading and simulating traces (0: one per core); the surrogate runs on "
                   "one thread")
      ->check(cli::thread_count())
      ->capture_default_str();
  eval_cmd->add_option("--scratch", es.scratch,
                       "Folder for simulation files (default: a temporary one)");
  eval_cmd->add_flag("--json", eval.json,
                     "One JSON object: validity, mmd, wasserstein, mean, surrogate");
  eval_cmd->add_flag("-q,--quiet", eval.quiet, "Only the table");
  eval_cmd->callback([&] {
    es.surrogate_options.seed = es.seed;
    eval.trace_options = cli::given(*eval_cmd, {"--scratch"});
    exit_code = cli::run_eval(eval);
  });

  if (const std::optional<int> stop = orrery::cli::parse_command_line(app, argc, argv))
    return *stop;
  return exit_code;
}
