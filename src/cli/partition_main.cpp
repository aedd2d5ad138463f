// `orrery partition` (the orrery-partition executable): a trained network spread over workers for
// parallel inference, RePurpose against the contiguous split, magnitude pruning and a random
// placement at equal accuracy (docs/models/partition.md).
//
//   orrery partition --model FILE --workers K --calibration CAL.csv --data TEST.csv
//                    [--max-accuracy-drop POINTS] [--budget SHARE] [--per-pair]
//                    [--methods repurpose,contiguous,random,magnitude,refit] [--json]
//                    [--chart curve.svg] [--emit-chakra PREFIX [--batch N]]
//                    [--system system.json --network network.yml]
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/validators.h"
#include "core/text_file.h"
#include "partition/dataset.h"
#include "partition/inference_trace.h"
#include "partition/model_file.h"
#include "partition/partitioner.h"
#include "partition/study.h"

#ifndef ORRERY_VERSION
#define ORRERY_VERSION "unknown"
#endif

namespace orrery::cli {
namespace {

struct Options {
  std::string model;
  int32_t workers = 2;
  std::string calibration;
  std::string data;
  double max_drop_points = 1.0;
  double budget = -1.0;  // not given (a given one is checked to lie in [0, 1])
  bool per_pair = false;
  std::vector<std::string> methods;
  bool json = false;
  std::string chart;
  std::string emit;
  int64_t batch = 1;
  int64_t bytes_per_value = 4;
  std::string system;
  std::string network;
  std::string input_shape;
  double ridge = 1e-3;
  int32_t rounds = 3;
  uint64_t seed = 1;
  int32_t grid_points = 17;
};

Expected<partition::TensorShape> parse_shape(const std::string& text) {
  partition::TensorShape shape;
  int64_t* dims[] = {&shape.channels, &shape.height, &shape.width};
  size_t start = 0;
  for (int i = 0; i < 3; ++i) {
    const size_t comma = text.find(',', start);
    const std::string field =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    try {
      size_t used = 0;
      *dims[i] = std::stoll(field, &used);
      if (used != field.size() || *dims[i] <= 0) throw std::invalid_argument(field);
    } catch (const std::exception&) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "--input-shape \"{}\": expected C,H,W (three positive integers)", text);
    }
    if (i < 2 && comma == std::string::npos) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "--input-shape \"{}\": expected C,H,W (three positive integers)", text);
    }
    start = comma + 1;
    if (i == 2 && comma != std::string::npos) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "--input-shape \"{}\": expected C,H,W (three positive integers)", text);
    }
  }
  return shape;
}

std::string describe(const partition::Model& model) {
  std::string text;
  for (const partition::Layer& layer : model.layers) {
    if (!text.empty()) text += " ";
    if (layer.kind == partition::LayerKind::kDense) {
      text += fmt::format("dense({})", layer.weight.rows());
    } else if (layer.kind == partition::LayerKind::kConv2d) {
      text += fmt::format("conv{}x{}({})", layer.kernel_h, layer.kernel_w, layer.weight.rows());
    } else if (layer.kind == partition::LayerKind::kMaxPool2d) {
      text += fmt::format("maxpool{}", layer.kernel_h);
    } else if (layer.kind == partition::LayerKind::kReshape) {
      text += "reshape";
    } else {
      text += partition::layer_kind_name(layer.kind);
    }
  }
  return fmt::format("{} -> {}", partition::format_shape(model.input), text);
}

