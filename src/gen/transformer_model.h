// gen/transformer_model.h: decoder-only transformers as the trace generators see them.
//
// A TransformerModel is the architecture (layers, hidden size, heads, key-value heads, MLP,
// vocabulary, sequence, data type, optional Mixture-of-Experts); presets name the models the field
// studies and a JSON file describes any other (docs/models/workloads.md lists the keys). From it
// come the parameter counts and, for one layer and one micro-batch on one rank, the floating-point
// operations and bytes of every operation the generators write as a compute node (layer_costs,
// edge_costs). These formulas are the single source of truth: the training and inference
// generators, the memory estimate and the tests all use them.
//
// Counting conventions (docs/models/workloads.md):
// - a matrix product of (m x k) by (k x n) is 2 m k n operations; backward is a data gradient and a
//   weight gradient of the same count each; attention is counted over the full sequence (no causal
//   halving) and its backward as twice its forward, as the Megatron-LM formula counts them;
// - element-wise operations carry a small documented count per element (norms, activations,
//   softmax, dropout, loss), and memory-bound operations at least one per element written, so that
//   the roofline (num_ops / tensor_size) times every node;
// - bytes are the tensors an operation reads and writes once (weights included), in the model's
//   data type; attention is FlashAttention-style (the scores are never written to memory).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace orrery::gen {

enum class DType : uint8_t { kFp32, kBf16, kFp16, kFp8 };
// "fp32", "bf16", "fp16", "fp8" (also "float32", "bfloat16", "float16"). Error listing them.
Expected<DType> parse_dtype(std::string_view name);
std::string_view dtype_name(DType dtype);
uint32_t dtype_bytes(DType dtype);

enum class MlpKind : uint8_t {
  kGelu,    // up (h -> ffn), GeLU, down (ffn -> h): GPT
  kSwiGlu,  // gate and up (h -> 2 ffn), SiLU x up, down (ffn -> h): Llama
};
enum class NormKind : uint8_t { kLayerNorm, kRmsNorm };

struct TransformerModel {
  std::string name;
  uint32_t layers = 0;
  uint32_t hidden = 0;    // h
  uint32_t heads = 0;     // query heads a
  uint32_t kv_heads = 0;  // key-value heads g (g = a: multi-head; g < a: grouped-query)
  uint32_t head_dim = 0;  // d; 0 means hidden / heads
  uint32_t ffn = 0;       // MLP hidden size (per expert for MoE layers unless moe_ffn is set)
  uint32_t vocab = 0;     // V
  uint32_t seq = 0;       // default sequence length
  MlpKind mlp = MlpKind::kGelu;
  NormKind norm = NormKind::kLayerNorm;
  bool bias = false;               // linear layers carry biases (GPT)
  bool tied_embeddings = false;    // the output layer shares the input embedding's weights
  bool learned_positions = false;  // a learned position embedding of seq x h (GPT)
  bool dropout = false;            // dropout after attention and MLP (masks kept for backward)
  // Attention as Megatron-LM ran it before FlashAttention (2021): the scores are written to memory
  // by one batched GEMM, softmaxed (and dropped out) by memory-bound kernels, read by the next
  // GEMM. false: FlashAttention-style, the scores stay on chip.
  bool unfused_attention = false;
  // Bytes per parameter that a separate kernel moves to accumulate each micro-batch's weight
  // gradients into the gradient buffer (Megatron-LM 2021: main_grad.add_(grad), fp16: read 2,
  // read 2, write 2 = 6). 0: accumulated inside the weight-gradient GEMMs.
  uint32_t grad_accumulation_bytes = 0;
  DType dtype = DType::kBf16;
  // Mixture of Experts: 0 experts is a dense model.
  uint32_t experts = 0;
  uint32_t top_k = 0;
  uint32_t moe_ffn = 0;    // expert MLP hidden size; 0 = ffn
  uint32_t moe_every = 1;  // every n-th layer is a MoE layer (layers n-1, 2n-1, ...)
  double capacity_factor = 1.0;

