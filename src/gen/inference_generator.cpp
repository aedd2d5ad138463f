#include "gen/inference_generator.h"

#include <algorithm>

#include <fmt/format.h>

#include "gen/common.h"
#include "gen/llm_plan.h"

namespace orrery::gen {

namespace {

using ChakraProtoMsg::ALL_GATHER;
using ChakraProtoMsg::ALL_REDUCE;

constexpr uint64_t kSampleFlops = 5;  // softmax, temperature and top-p over every logit
constexpr uint64_t kTokenBytes = 4;   // a sampled token id

// The requests of one group that run in one step, and the shapes that follow from them.
struct StepShape {
  std::vector<uint32_t> requests;
  uint64_t tokens = 0;    // tokens processed (prefill: every prompt token; decode: one per request)
  uint64_t sum_kv = 0;    // keys attended to, summed over requests
  uint64_t sum_q_kv = 0;  // attention scores per head
};

class InferenceBuilder {
 public:
  InferenceBuilder(const TransformerModel& model, const InferencePlan& plan, uint32_t rank)
      : model_(model),
        plan_(plan),
        tp_index_(rank % plan.tp),
        stage_(rank / plan.tp),
        tp_group_(plan.tp > 1 ? stage_ + 1 : 0),
        bytes_(dtype_bytes(model.dtype)),
        first_layer_(inference_stage_layers(model, plan.pp)) {}

  RankProgram build() {
    const uint32_t steps = plan_.steps();
    for (uint32_t step = 0; step < steps; ++step) {
      for (uint32_t group = 0; group < plan_.micro_batches; ++group) {
        const StepShape shape = shape_of(step, group);
        if (shape.requests.empty()) continue;
        const auto first = static_cast<ProgRef>(program_.size());
        const size_t first_edge = program_.edge_count();
        run_step(step, group, shape);
        previous_ = program_.open_compute(first, first_edge);
      }
    }
    return std::move(program_);
  }

 private:
  StepShape shape_of(uint32_t step, uint32_t group) const {
    StepShape shape;
    for (uint32_t request = group; request < plan_.requests(); request += plan_.micro_batches) {
      if (plan_.output_lengths[request] <= step) continue;
      shape.requests.push_back(request);
      const uint64_t prompt = plan_.prompt_lengths[request];
      if (step == 0) {
        shape.tokens += prompt;
        shape.sum_kv += prompt;
        shape.sum_q_kv += prompt * prompt;
      } else {
        shape.tokens += 1;
        shape.sum_kv += prompt + step;  // the cache so far and the new token
        shape.sum_q_kv += prompt + step;
      }
    }
    return shape;
  }

  // Whether `group` has a step after `step` (some request still generating).
  bool continues(uint32_t step, uint32_t group) const {
    for (uint32_t request = group; request < plan_.requests(); request += plan_.micro_batches) {
      if (plan_.output_lengths[request] > step + 1) return true;
    }
    return false;
  }

  int32_t tag(uint32_t step, uint32_t group, uint32_t boundary) const {
    return static_cast<int32_t>(
        (static_cast<uint64_t>(step) * plan_.micro_batches + group) * (plan_.pp + 1ULL) + boundary);
  }
  uint32_t rank_of_stage(uint32_t stage) const { return tp_index_ + plan_.tp * stage; }

  ProgRef tp_allreduce(const std::string& name, uint64_t bytes, ProgRef input) {
    if (tp_group_ == 0) return input;
    return program_.collective(name + ".tp_allreduce", ALL_REDUCE, bytes, tp_group_, {input});
  }

  void gate(ProgRef node) { program_.depend(node, previous_, true); }

