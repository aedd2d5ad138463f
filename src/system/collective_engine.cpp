#include "system/collective_engine.h"

#include "core/slot_pool.h"
#include "network/analytical_backend.h"

#include <algorithm>
#include <cassert>
#include <cmath>

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

uint32_t ceil_log2(uint32_t value) {
  uint32_t bits = 0;
  while ((1u << bits) < value) ++bits;
  return bits;
}

uint32_t floor_log2(uint32_t value) {
  uint32_t bits = 0;
  while ((2u << bits) <= value) ++bits;
  return bits;
}

}  // namespace

size_t CollectiveEngine::MatchKeyHash::operator()(const MatchKey& key) const {
  return static_cast<size_t>(mix((uint64_t{key.dst} << 32 | key.src) ^
                                 mix(uint64_t{key.instance} << 32 | key.chunk) ^ key.phase));
}

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
      mirror_traffic_(network.topology()) {
  id_ = engine_.register_handler(*this);
  network_.set_listener(*this);
  int64_t delay = config.endpoint_delay_ns;
  if (config.endpoint_delay_given) {
    delay = static_cast<int64_t>(static_cast<double>(delay) * options.injection_scale);
  }
  endpoint_delay_ = SimTime::from_ns(delay);
  local_mem_bw_ = *config.local_mem_bw_gbps;
  queues_per_rank_ = topology_.dimension_count() + 1;
  // In mirror mode only the representative (rank 0) has queues.
  queues_.resize(size_t{options.mirror ? 1 : topology_.rank_count()} * queues_per_rank_);
  running_.assign(queues_.size(), 0);

  Group all;
  all.name = "";
  all.ranks.resize(topology_.rank_count());
  for (Rank rank = 0; rank < topology_.rank_count(); ++rank) all.ranks[rank] = rank;
  all.aligned_dims =
      (topology_.dimension_count() >= 32) ? ~0u : ((1u << topology_.dimension_count()) - 1);
  all.issued.assign(topology_.rank_count(), 0);
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
  groups_.push_back(std::move(group));
  return static_cast<uint32_t>(groups_.size() - 1);
}

// ---- issuing
// -------------------------------------------------------------------------------------

const std::vector<Algorithm>& CollectiveEngine::implementations(Op op) const {
  switch (op) {
    case Op::kAllGather:
      return config_.all_gather;
    case Op::kReduceScatter:
      return config_.reduce_scatter;
    case Op::kAllToAll:
      return config_.all_to_all;
    default:
      return config_.all_reduce;
  }
}

