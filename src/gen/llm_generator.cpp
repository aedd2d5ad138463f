#include "gen/llm_generator.h"

#include <algorithm>

#include <fmt/format.h>

#include "gen/common.h"

namespace orrery::gen {

namespace {

using ChakraProtoMsg::ALL_GATHER;
using ChakraProtoMsg::ALL_REDUCE;
using ChakraProtoMsg::ALL_TO_ALL;
using ChakraProtoMsg::REDUCE_SCATTER;

// The parameters of one block (a layer, the input embedding, the final norm and output layer) held
// by one rank, and the state of its gradients over the iteration.
struct Block {
  bool present = false;
  std::string name;  // "L12", "embedding", "head"
  // Parameter tensors in forward order (transformer_model.h), what buckets are filled with: dense
  // ones reduced over the data group, expert ones over the expert-data group.
  std::vector<uint64_t> dense_tensors;
  std::vector<uint64_t> expert_tensors;
  // Their sums, set with them by add(): the backward pass reads them per micro-batch.
  uint64_t dense = 0;
  uint64_t expert = 0;
  void add(uint64_t params, bool is_expert = false) {
    (is_expert ? expert_tensors : dense_tensors).push_back(params);
    (is_expert ? expert : dense) += params;
  }
  uint64_t tied = 0;  // word-embedding parameters shared with the other end of the pipeline
  std::vector<ProgRef> reduced;  // the last gradient collectives (inputs of the optimizer step)
};

// Builds one rank's program. One per build() call; not shared between threads.
class TrainingBuilder {
 public:
  TrainingBuilder(const TransformerModel& model, const ParallelPlan& plan, const LlmGroups& groups,
                  uint32_t rank)
      : model_(model), plan_(plan), coords_(rank_coords(plan, rank)) {
    tp_group_ = groups.id(GroupKind::kTensor, rank);
    cp_group_ = groups.id(GroupKind::kContext, rank);
    dp_group_ = groups.id(GroupKind::kData, rank);
    ep_group_ = groups.id(GroupKind::kExpert, rank);
    edp_group_ = groups.id(GroupKind::kExpertData, rank);
    emb_group_ = groups.id(GroupKind::kEmbedding, rank);
    bytes_ = dtype_bytes(model.dtype);
    shard_.batch = plan.micro_batch;
    shard_.q_tokens = plan.seq / plan.cp;
    shard_.kv_tokens = plan.seq;
    shard_.tp = plan.tp;
    shard_.sp = plan.sp;
    shard_.ep = plan.ep;
    tokens_ = shard_.batch * shard_.q_tokens;
    norm_tokens_ = plan.sp ? tokens_ / plan.tp : tokens_;
    edge_ = edge_costs(model, shard_);
    first_layer_ = virtual_stage_layers(model, plan);
    data_size_ = plan.dp * plan.cp;
    expert_data_size_ = data_size_ / plan.ep;
    last_virtual_ = plan.chunks() - 1;
    blocks_.resize(model.layers + 2);
    for (uint32_t chunk = 0; chunk < plan.virtual_stages; ++chunk) {
      const uint32_t q = virtual_stage(chunk);
      if (q == 0) {
        Block& block = blocks_[embedding_block()];
        block.present = true;
        block.name = "embedding";
        for (uint64_t tensor : embedding_tensors(model, plan.tp)) block.add(tensor);
        block.tied = emb_group_ != 0 ? padded_vocab(model, plan.tp) / plan.tp * model.hidden : 0;
      }
      for (uint32_t layer = first_layer_[q]; layer < first_layer_[q + 1]; ++layer) {
        Block& block = blocks_[layer];
        block.present = true;
        block.name = fmt::format("L{}", layer);
        for (const ParamTensor& tensor : layer_tensors(model, layer, plan.tp, plan.ep)) {
          block.add(tensor.params, tensor.expert);
        }
      }
      if (q == last_virtual_) {
        Block& block = blocks_[head_block()];
        block.present = true;
        block.name = "head";
        for (uint64_t tensor : head_tensors(model, plan.tp, plan.pp == 1)) block.add(tensor);
        block.tied = emb_group_ != 0 ? padded_vocab(model, plan.tp) / plan.tp * model.hidden : 0;
      }
    }
  }

