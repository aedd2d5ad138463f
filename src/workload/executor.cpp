#include "workload/executor.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <unordered_map>

#include "core/checked.h"
#include "core/counter_random.h"
#include "core/units.h"
#include "system/collective.h"

namespace orrery::workload {

namespace {

using chakra::NodeIndex;
using chakra::TraceGraph;

enum EventKind : uint16_t { kWorkDone = 1 };

constexpr uint8_t kNoActivity = 7;
constexpr uint8_t kSlotUnknown = 7;
constexpr uint8_t kPending = 0;
constexpr uint8_t kInFlight = 1;
constexpr uint8_t kDone = 2;
constexpr int64_t kTimeUnknown = INT64_MIN;

uint64_t pack(Rank rank, NodeIndex node) { return uint64_t{rank} << 32 | node; }

// Replayed time: duration_micros in ns, a zero duration counting as 1 ns (as ASTRA-sim does).
SimTime replay_time(const TraceGraph& graph, NodeIndex node) {
  const uint64_t micros = graph.duration_micros(node);
  if (micros == 0) return SimTime::from_ns(1);
  // Validation bounds durations (kMaxDurationMicros); beyond int64 the conversion saturates.
  return SimTime::from_us(micros > uint64_t{INT64_MAX} ? INT64_MAX : static_cast<int64_t>(micros));
}

// "<file>: rank r node n", as messages built with Error::with_context read.
std::string node_place(const TraceGraph& graph, Rank rank, NodeIndex node) {
  if (graph.source().empty()) return fmt::format("rank {} node {}", rank, graph.id(node));
  return fmt::format("{}: rank {} node {}", graph.source(), rank, graph.id(node));
}

}  // namespace

SimTime roofline_time(uint64_t flops, uint64_t bytes, double peak_tflops, double mem_bw) {
  // Roofline: performance = min(peak, memory bandwidth x intensity), time = FLOPs / performance.
  if (bytes == 0) return SimTime::zero();
  const double intensity = static_cast<double>(flops) / static_cast<double>(bytes);
  const double perf = std::min(mem_bw * 1e9 * intensity, peak_tflops * 1e12);
  const double ns = std::floor(static_cast<double>(flops) / perf * 1e9);
  // Saturates instead of the undefined cast of an out-of-range double: a saturated time passes
  // the run's time limit and is reported there.
  return SimTime::from_ns(saturating_trunc_i64(ns));
}

std::string_view activity_name(Activity activity) {
  switch (activity) {
    case Activity::kCompute:
      return "compute";
    case Activity::kCpu:
      return "cpu";
    case Activity::kCollective:
      return "collective";
    case Activity::kSend:
      return "send";
    case Activity::kRecv:
      return "recv";
    case Activity::kMemory:
      return "memory";
  }
  return "unknown";
}

WorkloadExecutor::Keys::Keys(const TraceGraph& graph)
    : is_cpu_op(graph.key("is_cpu_op")),
      num_ops(graph.key("num_ops")),
      tensor_size(graph.key("tensor_size")),
      comm_type(graph.key("comm_type")),
      comm_size(graph.key("comm_size")),
      pg_name(graph.key("pg_name")),
      involved_dim(graph.key("involved_dim")),
      comm_priority(graph.key("comm_priority")),
      comm_dst(graph.key("comm_dst")),
      comm_src(graph.key("comm_src")),
      comm_tag(graph.key("comm_tag")),
      gemm_m(graph.key("gemm_m")),
      gemm_n(graph.key("gemm_n")),
      gemm_k(graph.key("gemm_k")),
      gemm_batch(graph.key("gemm_batch")),
      slots(graph.size(), kSlotUnknown),
      compute_ps(graph.size(), kTimeUnknown) {}

WorkloadExecutor::WorkloadExecutor(EventEngine& engine, std::vector<const TraceGraph*> graphs,
                                   std::map<std::string, uint32_t> groups, ExecutorOptions options)
    : engine_(engine),
      groups_(std::move(groups)),
      options_(std::move(options)),
      remote_memory_(options_.memory, static_cast<uint32_t>(graphs.size())) {
  id_ = engine_.register_handler(*this);
  perturbed_ = options_.noise_sigma > 0 ||
               std::any_of(options_.compute_factor.begin(), options_.compute_factor.end(),
                           [](double factor) { return factor != 1.0; });
  profiles_.push_back({options_.roofline, options_.peak_perf_tflops, options_.local_mem_bw,
                       options_.compute_model});
  profiles_.insert(profiles_.end(), options_.profiles.begin(), options_.profiles.end());
  comm_slows_ = !options_.replay_only &&
                std::any_of(profiles_.begin(), profiles_.end(), [](const ComputeProfile& p) {
                  return p.roofline && p.compute_model && p.compute_model->comm_sms > 0;
                });
  ranks_.resize(graphs.size());
  // Ranks whose graphs share their structure (the same graph, or graphs derived from one another:
  // chakra/trace_set_loader.h) share dependency edges, and with their compute profile resolved
  // attribute names and node times.
  std::unordered_map<const void*, std::shared_ptr<const chakra::DependencyGraph>> shared_deps;
  std::map<std::pair<const void*, uint16_t>, Keys*> shared_keys;
  for (Rank rank = 0; rank < graphs.size(); ++rank) {
    RankState& state = ranks_[rank];
    state.graph = graphs[rank];
    const uint16_t profile = rank < options_.profile_of.size() ? options_.profile_of[rank] : 0;
    assert(profile < profiles_.size() && "workload executor: a rank's profile is not given");
    state.profile = &profiles_[profile];
    auto [deps, new_deps] = shared_deps.try_emplace(state.graph->structure());
    if (new_deps) {
      deps->second = std::make_shared<const chakra::DependencyGraph>(
          chakra::DependencyGraph::build(*state.graph, options_.dependencies));
    }
    auto [keys, new_keys] = shared_keys.try_emplace({state.graph->structure(), profile});
    if (new_keys) {
      keys_.push_back(std::make_unique<Keys>(*state.graph));
      keys->second = keys_.back().get();
    }
    state.deps = deps->second;
    state.keys = keys->second;
    state.tracker = std::make_unique<chakra::DependencyTracker>(*state.graph, *state.deps);
    state.flags.assign(state.graph->size(), NodeFlags{kPending, kSlotUnknown, kNoActivity});
    state.result.rank = rank;
    state.result.nodes = state.graph->size();
  }
}

WorkloadExecutor::~WorkloadExecutor() { engine_.unregister_handler(id_); }

void WorkloadExecutor::start() {
  assert(system_ != nullptr && "workload executor: start before bind");
  for (Rank rank = 0; rank < ranks_.size() && !failure_; ++rank) {
    if (ranks_[rank].result.nodes == 0) {
      ranks_[rank].result.finished = true;
      ++finished_ranks_;
      continue;
    }
    pump(rank);
  }
}

void WorkloadExecutor::fail(Error error) {
  if (!failure_) failure_ = std::move(error);
  engine_.stop();
}

// Time accounting: called before any change of what runs on a rank.
void WorkloadExecutor::account(RankState& state) {
  const SimTime now = engine_.now();
  const SimTime elapsed = now - state.last_change;
  state.last_change = now;
  if (elapsed == SimTime::zero()) return;
  auto active = [&state](Activity activity) {
    return state.active[static_cast<size_t>(activity)] > 0;
  };
  const bool computing = active(Activity::kCompute) || active(Activity::kCpu);
  const bool communicating =
      active(Activity::kCollective) || active(Activity::kSend) || active(Activity::kRecv);
  if (communicating) {
    state.result.comm_active += elapsed;
    if (!computing) state.result.comm_exposed += elapsed;
  }
  if (computing || communicating || active(Activity::kMemory)) state.result.busy += elapsed;
}

bool WorkloadExecutor::communicating(const RankState& state) {
  return state.active[static_cast<size_t>(Activity::kCollective)] +
             state.active[static_cast<size_t>(Activity::kSend)] +
             state.active[static_cast<size_t>(Activity::kRecv)] >
         0;
}

void WorkloadExecutor::retime_kernel(RankState& state) {
  RankState::Kernel& k = state.kernel;
  const SimTime now = engine_.now();
  const SimTime rate = k.slowed ? k.slow : k.fast;
  if (rate.ps() > 0) {
    k.left -= static_cast<double>((now - k.since).ps()) / static_cast<double>(rate.ps());
  }
  k.left = std::clamp(k.left, 0.0, 1.0);
  k.slowed = !k.slowed;
  k.since = now;
  const SimTime next = k.slowed ? k.slow : k.fast;
  const SimTime rest =
      SimTime::from_ps(saturating_round_i64(k.left * static_cast<double>(next.ps())));
  k.end = now + rest;
  // The earlier end event stays queued; handle_event drops it (its time is not k.end).
  (void)engine_.schedule_after(rest, id_, kWorkDone, pack(state.result.rank, k.node));
}

void WorkloadExecutor::begin(RankState& state, NodeIndex node, Activity activity) {
  account(state);
  const bool was_communicating = state.kernel.tracked && communicating(state);
  ++state.active[static_cast<size_t>(activity)];
  if (state.kernel.tracked && was_communicating != communicating(state)) retime_kernel(state);
  state.flags[node].activity = static_cast<uint8_t>(activity) & 7u;
  state.started.emplace_back(node, engine_.now());
  if (!observers_.empty()) {
    const ActivityRecord record{state.result.rank, node, activity, engine_.now(), engine_.now()};
    for (RunObserver* observer : observers_) observer->on_activity_start(record, *state.graph);
  }
}

void WorkloadExecutor::end(Rank rank, NodeIndex node) {
  RankState& state = ranks_[rank];
  if (state.flags[node].activity == kNoActivity) return;
  const auto activity = static_cast<Activity>(state.flags[node].activity);
  account(state);
  const bool was_communicating = state.kernel.tracked && communicating(state);
  --state.active[static_cast<size_t>(activity)];
  if (state.kernel.tracked && was_communicating != communicating(state)) retime_kernel(state);
  state.flags[node].activity = kNoActivity;
  auto found = std::find_if(state.started.begin(), state.started.end(),
                            [node](const auto& entry) { return entry.first == node; });
  assert(found != state.started.end());
  const SimTime started = found->second;
  *found = state.started.back();
  state.started.pop_back();
  if (!observers_.empty()) {
    const ActivityRecord record{rank, node, activity, started, engine_.now()};
    for (RunObserver* observer : observers_) observer->on_activity(record, *state.graph);
  }
}

WorkloadExecutor::Slot WorkloadExecutor::slot_of(RankState& state, NodeIndex node) const {
  NodeFlags& flags = state.flags[node];
  if (flags.slot == kSlotUnknown) {
    if (state.graph->patched(node)) {
      flags.slot = static_cast<uint8_t>(compute_slot(state, node)) & 7u;
    } else {
      uint8_t& shared = state.keys->slots[node];
      if (shared == kSlotUnknown) shared = static_cast<uint8_t>(compute_slot(state, node));
      flags.slot = shared & 7u;
    }
  }
  return static_cast<Slot>(flags.slot);
}

WorkloadExecutor::Slot WorkloadExecutor::compute_slot(const RankState& state,
                                                      NodeIndex node) const {
  const TraceGraph& graph = *state.graph;
  Expected<bool> cpu_flag = graph.get_bool_or(node, state.keys->is_cpu_op, false);
  const bool cpu = cpu_flag && *cpu_flag;
  switch (graph.type(node)) {
    case ChakraProtoMsg::COMP_NODE: {
      // ASTRA-sim skips compute with neither a recorded time nor FLOPs: it takes no slot and no
      // time.
      Expected<std::optional<uint64_t>> flops = graph.get_uint(node, state.keys->num_ops);
      const bool no_flops = !flops || !flops->has_value() || **flops == 0;
      if (graph.duration_micros(node) == 0 && no_flops) return Slot::kNone;
      return cpu ? Slot::kCpu : Slot::kCompute;
    }
    case ChakraProtoMsg::COMM_COLL_NODE:
    case ChakraProtoMsg::COMM_SEND_NODE:
      return cpu ? Slot::kCpu : Slot::kComm;
    default:
      return Slot::kNone;
  }
}

Expected<SimTime> WorkloadExecutor::compute_time(const RankState& state, NodeIndex node, bool cpu,
                                                 bool communicating) const {
  // `cpu` follows from the node's slot, so the node alone decides the time.
  const bool shared = !state.graph->patched(node);
  std::vector<int64_t>& cache =
      communicating ? state.keys->communicating_ps : state.keys->compute_ps;
  if (shared && cache.empty()) cache.assign(state.graph->size(), kTimeUnknown);
  if (shared && cache[node] != kTimeUnknown) return SimTime::from_ps(cache[node]);
  std::optional<sys::ComputeModel> beside;
  if (communicating && state.profile->compute_model)
    beside = sys::while_communicating(*state.profile->compute_model);
  Expected<SimTime> time = unscaled_compute_time(state, node, cpu, beside ? &*beside : nullptr);
  if (time && options_.compute_scale != 1.0) {
    time = SimTime::from_ps(
        saturating_round_i64(static_cast<double>(time->ps()) * options_.compute_scale));
  }
  if (time && shared) cache[node] = time->ps();
  return time;
}

SimTime WorkloadExecutor::perturbed(Rank rank, NodeIndex node, SimTime time) const {
  double factor = rank < options_.compute_factor.size() ? options_.compute_factor[rank] : 1.0;
  if (options_.noise_sigma > 0) {
    const double sigma = options_.noise_sigma;
    factor *=
        std::exp(sigma * normal_draw(options_.noise_seed, rank, ranks_[rank].graph->id(node)) -
                 0.5 * sigma * sigma);
  }
  if (factor == 1.0) return time;
  return SimTime::from_ps(saturating_round_i64(static_cast<double>(time.ps()) * factor));
}

Expected<SimTime> WorkloadExecutor::unscaled_compute_time(const RankState& state, NodeIndex node,
                                                          bool cpu,
                                                          const sys::ComputeModel* model) const {
  const TraceGraph& graph = *state.graph;
  const ComputeProfile& profile = *state.profile;
  if (cpu || options_.replay_only || !profile.roofline) return replay_time(graph, node);
  Expected<std::optional<uint64_t>> flops = graph.get_uint(node, state.keys->num_ops);
  if (!flops) return flops.error();
  Expected<std::optional<uint64_t>> bytes = graph.get_uint(node, state.keys->tensor_size);
  if (!bytes) return bytes.error();
  if (!flops->has_value() || **flops == 0) return replay_time(graph, node);
  if (profile.compute_model) {
    // A GEMM when the node carries its shape (gen llm, replay --emit-chakra); else a kernel
    // timed by its bytes and FLOPs.
    sys::GemmShape shape;
    const chakra::AttributeKey* dims[4] = {&state.keys->gemm_m, &state.keys->gemm_n,
                                           &state.keys->gemm_k, &state.keys->gemm_batch};
    uint64_t* out[4] = {&shape.m, &shape.n, &shape.k, &shape.batch};
    for (size_t idx = 0; idx < 4; ++idx) {
      Expected<std::optional<uint64_t>> value = graph.get_uint(node, *dims[idx]);
      if (!value) return value.error();
      if (value->has_value()) *out[idx] = **value;
    }
    return sys::compute_model_time(model != nullptr ? *model : *profile.compute_model, **flops,
                                   bytes->value_or(0), shape.valid() ? &shape : nullptr);
  }
  return roofline_time(**flops, bytes->value_or(0), profile.peak_perf_tflops, profile.local_mem_bw);
}

// Issues what can issue on `rank`: ready nodes in ascending id order, each when its slot is free.
// Work that takes no time completes on the spot and may ready more nodes, hence the loop.
void WorkloadExecutor::pump(Rank rank) {
  RankState& state = ranks_[rank];
  // One scratch list for every pump: a pump never runs inside another (issuing schedules events
  // and completes only work that takes no time, which loops here rather than recursing).
  std::vector<std::pair<uint64_t, NodeIndex>> candidates;
  candidates.swap(candidates_);
  while (!failure_) {
    candidates.clear();
    while (state.tracker->has_ready()) {
      const NodeIndex node = state.tracker->pop_ready();
      candidates.emplace_back(state.graph->id(node), node);
    }
    for (int slot = 0; slot < 3; ++slot) {
      if (!state.busy[slot] && !state.waiting[slot].empty()) {
        candidates.push_back(state.waiting[slot].top());
        state.waiting[slot].pop();
      }
    }
    if (candidates.empty()) break;
    std::sort(candidates.begin(), candidates.end());
    for (const auto& [id, node] : candidates) {
      const Slot slot = slot_of(state, node);
      if (slot != Slot::kNone) {
        const auto index = static_cast<size_t>(slot);
        if (state.busy[index]) {
          state.waiting[index].emplace(id, node);
          continue;
        }
        state.busy[index] = true;
      }
      if (!issue(rank, node, slot)) break;
    }
    // Every slot with waiting nodes is busy now; only work that completed on the spot can have
    // readied more nodes.
    if (failure_ || !state.tracker->has_ready()) break;
  }
  candidates.clear();
  candidates.swap(candidates_);
}

bool WorkloadExecutor::issue(Rank rank, NodeIndex node, Slot slot) {
  RankState& state = ranks_[rank];
  const TraceGraph& graph = *state.graph;
  state.flags[node].issued = kInFlight;
  const uint64_t cookie = node;
  auto where = [&] { return node_place(graph, rank, node); };
  auto finish_after = [&](SimTime time) {
    (void)engine_.schedule_after(time, id_, kWorkDone, pack(rank, node));
  };

  const int32_t type = graph.type(node);
  const bool cpu = slot == Slot::kCpu;
  if (type == ChakraProtoMsg::COMP_NODE ||
      (type == ChakraProtoMsg::COMM_COLL_NODE && cpu &&
       !graph.find_attribute(node, state.keys->comm_type.id))) {
    if (slot == Slot::kNone) {  // no recorded time and no FLOPs: nothing to run
      complete(rank, node);
      return !failure_;
    }
    Expected<SimTime> time = compute_time(state, node, cpu);
    if (!time) {
      fail(time.error().with_context(where()));
      return false;
    }
    if (perturbed_) time = perturbed(rank, node, *time);
    begin(state, node, cpu ? Activity::kCpu : Activity::kCompute);
    if (cpu) {
      state.result.cpu_compute += *time;
      finish_after(*time);
      return true;
    }
    if (comm_slows_) {
      Expected<SimTime> slow = compute_time(state, node, false, true);
      if (!slow) {
        fail(slow.error().with_context(where()));
        return false;
      }
      if (perturbed_) slow = perturbed(rank, node, *slow);
      if (*slow != *time) {
        RankState::Kernel& k = state.kernel;
        k = {node,  true, communicating(state), 1.0, engine_.now(), engine_.now(), {}, *time,
             *slow, {}};
        k.counted = k.slowed ? k.slow : k.fast;
        k.end = engine_.now() + k.counted;
        state.result.gpu_compute += k.counted;
        finish_after(k.counted);
        return true;
      }
    }
    state.result.gpu_compute += *time;
    finish_after(*time);
    return true;
  }
  if (options_.replay_only &&
      (type == ChakraProtoMsg::COMM_COLL_NODE || type == ChakraProtoMsg::COMM_SEND_NODE ||
       type == ChakraProtoMsg::COMM_RECV_NODE)) {
    begin(state, node,
          type == ChakraProtoMsg::COMM_COLL_NODE   ? Activity::kCollective
          : type == ChakraProtoMsg::COMM_SEND_NODE ? Activity::kSend
                                                   : Activity::kRecv);
    finish_after(replay_time(graph, node));
    return true;
  }
  switch (type) {
    case ChakraProtoMsg::COMM_COLL_NODE: {
      const Keys& keys = *state.keys;
      Expected<std::optional<int64_t>> comm_type = graph.get_int(node, keys.comm_type);
      Expected<std::optional<uint64_t>> bytes = graph.get_uint(node, keys.comm_size);
      if (!comm_type || !bytes) {
        fail((!comm_type ? comm_type.error() : bytes.error()).with_context(where()));
        return false;
      }
      const std::optional<sys::CollectiveType> collective =
          comm_type->has_value() ? sys::collective_from_chakra(**comm_type) : std::nullopt;
      if (!collective) {
        fail(Error::make(ErrorKind::kTrace, "{}: COMM_COLL_NODE without a valid comm_type",
                         where()));
        return false;
      }
      Expected<uint32_t> group = group_of(state, node);
      if (!group) {
        fail(group.error());
        return false;
      }
      Expected<uint64_t> scaled = scaled_bytes(bytes->value_or(0));
      if (!scaled) {
        fail(scaled.error().with_context(where()));
        return false;
      }
      sys::CollectiveRequest request;
      request.type = *collective;
      request.bytes = *scaled;
      request.group = *group;
      request.cookie = cookie;
      request.node_id = graph.id(node);
      Expected<std::optional<std::vector<bool>>> dims =
          graph.get_bool_list(node, keys.involved_dim);
      if (dims && dims->has_value()) {
        uint32_t mask = 0;
        for (size_t dim = 0; dim < (*dims)->size() && dim < 32; ++dim) {
          if ((**dims)[dim]) mask |= 1u << dim;
        }
        // Dimensions beyond the list are involved, as ASTRA-sim's default [true, true, ...] says.
        for (size_t dim = (*dims)->size(); dim < 32; ++dim) mask |= 1u << dim;
        request.involved_dims = mask;
      }
      Expected<int64_t> priority = graph.get_int_or(node, keys.comm_priority, 0);
      request.priority = priority ? *priority : 0;
      begin(state, node, Activity::kCollective);
      ++state.result.collectives;
      if (Status status = system_->issue_collective(rank, request); !status) {
        fail(status.error().with_context(graph.source()));
        return false;
      }
      return true;
    }
    case ChakraProtoMsg::COMM_SEND_NODE:
    case ChakraProtoMsg::COMM_RECV_NODE: {
      const bool send = type == ChakraProtoMsg::COMM_SEND_NODE;
      const Keys& keys = *state.keys;
      Expected<std::optional<uint64_t>> peer =
          graph.get_uint(node, send ? keys.comm_dst : keys.comm_src);
      Expected<std::optional<uint64_t>> bytes = graph.get_uint(node, keys.comm_size);
      Expected<int64_t> tag = graph.get_int_or(node, keys.comm_tag, 0);
      if (!peer || !bytes || !tag) {
        fail((!peer ? peer.error() : !bytes ? bytes.error() : tag.error()).with_context(where()));
        return false;
      }
      if (!peer->has_value() || **peer >= ranks_.size()) {
        fail(Error::make(ErrorKind::kTrace, "{}: {} {} is not a rank of this job ({} ranks)",
                         where(), send ? "comm_dst" : "comm_src",
                         peer->has_value() ? std::to_string(**peer) : std::string("(missing)"),
                         ranks_.size()));
        return false;
      }
      Expected<uint64_t> scaled = scaled_bytes(bytes->value_or(0));
      if (!scaled) {
        fail(scaled.error().with_context(where()));
        return false;
      }
      begin(state, node, send ? Activity::kSend : Activity::kRecv);
      if (send) {
        ++state.result.sends;
        system_->issue_send(rank, static_cast<Rank>(**peer), *tag, *scaled, cookie, graph.id(node));
      } else {
        ++state.result.recvs;
        system_->issue_recv(rank, static_cast<Rank>(**peer), *tag, *scaled, cookie, graph.id(node));
      }
      return true;
    }
    case ChakraProtoMsg::MEM_LOAD_NODE:
    case ChakraProtoMsg::MEM_STORE_NODE: {
      if (options_.replay_only) {  // ASTRA-sim replays memory nodes too, remote memory unused
        const SimTime time = replay_time(graph, node);
        state.result.memory += time;
        begin(state, node, Activity::kMemory);
        finish_after(time);
        return true;
      }
      Expected<std::optional<uint64_t>> bytes = graph.get_uint(node, state.keys->tensor_size);
      if (!bytes) {
        fail(bytes.error().with_context(where()));
        return false;
      }
      Expected<SimTime> done = remote_memory_.access(rank, bytes->value_or(0), engine_.now());
      if (!done) {
        fail(done.error().with_context(where()));
        return false;
      }
      const SimTime time = *done - engine_.now();  // waiting for the FIFO included
      state.result.memory += time;
      begin(state, node, Activity::kMemory);
      finish_after(time);
      return true;
    }
    default:
      // METADATA and (in lenient mode) INVALID nodes: nothing to run.
      complete(rank, node);
      return !failure_;
  }
}

Expected<uint32_t> WorkloadExecutor::group_of(RankState& state, NodeIndex node) {
  const TraceGraph& graph = *state.graph;
  auto where = [&] { return node_place(graph, state.result.rank, node); };
  const chakra::Attribute* attribute = graph.find_attribute(node, state.keys->pg_name.id);
  const bool is_string =
      attribute != nullptr && (attribute->value_case == chakra::ValueCase::kStringVal ||
                               attribute->value_case == chakra::ValueCase::kBytesVal);
  // Resolved names are cached by their string id in this rank's graph.
  const chakra::StringId id = is_string ? attribute->str : chakra::kNoString;
  if (attribute == nullptr || is_string) {
    for (const auto& [cached, group] : state.group_cache) {
      if (cached == id) return group;
    }
  }
  Expected<std::optional<std::string_view>> pg = graph.get_string(node, state.keys->pg_name);
  if (!pg) return pg.error().with_context(where());
  const std::string pg_name(pg->value_or(""));
  auto group = groups_.find(pg_name);
  if (group == groups_.end()) {
    std::vector<std::string> known;
    for (const auto& [name, group_id] : groups_) known.push_back(name.empty() ? "\"\"" : name);
    return Error::make(ErrorKind::kTrace,
                       "{}: pg_name '{}' names no communicator group (known: {}); give the groups "
                       "with --comm-group-configuration",
                       where(), pg_name, fmt::join(known, ", "));
  }
  state.group_cache.emplace_back(id, group->second);
  return group->second;
}

Expected<uint64_t> WorkloadExecutor::scaled_bytes(uint64_t bytes) const {
  const uint64_t scaled =
      options_.comm_scale == 1.0
          ? bytes
          : saturating_round_u64(static_cast<double>(bytes) * options_.comm_scale);
  if (scaled > kMaxBytes) {
    return Error::make(
        ErrorKind::kInvalidArgument,
        "comm_size {}{} is more than 2^50 bytes (1 PiB), the largest size orrery simulates "
        "(docs/numbers.md)",
        format_count(bytes),
        options_.comm_scale == 1.0
            ? std::string()
            : fmt::format(" x --comm-scale {}", format_number(options_.comm_scale)));
  }
  return scaled;
}

void WorkloadExecutor::complete(Rank rank, NodeIndex node) {
  RankState& state = ranks_[rank];
  assert(state.flags[node].issued == kInFlight);
  state.flags[node].issued = kDone;
  const Slot slot = slot_of(state, node);
  if (slot != Slot::kNone) state.busy[static_cast<size_t>(slot)] = false;
  state.tracker->complete(node);
  ++state.result.completed;
  if (state.result.completed == state.result.nodes) {
    account(state);
    state.result.finished = true;
    state.result.finish = engine_.now();
    ++finished_ranks_;
  }
}

void WorkloadExecutor::handle_event(const Event& event) {
  if (failure_) return;
  const auto rank = static_cast<Rank>(event.arg >> 32);
  const auto node = static_cast<NodeIndex>(event.arg & 0xffffffffu);
  RankState& state = ranks_[rank];
  if (state.kernel.tracked && state.kernel.node == node) {
    // A retimed kernel's earlier end is dropped; at its end, gpu_compute gets what it took.
    if (engine_.now() != state.kernel.end) return;
    state.kernel.tracked = false;
    state.result.gpu_compute += (engine_.now() - state.kernel.start) - state.kernel.counted;
  } else if (state.flags[node].issued != kInFlight) {
    return;  // a retimed kernel's later end, after it completed at the same instant
  }
  end(rank, node);
  complete(rank, node);
  pump(rank);
}

void WorkloadExecutor::on_collective_done(Rank rank, uint64_t cookie) {
  const auto node = static_cast<NodeIndex>(cookie);
  end(rank, node);
  complete(rank, node);
  pump(rank);
}

void WorkloadExecutor::on_send_done(Rank rank, uint64_t cookie) {
  on_collective_done(rank, cookie);
}

void WorkloadExecutor::on_recv_done(Rank rank, uint64_t cookie) {
  on_collective_done(rank, cookie);
}

std::vector<RankResult> WorkloadExecutor::results() const {
  std::vector<RankResult> out;
  out.reserve(ranks_.size());
  for (const RankState& state : ranks_) out.push_back(state.result);
  return out;
}

std::vector<std::string> WorkloadExecutor::describe_stuck(size_t limit) const {
  std::vector<std::string> lines;
  for (const RankState& state : ranks_) {
    if (state.result.finished) continue;
    if (lines.size() >= limit) {
      lines.push_back("...");
      break;
    }
    const TraceGraph& graph = *state.graph;
    std::vector<std::string> in_flight;
    std::vector<uint64_t> blocked;
    uint64_t never_ready = 0;
    for (NodeIndex node = 0; node < graph.size(); ++node) {
      if (state.flags[node].issued == kInFlight) {
        std::string what = chakra::node_type_name(graph.type(node));
        if (graph.type(node) == ChakraProtoMsg::COMM_COLL_NODE) {
          Expected<std::optional<int64_t>> comm_type = graph.get_int(node, "comm_type");
          if (comm_type && comm_type->has_value()) {
            if (auto collective = sys::collective_from_chakra(**comm_type)) {
              what = std::string(sys::collective_name(*collective));
            }
          }
        } else if (graph.type(node) == ChakraProtoMsg::COMM_RECV_NODE) {
          Expected<std::optional<uint64_t>> src = graph.get_uint(node, "comm_src");
          if (src && src->has_value()) what = fmt::format("receive from rank {}", **src);
        } else if (graph.type(node) == ChakraProtoMsg::COMM_SEND_NODE) {
          Expected<std::optional<uint64_t>> dst = graph.get_uint(node, "comm_dst");
          if (dst && dst->has_value()) what = fmt::format("send to rank {}", **dst);
        }
        if (in_flight.size() < 4)
          in_flight.push_back(fmt::format("node {} ({})", graph.id(node), what));
      } else if (state.flags[node].issued == kPending) {
        if (state.tracker->pending_parents(node) == 0) {
          blocked.push_back(graph.id(node));
        } else {
          ++never_ready;
        }
      }
    }
    lines.push_back(fmt::format(
        "rank {}: {} of {} nodes done; waiting on {}{}; {} more node(s) wait for them",
        state.result.rank, format_count(state.result.completed), format_count(state.result.nodes),
        in_flight.empty() ? std::string("nothing in flight")
                          : fmt::format("{}", fmt::join(in_flight, ", ")),
        blocked.empty() ? ""
                        : fmt::format(" (ready but waiting for a slot: {} nodes)", blocked.size()),
        format_count(never_ready)));
  }
  return lines;
}

}  // namespace orrery::workload
