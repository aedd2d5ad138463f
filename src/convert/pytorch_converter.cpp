#include "convert/pytorch_converter.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <tuple>
#include <unordered_map>

#include "chakra/comm_groups.h"
#include "chakra/trace_file.h"
#include "convert/collectives.h"
#include "convert/trace_linker.h"
#include "core/checked.h"
#include "core/units.h"

namespace orrery::convert {

namespace {

using ChakraProtoMsg::Node;

constexpr size_t kKeptExamples = 10;
// A job size that bounds the ranks of process groups when the real one is not known.
constexpr uint32_t kUnknownWorldBound = 1U << 16;

class Notes {
 public:
  void add(const std::string& what, bool dropped, std::string example, uint64_t count = 1) {
    auto [found, inserted] = index_.emplace(what, notes_.size());
    if (inserted) notes_.push_back({what, dropped, 0, {}});
    ConversionNote& note = notes_[found->second];
    note.count += count;
    if (!example.empty() && note.examples.size() < kKeptExamples)
      note.examples.push_back(std::move(example));
  }
  std::vector<ConversionNote> take() { return std::move(notes_); }

 private:
  std::vector<ConversionNote> notes_;
  std::map<std::string, size_t> index_;
};

std::string shortened(std::string_view text, size_t limit = 60) {
  if (text.size() <= limit) return std::string(text);
  return std::string(text.substr(0, limit - 3)) + "...";
}

std::string describe_op(const HostOp& op) {
  return fmt::format("node {} '{}'", op.id, shortened(op.name));
}

uint64_t micros(int64_t ns) { return ns <= 0 ? 0 : static_cast<uint64_t>((ns + 500) / 1000); }

void add_bool(Node& node, const char* name, bool value) {
  auto* attr = node.add_attr();
  attr->set_name(name);
  attr->set_bool_val(value);
}
void add_int(Node& node, const char* name, int64_t value) {
  auto* attr = node.add_attr();
  attr->set_name(name);
  attr->set_int64_val(value);
}
void add_string(Node& node, const char* name, const std::string& value) {
  auto* attr = node.add_attr();
  attr->set_name(name);
  attr->set_string_val(value);
}

std::string dump(const nlohmann::json* value) {
  if (value == nullptr) return "";
  return value->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void set_io(ChakraProtoMsg::IOInfo* info, const HostIo& io) {
  if (!io.values_text.empty()) info->set_values(io.values_text);
  if (!io.shapes_text.empty()) info->set_shapes(io.shapes_text);
  if (!io.types_text.empty()) info->set_types(io.types_text);
}

bool contains_nocase(std::string_view text, std::string_view word) {
  const auto found =
      std::search(text.begin(), text.end(), word.begin(), word.end(), [](char a, char b) {
        return std::tolower(static_cast<unsigned char>(a)) ==
               std::tolower(static_cast<unsigned char>(b));
      });
  return found != text.end();
}

// The process groups a process_group:init op carries: its first input value when it is text.
std::string process_group_text(const HostOp& op) {
  if (op.inputs.values != nullptr && op.inputs.values->is_array() && !op.inputs.values->empty() &&
      (*op.inputs.values)[0].is_string()) {
    return (*op.inputs.values)[0].get<std::string>();
  }
  return op.inputs.values_text;
}

// A node of the output that runs on the device: a kernel, a copy or a communication.
struct DeviceNode {
  size_t launcher = 0;            // host op index
  std::optional<size_t> event;    // Kineto event
  std::optional<size_t> entry;    // GPU entry of a linked host trace
  std::optional<CommSpec> comm;   // a communication node
  std::optional<size_t> comm_op;  // the nccl op it stands for
  int64_t launch_ns = 0;
  int64_t correlation = -1;
  int64_t gpu_ts_ns = 0;
  int64_t dur_ns = 0;
  int64_t stream = -1;
  bool memory = false;
  std::string name;
  uint64_t id = 0;
};

}  // namespace

Expected<Conversion> convert_pytorch_trace(const HostTrace& host, const KinetoTrace* kineto,
                                           const ConvertOptions& options) {
  Conversion conversion;
  ConversionReport& report = conversion.report;
  Notes notes;
  const std::vector<HostOp>& ops = host.ops();
  report.host_path = host.path();
  report.schema = host.schema();
  report.host_nodes = ops.size();

  if (kineto != nullptr) {
    report.device_path = kineto->path();
    report.kineto_events = kineto->total_events();
    report.device_array_form = kineto->array_form();
    report.kineto_rank = kineto->rank();
    report.kineto_world_size = kineto->world_size();
    const std::vector<int64_t>& pids = kineto->cpu_pids();
    if (host.pid() && !pids.empty() && !std::binary_search(pids.begin(), pids.end(), *host.pid())) {
      if (!options.allow_pid_mismatch) {
        return Error::make(ErrorKind::kInvalidArgument,
                           "{}: the host trace comes from process {}, the Kineto trace {} from "
                           "process {}: they are not the same run (--allow-pid-mismatch links "
                           "them anyway, by operator names)",
                           host.path(), *host.pid(), kineto->path(), pids.front());
      }
      notes.add("Kineto trace from another process, linked by operator names anyway", false,
                fmt::format("host pid {}, Kineto pid {}", *host.pid(), pids.front()));
    }
  }

  // ---- The process groups -----------------------------------------------------------------------
  uint32_t world = options.world_size;
  if (world == 0 && kineto != nullptr && kineto->world_size() && *kineto->world_size() > 0)
    world = static_cast<uint32_t>(*kineto->world_size());
  chakra::CommGroups groups(world == 0 ? kUnknownWorldBound : world);
  for (const HostOp& op : ops) {
    if (op.kind != HostOpKind::kProcessGroup) continue;
    const std::string text = process_group_text(op);
    if (Status status = chakra::add_groups_from_metadata(
            text, fmt::format("{}: node {}", host.path(), op.id), groups);
        !status) {
      return status.error();
    }
    report.process_group_texts.push_back(text);
  }
  std::optional<std::string> kineto_groups;
  if (report.process_group_texts.empty() && kineto != nullptr && kineto->pg_config() != nullptr) {
    kineto_groups = dump(kineto->pg_config());
    if (Status status = chakra::add_groups_from_metadata(
            *kineto_groups, kineto->path() + ": distributedInfo.pg_config", groups);
        !status) {
      return status.error();
    }
    report.process_group_texts.push_back(*kineto_groups);
  }

  // ---- Host ops: the chain of CPU work ----------------------------------------------------------
  std::unordered_map<uint64_t, std::vector<size_t>> children;
  for (size_t index = 0; index < ops.size(); ++index) {
    const HostOp& op = ops[index];
    if (!op.parent) continue;
    children[*op.parent].push_back(index);
    // A parent outside the file (an excerpt of a trace, or a damaged one): the op still converts,
    // but nothing above it (its collective, its launching op) can be found through it.
    if (!host.find(*op.parent)) {
      notes.add("ops whose parent is not in the trace (taken as top-level)", false,
                fmt::format("{} (parent {})", describe_op(op), *op.parent));
    }
  }
  // Parents that lead back to the op itself through others: PyTorch's call tree has no such
  // cycle (its root, the process annotation, is its own parent, which is how a root is written),
  // so the file is damaged. The ops still convert (the chain follows ids, not parents), but the
  // tree above them means nothing; each op on such a cycle is named once. Walks share their marks:
  // O(ops).
  {
    std::vector<uint8_t> state(ops.size(), 0);  // 0 unseen, 1 on the current walk, 2 done
    std::vector<size_t> walk;
    for (size_t start = 0; start < ops.size(); ++start) {
      std::optional<size_t> current = start;
      while (current && state[*current] == 0) {
        state[*current] = 1;
        walk.push_back(*current);
        const std::optional<size_t> parent =
            ops[*current].parent ? host.find(*ops[*current].parent) : std::nullopt;
        current = parent == current ? std::nullopt : parent;  // a root ends the walk
      }
      if (current && state[*current] == 1) {
        // walk from *current to its end is the cycle.
        bool on_cycle = false;
        for (const size_t index : walk) {
          on_cycle = on_cycle || index == *current;
          if (on_cycle) {
            notes.add(
                "ops whose parents form a cycle (the call tree is damaged; taken as "
                "top-level)",
                false, fmt::format("{} (parent {})", describe_op(ops[index]), *ops[index].parent));
          }
        }
      }
      for (const size_t index : walk) state[index] = 2;
      walk.clear();
    }
  }
  std::vector<size_t> chain;
  uint64_t max_id = 0;
  for (size_t index = 0; index < ops.size(); ++index) {
    const HostOp& op = ops[index];
    max_id = std::max(max_id, op.id);
    if (op.kind == HostOpKind::kAnnotation) {
      notes.add("thread and process annotation nodes (structure only)", true, describe_op(op));
    } else if (op.kind == HostOpKind::kCpuOp || op.kind == HostOpKind::kProcessGroup) {
      chain.push_back(index);
    }
  }
  std::sort(chain.begin(), chain.end(),
            [&ops](size_t a, size_t b) { return ops[a].id < ops[b].id; });
  std::vector<int64_t> chain_position(ops.size(), -1);
  for (size_t position = 0; position < chain.size(); ++position)
    chain_position[chain[position]] = static_cast<int64_t>(position);

  LinkResult link;
  if (kineto != nullptr) {
    link = link_traces(host, *kineto);
    report.link_method = link.method;
    report.host_ops_linkable = link.host_ops_linkable;
    report.host_ops_linked = link.host_ops_matched;
    report.gpu_events = link.kineto_gpu_events;
    report.gpu_events_linked = link.launches.size();
    for (const ThreadPairing& pair : link.threads) {
      report.thread_pairs.push_back(
          fmt::format("host thread {} -> Kineto thread {} ({} of {})", pair.host_tid,
                      pair.kineto_tid, format_count(pair.matched), format_count(pair.host_ops)));
    }
  }

  // When each chain op launched its work: its Kineto start, else that of the op before it.
  std::vector<int64_t> launch_ns(ops.size(), 0);
  {
    int64_t carried = link.first_ns;
    for (const size_t index : chain) {
      if (kineto != nullptr && link.host_start_ns[index]) carried = *link.host_start_ns[index];
      launch_ns[index] = carried;
    }
  }

  // ---- Communication ops ------------------------------------------------------------------------
  std::vector<std::optional<CommSpec>> comm_of(ops.size());
  // The op whose name a communication node takes: its own, or the backend op it was moved from.
  std::vector<size_t> comm_name_of(ops.size());
  for (size_t index = 0; index < ops.size(); ++index) comm_name_of[index] = index;
  for (const size_t index : chain) {
    const HostOp& op = ops[index];
    if (is_backend_comm_op(op.name)) {
      comm_of[index] = describe_communication(host, index, nullptr);
      if (!comm_of[index]) {
        notes.add(
            "NCCL or Gloo ops that name no collective, send or receive (kept as host ops only)",
            false, describe_op(op));
      }
      continue;
    }
    if (op.name != "record_param_comms") continue;
    // A record_param_comms with a backend op (nccl:*, gloo:*) under it is described by that op.
    // Without one, it stands for the communication itself, when its collective name moves data
    // ("wait" does not).
    bool has_backend_child = false;
    if (const auto found = children.find(op.id); found != children.end()) {
      for (const size_t child : found->second)
        has_backend_child = has_backend_child || is_backend_comm_op(ops[child].name);
    }
    if (has_backend_child) continue;
    comm_of[index] = describe_communication(host, index, nullptr);
    if (!comm_of[index]) {
      const std::optional<std::string> what = record_param_comms_name(host, op);
      notes.add("record_param_comms that move no data (kept as host ops only)", false,
                fmt::format("{} ('{}')", describe_op(op), what ? shortened(*what, 30) : ""));
    }
  }
  // A c10d call whose backend op the trace does not hold (PyTorch 1.13's observer can leave out
  // the last asynchronous Gloo op of a step) stands for its communication itself; without it the
  // ranks' converted traces disagreed on their collectives, and the simulation could not finish.
  // And a backend op filed outside its call (under the next call, by the same observer) is
  // issued where its call was: otherwise one rank's trace issued its two all-reduces in the other
  // order than the other rank's, and the simulation paired different sizes.
  {
    const CallPairing pairing = pair_comm_calls(host);
    for (const size_t index : chain) {
      if (pairing.stands_alone[index]) {
        comm_of[index] = describe_communication(host, index, nullptr);
        if (comm_of[index]) {
          notes.add("c10d calls whose backend op the trace does not hold (the call stands for it)",
                    false, describe_op(ops[index]));
        }
      } else if (const std::optional<size_t> call = pairing.call_of[index];
                 call && comm_of[index] && pairing.filed_elsewhere[index]) {
        comm_of[*call] = std::move(comm_of[index]);
        comm_of[index].reset();
        comm_name_of[*call] = index;
        notes.add("backend ops filed outside their c10d call (issued where the call was)", false,
                  fmt::format("{} for {}", describe_op(ops[index]), describe_op(ops[*call])));
      }
    }
  }
  // The communication op a launching op belongs to: itself or an ancestor named nccl:*, or the
  // nccl:* child of a record_param_comms op.
  const auto comm_op_of = [&](size_t index) -> std::optional<size_t> {
    std::optional<size_t> current = index;
    for (int depth = 0; depth < 4 && current; ++depth) {
      if (comm_of[*current]) return current;
      const HostOp& op = ops[*current];
      if (op.name == "record_param_comms") {
        const auto found = children.find(op.id);
        if (found != children.end()) {
          for (const size_t child : found->second)
            if (comm_of[child]) return child;
        }
      }
      if (!op.parent) break;
      current = host.find(*op.parent);
    }
    return std::nullopt;
  };

  // ---- Device nodes -----------------------------------------------------------------------------
  std::vector<DeviceNode> device;
  std::map<size_t, std::vector<size_t>> comm_kernels;  // nccl op -> indices into `device`
  if (kineto != nullptr) {
    const std::vector<KinetoEvent>& events = kineto->events();
    for (const GpuLaunch& launch : link.launches) {
      const KinetoEvent& event = events[launch.event];
      DeviceNode node;
      node.launcher = launch.host_op;
      node.event = launch.event;
      node.launch_ns = launch.launch_ns;
      node.correlation = event.correlation;
      node.gpu_ts_ns = event.ts_ns;
      node.dur_ns = event.dur_ns;
      node.stream = event.stream >= 0 ? event.stream : event.tid;
      node.memory = event.category != KinetoCategory::kKernel;
      node.name = std::string(event.name);
      if (event.category == KinetoCategory::kKernel && contains_nocase(event.name, "nccl")) {
        if (const std::optional<size_t> comm_op = comm_op_of(launch.host_op)) {
          comm_kernels[*comm_op].push_back(device.size());
        } else {
          notes.add("NCCL kernels outside any host collective (kept as compute)", false,
                    fmt::format("correlation {} '{}' launched by {}", event.correlation,
                                shortened(event.name), describe_op(ops[launch.host_op])));
        }
      }
      device.push_back(std::move(node));
    }
    const auto reason_text = [](GpuDropReason reason) {
      switch (reason) {
        case GpuDropReason::kNoRuntimeCall:
          return "GPU events with no runtime call of their correlation (launched before the "
                 "profile began, or the call was lost)";
        case GpuDropReason::kOutsideCpuOp:
          return "GPU events launched outside any CPU op";
        case GpuDropReason::kLauncherNotInHost:
          return "GPU events launched by Kineto ops that are not in the host trace (other "
                 "iterations, or ops the observer did not record)";
      }
      return "GPU events not linked";
    };
    for (const DroppedGpuEvent& dropped : link.dropped) {
      const KinetoEvent& event = events[dropped.event];
      std::string example =
          fmt::format("correlation {} '{}'", event.correlation, shortened(event.name, 48));
      if (dropped.launcher)
        example += fmt::format(" from '{}'", shortened(events[*dropped.launcher].name, 40));
      notes.add(reason_text(dropped.reason), true, std::move(example));
    }
    std::vector<bool> event_matched(events.size(), false);
    for (const int64_t event : link.host_to_kineto)
      if (event >= 0) event_matched[static_cast<size_t>(event)] = true;
    for (size_t index = 0; index < events.size(); ++index) {
      if (events[index].is_cpu() && !event_matched[index]) {
        notes.add("Kineto CPU events not in the host trace (not converted)", true,
                  fmt::format("'{}' (External id {})", shortened(events[index].name, 48),
                              events[index].external_id));
      }
    }
    for (const auto& [what, count] : kineto->ignored()) {
      notes.add("Kineto events of other kinds (not used)", true,
                fmt::format("{} x {}", what, format_count(count)), count);
    }
  }
  // GPU entries of an already linked host trace.
  for (size_t index = 0; index < ops.size(); ++index) {
    const HostOp& op = ops[index];
    if (op.kind != HostOpKind::kGpuOp) continue;
    const std::optional<size_t> parent = op.parent ? host.find(*op.parent) : std::nullopt;
    if (!parent || chain_position[*parent] < 0) {
      notes.add("GPU entries whose launching op is not in the trace", true, describe_op(op));
      continue;
    }
    DeviceNode node;
    node.launcher = *parent;
    node.entry = index;
    node.launch_ns = launch_ns[*parent];
    // Saturating, not a cast that is undefined out of range: a duration beyond any run is then
    // refused by validation with the node named (docs/numbers.md).
    node.gpu_ts_ns = op.ts_us ? saturating_trunc_i64(*op.ts_us * 1000.0) : 0;
    node.dur_ns = op.exclusive_dur_us ? saturating_trunc_i64(*op.exclusive_dur_us * 1000.0) : 0;
    node.stream = op.stream.value_or(-1);
    node.name = std::string(op.name);
    if (contains_nocase(op.name, "nccl")) {
      if (const std::optional<size_t> comm_op = comm_op_of(*parent)) {
        comm_kernels[*comm_op].push_back(device.size());
      }
    }
    device.push_back(std::move(node));
  }
  // One communication node per nccl op: its first NCCL kernel, else the op itself.
  for (const size_t index : chain) {
    if (!comm_of[index]) continue;
    const auto found = comm_kernels.find(index);
    if (found != comm_kernels.end() && !found->second.empty()) {
      std::vector<size_t> kernels = found->second;
      std::sort(kernels.begin(), kernels.end(), [&device](size_t a, size_t b) {
        return std::tie(device[a].gpu_ts_ns, device[a].launch_ns, a) <
               std::tie(device[b].gpu_ts_ns, device[b].launch_ns, b);
      });
      DeviceNode& first = device[kernels.front()];
      const KinetoEvent* event =
          first.event && kineto != nullptr ? &kineto->events()[*first.event] : nullptr;
      first.comm = describe_communication(host, comm_name_of[index], event);
      first.comm_op = index;
      for (size_t extra = 1; extra < kernels.size(); ++extra) {
        notes.add("further NCCL kernels of one collective (kept as compute)", false,
                  fmt::format("'{}' of {}", shortened(device[kernels[extra]].name, 40),
                              describe_op(ops[index])));
      }
      continue;
    }
    if (kineto != nullptr) {
      notes.add(
          "communication ops with no kernel in the Kineto trace (the collective comes from the "
          "host op)",
          false, describe_op(ops[index]));
    }
    DeviceNode node;
    node.launcher = index;
    node.comm = comm_of[index];
    node.comm_op = index;
    node.launch_ns = launch_ns[index];
    node.name = std::string(ops[comm_name_of[index]].name);
    device.push_back(std::move(node));
  }

  // Device ids in launch order, after every host id.
  std::vector<size_t> device_order(device.size());
  for (size_t slot = 0; slot < device.size(); ++slot) device_order[slot] = slot;
  std::sort(device_order.begin(), device_order.end(), [&](size_t a, size_t b) {
    const DeviceNode& x = device[a];
    const DeviceNode& y = device[b];
    return std::tie(x.launch_ns, ops[x.launcher].id, x.correlation, a) <
           std::tie(y.launch_ns, ops[y.launcher].id, y.correlation, b);
  });
  const bool synth_metadata = kineto_groups.has_value();
  const uint64_t metadata_id = max_id + 1;
  uint64_t next_id = max_id + (synth_metadata ? 2 : 1);
  for (const size_t slot : device_order) device[slot].id = next_id++;

  // ---- Output nodes -----------------------------------------------------------------------------
  std::vector<Node>& nodes = conversion.nodes;
  nodes.reserve(chain.size() + device.size() + 1);
  const int64_t first_ns = link.first_ns;
  const auto relative_micros = [first_ns](int64_t ns) {
    return ns > first_ns ? micros(ns - first_ns) : 0;
  };
  if (synth_metadata) {
    Node& node = nodes.emplace_back();
    node.set_id(metadata_id);
    node.set_name("## process_group:init ## (from Kineto distributedInfo.pg_config)");
    node.set_type(ChakraProtoMsg::METADATA_NODE);
    node.mutable_inputs()->set_values(*kineto_groups);
    add_bool(node, "is_cpu_op", true);
    notes.add("METADATA node made from the Kineto trace's process groups", false,
              fmt::format("node {}", metadata_id));
  }
  bool any_host_duration = false;
  uint64_t unlinked_ops = 0;
  for (size_t position = 0; position < chain.size(); ++position) {
    const HostOp& op = ops[chain[position]];
    Node& node = nodes.emplace_back();
    node.set_id(op.id);
    node.set_name(std::string(op.name));
    if (position > 0) node.add_data_deps(ops[chain[position - 1]].id);
    if (op.kind == HostOpKind::kProcessGroup) {
      node.set_type(ChakraProtoMsg::METADATA_NODE);
      node.mutable_inputs()->set_values(process_group_text(op));
      add_bool(node, "is_cpu_op", true);
      continue;
    }
    node.set_type(ChakraProtoMsg::COMP_NODE);
    ++report.host_ops;
    if (kineto != nullptr) {
      const std::optional<int64_t>& duration = link.host_duration_ns[chain[position]];
      if (duration) {
        node.set_duration_micros(micros(*duration));
        node.set_start_time_micros(relative_micros(*link.host_start_ns[chain[position]]));
      } else {
        ++unlinked_ops;
        notes.add("host ops with no Kineto event (duration 0)", false, describe_op(op));
      }
    } else if (op.exclusive_dur_us) {
      any_host_duration = true;
      node.set_duration_micros(micros(saturating_trunc_i64(*op.exclusive_dur_us * 1000.0)));
    }
    set_io(node.mutable_inputs(), op.inputs);
    set_io(node.mutable_outputs(), op.outputs);
    add_bool(node, "is_cpu_op", true);
    add_int(node, "tid", op.tid);
    if (op.rf_id) add_int(node, "rf_id", *op.rf_id);
  }

  // Device nodes.
  std::vector<size_t> node_of_device(device.size());
  std::map<int64_t, std::vector<size_t>> by_stream;  // stream -> device slots
  for (const size_t slot : device_order) {
    DeviceNode& item = device[slot];
    node_of_device[slot] = nodes.size();
    Node& node = nodes.emplace_back();
    node.set_id(item.id);
    node.set_name(item.name);
    node.add_data_deps(ops[item.launcher].id);
    node.set_duration_micros(micros(item.dur_ns));
    if (item.event) node.set_start_time_micros(relative_micros(item.gpu_ts_ns));
    if (item.comm) {
      const CommSpec& spec = *item.comm;
      CommRecord record;
      record.node_id = item.id;
      record.host_id = ops[*item.comm_op].id;
      record.bytes = spec.bytes;
      record.pg_name = spec.pg_name;
      if (spec.size_source.empty()) {
        notes.add("communication ops with no size in the trace (comm_size 0)", false,
                  describe_op(ops[*item.comm_op]));
      }
      if (spec.name.kind == CommKind::kCollective) {
        node.set_type(ChakraProtoMsg::COMM_COLL_NODE);
        add_int(node, "comm_type", spec.name.type);
        add_int(node, "comm_size", static_cast<int64_t>(std::min<uint64_t>(spec.bytes, INT64_MAX)));
        if (!spec.pg_name.empty()) add_string(node, "pg_name", spec.pg_name);
        record.comm_type = spec.name.type;
      } else {
        const bool send = spec.name.kind == CommKind::kSend;
        if (!spec.peer_group_rank) {
          return Error::make(ErrorKind::kParse,
                             "{}: {}: {} without a peer rank (expected it among the inputs of "
                             "the c10d call or record_param_comms)",
                             host.path(), describe_op(ops[*item.comm_op]),
                             send ? "a send" : "a receive");
        }
        int64_t peer = *spec.peer_group_rank;
        if (spec.peer_global_rank) {
          peer = *spec.peer_global_rank;
        } else if (const chakra::CommGroup* group = groups.find(spec.pg_name);
                   group != nullptr && peer >= 0 &&
                   static_cast<size_t>(peer) < group->ranks.size() && !spec.pg_name.empty() &&
                   spec.pg_name != "0") {
          peer = group->ranks[static_cast<size_t>(peer)];
        }
        node.set_type(send ? ChakraProtoMsg::COMM_SEND_NODE : ChakraProtoMsg::COMM_RECV_NODE);
        add_int(node, send ? "comm_dst" : "comm_src", peer);
        add_int(node, "comm_size", static_cast<int64_t>(std::min<uint64_t>(spec.bytes, INT64_MAX)));
        add_int(node, "comm_tag", spec.tag);
        if (!spec.pg_name.empty()) add_string(node, "pg_name", spec.pg_name);
        record.peer = peer;
      }
      record.node_type = node.type();
      report.comms.push_back(std::move(record));
    } else {
      node.set_type(ChakraProtoMsg::COMP_NODE);
      if (item.memory) {
        ++report.memory_ops;
      } else {
        ++report.kernels;
      }
    }
    add_bool(node, "is_cpu_op", false);
    if (item.stream >= 0) add_int(node, "stream", item.stream);
    add_int(node, "host_op_id", static_cast<int64_t>(ops[item.launcher].id));
    if (item.event || item.entry) by_stream[item.stream].push_back(slot);
  }

  // Stream order: each device node after the one before it on its stream (GPU start order).
  uint64_t stream_edges_dropped = 0;
  for (auto& [stream, slots] : by_stream) {
    std::sort(slots.begin(), slots.end(), [&device](size_t a, size_t b) {
      return std::tie(device[a].gpu_ts_ns, device[a].id) <
             std::tie(device[b].gpu_ts_ns, device[b].id);
    });
    for (size_t at = 1; at < slots.size(); ++at) {
      const DeviceNode& before = device[slots[at - 1]];
      const DeviceNode& after = device[slots[at]];
      if (before.id < after.id) {
        nodes[node_of_device[slots[at]]].add_data_deps(before.id);
      } else {
        ++stream_edges_dropped;
        notes.add("stream-order edges against launch order (dropped to keep the graph acyclic)",
                  true,
                  fmt::format("node {} after node {} on stream {}", after.id, before.id, stream));
      }
    }
  }
  // Launch order of collectives within a process group; compute launched before a collective.
  std::map<std::string, uint64_t> last_in_group;
  std::map<int64_t, uint64_t> last_compute_on_stream;
  for (const size_t slot : device_order) {
    const DeviceNode& item = device[slot];
    Node& node = nodes[node_of_device[slot]];
    if (item.comm && item.comm->name.kind == CommKind::kCollective) {
      const auto found = last_in_group.find(item.comm->pg_name);
      if (found != last_in_group.end()) node.add_data_deps(found->second);
      last_in_group[item.comm->pg_name] = item.id;
    }
    if (item.comm && item.event) {
      for (const auto& [stream, id] : last_compute_on_stream) {
        if (stream != item.stream) node.add_data_deps(id);
      }
    }
    if (!item.comm && (item.event || item.entry)) last_compute_on_stream[item.stream] = item.id;
  }
  // Waits for communication. c10d runs collectives, sends and receives beside the computation;
  // PyTorch waits for one where a later op uses its tensors (work.wait() before them, or DDP's
  // copy out of its bucket), so the first later host op that reads or writes one of its storages,
  // outside the communication's own call (c10d::*, record_param_comms, the backend op), depends
  // on the communication node. Without the edge a simulated optimizer updated the parameters
  // before their gradients' all-reduce had ended. An edge that could close a cycle (an op
  // launched before the communication sits after the waiter) is left out and noted.
  std::unordered_map<uint64_t, uint64_t> waiter_of;  // communication node id -> host op id
  if (std::any_of(device.begin(), device.end(),
                  [](const DeviceNode& item) { return item.comm && item.comm_op; })) {
    // Each op's storages, parsed once, for the ops from the first communication on (none before
    // it can wait for one).
    size_t first_comm = chain.size();
    for (const DeviceNode& item : device) {
      if (item.comm && item.comm_op && chain_position[*item.comm_op] >= 0)
        first_comm = std::min(first_comm, static_cast<size_t>(chain_position[*item.comm_op]));
    }
    std::vector<std::vector<int64_t>> storages(chain.size());
    std::map<int64_t, std::vector<size_t>> users;  // storage -> chain positions, ascending
    std::vector<HostTensor> tensors;
    for (size_t position = first_comm; position < chain.size(); ++position) {
      const HostOp& op = ops[chain[position]];
      tensors.clear();
      for (const HostIo* io : {&op.inputs, &op.outputs}) {
        if (io->values != nullptr) {
          collect_tensors(*io->values, tensors);
        } else if (!io->values_text.empty()) {
          collect_tensors(nlohmann::json::parse(io->values_text, nullptr, false), tensors);
        }
      }
      std::vector<int64_t>& mine = storages[position];
      for (const HostTensor& tensor : tensors) {
        if (tensor.storage) mine.push_back(*tensor.storage);
      }
      std::sort(mine.begin(), mine.end());
      mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
      for (const int64_t storage : mine) users[storage].push_back(position);
    }
    const auto parent_of = [&](size_t index) -> std::optional<size_t> {
      if (!ops[index].parent) return std::nullopt;
      const std::optional<size_t> parent = host.find(*ops[index].parent);
      return parent == index ? std::nullopt : parent;
    };
    // Call trees are shallow; the bound also ends a walk on a damaged file's parent cycle.
    constexpr int kMaxDepth = 64;
    const auto inside = [&](size_t index, size_t root) {
      std::optional<size_t> current = index;
      for (int depth = 0; depth < kMaxDepth && current; ++depth) {
        if (*current == root) return true;
        current = parent_of(*current);
      }
      return false;
    };
    int64_t launched_up_to = -1;  // the latest chain position that launched a device node so far
    for (const size_t slot : device_order) {
      const DeviceNode& item = device[slot];
      launched_up_to = std::max(launched_up_to, chain_position[item.launcher]);
      if (!item.comm || !item.comm_op || chain_position[*item.comm_op] < 0) continue;
      size_t root = *item.comm_op;
      for (int depth = 0; depth < kMaxDepth; ++depth) {
        const std::optional<size_t> parent = parent_of(root);
        if (!parent || !is_comm_call(ops[*parent].name)) break;
        root = *parent;
      }
      const size_t after = static_cast<size_t>(chain_position[*item.comm_op]);
      std::optional<size_t> waiter;
      for (const int64_t storage : storages[after]) {
        const std::vector<size_t>& positions = users.at(storage);
        for (auto at = std::upper_bound(positions.begin(), positions.end(), after);
             at != positions.end() && (!waiter || *at < *waiter); ++at) {
          if (!inside(chain[*at], root) && !is_comm_call(ops[chain[*at]].name)) {
            waiter = *at;
            break;
          }
        }
      }
      if (!waiter) continue;
      const HostOp& op = ops[chain[*waiter]];
      if (static_cast<int64_t>(*waiter) <= launched_up_to) {
        notes.add("waits for communication left out (the op would close a cycle)", true,
                  fmt::format("{} on node {}", describe_op(op), item.id));
        continue;
      }
      nodes[*waiter + (synth_metadata ? 1 : 0)].add_data_deps(item.id);
      waiter_of[item.id] = op.id;
      notes.add("communications a later host op waits for (the first op on their tensors)", false,
                fmt::format("{} waits for node {}", describe_op(op), item.id));
    }
  }
  for (CommRecord& record : report.comms) {
    const auto found = waiter_of.find(record.node_id);
    if (found != waiter_of.end()) record.waiter_id = found->second;
  }
  // A dependency listed twice counts once; keep each list ascending and unique.
  for (Node& node : nodes) {
    auto* deps = node.mutable_data_deps();
    std::sort(deps->begin(), deps->end());
    deps->erase(std::unique(deps->begin(), deps->end()), deps->end());
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const Node& a, const Node& b) { return a.id() < b.id(); });
  std::sort(report.comms.begin(), report.comms.end(),
            [](const CommRecord& a, const CommRecord& b) { return a.node_id < b.node_id; });