  RankProgram build() {
    const std::vector<PipelineStep> steps = pipeline_steps(plan_, coords_.pp);
    loss_.assign(plan_.micro_batches() * plan_.virtual_stages, kNoNode);
    for (const PipelineStep& step : steps) {
      const auto first = static_cast<ProgRef>(program_.size());
      const size_t first_edge = program_.edge_count();
      if (step.forward) {
        forward(step.micro_batch, step.chunk);
      } else {
        backward(step.micro_batch, step.chunk);
      }
      previous_ = program_.open_compute(first, first_edge);
    }
    finish_iteration();
    // One issue order for the rank's communication, its program order (with or without --sp: the
    // race is the same). Ranks that share a group run the same stage's program, so they order the
    // group's collectives alike; without the chain a ready background collective and the next
    // main-lane one could take the comm slot in either order, and two ranks of a group could
    // disagree (docs/fuzzing.md, soak finding 2).
    program_.order_communication();
    return std::move(program_);
  }

 private:
  uint32_t virtual_stage(uint32_t chunk) const { return chunk * plan_.pp + coords_.pp; }
  size_t embedding_block() const { return model_.layers; }
  size_t head_block() const { return model_.layers + 1; }
  uint32_t rank_of_virtual(uint32_t q) const {
    RankCoords peer = coords_;
    peer.pp = q % plan_.pp;
    return rank_of(plan_, peer);
  }
  // Unique per micro-batch, direction and pipeline boundary (between virtual stages q-1 and q).
  int32_t tag(uint32_t micro_batch, bool backward, uint32_t boundary) const {
    return static_cast<int32_t>(
        (static_cast<uint64_t>(micro_batch) * 2 + (backward ? 1 : 0)) * plan_.chunks() + boundary);
  }
  uint64_t activation_bytes() const { return norm_tokens_ * model_.hidden * bytes_; }
  uint64_t hidden_bytes() const { return tokens_ * model_.hidden * bytes_; }
  const LayerCosts& costs(uint32_t layer) {
    const bool moe = model_.is_moe_layer(layer);
    LayerCosts& cached = moe ? moe_costs_ : dense_costs_;
    bool& ready = moe ? moe_ready_ : dense_ready_;
    if (!ready) {
      cached = layer_costs(model_, layer, shard_);
      ready = true;
    }
    return cached;
  }

  // The first node of a pipeline step waits for the last work of the step before (program order).
  void gate(ProgRef node) { program_.depend(node, previous_, true); }

  // Tensor-parallel reduction of a row-parallel output (all-reduce, or reduce-scatter with SP).
  ProgRef tp_reduce(const std::string& name, ProgRef input) {
    if (tp_group_ == 0) return input;
    return plan_.sp ? program_.collective(name + ".tp_reduce_scatter", REDUCE_SCATTER,
                                          hidden_bytes(), tp_group_, {input})
                    : program_.collective(name + ".tp_allreduce", ALL_REDUCE, hidden_bytes(),
                                          tp_group_, {input});
  }
  // With SP: all-gather of the sequence shards before a column-parallel layer.
  ProgRef sp_gather(const std::string& name, ProgRef input) {
    if (!plan_.sp) return input;
    return program_.collective(name + ".tp_allgather", ALL_GATHER, activation_bytes(), tp_group_,
                               {input});
  }

  // The data-parallel buckets of a block's `tensors` (parameters each): one bucket without
  // --bucket-size; with it, as PyTorch's DDP and Megatron-LM bucket gradients: whole tensors in
  // the order their gradients become ready (the reverse of the forward's), a bucket closed once it
  // holds at least --bucket-size bytes. A tensor larger than the bucket is a bucket of its own.
  std::vector<uint64_t> buckets(const std::vector<uint64_t>& tensors) const {
    uint64_t total = 0;
    for (uint64_t tensor : tensors) total += tensor;
    if (plan_.bucket_bytes == 0) return {total};
    std::vector<uint64_t> sizes;
    uint64_t open = 0;
    for (auto tensor = tensors.rbegin(); tensor != tensors.rend(); ++tensor) {
      open += *tensor;
      if (open * bytes_ >= plan_.bucket_bytes) {
        sizes.push_back(open);
        open = 0;
      }
    }
    if (open != 0) sizes.push_back(open);
    return sizes;
  }

