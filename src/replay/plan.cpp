#include "replay/plan.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace orrery::replay {

namespace {

using convert::HostOp;
using convert::HostOpKind;
using convert::HostTrace;
using nlohmann::json;

constexpr size_t kExamples = 3;

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

std::optional<int64_t> marker_number(std::string_view name) {
  if (!starts_with(name, "ProfilerStep#")) return std::nullopt;
  const std::string_view digits = name.substr(13);
  int64_t value = 0;
  const auto [end, code] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (code != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return value;
}

bool is_comm_name(std::string_view name) {
  return starts_with(name, "c10d::") || name == "record_param_comms" ||
         convert::is_backend_comm_op(name);
}

std::string describe(const HostOp& op) { return fmt::format("node {} '{}'", op.id, op.name); }

class Notes {
 public:
  void add(const std::string& what, std::string example, uint64_t count = 1) {
    auto found = std::find_if(notes_.begin(), notes_.end(),
                              [&what](const PlanNote& note) { return note.what == what; });
    if (found == notes_.end()) {
      notes_.push_back({what, 0, {}});
      found = notes_.end() - 1;
    }
    found->count += count;
    if (found->examples.size() < kExamples && !example.empty())
      found->examples.push_back(std::move(example));
  }
  std::vector<PlanNote> take() { return std::move(notes_); }

 private:
  std::vector<PlanNote> notes_;
};

// The element types of "GenericList[Tensor(float),Int]": split at top-level commas.
std::vector<std::string> list_item_types(std::string_view type) {
  std::vector<std::string> items;
  const size_t open = type.find('[');
  if (open == std::string_view::npos || type.back() != ']') return items;
  const std::string_view inner = type.substr(open + 1, type.size() - open - 2);
  int depth = 0;
  size_t begin = 0;
  for (size_t at = 0; at <= inner.size(); ++at) {
    const char c = at < inner.size() ? inner[at] : ',';
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      if (at > begin) items.emplace_back(inner.substr(begin, at - begin));
      begin = at + 1;
    }
  }
  return items;
}

std::optional<std::vector<int64_t>> int_list(const json& value) {
  if (!value.is_array()) return std::nullopt;
  std::vector<int64_t> out;
  out.reserve(value.size());
  for (const json& item : value) {
    const std::optional<int64_t> number = convert::json_int(item);
    if (!number) return std::nullopt;
    out.push_back(*number);
  }
  return out;
}

const json& item_or_null(const json& list, size_t index) {
  static const json kNull;
  if (!list.is_array() || index >= list.size()) return kNull;
  return list[index];
}

bool is_tensor_value(const json& value) {
  return value.is_array() && value.size() == 6 && value[5].is_string() &&
         convert::json_int(value[0]) && convert::json_int(value[1]) &&
         convert::json_int(value[2]) && convert::json_int(value[3]) && convert::json_int(value[4]);
}

std::optional<DType> dtype_of_size(int64_t bytes) {
  switch (bytes) {
    case 1:
      return DType::kUInt8;
    case 2:
      return DType::kHalf;
    case 4:
      return DType::kFloat;
    case 8:
      return DType::kDouble;
    case 16:
      return DType::kComplexDouble;
    default:
      return std::nullopt;
  }
}

// Builds the plan's arguments, tensors and storages.
// The layouts the trace's aten::as_strided calls gave their outputs: traces without strides
// (schema 1.0.1) still record as_strided's size and stride arguments, under every transpose,
// expand and t(). Keyed by (tensor id, storage id): (node id, sizes, strides), in node order.
struct Layout {
  uint64_t node = 0;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
};
using Layouts = std::map<std::pair<int64_t, int64_t>, std::vector<Layout>>;

Layouts strided_layouts(const HostTrace& trace) {
  Layouts layouts;
  for (const HostOp& op : trace.ops()) {
    if (op.name != "aten::as_strided" || op.outputs.values_text.empty()) continue;
    const json inputs = json::parse(op.inputs.values_text, nullptr, /*allow_exceptions=*/false);
    const json outputs = json::parse(op.outputs.values_text, nullptr, /*allow_exceptions=*/false);
    if (!inputs.is_array() || inputs.size() < 3 || !outputs.is_array() || outputs.empty() ||
        !is_tensor_value(outputs[0]))
      continue;
    std::optional<std::vector<int64_t>> sizes = int_list(inputs[1]);
    std::optional<std::vector<int64_t>> strides = int_list(inputs[2]);
    if (!sizes || !strides || sizes->size() != strides->size()) continue;
    layouts[{*convert::json_int(outputs[0][0]), *convert::json_int(outputs[0][1])}].push_back(
        {op.id, std::move(*sizes), std::move(*strides)});
  }
  for (auto& [key, list] : layouts) {
    std::sort(list.begin(), list.end(),
              [](const Layout& a, const Layout& b) { return a.node < b.node; });
  }
  return layouts;
}

class PlanBuilder {
 public:
  PlanBuilder(const HostTrace& trace, ReplayPlan& plan, Notes& notes)
      : trace_(trace), plan_(plan), notes_(notes), layouts_(strided_layouts(trace)) {}

