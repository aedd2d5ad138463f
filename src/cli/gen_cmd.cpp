// `orrery gen`: write synthetic Chakra traces.
//
//   orrery gen microbench --collective all-reduce --size 1MiB --ranks 8 [--compute-us N]
//                         [--pg-name NAME] -o PREFIX
//   orrery gen llm --model gpt3-175b|FILE.json --global-batch B --micro-batch b --dp D --tp T
//                  --pp P [--sp] [--cp C] [--ep E] [--zero K] [--recompute] -o PREFIX
//   orrery gen inference --model llama2-70b --tp T [--pp P] --prompt-lengths 512,1024
//                        [--output-lengths 128] -o PREFIX
//   orrery gen dlrm --model dlrm-mlperf|FILE.json --ranks N --global-batch B
//                   [--sharding table|row|column] -o PREFIX
#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "chakra/rank_map.h"
#include "chakra/trace_set.h"
#include "cli/commands.h"
#include "cli/validators.h"
#include "core/units.h"
#include "gen/dlrm_generator.h"
#include "gen/inference_generator.h"
#include "gen/llm_generator.h"
#include "gen/llm_options.h"
#include "gen/memory_estimate.h"
#include "gen/microbench.h"

namespace orrery::cli {

namespace {

struct MicrobenchOptions {
  std::string collective;
  std::string size;
  uint32_t ranks = 0;
  uint64_t compute_us = 0;
  std::string pg_name;
  std::string output;
};

int run_microbench(const MicrobenchOptions& options) {
  Expected<gen::MicrobenchKind> kind = gen::parse_microbench_kind(options.collective);
  if (!kind) return report_error(kind.error().with_context("--collective"));
  gen::MicrobenchSpec spec;
  spec.kind = *kind;
  spec.ranks = options.ranks;
  spec.compute_us = options.compute_us;
  spec.pg_name = options.pg_name;
  if (options.size.empty()) {
    if (spec.kind != gen::MicrobenchKind::kBarrier) {
      return report_error(Error::make(ErrorKind::kInvalidArgument,
                                      "missing --size BYTES (e.g. 1048576, 1MiB or 64KB)"));
    }
  } else {
    Expected<uint64_t> bytes = parse_bytes(options.size);
    if (!bytes) return report_error(bytes.error().with_context("--size"));
    spec.bytes = *bytes;
  }
  Expected<std::vector<std::string>> paths = gen::write_microbench(spec, options.output);
  if (!paths) return report_error(paths.error());
  fmt::print("wrote {} rank file{}: {}{}\n", paths->size(), paths->size() == 1 ? "" : "s",
             paths->front(), paths->size() == 1 ? "" : fmt::format(" .. {}", paths->back()));
  return 0;
}

constexpr const char* kClassesHelp =
    "Write each class of alike ranks once (<prefix>.class.<k>.et) and a rank map "
    "(<prefix>.ranks.json) instead of a file per rank; orrery run reads either "
    "(docs/formats/rank-map.md)";

// ---- orrery gen llm / orrery gen inference ----------------------------------------------------

// Options both transformer generators share.
struct TransformerOptions {
  std::string model;
  std::string dtype;
  std::string device_memory;
  bool gzip = false;
  bool classes = false;
  size_t threads = 0;
  std::string output;
};

Expected<gen::TransformerModel> load_transformer(const TransformerOptions& options) {
  if (options.model.empty()) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "missing --model NAME|FILE.json (orrery gen llm --list-models lists the "
                       "presets)");
  }
  Expected<gen::TransformerModel> model = gen::resolve_model(options.model);
  if (!model) return model.error().with_context("--model");
  if (!options.dtype.empty()) {
    Expected<gen::DType> dtype = gen::parse_dtype(options.dtype);
    if (!dtype) return dtype.error().with_context("--dtype");
    model->dtype = *dtype;
  }
  return model;
}

// "3.30 EFLOP": FLOPs with an SI prefix.
std::string flops_text(double flops) {
  constexpr const char* kPrefixes[] = {"", "k", "M", "G", "T", "P", "E", "Z"};
  size_t index = 0;
  while (flops >= 1000.0 && index + 1 < std::size(kPrefixes)) {
    flops /= 1000.0;
    ++index;
  }
  return fmt::format("{:.3g} {}FLOP", flops, kPrefixes[index]);
}

std::string gib_text(uint64_t bytes) {
  return fmt::format("{:.2f}", static_cast<double>(bytes) / static_cast<double>(1ULL << 30));
}