  // ZeRO-3: all-gathers of a block's parameter shards before its use, prefetched one layer ahead.
  std::vector<ProgRef> gather_params(const Block& block, const std::string& prefix) {
    std::vector<ProgRef> gathers;
    if (plan_.zero < 3) return gathers;
    for (const auto& [group, params, size, what] :
         {std::tuple{dp_group_, &block.dense_tensors, data_size_, "param_allgather"},
          std::tuple{edp_group_, &block.expert_tensors, expert_data_size_,
                     "expert_param_allgather"}}) {
      if (group == 0 || params->empty()) continue;
      for (uint64_t bucket : buckets(*params)) {
        const ProgRef gather = program_.collective(fmt::format("{}.{}", prefix, what), ALL_GATHER,
                                                   ceil_div(bucket, size) * bytes_, group, {});
        program_.depend(gather, last_layer_start_, true);
        // Issued with the layer before (FSDP's prefetch), ahead of that layer's own collectives.
        program_.issue_after(gather, last_layer_start_);
        gathers.push_back(gather);
      }
    }
    return gathers;
  }

  // A block's gradients of micro-batch `micro_batch` are complete: reduce them when the plan says
  // so (every micro-batch for ZeRO-2/3, the last one otherwise), in the background lane.
  void gradients_done(Block& block, uint32_t micro_batch, std::vector<ProgRef> producers) {
    const bool last = micro_batch + 1 == plan_.micro_batches();
    if (plan_.zero < 2 && !last) return;
    block.reduced.clear();
    const bool scatter = plan_.zero >= 1;
    for (const auto& [group, params, what] :
         {std::tuple{dp_group_, &block.dense_tensors, "grad"},
          std::tuple{edp_group_, &block.expert_tensors, "expert_grad"}}) {
      if (group == 0 || params->empty()) continue;
      for (uint64_t bucket : buckets(*params)) {
        const std::string name = plan_.zero >= 2
                                     ? fmt::format("mb{}.{}.{}.{}", micro_batch, block.name, what,
                                                   scatter ? "reduce_scatter" : "allreduce")
                                     : fmt::format("{}.{}.{}", block.name, what,
                                                   scatter ? "reduce_scatter" : "allreduce");
        const ProgRef reduce = program_.collective(name, scatter ? REDUCE_SCATTER : ALL_REDUCE,
                                                   bucket * bytes_, group, {}, Lane::kBackground);
        program_.depend(reduce, producers);
        block.reduced.push_back(reduce);
      }
    }
    if (block.reduced.empty() && last) block.reduced = std::move(producers);
  }