  void run_step(uint32_t step, uint32_t group, const StepShape& shape) {
    const std::string label = (step == 0 ? std::string("prefill") : fmt::format("decode{}", step)) +
                              (plan_.micro_batches > 1 ? fmt::format(".g{}", group) : "");
    const uint64_t hidden_bytes = shape.tokens * model_.hidden * bytes_;
    LayerShard shard;
    shard.batch = 1;
    shard.q_tokens = shape.tokens;
    shard.kv_tokens = shape.tokens;
    shard.tp = plan_.tp;
    const OpCost attention =
        attention_cost(model_, plan_.tp, shape.tokens, shape.sum_kv, shape.sum_q_kv);

    ProgRef x = kNoNode;
    if (stage_ == 0) {
      ProgRef tokens = kNoNode;
      if (step > 0 && plan_.pp > 1) {
        tokens = program_.recv(fmt::format("{}.recv_tokens", label), rank_of_stage(plan_.pp - 1),
                               tag(step, group, plan_.pp), shape.requests.size() * kTokenBytes);
        gate(tokens);
      }
      const ProgRef embedding = program_.compute(fmt::format("{}.embedding", label),
                                                 edge_costs(model_, shard).embedding, {tokens});
      gate(embedding);
      x = tp_allreduce(fmt::format("{}.embedding", label), hidden_bytes, embedding);
    } else {
      x = program_.recv(fmt::format("{}.recv_hidden.s{}", label, stage_), rank_of_stage(stage_ - 1),
                        tag(step, group, stage_), hidden_bytes);
      gate(x);
    }
    for (uint32_t layer = first_layer_[stage_]; layer < first_layer_[stage_ + 1]; ++layer) {
      LayerCosts cost = layer_costs(model_, layer, shard);
      cost.attention = attention;
      auto name = [&](std::string_view op) { return fmt::format("{}.L{}.{}", label, layer, op); };
      const ProgRef norm1 = program_.compute(name("attn_norm"), cost.attn_norm, {x});
      const ProgRef qkv = program_.compute(name("qkv"), cost.qkv, {norm1});
      const ProgRef attn = program_.compute(name("attention"), cost.attention, {qkv});
      const ProgRef out = program_.compute(name("attn_out"), cost.attn_out, {attn});
      const ProgRef residual = tp_allreduce(name("attn_out"), hidden_bytes, out);
      const ProgRef norm2 = program_.compute(name("mlp_norm"), cost.mlp_norm, {residual, x});
      ProgRef mlp_in = norm2;
      const bool moe = model_.is_moe_layer(layer);
      if (moe) mlp_in = program_.compute(name("router"), cost.router, {norm2});
      const ProgRef up =
          program_.compute(name(moe ? "expert_up" : "mlp_up"), cost.mlp_up, {mlp_in});
      const ProgRef act =
          program_.compute(name(moe ? "expert_act" : "mlp_act"), cost.mlp_act, {up});
      const ProgRef down =
          program_.compute(name(moe ? "expert_down" : "mlp_down"), cost.mlp_down, {act});
      x = tp_allreduce(name("mlp_down"), hidden_bytes, down);
    }
    if (stage_ + 1 < plan_.pp) {
      program_.send(fmt::format("{}.send_hidden.s{}", label, stage_ + 1), rank_of_stage(stage_ + 1),
                    tag(step, group, stage_ + 1), hidden_bytes, {x});
      return;
    }
    // The last stage: logits of every request's last position, gathered for sampling.
    const auto requests = static_cast<uint64_t>(shape.requests.size());
    LayerShard last = shard;
    last.q_tokens = requests;
    const EdgeCosts edge = edge_costs(model_, last);
    const ProgRef norm =
        program_.compute(fmt::format("{}.final_norm", label), edge.final_norm, {x});
    const ProgRef logits = program_.compute(fmt::format("{}.logits", label), edge.logits, {norm});
    ProgRef gathered = logits;
    if (tp_group_ != 0) {
      gathered = program_.collective(
          fmt::format("{}.logits.tp_allgather", label), ALL_GATHER,
          requests * (padded_vocab(model_, plan_.tp) / plan_.tp) * bytes_, tp_group_, {logits});
    }
    const uint64_t vocab = padded_vocab(model_, plan_.tp);
    const ProgRef sample =
        program_.compute(fmt::format("{}.sample", label),
                         {kSampleFlops * requests * vocab, requests * vocab * bytes_}, {gathered});
    if (plan_.pp > 1 && continues(step, group)) {
      // The next step's first stage needs the tokens of the requests that go on generating.
      uint64_t next = 0;
      for (uint32_t request : shape.requests)
        next += plan_.output_lengths[request] > step + 1 ? 1U : 0U;
      program_.send(fmt::format("{}.send_tokens", label), rank_of_stage(0),
                    tag(step + 1, group, plan_.pp), next * kTokenBytes, {sample});
    }
  }