std::vector<CollectiveEngine::Phase> CollectiveEngine::plan_phases(const Instance& instance,
                                                                   uint64_t chunk) const {
  const Group& group = groups_[instance.group];
  std::vector<Phase> phases;
  if (group.ranks.size() <= 1) return phases;
  auto flat = [&](Op op, Algorithm algorithm) {
    Phase phase;
    phase.op = op;
    phase.algorithm = algorithm;
    phase.dim = kFlat;
    phase.size = chunk;
    phases.push_back(phase);
  };
  Op op = Op::kAllReduce;
  switch (instance.type) {
    case CollectiveType::kAllReduce:
      op = Op::kAllReduce;
      break;
    case CollectiveType::kReduceScatter:
      op = Op::kReduceScatter;
      break;
    case CollectiveType::kAllGather:
      op = Op::kAllGather;
      break;
    case CollectiveType::kAllToAll:
      op = Op::kAllToAll;
      break;
    case CollectiveType::kBroadcast:
      flat(Op::kBroadcast, {});
      return phases;
    case CollectiveType::kReduce:
      flat(Op::kReduce, {});
      return phases;
    case CollectiveType::kGather:
      flat(Op::kGather, {});
      return phases;
    case CollectiveType::kScatter:
      flat(Op::kScatter, {});
      return phases;
    case CollectiveType::kBarrier:
      flat(Op::kBarrier, {});
      return phases;
  }
  const std::vector<Algorithm>& impls = implementations(op);
  const AlgorithmKind first = impls.front().kind;
  if (first == AlgorithmKind::kOneRing || first == AlgorithmKind::kOneDirect ||
      first == AlgorithmKind::kOneHalvingDoubling) {
    Algorithm algorithm = impls.front();
    algorithm.kind = first == AlgorithmKind::kOneRing     ? AlgorithmKind::kRing
                     : first == AlgorithmKind::kOneDirect ? AlgorithmKind::kDirect
                                                          : AlgorithmKind::kHalvingDoubling;
    flat(op, algorithm);
    return phases;
  }
  if (group.aligned_dims == 0) {
    // Like ASTRA-sim, a group that is not a sub-grid of the network runs one ring over its ranks.
    flat(op, Algorithm{AlgorithmKind::kRing, 0});
    return phases;
  }
  std::vector<uint32_t> dims;
  for (uint32_t dim = 0; dim < topology_.dimension_count(); ++dim) {
    if ((group.aligned_dims & instance.involved_dims & (1u << dim)) != 0 &&
        topology_.size(dim) > 1) {
      dims.push_back(dim);
    }
  }
  if (dims.empty()) return phases;
  uint64_t size = chunk;
  auto add = [&](Op phase_op, uint32_t dim, bool anticlockwise) {
    Phase phase;
    phase.op = phase_op;
    phase.dim = dim;
    phase.size = size;
    phase.anticlockwise = anticlockwise;
    // Every phase of an all-reduce (its hierarchical reduce-scatter and all-gather halves too)
    // uses the all-reduce implementation of its dimension, as ASTRA-sim does; the other lists
    // may be absent from the system file then.
    phase.algorithm = implementations(op == Op::kAllReduce ? op : phase_op)[dim];
    phases.push_back(phase);
    const uint64_t members = topology_.size(dim);
    switch (phase_op) {
      case Op::kReduceScatter:
        size /= members;
        break;
      case Op::kAllGather:
        size *= members;
        break;
      default:
        break;
    }
  };
  if (op == Op::kAllReduce &&
      config_.collective_optimization == CollectiveOptimization::kLocalBwAware) {
    for (size_t idx = 0; idx + 1 < dims.size(); ++idx) add(Op::kReduceScatter, dims[idx], false);
    add(Op::kAllReduce, dims.back(), false);
    for (size_t idx = dims.size() - 1; idx-- > 0;) add(Op::kAllGather, dims[idx], true);
  } else if (op == Op::kAllGather) {
    for (size_t idx = dims.size(); idx-- > 0;) add(op, dims[idx], false);
  } else {
    for (uint32_t dim : dims) add(op, dim, false);
  }
  return phases;
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
          "of {} bytes (node {}) but rank {} issued {} of {} bytes (node {})",
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

  // Chunks as ASTRA-sim cuts them: splits chunks of floor(S / splits) bytes (one more when that
  // leaves a remainder); a chunk holds at least one byte per NPU except for all-gather.
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
  const uint64_t chunks = (total + chunk - 1) / chunk;
  const std::vector<Phase> phases = custom ? std::vector<Phase>() : plan_phases(instance, chunk);

  const uint32_t owner = take_slot(rank_collectives_, free_rank_collectives_);
  rank_collectives_[owner] = RankCollective{instance_id, rank, static_cast<uint32_t>(chunks),
                                            request.cookie, request.node_id};
  if (custom) {
    rank_collectives_[owner].remaining = 1;
    return start_custom(owner, position, custom_prefixes(request.type).front());
  }
  if (phases.empty()) {
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
    stream.chunk = static_cast<uint32_t>(index);
    stream.priority = priority;
    stream.phases = phases;
    stream.phase_index = 0;
    enqueue(stream_id);
  }
  return Status::ok();
}

// ---- queues
// --------------------------------------------------------------------------------------

uint32_t CollectiveEngine::queue_of(Rank rank, uint32_t dim) const {
  const uint32_t local = dim == kFlat ? queues_per_rank_ - 1 : dim;
  return rank * queues_per_rank_ + local;
}