  // One transformer layer forward (or its recomputation, prefix "recompute."). Returns the node
  // that produces the layer's output.
  ProgRef layer_forward(uint32_t micro_batch, uint32_t layer, ProgRef input, const char* prefix,
                        const std::vector<ProgRef>& gathers) {
    const LayerCosts& cost = costs(layer);
    auto name = [&](std::string_view op) {
      return fmt::format("mb{}.L{}.{}{}", micro_batch, layer, prefix, op);
    };
    const ProgRef norm1 = program_.compute(name("attn_norm"), cost.attn_norm, {input});
    program_.depend(norm1, gathers);
    last_layer_start_ = norm1;
    const ProgRef qkv =
        program_.compute(name("qkv"), cost.qkv, {sp_gather(name("attn_norm"), norm1)});
    ProgRef kv = kNoNode;
    if (cp_group_ != 0) {
      kv = program_.collective(name("kv.cp_allgather"), ALL_GATHER,
                               tokens_ * 2 * model_.kv_dim() / plan_.tp * bytes_, cp_group_, {qkv});
    }
    ProgRef attention = program_.compute(name("attention"), cost.attention, {qkv, kv});
    if (model_.unfused_attention) {
      attention = program_.compute(name("attn_softmax"), cost.attn_softmax, {attention});
    }
    const ProgRef out = program_.compute(name("attn_out"), cost.attn_out, {attention});
    const ProgRef residual = tp_reduce(name("attn_out"), out);
    const ProgRef norm2 = program_.compute(name("mlp_norm"), cost.mlp_norm, {residual, input});
    const ProgRef mlp_in = sp_gather(name("mlp_norm"), norm2);
    ProgRef mlp_out = kNoNode;
    if (model_.is_moe_layer(layer)) {
      const ProgRef router = program_.compute(name("router"), cost.router, {mlp_in});
      const uint64_t routed = cost.expert_tokens * model_.hidden * bytes_;
      const ProgRef dispatch = ep_group_ != 0
                                   ? program_.collective(name("moe.ep_dispatch"), ALL_TO_ALL,
                                                         routed, ep_group_, {router})
                                   : router;
      const ProgRef up = program_.compute(name("expert_up"), cost.mlp_up, {dispatch});
      const ProgRef act = program_.compute(name("expert_act"), cost.mlp_act, {up});
      const ProgRef down = program_.compute(name("expert_down"), cost.mlp_down, {act});
      mlp_out = ep_group_ != 0 ? program_.collective(name("moe.ep_combine"), ALL_TO_ALL, routed,
                                                     ep_group_, {down})
                               : down;
    } else {
      const ProgRef up = program_.compute(name("mlp_up"), cost.mlp_up, {mlp_in});
      const ProgRef act = program_.compute(name("mlp_act"), cost.mlp_act, {up});
      mlp_out = program_.compute(name("mlp_down"), cost.mlp_down, {act});
    }
    return tp_reduce(name("mlp_down"), mlp_out);
  }