  Expected<std::vector<Arg>> args(const HostOp& op, const convert::HostIo& io) {
    std::vector<Arg> out;
    if (io.values_text.empty()) return out;
    const json values = json::parse(io.values_text, nullptr, /*allow_exceptions=*/false);
    const json shapes = io.shapes_text.empty()
                            ? json()
                            : json::parse(io.shapes_text, nullptr, /*allow_exceptions=*/false);
    const json types = io.types_text.empty()
                           ? json()
                           : json::parse(io.types_text, nullptr, /*allow_exceptions=*/false);
    const json strides = io.strides_text.empty()
                             ? json()
                             : json::parse(io.strides_text, nullptr, /*allow_exceptions=*/false);
    if (!values.is_array()) {
      return Error::make(ErrorKind::kParse, "{}: {}: the recorded values are not a list: {}",
                         trace_.path(), describe(op), io.values_text.substr(0, 80));
    }
    for (size_t index = 0; index < values.size(); ++index) {
      const json& type = item_or_null(types, index);
      Expected<Arg> arg = read(op, values[index], type.is_string() ? type.get<std::string>() : "",
                               item_or_null(shapes, index), item_or_null(strides, index));
      if (!arg) return arg.error();
      out.push_back(std::move(*arg));
    }
    return out;
  }

 private:
  Expected<Arg> read(const HostOp& op, const json& value, const std::string& type,
                     const json& shape, const json& stride) {
    Arg arg;
    arg.type = type;
    const bool tensor_type = starts_with(type, "Tensor");
    if (value.is_string() && value.get_ref<const std::string&>() == "<None>") {
      arg.kind = Arg::Kind::kNone;
      return arg;
    }
    if (tensor_type || (type.empty() && is_tensor_value(value))) {
      if (!is_tensor_value(value)) {
        return Error::make(ErrorKind::kParse,
                           "{}: {}: a {} value is {}, expected [tensor id, storage id, offset, "
                           "elements, element bytes, device]",
                           trace_.path(), describe(op), type.empty() ? "tensor" : type,
                           value.dump().substr(0, 80));
      }
      return tensor(op, value, type, shape, stride);
    }
    if (starts_with(type, "GenericList") || (type.empty() && value.is_array())) {
      if (!value.is_array()) {
        arg.kind = Arg::Kind::kOther;
        arg.text = value.dump();
        return arg;
      }
      arg.kind = Arg::Kind::kList;
      const std::vector<std::string> item_types = list_item_types(type);
      for (size_t index = 0; index < value.size(); ++index) {
        const std::string item_type = index < item_types.size() ? item_types[index] : "";
        Expected<Arg> item = read(op, value[index], item_type, item_or_null(shape, index),
                                  item_or_null(stride, index));
        if (!item) return item.error();
        arg.items.push_back(std::move(*item));
      }
      return arg;
    }
    if (type == "Device") {
      arg.kind = Arg::Kind::kDevice;
      arg.text = value.is_string() ? value.get<std::string>() : value.dump();
      return arg;
    }
    if (type == "Object" || type == "Stream" ||
        (value.is_string() && value.get_ref<const std::string&>() == "<Object>")) {
      arg.kind = Arg::Kind::kObject;
      arg.text = value.is_string() ? value.get<std::string>() : value.dump();
      return arg;
    }
    if (value.is_boolean()) {
      arg.kind = Arg::Kind::kBool;
      arg.bool_value = value.get<bool>();
    } else if (value.is_number_integer()) {
      arg.kind = Arg::Kind::kInt;
      arg.int_value = convert::json_int(value).value_or(0);
      if (type == "Double") {
        arg.kind = Arg::Kind::kDouble;
        arg.double_value = static_cast<double>(arg.int_value);
      }
    } else if (value.is_number()) {
      arg.kind = Arg::Kind::kDouble;
      arg.double_value = value.get<double>();
    } else if (value.is_string()) {
      arg.kind = Arg::Kind::kString;
      arg.text = value.get<std::string>();
    } else if (value.is_null()) {
      arg.kind = Arg::Kind::kNone;
    } else {
      arg.kind = Arg::Kind::kOther;
      arg.text = value.dump();
    }
    return arg;
  }

