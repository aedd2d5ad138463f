#include "convert/collectives.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <set>
#include <utility>

#include "core/checked.h"

namespace orrery::convert {

namespace {

std::string normalized(std::string_view name) {
  if (is_backend_comm_op(name)) name.remove_prefix(name.find(':') + 1);
  std::string out;
  out.reserve(name.size());
  for (const char c : name) {
    if (c == '_' || c == '-' || c == ' ') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

const nlohmann::json* member(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  const auto found = object.find(key);
  return found == object.end() ? nullptr : &*found;
}

// The value at `index` of an op's input values, or nullptr.
const nlohmann::json* input_value(const HostOp& op, size_t index) {
  if (op.inputs.values == nullptr || !op.inputs.values->is_array()) return nullptr;
  if (index >= op.inputs.values->size()) return nullptr;
  return &(*op.inputs.values)[index];
}

// The record_param_comms op beside a nccl op: its parent (or the op itself).
std::optional<size_t> record_param_comms_of(const HostTrace& trace, size_t op_index) {
  const HostOp& op = trace.ops()[op_index];
  if (op.name == "record_param_comms") return op_index;
  if (!op.parent) return std::nullopt;
  const std::optional<size_t> parent = trace.find(*op.parent);
  if (parent && trace.ops()[*parent].name == "record_param_comms") return parent;
  return std::nullopt;
}

// The c10d op above a nccl op (c10d::send, c10d::recv_, ...), up to three levels.
std::optional<size_t> c10d_of(const HostTrace& trace, size_t op_index) {
  std::optional<size_t> current = op_index;
  for (int depth = 0; depth < 3 && current; ++depth) {
    const HostOp& op = trace.ops()[*current];
    if (op.name.substr(0, 6) == "c10d::") return current;
    if (!op.parent) return std::nullopt;
    current = trace.find(*op.parent);
  }
  return std::nullopt;
}

std::optional<std::string> kernel_arg_string(const KinetoEvent* kernel, std::string_view key) {
  if (kernel == nullptr || kernel->args == nullptr) return std::nullopt;
  const nlohmann::json* value = member(*kernel->args, key);
  if (value == nullptr || !value->is_string()) return std::nullopt;
  return value->get<std::string>();
}

}  // namespace

bool is_backend_comm_op(std::string_view name) {
  for (const std::string_view prefix : {"nccl:", "gloo:", "mpi:", "ucc:"}) {
    if (name.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

bool is_comm_call(std::string_view name) {
  return is_backend_comm_op(name) || name.starts_with("c10d::") || name == "record_param_comms";
}

std::optional<CommName> comm_name(std::string_view name) {
  const std::string key = normalized(name);
  using ChakraProtoMsg::CollectiveCommType;
  // Order matters: "allreduce" before "reduce", "reducescatter" before "scatter".
  static const std::array<std::pair<const char*, CollectiveCommType>, 9> kCollectives = {{
      {"allreduce", ChakraProtoMsg::ALL_REDUCE},
      {"alltoall", ChakraProtoMsg::ALL_TO_ALL},
      {"allgather", ChakraProtoMsg::ALL_GATHER},
      {"reducescatter", ChakraProtoMsg::REDUCE_SCATTER},
      {"broadcast", ChakraProtoMsg::BROADCAST},
      {"barrier", ChakraProtoMsg::BARRIER},
      {"reduce", ChakraProtoMsg::REDUCE},
      {"gather", ChakraProtoMsg::GATHER},
      {"scatter", ChakraProtoMsg::SCATTER},
  }};
  for (const auto& [word, type] : kCollectives) {
    if (key.find(word) != std::string::npos) return CommName{CommKind::kCollective, type};
  }
  if (key.find("send") != std::string::npos) return CommName{CommKind::kSend};
  if (key.find("recv") != std::string::npos) return CommName{CommKind::kRecv};
  return std::nullopt;
}

uint64_t dtype_bytes(std::string_view dtype) {
  std::string key;
  for (const char c : dtype) key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (key.substr(0, 6) == "torch.") key = key.substr(6);
  static const std::array<std::pair<const char*, uint64_t>, 22> kSizes = {{
      {"float", 4},     {"float32", 4},     {"double", 8},       {"float64", 8},
      {"half", 2},      {"float16", 2},     {"bfloat16", 2},     {"long", 8},
      {"int64", 8},     {"int", 4},         {"int32", 4},        {"short", 2},
      {"int16", 2},     {"char", 1},        {"int8", 1},         {"byte", 1},
      {"uint8", 1},     {"bool", 1},        {"complexfloat", 8}, {"complexdouble", 16},
      {"complex64", 8}, {"complex128", 16},
  }};
  for (const auto& [name, bytes] : kSizes) {
    if (key == name) return bytes;
  }
  if (key.substr(0, 6) == "float8") return 1;
  return 0;
}

std::optional<std::string> record_param_comms_name(const HostTrace& trace, const HostOp& op) {
  if (std::optional<std::string> name = trace.attr_string(op, "collective_name")) return name;
  // Schemas without the attribute keep it among the inputs, as the first text value.
  if (op.inputs.values != nullptr && op.inputs.values->is_array()) {
    for (const nlohmann::json& value : *op.inputs.values) {
      if (value.is_string()) return value.get<std::string>();
    }
  }
  return std::nullopt;
}

std::optional<CommSpec> describe_communication(const HostTrace& trace, size_t op_index,
                                               const KinetoEvent* kernel) {
  const HostOp& op = trace.ops()[op_index];
  const std::optional<size_t> rpc = record_param_comms_of(trace, op_index);
  const HostOp* meta = rpc ? &trace.ops()[*rpc] : nullptr;

  // The kind: from the nccl op's own name, else from record_param_comms' collective name.
  std::optional<CommName> name = comm_name(op.name);
  const std::optional<std::string> collective_name =
      meta != nullptr ? record_param_comms_name(trace, *meta) : std::nullopt;
  if (op.name == "record_param_comms") name = collective_name ? comm_name(*collective_name) : name;
  if (!name) return std::nullopt;

  CommSpec spec;
  spec.name = *name;

  // Bytes: the tensors of the nccl op, else record_param_comms' message size, else the kernel's.
  if (op.name != "record_param_comms") {
    spec.bytes = tensor_bytes(op.inputs);
    if (spec.bytes > 0) spec.size_source = "tensors of the backend op";
  }
  if (spec.bytes == 0 && meta != nullptr) {
    const std::optional<int64_t> elements = trace.attr_int(*meta, "in_msg_nelems");
    const std::optional<std::string> dtype = trace.attr_string(*meta, "dtype");
    if (elements && *elements > 0 && dtype && dtype_bytes(*dtype) > 0) {
      spec.bytes = saturating_mul(static_cast<uint64_t>(*elements), dtype_bytes(*dtype));
      spec.size_source = "in_msg_nelems x dtype of record_param_comms";
    } else {
      spec.bytes = tensor_bytes(meta->inputs);
      if (spec.bytes > 0) spec.size_source = "tensors of record_param_comms";
    }
  }
  if (spec.bytes == 0 && kernel != nullptr && kernel->args != nullptr) {
    const nlohmann::json* elements = member(*kernel->args, "In msg nelems");
    const std::optional<std::string> dtype = kernel_arg_string(kernel, "dtype");
    if (elements != nullptr && json_int(*elements) && *json_int(*elements) > 0 && dtype &&
        dtype_bytes(*dtype) > 0) {
      spec.bytes = saturating_mul(static_cast<uint64_t>(*json_int(*elements)), dtype_bytes(*dtype));
      spec.size_source = "In msg nelems x dtype of the Kineto kernel";
    }
  }

  // Process group: record_param_comms' pg_name, else its (name, description) input, else Kineto.
  if (meta != nullptr) {
    if (std::optional<std::string> pg = trace.attr_string(*meta, "pg_name")) {
      spec.pg_name = *pg;
    } else if (const nlohmann::json* pg_input = input_value(*meta, 2);
               pg_input != nullptr && pg_input->is_array() && !pg_input->empty() &&
               (*pg_input)[0].is_string()) {
      spec.pg_name = (*pg_input)[0].get<std::string>();
    }
  }
  if (spec.pg_name.empty()) {
    if (std::optional<std::string> pg = kernel_arg_string(kernel, "Process Group Name"))
      spec.pg_name = *pg;
  }

  // Point-to-point: the peer and tag from c10d::send / c10d::recv_ (tensors, group, peer, tag),
  // else record_param_comms' rank input (the peer, for send and recv).
  if (spec.name.kind != CommKind::kCollective) {
    if (const std::optional<size_t> c10d = c10d_of(trace, op_index)) {
      const HostOp& call = trace.ops()[*c10d];
      const nlohmann::json* peer = input_value(call, 2);
      const nlohmann::json* tag = input_value(call, 3);
      if (peer != nullptr && json_int(*peer)) spec.peer_group_rank = *json_int(*peer);
      if (tag != nullptr && json_int(*tag)) spec.tag = *json_int(*tag);
    }
    if (!spec.peer_group_rank && meta != nullptr) {
      const nlohmann::json* rank = input_value(*meta, 3);
      if (rank != nullptr && json_int(*rank)) spec.peer_group_rank = *json_int(*rank);
    }
    if (spec.peer_group_rank && meta != nullptr) {
      const std::optional<int64_t> start = trace.attr_int(*meta, "global_rank_start");
      const std::optional<int64_t> stride = trace.attr_int(*meta, "global_rank_stride");
      if (start && stride) spec.peer_global_rank = *start + *spec.peer_group_rank * *stride;
    }
  }
  return spec;
}

namespace {

using TensorKey = std::pair<int64_t, int64_t>;  // (tensor id, storage id)

std::set<TensorKey> input_tensors(const HostOp& op) {
  std::set<TensorKey> out;
  if (op.inputs.values == nullptr) return out;
  std::vector<HostTensor> tensors;
  collect_tensors(*op.inputs.values, tensors);
  for (const HostTensor& tensor : tensors)
    if (tensor.id && tensor.storage) out.emplace(*tensor.id, *tensor.storage);
  return out;
}

bool share_tensor(const std::set<TensorKey>& a, const std::set<TensorKey>& b) {
  for (const TensorKey& key : a)
    if (b.count(key) != 0) return true;
  return false;
}

}  // namespace

CallPairing pair_comm_calls(const HostTrace& trace) {
  const std::vector<HostOp>& ops = trace.ops();
  CallPairing pairing;
  pairing.backend_of.resize(ops.size());
  pairing.call_of.resize(ops.size());
  pairing.filed_elsewhere.assign(ops.size(), false);
  std::vector<size_t> order(ops.size());
  for (size_t index = 0; index < ops.size(); ++index) order[index] = index;
  std::sort(order.begin(), order.end(),
            [&ops](size_t a, size_t b) { return ops[a].id < ops[b].id; });
  // Unpaired calls by id, with their tensors.
  std::map<uint64_t, std::pair<size_t, std::set<TensorKey>>> open;
  for (const size_t index : order) {
    const HostOp& op = ops[index];
    if (op.name.starts_with("c10d::")) {
      if (!comm_name(op.name)) continue;
      std::set<TensorKey> tensors = input_tensors(op);
      if (!tensors.empty()) open[op.id] = {index, std::move(tensors)};
      continue;
    }
    if (!is_backend_comm_op(op.name)) continue;
    const std::set<TensorKey> tensors = input_tensors(op);
    if (tensors.empty()) continue;
    std::optional<uint64_t> chosen;
    // The call it sits under (up to two levels: a record_param_comms may be between them).
    std::optional<uint64_t> above = op.parent;
    for (int depth = 0; depth < 2 && above && !chosen; ++depth) {
      const auto found = open.find(*above);
      if (found != open.end() && share_tensor(found->second.second, tensors)) chosen = *above;
      const std::optional<size_t> parent = trace.find(*above);
      above = parent && ops[*parent].parent != *above ? ops[*parent].parent : std::nullopt;
    }
    pairing.filed_elsewhere[index] = !chosen;
    // Else the latest unpaired call before it that shares a tensor, among the 64 latest (an op
    // is filed at most a call or two late; the bound keeps a trace of many unpaired calls
    // linear).
    int looked = 0;
    for (auto it = open.lower_bound(op.id); !chosen && it != open.begin() && looked < 64;
         ++looked) {
      --it;
      if (share_tensor(it->second.second, tensors)) chosen = it->first;
    }
    if (!chosen) {
      pairing.filed_elsewhere[index] = false;
      continue;
    }
    const size_t call = open.at(*chosen).first;
    pairing.backend_of[call] = index;
    pairing.call_of[index] = call;
    open.erase(*chosen);
  }
  pairing.stands_alone.assign(ops.size(), false);
  for (const auto& [id, call] : open) pairing.stands_alone[call.first] = true;
  for (const HostOp& op : ops) {
    if (op.name != "record_param_comms" || !op.parent) continue;
    if (const std::optional<size_t> parent = trace.find(*op.parent))
      pairing.stands_alone[*parent] = false;
  }
  return pairing;
}

}  // namespace orrery::convert