  const TransformerModel& model_;
  const InferencePlan& plan_;
  uint32_t tp_index_;
  uint32_t stage_;
  uint32_t tp_group_;
  uint32_t bytes_;
  std::vector<uint32_t> first_layer_;
  std::vector<ProgRef> previous_;
  RankProgram program_;
};

}  // namespace

uint32_t InferencePlan::steps() const {
  uint32_t steps = 0;
  for (uint32_t length : output_lengths) steps = std::max(steps, length);
  return steps;
}

Status validate_inference_plan(const TransformerModel& model, InferencePlan& plan) {
  if (Status status = validate_model(model); !status) return status;
  if (plan.tp == 0) return plan_error("--tp 0: every parallel degree is at least 1");
  if (plan.pp == 0) return plan_error("--pp 0: every parallel degree is at least 1");
  if (static_cast<uint64_t>(plan.tp) * plan.pp > kMaxRanks) {
    return plan_error(fmt::format("--tp x --pp = {} ranks: expected at most {}",
                                  static_cast<uint64_t>(plan.tp) * plan.pp, kMaxRanks));
  }
  if (plan.prompt_lengths.empty()) {
    return plan_error("missing --prompt-lengths (one prompt length per request, e.g. 512,1024)");
  }
  for (uint32_t length : plan.prompt_lengths) {
    if (length == 0) return plan_error("--prompt-lengths: a prompt has at least 1 token, found 0");
  }
  if (plan.output_lengths.empty()) plan.output_lengths = {1};
  if (plan.output_lengths.size() == 1 && plan.prompt_lengths.size() > 1) {
    plan.output_lengths.assign(plan.prompt_lengths.size(), plan.output_lengths.front());
  }
  if (plan.output_lengths.size() != plan.prompt_lengths.size()) {
    return plan_error(
        fmt::format("--output-lengths has {} values for {} requests (give one value "
                    "for all, or one per request)",
                    plan.output_lengths.size(), plan.prompt_lengths.size()));
  }
  for (uint32_t length : plan.output_lengths) {
    if (length == 0) {
      return plan_error("--output-lengths: a request generates at least 1 token, found 0");
    }
  }
  if (Status split = check_tensor_parallel(model, plan.tp); !split) return split.error();
  if (plan.pp > model.layers) {
    return plan_error(
        fmt::format("--pp {} exceeds the {} layers of {}", plan.pp, model.layers, model.name));
  }
  if (plan.micro_batches == 0 || plan.micro_batches > plan.requests()) {
    return plan_error(fmt::format("--micro-batches {}: expected 1 to the {} requests",
                                  plan.micro_batches, plan.requests()));
  }
  // Every decode step runs every layer of a rank's stage: at least one node each.
  const uint64_t layers_per_rank = std::max<uint64_t>(1, model.layers / plan.pp);
  if (const uint64_t nodes = uint64_t{plan.steps()} * layers_per_rank; nodes > kMaxNodesPerRank) {
    return plan_error(fmt::format(
        "--output-lengths: {} decode steps make at least {} nodes per rank, more than the {} a "
        "generated rank file may hold",
        plan.steps(), nodes, kMaxNodesPerRank));
  }
  const uint64_t tags = static_cast<uint64_t>(plan.steps()) * plan.micro_batches * (plan.pp + 1ULL);
  if (tags > static_cast<uint64_t>(INT32_MAX)) {
    return plan_error(fmt::format("{} steps of {} micro-batches: too many to tag", plan.steps(),
                                  plan.micro_batches));
  }
  return Status::ok();
}

std::vector<uint32_t> inference_stage_layers(const TransformerModel& model, uint32_t pp) {
  std::vector<uint32_t> first(pp + 1, 0);
  const uint32_t base = model.layers / pp;
  const uint32_t extra = model.layers % pp;
  for (uint32_t stage = 0; stage < pp; ++stage)
    first[stage + 1] = first[stage] + base + (stage < extra ? 1 : 0);
  return first;
}

InferenceGenerator::InferenceGenerator(TransformerModel model, InferencePlan plan)
    : model_(std::move(model)), plan_(std::move(plan)) {
  if (plan_.tp > 1) {
    for (uint32_t stage = 0; stage < plan_.pp; ++stage) {
      std::vector<uint32_t> members;
      for (uint32_t index = 0; index < plan_.tp; ++index)
        members.push_back(index + plan_.tp * stage);
      groups_.push_back(std::move(members));
    }
  }
}

Expected<InferenceGenerator> InferenceGenerator::create(TransformerModel model,
                                                        InferencePlan plan) {
  if (Status status = validate_inference_plan(model, plan); !status) return status.error();
  return InferenceGenerator(std::move(model), std::move(plan));
}

RankProgram InferenceGenerator::build(uint32_t rank) const {
  return InferenceBuilder(model_, plan_, rank).build();
}

RankRenaming InferenceGenerator::renaming(uint32_t rank) const {
  const uint32_t index = rank % plan_.tp;
  RankRenaming out;
  out.representative = rank - index;
  if (index == 0) return out;
  for (uint32_t stage = 0; stage < plan_.pp; ++stage) {
    out.peers.emplace_back(int64_t{plan_.tp} * stage, int64_t{plan_.tp} * stage + index);
  }
  return out;
}

Expected<GeneratedTraces> write_inference_traces(const InferenceGenerator& generator,
                                                 const std::string& prefix,
                                                 const RankFileOptions& options) {
  return write_trace_set(
      generator.ranks(), prefix, options,
      [&](uint32_t rank) -> Expected<RankProgram> { return generator.build(rank); },
      generator.groups(), [&](uint32_t rank) { return generator.renaming(rank); });
}

Expected<BuiltTraces> build_inference_traces(const InferenceGenerator& generator,
                                             const std::string& name,
                                             const RankFileOptions& options) {
  return build_trace_set(
      generator.ranks(), name, options,
      [&](uint32_t rank) -> Expected<RankProgram> { return generator.build(rank); },
      generator.groups(), [&](uint32_t rank) { return generator.renaming(rank); });
}

}  // namespace orrery::gen
