#include "gen/transformer_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "core/json_config.h"
#include "gen/common.h"

namespace orrery::gen {

namespace {

// Operations per element of the element-wise work (docs/models/workloads.md). They are small next
// to the matrix products (below 0.1% of a GPT layer) and exist so that the roofline can time these
// memory-bound nodes by their bytes.
constexpr uint64_t kLayerNormFlops = 5;  // mean, variance, normalize, scale, shift
constexpr uint64_t kRmsNormFlops = 4;    // square, mean, normalize, scale
constexpr uint64_t kResidualFlops = 1;   // the residual add fused into the norm that follows it
constexpr uint64_t kDropoutFlops = 2;    // compare with the mask, scale
constexpr uint64_t kGeluFlops = 8;       // tanh approximation
constexpr uint64_t kSwiGluFlops = 5;     // SiLU (4) and the product with the up projection (1)
constexpr uint64_t kSoftmaxFlops = 4;    // max, exponent, sum, scale: per attention score
constexpr uint64_t kRouterFlops = 5;     // softmax and top-k over the experts, per token and expert
constexpr uint64_t kLossFlops = 5;       // cross-entropy: max, subtract, exponent, sum, log
constexpr uint64_t kAdamFlops = 12;      // per parameter: moments, bias correction, update, decay

uint64_t norm_params(const TransformerModel& model) {
  return model.norm == NormKind::kLayerNorm ? 2ULL * model.hidden : model.hidden;
}

uint64_t norm_flops(const TransformerModel& model) {
  return (model.norm == NormKind::kLayerNorm ? kLayerNormFlops : kRmsNormFlops) + kResidualFlops +
         (model.dropout ? kDropoutFlops : 0);
}

// A norm with the residual add (and dropout) fused in: reads the two inputs, writes the output.
OpCost norm_cost(const TransformerModel& model, uint64_t tokens) {
  const uint64_t elements = tokens * model.hidden;
  const uint64_t b = dtype_bytes(model.dtype);
  return {norm_flops(model) * elements,
          (3 * elements + norm_params(model)) * b + (model.dropout ? elements * kMaskBytes : 0)};
}

OpCost norm_bwd_cost(const TransformerModel& model, uint64_t tokens) {
  const OpCost forward = norm_cost(model, tokens);
  return {2 * forward.flops, forward.bytes + norm_params(model) * dtype_bytes(model.dtype)};
}

// A matrix product of (tokens x in) by (in x out): 2 tokens in out operations; reads input and
// weights, writes the output.
OpCost matmul_cost(uint64_t tokens, uint64_t in, uint64_t out, uint32_t bytes_per_element) {
  return {2 * tokens * in * out, (tokens * in + in * out + tokens * out) * bytes_per_element,
          GemmShape{tokens, out, in, 1}};
}

OpCost twice(const OpCost& cost) { return {2 * cost.flops, 2 * cost.bytes}; }

// The backward products of a forward GEMM: same operations and bytes, transposed shapes.
OpCost dgrad(const OpCost& forward) { return {forward.flops, forward.bytes, forward.gemm.dgrad()}; }
OpCost wgrad(const OpCost& forward) { return {forward.flops, forward.bytes, forward.gemm.wgrad()}; }

struct PresetSpec {
  const char* name;
  uint32_t layers, hidden, heads, kv_heads, ffn, vocab, seq;
  MlpKind mlp;
  NormKind norm;
  bool bias, tied, positions, dropout;
  uint32_t experts, top_k;
};

// Published architectures. GPT-3 uses Megatron-LM's padded vocabulary (51,200) as its paper on
// 175B training does; Llama and Mixtral use their tokenizers' sizes.
constexpr std::array<PresetSpec, 6> kPresets = {{
    {"gpt3-175b", 96, 12288, 96, 96, 49152, 51200, 2048, MlpKind::kGelu, NormKind::kLayerNorm, true,
     true, true, true, 0, 0},
    {"gpt3-6.7b", 32, 4096, 32, 32, 16384, 51200, 2048, MlpKind::kGelu, NormKind::kLayerNorm, true,
     true, true, true, 0, 0},
    {"llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096, MlpKind::kSwiGlu, NormKind::kRmsNorm, false,
     false, false, false, 0, 0},
    {"llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096, MlpKind::kSwiGlu, NormKind::kRmsNorm, false,
     false, false, false, 0, 0},
    {"llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192, MlpKind::kSwiGlu, NormKind::kRmsNorm,
     false, false, false, false, 0, 0},
    {"mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 4096, MlpKind::kSwiGlu, NormKind::kRmsNorm,
     false, false, false, false, 8, 2},
}};

TransformerModel from_spec(const PresetSpec& spec) {
  TransformerModel model;
  model.name = spec.name;
  model.layers = spec.layers;
  model.hidden = spec.hidden;
  model.heads = spec.heads;
  model.kv_heads = spec.kv_heads;
  model.ffn = spec.ffn;
  model.vocab = spec.vocab;
  model.seq = spec.seq;
  model.mlp = spec.mlp;
  model.norm = spec.norm;
  model.bias = spec.bias;
  model.tied_embeddings = spec.tied;
  model.learned_positions = spec.positions;
  model.dropout = spec.dropout;
  model.experts = spec.experts;
  model.top_k = spec.top_k;
  return model;
}

std::string preset_names() {
  std::string names;
  for (const PresetSpec& spec : kPresets)
    names += fmt::format("{}{}", names.empty() ? "" : ", ", spec.name);
  return names;
}

// The keys a model file may hold.
// clang-format off
constexpr std::array<const char*, 24> kModelKeys = {
    "name",      "base",           "layers",  "hidden",          "heads",
    "kv_heads",  "head_dim",       "ffn",     "vocab",           "seq",
    "mlp",       "norm",           "bias",    "tied_embeddings", "learned_positions",
    "dropout",   "dtype",          "experts", "top_k",           "moe_ffn",
    "moe_every", "capacity_factor",
    "unfused_attention", "grad_accumulation_bytes"};
// clang-format on

}  // namespace

Expected<DType> parse_dtype(std::string_view name) {
  if (name == "fp32" || name == "float32") return DType::kFp32;
  if (name == "bf16" || name == "bfloat16") return DType::kBf16;
  if (name == "fp16" || name == "float16") return DType::kFp16;
  if (name == "fp8") return DType::kFp8;
  return Error::make(ErrorKind::kInvalidArgument,
                     "unknown data type '{}' (expected fp32, bf16, fp16 or fp8)", name);
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFp32:
      return "fp32";
    case DType::kBf16:
      return "bf16";
    case DType::kFp16:
      return "fp16";
    case DType::kFp8:
      return "fp8";
  }
  return "?";
}