void CollectiveEngine::enqueue(uint32_t stream_id) {
  Stream& stream = streams_[stream_id];
  const Phase& phase = stream.phases[stream.phase_index];
  stream.queue = queue_of(stream.rank, phase.dim);
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
  const uint32_t threshold = config_.active_chunks_per_dimension;
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
  if (stream.phase_index == stream.phases.size()) {
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
  const Phase& phase = stream.phases[stream.phase_index];
  if (phase.dim == kFlat) return groups_[instances_[stream.instance].group].ranks[index];
  return topology_.peer(stream.rank, phase.dim, index);
}

void CollectiveEngine::start_phase(uint32_t stream_id) {
  Stream& stream = streams_[stream_id];
  const Phase& phase = stream.phases[stream.phase_index];
  const Group& group = groups_[instances_[stream.instance].group];
  if (phase.dim == kFlat) {
    stream.n = static_cast<uint32_t>(group.ranks.size());
    stream.index =
        instances_[stream.instance].group == 0 ? stream.rank : group.position.at(stream.rank);
  } else {
    stream.n = topology_.size(phase.dim);
    stream.index = topology_.coordinate(stream.rank, phase.dim);
  }
  stream.free = 0;
  stream.zero = 0;
  stream.nonzero = 0;
  stream.toggle = false;
  stream.received = 0;
  stream.waiting = 0;
  stream.round = 0;
  stream.packets.clear();
  stream.packet_sizes.clear();
  stream.reductions.clear();
  stream.parallel = 1;
  phase_init(stream_id);
}

void CollectiveEngine::bundle(uint32_t stream_id, bool reduce, uint64_t bytes) {
  if (reduce) {
    streams_[stream_id].reductions.push_back(bytes);
    (void)engine_.schedule_after(endpoint_delay_, id_, kBundleReduce, stream_id);
  } else {
    (void)engine_.schedule_after(endpoint_delay_, id_, kBundle, stream_id);
  }
}

void CollectiveEngine::send_message(uint32_t stream_id, uint32_t to_index, uint64_t bytes) {
  const Stream& stream = streams_[stream_id];
  const uint32_t token = new_message();
  Message& message = messages_[token];
  message.src = stream.rank;
  message.dst = member(stream, to_index);
  message.bytes = bytes;
  message.instance = stream.instance;
  message.chunk = stream.chunk;
  message.phase = stream.phase_index;
  ++messages_sent_;
  network_.send(message.src, message.dst, bytes, token);
}

void CollectiveEngine::post_receive(uint32_t stream_id, uint32_t from_index) {
  post_receive_from(stream_id, member(streams_[stream_id], from_index));
}

void CollectiveEngine::post_receive_from(uint32_t stream_id, Rank source) {
  const Stream& stream = streams_[stream_id];
  const MatchKey key{stream.rank, source, stream.instance, stream.chunk, stream.phase_index};
  auto [entry, inserted] = matches_.try_emplace(key);
  if (entry->second.arrived > 0) {
    if (--entry->second.arrived == 0 && entry->second.posted == 0) matches_.erase(entry);
    (void)engine_.schedule_at(engine_.now(), id_, kReceived, stream_id);
    return;
  }
  ++entry->second.posted;
  entry->second.stream = stream_id;
}

void CollectiveEngine::send_up(uint32_t stream_id) {
  const Stream& stream = streams_[stream_id];
  const Phase& phase = stream.phases[stream.phase_index];
  const uint32_t token = new_message();
  Message& message = messages_[token];
  message.switch_up = true;
  message.dim = phase.dim;
  message.src = stream.rank;
  message.dst = stream.rank;
  message.bytes = stream.message;
  message.instance = stream.instance;
  message.chunk = stream.chunk;
  message.phase = stream.phase_index;
  // What comes back down: the reduced buffer (all-reduce), this member's share of it
  // (reduce-scatter), or everyone's data (all-gather).
  switch (phase.op) {
    case Op::kReduceScatter:
      message.down_bytes = stream.message / stream.n;
      break;
    case Op::kAllGather:
      message.down_bytes = stream.message * stream.n;
      break;
    default:
      message.down_bytes = stream.message;
      break;
  }
  if (options_.mirror) {
    mirror_switch_hop(token, /*up=*/true);
    return;
  }
  ++messages_sent_;
  network_.send_switch(stream.rank, phase.dim, /*up=*/true, message.bytes, token);
}

void CollectiveEngine::mirror_send(uint32_t stream_id, uint32_t from, uint32_t to, uint64_t bytes) {
  const Stream& stream = streams_[stream_id];
  const Phase& phase = stream.phases[stream.phase_index];
  const Rank me = stream.rank;
  SimTime delay = net::analytical_delay(topology_, me, member(stream, to), bytes);
  if (options_.rounding == net::TimeRounding::kAstraSim) delay = net::truncate_to_ns(delay);
  const uint32_t token = new_message();
  Message& message = messages_[token];
  message.src = member(stream, from);
  message.dst = me;
  message.bytes = bytes;
  message.instance = stream.instance;
  message.chunk = stream.chunk;
  message.phase = stream.phase_index;
  if (stream.machine == Machine::kHalvingDoubling) {
    // The representative (coordinate 0, an even block at every distance) sends upwards; members
    // of odd blocks send downwards: the links carry different traffic, expanded rank by rank.
    assert(stream.index == 0);
    mirror_traffic_.record_partner_message(phase.dim, to, bytes, engine_.now(),
                                           engine_.now() + delay);
  } else {
    mirror_traffic_.record_message(phase.dim, stream.index, to, bytes, engine_.now(),
                                   engine_.now() + delay);
  }
  // Every rank sends its copy: the message count is the network's.
  messages_sent_ += topology_.rank_count();
  if (options_.mirror_through_network) {
    network_.send(me, member(stream, to), bytes, token);
    return;
  }
  (void)engine_.schedule_after(delay, id_, kMirrorArrival, token);
}

void CollectiveEngine::mirror_switch_hop(uint32_t token, bool up) {
  const Message& message = messages_[token];
  const net::Dimension& spec = topology_.dimension(message.dim);
  SimTime delay = spec.latency + spec.bandwidth.serialization_time(message.bytes);
  if (options_.rounding == net::TimeRounding::kAstraSim) delay = net::truncate_to_ns(delay);
  mirror_traffic_.record_switch(message.dim, up, message.bytes, engine_.now(),
                                engine_.now() + delay);
  messages_sent_ += topology_.rank_count();
  (void)engine_.schedule_after(delay, id_, kMirrorArrival, token);
}

void CollectiveEngine::on_switch_arrival(const Message& message) {
  const uint32_t switch_node = topology_.switch_uplink(message.src, message.dim).next;
  const SwitchKey key{message.instance, message.chunk, message.phase, switch_node};
  const uint32_t members = topology_.size(message.dim);
  if (!options_.mirror) {
    auto [entry, inserted] = switch_arrivals_.try_emplace(key, 0);
    if (++entry->second < members) return;
    switch_arrivals_.erase(entry);
  }
  // Every member's data is in: the switch combines it at line rate and answers each member.
  // (In mirror mode every member arrives with the representative, which alone is answered.)
  for (uint32_t coord = 0; coord < members; ++coord) {
    if (options_.mirror && coord != topology_.coordinate(message.src, message.dim)) continue;
    const uint32_t token = new_message();
    Message& down = messages_[token];
    down.switch_down = true;
    down.dim = message.dim;
    down.src = kFromSwitch;
    down.dst = topology_.peer(message.src, message.dim, coord);
    down.bytes = message.down_bytes;
    down.instance = message.instance;
    down.chunk = message.chunk;
    down.phase = message.phase;
    if (options_.mirror) {
      mirror_switch_hop(token, /*up=*/false);
      continue;
    }
    ++messages_sent_;
    network_.send_switch(down.dst, down.dim, /*up=*/false, down.bytes, token);
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
    p2p_completed(message.src, message.run, message.cookie, true);
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
  auto [entry, inserted] = matches_.try_emplace(key);
  if (entry->second.posted > 0) {
    const uint32_t stream_id = entry->second.stream;
    if (--entry->second.posted == 0 && entry->second.arrived == 0) matches_.erase(entry);
    on_received(stream_id);
    return;
  }
  ++entry->second.arrived;
}

void CollectiveEngine::handle_event(const Event& event) {
  if (failure_) return;
  const auto stream_id = static_cast<uint32_t>(event.arg);
  switch (event.kind) {
    case kBundle:
    case kReduced:
      on_general(stream_id);
      return;
    case kBundleReduce: {
      Stream& stream = streams_[stream_id];
      const uint64_t bytes = stream.reductions.front();
      stream.reductions.pop_front();
      // Two reads and one write at local-mem-bw (bytes per ns), each truncated to whole ns.
      const auto per_access =
          static_cast<int64_t>(std::floor(static_cast<double>(bytes) / local_mem_bw_));
      (void)engine_.schedule_after(SimTime::from_ns(3 * per_access), id_, kReduced, stream_id);
      return;
    }
    case kReceived:
      on_received(stream_id);
      return;
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

void CollectiveEngine::phase_init(uint32_t stream_id) {
  Stream& stream = streams_[stream_id];
  const Phase& phase = stream.phases[stream.phase_index];
  const uint32_t n = stream.n;
  const uint64_t x = phase.size;
  switch (phase.op) {
    case Op::kAllReduce:
    case Op::kReduceScatter:
    case Op::kAllGather:
    case Op::kAllToAll:
      break;
    case Op::kBroadcast:
    case Op::kReduce:
      stream.machine = Machine::kChain;
      stream.message = x;
      if (phase.op == Op::kBroadcast ? stream.index == 0 : stream.index == n - 1) {
        bundle(stream_id, false, 0);
      } else {
        stream.waiting = 1;
        post_receive(stream_id, phase.op == Op::kBroadcast ? stream.index - 1 : stream.index + 1);
      }
      return;
    case Op::kGather:
    case Op::kScatter: {
      stream.machine = Machine::kRooted;
      stream.message = x;
      const bool root = stream.index == 0;
      const bool sender = (phase.op == Op::kGather) != root;
      if (sender) {
        bundle(stream_id, false, 0);
      } else if (root) {
        stream.waiting = n - 1;
        for (uint32_t peer = 1; peer < n; ++peer) post_receive(stream_id, peer);
      } else {
        stream.waiting = 1;
        post_receive(stream_id, 0);
      }
      return;
    }
    case Op::kBarrier:
      stream.machine = Machine::kBarrier;
      stream.message = 1;
      stream.round = 0;
      bundle(stream_id, false, 0);
      return;
  }

  const AlgorithmKind kind = phase.algorithm.kind;
  if (kind == AlgorithmKind::kInSwitch) {
    stream.machine = Machine::kInSwitch;
    stream.message = x;
    stream.round = 0;
    bundle(stream_id, false, 0);
    return;
  }
  if (kind == AlgorithmKind::kHalvingDoubling) {
    stream.machine = Machine::kHalvingDoubling;
    const uint32_t steps = floor_log2(n);
    stream.stream_count = phase.op == Op::kAllReduce ? 2ull * steps : steps;
    stream.reduce_on_insert = false;
    // `message` holds the exponent bias: the next packet carries x / 2^k (k may go negative).
    stream.packet_sizes.clear();
    if (phase.op == Op::kAllGather) {
      stream.offset = n / 2;
      stream.doubling = false;  // distances shrink, sizes grow
      stream.message = x;
    } else {
      stream.offset = 1;
      stream.doubling = true;  // distances grow, sizes shrink
      stream.message = x / 2;
    }
    stream.round = 0;
    insert_packet(stream_id);
    return;
  }
  if (kind == AlgorithmKind::kDoubleBinaryTree) {
    stream.machine = Machine::kTree;
    stream.message = x;
    // Chunks alternate between two trees: a heap-ordered tree over the members, and its mirror.
    const bool mirrored = (stream.chunk % 2) == 1;
    const uint32_t position = mirrored ? n - 1 - stream.index : stream.index;
    uint32_t children = 0;
    if (2 * position + 1 < n) ++children;
    if (2 * position + 2 < n) ++children;
    stream.round = 0;
    if (children == 0) {
      bundle(stream_id, false, 0);  // a leaf starts by sending up
    } else {
      for (uint32_t child = 1; child <= children; ++child) {
        const uint32_t child_position = 2 * position + child;
        post_receive(stream_id, mirrored ? n - 1 - child_position : child_position);
      }
    }
    return;
  }

  // Ring and direct: one state machine with a window of `parallel` packets.
  stream.machine = Machine::kRing;
  stream.step = phase.anticlockwise ? -1 : 1;
  const bool direct = kind == AlgorithmKind::kDirect;
  stream.parallel = 1;
  if (direct) {
    stream.parallel = phase.algorithm.window == 0 ? n - 1 : std::min(phase.algorithm.window, n - 1);
  }
  stream.middle = n - 1;
  switch (phase.op) {
    case Op::kAllReduce:
      stream.stream_count = 2ull * (n - 1);
      break;
    case Op::kAllToAll:
      stream.stream_count = direct ? n - 1 : uint64_t{n} * (n - 1) / 2;
      break;
    default:
      stream.stream_count = n - 1;
      break;
  }
  stream.message = phase.op == Op::kAllGather ? x : x / n;
  stream.send_to =
      static_cast<uint32_t>((static_cast<int64_t>(stream.index) + stream.step + n) % n);
  stream.recv_from =
      static_cast<uint32_t>((static_cast<int64_t>(stream.index) - stream.step + n) % n);
  for (uint32_t idx = 0; idx < stream.parallel; ++idx) insert_packet(stream_id);
}

void CollectiveEngine::insert_packet(uint32_t stream_id) {
  Stream& stream = streams_[stream_id];
  const Phase& phase = stream.phases[stream.phase_index];
  const uint32_t n = stream.n;
  if (stream.machine == Machine::kHalvingDoubling) {
    const uint32_t steps = floor_log2(n);
    if (stream.zero == 0 && stream.nonzero == 0) {
      stream.zero = 1;
      stream.nonzero = steps - 1;
      stream.toggle = !stream.toggle;
    }
    bool reduce = false;
    if (stream.zero > 0) {
      --stream.zero;
    } else {
      --stream.nonzero;
      reduce = phase.op == Op::kReduceScatter || (phase.op == Op::kAllReduce && stream.toggle);
    }
    // The partner at distance `offset`: upwards when this member's block index is even.
    const uint32_t offset = stream.offset;
    uint32_t peer = stream.index;
    if (offset != 0) {
      const bool up = ((stream.index / offset) % 2) == 0;
      peer = up ? (stream.index + offset) % n : (stream.index + n - offset) % n;
    }
    stream.packets.emplace_back(peer, peer);
    stream.packet_sizes.push_back(stream.message);
    bundle(stream_id, reduce, stream.message);
    // Advance: distances double and sizes halve (or the reverse). An all-reduce turns round at
    // the far end and repeats its last step, as ASTRA-sim's implementation does.
    if (stream.doubling) {
      stream.offset *= 2;
      stream.message /= 2;
      if (stream.offset == n && phase.op == Op::kAllReduce) {
        stream.doubling = false;
        stream.offset /= 2;
        stream.message *= 2;
      }
    } else {
      stream.offset /= 2;
      stream.message *= 2;
    }
    return;
  }

  // Ring / direct.
  if (stream.zero == 0 && stream.nonzero == 0) {
    stream.zero = stream.parallel;
    stream.nonzero = stream.parallel == 1 ? n - 1 : stream.parallel;
    stream.toggle = !stream.toggle;
  }
  bool reduce = false;
  if (stream.zero > 0) {
    --stream.zero;
  } else {
    --stream.nonzero;
    reduce = phase.op == Op::kReduceScatter || (phase.op == Op::kAllReduce && stream.toggle);
  }
  stream.packets.emplace_back(stream.recv_from, stream.send_to);
  bundle(stream_id, reduce, stream.message);
  if (stream.parallel > 1 || phase.algorithm.kind == AlgorithmKind::kDirect) {
    // Direct: each packet goes one member further round, skipping this rank.
    auto advance = [&](uint32_t value, int32_t step) {
      uint32_t next = static_cast<uint32_t>((static_cast<int64_t>(value) + step + n) % n);
      if (next == stream.index)
        next = static_cast<uint32_t>((static_cast<int64_t>(next) + step + n) % n);
      return next;
    };
    stream.send_to = advance(stream.send_to, stream.step);
    stream.recv_from = advance(stream.recv_from, -stream.step);
  }
}

bool CollectiveEngine::send_packet(uint32_t stream_id) {
  Stream& stream = streams_[stream_id];
  if (stream.packets.empty() || stream.stream_count == 0 || stream.free == 0) return false;
  const auto [from, to] = stream.packets.front();
  stream.packets.pop_front();
  uint64_t bytes = stream.message;
  if (stream.machine == Machine::kHalvingDoubling) {
    bytes = stream.packet_sizes.front();
    stream.packet_sizes.pop_front();
  } else {
    bytes = stream.message;
  }
  if (options_.mirror) {
    mirror_send(stream_id, from, to, bytes);
  } else {
    send_message(stream_id, to, bytes);
  }
  post_receive(stream_id, from);
  --stream.stream_count;
  --stream.free;
  return true;
}

void CollectiveEngine::on_general(uint32_t stream_id) {
  Stream& stream = streams_[stream_id];
  const Phase& phase = stream.phases[stream.phase_index];
  const uint32_t n = stream.n;
  switch (stream.machine) {
    case Machine::kRing: {
      ++stream.free;
      const bool direct = phase.algorithm.kind == AlgorithmKind::kDirect;
      if (direct && phase.op == Op::kAllReduce && stream.stream_count <= stream.middle) {
        // The second half of a direct all-reduce waits for every message of the first.
        if (stream.received < stream.middle) return;
        for (uint32_t idx = 0; idx < stream.parallel; ++idx) send_packet(stream_id);
      } else {
        send_packet(stream_id);
      }
      if (stream.stream_count == 0 && stream.free == stream.parallel) finish_phase(stream_id);
      return;
    }
    case Machine::kHalvingDoubling:
      ++stream.free;
      send_packet(stream_id);
      if (stream.stream_count == 0 && stream.free == 1) finish_phase(stream_id);
      return;
    case Machine::kChain: {
      const bool broadcast = phase.op == Op::kBroadcast;
      if (broadcast && stream.index + 1 < n)
        send_message(stream_id, stream.index + 1, stream.message);
      if (!broadcast && stream.index > 0) send_message(stream_id, stream.index - 1, stream.message);
      finish_phase(stream_id);
      return;
    }
    case Machine::kRooted: {
      const bool root = stream.index == 0;
      if (phase.op == Op::kScatter && root) {
        for (uint32_t peer = 1; peer < n; ++peer) send_message(stream_id, peer, stream.message);
        finish_phase(stream_id);
      } else if (phase.op == Op::kGather && !root) {
        send_message(stream_id, 0, stream.message);
        finish_phase(stream_id);
      } else if (--stream.waiting == 0) {
        finish_phase(stream_id);
      }
      return;
    }
    case Machine::kInSwitch:
      if (stream.round == 0) {
        send_up(stream_id);
        post_receive_from(stream_id, kFromSwitch);
        stream.round = 1;
      } else {
        finish_phase(stream_id);
      }
      return;
    case Machine::kBarrier: {
      const uint32_t rounds = ceil_log2(n);
      if (stream.round == rounds) {
        finish_phase(stream_id);
        return;
      }
      const uint32_t distance = 1u << stream.round;
      send_message(stream_id, (stream.index + distance) % n, 1);
      post_receive(stream_id, (stream.index + n - distance % n) % n);
      ++stream.round;
      return;
    }
    case Machine::kTree: {
      const bool mirrored = (stream.chunk % 2) == 1;
      const uint32_t position = mirrored ? n - 1 - stream.index : stream.index;
      auto actual = [&](uint32_t pos) { return mirrored ? n - 1 - pos : pos; };
      uint32_t children = 0;
      if (2 * position + 1 < n) ++children;
      if (2 * position + 2 < n) ++children;
      if (stream.round == 0) {
        // Gathering: one continuation per child's message (or, for a leaf, the start). Count the
        // continuations, not the receives, so no bundle of this phase is still pending at its end.
        if (children > 0 && ++stream.received < children) return;
        if (position == 0) {
          for (uint32_t child = 1; child <= children; ++child) {
            send_message(stream_id, actual(2 * position + child), stream.message);
          }
          finish_phase(stream_id);
          return;
        }
        send_message(stream_id, actual((position - 1) / 2), stream.message);
        post_receive(stream_id, actual((position - 1) / 2));
        stream.round = 1;
        return;
      }
      // The parent's reply came back: pass it down and finish.
      for (uint32_t child = 1; child <= children; ++child) {
        send_message(stream_id, actual(2 * position + child), stream.message);
      }
      finish_phase(stream_id);
      return;
    }
  }
}

void CollectiveEngine::on_received(uint32_t stream_id) {
  Stream& stream = streams_[stream_id];
  const Phase& phase = stream.phases[stream.phase_index];
  switch (stream.machine) {
    case Machine::kRing:
    case Machine::kHalvingDoubling:
      ++stream.received;
      insert_packet(stream_id);
      return;
    case Machine::kChain:
      bundle(stream_id, phase.op == Op::kReduce, stream.message);
      return;
    case Machine::kRooted:
    case Machine::kBarrier:
    case Machine::kInSwitch:
      bundle(stream_id, false, 0);
      return;
    case Machine::kTree:
      bundle(stream_id, true, stream.message);
      return;
  }
}

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
  const uint32_t token = new_message();
  Message& message = messages_[token];
  message.p2p = true;
  message.src = src;
  message.dst = dst;
  message.bytes = bytes;
  message.tag = tag;
  message.cookie = cookie;
  message.node_id = node_id;
  message.scope = scope;
  message.run = run;
  p2p_[P2pKey{src, dst, tag, scope}].sent.push_back({bytes, cookie, node_id, run});
  ++messages_sent_;
  network_.send(src, dst, bytes, token);
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
  if (options_.mirror || instance.finished == groups_[instance.group].ranks.size()) {
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
  return lines;
}

}  // namespace orrery::sys
