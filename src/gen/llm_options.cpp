#include "gen/llm_options.h"

#include <charconv>
#include <limits>

#include <fmt/format.h>

#include "core/units.h"

namespace orrery::gen {

namespace {

template <typename T>
Status parse_unsigned(std::string_view name, std::string_view value, T& out) {
  uint64_t parsed = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, parsed);
  if (ec != std::errc() || ptr != end || parsed > std::numeric_limits<T>::max()) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "--{} '{}': expected a non-negative whole number", name, value);
  }
  out = static_cast<T>(parsed);
  return Status::ok();
}

Status parse_flag(std::string_view name, std::string_view value, bool& out) {
  if (value == "true" || value == "1" || value == "on" || value == "yes") {
    out = true;
  } else if (value == "false" || value == "0" || value == "off" || value == "no") {
    out = false;
  } else {
    return Error::make(ErrorKind::kInvalidArgument, "--{} '{}': expected true or false", name,
                       value);
  }
  return Status::ok();
}

}  // namespace

std::string llm_option_names() {
  return "model, dtype, global-batch, micro-batch, seq, dp, tp, pp, cp, ep, sp, zero, recompute, "
         "schedule, virtual-stages, bucket-size";
}

Status set_llm_option(LlmOptions& options, std::string_view raw_name, std::string_view value) {
  std::string name(raw_name);
  for (char& c : name) {
    if (c == '_') c = '-';
  }
  if (name == "model") {
    options.model = value;
  } else if (name == "dtype") {
    options.dtype = value;
  } else if (name == "schedule") {
    options.schedule = value;
  } else if (name == "bucket-size") {
    options.bucket_size = value;
  } else if (name == "global-batch") {
    return parse_unsigned(name, value, options.global_batch);
  } else if (name == "micro-batch") {
    return parse_unsigned(name, value, options.micro_batch);
  } else if (name == "seq") {
    if (Status status = parse_unsigned(name, value, options.seq); !status) return status;
    // 0 stands for "the model's" inside the plan; written by hand it is a mistake, not a default.
    if (options.seq == 0) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "--seq 0: a sequence has at least 1 token (leave --seq out for the "
                         "model's length)");
    }
    return Status::ok();
  } else if (name == "dp") {
    return parse_unsigned(name, value, options.dp);
  } else if (name == "tp") {
    return parse_unsigned(name, value, options.tp);
  } else if (name == "pp") {
    return parse_unsigned(name, value, options.pp);
  } else if (name == "cp") {
    return parse_unsigned(name, value, options.cp);
  } else if (name == "ep") {
    return parse_unsigned(name, value, options.ep);
  } else if (name == "zero") {
    return parse_unsigned(name, value, options.zero);
  } else if (name == "virtual-stages") {
    return parse_unsigned(name, value, options.virtual_stages);
  } else if (name == "sp") {
    return parse_flag(name, value, options.sp);
  } else if (name == "recompute") {
    return parse_flag(name, value, options.recompute);
  } else {
    return Error::make(ErrorKind::kInvalidArgument, "unknown option '{}' (expected one of: {})",
                       raw_name, llm_option_names());
  }
  return Status::ok();
}

Expected<LlmGenerator> make_llm_generator(const LlmOptions& options) {
  if (options.model.empty()) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "missing --model NAME|FILE.json (orrery gen llm --list-models lists the "
                       "presets)");
  }
  Expected<TransformerModel> model = resolve_model(options.model);
  if (!model) return model.error().with_context("--model");
  if (!options.dtype.empty()) {
    Expected<DType> dtype = parse_dtype(options.dtype);
    if (!dtype) return dtype.error().with_context("--dtype");
    model->dtype = *dtype;
  }
  ParallelPlan plan;
  plan.dp = options.dp;
  plan.tp = options.tp;
  plan.pp = options.pp;
  plan.cp = options.cp;
  plan.ep = options.ep;
  plan.sp = options.sp;
  plan.zero = options.zero;
  plan.recompute = options.recompute;
  plan.global_batch = options.global_batch;
  plan.micro_batch = options.micro_batch;
  plan.seq = options.seq;
  Expected<PipelineSchedule> schedule = parse_schedule(options.schedule);
  if (!schedule) return schedule.error().with_context("--schedule");
  plan.schedule = *schedule;
  plan.virtual_stages = options.virtual_stages != 0                       ? options.virtual_stages
                        : plan.schedule == PipelineSchedule::kInterleaved ? 2
                                                                          : 1;
  if (!options.bucket_size.empty()) {
    Expected<uint64_t> bytes = parse_bytes(options.bucket_size);
    if (!bytes) return bytes.error().with_context("--bucket-size");
    plan.bucket_bytes = *bytes;
  }
  return LlmGenerator::create(std::move(*model), plan);
}

}  // namespace orrery::gen
