#include "design/sweep_eval.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "core/units.h"
#include "design/sweep_cost.h"
#include "gen/dlrm_generator.h"
#include "gen/llm_generator.h"
#include "gen/memory_estimate.h"
#include "network/graph_yaml.h"
#include "sim/scenario.h"
#include "sim/simulation.h"
#include "system/system_config.h"
#include "workload/executor.h"

namespace orrery::design {

namespace {

std::string gib(uint64_t bytes) {
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / kGiB);
}

// ---------------------------------------------------------------------------------------------
// Memory: what each offload set leaves in HBM and puts in the tier.
// ---------------------------------------------------------------------------------------------

struct MemoryPlan {
  std::vector<gen::StageMemory> stages;
  std::vector<uint32_t> stage_layers;
  uint64_t micro_batches = 1;
  bool recompute = false;
  uint64_t need = 0;  // the fullest stage without offload
  // Candidate offload sets that fit (all when the memory is not checked), and their per-stage use.
  std::vector<uint32_t> feasible;
  std::map<uint32_t, std::vector<StageOffload>> by_set;
  std::string reason;  // when nothing fits
};

MemoryPlan plan_memory(const SweepSpec& spec, const SweepPoint& point) {
  MemoryPlan out;
  const ClusterPoint& c = point.cluster;
  const uint64_t tier_share = c.expansion_bytes / spec.expansion_shared_by;
  if (spec.workload == SweepWorkload::kDlrm) {
    gen::DlrmPlan plan;
    plan.ranks = c.accelerators;
    plan.global_batch = spec.global_batch;
    plan.sharding = *gen::parse_sharding(point.plan.sharding);
    out.stages = gen::estimate_dlrm_memory(spec.dlrm, plan);
    out.stage_layers.assign(out.stages.size(), 1);
  } else {
    gen::ParallelPlan plan = llm_plan_of(spec, point);
    (void)gen::validate_plan(spec.llm, plan);  // fills defaults; checked by the rules already
    out.stages = gen::estimate_training_memory(spec.llm, plan);
    const std::vector<uint32_t> first = gen::virtual_stage_layers(spec.llm, plan);
    out.stage_layers.assign(plan.pp, 0);
    for (uint32_t q = 0; q < plan.chunks(); ++q) {
      out.stage_layers[q % plan.pp] += first[q + 1] - first[q];
    }
    out.micro_batches = plan.micro_batches();
    out.recompute = plan.recompute;
  }
  for (const gen::StageMemory& s : out.stages) out.need = std::max(out.need, s.memory.total());

  std::vector<uint32_t> candidates;
  const OffloadChoice& choice = point.plan.offload;
  if (spec.workload == SweepWorkload::kDlrm || (!choice.automatic)) {
    candidates.push_back(spec.workload == SweepWorkload::kDlrm ? 0 : choice.set);
  } else {
    candidates.push_back(0);
    if (tier_share > 0) {
      for (uint32_t set = 1; set <= kOffloadAll; ++set) candidates.push_back(set);
    }
  }
  // The smallest overflow over the candidates, for the message when nothing fits.
  double best_over = INFINITY;
  for (uint32_t set : candidates) {
    std::vector<StageOffload> per_stage;
    uint64_t hbm_over = 0, tier_over = 0;
    uint32_t hbm_stage = 0, tier_stage = 0;
    uint64_t hbm_need = 0, tier_need = 0;
    for (size_t s = 0; s < out.stages.size(); ++s) {
      StageOffload o =
          stage_offload(out.stages[s], set, out.stage_layers[s], out.micro_batches, out.recompute);
      if (o.hbm > c.hbm_bytes && o.hbm - c.hbm_bytes > hbm_over) {
        hbm_over = o.hbm - c.hbm_bytes;
        hbm_stage = static_cast<uint32_t>(s);
        hbm_need = o.hbm;
      }
      if (o.tier > tier_share && o.tier - tier_share > tier_over) {
        tier_over = o.tier - tier_share;
        tier_stage = static_cast<uint32_t>(s);
        tier_need = o.tier;
      }
      per_stage.push_back(o);
    }
    out.by_set.emplace(set, std::move(per_stage));
    if (!spec.memory_must_fit || (hbm_over == 0 && tier_over == 0)) {
      out.feasible.push_back(set);
      continue;
    }
    const double over = static_cast<double>(hbm_over + tier_over);
    if (over >= best_over) continue;
    best_over = over;
    const std::string what = spec.workload == SweepWorkload::kDlrm ? "rank" : "stage";
    std::string reason = "out of memory";
    if (set != 0 || choice.automatic) reason += fmt::format(" (offload {})", offload_set_name(set));
    reason += ":";
    if (hbm_over > 0) {
      reason += fmt::format(" {} {} needs {} of HBM, {} per accelerator ({} over)", what, hbm_stage,
                            gib(hbm_need), gib(c.hbm_bytes), gib(hbm_over));
    }
    if (tier_over > 0) {
      reason += fmt::format("{} {} {} puts {} in the expansion tier, {} per accelerator ({} over)",
                            hbm_over > 0 ? ";" : "", what, tier_stage, gib(tier_need),
                            gib(tier_share), gib(tier_over));
    }
    out.reason = reason;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The scenario of a point: its network and system, as ASTRA-sim's files would say them.
// ---------------------------------------------------------------------------------------------

std::string network_yaml(const std::vector<DimensionPoint>& dims) {
  std::vector<std::string> kinds, sizes, bws, lats;
  for (const DimensionPoint& d : dims) {
    kinds.push_back(d.topology);
    sizes.push_back(std::to_string(d.size));
    bws.push_back(fmt::format("{:.17g}", d.bandwidth_gbps));
    lats.push_back(fmt::format("{:.17g}", d.latency_ns));
  }
  return fmt::format("topology: [ {} ]\nnpus_count: [ {} ]\nbandwidth: [ {} ]\nlatency: [ {} ]\n",
                     fmt::join(kinds, ", "), fmt::join(sizes, ", "), fmt::join(bws, ", "),
                     fmt::join(lats, ", "));
}

std::string system_json(const SweepSpec& spec, const ClusterPoint& c,
                        const std::vector<size_t>& original) {
  std::vector<std::string> reduce, a2a;
  for (size_t d : original) {
    reduce.push_back(fmt::format("\"{}\"", spec.network[d].all_reduce));
    a2a.push_back(fmt::format("\"{}\"", spec.network[d].all_to_all));
  }
  return fmt::format(
      "{{\n  \"scheduling-policy\": \"{}\",\n  \"endpoint-delay\": {},\n"
      "  \"active-chunks-per-dimension\": 1,\n  \"preferred-dataset-splits\": {},\n"
      "  \"all-reduce-implementation\": [{}],\n  \"all-gather-implementation\": [{}],\n"
      "  \"reduce-scatter-implementation\": [{}],\n  \"all-to-all-implementation\": [{}],\n"
      "  \"collective-optimization\": \"localBWAware\",\n  \"local-mem-bw\": {:.17g},\n"
      "  \"roofline-enabled\": 1,\n  \"peak-perf\": {:.17g}\n}}\n",
      spec.scheduling, std::llround(spec.endpoint_delay_ns), spec.splits, fmt::join(reduce, ", "),
      fmt::join(reduce, ", "), fmt::join(reduce, ", "), fmt::join(a2a, ", "), c.hbm_gbps,
      c.peak_tflops * c.efficiency);
}

// What the simulation of a point depends on besides its workload.
// (Points sharing a simulation share a workload, so the cuts are the same for all of them.)
std::string simulation_key(const SweepSpec& spec, const ClusterPoint& c) {
  std::vector<size_t> original(c.network.size());
  for (size_t d = 0; d < original.size(); ++d) original[d] = d;
  return system_json(spec, c, original) + network_yaml(c.network);
}

// ---------------------------------------------------------------------------------------------
// The breakdown: activities of the watched ranks, split after the run.
// ---------------------------------------------------------------------------------------------

enum Category : uint8_t { kCompute = 0, kFirstComm = 1, kNone = 1 + kCommKinds };

class BreakdownObserver final : public workload::RunObserver {
 public:
  BreakdownObserver(uint32_t ranks, const std::vector<uint32_t>& watched,
                    std::vector<CommKind> group_kinds, bool dlrm)
      : slots_(ranks), group_kinds_(std::move(group_kinds)), dlrm_(dlrm) {
    for (uint32_t rank : watched) {
      if (slots_[rank].empty()) {
        slots_[rank].push_back(static_cast<int32_t>(records_.size()));
        records_.emplace_back();
        ranks_.push_back(rank);
      }
    }
  }

  // Watching a few ranks lets a point run in class mode (one rank per class of alike ranks).
  std::span<const workload::Rank> watched_ranks() const override { return ranks_; }
  void on_representatives(const std::vector<workload::Rank>& representative_of) override {
    // A watched rank's activities are those of its class's representative: recorded from it (for
    // every watched rank it stands for) instead.
    for (std::vector<int32_t>& slots : slots_) slots.clear();
    for (size_t k = 0; k < ranks_.size(); ++k) {
      slots_[representative_of[ranks_[k]]].push_back(static_cast<int32_t>(k));
    }
  }

  void on_activity(const workload::ActivityRecord& record,
                   const chakra::TraceGraph& graph) override {
    if (record.rank >= slots_.size()) return;
    for (const int32_t slot : slots_[record.rank]) record_into(slot, record, graph);
  }

  void record_into(int32_t slot, const workload::ActivityRecord& record,
                   const chakra::TraceGraph& graph) {
    uint8_t category = kNone;
    switch (record.activity) {
      case workload::Activity::kCompute:
      case workload::Activity::kCpu:
      case workload::Activity::kMemory:
        category = kCompute;
        break;
      case workload::Activity::kSend:
        category = kFirstComm + static_cast<uint8_t>(CommKind::kPipeline);
        break;
      case workload::Activity::kRecv:
        return;  // waiting for another stage: bubble
      case workload::Activity::kCollective:
        category = kFirstComm + static_cast<uint8_t>(collective_kind(record.node, graph));
        break;
    }
    records_[static_cast<size_t>(slot)].push_back({record.start.ps(), record.end.ps(), category});
  }

  const std::vector<uint32_t>& ranks() const { return ranks_; }

  // compute, each kind's exposed time, in ps, of watched rank `index`.
  std::array<int64_t, 1 + kCommKinds> split(size_t index) const {
    std::vector<std::pair<int64_t, int>> events;  // (time, +-(category + 1))
    for (const Interval& i : records_[index]) {
      if (i.end <= i.start) continue;
      events.emplace_back(i.start, i.category + 1);
      events.emplace_back(i.end, -(i.category + 1));
    }
    std::sort(events.begin(), events.end());
    std::array<int64_t, 1 + kCommKinds> out{};
    std::array<int, 1 + kCommKinds> active{};
    int64_t last = 0;
    for (const auto& [time, change] : events) {
      if (time > last) {
        for (size_t c = 0; c < active.size(); ++c) {
          if (active[c] > 0) {
            out[c] += time - last;
            break;
          }
        }
      }
      last = time;
      const size_t c = static_cast<size_t>(std::abs(change) - 1);
      active[c] += change > 0 ? 1 : -1;
    }
    return out;
  }

 private:
  struct Interval {
    int64_t start;
    int64_t end;
    uint8_t category;
  };

  CommKind collective_kind(chakra::NodeIndex node, const chakra::TraceGraph& graph) const {
    if (dlrm_) {
      Expected<int64_t> type = graph.get_int_or(node, "comm_type", ChakraProtoMsg::ALL_REDUCE);
      return type && *type == ChakraProtoMsg::ALL_REDUCE ? CommKind::kData : CommKind::kExpert;
    }
    Expected<std::optional<std::string_view>> name = graph.get_string(node, "pg_name");
    if (!name || !name->has_value()) return CommKind::kData;
    uint32_t id = 0;
    const std::string_view text = **name;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
    if (ec != std::errc() || id == 0 || id > group_kinds_.size()) return CommKind::kData;
    return group_kinds_[id - 1];
  }

  // Per rank, the watched ranks (their index in records_) whose activities it plays: itself, or
  // in class mode every watched rank of the class it represents.
  std::vector<std::vector<int32_t>> slots_;
  std::vector<std::vector<Interval>> records_;
  std::vector<uint32_t> ranks_;
  std::vector<CommKind> group_kinds_;
  bool dlrm_;
};

CommKind kind_of(gen::GroupKind kind) {
  switch (kind) {
    case gen::GroupKind::kTensor:
      return CommKind::kTensor;
    case gen::GroupKind::kContext:
      return CommKind::kContext;
    case gen::GroupKind::kExpert:
      return CommKind::kExpert;
    case gen::GroupKind::kData:
    case gen::GroupKind::kExpertData:
    case gen::GroupKind::kEmbedding:
      return CommKind::kData;
  }
  return CommKind::kData;
}

// One simulation's outcome, shared by the points of a unit with the same network and system.
struct SimOutcome {
  std::string error;
  double end_ns = 0;
  double compute_ns = 0;
  std::array<double, kCommKinds> exposed_ns{};
  double bubble_ns = 0;
  std::vector<double> stage_compute_ns;  // per pipeline stage (LLM), else one entry
  std::vector<double> dim_utilization;
  uint64_t events = 0;
};

// The unit's workload, generated once.
struct Workload {
  std::shared_ptr<const chakra::TraceSet> traces;
  std::shared_ptr<const chakra::CommGroups> groups;
  std::vector<CommKind> group_kinds;
  std::vector<uint32_t> watched;  // one rank per pipeline stage (DLRM: a few spread out)
  uint32_t stages = 1;
  bool dlrm = false;
  std::vector<uint64_t> boundaries;  // ranks in each nested group of the layout (split_network)
};

Expected<Workload> build_workload(const SweepSpec& spec, const SweepPoint& point, size_t threads) {
  Workload w;
  gen::RankFileOptions options;
  options.threads = threads;
  options.generator = "orrery sweep";
  if (spec.workload == SweepWorkload::kDlrm) {
    gen::DlrmPlan plan;
    plan.ranks = point.cluster.accelerators;
    plan.global_batch = spec.global_batch;
    plan.sharding = *gen::parse_sharding(point.plan.sharding);
    Expected<gen::DlrmGenerator> generator = gen::DlrmGenerator::create(spec.dlrm, plan);
    if (!generator) return generator.error();
    Expected<gen::BuiltTraces> built = gen::build_dlrm_traces(*generator, spec.name, options);
    if (!built) return built.error();
    w.traces = built->traces;
    w.groups = built->groups;
    w.dlrm = true;
    const uint32_t n = plan.ranks;
    const uint32_t watched = std::min<uint32_t>(n, 8);
    for (uint32_t k = 0; k < watched; ++k) {
      w.watched.push_back(static_cast<uint32_t>(uint64_t{k} * n / watched));
    }
    return w;
  }
  gen::ParallelPlan plan = llm_plan_of(spec, point);
  Expected<gen::LlmGenerator> generator = gen::LlmGenerator::create(spec.llm, plan);
  if (!generator) return generator.error();
  Expected<gen::BuiltTraces> built = gen::build_llm_traces(*generator, spec.name, options);
  if (!built) return built.error();
  w.traces = built->traces;
  w.groups = built->groups;
  const gen::LlmGroups& groups = generator->groups();
  for (uint32_t id = 1; id <= groups.count(); ++id)
    w.group_kinds.push_back(kind_of(groups.kind(id)));
  const gen::ParallelPlan& layout = generator->plan();
  // rank = tp + T (cp + C (dp + D pp)), expert groups of ep consecutive data-parallel indices.
  w.boundaries = {uint64_t{layout.tp}, uint64_t{layout.tp} * layout.cp,
                  uint64_t{layout.tp} * layout.cp * layout.ep,
                  uint64_t{layout.tp} * layout.cp * layout.dp};
  w.stages = generator->plan().pp;
  for (uint32_t p = 0; p < w.stages; ++p) {
    w.watched.push_back(gen::rank_of(generator->plan(), {0, 0, 0, p}));
  }
  return w;
}

SimOutcome simulate_point(const SweepSpec& spec, const Workload& w, const ClusterPoint& c) {
  SimOutcome out;
  const SplitNetwork parts = split_network(c.network, w.boundaries);
  Expected<net::NetworkDescription> network =
      net::parse_network_yaml(network_yaml(parts.dims), "sweep network");
  // The point's own dimensions, for their link counts (utilization below).
  Expected<net::NetworkDescription> whole_network =
      net::parse_network_yaml(network_yaml(c.network), "sweep network");
  if (!network || !whole_network) {
    out.error = (!network ? network : whole_network).error().message();
    return out;
  }
  Expected<sys::SystemConfig> system =
      sys::parse_system_config("sweep system", system_json(spec, c, parts.original));
  if (!system) {
    out.error = system.error().message();
    return out;
  }
  sim::Scenario::Inputs inputs;
  inputs.traces = w.traces;
  inputs.comm_groups = w.groups;
  inputs.network = std::make_shared<const net::NetworkDescription>(std::move(*network));
  inputs.system = std::make_shared<const sys::SystemConfig>(std::move(*system));
  inputs.network_name = "sweep network";
  inputs.settings.backend = spec.backend;
  inputs.settings.threads = 1;
  inputs.settings.link_queue_peaks = false;  // a point needs times and totals per dimension only
  Expected<sim::Scenario> scenario = sim::Scenario::create(std::move(inputs));
  if (!scenario) {
    out.error = scenario.error().message();
    return out;
  }
  BreakdownObserver observer(scenario->rank_count(), w.watched, w.group_kinds, w.dlrm);
  sim::Simulation simulation(std::move(*scenario));
  simulation.add_observer(observer);
  Expected<sim::RunResult> result = simulation.run();
  if (!result) {
    out.error = result.error().message();
    return out;
  }
  out.end_ns = result->end.ns();
  out.events = result->events;
  // Per dimension of the point: the busy time of its parts over its own links.
  std::vector<SimTime> busy(c.network.size());
  for (size_t k = 0; k < result->dimensions.size(); ++k)
    busy[parts.original[k]] += result->dimensions[k].busy;
  for (size_t d = 0; d < c.network.size(); ++d) {
    sim::DimensionSummary whole;
    whole.busy = busy[d];
    whole.links = whole_network->logical.link_count(static_cast<uint32_t>(d));
    out.dim_utilization.push_back(whole.utilization(result->end));
  }
  // The slowest watched rank (a symmetric run simulates rank 0 for all).
  size_t critical = 0;
  SimTime latest = SimTime::zero();
  out.stage_compute_ns.assign(w.stages, 0);
  for (size_t k = 0; k < observer.ranks().size(); ++k) {
    const uint32_t rank = observer.ranks()[k];
    if (result->symmetric && rank != 0) continue;
    const std::array<int64_t, 1 + kCommKinds> split = observer.split(k);
    if (!w.dlrm && k < out.stage_compute_ns.size()) {
      out.stage_compute_ns[k] = static_cast<double>(split[0]) / 1000.0;
    }
    const SimTime finish = result->rank_results[rank].finish;
    if (k == 0 || finish > latest) {
      latest = finish;
      critical = k;
    }
  }
  if (result->symmetric) {
    for (double& s : out.stage_compute_ns) s = out.stage_compute_ns[0];
  }
  const std::array<int64_t, 1 + kCommKinds> split = observer.split(critical);
  out.compute_ns = static_cast<double>(split[0]) / 1000.0;
  double accounted = out.compute_ns;
  for (size_t k = 0; k < kCommKinds; ++k) {
    out.exposed_ns[k] = static_cast<double>(split[1 + k]) / 1000.0;
    accounted += out.exposed_ns[k];
  }
  out.bubble_ns = std::max(0.0, out.end_ns - accounted);
  if (w.dlrm) out.stage_compute_ns.assign(1, out.compute_ns);
  return out;
}

PointResult base_result(const SweepSpec& spec, const SweepPoint& point) {
  PointResult r;
  r.id = point.id;
  r.cost =
      point.reason.empty() || point.cluster.accelerators > 0 ? point_cost(spec, point.cluster) : 0;
  r.dim_utilization.assign(spec.network.size(), 0);
  r.offloaded = "none";
  return r;
}

PointResult finish(const SweepSpec& spec, const SweepPoint& point, const MemoryPlan& memory,
                   const SimOutcome& sim) {
  PointResult r = base_result(spec, point);
  r.need_bytes = memory.need;
  if (!sim.error.empty()) {
    r.status = PointStatus::kFailed;
    r.reason = sim.error;
    return r;
  }
  r.compute_ns = sim.compute_ns;
  r.exposed_ns = sim.exposed_ns;
  r.bubble_ns = sim.bubble_ns;
  r.dim_utilization = sim.dim_utilization;
  r.events = sim.events;
  // The fastest feasible offload set (a fixed choice has one).
  const ClusterPoint& c = point.cluster;
  double best = INFINITY;
  uint32_t chosen = memory.feasible.front();
  for (uint32_t set : memory.feasible) {
    double worst = 0;
    if (set != 0) {
      const std::vector<StageOffload>& stages = memory.by_set.at(set);
      for (size_t s = 0; s < stages.size(); ++s) {
        const double compute = sim.stage_compute_ns[std::min(s, sim.stage_compute_ns.size() - 1)];
        worst = std::max(worst, offload_time_ns(stages[s], compute, c.expansion_gbps,
                                                c.expansion_latency_ns, spec.expansion_shared_by));
      }
    }
    if (worst < best) {
      best = worst;
      chosen = set;
    }
  }
  r.offload_ns = best;
  r.offloaded = offload_set_name(chosen);
  for (const StageOffload& s : memory.by_set.at(chosen)) {
    r.hbm_bytes = std::max(r.hbm_bytes, s.hbm);
    r.expansion_bytes = std::max(r.expansion_bytes, s.tier);
  }
  r.iteration_ns = sim.end_ns + r.offload_ns;
  r.throughput =
      r.iteration_ns > 0 ? static_cast<double>(spec.global_batch) / (r.iteration_ns * 1e-9) : 0;
  return r;
}

}  // namespace

SplitNetwork split_network(const std::vector<DimensionPoint>& network,
                           const std::vector<uint64_t>& boundaries) {
  SplitNetwork out;
  uint64_t stride = 1;
  for (size_t d = 0; d < network.size(); ++d) {
    const DimensionPoint& dim = network[d];
    std::vector<uint64_t> cuts;  // inside the dimension, as coordinate counts, ascending
    if (dim.topology != "Ring") {
      for (uint64_t b : boundaries) {
        if (b <= stride || b >= stride * dim.size || b % stride != 0) continue;
        const uint64_t cut = b / stride;
        if (dim.size % cut != 0) continue;
        // Parts must nest: a new cut lies above the last and is a multiple of it.
        if (!cuts.empty() && (cut <= cuts.back() || cut % cuts.back() != 0)) continue;
        cuts.push_back(cut);
      }
    }
    uint64_t below = 1;
    cuts.push_back(dim.size);
    for (uint64_t cut : cuts) {
      DimensionPoint part = dim;
      part.size = static_cast<uint32_t>(cut / below);
      out.dims.push_back(part);
      out.original.push_back(d);
      below = cut;
    }
    stride *= dim.size;
  }
  return out;
}

std::string_view point_status_name(PointStatus status) {
  switch (status) {
    case PointStatus::kOk:
      return "ok";
    case PointStatus::kRejected:
      return "rejected";
    case PointStatus::kFailed:
      return "failed";
  }
  return "?";
}

std::string_view comm_kind_name(CommKind kind) {
  static constexpr std::string_view kNames[] = {"tp", "cp", "ep", "pp", "dp"};
  return kNames[static_cast<size_t>(kind)];
}

std::optional<PointResult> precheck_point(const SweepSpec& spec, const SweepPoint& point) {
  PointResult r = base_result(spec, point);
  r.status = PointStatus::kRejected;
  if (!point.reason.empty()) {
    r.reason = point.reason;
    return r;
  }
  if (spec.budget > 0 && r.cost > spec.budget) {
    r.reason = fmt::format("cost ${:.6g} exceeds the budget of ${:.6g}", r.cost, spec.budget);
    return r;
  }
  const MemoryPlan memory = plan_memory(spec, point);
  r.need_bytes = memory.need;
  if (memory.feasible.empty()) {
    r.reason = memory.reason;
    return r;
  }
  return std::nullopt;
}

std::string workload_key(const SweepSpec& spec, const SweepPoint& point) {
  const PlanPoint& p = point.plan;
  if (spec.workload == SweepWorkload::kDlrm) {
    return fmt::format("dlrm n{} {}", point.cluster.accelerators, p.sharding);
  }
  return fmt::format("llm n{} tp{} cp{} pp{} dp{} ep{} b{} sp{} z{} r{} {} v{}",
                     point.cluster.accelerators, p.tp, p.cp, p.pp, p.dp, p.ep, p.micro_batch,
                     p.sp ? 1 : 0, p.zero, p.recompute ? 1 : 0, p.schedule, p.virtual_stages);
}

std::vector<PointResult> evaluate_unit(const SweepSpec& spec,
                                       const std::vector<const SweepPoint*>& points,
                                       size_t threads) {
  std::vector<PointResult> results;
  if (points.empty()) return results;
  Expected<Workload> workload = build_workload(spec, *points.front(), threads);
  std::map<std::string, SimOutcome> simulated;
  for (const SweepPoint* point : points) {
    const MemoryPlan memory = plan_memory(spec, *point);
    SimOutcome failed;
    const SimOutcome* outcome = &failed;
    if (!workload) {
      failed.error = workload.error().message();
    } else {
      const std::string key = simulation_key(spec, point->cluster);
      auto it = simulated.find(key);
      if (it == simulated.end()) {
        it = simulated.emplace(key, simulate_point(spec, *workload, point->cluster)).first;
      }
      outcome = &it->second;
    }
    results.push_back(finish(spec, *point, memory, *outcome));
  }
  return results;
}

PointResult evaluate_point(const SweepSpec& spec, const SweepPoint& point, size_t threads) {
  if (std::optional<PointResult> decided = precheck_point(spec, point)) return *decided;
  return evaluate_unit(spec, {&point}, threads).front();
}

}  // namespace orrery::design