uint32_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::kFp32:
      return 4;
    case DType::kBf16:
    case DType::kFp16:
      return 2;
    case DType::kFp8:
      return 1;
  }
  return 2;
}

Status check_tensor_parallel(const TransformerModel& model, uint32_t tp) {
  if (tp <= 1) return {};
  if (model.heads % tp != 0) {
    return plan_error(fmt::format("--tp {} does not divide the {} attention heads of {}", tp,
                                  model.heads, model.name));
  }
  if (model.kv_heads % tp != 0) {
    return plan_error(fmt::format("--tp {} does not divide the {} key-value heads of {}", tp,
                                  model.kv_heads, model.name));
  }
  const uint64_t ffn = model.is_moe() ? model.expert_ffn() : model.ffn;
  if (ffn % tp != 0 || model.ffn % tp != 0) {
    return plan_error(
        fmt::format("--tp {} does not divide the MLP size {} of {}", tp, ffn, model.name));
  }
  return {};
}

Status validate_model(const TransformerModel& model) {
  const std::array<std::pair<const char*, uint32_t>, 7> sizes = {{{"layers", model.layers},
                                                                  {"hidden", model.hidden},
                                                                  {"heads", model.heads},
                                                                  {"kv_heads", model.kv_heads},
                                                                  {"ffn", model.ffn},
                                                                  {"vocab", model.vocab},
                                                                  {"seq", model.seq}}};
  for (const auto& [field, value] : sizes) {
    if (value == 0) {
      return Error::make(ErrorKind::kInvalidArgument, "model '{}': {} must be positive", model.name,
                         field);
    }
  }
  if (model.kv_heads > model.heads || model.heads % model.kv_heads != 0) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "model '{}': kv_heads {} does not divide heads {} (grouped-query attention "
                       "shares each key-value head among heads / kv_heads query heads)",
                       model.name, model.kv_heads, model.heads);
  }
  if (model.head_dim == 0 && model.hidden % model.heads != 0) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "model '{}': heads {} do not divide hidden {} (give head_dim)", model.name,
                       model.heads, model.hidden);
  }
  if (model.experts > 0) {
    if (model.top_k == 0 || model.top_k > model.experts) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "model '{}': top_k {} must be from 1 to experts {}", model.name,
                         model.top_k, model.experts);
    }
    if (model.moe_every == 0) {
      return Error::make(ErrorKind::kInvalidArgument, "model '{}': moe_every must be positive",
                         model.name);
    }
    if (!(model.capacity_factor >= 1.0) || !std::isfinite(model.capacity_factor)) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "model '{}': capacity_factor {} must be at least 1", model.name,
                         model.capacity_factor);
    }
  } else if (model.top_k != 0 || model.moe_ffn != 0) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "model '{}': top_k and moe_ffn need experts (a Mixture-of-Experts model)",
                       model.name);
  }
  return Status::ok();
}