  // One transformer layer backward (after its recomputation with --recompute). Returns the node
  // that produces the gradient of the layer's input.
  ProgRef layer_backward(uint32_t micro_batch, uint32_t layer, ProgRef grad) {
    const LayerCosts& cost = costs(layer);
    Block& block = blocks_[layer];
    auto name = [&](std::string_view op) {
      return fmt::format("mb{}.L{}.{}", micro_batch, layer, op);
    };
    const std::vector<ProgRef> gathers = gather_params(block, name("bwd"));
    ProgRef recomputed = kNoNode;
    if (plan_.recompute)
      recomputed = layer_forward(micro_batch, layer, grad, "recompute.", gathers);
    // MLP.
    ProgRef grad_out = plan_.sp ? program_.collective(name("mlp_down.tp_allgather"), ALL_GATHER,
                                                      activation_bytes(), tp_group_, {grad})
                                : grad;
    const bool moe = model_.is_moe_layer(layer);
    const uint64_t routed = cost.expert_tokens * model_.hidden * bytes_;
    if (moe && ep_group_ != 0) {
      grad_out = program_.collective(name("moe.ep_combine_bwd"), ALL_TO_ALL, routed, ep_group_,
                                     {grad_out});
    }
    const char* mlp = moe ? "expert" : "mlp";
    const ProgRef down_dgrad =
        program_.compute(fmt::format("mb{}.L{}.{}_down_dgrad", micro_batch, layer, mlp),
                         cost.mlp_down_dgrad, {grad_out, recomputed});
    if (!plan_.recompute) {
      program_.depend(down_dgrad, gathers);
      last_layer_start_ = down_dgrad;
    }
    const ProgRef down_wgrad =
        program_.compute(fmt::format("mb{}.L{}.{}_down_wgrad", micro_batch, layer, mlp),
                         cost.mlp_down_wgrad, {grad_out, recomputed});
    const ProgRef act_bwd =
        program_.compute(fmt::format("mb{}.L{}.{}_act_bwd", micro_batch, layer, mlp),
                         cost.mlp_act_bwd, {down_dgrad});
    const ProgRef up_dgrad = program_.compute(
        fmt::format("mb{}.L{}.{}_up_dgrad", micro_batch, layer, mlp), cost.mlp_up_dgrad, {act_bwd});
    // Megatron-LM keeps only the sequence shard of a column-parallel input and gathers it again for
    // the weight gradient.
    const ProgRef regather = plan_.sp && !moe
                                 ? program_.collective(name("mlp_norm.tp_allgather"), ALL_GATHER,
                                                       activation_bytes(), tp_group_, {grad})
                                 : kNoNode;
    const ProgRef up_wgrad =
        program_.compute(fmt::format("mb{}.L{}.{}_up_wgrad", micro_batch, layer, mlp),
                         cost.mlp_up_wgrad, {act_bwd, regather});
    std::vector<ProgRef> producers = {down_wgrad, up_wgrad};
    ProgRef mlp_in_grad = up_dgrad;
    if (moe) {
      if (ep_group_ != 0) {
        mlp_in_grad = program_.collective(name("moe.ep_dispatch_bwd"), ALL_TO_ALL, routed,
                                          ep_group_, {up_dgrad});
      }
      mlp_in_grad = program_.compute(name("router_bwd"), cost.router_bwd, {mlp_in_grad});
      producers.push_back(mlp_in_grad);
    }
    const ProgRef norm2_grad = tp_reduce(name("mlp_norm"), mlp_in_grad);
    const ProgRef norm2_bwd =
        program_.compute(name("mlp_norm_bwd"), cost.mlp_norm_bwd, {norm2_grad, grad});
    producers.push_back(norm2_bwd);
    // Attention.
    const ProgRef attn_grad = plan_.sp
                                  ? program_.collective(name("attn_out.tp_allgather"), ALL_GATHER,
                                                        activation_bytes(), tp_group_, {norm2_bwd})
                                  : norm2_bwd;
    const ProgRef out_dgrad =
        program_.compute(name("attn_out_dgrad"), cost.attn_out_dgrad, {attn_grad});
    const ProgRef out_wgrad =
        program_.compute(name("attn_out_wgrad"), cost.attn_out_wgrad, {attn_grad});
    producers.push_back(out_wgrad);
    ProgRef attention_bwd =
        program_.compute(name("attention_bwd"), cost.attention_bwd, {out_dgrad});
    if (model_.unfused_attention) {
      attention_bwd =
          program_.compute(name("attn_softmax_bwd"), cost.attn_softmax_bwd, {attention_bwd});
    }
    ProgRef kv_grad = kNoNode;
    if (cp_group_ != 0) {
      kv_grad = program_.collective(
          name("dkv.cp_reduce_scatter"), REDUCE_SCATTER,
          static_cast<uint64_t>(plan_.cp) * tokens_ * 2 * model_.kv_dim() / plan_.tp * bytes_,
          cp_group_, {attention_bwd});
    }
    const ProgRef qkv_dgrad =
        program_.compute(name("qkv_dgrad"), cost.qkv_dgrad, {attention_bwd, kv_grad});
    const ProgRef regather_attn =
        plan_.sp ? program_.collective(name("attn_norm.tp_allgather"), ALL_GATHER,
                                       activation_bytes(), tp_group_, {norm2_bwd})
                 : kNoNode;
    const ProgRef qkv_wgrad = program_.compute(name("qkv_wgrad"), cost.qkv_wgrad,
                                               {attention_bwd, kv_grad, regather_attn});
    producers.push_back(qkv_wgrad);
    const ProgRef norm1_grad = tp_reduce(name("attn_norm"), qkv_dgrad);
    const ProgRef norm1_bwd =
        program_.compute(name("attn_norm_bwd"), cost.attn_norm_bwd, {norm1_grad, norm2_bwd});
    producers.push_back(norm1_bwd);
    if (model_.grad_accumulation_bytes > 0) {
      const uint64_t params = block.dense + block.expert;
      const ProgRef accumulate = program_.compute(
          name("grad_accumulate"), OpCost{params, params * model_.grad_accumulation_bytes}, {});
      program_.depend(accumulate, producers);
      producers = {accumulate};
    }
    gradients_done(block, micro_batch, std::move(producers));
    return norm1_bwd;
  }