  report.output_nodes = nodes.size();
  for (const Node& node : nodes) ++report.nodes_by_type[node.type()];
  if (kineto != nullptr) {
    report.durations = unlinked_ops == 0
                           ? "host ops: CPU time from Kineto; kernels and copies: measured"
                           : "host ops: CPU time from Kineto where linked, else 0; kernels and "
                             "copies: measured";
  } else if (any_host_duration) {
    report.durations = "host ops: exclusive_dur from the host trace";
  } else {
    report.durations =
        "none in the host trace: host ops carry duration 0 (give the Kineto trace with --device "
        "for measured times)";
  }
  report.notes = notes.take();

  // Global metadata: the host trace's header, and where the trace came from.
  ChakraProtoMsg::GlobalMetadata& metadata = conversion.metadata;
  metadata.set_version(chakra::kDefaultSchemaVersion);
  const auto add_meta_string = [&metadata](const char* name, const std::string& value) {
    auto* attr = metadata.add_attr();
    attr->set_name(name);
    attr->set_string_val(value);
  };
  add_meta_string("schema", host.schema());
  for (const char* key : {"pid", "start_ts", "finish_ts"}) {
    const auto found = host.header().find(key);
    if (found != host.header().end() && json_int(*found)) {
      auto* attr = metadata.add_attr();
      attr->set_name(key);
      attr->set_int64_val(*json_int(*found));
    }
  }
  if (const auto found = host.header().find("time");
      found != host.header().end() && found->is_string()) {
    add_meta_string("time", found->get<std::string>());
  }
  add_meta_string("converter", "orrery convert");
  add_meta_string("host_trace", host.path());
  if (kineto != nullptr) add_meta_string("device_trace", kineto->path());
  return conversion;
}

Status write_conversion(const Conversion& conversion, const std::string& path) {
  Expected<chakra::TraceWriter> writer = chakra::TraceWriter::create(path, conversion.metadata);
  if (!writer) return writer.error();
  for (const ChakraProtoMsg::Node& node : conversion.nodes) {
    if (Status status = writer->write(node); !status) return status;
  }
  return writer->close();
}

Expected<ConversionReport> convert_files(const std::string& host_path,
                                         const std::string& device_path,
                                         const std::string& output_path,
                                         const ConvertOptions& options) {
  Expected<HostTrace> host = read_host_trace(host_path);
  if (!host) return host.error();
  std::optional<KinetoTrace> kineto;
  if (!device_path.empty()) {
    Expected<KinetoTrace> read = read_kineto_trace(device_path);
    if (!read) return read.error();
    kineto = std::move(*read);
  }
  Expected<Conversion> conversion =
      convert_pytorch_trace(*host, kineto ? &*kineto : nullptr, options);
  if (!conversion) return conversion.error();
  if (const std::filesystem::path parent = std::filesystem::path(output_path).parent_path();
      !parent.empty()) {
    std::error_code code;
    std::filesystem::create_directories(parent, code);
  }
  if (Status status = write_conversion(*conversion, output_path); !status) return status.error();
  return std::move(conversion->report);
}

std::string format_report(const ConversionReport& report, const std::string& output_path,
                          size_t examples) {
  std::string out;
  out += fmt::format("{}: PyTorch execution trace, schema {}, {} nodes\n", report.host_path,
                     report.schema, format_count(report.host_nodes));
  if (!report.device_path.empty()) {
    std::string rank;
    if (report.kineto_rank) {
      rank = fmt::format(", rank {}", *report.kineto_rank);
      if (report.kineto_world_size) rank += fmt::format(" of {}", *report.kineto_world_size);
    }
    out +=
        fmt::format("{}: {}, {} events{}\n", report.device_path,
                    report.device_array_form ? "profiler trace (Chrome trace array form, no Kineto)"
                                             : "Kineto trace",
                    format_count(report.kineto_events), rank);
  }
  out += fmt::format("wrote {}: {} nodes\n", output_path, format_count(report.output_nodes));
  for (const auto& [type, count] : report.nodes_by_type) {
    std::string detail;
    if (type == ChakraProtoMsg::COMP_NODE) {
      detail = fmt::format("  ({} host ops, {} GPU kernels, {} GPU copies and sets)",
                           format_count(report.host_ops), format_count(report.kernels),
                           format_count(report.memory_ops));
    }
    out += fmt::format("  {:<20}{}{}\n", ChakraProtoMsg::NodeType_Name(type), format_count(count),
                       detail);
  }
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_kind;  // name -> (count, bytes)
  for (const CommRecord& comm : report.comms) {
    std::string kind;
    if (comm.node_type == ChakraProtoMsg::COMM_COLL_NODE) {
      kind = ChakraProtoMsg::CollectiveCommType_Name(comm.comm_type);
    } else {
      kind = comm.node_type == ChakraProtoMsg::COMM_SEND_NODE ? "SEND" : "RECV";
    }
    if (!comm.pg_name.empty()) kind += fmt::format(" (pg {})", comm.pg_name);
    by_kind[kind].first += 1;
    by_kind[kind].second += comm.bytes;
  }
  if (!by_kind.empty()) {
    out += "  communication\n";
    for (const auto& [kind, figures] : by_kind) {
      out += fmt::format("    {:<18}{} x, {} ({} B)\n", kind, format_count(figures.first),
                         format_bytes(figures.second), format_count(figures.second));
    }
  }
  if (!report.device_path.empty()) {
    out += fmt::format(
        "  linked              {} of {} host ops to Kineto events (by {}); {} of {} "
        "GPU events to the ops that launched them\n",
        format_count(report.host_ops_linked), format_count(report.host_ops_linkable),
        report.link_method, format_count(report.gpu_events_linked),
        format_count(report.gpu_events));
    for (const std::string& pair : report.thread_pairs) out += fmt::format("    {}\n", pair);
  }
  out += fmt::format("  durations           {}\n", report.durations);
  if (!report.notes.empty()) {
    out += "  dropped or changed\n";
    for (const ConversionNote& note : report.notes) {
      std::string shown;
      for (size_t at = 0; at < note.examples.size() && at < examples; ++at)
        shown += (at == 0 ? ": " : ", ") + note.examples[at];
      if (note.count > note.examples.size() && !note.examples.empty() && examples > 0)
        shown += ", ...";
      out += fmt::format("    {} {}{}\n", format_count(note.count), note.what, shown);
    }
  }
  return out;
}

}  // namespace orrery::convert