const std::vector<TransformerModel>& model_presets() {
  static const std::vector<TransformerModel> presets = [] {
    std::vector<TransformerModel> models;
    for (const PresetSpec& spec : kPresets) models.push_back(from_spec(spec));
    return models;
  }();
  return presets;
}

Expected<TransformerModel> load_model_file(const std::string& path) {
  Expected<JsonConfig> config = JsonConfig::load(path);
  if (!config) return config.error();
  const nlohmann::json& doc = config->doc();
  if (!doc.is_object()) {
    return Error::make(ErrorKind::kConfig, "{}: expected a JSON object of model fields, found {}",
                       path, json_excerpt(doc));
  }
  for (const auto& [key, value] : doc.items()) {
    bool known = false;
    for (const char* name : kModelKeys) known = known || key == name;
    if (!known) {
      std::string keys;
      for (const char* name : kModelKeys)
        keys += fmt::format("{}{}", keys.empty() ? "" : ", ", name);
      return config->error(key, fmt::format("unknown model field (expected one of {})", keys));
    }
  }
  TransformerModel model;
  model.name = std::filesystem::path(path).stem().string();
  Expected<std::optional<std::string>> base = config->get_string("base");
  if (!base) return base.error();
  if (base->has_value()) {
    bool found = false;
    for (const TransformerModel& preset : model_presets()) {
      if (preset.name == **base) {
        model = preset;
        found = true;
      }
    }
    if (!found) {
      return config->error(
          "base", fmt::format("unknown preset '{}' (expected {})", **base, preset_names()));
    }
  }
  Expected<std::optional<std::string>> name = config->get_string("name");
  if (!name) return name.error();
  if (name->has_value()) model.name = **name;

  constexpr int64_t kMax = std::numeric_limits<uint32_t>::max();
  const std::array<std::pair<const char*, uint32_t*>, 13> integers = {{
      {"layers", &model.layers},
      {"hidden", &model.hidden},
      {"heads", &model.heads},
      {"kv_heads", &model.kv_heads},
      {"head_dim", &model.head_dim},
      {"ffn", &model.ffn},
      {"vocab", &model.vocab},
      {"seq", &model.seq},
      {"experts", &model.experts},
      {"top_k", &model.top_k},
      {"moe_ffn", &model.moe_ffn},
      {"moe_every", &model.moe_every},
      {"grad_accumulation_bytes", &model.grad_accumulation_bytes},
  }};
  const bool kv_given = doc.contains("kv_heads");
  for (const auto& [key, field] : integers) {
    const bool may_be_zero =
        std::string_view(key) == "head_dim" || std::string_view(key) == "experts" ||
        std::string_view(key) == "top_k" || std::string_view(key) == "moe_ffn" ||
        std::string_view(key) == "grad_accumulation_bytes";
    Expected<std::optional<int64_t>> value = config->get_int(key, may_be_zero ? 0 : 1, kMax);
    if (!value) return value.error();
    if (value->has_value()) *field = static_cast<uint32_t>(**value);
  }
  if (!kv_given && !base->has_value()) model.kv_heads = model.heads;

  const std::array<std::pair<const char*, bool*>, 5> flags = {{
      {"bias", &model.bias},
      {"tied_embeddings", &model.tied_embeddings},
      {"learned_positions", &model.learned_positions},
      {"dropout", &model.dropout},
      {"unfused_attention", &model.unfused_attention},
  }};
  for (const auto& [key, field] : flags) {
    if (!doc.contains(key)) continue;
    const nlohmann::json& value = doc.at(key);
    if (!value.is_boolean()) {
      return config->error(key,
                           fmt::format("expected true or false, found {}", json_excerpt(value)));
    }
    *field = value.get<bool>();
  }
  Expected<std::optional<std::string>> mlp = config->get_string("mlp");
  if (!mlp) return mlp.error();
  if (mlp->has_value()) {
    if (**mlp == "gelu") {
      model.mlp = MlpKind::kGelu;
    } else if (**mlp == "swiglu") {
      model.mlp = MlpKind::kSwiGlu;
    } else {
      return config->error("mlp",
                           fmt::format("expected \"gelu\" or \"swiglu\", found \"{}\"", **mlp));
    }
  }
  Expected<std::optional<std::string>> norm = config->get_string("norm");
  if (!norm) return norm.error();
  if (norm->has_value()) {
    if (**norm == "layernorm") {
      model.norm = NormKind::kLayerNorm;
    } else if (**norm == "rmsnorm") {
      model.norm = NormKind::kRmsNorm;
    } else {
      return config->error(
          "norm", fmt::format("expected \"layernorm\" or \"rmsnorm\", found \"{}\"", **norm));
    }
  }
  Expected<std::optional<std::string>> dtype = config->get_string("dtype");
  if (!dtype) return dtype.error();
  if (dtype->has_value()) {
    Expected<DType> parsed = parse_dtype(**dtype);
    if (!parsed) return config->error("dtype", parsed.error().message());
    model.dtype = *parsed;
  }
  Expected<std::optional<double>> capacity = config->get_number("capacity_factor", 0.0);
  if (!capacity) return capacity.error();
  if (capacity->has_value()) model.capacity_factor = **capacity;

  if (Status status = validate_model(model); !status) return status.error().with_context(path);
  return model;
}

