#include "gen/llm_plan.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "gen/common.h"

namespace orrery::gen {

Expected<PipelineSchedule> parse_schedule(std::string_view name) {
  if (name == "1f1b" || name == "1F1B") return PipelineSchedule::k1F1B;
  if (name == "interleaved") return PipelineSchedule::kInterleaved;
  return Error::make(ErrorKind::kInvalidArgument,
                     "unknown pipeline schedule '{}' (expected 1f1b or interleaved)", name);
}

std::string_view schedule_name(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::k1F1B ? "1f1b" : "interleaved";
}

Status validate_plan(const TransformerModel& model, ParallelPlan& plan) {
  if (Status status = validate_model(model); !status) return status;
  const std::array<std::pair<const char*, uint32_t>, 5> degrees = {{{"--dp", plan.dp},
                                                                    {"--tp", plan.tp},
                                                                    {"--pp", plan.pp},
                                                                    {"--cp", plan.cp},
                                                                    {"--ep", plan.ep}}};
  for (const auto& [flag, value] : degrees) {
    if (value == 0)
      return plan_error(fmt::format("{} 0: every parallel degree is at least 1", flag));
  }
  const uint64_t ranks = static_cast<uint64_t>(plan.dp) * plan.tp * plan.pp * plan.cp;
  if (ranks > kMaxRanks) {
    return plan_error(
        fmt::format("--dp x --tp x --pp x --cp = {} ranks: expected at most {}", ranks, kMaxRanks));
  }
  if (plan.micro_batch == 0) return plan_error("--micro-batch 0: expected 1 or more sequences");
  if (plan.global_batch == 0) return plan_error("missing --global-batch (sequences per iteration)");
  // Checked before the product below is formed: it could wrap (to 0, a division by zero).
  if (plan.micro_batch > plan.global_batch || plan.micro_batch * plan.dp > plan.global_batch) {
    return plan_error(fmt::format(
        "--global-batch {} is smaller than --micro-batch x --dp = {} x {} (one micro-batch per "
        "replica at least)",
        plan.global_batch, plan.micro_batch, plan.dp));
  }
  if (plan.global_batch % (plan.micro_batch * plan.dp) != 0) {
    return plan_error(
        fmt::format("--global-batch {} is not a multiple of --micro-batch x --dp = {} x {} = {}",
                    plan.global_batch, plan.micro_batch, plan.dp, plan.micro_batch * plan.dp));
  }
  if (plan.seq == 0) plan.seq = model.seq;
  if (Status split = check_tensor_parallel(model, plan.tp); !split) return split.error();
  if (plan.sp && plan.tp == 1) {
    return plan_error(
        "--sp shards the sequence over tensor-parallel ranks: it needs --tp 2 or more");
  }
  const uint64_t seq_split = static_cast<uint64_t>(plan.cp) * (plan.sp ? plan.tp : 1);
  if (plan.seq % seq_split != 0) {
    return plan_error(
        plan.sp ? fmt::format("--seq {} is not a multiple of --cp x --tp = {} (with --sp "
                              "each rank holds seq / (cp tp) tokens)",
                              plan.seq, seq_split)
                : fmt::format("--seq {} is not a multiple of --cp {}", plan.seq, plan.cp));
  }
  if (plan.ep > 1) {
    if (!model.is_moe()) {
      return plan_error(fmt::format("--ep {} needs a Mixture-of-Experts model; {} is dense",
                                    plan.ep, model.name));
    }
    if (model.experts % plan.ep != 0) {
      return plan_error(fmt::format("--ep {} does not divide the {} experts of {}", plan.ep,
                                    model.experts, model.name));
    }
    if (plan.dp % plan.ep != 0) {
      return plan_error(
          fmt::format("--ep {} does not divide --dp {} (expert parallelism is carved out "
                      "of data parallelism)",
                      plan.ep, plan.dp));
    }
  }
  if (plan.zero > 3) return plan_error(fmt::format("--zero {}: expected 0, 1, 2 or 3", plan.zero));
  if (plan.schedule == PipelineSchedule::k1F1B && plan.virtual_stages != 1) {
    return plan_error(
        fmt::format("--virtual-stages {} needs --schedule interleaved", plan.virtual_stages));
  }
  if (plan.schedule == PipelineSchedule::kInterleaved) {
    if (plan.pp < 2) return plan_error("--schedule interleaved needs --pp 2 or more");
    if (plan.virtual_stages < 2) {
      return plan_error(
          fmt::format("--schedule interleaved needs --virtual-stages 2 or more (model chunks per "
                      "rank), found {}",
                      plan.virtual_stages));
    }
    if (plan.micro_batches() % plan.pp != 0) {
      return plan_error(fmt::format(
          "the interleaved schedule runs micro-batches in groups of --pp {}: --global-batch / "
          "(--micro-batch x --dp) = {} is not a multiple of it",
          plan.pp, plan.micro_batches()));
    }
  }
  if (plan.chunks() > model.layers) {
    return plan_error(
        fmt::format("--pp {} x --virtual-stages {} = {} pipeline stages exceed the {} "
                    "layers of {}",
                    plan.pp, plan.virtual_stages, plan.chunks(), model.layers, model.name));
  }
  // Every micro-batch runs forward and backward through every layer of a rank's stage: at least
  // two nodes each. A plan beyond kMaxNodesPerRank would be refused only by running out of memory.
  const uint64_t layers_per_rank = std::max<uint64_t>(1, model.layers / plan.pp);
  if (const uint64_t nodes = plan.micro_batches() * 2 * layers_per_rank; nodes > kMaxNodesPerRank) {
    return plan_error(fmt::format(
        "--global-batch {}: {} micro-batches per pipeline make at least {} nodes per rank, more "
        "than the {} a generated rank file may hold (raise --micro-batch or --dp)",
        plan.global_batch, plan.micro_batches(), nodes, kMaxNodesPerRank));
  }
  // Tags of pipeline messages are int32: (micro-batch, direction, boundary) must fit.
  if (plan.micro_batches() * 2 * plan.chunks() > static_cast<uint64_t>(INT32_MAX)) {
    return plan_error(fmt::format("{} micro-batches over {} pipeline stages: too many to tag",
                                  plan.micro_batches(), plan.chunks()));
  }
  return Status::ok();
}

RankCoords rank_coords(const ParallelPlan& plan, uint32_t rank) {
  RankCoords coords;
  coords.tp = rank % plan.tp;
  rank /= plan.tp;
  coords.cp = rank % plan.cp;
  rank /= plan.cp;
  coords.dp = rank % plan.dp;
  coords.pp = rank / plan.dp;
  return coords;
}

uint32_t rank_of(const ParallelPlan& plan, const RankCoords& coords) {
  return coords.tp + plan.tp * (coords.cp + plan.cp * (coords.dp + plan.dp * coords.pp));
}

std::vector<uint32_t> virtual_stage_layers(const TransformerModel& model,
                                           const ParallelPlan& plan) {
  const uint32_t chunks = plan.chunks();
  std::vector<uint32_t> first(chunks + 1, 0);
  const uint32_t base = model.layers / chunks;
  const uint32_t extra = model.layers % chunks;
  for (uint32_t q = 0; q < chunks; ++q) first[q + 1] = first[q] + base + (q < extra ? 1 : 0);
  return first;
}

std::vector<PipelineStep> pipeline_steps(const ParallelPlan& plan, uint32_t stage) {
  const uint64_t m = plan.micro_batches();
  const uint32_t p = plan.pp;
  std::vector<PipelineStep> steps;
  steps.reserve(2 * m * plan.virtual_stages);
  if (plan.schedule == PipelineSchedule::k1F1B) {
    const uint64_t warmup = std::min<uint64_t>(p - stage - 1, m);
    for (uint64_t k = 0; k < warmup; ++k) steps.push_back({true, static_cast<uint32_t>(k), 0});
    for (uint64_t k = 0; k < m - warmup; ++k) {
      steps.push_back({true, static_cast<uint32_t>(warmup + k), 0});
      steps.push_back({false, static_cast<uint32_t>(k), 0});
    }
    for (uint64_t k = m - warmup; k < m; ++k) steps.push_back({false, static_cast<uint32_t>(k), 0});
    return steps;
  }
  // Megatron-LM's interleaved schedule (schedules.py,
  // forward_backward_pipelining_with_interleaving).
  const uint64_t v = plan.virtual_stages;
  const uint64_t total = m * v;
  const uint64_t warmup = std::min<uint64_t>(2ULL * (p - stage - 1) + (v - 1) * p, total);
  auto step = [&](uint64_t k, bool forward) {
    const uint64_t in_group = k % (p * v);
    uint64_t chunk = in_group / p;
    if (!forward) chunk = v - 1 - chunk;
    const uint64_t micro_batch = (k / (p * v)) * p + k % p;
    return PipelineStep{forward, static_cast<uint32_t>(micro_batch), static_cast<uint32_t>(chunk)};
  };
  for (uint64_t k = 0; k < warmup; ++k) steps.push_back(step(k, true));
  for (uint64_t k = 0; k < total - warmup; ++k) {
    steps.push_back(step(warmup + k, true));
    steps.push_back(step(k, false));
  }
  for (uint64_t k = total - warmup; k < total; ++k) steps.push_back(step(k, false));
  return steps;
}

std::string_view group_kind_name(GroupKind kind) {
  switch (kind) {
    case GroupKind::kTensor:
      return "tensor";
    case GroupKind::kContext:
      return "context";
    case GroupKind::kData:
      return "data";
    case GroupKind::kExpert:
      return "expert";
    case GroupKind::kExpertData:
      return "expert-data";
    case GroupKind::kEmbedding:
      return "embedding";
  }
  return "?";
}

LlmGroups::LlmGroups(const ParallelPlan& plan, bool tied_embeddings, bool moe)
    : ranks_(plan.ranks()), by_rank_(plan.ranks()) {
  const uint32_t e = plan.ep;
  // For each kind: the key that is equal for exactly the members of one group (UINT64_MAX: the rank
  // is in no group of this kind).
  auto key = [&](GroupKind kind, const RankCoords& c) -> uint64_t {
    auto pack = [](std::initializer_list<uint64_t> fields) {
      uint64_t packed = 0;
      for (uint64_t field : fields) packed = packed * (1ULL << 21) + field;
      return packed;
    };
    switch (kind) {
      case GroupKind::kTensor:
        return pack({c.cp, c.dp, c.pp});
      case GroupKind::kContext:
        return pack({c.tp, c.dp, c.pp});
      case GroupKind::kData:
        return pack({c.tp, c.pp});
      case GroupKind::kExpert:
        return moe ? pack({c.tp, c.cp, c.pp, c.dp / e}) : UINT64_MAX;
      case GroupKind::kExpertData:
        return moe ? pack({c.tp, c.pp, c.dp % e}) : UINT64_MAX;
      case GroupKind::kEmbedding:
        if (!tied_embeddings || plan.pp < 2 || (c.pp != 0 && c.pp != plan.pp - 1))
          return UINT64_MAX;
        return pack({c.tp, c.cp, c.dp});
    }
    return UINT64_MAX;
  };
  for (size_t kind_index = 0; kind_index < kGroupKinds; ++kind_index) {
    const auto kind = static_cast<GroupKind>(kind_index);
    std::map<uint64_t, std::vector<uint32_t>> groups;
    std::vector<uint64_t> keys(ranks_);
    for (uint32_t rank = 0; rank < ranks_; ++rank) {
      keys[rank] = key(kind, rank_coords(plan, rank));
      if (keys[rank] != UINT64_MAX) groups[keys[rank]].push_back(rank);
    }
    // Number the groups of this kind in the order of their lowest rank.
    std::vector<std::vector<uint32_t>*> ordered;
    for (auto& [group_key, members] : groups) {
      if (members.size() > 1) ordered.push_back(&members);
    }
    std::stable_sort(ordered.begin(), ordered.end(),
                     [](const auto* a, const auto* b) { return a->front() < b->front(); });
    std::map<uint32_t, uint32_t> id_by_first;
    for (std::vector<uint32_t>* members : ordered) {
      members_.push_back(*members);
      kinds_.push_back(kind);
      id_by_first[members->front()] = static_cast<uint32_t>(members_.size());
    }
    for (uint32_t rank = 0; rank < ranks_; ++rank) {
      uint32_t id = 0;
      if (keys[rank] != UINT64_MAX) {
        const std::vector<uint32_t>& members = groups[keys[rank]];
        if (members.size() > 1) id = id_by_first[members.front()];
      }
      by_rank_[rank][kind_index] = id;
    }
  }
}

uint32_t LlmGroups::id(GroupKind kind, uint32_t rank) const {
  return by_rank_[rank][static_cast<size_t>(kind)];
}

}  // namespace orrery::gen