// "174.6 B", "12.3 M", "4,096": a parameter count.
std::string params_text(uint64_t params) {
  if (params >= 1'000'000'000) return fmt::format("{:.1f} B", static_cast<double>(params) / 1e9);
  if (params >= 1'000'000) return fmt::format("{:.1f} M", static_cast<double>(params) / 1e6);
  return format_count(params);
}

std::string model_line(const gen::TransformerModel& model) {
  std::string moe;
  if (model.is_moe()) {
    moe = fmt::format(", {} experts (top {}), {} active", model.experts, model.top_k,
                      params_text(gen::active_parameters(model)));
  }
  return fmt::format(
      "model {}: {} layers, hidden {}, {} heads ({} key-value), MLP {} ({}), vocabulary {}, {}, "
      "{} parameters{}",
      model.name, model.layers, format_count(model.hidden), model.heads, model.kv_heads,
      format_count(model.ffn), model.mlp == gen::MlpKind::kSwiGlu ? "swiglu" : "gelu",
      format_count(model.vocab), gen::dtype_name(model.dtype),
      params_text(gen::total_parameters(model)), moe);
}

// Rank files an earlier run left beside the new ones would be read with them (orrery run takes
// every contiguous rank file of a prefix, and .et before .et.gz): say so.
void warn_stale_rank_files(const std::string& prefix, uint32_t ranks, bool gzip, bool classes) {
  std::error_code ec;
  // Both forms under one prefix are refused by the readers (chakra::TraceSet::load).
  const std::string other = classes ? chakra::rank_trace_path(prefix, 0) + (gzip ? ".gz" : "")
                                    : chakra::rank_map_path(prefix);
  if (std::filesystem::exists(other, ec)) {
    fmt::print(stderr,
               "orrery: warning: {} is left from an earlier run; a prefix holding rank files and "
               "a rank map is refused: remove {}\n",
               other, classes ? "the rank files" : "it and the class files");
  }
  if (classes) return;
  for (const char* suffix : {"", ".gz"}) {
    const std::string next = chakra::rank_trace_path(prefix, ranks) + suffix;
    if (std::filesystem::exists(next, ec)) {
      fmt::print(
          stderr,
          "orrery: warning: {} is left from an earlier run; tools reading the prefix take it "
          "as rank {}: remove it\n",
          next, ranks);
    }
  }
  if (gzip && std::filesystem::exists(chakra::rank_trace_path(prefix, 0), ec)) {
    fmt::print(stderr,
               "orrery: warning: {} is left from an earlier run and is read before the new .et.gz "
               "files: remove the old .et files\n",
               chakra::rank_trace_path(prefix, 0));
  }
}

void print_written(const gen::GeneratedTraces& traces, std::string_view group_summary) {
  if (!traces.rank_map.empty()) {
    fmt::print("wrote {} class file{}: {}{} ({} nodes over every rank, {})\n",
               format_count(traces.rank_files.size()), traces.rank_files.size() == 1 ? "" : "s",
               traces.rank_files.front(),
               traces.rank_files.size() == 1 ? "" : fmt::format(" .. {}", traces.rank_files.back()),
               format_count(traces.nodes), format_bytes(traces.bytes_written));
    fmt::print("wrote {}: {} ranks, each running one class file with its own peers and groups\n",
               traces.rank_map, format_count(traces.ranks));
  } else {
    fmt::print("wrote {} rank file{}: {}{} ({} nodes, {})\n",
               format_count(traces.rank_files.size()), traces.rank_files.size() == 1 ? "" : "s",
               traces.rank_files.front(),
               traces.rank_files.size() == 1 ? "" : fmt::format(" .. {}", traces.rank_files.back()),
               format_count(traces.nodes), format_bytes(traces.bytes_written));
  }
  fmt::print("wrote {}: {} communicator group{}{}\n", traces.group_file,
             format_count(traces.groups), traces.groups == 1 ? "" : "s", group_summary);
}

// --device-memory in bytes (0 when not given).
Expected<uint64_t> device_capacity(const TransformerOptions& options) {
  if (options.device_memory.empty()) return uint64_t{0};
  Expected<uint64_t> bytes = parse_bytes(options.device_memory);
  if (!bytes) return bytes.error().with_context("--device-memory");
  return *bytes;
}

// The per-stage memory table, and a warning for the stages above `capacity` (when not 0).
enum class MemoryTable : uint8_t { kTraining, kInference, kDlrm };

void print_memory(const std::vector<gen::StageMemory>& stages, uint64_t capacity,
                  const std::string& device_memory, MemoryTable table) {
  const bool inference = table == MemoryTable::kInference;
  const bool dlrm = table == MemoryTable::kDlrm;
  fmt::print("memory per rank (estimate, GiB):\n");
  if (dlrm) {
    fmt::print("  {:>5}  {:>10}  {:>10}  {:>11}  {:>10}\n", "rank", "weights", "gradients",
               "activations", "total");
  } else if (inference) {
    fmt::print("  {:>5}  {:>10}  {:>10}  {:>11}  {:>10}\n", "stage", "weights", "KV cache",
               "activations", "total");
  } else {
    fmt::print("  {:>5}  {:>10}  {:>10}  {:>10}  {:>11}  {:>10}  {:>9}\n", "stage", "weights",
               "gradients", "optimizer", "activations", "total", "in flight");
  }
  const size_t shown = stages.size() <= 16 ? stages.size() : 8;
  for (size_t index = 0; index < stages.size(); ++index) {
    if (index == shown && index + 8 < stages.size()) {
      fmt::print("  {:>5}\n", "...");
      index = stages.size() - 8;
    }
    const gen::StageMemory& stage = stages[index];
    const gen::MemoryBreakdown& m = stage.memory;
    if (dlrm) {
      fmt::print("  {:>5}  {:>10}  {:>10}  {:>11}  {:>10}\n", stage.stage, gib_text(m.weights),
                 gib_text(m.gradients), gib_text(m.activations), gib_text(m.total()));
    } else if (inference) {
      fmt::print("  {:>5}  {:>10}  {:>10}  {:>11}  {:>10}\n", stage.stage, gib_text(m.weights),
                 gib_text(m.kv_cache), gib_text(m.activations), gib_text(m.total()));
    } else {
      fmt::print("  {:>5}  {:>10}  {:>10}  {:>10}  {:>11}  {:>10}  {:>9}\n", stage.stage,
                 gib_text(m.weights), gib_text(m.gradients), gib_text(m.optimizer),
                 gib_text(m.activations), gib_text(m.total()), stage.in_flight);
    }
  }
  if (capacity == 0) return;
  std::vector<uint32_t> over;
  uint64_t largest = 0;
  for (const gen::StageMemory& stage : stages) {
    if (stage.memory.total() > capacity) over.push_back(stage.stage);
    largest = std::max(largest, stage.memory.total());
  }
  if (!over.empty()) {
    std::string list;
    for (size_t index = 0; index < over.size() && index < 8; ++index) {
      list += fmt::format("{}{}", index == 0 ? "" : ", ", over[index]);
    }
    if (over.size() > 8) list += ", ...";
    fmt::print(stderr,
               "orrery: warning: {}{} {} need{} up to {} GiB per rank (estimate), more "
               "than --device-memory {} ({} GiB)\n",
               dlrm ? "rank" : "pipeline stage", over.size() == 1 ? "" : "s", list,
               over.size() == 1 ? "s" : "", gib_text(largest), device_memory, gib_text(capacity));
  }
}

struct LlmOptions {
  TransformerOptions common;
  bool list_models = false;
  gen::LlmOptions plan;  // --model and --dtype are taken from `common`
};

int list_models() {
  fmt::print("{:<14} {:>6} {:>7} {:>5} {:>4} {:>7} {:>7} {:>8} {:>6} {:>7}  {}\n", "model",
             "layers", "hidden", "heads", "kv", "ffn", "vocab", "seq", "mlp", "params", "notes");
  for (const gen::TransformerModel& model : gen::model_presets()) {
    std::string notes;
    if (model.is_moe()) notes = fmt::format("{} experts, top {}", model.experts, model.top_k);
    if (model.tied_embeddings) notes += notes.empty() ? "tied embeddings" : ", tied embeddings";
    fmt::print("{:<14} {:>6} {:>7} {:>5} {:>4} {:>7} {:>7} {:>8} {:>6} {:>6.1f}B  {}\n", model.name,
               model.layers, model.hidden, model.heads, model.kv_heads, model.ffn, model.vocab,
               model.seq, model.mlp == gen::MlpKind::kSwiGlu ? "swiglu" : "gelu",
               static_cast<double>(gen::total_parameters(model)) / 1e9, notes);
  }
  return 0;
}

int run_llm(const LlmOptions& options) {
  if (options.list_models) return list_models();
  Expected<gen::TransformerModel> model = load_transformer(options.common);
  if (!model) return report_error(model.error());
  Expected<uint64_t> capacity = device_capacity(options.common);
  if (!capacity) return report_error(capacity.error());
  if (options.common.output.empty()) {
    return report_error(
        Error::make(ErrorKind::kInvalidArgument,
                    "missing -o PREFIX (rank files are written as <prefix>.<rank>.et)"));
  }
  gen::LlmOptions plan = options.plan;
  plan.model = options.common.model;
  plan.dtype = options.common.dtype;
  Expected<gen::LlmGenerator> generator = gen::make_llm_generator(plan);
  if (!generator) return report_error(generator.error());
  const gen::ParallelPlan& p = generator->plan();
  fmt::print("{}\n", model_line(*model));
  fmt::print(
      "plan: {} ranks = tp {} x cp {} x dp {} x pp {}; ep {}, sequence parallel {}, ZeRO {}, "
      "recomputation {}, {} schedule{}\n",
      format_count(p.ranks()), p.tp, p.cp, p.dp, p.pp, p.ep, p.sp ? "on" : "off", p.zero,
      p.recompute ? "full" : "off", gen::schedule_name(p.schedule),
      p.virtual_stages > 1 ? fmt::format(" ({} chunks per rank)", p.virtual_stages) : "");
  const double m = static_cast<double>(p.micro_batches());
  const double bubble = static_cast<double>(p.pp - 1) / (p.virtual_stages * m + p.pp - 1);
  fmt::print(
      "batch: {} sequences of {} tokens; {} micro-batches of {} per pipeline; pipeline bubble "
      "{:.1f}%\n",
      format_count(p.global_batch), format_count(p.seq), format_count(p.micro_batches()),
      p.micro_batch, 100.0 * bubble);

  gen::RankFileOptions files;
  files.gzip = options.common.gzip;
  files.classes = options.common.classes;
  files.threads = options.common.threads;
  files.generator = "orrery gen llm";
  Expected<gen::GeneratedTraces> traces =
      gen::write_llm_traces(*generator, options.common.output, files);
  if (!traces) return report_error(traces.error());
  std::string kinds;
  size_t counts[gen::kGroupKinds] = {};
  for (uint32_t id = 1; id <= generator->groups().count(); ++id) {
    ++counts[static_cast<size_t>(generator->groups().kind(id))];
  }
  for (size_t kind = 0; kind < gen::kGroupKinds; ++kind) {
    if (counts[kind] == 0) continue;
    kinds += fmt::format("{}{} {}", kinds.empty() ? " (" : ", ", counts[kind],
                         gen::group_kind_name(static_cast<gen::GroupKind>(kind)));
  }
  if (!kinds.empty()) kinds += ")";
  print_written(*traces, kinds);
  warn_stale_rank_files(options.common.output, generator->ranks(), options.common.gzip,
                        options.common.classes);
  const bool gpt_style = !model->is_moe() && model->mlp == gen::MlpKind::kGelu &&
                         model->ffn == 4ULL * model->hidden && model->kv_heads == model->heads;
  std::string reference;
  if (gpt_style) {
    const double formula = gen::megatron_flops(*model, p.global_batch, p.seq, p.recompute);
    reference = fmt::format(" (Megatron-LM formula {}: {:+.2f}%)", flops_text(formula),
                            100.0 * (static_cast<double>(traces->flops) / formula - 1.0));
  }
  fmt::print("FLOPs per iteration: {}{}\n", flops_text(static_cast<double>(traces->flops)),
             reference);
  print_memory(gen::estimate_training_memory(*model, p), *capacity, options.common.device_memory,
               MemoryTable::kTraining);
  return 0;
}

struct InferenceOptions {
  TransformerOptions common;
  uint32_t tp = 1, pp = 1;
  std::vector<uint32_t> prompt_lengths;
  std::vector<uint32_t> output_lengths;
  uint32_t requests = 0;
  uint32_t micro_batches = 1;
};

int run_inference(const InferenceOptions& options) {
  Expected<gen::TransformerModel> model = load_transformer(options.common);
  if (!model) return report_error(model.error());
  Expected<uint64_t> capacity = device_capacity(options.common);
  if (!capacity) return report_error(capacity.error());
  if (options.common.output.empty()) {
    return report_error(
        Error::make(ErrorKind::kInvalidArgument,
                    "missing -o PREFIX (rank files are written as <prefix>.<rank>.et)"));
  }
  gen::InferencePlan plan;
  plan.tp = options.tp;
  plan.pp = options.pp;
  plan.prompt_lengths = options.prompt_lengths;
  plan.output_lengths = options.output_lengths;
  plan.micro_batches = options.micro_batches;
  if (options.requests != 0) {
    if (plan.prompt_lengths.size() == 1) {
      plan.prompt_lengths.assign(options.requests, plan.prompt_lengths.front());
    } else if (plan.prompt_lengths.size() != options.requests) {
      return report_error(Error::make(ErrorKind::kInvalidArgument,
                                      "--requests {} with {} --prompt-lengths (give one length for "
                                      "all, or one per request)",
                                      options.requests, plan.prompt_lengths.size()));
    }
  }
  Expected<gen::InferenceGenerator> generator = gen::InferenceGenerator::create(*model, plan);
  if (!generator) return report_error(generator.error());
  const gen::InferencePlan& p = generator->plan();
  fmt::print("{}\n", model_line(*model));
  uint64_t prompt_tokens = 0;
  uint64_t generated = 0;
  for (size_t request = 0; request < p.requests(); ++request) {
    prompt_tokens += p.prompt_lengths[request];
    generated += p.output_lengths[request];
  }
  fmt::print(
      "plan: {} ranks = tp {} x pp {}; {} requests ({} prompt tokens, {} generated), prefill "
      "and {} decode steps{}\n",
      format_count(p.ranks()), p.tp, p.pp, format_count(p.requests()), format_count(prompt_tokens),
      format_count(generated), format_count(p.steps() - 1),
      p.micro_batches > 1 ? fmt::format(" in {} micro-batches", p.micro_batches) : "");
  gen::RankFileOptions files;
  files.gzip = options.common.gzip;
  files.classes = options.common.classes;
  files.threads = options.common.threads;
  files.generator = "orrery gen inference";
  Expected<gen::GeneratedTraces> traces =
      gen::write_inference_traces(*generator, options.common.output, files);
  if (!traces) return report_error(traces.error());
  print_written(*traces, traces->groups > 0 ? " (tensor)" : "");
  warn_stale_rank_files(options.common.output, generator->ranks(), options.common.gzip,
                        options.common.classes);
  fmt::print("FLOPs: {}\n", flops_text(static_cast<double>(traces->flops)));
  print_memory(gen::estimate_inference_memory(*model, p), *capacity, options.common.device_memory,
               MemoryTable::kInference);
  return 0;
}

void add_transformer_options(CLI::App& command, TransformerOptions& options) {
  command.add_option("--model", options.model,
                     "A preset (orrery gen llm --list-models) or a JSON model file");
  command.add_option("--dtype", options.dtype, "Data type override: fp32, bf16, fp16 or fp8");
  command.add_option("--device-memory", options.device_memory,
                     "Accelerator memory per rank (e.g. 80GiB): warn when the estimate exceeds it");
  command.add_flag("--gzip", options.gzip,
                   "Write gzip-compressed rank files (<prefix>.<rank>.et.gz)");
  command.add_flag("--classes", options.classes, kClassesHelp);
  command.add_option("--threads", options.threads, "Threads writing rank files (0: one per core)")
      ->check(thread_count());
  command.add_option("-o,--output", options.output,
                     "Output prefix: <prefix>.<rank>.et and the communicator groups <prefix>.json");
}

void add_llm_command(CLI::App& gen, int& exit_code) {
  auto options = std::make_shared<LlmOptions>();
  CLI::App* llm = gen.add_subcommand(
      "llm",
      "One training iteration of a decoder-only transformer under a parallel plan (data, tensor, "
      "sequence, pipeline, context, expert, ZeRO)\n  e.g. orrery gen llm --model gpt3-175b "
      "--global-batch 64 --micro-batch 1 --dp 2 --tp 8 --pp 4 -o gpt3");
  add_transformer_options(*llm, options->common);
  llm->add_flag("--list-models", options->list_models, "List the model presets and exit");
  llm->add_option("--global-batch", options->plan.global_batch,
                  "Sequences per iteration (all replicas)");
  llm->add_option("--micro-batch", options->plan.micro_batch,
                  "Sequences per micro-batch (default 1)");
  // 0 is how the plan says "the model's": given on the command line it would silently mean that.
  llm->add_option("--seq", options->plan.seq, "Sequence length (default: the model's)")
      ->check(whole_number_at_least(1));
  llm->add_option("--dp", options->plan.dp, "Data-parallel degree");
  llm->add_option("--tp", options->plan.tp, "Tensor-parallel degree");
  llm->add_option("--pp", options->plan.pp, "Pipeline-parallel degree (stages)");
  llm->add_flag("--sp", options->plan.sp, "Sequence parallelism with tensor parallelism");
  llm->add_option("--cp", options->plan.cp, "Context-parallel degree");
  llm->add_option("--ep", options->plan.ep, "Expert-parallel degree (divides --dp; MoE models)");
  llm->add_option("--zero", options->plan.zero,
                  "ZeRO stage: 0 none, 1 optimizer states, 2 and gradients, 3 and weights (FSDP)");
  llm->add_flag("--recompute", options->plan.recompute,
                "Full activation recomputation, layer by layer");
  llm->add_option("--schedule", options->plan.schedule,
                  "Pipeline schedule: 1f1b (default) or interleaved");
  llm->add_option("--virtual-stages", options->plan.virtual_stages,
                  "Model chunks per rank with --schedule interleaved (default 2)");
  llm->add_option("--bucket-size", options->plan.bucket_size,
                  "Data-parallel gradient bucket (e.g. 25MiB; default: one bucket per layer): "
                  "whole tensors in backward order, closed at this size, as DDP and Megatron-LM");
  llm->callback([options, &exit_code] { exit_code = run_llm(*options); });
}

void add_inference_command(CLI::App& gen, int& exit_code) {
  auto options = std::make_shared<InferenceOptions>();
  CLI::App* inference = gen.add_subcommand(
      "inference",
      "Prefill and decode steps of a batch of requests with a KV cache, tensor and pipeline "
      "parallel\n  e.g. orrery gen inference --model llama2-70b --tp 8 --prompt-lengths "
      "512,1024,2048 --output-lengths 128 -o serve");
  add_transformer_options(*inference, options->common);
  inference->add_option("--tp", options->tp, "Tensor-parallel degree");
  inference->add_option("--pp", options->pp, "Pipeline-parallel degree (stages)");
  inference
      ->add_option("--prompt-lengths", options->prompt_lengths,
                   "Prompt tokens of each request, comma-separated")
      ->delimiter(',');
  inference
      ->add_option("--output-lengths", options->output_lengths,
                   "Tokens each request generates: one value for all, or one per request")
      ->delimiter(',');
  inference->add_option("--requests", options->requests,
                        "Number of requests when --prompt-lengths gives one length for all");
  inference->add_option("--micro-batches", options->micro_batches,
                        "Request groups pipelined through the stages (default 1)");
  inference->callback([options, &exit_code] { exit_code = run_inference(*options); });
}

// ---- orrery gen dlrm ---------------------------------------------------------------------------

struct DlrmOptions {
  std::string model;
  bool list_models = false;
  uint32_t ranks = 0;
  uint64_t global_batch = 0;
  std::string sharding;  // "": table-wise
  std::string plan;      // an embedding sharding plan (orrery shard plan -o)
  uint32_t tables = 0;
  uint64_t rows = 0;
  uint32_t dim = 0;
  uint32_t pooling = 0;
  uint32_t dense_features = 0;
  std::vector<uint32_t> bottom_mlp;
  std::vector<uint32_t> top_mlp;
  std::string dtype;
  std::string device_memory;
  bool gzip = false;
  bool classes = false;
  size_t threads = 0;
  std::string output;
};

std::string widths_text(uint64_t first, const std::vector<uint32_t>& widths) {
  std::string text = fmt::format("{}", first);
  for (uint32_t width : widths) text += fmt::format("-{}", width);
  return text;
}

int list_dlrm_models() {
  fmt::print("{:<12} {:>6} {:>5} {:>14} {:>9} {:<16} {:<22} {:>8}\n", "model", "tables", "dim",
             "rows", "pooling", "bottom MLP", "top MLP", "params");
  for (const gen::DlrmModel& model : gen::dlrm_presets()) {
    // Lookups per sample of one table, as --pooling sets it (a range when tables differ).
    uint32_t least = UINT32_MAX;
    uint32_t most = 0;
    for (const gen::EmbeddingTable& table : model.tables) {
      least = std::min(least, table.pooling);
      most = std::max(most, table.pooling);
    }
    const std::string pooling = model.tables.empty() ? std::string("-")
                                : least == most      ? fmt::format("{}", least)
                                                     : fmt::format("{}-{}", least, most);
    fmt::print("{:<12} {:>6} {:>5} {:>14} {:>9} {:<16} {:<22} {:>7.2f}B\n", model.name,
               model.tables.size(), model.dim,
               format_count(model.embedding_parameters() / model.dim), pooling,
               widths_text(model.dense_features, model.bottom_mlp),
               widths_text(model.interaction_width(), model.top_mlp),
               static_cast<double>(model.embedding_parameters() + model.dense_parameters()) / 1e9);
  }
  return 0;
}

// The model, with the flags' overrides applied.
Expected<gen::DlrmModel> load_dlrm(const DlrmOptions& options) {
  if (options.model.empty()) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "missing --model NAME|FILE.json (orrery gen dlrm --list-models lists the "
                       "presets)");
  }
  Expected<gen::DlrmModel> model = gen::resolve_dlrm_model(options.model);
  if (!model) return model.error().with_context("--model");
  if (options.tables != 0) {
    if (options.tables > (1U << 16)) {
      return Error::make(ErrorKind::kInvalidArgument, "--tables {}: expected at most 65,536",
                         options.tables);
    }
    if (options.rows == 0) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "--tables {} needs --rows (rows of every table)", options.tables);
    }
    model->tables.assign(options.tables, gen::EmbeddingTable{});
  }
  if (options.rows != 0) {
    for (gen::EmbeddingTable& table : model->tables) table.rows = options.rows;
  }
  if (options.pooling != 0) {
    for (gen::EmbeddingTable& table : model->tables) table.pooling = options.pooling;
  }
  if (options.dense_features != 0) model->dense_features = options.dense_features;
  if (!options.bottom_mlp.empty()) model->bottom_mlp = options.bottom_mlp;
  if (!options.top_mlp.empty()) model->top_mlp = options.top_mlp;
  if (options.dim != 0) {
    model->dim = options.dim;
    if (options.bottom_mlp.empty()) model->bottom_mlp.back() = options.dim;
  }
  if (!options.dtype.empty()) {
    Expected<gen::DType> dtype = gen::parse_dtype(options.dtype);
    if (!dtype) return dtype.error().with_context("--dtype");
    model->dtype = *dtype;
  }
  if (Status status = gen::validate_dlrm_model(*model); !status) {
    return status.error().with_context(fmt::format("model {}", model->name));
  }
  return model;
}