Expected<TransformerModel> resolve_model(std::string_view name_or_path) {
  for (const TransformerModel& preset : model_presets()) {
    if (preset.name == name_or_path) return preset;
  }
  const std::string path(name_or_path);
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec) ||
      (path.size() > 5 && path.substr(path.size() - 5) == ".json")) {
    return load_model_file(path);
  }
  return Error::make(ErrorKind::kInvalidArgument,
                     "unknown model '{}' (expected a preset: {}; or a JSON model file)",
                     name_or_path, preset_names());
}

uint64_t padded_vocab(const TransformerModel& model, uint32_t tp) {
  return ceil_div(model.vocab, tp) * tp;
}

std::vector<ParamTensor> layer_tensors(const TransformerModel& model, uint32_t layer, uint32_t tp,
                                       uint32_t ep) {
  const uint64_t h = model.hidden;
  const uint64_t q = model.q_dim();
  const uint64_t kv = model.kv_dim();
  const uint64_t t = tp;
  const uint64_t up_outputs = model.mlp_matrices() - 1ULL;  // 1 (GeLU) or 2 (gate and up, fused)
  std::vector<ParamTensor> tensors;
  auto add = [&tensors](uint64_t params, bool expert = false) {
    if (params != 0) tensors.push_back({params, expert});
  };
  // A norm: its weight, and its bias for LayerNorm (replicated).
  auto norm = [&] {
    add(h);
    if (model.norm == NormKind::kLayerNorm) add(h);
  };
  // An MLP's two matrices and their biases: up (and gate) column-parallel, down row-parallel. The
  // down matrix takes what is left of the pair's shard, so the sum is that of the pair.
  auto mlp = [&](uint64_t f, bool expert) {
    const uint64_t up = h * f * up_outputs / t;
    add(up, expert);
    if (model.bias) add(f * up_outputs / t, expert);
    add((h * f * up_outputs + f * h) / t - up, expert);
    if (model.bias) add(h, expert);
  };
  // Attention: QKV column-parallel, output projection row-parallel.
  norm();
  add(h * (q + 2 * kv) / t);
  if (model.bias) add((q + 2 * kv) / t);
  add(q * h / t);
  if (model.bias) add(h);
  norm();
  if (model.is_moe_layer(layer)) {
    add(h * model.experts);  // the router, replicated
    for (uint32_t expert = 0; expert < model.experts / ep; ++expert) mlp(model.expert_ffn(), true);
  } else {
    mlp(model.ffn, false);
  }
  return tensors;
}