  void forward(uint32_t micro_batch, uint32_t chunk) {
    const uint32_t q = virtual_stage(chunk);
    ProgRef x = kNoNode;
    if (q == 0) {
      const std::vector<ProgRef> gathers =
          gather_params(blocks_[embedding_block()], fmt::format("mb{}.embedding", micro_batch));
      const ProgRef embedding =
          program_.compute(fmt::format("mb{}.embedding", micro_batch), edge_.embedding, {});
      gate(embedding);
      program_.depend(embedding, gathers);
      // Vocabulary-parallel embedding: every rank looks up its rows, the sum completes the lookup.
      x = tp_reduce(fmt::format("mb{}.embedding", micro_batch), embedding);
    } else {
      x = program_.recv(fmt::format("mb{}.recv_activation.s{}", micro_batch, q),
                        rank_of_virtual(q - 1), tag(micro_batch, false, q), activation_bytes());
      gate(x);
    }
    for (uint32_t layer = first_layer_[q]; layer < first_layer_[q + 1]; ++layer) {
      const std::vector<ProgRef> gathers =
          gather_params(blocks_[layer], fmt::format("mb{}.L{}", micro_batch, layer));
      x = layer_forward(micro_batch, layer, x, "", gathers);
    }
    if (q == last_virtual_) {
      const std::vector<ProgRef> gathers =
          gather_params(blocks_[head_block()], fmt::format("mb{}.head", micro_batch));
      const ProgRef norm =
          program_.compute(fmt::format("mb{}.final_norm", micro_batch), edge_.final_norm, {x});
      program_.depend(norm, gathers);
      const ProgRef logits =
          program_.compute(fmt::format("mb{}.logits", micro_batch), edge_.logits,
                           {sp_gather(fmt::format("mb{}.final_norm", micro_batch), norm)});
      ProgRef stats = logits;
      if (tp_group_ != 0) {
        // Vocabulary-parallel cross-entropy: maximum, target logit and sum of exponents of every
        // token (fp32), merged into one all-reduce.
        stats = program_.collective(fmt::format("mb{}.loss.tp_allreduce", micro_batch), ALL_REDUCE,
                                    3 * tokens_ * 4, tp_group_, {logits});
      }
      loss_[micro_batch * plan_.virtual_stages + chunk] =
          program_.compute(fmt::format("mb{}.loss", micro_batch), edge_.loss, {stats});
    } else {
      program_.send(fmt::format("mb{}.send_activation.s{}", micro_batch, q + 1),
                    rank_of_virtual(q + 1), tag(micro_batch, false, q + 1), activation_bytes(),
                    {x});
    }
  }