  Expected<Arg> tensor(const HostOp& op, const json& value, const std::string& type,
                       const json& shape, const json& stride) {
    Arg arg;
    arg.type = type;
    const int64_t tensor_id = *convert::json_int(value[0]);
    const int64_t storage_id = *convert::json_int(value[1]);
    const int64_t offset = *convert::json_int(value[2]);
    const int64_t numel = *convert::json_int(value[3]);
    const int64_t elem_bytes = *convert::json_int(value[4]);
    const std::string device = value[5].get<std::string>();
    if (type.find("nullptr") != std::string::npos || (elem_bytes == 0 && device.empty())) {
      arg.kind = Arg::Kind::kUndefinedTensor;
      return arg;
    }
    if (offset < 0 || numel < 0 || elem_bytes <= 0 || tensor_id < 0 || storage_id < 0) {
      return Error::make(ErrorKind::kParse,
                         "{}: {}: tensor {} has a negative or zero field (offset {}, {} elements "
                         "of {} bytes)",
                         trace_.path(), describe(op), value.dump(), offset, numel, elem_bytes);
    }
    std::optional<DType> dtype = dtype_from_trace(type);
    if (!dtype || dtype_bytes(*dtype) != static_cast<uint64_t>(elem_bytes)) {
      const std::optional<DType> by_size = dtype_of_size(elem_bytes);
      if (!by_size) {
        return Error::make(ErrorKind::kParse,
                           "{}: {}: tensor {} has elements of {} bytes, which no element type has",
                           trace_.path(), describe(op), value.dump(), elem_bytes);
      }
      notes_.add("tensors whose element type is unknown (taken from the element size)",
                 fmt::format("{} '{}' ({} bytes)", describe(op), type, elem_bytes));
      dtype = by_size;
    }
    TensorView view;
    view.tensor_id = static_cast<uint64_t>(tensor_id);
    view.offset = offset;
    view.dtype = *dtype;
    view.device = device;
    if (std::optional<std::vector<int64_t>> dims = int_list(shape)) {
      view.shape = std::move(*dims);
    } else {
      view.shape = {numel};
    }
    for (const int64_t dim : view.shape) {
      if (dim < 0) {
        return Error::make(ErrorKind::kParse, "{}: {}: tensor {} has a negative size in {}",
                           trace_.path(), describe(op), value.dump(), shape.dump());
      }
    }
    if (std::optional<std::vector<int64_t>> steps = int_list(stride);
        steps && steps->size() == view.shape.size()) {
      view.strides = std::move(*steps);
      view.recorded_strides = true;
    } else if (const Layout* made = made_by_as_strided(tensor_id, storage_id, op.id, view.shape)) {
      view.strides = made->strides;
      notes_.add(
          "tensors laid out as the aten::as_strided that made them (the trace records no "
          "strides)",
          "", 1);
    } else {
      view.strides.assign(view.shape.size(), 1);
      for (size_t dim = view.shape.size(); dim-- > 1;)
        view.strides[dim - 1] = view.strides[dim] * std::max<int64_t>(view.shape[dim], 1);
    }
    const std::pair<uint64_t, DType> key{static_cast<uint64_t>(storage_id), view.dtype};
    auto found = storage_index_.find(key);
    if (found == storage_index_.end()) {
      found = storage_index_.emplace(key, static_cast<uint32_t>(plan_.storages.size())).first;
      Storage storage;
      storage.id = key.first;
      storage.dtype = view.dtype;
      storage.device = device;
      plan_.storages.push_back(std::move(storage));
    }
    view.storage = found->second;
    Storage& storage = plan_.storages[view.storage];
    // Cover the view, and the recorded element count too when the shape says less.
    const uint64_t covered =
        std::max(view_extent_bytes(view),
                 static_cast<uint64_t>(offset + numel) * static_cast<uint64_t>(elem_bytes));
    storage.bytes = std::max(storage.bytes, covered);
    ++plan_.devices[device];
    arg.kind = Arg::Kind::kTensor;
    arg.tensor = static_cast<uint32_t>(plan_.tensors.size());
    plan_.tensors.push_back(std::move(view));
    return arg;
  }