LayerParams layer_params(const TransformerModel& model, uint32_t layer, uint32_t tp, uint32_t ep) {
  LayerParams params;
  for (const ParamTensor& tensor : layer_tensors(model, layer, tp, ep)) {
    (tensor.expert ? params.expert : params.dense) += tensor.params;
  }
  return params;
}

std::vector<uint64_t> embedding_tensors(const TransformerModel& model, uint32_t tp) {
  // Megatron-LM shards the word embedding by vocabulary rows and keeps position embeddings whole.
  std::vector<uint64_t> tensors{padded_vocab(model, tp) / tp * model.hidden};
  if (model.learned_positions) tensors.push_back(static_cast<uint64_t>(model.seq) * model.hidden);
  return tensors;
}

uint64_t embedding_params(const TransformerModel& model, uint32_t tp) {
  uint64_t params = 0;
  for (uint64_t tensor : embedding_tensors(model, tp)) params += tensor;
  return params;
}

std::vector<uint64_t> head_tensors(const TransformerModel& model, uint32_t tp,
                                   bool holds_embedding) {
  std::vector<uint64_t> tensors{model.hidden};  // the final norm's weight
  if (model.norm == NormKind::kLayerNorm) tensors.push_back(model.hidden);
  if (!(model.tied_embeddings && holds_embedding)) {
    tensors.push_back(padded_vocab(model, tp) / tp * model.hidden);
  }
  return tensors;
}

uint64_t head_params(const TransformerModel& model, uint32_t tp, bool holds_embedding) {
  uint64_t params = 0;
  for (uint64_t tensor : head_tensors(model, tp, holds_embedding)) params += tensor;
  return params;
}

uint64_t total_parameters(const TransformerModel& model) {
  uint64_t total = embedding_params(model, 1) + head_params(model, 1, true);
  for (uint32_t layer = 0; layer < model.layers; ++layer)
    total += layer_params(model, layer, 1, 1).total();
  return total;
}

uint64_t active_parameters(const TransformerModel& model) {
  if (!model.is_moe()) return total_parameters(model);
  uint64_t total = total_parameters(model);
  for (uint32_t layer = 0; layer < model.layers; ++layer) {
    const LayerParams params = layer_params(model, layer, 1, 1);
    total -= params.expert / model.experts * (model.experts - model.top_k);
  }
  return total;
}

uint64_t LayerCosts::forward_flops() const {
  uint64_t sum = 0;
  for (const OpCost* cost : {&attn_norm, &qkv, &attention, &attn_softmax, &attn_out, &mlp_norm,
                             &router, &mlp_up, &mlp_act, &mlp_down}) {
    sum += cost->flops;
  }
  return sum;
}

uint64_t LayerCosts::backward_flops() const {
  uint64_t sum = 0;
  for (const OpCost* cost :
       {&attn_norm_bwd, &qkv_dgrad, &qkv_wgrad, &attention_bwd, &attn_softmax_bwd, &attn_out_dgrad,
        &attn_out_wgrad, &mlp_norm_bwd, &router_bwd, &mlp_up_dgrad, &mlp_up_wgrad, &mlp_act_bwd,
        &mlp_down_dgrad, &mlp_down_wgrad}) {
    sum += cost->flops;
  }
  return sum;
}

