#include "system/collective_engine.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "core/slot_pool.h"

namespace orrery::sys {

namespace {

uint64_t mix(uint64_t value) {
  value ^= value >> 33;
  value *= 0xff51afd7ed558ccdULL;
  value ^= value >> 33;
  value *= 0xc4ceb9fe1a85ec53ULL;
  value ^= value >> 33;
  return value;
}

}  // namespace

size_t CollectiveEngine::SwitchKeyHash::operator()(const SwitchKey& key) const {
  return static_cast<size_t>(mix((uint64_t{key.instance} << 32 | key.chunk) ^
                                 mix(uint64_t{key.phase} << 32 | key.switch_node)));
}

size_t CollectiveEngine::P2pKeyHash::operator()(const P2pKey& key) const {
  return static_cast<size_t>(
      mix((uint64_t{key.src} << 32 | key.dst) ^
          mix(static_cast<uint64_t>(key.tag) ^ (uint64_t{key.scope} << 40))));
}

// ---- construction
// --------------------------------------------------------------------------------

Expected<std::unique_ptr<CollectiveEngine>> CollectiveEngine::create(EventEngine& engine,
                                                                     net::NetworkBackend& network,
                                                                     const SystemConfig& config,
                                                                     EngineOptions options,
                                                                     SystemListener& listener) {
  const uint32_t dims = network.topology().dimension_count();
  if (options.queues_per_dim < 1 || options.queues_per_dim > kMaxQueuesPerDim) {
    return Error::make(ErrorKind::kConfig, "queues per dimension must be 1 to {}, not {}",
                       kMaxQueuesPerDim, options.queues_per_dim);
  }
  auto check = [&](const std::vector<Algorithm>& list, const char* key) -> Status {
    // An absent key is an error only when a collective needs it (see issue_collective).
    // More than one per dimension is refused too, as ASTRA-sim refuses it (its assertion).
    if (!list.empty() && list.size() != dims) {
      return Error::make(ErrorKind::kConfig,
                         "{}: key '{}' lists {} implementation(s) but the network has {} "
                         "dimension(s); give one per dimension",
                         config.path.empty() ? "system configuration" : config.path, key,
                         list.size(), dims);
    }
    return Status::ok();
  };
  for (const auto& [list, key] :
       {std::pair{&config.all_reduce, "all-reduce-implementation"},
        std::pair{&config.all_gather, "all-gather-implementation"},
        std::pair{&config.reduce_scatter, "reduce-scatter-implementation"},
        std::pair{&config.all_to_all, "all-to-all-implementation"}}) {
    if (Status status = check(*list, key); !status) return status.error();
  }
  // In-network collectives need a switch to reduce in.
  const net::Topology& topology = network.topology();
  for (const auto& [list, key] :
       {std::pair{&config.all_reduce, "all-reduce-implementation"},
        std::pair{&config.all_gather, "all-gather-implementation"},
        std::pair{&config.reduce_scatter, "reduce-scatter-implementation"}}) {
    for (uint32_t dim = 0; dim < list->size() && dim < dims; ++dim) {
      if ((*list)[dim].kind == AlgorithmKind::kInSwitch &&
          topology.dimension(dim).kind != net::TopologyKind::kSwitch) {
        return Error::make(ErrorKind::kConfig,
                           "{}: key '{}': dimension {} is a {}; inSwitch needs a Switch dimension",
                           config.path.empty() ? "system configuration" : config.path, key, dim,
                           net::topology_kind_name(topology.dimension(dim).kind));
      }
    }
  }
  if (!config.local_mem_bw_gbps) {
    return Error::make(ErrorKind::kConfig,
                       "{}: key 'local-mem-bw' is required (a reduction costs 3 x bytes / "
                       "local-mem-bw)",
                       config.path.empty() ? "system configuration" : config.path);
  }
  return std::unique_ptr<CollectiveEngine>(
      new CollectiveEngine(engine, network, config, options, listener));
}

CollectiveEngine::CollectiveEngine(EventEngine& engine, net::NetworkBackend& network,
                                   const SystemConfig& config, EngineOptions options,
                                   SystemListener& listener)
    : engine_(engine),
      network_(network),
      topology_(network.topology()),
      config_(config),
      listener_(listener),
      options_(options),
      no_traffic_(network.topology()) {
  id_ = engine_.register_handler(*this);
  network_.set_listener(*this);
  int64_t delay = config.endpoint_delay_ns;
  if (config.endpoint_delay_given) {
    delay = static_cast<int64_t>(static_cast<double>(delay) * options.injection_scale);
  }
  endpoint_delay_ = SimTime::from_ns(delay);
  local_mem_bw_ = *config.local_mem_bw_gbps;
  if (options_.peers) {
    peers_ = options_.peers;
  } else if (options_.mirror) {
    peers_ = make_mirror_peer_model(topology_, options_.rounding, options_.mirror_through_network);
  } else {
    peers_ = make_full_peer_model(topology_);
  }
  queues_per_rank_ = topology_.dimension_count() * options_.queues_per_dim + 1;
  // Only simulated ranks have queues.
  queues_.resize(size_t{peers_->simulated_count()} * queues_per_rank_);
  running_.assign(queues_.size(), 0);

  Group all;
  all.name = "";
  all.ranks.resize(topology_.rank_count());
  for (Rank rank = 0; rank < topology_.rank_count(); ++rank) all.ranks[rank] = rank;
  all.aligned_dims =
      (topology_.dimension_count() >= 32) ? ~0u : ((1u << topology_.dimension_count()) - 1);
  all.issued.assign(topology_.rank_count(), 0);
  for (Rank rank : all.ranks) all.simulated += peers_->simulated(rank) ? 1u : 0u;
  groups_.push_back(std::move(all));
}

CollectiveEngine::~CollectiveEngine() { engine_.unregister_handler(id_); }

uint32_t CollectiveEngine::add_group(std::vector<Rank> ranks, std::string name) {
  Group group;
  group.name = std::move(name);
  group.ranks = std::move(ranks);
  for (uint32_t idx = 0; idx < group.ranks.size(); ++idx)
    group.position.emplace(group.ranks[idx], idx);
  group.issued.assign(group.ranks.size(), 0);
  // A group is aligned when it is every combination of coordinates in some dimensions with the
  // others fixed: then its collectives run hierarchically over exactly those dimensions.
  const uint32_t dims = topology_.dimension_count();
  if (!group.ranks.empty()) {
    const Rank first = group.ranks.front();
    uint32_t mask = 0;
    uint64_t expected = 1;
    for (uint32_t dim = 0; dim < dims; ++dim) {
      for (Rank rank : group.ranks) {
        if (topology_.coordinate(rank, dim) != topology_.coordinate(first, dim)) {
          mask |= 1u << dim;
          expected *= topology_.size(dim);
          break;
        }
      }
    }
    bool aligned = expected == group.ranks.size();
    for (size_t idx = 0; aligned && idx < group.ranks.size(); ++idx) {
      for (uint32_t dim = 0; dim < dims; ++dim) {
        if ((mask & (1u << dim)) == 0 &&
            topology_.coordinate(group.ranks[idx], dim) != topology_.coordinate(first, dim)) {
          aligned = false;
        }
      }
    }
    group.aligned_dims = aligned ? mask : 0;
  }
  for (Rank rank : group.ranks) group.simulated += peers_->simulated(rank) ? 1u : 0u;
  groups_.push_back(std::move(group));
  return static_cast<uint32_t>(groups_.size() - 1);
}

// ---- issuing
// -------------------------------------------------------------------------------------

const std::vector<Algorithm>& CollectiveEngine::implementations(PhaseOp op) const {
  switch (op) {
    case PhaseOp::kAllGather:
      return config_.all_gather;
    case PhaseOp::kReduceScatter:
      return config_.reduce_scatter;
    case PhaseOp::kAllToAll:
      return config_.all_to_all;
    default:
      return config_.all_reduce;
  }
}

void CollectiveEngine::plan_phases(Instance& instance, uint64_t chunk) {
  const Group& group = groups_[instance.group];
  instance.first_phase = static_cast<uint32_t>(phases_.size());
  instance.phase_count = 0;
  if (group.ranks.size() <= 1) return;
  auto push = [&](PhaseOp op, const Algorithm& algorithm, uint32_t dim, uint64_t size,
                  bool anticlockwise) {
    Phase phase;
    phase.op = op;
    phase.anticlockwise = anticlockwise;
    phase.dim = dim;
    phase.window = algorithm.window;
    phase.size = size;
    phase.algorithm = &collective_algorithm(op, algorithm);
    phases_.push_back(phase);
    ++instance.phase_count;
  };
  auto flat = [&](PhaseOp op, const Algorithm& algorithm) {
    push(op, algorithm, kFlat, chunk, false);
  };
  PhaseOp op = PhaseOp::kAllReduce;
  switch (instance.type) {
    case CollectiveType::kAllReduce:
      op = PhaseOp::kAllReduce;
      break;
    case CollectiveType::kReduceScatter:
      op = PhaseOp::kReduceScatter;
      break;
    case CollectiveType::kAllGather:
      op = PhaseOp::kAllGather;
      break;
    case CollectiveType::kAllToAll:
      op = PhaseOp::kAllToAll;
      break;
    case CollectiveType::kBroadcast:
    case CollectiveType::kReduce: {
      // Under nccl (named for all-reduce) broadcast and reduce are NCCL's too.
      Algorithm algorithm;
      if (!config_.all_reduce.empty() && config_.all_reduce.front().kind == AlgorithmKind::kNccl) {
        algorithm = config_.all_reduce.front();
      }
      flat(instance.type == CollectiveType::kBroadcast ? PhaseOp::kBroadcast : PhaseOp::kReduce,
           algorithm);
      return;
    }
    case CollectiveType::kGather:
      flat(PhaseOp::kGather, {});
      return;
    case CollectiveType::kScatter:
      flat(PhaseOp::kScatter, {});
      return;
    case CollectiveType::kBarrier:
      flat(PhaseOp::kBarrier, {});
      return;
  }
  const std::vector<Algorithm>& impls = implementations(op);
  const AlgorithmKind first = impls.front().kind;
  if (first == AlgorithmKind::kNccl) {
    flat(op, impls.front());
    return;
  }
  if (first == AlgorithmKind::kOneRing || first == AlgorithmKind::kOneDirect ||
      first == AlgorithmKind::kOneHalvingDoubling) {
    Algorithm algorithm = impls.front();
    algorithm.kind = first == AlgorithmKind::kOneRing     ? AlgorithmKind::kRing
                     : first == AlgorithmKind::kOneDirect ? AlgorithmKind::kDirect
                                                          : AlgorithmKind::kHalvingDoubling;
    flat(op, algorithm);
    return;
  }
  if (group.aligned_dims == 0) {
    // Like ASTRA-sim, a group that is not a sub-grid of the network runs one ring over its ranks.
    flat(op, Algorithm{AlgorithmKind::kRing, 0});
    return;
  }
  std::vector<uint32_t> dims;
  for (uint32_t dim = 0; dim < topology_.dimension_count(); ++dim) {
    if ((group.aligned_dims & instance.involved_dims & (1u << dim)) != 0 &&
        topology_.size(dim) > 1) {
      dims.push_back(dim);
    }
  }
  if (dims.empty()) return;
  uint64_t size = chunk;
  auto add = [&](PhaseOp phase_op, uint32_t dim, QueueHalf half) {
    // Every phase of an all-reduce (its hierarchical reduce-scatter and all-gather halves too)
    // uses the all-reduce implementation of its dimension, as ASTRA-sim does; the other lists
    // may be absent from the system file then.
    push(phase_op, implementations(op == PhaseOp::kAllReduce ? op : phase_op)[dim], dim, size,
         half == QueueHalf::kLast);
    phases_.back().half = half;
    const uint64_t members = topology_.size(dim);
    switch (phase_op) {
      case PhaseOp::kReduceScatter:
        size /= members;
        break;
      case PhaseOp::kAllGather:
        size *= members;
        break;
      default:
        break;
    }
  };
  if (op == PhaseOp::kAllReduce &&
      config_.collective_optimization == CollectiveOptimization::kLocalBwAware) {
    for (size_t idx = 0; idx + 1 < dims.size(); ++idx) {
      add(PhaseOp::kReduceScatter, dims[idx], QueueHalf::kFirst);
    }
    // The turning point takes the first half too (ASTRA-sim's PR #135: as many queues as the
    // phases beside it).
    add(PhaseOp::kAllReduce, dims.back(), QueueHalf::kFirst);
    for (size_t idx = dims.size() - 1; idx-- > 0;) {
      add(PhaseOp::kAllGather, dims[idx], QueueHalf::kLast);
    }
  } else if (op == PhaseOp::kAllGather) {
    for (size_t idx = dims.size(); idx-- > 0;) add(op, dims[idx], QueueHalf::kAll);
  } else {
    for (uint32_t dim : dims) add(op, dim, QueueHalf::kAll);
  }
}

Status CollectiveEngine::issue_collective(Rank rank, const CollectiveRequest& request) {
  assert(request.group < groups_.size());
  const bool custom = !custom_prefixes(request.type).empty();
  if (!custom) {
    const char* missing = nullptr;
    switch (request.type) {
      case CollectiveType::kAllReduce:
        missing = config_.all_reduce.empty() ? "all-reduce-implementation" : nullptr;
        break;
      case CollectiveType::kAllGather:
        missing = config_.all_gather.empty() ? "all-gather-implementation" : nullptr;
        break;
      case CollectiveType::kReduceScatter:
        missing = config_.reduce_scatter.empty() ? "reduce-scatter-implementation" : nullptr;
        break;
      case CollectiveType::kAllToAll:
        missing = config_.all_to_all.empty() ? "all-to-all-implementation" : nullptr;
        break;
      default:
        break;
    }
    if (missing != nullptr) {
      return Error::make(ErrorKind::kConfig, "{}: no '{}' for the {} of rank {} node {}",
                         config_.path.empty() ? "system configuration" : config_.path, missing,
                         collective_name(request.type), rank, request.node_id);
    }
    // A system file may list doubleBinaryTree for any collective (as ASTRA-sim's parser allows);
    // only an all-reduce can run it.
    const char* key = request.type == CollectiveType::kAllGather ? "all-gather-implementation"
                      : request.type == CollectiveType::kReduceScatter
                          ? "reduce-scatter-implementation"
                      : request.type == CollectiveType::kAllToAll ? "all-to-all-implementation"
                                                                  : nullptr;
    if (key != nullptr) {
      const std::vector<Algorithm>& list =
          request.type == CollectiveType::kAllGather       ? config_.all_gather
          : request.type == CollectiveType::kReduceScatter ? config_.reduce_scatter
                                                           : config_.all_to_all;
      for (size_t dim = 0; dim < list.size(); ++dim) {
        if (list[dim].kind == AlgorithmKind::kDoubleBinaryTree) {
          return Error::make(ErrorKind::kConfig,
                             "{}: '{}' lists doubleBinaryTree for dimension {}, an all-reduce "
                             "algorithm only: the {} of rank {} node {} cannot run it",
                             config_.path.empty() ? "system configuration" : config_.path, key, dim,
                             collective_name(request.type), rank, request.node_id);
        }
      }
    }
  }

  Group& group = groups_[request.group];
  uint32_t position = rank;
  if (request.group != 0) {
    auto found = group.position.find(rank);
    if (found == group.position.end()) {
      return Error::make(ErrorKind::kTrace,
                         "rank {} node {}: {} over communicator group '{}', which does not "
                         "contain rank {}",
                         rank, request.node_id, collective_name(request.type), group.name, rank);
    }
    position = found->second;
  }
  const uint64_t sequence = group.issued[position]++;
  const uint64_t instance_key = (uint64_t{request.group} << 40) | sequence;
  uint32_t instance_id = 0;
  if (auto found = instance_index_.find(instance_key); found != instance_index_.end()) {
    instance_id = found->second;
    Instance& instance = instances_[instance_id];
    if (instance.type != request.type || instance.bytes != request.bytes) {
      return Error::make(
          ErrorKind::kTrace,
          "collective #{} of communicator group '{}' differs across its ranks: rank {} issued {} "
          "of {} bytes (node {}) but rank {} issued {} of {} bytes (node {}); ranks pair a "
          "group's collectives in the order they issue them (as ASTRA-sim does), so either the "
          "traces differ or their dependencies leave this order to timing, which a slowed rank "
          "or another network can change",
          sequence, group.name.empty() ? "all ranks" : group.name, instance.first_rank,
          collective_name(instance.type), instance.bytes, instance.first_node, rank,
          collective_name(request.type), request.bytes, request.node_id);
    }
  } else {
    instance_id = static_cast<uint32_t>(instances_.size());
    Instance instance;
    instance.group = request.group;
    instance.sequence = sequence;
    instance.type = request.type;
    instance.bytes = request.bytes;
    instance.involved_dims = request.involved_dims;
    instance.first_rank = rank;
    instance.first_node = request.node_id;
    instance.record = static_cast<uint32_t>(records_.size());
    // Chunks as ASTRA-sim cuts them: splits chunks of floor(S / splits) bytes (one more when that
    // leaves a remainder); a chunk holds at least one byte per NPU except for all-gather. Every
    // rank cuts the same, so the first plans for all.
    const uint64_t splits = config_.preferred_dataset_splits;
    uint64_t total = request.bytes;
    uint64_t chunk = total / splits;
    if (request.type != CollectiveType::kAllGather && topology_.rank_count() > chunk) {
      chunk = topology_.rank_count();
      total = splits * chunk;
    }
    if (chunk == 0) {
      chunk = 1;
      total = std::max<uint64_t>(total, 1);
    }
    instance.chunks = (total + chunk - 1) / chunk;
    instance.first_phase = static_cast<uint32_t>(phases_.size());
    if (!custom) plan_phases(instance, chunk);
    instances_.push_back(instance);
    instance_index_.emplace(instance_key, instance_id);
    CollectiveRecord record;
    record.type = request.type;
    record.group = request.group;
    record.sequence = sequence;
    record.bytes = request.bytes;
    record.ranks = static_cast<uint32_t>(group.ranks.size());
    record.first_issue = engine_.now();
    record.first_node = request.node_id;
    records_.push_back(record);
  }
  Instance& instance = instances_[instance_id];
  ++instance.issued;
  const uint64_t chunks = instance.chunks;

  const uint32_t owner = take_slot(rank_collectives_, free_rank_collectives_);
  rank_collectives_[owner] = RankCollective{instance_id, rank, static_cast<uint32_t>(chunks),
                                            request.cookie, request.node_id};
  if (custom) {
    rank_collectives_[owner].remaining = 1;
    return start_custom(owner, position, custom_prefixes(request.type).front());
  }
  if (instance.phase_count == 0) {
    (void)engine_.schedule_at(engine_.now(), id_, kDoneNow, owner);
    return Status::ok();
  }

  int64_t priority = 0;
  switch (config_.scheduling_policy) {
    case SchedulingPolicy::kLifo:
      priority = priority_counter_++;
      break;
    case SchedulingPolicy::kFifo:
      priority = priority_counter_--;
      break;
    case SchedulingPolicy::kExplicit:
      priority = request.priority;
      break;
  }
  for (uint64_t index = 0; index < chunks; ++index) {
    const uint32_t stream_id = take_slot(streams_, free_streams_);
    Stream& stream = streams_[stream_id];
    stream.rank = rank;
    stream.owner = owner;
    stream.instance = instance_id;
    stream.position = position;
    stream.run.chunk = static_cast<uint32_t>(index);
    stream.priority = priority;
    stream.phase_index = 0;
    enqueue(stream_id);
  }
  return Status::ok();
}

// ---- queues
// --------------------------------------------------------------------------------------

std::pair<uint32_t, bool> CollectiveEngine::lane(const Stream& stream) const {
  const Phase& phase = phase_of(stream);
  const uint32_t base = peers_->slot(stream.rank) * queues_per_rank_;
  if (phase.dim == kFlat) return {base + queues_per_rank_ - 1, phase.anticlockwise};
  const uint32_t count = options_.queues_per_dim;
  const uint32_t chunk = stream.run.chunk;
  const uint32_t first = base + phase.dim * count;
  switch (phase.half) {
    case QueueHalf::kFirst:
      return {first + chunk % std::max(1u, count / 2), false};
    case QueueHalf::kLast:
      return {first + count / 2 + chunk % (count - count / 2), true};
    case QueueHalf::kAll:
      break;
  }
  const uint32_t local = chunk % count;
  return {first + local, phase.anticlockwise || (count > 1 && local >= count / 2)};
}

void CollectiveEngine::enqueue(uint32_t stream_id) {
  Stream& stream = streams_[stream_id];
  stream.queue = lane(stream).first;
  stream.running = false;
  std::vector<uint32_t>& list = queues_[stream.queue];
  // ASTRA-sim's insertion: behind every started stream and every stream of equal or higher
  // priority; chunks of one collective share a priority and so keep their order.
  size_t pos = 0;
  while (pos < list.size() &&
         (streams_[list[pos]].running || streams_[list[pos]].priority >= stream.priority)) {
    ++pos;
  }
  list.insert(list.begin() + static_cast<std::ptrdiff_t>(pos), stream_id);
  fill(stream.queue);
}

void CollectiveEngine::fill(uint32_t queue) {
  // ASTRA-sim's concurrent streams per queue: the dimension's active chunks over its queues.
  const uint32_t count = options_.queues_per_dim;
  const auto threshold =
      static_cast<uint32_t>((uint64_t{config_.active_chunks_per_dimension} + count - 1) / count);
  std::vector<uint32_t>& list = queues_[queue];
  for (size_t pos = 0; pos < list.size() && running_[queue] < threshold; ++pos) {
    const uint32_t stream_id = list[pos];
    if (streams_[stream_id].running) continue;
    streams_[stream_id].running = true;
    ++running_[queue];
    // Starting only schedules events: the list cannot change under this loop.
    start_phase(stream_id);
  }
}

void CollectiveEngine::finish_phase(uint32_t stream_id) {
  Stream& stream = streams_[stream_id];
  const uint32_t queue = stream.queue;
  std::vector<uint32_t>& list = queues_[queue];
  list.erase(std::find(list.begin(), list.end(), stream_id));
  --running_[queue];
  ++stream.phase_index;
  if (stream.phase_index == instances_[stream.instance].phase_count) {
    const uint32_t owner = stream.owner;
    free_streams_.push_back(stream_id);
    if (--rank_collectives_[owner].remaining == 0) collective_finished(owner);
    fill(queue);
    return;
  }
  fill(queue);
  enqueue(stream_id);
}

// ---- state machines
// ------------------------------------------------------------------------------

Rank CollectiveEngine::member(const Stream& stream, uint32_t index) const {
  const Phase& phase = phase_of(stream);
  if (phase.dim == kFlat) return groups_[instances_[stream.instance].group].ranks[index];
  // topology_.peer without its divisions: start_phase set run.index to the rank's coordinate.
  assert(stream.run.index == topology_.coordinate(stream.rank, phase.dim));
  const uint32_t stride = topology_.stride(phase.dim);
  return stream.rank - stream.run.index * stride + index * stride;
}

const NcclFabric& CollectiveEngine::nccl_fabric_of(const Stream& stream) {
  const Phase& phase = phase_of(stream);
  const uint64_t key = phase.dim == kFlat ? (uint64_t{1} << 63) | instances_[stream.instance].group
                                          : (uint64_t{phase.dim} << 32) | member(stream, 0);
  auto [it, fresh] = nccl_fabrics_.try_emplace(key);
  if (fresh) {
    it->second = nccl_fabric(topology_, stream.run.members,
                             [&](uint32_t idx) { return member(stream, idx); });
  }
  return it->second;
}

void CollectiveEngine::start_phase(uint32_t stream_id) {
  Stream& stream = streams_[stream_id];
  const Phase& phase = phase_of(stream);
  AlgorithmStream& run = stream.run;
  if (phase.dim == kFlat) {
    run.members = static_cast<uint32_t>(groups_[instances_[stream.instance].group].ranks.size());
    run.index = stream.position;
  } else {
    run.members = topology_.size(phase.dim);
    run.index = topology_.coordinate(stream.rank, phase.dim);
  }
  run.op = phase.op;
  run.anticlockwise = lane(stream).second;
  run.window = phase.window;
  run.size = phase.size;
  std::memset(run.state, 0, sizeof(run.state));
  PhaseRun view = run_of(stream_id);
  phase.algorithm->start(view);
}

void CollectiveEngine::bundle(uint32_t stream_id, bool reduce, uint64_t bytes) {
  if (reduce) {
    reductions_.push_back(bytes);
    (void)engine_.schedule_after(endpoint_delay_, id_, kBundleReduce, stream_id);
  } else {
    (void)engine_.schedule_after(endpoint_delay_, id_, kBundle, stream_id);
  }
}

void CollectiveEngine::send_message(uint32_t stream_id, uint32_t to_index,
                                    uint32_t mirror_from_index, uint64_t bytes,
                                    MirrorPattern pattern) {
  const Stream& stream = streams_[stream_id];
  CollectiveMessage outgoing;
  outgoing.src = stream.rank;
  outgoing.dst = member(stream, to_index);
  outgoing.mirror_src =
      pattern == MirrorPattern::kNone ? stream.rank : member(stream, mirror_from_index);
  outgoing.dim = phase_of(stream).dim;
  outgoing.src_index = stream.run.index;
  outgoing.dst_index = to_index;
  outgoing.bytes = bytes;
  outgoing.pattern = pattern;
  const MessageFate fate = peers_->route(outgoing, engine_.now());
  const uint32_t token = new_message();
  Message& message = messages_[token];
  message.src = fate.arrives_from;
  message.dst = fate.arrives_at;
  message.bytes = bytes;
  message.instance = stream.instance;
  message.chunk = stream.run.chunk;
  message.phase = stream.phase_index;
  messages_sent_ += fate.copies;
  if (fate.transport == MessageFate::Transport::kNetwork) {
    network_.send(fate.network_src, fate.network_dst, bytes, token);
  } else {
    (void)engine_.schedule_after(fate.delay, id_, kMirrorArrival, token);
  }
}

void CollectiveEngine::post_receive(uint32_t stream_id, uint32_t from_index) {
  post_receive_from(stream_id, member(streams_[stream_id], from_index));
}

void CollectiveEngine::post_receive_from(uint32_t stream_id, Rank source) {
  const Stream& stream = streams_[stream_id];
  const MatchKey key{stream.rank, source, stream.instance, stream.run.chunk, stream.phase_index};
  const uint32_t slot = matches_.find_or_insert(key);
  MatchEntry& entry = matches_.entry(slot);
  if (entry.arrived > 0) {
    if (--entry.arrived == 0 && entry.posted == 0) matches_.erase(slot);
    (void)engine_.schedule_at(engine_.now(), id_, kReceived, stream_id);
    return;
  }
  ++entry.posted;
  entry.stream = stream_id;
}

void CollectiveEngine::send_up(uint32_t stream_id, uint64_t up_bytes, uint64_t down_bytes) {
  const Stream& stream = streams_[stream_id];
  const Phase& phase = phase_of(stream);
  const uint32_t token = new_message();
  Message& message = messages_[token];
  message.switch_up = true;
  message.dim = phase.dim;
  message.src = stream.rank;
  message.dst = stream.rank;
  message.bytes = up_bytes;
  message.instance = stream.instance;
  message.chunk = stream.run.chunk;
  message.phase = stream.phase_index;
  message.down_bytes = down_bytes;
  switch_hop(token, stream.rank, /*up=*/true);
}

void CollectiveEngine::switch_hop(uint32_t token, Rank rank, bool up) {
  const Message& message = messages_[token];
  const MessageFate fate =
      peers_->route_switch_hop(rank, message.dim, up, message.bytes, engine_.now());
  messages_sent_ += fate.copies;
  if (fate.transport == MessageFate::Transport::kNetwork) {
    network_.send_switch(rank, message.dim, up, message.bytes, token);
  } else {
    (void)engine_.schedule_after(fate.delay, id_, kMirrorArrival, token);
  }
}

void CollectiveEngine::on_switch_arrival(const Message& message) {
  const uint32_t members = topology_.size(message.dim);
  const uint32_t participants = peers_->switch_participants(message.src, message.dim);
  if (participants > 1) {
    const uint32_t switch_node = topology_.switch_uplink(message.src, message.dim).next;
    const SwitchKey key{message.instance, message.chunk, message.phase, switch_node};
    auto [entry, inserted] = switch_arrivals_.try_emplace(key, 0);
    if (++entry->second < participants) return;
    switch_arrivals_.erase(entry);
  }
  // Every member's data is in: the switch combines it at line rate and answers each member that
  // runs.
  for (uint32_t coord = 0; coord < members; ++coord) {
    const Rank dst = topology_.peer(message.src, message.dim, coord);
    if (!peers_->simulated(dst)) continue;
    const uint32_t token = new_message();
    Message& down = messages_[token];
    down.switch_down = true;
    down.dim = message.dim;
    down.src = kFromSwitch;
    down.dst = dst;
    down.bytes = message.down_bytes;
    down.instance = message.instance;
    down.chunk = message.chunk;
    down.phase = message.phase;
    switch_hop(token, dst, /*up=*/false);
  }
}

void CollectiveEngine::on_delivered(uint64_t token) {
  const Message message = messages_[token];
  free_messages_.push_back(static_cast<uint32_t>(token));
  if (message.switch_up) {
    on_switch_arrival(message);
    return;
  }
  if (message.p2p) {
    P2pEntry& entry = p2p_[P2pKey{message.src, message.dst, message.tag, message.scope}];
    // The send completes on delivery.
    assert(!entry.sent.empty());
    entry.sent.pop_front();
    p2p_completed(message.sender, message.run, message.cookie, true);
    if (!entry.posted.empty()) {
      const P2pEndpoint receive = entry.posted.front();
      entry.posted.pop_front();
      if (receive.bytes != message.bytes) {
        fail(Error::make(ErrorKind::kTrace,
                         "rank {} node {} receives {} bytes from rank {} (tag {}), but the "
                         "matching send (rank {} node {}) carries {} bytes",
                         message.dst, receive.node_id, receive.bytes, message.src, message.tag,
                         message.src, message.node_id, message.bytes));
        return;
      }
      p2p_completed(message.dst, receive.run, receive.cookie, false);
    } else {
      entry.arrived.push_back({message.bytes, message.cookie, message.node_id, kNoRun});
    }
    return;
  }
  const MatchKey key{message.dst, message.src, message.instance, message.chunk, message.phase};
  const uint32_t slot = matches_.find_or_insert(key);
  MatchEntry& entry = matches_.entry(slot);
  if (entry.posted > 0) {
    const uint32_t stream_id = entry.stream;
    if (--entry.posted == 0 && entry.arrived == 0) matches_.erase(slot);
    PhaseRun run = run_of(stream_id);
    phase_of(streams_[stream_id]).algorithm->on_receive(run);
    return;
  }
  ++entry.arrived;
}

void CollectiveEngine::handle_event(const Event& event) {
  if (failure_) return;
  const auto stream_id = static_cast<uint32_t>(event.arg);
  switch (event.kind) {
    case kBundle:
    case kReduced: {
      PhaseRun run = run_of(stream_id);
      phase_of(streams_[stream_id]).algorithm->on_continue(run);
      return;
    }
    case kBundleReduce: {
      const uint64_t bytes = reductions_.front();
      reductions_.pop_front();
      // Two reads and one write at local-mem-bw (bytes per ns), each truncated to whole ns.
      const auto per_access =
          static_cast<int64_t>(std::floor(static_cast<double>(bytes) / local_mem_bw_));
      (void)engine_.schedule_after(SimTime::from_ns(3 * per_access), id_, kReduced, stream_id);
      return;
    }
    case kReceived: {
      PhaseRun run = run_of(stream_id);
      phase_of(streams_[stream_id]).algorithm->on_receive(run);
      return;
    }
    case kP2pRecvDone: {
      const Message message = messages_[event.arg];
      free_messages_.push_back(static_cast<uint32_t>(event.arg));
      p2p_completed(message.dst, message.run, message.cookie, false);
      return;
    }
    case kDoneNow:
      collective_finished(static_cast<uint32_t>(event.arg));
      return;
    case kMirrorArrival:
      on_delivered(event.arg);
      return;
    case kCustomWork:
      custom_node_done(static_cast<uint32_t>(event.arg >> 32),
                       static_cast<chakra::NodeIndex>(event.arg & 0xffffffffu));
      return;
    default:
      assert(false && "collective engine: unknown event");
  }
}

// ---- what algorithms ask for
// ---------------------------------------------------------------------

void PhaseRun::after_endpoint_delay(bool reduce, uint64_t bytes) {
  engine_->bundle(stream_id_, reduce, bytes);
}

void PhaseRun::after_delay(SimTime delay) {
  (void)engine_->engine_.schedule_after(delay, engine_->id_, CollectiveEngine::kReduced,
                                        stream_id_);
}

void PhaseRun::fail(Error error) { engine_->fail(std::move(error)); }

const SystemConfig& PhaseRun::system() const { return engine_->config_; }

const net::Topology& PhaseRun::topology() const { return engine_->topology_; }

uint32_t PhaseRun::member_rank(uint32_t index) const {
  return engine_->member(engine_->streams_[stream_id_], index);
}

const NcclFabric& PhaseRun::nccl_fabric() const {
  return engine_->nccl_fabric_of(engine_->streams_[stream_id_]);
}

void PhaseRun::send(uint32_t to, uint64_t bytes) {
  engine_->send_message(stream_id_, to, to, bytes, MirrorPattern::kNone);
}

void PhaseRun::expect(uint32_t from) { engine_->post_receive(stream_id_, from); }

void PhaseRun::exchange(uint32_t to, uint32_t from, uint64_t bytes, MirrorPattern pattern) {
  engine_->send_message(stream_id_, to, from, bytes, pattern);
  engine_->post_receive(stream_id_, from);
}

void PhaseRun::send_to_switch(uint64_t up_bytes, uint64_t down_bytes) {
  engine_->send_up(stream_id_, up_bytes, down_bytes);
}

void PhaseRun::expect_from_switch() {
  engine_->post_receive_from(stream_id_, CollectiveEngine::kFromSwitch);
}

void PhaseRun::finish() { engine_->finish_phase(stream_id_); }

// ---- point to point
// ------------------------------------------------------------------------------

void CollectiveEngine::issue_send(Rank src, Rank dst, int64_t tag, uint64_t bytes, uint64_t cookie,
                                  uint64_t node_id) {
  p2p_send(src, dst, tag, kWorkloadScope, bytes, cookie, node_id, kNoRun);
}

void CollectiveEngine::issue_recv(Rank dst, Rank src, int64_t tag, uint64_t bytes, uint64_t cookie,
                                  uint64_t node_id) {
  p2p_recv(dst, src, tag, kWorkloadScope, bytes, cookie, node_id, kNoRun);
}

void CollectiveEngine::p2p_send(Rank src, Rank dst, int64_t tag, uint32_t scope, uint64_t bytes,
                                uint64_t cookie, uint64_t node_id, uint32_t run) {
  // The peer model may deliver a workload message elsewhere (rank classes: to the destination
  // class's representative, as from the member that sends it the corresponding message).
  const MessageFate fate = scope == kWorkloadScope
                               ? peers_->route_p2p(src, dst, tag, bytes, engine_.now())
                               : PeerModel::as_addressed(src, dst);
  const uint32_t token = new_message();
  Message& message = messages_[token];
  message.p2p = true;
  message.src = fate.arrives_from;
  message.dst = fate.arrives_at;
  message.sender = src;
  message.bytes = bytes;
  message.tag = tag;
  message.cookie = cookie;
  message.node_id = node_id;
  message.scope = scope;
  message.run = run;
  p2p_[P2pKey{message.src, message.dst, tag, scope}].sent.push_back({bytes, cookie, node_id, run});
  messages_sent_ += fate.copies;
  if (fate.transport == MessageFate::Transport::kNetwork) {
    network_.send(fate.network_src, fate.network_dst, bytes, token);
  } else {
    (void)engine_.schedule_after(fate.delay, id_, kMirrorArrival, token);
  }
}

void CollectiveEngine::p2p_recv(Rank dst, Rank src, int64_t tag, uint32_t scope, uint64_t bytes,
                                uint64_t cookie, uint64_t node_id, uint32_t run) {
  P2pEntry& entry = p2p_[P2pKey{src, dst, tag, scope}];
  if (!entry.arrived.empty()) {
    const P2pEndpoint arrived = entry.arrived.front();
    entry.arrived.pop_front();
    if (arrived.bytes != bytes) {
      fail(Error::make(ErrorKind::kTrace,
                       "rank {} node {} receives {} bytes from rank {} (tag {}), but the matching "
                       "send (rank {} node {}) carries {} bytes",
                       dst, node_id, bytes, src, tag, src, arrived.node_id, arrived.bytes));
      return;
    }
    const uint32_t token = new_message();
    messages_[token].dst = dst;
    messages_[token].cookie = cookie;
    messages_[token].run = run;
    (void)engine_.schedule_at(engine_.now(), id_, kP2pRecvDone, token);
    return;
  }
  entry.posted.push_back({bytes, cookie, node_id, run});
}

void CollectiveEngine::p2p_completed(Rank rank, uint32_t run, uint64_t cookie, bool send) {
  if (run != kNoRun) {
    custom_node_done(run, static_cast<chakra::NodeIndex>(cookie));
  } else if (send) {
    listener_.on_send_done(rank, cookie);
  } else {
    listener_.on_recv_done(rank, cookie);
  }
}

void CollectiveEngine::collective_finished(uint32_t owner) {
  const RankCollective done = rank_collectives_[owner];
  Instance& instance = instances_[done.instance];
  ++instance.finished;
  CollectiveRecord& record = records_[instance.record];
  record.last_finish = std::max(record.last_finish, engine_.now());
  if (instance.finished == groups_[instance.group].simulated) {
    instance_index_.erase((uint64_t{instance.group} << 40) | instance.sequence);
  }
  free_rank_collectives_.push_back(owner);
  listener_.on_collective_done(done.rank, done.cookie);
}

void CollectiveEngine::fail(Error error) {
  if (!failure_) failure_ = std::move(error);
  engine_.stop();
}

std::vector<std::string> CollectiveEngine::describe_pending(size_t limit) const {
  std::vector<std::string> lines;
  // Collectives some members never issued.
  std::vector<std::pair<uint64_t, uint32_t>> open(instance_index_.begin(), instance_index_.end());
  std::sort(open.begin(), open.end());
  for (const auto& [key, instance_id] : open) {
    if (lines.size() >= limit) break;
    const Instance& instance = instances_[instance_id];
    const Group& group = groups_[instance.group];
    if (instance.issued < group.ranks.size()) {
      // Who is missing: members whose issue count has not reached this sequence number.
      std::vector<Rank> missing;
      for (size_t pos = 0; pos < group.ranks.size(); ++pos) {
        if (group.issued[pos] <= instance.sequence) missing.push_back(group.ranks[pos]);
      }
      if (missing.size() > 8) missing.resize(8);
      lines.push_back(fmt::format(
          "{} #{} of {} ({} bytes, first issued by rank {} at node {}): {} of {} ranks issued it; "
          "never issued by rank(s) {}{}",
          collective_name(instance.type), instance.sequence,
          group.name.empty() ? "all ranks" : fmt::format("group '{}'", group.name), instance.bytes,
          instance.first_rank, instance.first_node, instance.issued, group.ranks.size(),
          fmt::join(missing, ", "), group.ranks.size() - instance.issued > 8 ? ", ..." : ""));
    }
  }
  // Point-to-point operations without a partner.
  std::vector<std::pair<std::tuple<Rank, Rank, int64_t>, const P2pEntry*>> entries;
  for (const auto& [key, entry] : p2p_) {
    if (key.scope == kWorkloadScope) entries.push_back({{key.src, key.dst, key.tag}, &entry});
  }
  std::sort(entries.begin(), entries.end(),
            [](const auto& lhs, const auto& rhs) { return lhs.first < rhs.first; });
  for (const auto& [key, entry] : entries) {
    const auto [src, dst, tag] = key;
    for (const P2pEndpoint& receive : entry->posted) {
      if (lines.size() >= limit) return lines;
      lines.push_back(fmt::format(
          "rank {} node {}: receive of {} bytes from rank {} (tag {}) has no matching send", dst,
          receive.node_id, receive.bytes, src, tag));
    }
    for (const P2pEndpoint& arrived : entry->arrived) {
      if (lines.size() >= limit) return lines;
      lines.push_back(fmt::format(
          "rank {} node {}: send of {} bytes to rank {} (tag {}) has no matching receive", src,
          arrived.node_id, arrived.bytes, dst, tag));
    }
  }
  // A collective every member issued that cannot finish: with one queue per dimension, the race
  // of localBWAware's halves (EngineOptions::queues_per_dim) is the likely cause.
  if (config_.collective_optimization == CollectiveOptimization::kLocalBwAware &&
      options_.queues_per_dim == 1 && lines.size() < limit) {
    for (const auto& [key, instance_id] : open) {
      const Instance& instance = instances_[instance_id];
      const Group& group = groups_[instance.group];
      if (instance.issued < group.ranks.size() || instance.chunks < 2 || instance.phase_count < 3 ||
          phases_[instance.first_phase].dim == kFlat) {
        continue;
      }
      lines.push_back(fmt::format(
          "{} #{} of {} ({} bytes in {} chunks) was issued by every member but did not finish: "
          "with localBWAware and one queue per dimension a chunk's all-gather half waits in the "
          "queue of the next chunk's reduce-scatter, and ranks that reach it at different times "
          "run them in different orders (ASTRA-sim's too); --num-queues-per-dim 2 gives each "
          "half its own queue",
          collective_name(instance.type), instance.sequence,
          group.name.empty() ? "all ranks" : fmt::format("group '{}'", group.name), instance.bytes,
          instance.chunks));
      break;
    }
  }
  return lines;
}

}  // namespace orrery::sys