  // The latest as_strided before node `node` that made this tensor, with these sizes.
  const Layout* made_by_as_strided(int64_t tensor_id, int64_t storage_id, uint64_t node,
                                   const std::vector<int64_t>& shape) const {
    const auto found = layouts_.find({tensor_id, storage_id});
    if (found == layouts_.end()) return nullptr;
    const Layout* best = nullptr;
    for (const Layout& layout : found->second) {
      if (layout.node > node) break;
      if (layout.sizes == shape) best = &layout;
    }
    return best;
  }

  const HostTrace& trace_;
  ReplayPlan& plan_;
  Notes& notes_;
  Layouts layouts_;
  std::map<std::pair<uint64_t, DType>, uint32_t> storage_index_;
};

void collect_tensor_indices(const Arg& arg, std::vector<uint32_t>& out) {
  if (arg.kind == Arg::Kind::kTensor) out.push_back(arg.tensor);
  for (const Arg& item : arg.items) collect_tensor_indices(item, out);
}

// A kernel that torch.compile generated: it ran, but has no schema to rebuild it from.
bool compiled_kernel(const HostTrace& trace, const HostOp& op) {
  const std::optional<std::string> backend = trace.attr_string(op, "kernel_backend");
  return (backend && !backend->empty()) || starts_with(op.name, "triton_");
}

// tensor_range (schema 1.1.1 observers, when asked to record it): a JSON object from input
// position to [min, max], as text. Ranges that do not read are ignored.
void apply_tensor_range(const HostTrace& trace, const HostOp& op, const ReplayOp& replay,
                        ReplayPlan& plan) {
  const std::optional<std::string> text = trace.attr_string(op, "tensor_range");
  if (!text || text->empty()) return;
  const json ranges = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!ranges.is_object()) return;
  for (const auto& [key, range] : ranges.items()) {
    size_t position = 0;
    const auto [end, code] = std::from_chars(key.data(), key.data() + key.size(), position);
    if (code != std::errc() || end != key.data() + key.size()) continue;
    const std::optional<std::vector<int64_t>> bounds = int_list(range);
    if (!bounds || bounds->size() != 2 || (*bounds)[0] > (*bounds)[1]) continue;
    if (position >= replay.inputs.size() || replay.inputs[position].kind != Arg::Kind::kTensor)
      continue;
    Storage& storage = plan.storages[plan.tensors[replay.inputs[position].tensor].storage];
    if (!is_integral(storage.dtype)) continue;
    storage.recorded_range = {(*bounds)[0], (*bounds)[1]};
  }
}

}  // namespace

std::optional<DType> dtype_from_trace(std::string_view type) {
  if (starts_with(type, "Tensor(") && type.back() == ')') type = type.substr(7, type.size() - 8);
  static const std::pair<std::string_view, DType> kNames[] = {
      {"float", DType::kFloat},
      {"double", DType::kDouble},
      {"c10::Half", DType::kHalf},
      {"c10::BFloat16", DType::kBFloat16},
      {"c10::complex<float>", DType::kComplexFloat},
      {"c10::complex<double>", DType::kComplexDouble},
      {"signed char", DType::kInt8},
      {"unsigned char", DType::kUInt8},
      {"short", DType::kInt16},
      {"short int", DType::kInt16},
      {"int", DType::kInt32},
      {"long", DType::kInt64},
      {"long int", DType::kInt64},
      {"long long", DType::kInt64},
      {"bool", DType::kBool},
  };
  for (const auto& [name, dtype] : kNames) {
    if (type == name) return dtype;
  }
  return std::nullopt;
}