OpCost attention_cost(const TransformerModel& model, uint32_t tp, uint64_t sum_q, uint64_t sum_kv,
                      uint64_t sum_q_kv) {
  const uint64_t t = tp;
  // Scores (Q K^T) and the weighted sum (P V): 2 x 2 s_q s_kv (a d) / t, plus the softmax.
  return {
      4 * sum_q_kv * model.q_dim() / t + kSoftmaxFlops * sum_q_kv * (model.heads / t),
      (2 * sum_q * model.q_dim() / t + 2 * sum_kv * model.kv_dim() / t) * dtype_bytes(model.dtype)};
}

LayerCosts layer_costs(const TransformerModel& model, uint32_t layer, const LayerShard& shard) {
  const uint32_t b = dtype_bytes(model.dtype);
  const uint64_t t = shard.tp;
  const uint64_t h = model.hidden;
  const uint64_t q = model.q_dim();
  const uint64_t kv = model.kv_dim();
  const uint64_t tokens = shard.batch * shard.q_tokens;
  const uint64_t kv_tokens = shard.batch * shard.kv_tokens;
  LayerCosts costs;
  costs.tokens = tokens;
  costs.norm_tokens = shard.sp ? tokens / t : tokens;

  costs.attn_norm = norm_cost(model, costs.norm_tokens);
  costs.mlp_norm = costs.attn_norm;
  costs.attn_norm_bwd = norm_bwd_cost(model, costs.norm_tokens);
  costs.mlp_norm_bwd = costs.attn_norm_bwd;

  costs.qkv = matmul_cost(tokens, h, (q + 2 * kv) / t, b);
  costs.attention = attention_cost(model, shard.tp, tokens, kv_tokens, tokens * shard.kv_tokens);
  // Attention's shape is its scores product, per sequence and local head: (s_q x d) by (d x s_kv).
  costs.attention.gemm = {shard.q_tokens, shard.kv_tokens, model.head_size(),
                          shard.batch * (model.heads / t)};
  costs.attention_bwd = {2 * costs.attention.flops,
                         (4 * tokens * q / t + 4 * kv_tokens * kv / t) * b, costs.attention.gemm};
  if (model.unfused_attention) {
    // The scores, b (a/t) s_q s_kv elements in the model's type: the forward GEMMs write them and
    // read the probabilities back (2 passes); the softmax reads and writes them, dropout writes a
    // 1-byte mask beside a second copy; backward, the GEMMs write and read them twice, dropout's
    // and softmax's backward read two tensors and write one each.
    const uint64_t scores = shard.batch * (model.heads / t) * shard.q_tokens * shard.kv_tokens;
    const uint64_t passes = model.dropout ? 4 : 2;  // softmax (read, write), dropout (read, write)
    costs.attention.bytes += 2 * scores * b;
    costs.attention_bwd.bytes += 4 * scores * b;
    costs.attn_softmax = {scores * (model.dropout ? 2 : 1),
                          passes * scores * b + (model.dropout ? scores : 0)};
    costs.attn_softmax_bwd = {2 * costs.attn_softmax.flops,
                              (model.dropout ? 5 : 3) * scores * b + (model.dropout ? scores : 0)};
  }
  costs.attn_out = matmul_cost(tokens, q / t, h, b);
  costs.qkv_dgrad = dgrad(costs.qkv);
  costs.qkv_wgrad = wgrad(costs.qkv);
  costs.attn_out_dgrad = dgrad(costs.attn_out);
  costs.attn_out_wgrad = wgrad(costs.attn_out);

  const uint64_t up_outputs = model.mlp_matrices() - 1ULL;
  const bool swiglu = model.mlp == MlpKind::kSwiGlu;
  uint64_t mlp_tokens = tokens;
  uint64_t f = model.ffn;
  uint64_t weight_copies = 1;  // expert weights read per operation
  if (model.is_moe_layer(layer)) {
    const uint64_t e = model.experts;
    costs.router = {2 * tokens * h * e + kRouterFlops * tokens * e,
                    (tokens * h + h * e + tokens * e) * b};
    costs.router_bwd = twice(costs.router);
    costs.expert_tokens = static_cast<uint64_t>(std::ceil(
        static_cast<double>(model.top_k) * static_cast<double>(tokens) * model.capacity_factor));
    mlp_tokens = costs.expert_tokens;
    f = model.expert_ffn();
    // The weights of every local expert some token is routed to are read.
    weight_copies = std::min<uint64_t>(e / shard.ep, costs.expert_tokens);
  }
  const uint64_t f_t = f / t;
  costs.mlp_up = {
      2 * mlp_tokens * h * f_t * up_outputs,
      (mlp_tokens * h + weight_copies * h * f_t * up_outputs + mlp_tokens * f_t * up_outputs) * b,
      GemmShape{mlp_tokens, f_t * up_outputs, h, 1}};
  costs.mlp_act = {(swiglu ? kSwiGluFlops : kGeluFlops) * mlp_tokens * f_t,
                   (swiglu ? 3 : 2) * mlp_tokens * f_t * b};
  costs.mlp_act_bwd = {2 * costs.mlp_act.flops, (swiglu ? 5 : 3) * mlp_tokens * f_t * b};
  costs.mlp_down = {2 * mlp_tokens * f_t * h,
                    (mlp_tokens * f_t + weight_copies * f_t * h + mlp_tokens * h) * b,
                    GemmShape{mlp_tokens, h, f_t, 1}};
  costs.mlp_up_dgrad = dgrad(costs.mlp_up);
  costs.mlp_up_wgrad = wgrad(costs.mlp_up);
  costs.mlp_down_dgrad = dgrad(costs.mlp_down);
  costs.mlp_down_wgrad = wgrad(costs.mlp_down);
  return costs;
}