int run(const Options& o) {
  if (o.system.empty() != o.network.empty()) {
    return report_error(Error::make(ErrorKind::kInvalidArgument,
                                    "--system and --network go together (the simulated latency)"));
  }
  partition::StudyOptions study_options;
  if (!o.methods.empty()) {
    study_options.methods.clear();
    for (const std::string& name : o.methods) {
      Expected<partition::Method> method = partition::parse_method(name);
      if (!method) return report_error(method.error().with_context("--methods"));
      study_options.methods.push_back(*method);
    }
  }
  Expected<partition::Model> model = partition::read_model(o.model);
  if (!model) return report_error(model.error());
  Expected<partition::Dataset> calibration = partition::read_csv_dataset(o.calibration);
  if (!calibration) return report_error(calibration.error());
  Expected<partition::Dataset> test = partition::read_csv_dataset(o.data);
  if (!test) return report_error(test.error());
  if (!o.input_shape.empty()) {
    Expected<partition::TensorShape> shape = parse_shape(o.input_shape);
    if (!shape) return report_error(shape.error());
    model->input = *shape;
  }
  if (Status s = partition::finish_model(*model, calibration->features.cols()); !s) {
    return report_error(s.error());
  }
  // The refit does not read the calibration labels, but a label beyond the model's classes says
  // the file is not for this model.
  if (Status valid = partition::check_dataset(*calibration, *model); !valid) {
    return report_error(valid.error());
  }
  Expected<partition::Partitioner> partitioner =
      partition::Partitioner::make(*model, calibration->features);
  if (!partitioner) return report_error(partitioner.error());

  study_options.partition.workers = o.workers;
  study_options.partition.per_pair = o.per_pair;
  study_options.partition.ridge = o.ridge;
  study_options.partition.rounds = o.rounds;
  study_options.partition.seed = o.seed;
  study_options.max_drop = o.max_drop_points / 100.0;
  study_options.bytes_per_value = o.bytes_per_value;
  study_options.grid_points = o.grid_points;
  if (o.budget >= 0.0) study_options.keep = o.budget;
  Expected<partition::Study> study =
      partition::run_study(*partitioner, calibration->rows(), *test, study_options);
  if (!study) return report_error(study.error());

  // Traces: where --emit-chakra says, or a scratch folder for the simulation alone.
  std::string prefix = o.emit;
  std::filesystem::path scratch;
  if (prefix.empty() && !o.system.empty()) {
    Expected<std::filesystem::path> temp = temp_folder();
    if (!temp) return report_error(temp.error());
    scratch = *temp / fmt::format("orrery-partition-{}", static_cast<long>(::getpid()));
    prefix = (scratch / "inference").string();
  }
  std::vector<std::string> written;
  if (!prefix.empty()) {
    partition::TraceOptions trace_options;
    trace_options.batch = o.batch;
    trace_options.bytes_per_value = o.bytes_per_value;
    trace_options.generator =
        fmt::format("orrery partition {} (RePurpose), {} workers", ORRERY_VERSION, o.workers);
    for (size_t i = 0; i < study->methods.size(); ++i) {
      const partition::MethodStudy& m = study->methods[i];
      const std::string method_prefix =
          fmt::format("{}.{}", prefix, partition::method_name(m.method));
      auto paths = partition::write_inference_traces(m.partition, method_prefix, trace_options);
      if (!paths) return report_error(paths.error().with_context("--emit-chakra"));
      if (!o.emit.empty()) written.push_back(method_prefix);
      if (!o.system.empty()) {
        Expected<int64_t> ns = partition::simulate_latency(method_prefix, o.system, o.network);
        if (!ns) return report_error(ns.error().with_context("simulation"));
        study->latency_ns[i] = *ns;
      }
    }
  }
  if (!scratch.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(scratch, ignored);
  }
  if (!o.chart.empty()) {
    const std::string title =
        fmt::format("{} on {} workers: accuracy against cross-worker traffic",
                    std::filesystem::path(o.model).filename().string(), o.workers);
    if (Status s = write_text_file(o.chart, partition::study_svg(*study, title)); !s) {
      return report_error(s.error());
    }
  }
  if (o.json) {
    nlohmann::json json = partition::study_json(*study);
    json["model"] = o.model;
    json["architecture"] = describe(*model);
    if (o.batch > 1 && !o.system.empty()) json["latency_batch"] = o.batch;
    fmt::print("{}\n", json.dump(2));
    return 0;
  }
  fmt::print("model        {} ({})\n", o.model, describe(*model));
  fmt::print("data         {} calibration rows ({}), {} test rows ({})\n", calibration->rows(),
             o.calibration, test->rows(), o.data);
  fmt::print("{}", partition::format_study(*study));
  if (!o.system.empty()) {
    fmt::print("latency      simulated by orrery run ({}, {}), batch {}\n", o.system, o.network,
               o.batch);
  }
  for (const std::string& p : written) fmt::print("wrote        {}.<worker>.et\n", p);
  if (!o.chart.empty()) fmt::print("wrote        {}\n", o.chart);
  return 0;
}

}  // namespace
}  // namespace orrery::cli