// `--plan`: the placement, and the flags it implies (model, ranks, batch) filled in.
Expected<std::shared_ptr<const gen::DlrmShardPlan>> load_dlrm_placement(DlrmOptions& options) {
  Expected<gen::DlrmShardPlan> plan = gen::load_dlrm_shard_plan(options.plan);
  if (!plan) return plan.error().with_context("--plan");
  for (const auto& [given, flag] :
       {std::pair{!options.sharding.empty(), "--sharding"},
        std::pair{options.tables != 0, "--tables"}, std::pair{options.rows != 0, "--rows"},
        std::pair{options.pooling != 0, "--pooling"}}) {
    if (given) {
      return Error::make(
          ErrorKind::kInvalidArgument,
          "{} does not apply with --plan (the plan gives every table and its shards)", flag);
    }
  }
  if (options.model.empty()) {
    if (plan->model.empty() || !gen::resolve_dlrm_model(plan->model)) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "--plan {}: its tables came from '{}', which is not a DLRM model: give "
                         "--model for the MLPs (e.g. --model dlrm-mlperf)",
                         options.plan, plan->model);
    }
    options.model = plan->model;
  }
  if (options.ranks == 0) options.ranks = plan->world_size;
  if (options.global_batch == 0) {
    if (plan->batch_size == 0) {
      return Error(ErrorKind::kInvalidArgument,
                   "missing --global-batch (the plan does not say its batch)");
    }
    options.global_batch = uint64_t{plan->batch_size} * plan->world_size;
  }
  return std::make_shared<const gen::DlrmShardPlan>(std::move(*plan));
}