EdgeCosts edge_costs(const TransformerModel& model, const LayerShard& shard) {
  const uint32_t b = dtype_bytes(model.dtype);
  const uint64_t t = shard.tp;
  const uint64_t h = model.hidden;
  const uint64_t tokens = shard.batch * shard.q_tokens;
  const uint64_t norm_tokens = shard.sp ? tokens / t : tokens;
  const uint64_t v_t = padded_vocab(model, shard.tp) / t;
  const uint64_t elements = tokens * h;
  const uint64_t positions = model.learned_positions ? 1 : 0;
  EdgeCosts costs;
  // A lookup is a copy: one operation per element written (plus the position add).
  costs.embedding = {elements * (1 + positions), elements * (2 + positions) * b};
  costs.embedding_bwd = {elements * (1 + positions), elements * (3 + 2 * positions) * b};
  costs.final_norm = norm_cost(model, norm_tokens);
  costs.final_norm_bwd = norm_bwd_cost(model, norm_tokens);
  costs.logits = matmul_cost(tokens, h, v_t, b);
  costs.logits_dgrad = dgrad(costs.logits);
  costs.logits_wgrad = wgrad(costs.logits);
  costs.loss = {kLossFlops * tokens * v_t, tokens * v_t * b + 3 * tokens * 4};
  costs.loss_bwd = {2 * tokens * v_t, 2 * tokens * v_t * b};
  return costs;
}

OpCost optimizer_cost(const TransformerModel& model, uint64_t params) {
  const uint64_t b = dtype_bytes(model.dtype);
  const uint64_t copy = model.dtype == DType::kFp32 ? 0 : b;
  // Reads gradient, master weight, two moments (fp32); writes master weight, moments and the copy.
  return {kAdamFlops * params, params * (b + 12 + 12 + copy)};
}

double megatron_flops(const TransformerModel& model, uint64_t global_batch, uint64_t seq,
                      bool recompute) {
  const double big_b = static_cast<double>(global_batch);
  const double s = static_cast<double>(seq);
  const double l = model.layers;
  const double h = model.hidden;
  const double v = model.vocab;
  if (recompute) return 96.0 * big_b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h));
  return 72.0 * big_b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * l * h));
}

}  // namespace orrery::gen