uint64_t dtype_bytes(DType type) {
  switch (type) {
    case DType::kFloat:
    case DType::kInt32:
      return 4;
    case DType::kDouble:
    case DType::kInt64:
    case DType::kComplexFloat:
      return 8;
    case DType::kHalf:
    case DType::kBFloat16:
    case DType::kInt16:
      return 2;
    case DType::kComplexDouble:
      return 16;
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool:
      return 1;
  }
  return 1;
}

bool is_integral(DType type) {
  return type == DType::kInt8 || type == DType::kUInt8 || type == DType::kInt16 ||
         type == DType::kInt32 || type == DType::kInt64;
}

const char* dtype_name(DType type) {
  switch (type) {
    case DType::kFloat:
      return "float32";
    case DType::kDouble:
      return "float64";
    case DType::kHalf:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kComplexFloat:
      return "complex64";
    case DType::kComplexDouble:
      return "complex128";
    case DType::kInt8:
      return "int8";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt16:
      return "int16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kBool:
      return "bool";
  }
  return "?";
}

int64_t TensorView::numel() const {
  int64_t count = 1;
  for (const int64_t dim : shape) count *= dim;
  return count;
}

uint64_t view_extent_bytes(const TensorView& view) {
  int64_t last = 0;
  for (size_t dim = 0; dim < view.shape.size(); ++dim) {
    if (view.shape[dim] == 0) return 0;
    last += (view.shape[dim] - 1) * std::abs(view.strides[dim]);
  }
  return static_cast<uint64_t>(view.offset + last + 1) * dtype_bytes(view.dtype);
}