int run_dlrm(const DlrmOptions& given) {
  if (given.list_models) return list_dlrm_models();
  DlrmOptions options = given;
  std::shared_ptr<const gen::DlrmShardPlan> placement;
  if (!options.plan.empty()) {
    Expected<std::shared_ptr<const gen::DlrmShardPlan>> loaded = load_dlrm_placement(options);
    if (!loaded) return report_error(loaded.error());
    placement = *loaded;
  }
  Expected<gen::DlrmModel> model = load_dlrm(options);
  if (!model) return report_error(model.error());
  TransformerOptions memory;
  memory.device_memory = options.device_memory;
  Expected<uint64_t> capacity = device_capacity(memory);
  if (!capacity) return report_error(capacity.error());
  if (options.output.empty()) {
    return report_error(
        Error::make(ErrorKind::kInvalidArgument,
                    "missing -o PREFIX (rank files are written as <prefix>.<rank>.et)"));
  }
  if (options.ranks == 0) {
    return report_error(
        Error::make(ErrorKind::kInvalidArgument, "missing --ranks N (number of rank files)"));
  }
  gen::DlrmPlan plan;
  plan.ranks = options.ranks;
  plan.global_batch = options.global_batch;
  Expected<gen::Sharding> sharding =
      gen::parse_sharding(options.sharding.empty() ? "table" : options.sharding);
  if (!sharding) return report_error(sharding.error().with_context("--sharding"));
  plan.sharding = *sharding;
  plan.placement = placement;
  Expected<gen::DlrmGenerator> generator = gen::DlrmGenerator::create(*model, plan);
  if (!generator) return report_error(generator.error());
  const gen::DlrmModel& m = generator->model();
  fmt::print(
      "model {}: {} dense features, bottom MLP {}, {} embedding tables of dimension {} ({} rows, "
      "{} lookups per sample), top MLP {}, {}, {} parameters ({} dense)\n",
      m.name, m.dense_features, widths_text(m.dense_features, m.bottom_mlp),
      format_count(m.tables.size()), m.dim, format_count(m.embedding_parameters() / m.dim),
      format_count(m.lookups_per_sample()), widths_text(m.interaction_width(), m.top_mlp),
      gen::dtype_name(m.dtype), params_text(m.embedding_parameters() + m.dense_parameters()),
      params_text(m.dense_parameters()));
  if (placement) {
    std::string mix;
    for (gen::ShardingType type : gen::kAllShardingTypes) {
      const auto count =
          std::count_if(placement->tables.begin(), placement->tables.end(),
                        [&](const gen::PlannedTable& table) { return table.sharding == type; });
      if (count > 0) {
        mix +=
            fmt::format("{}{} {}", mix.empty() ? "" : ", ", count, gen::sharding_type_name(type));
      }
    }
    fmt::print(
        "plan: {} ranks ({} per host), tables placed by {} ({}), MLPs data-parallel; batch {} "
        "samples ({} per rank); embedding compute {}\n",
        format_count(plan.ranks), placement->local_world_size, options.plan, mix,
        format_count(plan.global_batch), format_count(plan.local_batch()),
        placement->has_estimates() ? "from the plan's estimates (scaled to the batch)"
                                   : "by the roofline (the plan has no estimates)");
    // Sizes differ by rank: the range over ranks of what each sends.
    uint64_t index_min = UINT64_MAX, index_max = 0, out_min = UINT64_MAX, out_max = 0;
    for (uint32_t rank = 0; rank < plan.ranks; ++rank) {
      const gen::DlrmPlacedComm placed = gen::dlrm_placed_comm(m, plan, rank);
      uint64_t index = 0, out = 0;
      for (uint64_t bytes : placed.index_to) index += bytes;
      for (uint64_t bytes : placed.output_to) out += bytes;
      index_min = std::min(index_min, index);
      index_max = std::max(index_max, index);
      out_min = std::min(out_min, out);
      out_max = std::max(out_max, out);
    }
    if (plan.ranks > 1) {
      fmt::print(
          "embedding exchange per rank (point to point): indices {} to {} sent, pooled "
          "embeddings and their gradients {} to {} each way\n",
          format_bytes(index_min), format_bytes(index_max), format_bytes(out_min),
          format_bytes(out_max));
    }
  } else {
    fmt::print("plan: {} ranks, {} tables, MLPs data-parallel; batch {} samples ({} per rank)\n",
               format_count(plan.ranks), gen::sharding_name(plan.sharding),
               format_count(plan.global_batch), format_count(plan.local_batch()));
  }
  const gen::DlrmComm comm = gen::dlrm_comm(m, plan);
  if (plan.ranks > 1 && !placement) {
    uint64_t dense = 0;
    for (uint64_t bytes : comm.mlp_all_reduce) dense += bytes;
    const bool row = plan.sharding == gen::Sharding::kRow;
    fmt::print(
        "communication per rank: indices all-to-all {}, pooled embeddings {} {}, their gradients "
        "{} {}, {} dense-gradient all-reduces of {} in all\n",
        format_bytes(comm.index_all_to_all), row ? "reduce-scatter" : "all-to-all",
        format_bytes(comm.output_dist), row ? "all-gather" : "all-to-all",
        format_bytes(comm.grad_dist), comm.mlp_all_reduce.size(), format_bytes(dense));
  }
  gen::RankFileOptions files;
  files.gzip = options.gzip;
  files.classes = options.classes;
  files.threads = options.threads;
  files.generator = "orrery gen dlrm";
  Expected<gen::GeneratedTraces> traces = gen::write_dlrm_traces(*generator, options.output, files);
  if (!traces) return report_error(traces.error());
  print_written(*traces, traces->groups > 0 ? " (every rank)" : "");
  warn_stale_rank_files(options.output, generator->ranks(), options.gzip, options.classes);
  fmt::print("FLOPs per iteration: {}\n", flops_text(static_cast<double>(traces->flops)));
  print_memory(gen::estimate_dlrm_memory(m, plan), *capacity, options.device_memory,
               MemoryTable::kDlrm);
  return 0;
}