  uint64_t head_size() const { return head_dim != 0 ? head_dim : hidden / heads; }
  uint64_t q_dim() const { return static_cast<uint64_t>(heads) * head_size(); }      // a d
  uint64_t kv_dim() const { return static_cast<uint64_t>(kv_heads) * head_size(); }  // g d
  uint64_t expert_ffn() const { return moe_ffn != 0 ? moe_ffn : ffn; }
  bool is_moe() const { return experts > 0; }
  bool is_moe_layer(uint32_t layer) const { return experts > 0 && (layer + 1) % moe_every == 0; }
  // Matrices of the MLP: 2 for GeLU (up, down), 3 for SwiGLU (gate, up, down).
  uint32_t mlp_matrices() const { return mlp == MlpKind::kSwiGlu ? 3 : 2; }
};

// Checks that the numbers make a model: every size positive, heads dividing into key-value groups,
// MoE fields consistent. Errors name the field ("kv_heads 7 does not divide heads 32").
Status validate_model(const TransformerModel& model);

// Checks that `tp` ranks can split the model's tensors (Megatron-LM's tensor parallelism): the
// attention heads, the key-value heads and the MLP (each expert's) divide by it. The error names
// the flag, "--tp 3 does not divide the 32 attention heads of llama2-7b".
Status check_tensor_parallel(const TransformerModel& model, uint32_t tp);

// The presets, in the order `orrery gen llm --list-models` prints them.
const std::vector<TransformerModel>& model_presets();
// A preset by name, or a JSON model file (docs/models/workloads.md) when `name_or_path` names an
// existing file or ends in ".json". Errors list the presets or name the file, line and key.
Expected<TransformerModel> resolve_model(std::string_view name_or_path);
// Reads a JSON model file: {"name": ..., "layers": 24, "hidden": 2048, ...}, optionally starting
// from a preset ("base": "llama2-7b") whose fields the file overrides. Unknown keys are errors.
Expected<TransformerModel> load_model_file(const std::string& path);

// The vocabulary padded to a multiple of the tensor-parallel degree (each rank holds V / t rows).
uint64_t padded_vocab(const TransformerModel& model, uint32_t tp);

// Parameters of the whole model (unsharded, tp = 1), as trained: embeddings (one copy when tied),
// layers, final norm.
uint64_t total_parameters(const TransformerModel& model);
// Parameters active for one token (MoE: top_k experts instead of all).
uint64_t active_parameters(const TransformerModel& model);

// Parameters of one layer held by one rank, split by how their gradients are reduced: dense ones
// over the data-parallel group, expert ones over the expert-data-parallel group.
struct LayerParams {
  uint64_t dense = 0;
  uint64_t expert = 0;
  uint64_t total() const { return dense + expert; }
};
LayerParams layer_params(const TransformerModel& model, uint32_t layer, uint32_t tp, uint32_t ep);
// Input embedding (word rows V/t, plus positions when learned) held by one rank.
uint64_t embedding_params(const TransformerModel& model, uint32_t tp);
// Final norm plus the output layer (V/t x h) when it is not tied to an embedding on the same rank.
uint64_t head_params(const TransformerModel& model, uint32_t tp, bool holds_embedding);

// The parameter tensors behind those counts, one rank's shard of each, in the forward pass's
// order (their gradients become ready in the reverse order). PyTorch's DDP and Megatron-LM fill
// gradient buckets with whole tensors, so a bucket never splits one. Each list sums to its count
// above; a layer's `expert` tensors are the ones reduced over the expert-data group.
struct ParamTensor {
  uint64_t params = 0;
  bool expert = false;
};
std::vector<ParamTensor> layer_tensors(const TransformerModel& model, uint32_t layer, uint32_t tp,
                                       uint32_t ep);
std::vector<uint64_t> embedding_tensors(const TransformerModel& model, uint32_t tp);
std::vector<uint64_t> head_tensors(const TransformerModel& model, uint32_t tp,
                                   bool holds_embedding);

// A matrix product's shape: `batch` products of (m x k) by (k x n); m = 0 when the operation is
// not one. Written as the gemm_m, gemm_n, gemm_k, gemm_batch attributes of its compute node, which
// a hardware preset's compute model reads (docs/models/compute.md).
struct GemmShape {
  uint64_t m = 0, n = 0, k = 0, batch = 1;
  bool valid() const { return m > 0 && n > 0 && k > 0 && batch > 0; }
  // The backward products of a forward (m x k) by (k x n): the data gradient (m x n) by (n x k),
  // the weight gradient (k x m) by (m x n).
  GemmShape dgrad() const { return {m, k, n, batch}; }
  GemmShape wgrad() const { return {k, n, m, batch}; }
};