  void backward(uint32_t micro_batch, uint32_t chunk) {
    const uint32_t q = virtual_stage(chunk);
    ProgRef grad = kNoNode;
    if (q == last_virtual_) {
      Block& head = blocks_[head_block()];
      const std::vector<ProgRef> gathers =
          gather_params(head, fmt::format("mb{}.head.bwd", micro_batch));
      const ProgRef loss_bwd =
          program_.compute(fmt::format("mb{}.loss_bwd", micro_batch), edge_.loss_bwd,
                           {loss_[micro_batch * plan_.virtual_stages + chunk]});
      gate(loss_bwd);
      program_.depend(loss_bwd, gathers);
      const ProgRef dgrad = program_.compute(fmt::format("mb{}.logits_dgrad", micro_batch),
                                             edge_.logits_dgrad, {loss_bwd});
      const ProgRef regather =
          plan_.sp ? program_.collective(fmt::format("mb{}.final_norm.tp_allgather", micro_batch),
                                         ALL_GATHER, activation_bytes(), tp_group_, {loss_bwd})
                   : kNoNode;
      const ProgRef wgrad = program_.compute(fmt::format("mb{}.logits_wgrad", micro_batch),
                                             edge_.logits_wgrad, {loss_bwd, regather});
      const ProgRef reduced = tp_reduce(fmt::format("mb{}.final_norm", micro_batch), dgrad);
      grad = program_.compute(fmt::format("mb{}.final_norm_bwd", micro_batch), edge_.final_norm_bwd,
                              {reduced});
      if (model_.tied_embeddings && plan_.pp == 1) {
        // The output layer is the embedding: its gradient joins the embedding's.
        tied_wgrad_ = wgrad;
        gradients_done(head, micro_batch, {grad});
      } else {
        gradients_done(head, micro_batch, {wgrad, grad});
      }
    } else {
      grad =
          program_.recv(fmt::format("mb{}.recv_gradient.s{}", micro_batch, q + 1),
                        rank_of_virtual(q + 1), tag(micro_batch, true, q + 1), activation_bytes());
      gate(grad);
    }
    for (uint32_t layer = first_layer_[q + 1]; layer-- > first_layer_[q];) {
      grad = layer_backward(micro_batch, layer, grad);
    }
    if (q == 0) {
      Block& embedding = blocks_[embedding_block()];
      const std::vector<ProgRef> gathers =
          gather_params(embedding, fmt::format("mb{}.embedding.bwd", micro_batch));
      const ProgRef input =
          plan_.sp ? program_.collective(fmt::format("mb{}.embedding.tp_allgather", micro_batch),
                                         ALL_GATHER, activation_bytes(), tp_group_, {grad})
                   : grad;
      const ProgRef wgrad = program_.compute(fmt::format("mb{}.embedding_bwd", micro_batch),
                                             edge_.embedding_bwd, {input});
      program_.depend(wgrad, gathers);
      std::vector<ProgRef> producers = {wgrad};
      if (tied_wgrad_ != kNoNode) producers.push_back(tied_wgrad_);
      gradients_done(embedding, micro_batch, std::move(producers));
    } else {
      program_.send(fmt::format("mb{}.send_gradient.s{}", micro_batch, q), rank_of_virtual(q - 1),
                    tag(micro_batch, true, q), activation_bytes(), {grad});
    }
  }

  // After the pipeline flush: tied-embedding all-reduce, optimizer step per block, parameter
  // all-gathers (ZeRO-1/2), all in the background lane.
  void finish_iteration() {
    const std::vector<ProgRef> flushed = previous_;
    std::vector<size_t> order;
    order.push_back(head_block());
    for (uint32_t layer = model_.layers; layer-- > 0;) order.push_back(layer);
    order.push_back(embedding_block());
    for (size_t index : order) {
      Block& block = blocks_[index];
      if (!block.present) continue;
      std::vector<ProgRef> ready = block.reduced;
      if (block.tied != 0 && emb_group_ != 0) {
        const bool sharded = plan_.zero >= 1 && dp_group_ != 0;
        const uint64_t params = sharded ? ceil_div(block.tied, data_size_) : block.tied;
        const ProgRef tie =
            program_.collective(fmt::format("{}.tied_grad.allreduce", block.name), ALL_REDUCE,
                                params * bytes_, emb_group_, {}, Lane::kBackground);
        program_.depend(tie, ready);
        program_.depend(tie, flushed, true);
        ready = {tie};
      }
      const bool shard_dense = plan_.zero >= 1 && dp_group_ != 0;
      const bool shard_expert = plan_.zero >= 1 && edp_group_ != 0;
      const uint64_t local =
          (shard_dense ? ceil_div(block.dense, data_size_) : block.dense) +
          (shard_expert ? ceil_div(block.expert, expert_data_size_) : block.expert);
      const ProgRef step = program_.compute(fmt::format("{}.optimizer", block.name),
                                            optimizer_cost(model_, local), {}, Lane::kBackground);
      program_.depend(step, ready);
      program_.depend(step, flushed, true);
      if (plan_.zero == 1 || plan_.zero == 2) {
        for (const auto& [group, params, size, what] :
             {std::tuple{dp_group_, &block.dense_tensors, data_size_, "param_allgather"},
              std::tuple{edp_group_, &block.expert_tensors, expert_data_size_,
                         "expert_param_allgather"}}) {
          if (group == 0 || params->empty()) continue;
          for (uint64_t bucket : buckets(*params)) {
            program_.collective(fmt::format("{}.{}", block.name, what), ALL_GATHER,
                                ceil_div(bucket, size) * bytes_, group, {step}, Lane::kBackground);
          }
        }
      }
    }
  }