void add_dlrm_command(CLI::App& gen, int& exit_code) {
  auto options = std::make_shared<DlrmOptions>();
  CLI::App* dlrm = gen.add_subcommand(
      "dlrm",
      "One training iteration of a DLRM: embedding tables sharded table-, row- or column-wise, "
      "data-parallel MLPs\n  e.g. orrery gen dlrm --model dlrm-mlperf --ranks 16 --global-batch "
      "65536 --sharding row -o dlrm");
  dlrm->add_option("--model", options->model,
                   "A preset (orrery gen dlrm --list-models) or a JSON model file");
  dlrm->add_flag("--list-models", options->list_models, "List the model presets and exit");
  dlrm->add_option("--ranks", options->ranks, "Number of ranks (rank files)");
  dlrm->add_option("--global-batch", options->global_batch,
                   "Samples per iteration over all ranks (a multiple of --ranks)");
  dlrm->add_option("--sharding", options->sharding,
                   "Embedding sharding: table (default), row or column");
  dlrm->add_option("--plan", options->plan,
                   "An embedding sharding plan (orrery shard plan -o plan.json): every table "
                   "placed as it says; --ranks and --global-batch default to the plan's");
  dlrm->add_option("--tables", options->tables,
                   "Replace the model's tables by this many tables of --rows rows");
  dlrm->add_option("--rows", options->rows, "Rows of every embedding table");
  dlrm->add_option("--dim", options->dim,
                   "Embedding dimension (the bottom MLP's last layer follows it)");
  dlrm->add_option("--pooling", options->pooling,
                   "Lookups per sample of every table (pooling factor)");
  dlrm->add_option("--dense-features", options->dense_features, "Inputs of the bottom MLP");
  dlrm->add_option("--bottom-mlp", options->bottom_mlp,
                   "Bottom MLP output widths, comma-separated (the last is the dimension)")
      ->delimiter(',');
  dlrm->add_option("--top-mlp", options->top_mlp,
                   "Top MLP output widths, comma-separated (its input is the interaction)")
      ->delimiter(',');
  dlrm->add_option("--dtype", options->dtype, "Data type: fp32 (default), bf16, fp16 or fp8");
  dlrm->add_option("--device-memory", options->device_memory,
                   "Accelerator memory per rank (e.g. 80GiB): warn when the estimate exceeds it");
  dlrm->add_flag("--gzip", options->gzip,
                 "Write gzip-compressed rank files (<prefix>.<rank>.et.gz)");
  dlrm->add_flag("--classes", options->classes, kClassesHelp);
  dlrm->add_option("--threads", options->threads, "Threads writing rank files (0: one per core)")
      ->check(thread_count());
  dlrm->add_option("-o,--output", options->output,
                   "Output prefix: <prefix>.<rank>.et and the communicator groups <prefix>.json");
  dlrm->callback([options, &exit_code] { exit_code = run_dlrm(*options); });
}
}  // namespace