// Floating-point operations and bytes of one compute node, and its shape when it is a GEMM.
struct OpCost {
  OpCost(uint64_t flops_ = 0, uint64_t bytes_ = 0, GemmShape gemm_ = {})
      : flops(flops_), bytes(bytes_), gemm(gemm_) {}
  uint64_t flops = 0;
  uint64_t bytes = 0;
  GemmShape gemm;
};

// One layer and one micro-batch as one rank sees them.
struct LayerShard {
  uint64_t batch = 1;      // b: sequences in the micro-batch
  uint64_t q_tokens = 0;   // query tokens per sequence held by the rank (s / cp)
  uint64_t kv_tokens = 0;  // key/value tokens per sequence attended to (s)
  uint32_t tp = 1;
  bool sp = false;  // sequence parallel: norms and dropout on q_tokens / tp tokens
  uint32_t ep = 1;  // expert-parallel degree (MoE layers: experts / ep on the rank)
};

// Every compute node of one layer, forward and backward. MoE layers use router / expert_* in place
// of the dense MLP (mlp_up and friends are then the experts' operations on expert_tokens tokens).
struct LayerCosts {
  OpCost attn_norm, qkv, attention, attn_out, mlp_norm, router, mlp_up, mlp_act, mlp_down;
  OpCost attn_norm_bwd, qkv_dgrad, qkv_wgrad, attention_bwd, attn_out_dgrad, attn_out_wgrad;
  OpCost mlp_norm_bwd, router_bwd, mlp_up_dgrad, mlp_up_wgrad, mlp_act_bwd, mlp_down_dgrad,
      mlp_down_wgrad;
  // Unfused attention only (zero otherwise): the softmax (and dropout) of the scores, forward and
  // backward, memory-bound kernels of their own.
  OpCost attn_softmax, attn_softmax_bwd;
  uint64_t tokens = 0;         // b x q_tokens
  uint64_t norm_tokens = 0;    // tokens / tp with sequence parallelism
  uint64_t expert_tokens = 0;  // MoE: ceil(top_k x tokens x capacity_factor), token copies routed
  uint64_t forward_flops() const;
  uint64_t backward_flops() const;
};
LayerCosts layer_costs(const TransformerModel& model, uint32_t layer, const LayerShard& shard);

// Attention (scores, softmax, weighted sum) of requests with q_i query tokens attending to kv_i key
// tokens each, on one tensor-parallel rank: sum_q = sum q_i, sum_kv = sum kv_i, sum_q_kv = sum q_i
// kv_i. Reads queries, keys and values and writes the output (the scores stay on chip).
OpCost attention_cost(const TransformerModel& model, uint32_t tp, uint64_t sum_q, uint64_t sum_kv,
                      uint64_t sum_q_kv);

// The operations outside the layers: input embedding (first stage), final norm, output layer and
// loss (last stage).
struct EdgeCosts {
  OpCost embedding, embedding_bwd;
  OpCost final_norm, logits, loss;
  OpCost loss_bwd, logits_dgrad, logits_wgrad, final_norm_bwd;
};
EdgeCosts edge_costs(const TransformerModel& model, const LayerShard& shard);

// Adam(W) with mixed precision for `params` parameters: 12 operations per parameter; reads the
// gradient, the fp32 master weight and both moments, writes weight and moments back and (below
// fp32) the model-precision copy.
OpCost optimizer_cost(const TransformerModel& model, uint64_t params);

// The Megatron-LM closed form for a GPT-style model (4h MLP, multi-head attention), FLOPs of one
// iteration of `global_batch` sequences of `seq` tokens: 72 B s l h^2 (1 + s/6h + V/12lh), or with
// full activation recomputation 96 B s l h^2 (1 + s/6h + V/16lh) (Narayanan et al., SC'21).
double megatron_flops(const TransformerModel& model, uint64_t global_batch, uint64_t seq,
                      bool recompute);

}  // namespace orrery::gen