  const TransformerModel& model_;
  const ParallelPlan& plan_;
  RankCoords coords_;
  uint32_t tp_group_ = 0, cp_group_ = 0, dp_group_ = 0, ep_group_ = 0, edp_group_ = 0,
           emb_group_ = 0;
  uint32_t bytes_ = 2;
  LayerShard shard_;
  uint64_t tokens_ = 0;
  uint64_t norm_tokens_ = 0;
  EdgeCosts edge_;
  LayerCosts dense_costs_, moe_costs_;
  bool dense_ready_ = false, moe_ready_ = false;
  std::vector<uint32_t> first_layer_;
  uint64_t data_size_ = 1;
  uint64_t expert_data_size_ = 1;
  uint32_t last_virtual_ = 0;
  std::vector<Block> blocks_;
  std::vector<ProgRef> loss_;      // by micro-batch and chunk: the forward's loss node
  std::vector<ProgRef> previous_;  // the open compute nodes of the previous pipeline step
  ProgRef last_layer_start_ = kNoNode;
  ProgRef tied_wgrad_ = kNoNode;
  RankProgram program_;
};

}  // namespace

Expected<LlmGenerator> LlmGenerator::create(TransformerModel model, ParallelPlan plan) {
  if (Status status = validate_plan(model, plan); !status) return status.error();
  return LlmGenerator(std::move(model), plan);
}

RankProgram LlmGenerator::build(uint32_t rank) const {
  return TrainingBuilder(model_, plan_, groups_, rank).build();
}

RankRenaming LlmGenerator::renaming(uint32_t rank) const {
  const RankCoords coords = rank_coords(plan_, rank);
  RankRenaming out;
  out.representative = rank_of(plan_, RankCoords{0, 0, 0, coords.pp});
  if (out.representative == rank) return out;
  for (uint32_t stage = 0; stage < plan_.pp; ++stage) {
    out.peers.emplace_back(rank_of(plan_, RankCoords{0, 0, 0, stage}),
                           rank_of(plan_, RankCoords{coords.tp, coords.cp, coords.dp, stage}));
  }
  for (size_t kind = 0; kind < kGroupKinds; ++kind) {
    const uint32_t from = groups_.id(static_cast<GroupKind>(kind), out.representative);
    if (from != 0) out.groups.emplace_back(from, groups_.id(static_cast<GroupKind>(kind), rank));
  }
  std::sort(out.peers.begin(), out.peers.end());
  std::sort(out.groups.begin(), out.groups.end());
  return out;
}

namespace {

std::vector<std::vector<uint32_t>> group_list(const LlmGenerator& generator) {
  std::vector<std::vector<uint32_t>> groups;
  for (uint32_t id = 1; id <= generator.groups().count(); ++id)
    groups.push_back(generator.groups().members(id));
  return groups;
}

}  // namespace

Expected<GeneratedTraces> write_llm_traces(const LlmGenerator& generator, const std::string& prefix,
                                           const RankFileOptions& options) {
  return write_trace_set(
      generator.ranks(), prefix, options,
      [&](uint32_t rank) -> Expected<RankProgram> { return generator.build(rank); },
      group_list(generator), [&](uint32_t rank) { return generator.renaming(rank); });
}

Expected<BuiltTraces> build_llm_traces(const LlmGenerator& generator, const std::string& name,
                                       const RankFileOptions& options) {
  return build_trace_set(
      generator.ranks(), name, options,
      [&](uint32_t rank) -> Expected<RankProgram> { return generator.build(rank); },
      group_list(generator), [&](uint32_t rank) { return generator.renaming(rank); });
}

}  // namespace orrery::gen