void add_gen_command(CLI::App& app, int& exit_code) {
  CLI::App* gen = app.add_subcommand(
      "gen", "Generate synthetic Chakra traces (one .et file per rank, as ASTRA-sim reads them)");
  gen->require_subcommand(1);

  auto options = std::make_shared<MicrobenchOptions>();
  CLI::App* microbench = gen->add_subcommand(
      "microbench",
      "One collective (or a send/receive ring) per rank, in the shape of ASTRA-sim's "
      "microbenchmarks\n  e.g. orrery gen microbench --collective all-reduce --size 1MiB --ranks 8 "
      "-o all_reduce");
  microbench
      ->add_option("--collective", options->collective,
                   "all-reduce, all-gather, reduce-scatter, all-to-all, broadcast, reduce, gather, "
                   "scatter, barrier or send-recv")
      ->required();
  microbench->add_option("--size", options->size,
                         "comm_size per rank: bytes, or with a unit (1MiB = 1,048,576 B; 1MB = "
                         "1,000,000 B); the per-rank input for all-gather");
  microbench->add_option("--ranks", options->ranks, "Number of ranks (rank files)")->required();
  microbench->add_option("--compute-us", options->compute_us,
                         "A compute node of this many microseconds before the communication");
  microbench->add_option("--pg-name", options->pg_name,
                         "Communicator group of the collective (its pg_name attribute)");
  microbench
      ->add_option("-o,--output", options->output,
                   "Output prefix: writes <prefix>.0.et .. <prefix>.<ranks-1>.et")
      ->required();
  microbench->callback([options, &exit_code] { exit_code = run_microbench(*options); });
  add_llm_command(*gen, exit_code);
  add_inference_command(*gen, exit_code);
  add_dlrm_command(*gen, exit_code);
}

}  // namespace orrery::cli