Expected<ReplayPlan> build_plan(const HostTrace& trace, const PlanOptions& options) {
  ReplayPlan plan;
  Notes notes;
  plan.path = trace.path();
  plan.schema = trace.schema();
  const std::vector<HostOp>& ops = trace.ops();
  plan.trace_nodes = ops.size();

  // Children by parent, in start order (ids are given as operators start).
  std::unordered_map<uint64_t, std::vector<size_t>> children;
  std::vector<size_t> roots;
  for (size_t index = 0; index < ops.size(); ++index) {
    const HostOp& op = ops[index];
    if (op.parent && *op.parent != op.id && trace.find(*op.parent)) {
      children[*op.parent].push_back(index);
    } else {
      roots.push_back(index);
    }
  }
  const auto by_id = [&ops](size_t a, size_t b) { return ops[a].id < ops[b].id; };
  for (auto& [parent, list] : children) std::sort(list.begin(), list.end(), by_id);
  std::sort(roots.begin(), roots.end(), by_id);

  // The iteration: [marker id, next marker id).
  std::vector<std::pair<uint64_t, int64_t>> markers;  // (id, number)
  for (const HostOp& op : ops) {
    if (const std::optional<int64_t> number = marker_number(op.name))
      markers.emplace_back(op.id, *number);
  }
  std::sort(markers.begin(), markers.end());
  uint64_t first_id = 0;
  uint64_t end_id = std::numeric_limits<uint64_t>::max();
  if (markers.empty()) {
    if (options.iteration) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "{}: --iteration {}: the trace has no ProfilerStep# markers", trace.path(),
                         *options.iteration);
    }
    plan.iteration = "the whole trace";
  } else {
    size_t chosen = 0;
    if (options.iteration) {
      const auto found = std::find_if(markers.begin(), markers.end(), [&](const auto& marker) {
        return marker.second == *options.iteration;
      });
      if (found == markers.end()) {
        std::vector<std::string> known;
        for (const auto& marker : markers) known.push_back(std::to_string(marker.second));
        return Error::make(ErrorKind::kInvalidArgument,
                           "{}: --iteration {}: no ProfilerStep#{} in the trace (it has {})",
                           trace.path(), *options.iteration, *options.iteration,
                           fmt::join(known, ", "));
      }
      chosen = static_cast<size_t>(found - markers.begin());
    }
    first_id = markers[chosen].first;
    if (chosen + 1 < markers.size()) end_id = markers[chosen + 1].first;
    plan.iteration = fmt::format("ProfilerStep#{}", markers[chosen].second);
  }
  plan.iteration_begin = first_id;
  plan.iteration_end = end_id;
  const auto in_iteration = [&](const HostOp& op) { return op.id >= first_id && op.id < end_id; };
  const auto subtree_size = [&](size_t index) {
    size_t count = 0;
    std::vector<size_t> stack{index};
    while (!stack.empty()) {
      const size_t at = stack.back();
      stack.pop_back();
      const auto found = children.find(ops[at].id);
      // A backend op's children are misfiled (below): they did not run inside it.
      if (found == children.end() || convert::is_backend_comm_op(ops[at].name)) continue;
      count += found->second.size();
      stack.insert(stack.end(), found->second.begin(), found->second.end());
    }
    return count;
  };
  // The node that describes a communication: a c10d call's backend op (paired by their tensors:
  // convert::pair_comm_calls), else a backend op under it, else a record_param_comms, else the op
  // itself. A backend op another call owns (misfiled under this one) describes nothing here.
  const convert::CallPairing pairing = convert::pair_comm_calls(trace);
  const auto describing_node = [&](size_t index) {
    if (pairing.backend_of[index]) return *pairing.backend_of[index];
    std::optional<size_t> meta;
    std::vector<size_t> queue{index};
    for (size_t head = 0; head < queue.size(); ++head) {
      const HostOp& op = ops[queue[head]];
      if (convert::is_backend_comm_op(op.name)) {
        const std::optional<size_t> owner = pairing.call_of[queue[head]];
        if (!owner || *owner == index) return queue[head];
        continue;
      }
      if (op.name == "record_param_comms" && !meta) meta = queue[head];
      const auto found = children.find(op.id);
      if (found != children.end())
        queue.insert(queue.end(), found->second.begin(), found->second.end());
    }
    return meta.value_or(index);
  };

  PlanBuilder builder(trace, plan, notes);
  std::vector<size_t> selected;  // indices of the ops to replay
  std::vector<size_t> stack(roots.rbegin(), roots.rend());
  // A backend op (gloo:all_reduce) is a leaf that completes asynchronously, and PyTorch 1.13's
  // observer keeps its scope open until then: what the thread ran meanwhile (the rest of a
  // backward pass, the next bucket's c10d call and backend op) is filed under it. Those nodes
  // are walked as if they were its siblings, not dropped with its subtree.
  const auto walk_misfiled = [&](size_t index) {
    std::vector<size_t> queue{index};
    for (size_t head = 0; head < queue.size(); ++head) {
      const auto found = children.find(ops[queue[head]].id);
      if (found == children.end()) continue;
      if (convert::is_backend_comm_op(ops[queue[head]].name)) {
        // Its GPU entries (a linked trace's kernels) are its own.
        for (auto child = found->second.rbegin(); child != found->second.rend(); ++child)
          if (ops[*child].kind != HostOpKind::kGpuOp) stack.push_back(*child);
      } else {
        queue.insert(queue.end(), found->second.begin(), found->second.end());
      }
    }
  };
  while (!stack.empty()) {
    const size_t index = stack.back();
    stack.pop_back();
    const HostOp& op = ops[index];
    const auto found = children.find(op.id);
    const bool has_children = found != children.end() && !found->second.empty();
    const auto descend = [&] {
      if (has_children) stack.insert(stack.end(), found->second.rbegin(), found->second.rend());
    };
    if (op.kind == HostOpKind::kProcessGroup) {
      if (op.inputs.values != nullptr && op.inputs.values->is_array() &&
          !op.inputs.values->empty() && (*op.inputs.values)[0].is_string()) {
        plan.process_group_texts.push_back((*op.inputs.values)[0].get<std::string>());
      } else if (!op.inputs.values_text.empty()) {
        plan.process_group_texts.push_back(op.inputs.values_text);
      }
      continue;
    }
    if (op.kind == HostOpKind::kAnnotation || !in_iteration(op)) {
      descend();
      continue;
    }
    if (op.kind == HostOpKind::kGpuOp) {
      notes.add("GPU entries of a linked trace (the device side of their operators)", describe(op));
      continue;
    }
    if (starts_with(op.name, "enumerate(DataLoader)")) {
      notes.add("data loading subtrees (not replayed)", describe(op), 1 + subtree_size(index));
      continue;
    }
    if (is_comm_name(op.name) || !op.op_schema.empty() ||
        (!has_children && compiled_kernel(trace, op))) {
      selected.push_back(index);
      if (is_comm_name(op.name)) walk_misfiled(index);
      continue;
    }
    if (!has_children) {
      // Record-function scopes and autograd nodes that ran no operator (AddBackward0 passes its
      // gradient on): no work of their own to replay.
      notes.add("labels and autograd nodes with no operator under them (nothing to replay)",
                describe(op));
      continue;
    }
    descend();
  }
  std::sort(selected.begin(), selected.end(), by_id);
  // A backend op of an asynchronous collective can lose its parent link (PyTorch 1.13's observer
  // puts gloo:all_reduce under whatever scope is open when it starts): the c10d call it pairs
  // with (convert::pair_comm_calls) stands for both.
  {
    std::set<size_t> calls;
    for (const size_t index : selected)
      if (starts_with(ops[index].name, "c10d::")) calls.insert(index);
    std::vector<size_t> kept;
    for (const size_t index : selected) {
      const std::optional<size_t> call = pairing.call_of[index];
      if (call && calls.count(*call) != 0) {
        notes.add("backend ops outside their c10d call (merged with the call)",
                  describe(ops[index]));
        continue;
      }
      kept.push_back(index);
    }
    selected = std::move(kept);
  }
  for (const HostOp& op : ops) {
    if (in_iteration(op) && op.kind != HostOpKind::kAnnotation) ++plan.iteration_nodes;
  }

  for (const size_t index : selected) {
    const HostOp& op = ops[index];
    ReplayOp replay;
    replay.node_id = op.id;
    replay.name = std::string(op.name);
    replay.schema = std::string(op.op_schema);
    replay.tid = op.tid;
    replay.children = subtree_size(index);
    // The labels above it: its pass and nearest scope. Bounded by the node count, so a parent
    // cycle in a damaged trace cannot loop.
    {
      std::optional<uint64_t> parent = op.parent;
      for (size_t depth = 0; parent && *parent != op.id && depth < ops.size(); ++depth) {
        const std::optional<size_t> above = trace.find(*parent);
        if (!above || marker_number(ops[*above].name)) break;
        const std::string_view label = ops[*above].name;
        if (replay.scope.empty() && ops[*above].op_schema.empty()) replay.scope = label;
        if (starts_with(label, "autograd::engine::evaluate_function:")) {
          replay.pass = Pass::kBackward;
          break;
        }
        if (starts_with(label, "Optimizer.")) {
          replay.pass = Pass::kOptimizer;
          break;
        }
        parent = ops[*above].parent;
      }
    }
    Expected<std::vector<Arg>> inputs = builder.args(op, op.inputs);
    if (!inputs) return inputs.error();
    Expected<std::vector<Arg>> outputs = builder.args(op, op.outputs);
    if (!outputs) return outputs.error();
    replay.inputs = std::move(*inputs);
    replay.outputs = std::move(*outputs);
    if (is_comm_name(op.name)) {
      const size_t described = describing_node(index);
      std::optional<convert::CommSpec> spec =
          convert::describe_communication(trace, described, nullptr);
      if (!spec) {
        const std::optional<std::string> what =
            ops[described].name == "record_param_comms"
                ? convert::record_param_comms_name(trace, ops[described])
                : std::nullopt;
        const std::string name = what.value_or(std::string(ops[described].name));
        if (name.find("wait") != std::string::npos) {
          notes.add(
              "waits on a collective (the replay waits where a later operator uses its "
              "tensors)",
              describe(op));
          continue;
        }
        replay.kind = OpKind::kUnsupported;
        replay.reason =
            fmt::format("communication that names no collective, send or receive ({})", name);
      } else {
        CommOp comm;
        comm.spec = std::move(*spec);
        comm.described_by = describe(ops[described]);
        comm.described_node = ops[described].id;
        {
          const HostOp* meta =
              ops[described].name == "record_param_comms" ? &ops[described] : nullptr;
          if (meta == nullptr && ops[described].parent) {
            if (const std::optional<size_t> parent = trace.find(*ops[described].parent);
                parent && ops[*parent].name == "record_param_comms")
              meta = &ops[*parent];
          }
          if (meta != nullptr) {
            const std::optional<int64_t> size = trace.attr_int(*meta, "pg_size");
            if (size && *size > 0 && *size < (1 << 20))
              comm.group_size = static_cast<uint32_t>(*size);
          }
        }
        for (const Arg& arg : replay.inputs) collect_tensor_indices(arg, comm.tensors);
        for (const Arg& arg : replay.outputs) collect_tensor_indices(arg, comm.tensors);
        if (ops[described].id != op.id) {
          Expected<std::vector<Arg>> backend = builder.args(ops[described], ops[described].inputs);
          if (!backend) return backend.error();
          for (const Arg& arg : *backend) collect_tensor_indices(arg, comm.tensors);
        }
        std::sort(comm.tensors.begin(), comm.tensors.end());
        comm.tensors.erase(std::unique(comm.tensors.begin(), comm.tensors.end()),
                           comm.tensors.end());
        if (!comm.tensors.empty()) comm.dtype = plan.tensors[comm.tensors.front()].dtype;
        // c10d calls: (tensors..., ProcessGroup, [root or peer], ...); alltoall_base_: (output,
        // input, ProcessGroup, output_split_sizes, input_split_sizes, timeout).
        using ChakraProtoMsg::CollectiveCommType;
        const CollectiveCommType type = comm.spec.name.type;
        if (starts_with(op.name, "c10d::") &&
            comm.spec.name.kind == convert::CommKind::kCollective) {
          if (type == ChakraProtoMsg::BROADCAST || type == ChakraProtoMsg::REDUCE ||
              type == ChakraProtoMsg::GATHER || type == ChakraProtoMsg::SCATTER) {
            for (const Arg& arg : replay.inputs) {
              if (arg.kind == Arg::Kind::kInt) {
                comm.root = arg.int_value;
                break;
              }
            }
          }
          if (type == ChakraProtoMsg::ALL_TO_ALL) {
            std::vector<const Arg*> lists;
            for (const Arg& arg : replay.inputs) {
              if (arg.kind == Arg::Kind::kList &&
                  std::all_of(arg.items.begin(), arg.items.end(),
                              [](const Arg& item) { return item.kind == Arg::Kind::kInt; }))
                lists.push_back(&arg);
            }
            if (lists.size() >= 2 && !lists[0]->items.empty() && replay.inputs.size() >= 2 &&
                replay.inputs[1].kind == Arg::Kind::kTensor) {
              for (const Arg& item : lists[0]->items) comm.output_splits.push_back(item.int_value);
              for (const Arg& item : lists[1]->items) comm.input_splits.push_back(item.int_value);
              const TensorView& input = plan.tensors[replay.inputs[1].tensor];
              if (!input.shape.empty() && input.shape[0] > 0) {
                comm.row_bytes = static_cast<uint64_t>(input.numel() / input.shape[0]) *
                                 dtype_bytes(input.dtype);
              }
            }
          }
        }
        replay.kind = OpKind::kComm;
        replay.comm = std::move(comm);
      }
    } else if (op.op_schema.empty()) {
      const std::optional<std::string> backend = trace.attr_string(op, "kernel_backend");
      const std::optional<std::string> file = trace.attr_string(op, "kernel_file");
      replay.kind = OpKind::kUnsupported;
      replay.reason =
          fmt::format("a compiled kernel ({}{}{}) with no op schema to build it from",
                      backend && !backend->empty() ? *backend : "torch.compile",
                      file && !file->empty() ? ", " : "", file && !file->empty() ? *file : "");
    }
    apply_tensor_range(trace, op, replay, plan);
    plan.ops.push_back(std::move(replay));
  }
  plan.notes = notes.take();
  return plan;
}

std::vector<uint32_t> op_storages(const ReplayPlan& plan, const ReplayOp& op) {
  std::vector<uint32_t> out;
  const auto walk = [&](const auto& self, const Arg& arg) -> void {
    if (arg.kind == Arg::Kind::kTensor) out.push_back(plan.tensors[arg.tensor].storage);
    for (const Arg& item : arg.items) self(self, item);
  };
  for (const Arg& arg : op.inputs) walk(walk, arg);
  for (const Arg& arg : op.outputs) walk(walk, arg);
  if (op.comm) {
    for (const uint32_t tensor : op.comm->tensors) out.push_back(plan.tensors[tensor].storage);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool share_storage(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] == b[j]) return true;
    if (a[i] < b[j]) {
      ++i;
    } else {
      ++j;
    }
  }
  return false;
}

}  // namespace orrery::replay