int main(int argc, char** argv) {
  orrery::cli::Options o;
  CLI::App app{
      "Partition a trained network over K workers for parallel inference (RePurpose): place\n"
      "each layer's neurons or channels on workers by the Hungarian algorithm and refit the\n"
      "weights that cross workers by L0-constrained least squares on calibration data, so that\n"
      "workers exchange few activations; compared with the contiguous split, magnitude pruning\n"
      "and a random placement at equal accuracy. See docs/models/partition.md\n"
      "  e.g. orrery partition --model digits_mlp.pt --workers 4 \\\n"
      "         --calibration calibration.csv --data test.csv --chart curve.svg"};
  app.name("orrery partition");
  app.set_version_flag("--version", std::string("orrery ") + ORRERY_VERSION);
  app.add_option("--model", o.model,
                 "trained model: TorchScript module or state dict (torch.save), or ONNX")
      ->required();
  app.add_option("--workers,-k", o.workers,
                 "workers to spread the model over, 1 to its widest layer's units (default 2)")
      ->check(orrery::cli::whole_number_at_least(1));
  app.add_option("--calibration", o.calibration,
                 "CSV of calibration rows (features, then the label) the refit runs on")
      ->required();
  app.add_option("--data", o.data, "CSV of test rows (features, then the label)")->required();
  app.add_option("--max-accuracy-drop", o.max_drop_points,
                 "accuracy points below the unpartitioned model a method may lose (default 1)")
      ->check(orrery::cli::finite_number(0, 100));
  // Checked as given: the -1 that stands for "not given" typed on the command line would
  // otherwise silently mean the search.
  app.add_option("--budget", o.budget,
                 "a fixed share in [0, 1] of the contiguous split's cross-worker traffic each\n"
                 "layer may send; without it, each method's least share within\n"
                 "--max-accuracy-drop is searched")
      ->check(orrery::cli::finite_number(0, 1));
  app.add_flag("--per-pair", o.per_pair,
               "the share bounds the traffic of every ordered worker pair, not each layer's total");
  app.add_option("--methods", o.methods,
                 "methods to run (default repurpose,contiguous,random,magnitude; refit: the\n"
                 "contiguous placement with repurpose's refit, an ablation)")
      ->delimiter(',');
  app.add_flag("--json", o.json,
               "print one JSON object: methods {repurpose, contiguous, random, magnitude} ->\n"
               "{accuracy, traffic_bytes, flops_per_worker, ...}, unpartitioned_accuracy");
  app.add_option("--chart", o.chart, "write the accuracy-traffic curves as SVG");
  app.add_option("--emit-chakra", o.emit,
                 "write each method's partitioned inference as Chakra traces\n"
                 "<PREFIX>.<method>.<worker>.et (compute, and the sends and receives of the\n"
                 "activations that cross workers, per layer)");
  app.add_option("--batch", o.batch, "inferences per trace (default 1)")
      ->check(orrery::cli::whole_number_at_least(1));
  app.add_option("--bytes-per-value", o.bytes_per_value,
                 "bytes of one activation on the wire (default 4, fp32)")
      ->check(orrery::cli::whole_number_at_least(1));
  app.add_option("--system", o.system,
                 "ASTRA-sim system JSON: simulate each method's traces (with --network) and\n"
                 "report the latency");
  app.add_option("--network", o.network, "ASTRA-sim network YAML, with --system");
  app.add_option("--input-shape", o.input_shape,
                 "C,H,W of one input row when the model does not say (default: from the first\n"
                 "layer and the data, a square image for a convolution)");
  // An infinite ridge made the refit's solve spin without end.
  app.add_option("--ridge", o.ridge,
                 "refit regularisation toward the trained weights (default 1e-3)")
      ->check(orrery::cli::finite_number(0, 1e9));
  app.add_option("--rounds", o.rounds, "Hungarian/refit alternations per layer (default 3)")
      ->check(orrery::cli::whole_number_at_least(0));
  app.add_option("--seed", o.seed, "seed of the random placement (default 1)");
  // Each point is a whole partitioning and test run, and the shares halve every two points
  // (1, 2^-1/2, 2^-1, ...): from 130 points the smallest is 2^-64, less than one value of any
  // layer, so more points only add runs.
  app.add_option("--grid-points", o.grid_points,
                 "budget shares in the sweep, 2 (the shares 1 and 0) to 130 (default 17)")
      ->check(orrery::cli::whole_number_in(2, 130));
  if (const std::optional<int> stop = orrery::cli::parse_command_line(app, argc, argv))
    return *stop;
  return orrery::cli::run(o);
}
