#include "replay/replay.h"

#include <cmath>
#include <filesystem>
#include <set>
#include <unordered_map>

#include "convert/kineto_trace.h"
#include "convert/pytorch_converter.h"
#include "convert/rank_directory.h"
#include "replay/executor.h"
#include "replay/op_cost.h"
#include "replay/recorded_times.h"

namespace orrery::replay {

namespace {

// The readers name orrery convert's flags (--host, --device); the replay's are the trace argument
// and --profile.
Error in_replay_terms(const Error& error) {
  std::string message = error.message();
  for (const auto& [convert_flag, replay_flag] :
       {std::pair<std::string_view, std::string_view>{"give it with --host",
                                                      "give it as the trace"},
        {"give it with --device", "give it with --profile"}}) {
    if (const size_t at = message.find(convert_flag); at != std::string::npos)
      message.replace(at, convert_flag.size(), replay_flag);
  }
  return Error(error.kind(), message);
}

const ChakraProtoMsg::AttributeProto* find_attr(const ChakraProtoMsg::Node& node,
                                                std::string_view name) {
  for (const ChakraProtoMsg::AttributeProto& attr : node.attr()) {
    if (attr.name() == name) return &attr;
  }
  return nullptr;
}

double mean_us(const std::vector<int64_t>& samples) {
  std::vector<double> us;
  for (const int64_t ns : samples) us.push_back(static_cast<double>(ns) / 1000.0);
  return spread_of(us).mean;
}

}  // namespace

Expected<uint64_t> emit_chakra(const convert::HostTrace& host, const ReplayPlan& plan,
                               const SessionResult& session, uint32_t world,
                               const std::string& path) {
  convert::ConvertOptions options;
  options.world_size = world;
  Expected<convert::Conversion> conversion = convert::convert_pytorch_trace(host, nullptr, options);
  if (!conversion) return conversion.error();
  // Measured means, in whole microseconds (Chakra's duration_micros), by host node id; a
  // collective's by the node that describes it. Means, not medians: the sum of the operators'
  // means is the mean time the operators of an iteration took, which the simulator then adds up.
  std::unordered_map<uint64_t, uint64_t> measured;
  std::set<uint64_t> communicating;  // host nodes that describe a collective or send/receive
  std::unordered_map<uint64_t, OpCost> costs;  // num_ops and tensor_size of the ops that have them
  for (const ReplayOp& op : plan.ops) {
    if (const std::optional<OpCost> cost = op_cost(plan, op)) costs[op.node_id] = *cost;
  }
  for (size_t index = 0; index < plan.ops.size(); ++index) {
    const OpResult& outcome = session.ops[index];
    if (!outcome.replayed || outcome.samples.empty()) continue;
    const uint64_t micros =
        static_cast<uint64_t>(std::llround(std::max(0.0, mean_us(outcome.samples))));
    const ReplayOp& op = plan.ops[index];
    measured[op.node_id] = micros;
    if (op.comm) {
      // The converter puts a communication at the node that describes it, or at its c10d call
      // when the observer filed that node elsewhere (convert::pair_comm_calls): both find it.
      measured[op.comm->described_node] = micros;
      communicating.insert(op.comm->described_node);
      communicating.insert(op.node_id);
    }
  }
  // Where the replay waits for a communication (the first later replayed compute op that shares
  // a storage with it), the simulation waits too: that op depends on the communication node.
  // Without the edge the simulated optimizer updated the parameters before the gradients'
  // all-reduce had ended.
  std::unordered_map<uint64_t, uint64_t> waiter_of;  // issuing host node -> waiting host node
  {
    std::vector<std::vector<uint32_t>> storages(plan.ops.size());
    for (size_t index = 0; index < plan.ops.size(); ++index)
      storages[index] = op_storages(plan, plan.ops[index]);
    for (size_t at = 0; at < plan.ops.size(); ++at) {
      const ReplayOp& comm = plan.ops[at];
      if (!comm.comm || !session.ops[at].replayed) continue;
      for (size_t later = at + 1; later < plan.ops.size(); ++later) {
        const ReplayOp& op = plan.ops[later];
        if (op.kind != OpKind::kCompute || !session.ops[later].replayed) continue;
        if (share_storage(storages[at], storages[later])) {
          waiter_of[comm.comm->described_node] = op.node_id;
          waiter_of[comm.node_id] = op.node_id;
          break;
        }
      }
    }
  }
  const auto in_iteration = [&plan](uint64_t id) {
    return id >= plan.iteration_begin && id < plan.iteration_end;
  };
  std::vector<ChakraProtoMsg::Node> kept;
  std::set<uint64_t> kept_ids;
  for (ChakraProtoMsg::Node& node : conversion->nodes) {
    uint64_t host_id = node.id();
    if (const ChakraProtoMsg::AttributeProto* launcher = find_attr(node, "host_op_id"))
      host_id = static_cast<uint64_t>(launcher->int64_val());
    if (node.type() != ChakraProtoMsg::METADATA_NODE && !in_iteration(host_id)) continue;
    const bool device_node = find_attr(node, "host_op_id") != nullptr;
    const auto found = measured.find(host_id);
    if (device_node) {
      // A collective stands for its host op's communication; kernels have no replayed time.
      node.set_duration_micros(
          found != measured.end() && node.type() == ChakraProtoMsg::COMM_COLL_NODE ? found->second
                                                                                   : 0);
      if (node.type() == ChakraProtoMsg::COMM_SEND_NODE ||
          node.type() == ChakraProtoMsg::COMM_RECV_NODE) {
        node.set_duration_micros(found != measured.end() ? found->second : 0);
      }
    } else {
      // The host op that issues a communication takes none of its time: the communication node
      // carries it, timed by the simulator's network (counting it here too had made the DDP
      // step's simulation 13% longer than its replay).
      const bool issues = communicating.count(host_id) != 0;
      node.set_duration_micros(found != measured.end() && !issues ? found->second : 0);
      if (const auto cost = costs.find(node.id()); cost != costs.end()) {
        ChakraProtoMsg::AttributeProto* flops = node.add_attr();
        flops->set_name("num_ops");
        flops->set_uint64_val(cost->second.flops);
        ChakraProtoMsg::AttributeProto* bytes = node.add_attr();
        bytes->set_name("tensor_size");
        bytes->set_uint64_val(cost->second.bytes);
      }
    }
    kept_ids.insert(node.id());
    kept.push_back(std::move(node));
  }
  std::unordered_map<uint64_t, size_t> index_of;
  for (size_t index = 0; index < kept.size(); ++index) index_of[kept[index].id()] = index;
  for (const ChakraProtoMsg::Node& node : kept) {
    const bool comm = node.type() == ChakraProtoMsg::COMM_COLL_NODE ||
                      node.type() == ChakraProtoMsg::COMM_SEND_NODE ||
                      node.type() == ChakraProtoMsg::COMM_RECV_NODE;
    const ChakraProtoMsg::AttributeProto* launcher = find_attr(node, "host_op_id");
    if (!comm || launcher == nullptr) continue;
    const auto waiter = waiter_of.find(static_cast<uint64_t>(launcher->int64_val()));
    if (waiter == waiter_of.end()) continue;
    if (const auto at = index_of.find(waiter->second); at != index_of.end())
      kept[at->second].add_data_deps(node.id());
  }
  for (ChakraProtoMsg::Node& node : kept) {
    google::protobuf::RepeatedField<uint64_t> deps;
    for (const uint64_t dep : node.data_deps()) {
      if (kept_ids.count(dep) != 0) deps.Add(dep);
    }
    *node.mutable_data_deps() = std::move(deps);
  }
  conversion->nodes = std::move(kept);
  if (const std::filesystem::path parent = std::filesystem::path(path).parent_path();
      !parent.empty()) {
    std::error_code code;
    std::filesystem::create_directories(parent, code);
  }
  if (Status written = convert::write_conversion(*conversion, path); !written)
    return written.error();
  return static_cast<uint64_t>(conversion->nodes.size());
}

Expected<ReplayOutcome> replay(const ReplayOptions& options, Communicator& communicator) {
  const uint32_t rank = communicator.rank();
  const uint32_t world = communicator.size();
  std::string trace_path = options.trace;
  std::string profile_path = options.profile;
  uint32_t job_ranks = 0;
  uint32_t trace_rank = rank;
  if (!options.dir.empty()) {
    Expected<convert::DirectoryPlan> set = convert::plan_rank_directory(options.dir);
    if (!set) return set.error();
    job_ranks = static_cast<uint32_t>(set->ranks.size());
    if (options.rank) {
      if (world != 1) {
        return Error::make(
            ErrorKind::kInvalidArgument,
            "--rank replays one rank alone; with several processes every one replays "
            "its own rank");
      }
      if (*options.rank >= job_ranks) {
        return Error::make(ErrorKind::kInvalidArgument, "--rank {}: {} has ranks 0 to {}",
                           *options.rank, options.dir, job_ranks - 1);
      }
      trace_rank = *options.rank;
    } else if (world != job_ranks && world != 1) {
      return Error::make(
          ErrorKind::kInvalidArgument,
          "{} holds {} ranks and the replay runs {} processes: run mpirun -np {} (or "
          "--backend gloo, which starts them)",
          options.dir, job_ranks, world, job_ranks);
    }
    trace_path = set->ranks[trace_rank].host;
    profile_path = set->ranks[trace_rank].device;
  }
  Expected<convert::HostTrace> host = convert::read_host_trace(trace_path);
  if (!host) return in_replay_terms(host.error());
  PlanOptions plan_options;
  plan_options.iteration = options.iteration;
  Expected<ReplayPlan> plan = build_plan(*host, plan_options);
  if (!plan) return plan.error();
  std::optional<RecordedTimes> recorded;
  if (!profile_path.empty()) {
    Expected<convert::KinetoTrace> profile = convert::read_kineto_trace(profile_path);
    if (!profile) return in_replay_terms(profile.error());
    recorded = recorded_times(*plan, *host, *profile);
  }
  ExecutorOptions executor_options;
  executor_options.seed = options.seed + trace_rank;
  executor_options.threads = options.threads;
  executor_options.flush_subnormals = options.flush_subnormals;
  executor_options.autograd = options.autograd;
  Expected<std::unique_ptr<Executor>> executor = Executor::create(*plan, executor_options);
  if (!executor) return executor.error();
  SessionOptions session_options;
  session_options.warmup = options.warmup;
  session_options.iterations = options.iterations;
  session_options.async_comm = options.async_comm;
  session_options.job_ranks = job_ranks;
  Expected<SessionResult> session = run_session(*plan, **executor, communicator, session_options);
  if (!session) return session.error();

  ReplayOutcome outcome;
  ReportInputs inputs;
  inputs.plan = &*plan;
  inputs.recorded = recorded ? &*recorded : nullptr;
  inputs.session = &*session;
  inputs.libtorch = Executor::library_version();
  inputs.threads = (*executor)->threads();
  inputs.subnormals_flushed = options.flush_subnormals;
  inputs.autograd_passes = (*executor)->autograd_passes();
  inputs.adjustments = (*executor)->adjustments();
  inputs.storage_bytes = (*executor)->allocated_bytes();
  outcome.report = make_rank_report(inputs);
  if (world == 1 && options.rank) outcome.report.rank = trace_rank;
  if (!options.emit_chakra.empty()) {
    outcome.emitted = fmt::format("{}.{}.et", options.emit_chakra, trace_rank);
    Expected<uint64_t> nodes =
        emit_chakra(*host, *plan, *session, std::max(world, job_ranks), outcome.emitted);
    if (!nodes) return nodes.error();
    outcome.emitted_nodes = *nodes;
  }
  const nlohmann::json mine = rank_json(outcome.report);
  Expected<std::vector<std::string>> all = communicator.all_gather_text(mine.dump());
  if (!all) return all.error();
  for (const std::string& text : *all) {
    outcome.ranks.push_back(nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false));
  }
  return outcome;
}

}  // namespace orrery::replay
