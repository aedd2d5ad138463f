// Transformer descriptions: the presets have their published parameter counts, per-layer FLOPs are
// the textbook matrix products, and model files are read with errors that name the line and key.
#include "gen/transformer_model.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/sim_test_support.h"

namespace orrery::gen {
namespace transformer_model_test {

using test::TempDir;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TransformerModel preset(const std::string& name) {
  Expected<TransformerModel> model = resolve_model(name);
  EXPECT_TRUE(model) << model.error().message();
  return model ? *model : TransformerModel();
}

double billions(uint64_t params) { return static_cast<double>(params) / 1e9; }

TEST(TransformerModel, presets_have_their_published_parameter_counts) {
  // GPT-3 175B with Megatron-LM's padded vocabulary: 12 l h^2 (1 + 13/12h + (V + s)/12lh).
  EXPECT_NEAR(billions(total_parameters(preset("gpt3-175b"))), 174.6, 0.1);
  EXPECT_NEAR(billions(total_parameters(preset("gpt3-6.7b"))), 6.66, 0.05);
  EXPECT_NEAR(billions(total_parameters(preset("llama2-7b"))), 6.74, 0.01);
  EXPECT_NEAR(billions(total_parameters(preset("llama2-70b"))), 68.98, 0.01);
  EXPECT_NEAR(billions(total_parameters(preset("llama3-405b"))), 405.85, 0.01);
  const TransformerModel mixtral = preset("mixtral-8x7b");
  EXPECT_NEAR(billions(total_parameters(mixtral)), 46.70, 0.01);
  EXPECT_NEAR(billions(active_parameters(mixtral)), 12.88, 0.01);
  for (const TransformerModel& model : model_presets()) {
    EXPECT_TRUE(validate_model(model)) << model.name;
  }
}

TEST(TransformerModel, a_gpt_layer_costs_24_b_s_h2_plus_4_b_s2_h_forward_and_twice_that_backward) {
  const TransformerModel model = preset("gpt3-175b");
  LayerShard shard;
  shard.batch = 2;
  shard.q_tokens = 2048;
  shard.kv_tokens = 2048;
  const double b = 2;
  const double s = 2048;
  const double h = 12288;
  const LayerCosts costs = layer_costs(model, 0, shard);
  const double matmuls = 24 * b * s * h * h + 4 * b * s * s * h;
  // The element-wise work (norms, GeLU, softmax, dropout) adds well under 0.1%.
  EXPECT_NEAR(static_cast<double>(costs.forward_flops()) / matmuls, 1.0, 1e-3);
  EXPECT_NEAR(static_cast<double>(costs.backward_flops()) / (2 * matmuls), 1.0, 1e-3);
  EXPECT_EQ(costs.qkv.flops, static_cast<uint64_t>(6 * b * s * h * h));
  EXPECT_EQ(costs.qkv_dgrad.flops, costs.qkv.flops);
  EXPECT_EQ(costs.qkv_wgrad.flops, costs.qkv.flops);
  // Tensor parallelism divides every matrix product by t.
  shard.tp = 8;
  const LayerCosts split = layer_costs(model, 0, shard);
  EXPECT_EQ(split.mlp_up.flops * 8, costs.mlp_up.flops);
  EXPECT_EQ(split.attention.flops * 8, costs.attention.flops);
}

TEST(TransformerModel, grouped_query_attention_and_swiglu_shape_the_projections) {
  const TransformerModel model = preset("llama2-70b");
  LayerShard shard;
  shard.q_tokens = 4096;
  shard.kv_tokens = 4096;
  const LayerCosts costs = layer_costs(model, 0, shard);
  // Q: 8192 x 8192; K and V: 8192 x 1024 each (8 key-value heads of 128).
  EXPECT_EQ(costs.qkv.flops, 2ULL * 4096 * 8192 * (8192 + 2 * 1024));
  // Gate and up: 2 x 8192 x 28672; down: 28672 x 8192.
  EXPECT_EQ(costs.mlp_up.flops, 2ULL * 4096 * 8192 * 28672 * 2);
  EXPECT_EQ(costs.mlp_down.flops, 2ULL * 4096 * 28672 * 8192);
  EXPECT_EQ(layer_params(model, 0, 1, 1).total(),
            8192ULL * 10240 + 8192ULL * 8192 + 3ULL * 8192 * 28672 + 2 * 8192);
}

TEST(TransformerModel, moe_layers_route_top_k_copies_of_every_token_to_the_experts) {
  const TransformerModel model = preset("mixtral-8x7b");
  LayerShard shard;
  shard.q_tokens = 1024;
  shard.kv_tokens = 1024;
  shard.ep = 4;
  const LayerCosts costs = layer_costs(model, 0, shard);
  EXPECT_EQ(costs.expert_tokens, 2048u);
  EXPECT_EQ(costs.mlp_down.flops, 2ULL * 2048 * 14336 * 4096);
  EXPECT_GT(costs.router.flops, 2ULL * 1024 * 4096 * 8 - 1);
  const LayerParams params = layer_params(model, 0, 1, 4);
  EXPECT_EQ(params.expert, 2ULL * 3 * 4096 * 14336);  // 2 of the 8 experts on each rank
}

TEST(TransformerModel, megatron_formula_matches_its_published_figure) {
  // GPT-3 175B, batch 1536 of 2048 tokens (the plan of Narayanan et al., SC'21): with recomputation
  // 96 B s l h^2 (1 + s/6h + V/16lh) = 4.511e18; without, 72 B s l h^2 (1 + s/6h + V/12lh).
  const TransformerModel model = preset("gpt3-175b");
  const double flops = megatron_flops(model, 1536, 2048, true);
  EXPECT_NEAR(flops / 1e18, 4.511, 0.001);
  EXPECT_NEAR(megatron_flops(model, 1536, 2048, false) / 1e18, 3.386, 0.001);
}

TEST(TransformerModel, model_files_override_a_base_preset) {
  TempDir dir;
  test::write_text(dir.file("m.json"),
                   "{\n  \"base\": \"llama2-7b\",\n  \"name\": \"llama-small\",\n  \"layers\": 4,\n"
                   "  \"dtype\": \"fp32\"\n}\n");
  Expected<TransformerModel> model = resolve_model(dir.file("m.json"));
  ASSERT_TRUE(model) << model.error().message();
  EXPECT_EQ(model->name, "llama-small");
  EXPECT_EQ(model->layers, 4u);
  EXPECT_EQ(model->hidden, 4096u);
  EXPECT_EQ(model->mlp, MlpKind::kSwiGlu);
  EXPECT_EQ(model->dtype, DType::kFp32);

  test::write_text(dir.file("full.json"),
                   R"({"layers": 2, "hidden": 64, "heads": 4, "ffn": 256, "vocab": 100, "seq": 32,
                       "mlp": "gelu", "norm": "layernorm", "bias": true, "tied_embeddings": true})");
  Expected<TransformerModel> full = resolve_model(dir.file("full.json"));
  ASSERT_TRUE(full) << full.error().message();
  EXPECT_EQ(full->name, "full");
  EXPECT_EQ(full->kv_heads, 4u);  // multi-head attention unless said otherwise
  EXPECT_TRUE(full->tied_embeddings);
}

TEST(TransformerModel, bad_model_files_name_the_line_and_key) {
  TempDir dir;
  test::write_text(dir.file("typo.json"), "{\n  \"layers\": 2,\n  \"hiden\": 64\n}\n");
  Expected<TransformerModel> typo = resolve_model(dir.file("typo.json"));
  ASSERT_FALSE(typo);
  EXPECT_CONTAINS(typo.error().message(), "typo.json:3: key 'hiden': unknown model field");

  test::write_text(dir.file("neg.json"), "{\"base\": \"gpt3-175b\",\n \"layers\": -1}\n");
  Expected<TransformerModel> negative = resolve_model(dir.file("neg.json"));
  ASSERT_FALSE(negative);
  EXPECT_CONTAINS(negative.error().message(),
                  "neg.json:2: key 'layers': expected an integer from 1");

  test::write_text(dir.file("gqa.json"), R"({"base": "llama2-7b", "kv_heads": 5})");
  Expected<TransformerModel> gqa = resolve_model(dir.file("gqa.json"));
  ASSERT_FALSE(gqa);
  EXPECT_CONTAINS(gqa.error().message(), "kv_heads 5 does not divide heads 32");

  test::write_text(dir.file("mlp.json"), R"({"base": "llama2-7b", "mlp": "relu"})");
  Expected<TransformerModel> mlp = resolve_model(dir.file("mlp.json"));
  ASSERT_FALSE(mlp);
  EXPECT_CONTAINS(mlp.error().message(), "key 'mlp': expected \"gelu\" or \"swiglu\"");

  Expected<TransformerModel> unknown = resolve_model("gpt-5");
  ASSERT_FALSE(unknown);
  EXPECT_CONTAINS(unknown.error().message(), "unknown model 'gpt-5' (expected a preset: gpt3-175b");
  Expected<TransformerModel> missing = resolve_model(dir.file("nope.json"));
  ASSERT_FALSE(missing);
  EXPECT_CONTAINS(missing.error().message(), "nope.json: cannot open");
}

TEST(TransformerModel, matrix_products_carry_their_gemm_shapes_forward_and_backward) {
  const TransformerModel model = preset("gpt3-175b");
  LayerShard shard;
  shard.batch = 2;
  shard.q_tokens = 2048;
  shard.kv_tokens = 2048;
  shard.tp = 8;
  const LayerCosts c = layer_costs(model, 0, shard);
  const uint64_t tokens = 4096;
  const uint64_t h = 12288;
  // qkv: (tokens x h) by (h x 3h/t); its data gradient (tokens x 3h/t) by (3h/t x h); its weight
  // gradient (h x tokens) by (tokens x 3h/t).
  EXPECT_EQ(c.qkv.gemm.m, tokens);
  EXPECT_EQ(c.qkv.gemm.n, 3 * h / 8);
  EXPECT_EQ(c.qkv.gemm.k, h);
  EXPECT_EQ(c.qkv_dgrad.gemm.n, h);
  EXPECT_EQ(c.qkv_dgrad.gemm.k, 3 * h / 8);
  EXPECT_EQ(c.qkv_wgrad.gemm.m, h);
  EXPECT_EQ(c.qkv_wgrad.gemm.k, tokens);
  // Each product's FLOPs are its shape's 2 m n k batch.
  for (const OpCost* op : {&c.qkv, &c.qkv_dgrad, &c.qkv_wgrad, &c.attn_out, &c.attn_out_dgrad,
                           &c.attn_out_wgrad, &c.mlp_up, &c.mlp_up_dgrad, &c.mlp_up_wgrad,
                           &c.mlp_down, &c.mlp_down_dgrad, &c.mlp_down_wgrad}) {
    ASSERT_TRUE(op->gemm.valid());
    EXPECT_EQ(op->flops, 2 * op->gemm.m * op->gemm.n * op->gemm.k * op->gemm.batch);
  }
  // Attention: the scores product (s x d) by (d x s) per sequence and local head; the two
  // products of attention are twice its FLOPs (plus the softmax).
  EXPECT_EQ(c.attention.gemm.m, 2048u);
  EXPECT_EQ(c.attention.gemm.n, 2048u);
  EXPECT_EQ(c.attention.gemm.k, 128u);
  EXPECT_EQ(c.attention.gemm.batch, 2u * 96 / 8);
  EXPECT_GE(c.attention.flops, 2 * 2 * c.attention.gemm.m * c.attention.gemm.n *
                                   c.attention.gemm.k * c.attention.gemm.batch);
  // Element-wise work has no shape.
  EXPECT_FALSE(c.attn_norm.gemm.valid());
  EXPECT_FALSE(c.mlp_act.gemm.valid());
  EXPECT_EQ(c.attn_softmax.bytes, 0u);  // FlashAttention-style by default
}

TEST(TransformerModel, unfused_attention_moves_the_scores_through_memory) {
  TransformerModel model = preset("gpt3-175b");
  LayerShard shard;
  shard.q_tokens = 2048;
  shard.kv_tokens = 2048;
  shard.tp = 8;
  const LayerCosts flash = layer_costs(model, 0, shard);
  model.unfused_attention = true;
  const LayerCosts unfused = layer_costs(model, 0, shard);
  const uint64_t scores = 12ull * 2048 * 2048;  // 96 heads / 8 per rank, one sequence
  ASSERT_TRUE(model.dropout);
  EXPECT_EQ(unfused.attention.bytes, flash.attention.bytes + 2 * scores * 2);
  EXPECT_EQ(unfused.attention_bwd.bytes, flash.attention_bwd.bytes + 4 * scores * 2);
  // Softmax and dropout: 4 passes of 2 bytes and a 1-byte mask; backward 5 passes and the mask.
  EXPECT_EQ(unfused.attn_softmax.bytes, 4 * scores * 2 + scores);
  EXPECT_EQ(unfused.attn_softmax_bwd.bytes, 5 * scores * 2 + scores);
  EXPECT_EQ(unfused.forward_flops(), flash.forward_flops() + unfused.attn_softmax.flops);
}

TEST(TransformerModel, model_files_set_the_megatron_2021_kernels) {
  TempDir dir;
  test::write_text(dir.file("m.json"),
                   R"({"base": "gpt3-6.7b", "unfused_attention": true,
                       "grad_accumulation_bytes": 6})");
  Expected<TransformerModel> model = resolve_model(dir.file("m.json"));
  ASSERT_TRUE(model) << model.error().message();
  EXPECT_TRUE(model->unfused_attention);
  EXPECT_EQ(model->grad_accumulation_bytes, 6u);
  test::write_text(dir.file("bad.json"), R"({"base": "gpt3-6.7b", "unfused_attention": 3})");
  EXPECT_FALSE(resolve_model(dir.file("bad.json")));
}

}  // namespace transformer_model_test
}  // namespace orrery::gen
