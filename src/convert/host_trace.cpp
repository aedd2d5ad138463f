#include "convert/host_trace.h"

#include <algorithm>
#include <array>
#include <unordered_map>

#include "convert/collectives.h"
#include "convert/json_capture.h"
#include "convert/json_file.h"
#include "core/json_config.h"

namespace orrery::convert {

namespace {

bool is_annotation(std::string_view name) {
  return name == "[pytorch|profiler|execution_trace|thread]" ||
         name == "[pytorch|profiler|execution_trace|process]" ||
         name == "[pytorch|profiler|execution_graph|thread]" ||
         name == "[pytorch|profiler|execution_graph|process]";
}

bool is_gpu_category(std::string_view cat) {
  return cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset";
}

// Attributes the converter and the replay read; the others (fw_parent, seq_id, ...) are not kept.
// op_schema is kept apart, interned (HostOp::op_schema).
bool is_kept_attr(std::string_view name) {
  static constexpr std::array<std::string_view, 14> kKept = {
      "rf_id",           "tid",     "tensor_range",      "kernel_backend",    "kernel_file",
      "collective_name", "dtype",   "in_msg_nelems",     "out_msg_nelems",    "pg_name",
      "pg_desc",         "pg_size", "global_rank_start", "global_rank_stride"};
  return std::find(kKept.begin(), kKept.end(), name) != kKept.end();
}

// Ops whose arguments the converter reads, so their inputs are parsed.
bool needs_values(std::string_view name, HostOpKind kind) {
  return kind == HostOpKind::kProcessGroup || kind == HostOpKind::kGpuOp || is_comm_call(name);
}

std::optional<double> as_number(const nlohmann::json& value) {
  if (!value.is_number()) return std::nullopt;
  return value.get<double>();
}

}  // namespace

std::optional<int64_t> json_int(const nlohmann::json& value) {
  if (value.is_number_integer()) {
    if (value.is_number_unsigned()) {
      const uint64_t number = value.get<uint64_t>();
      if (number > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
      return static_cast<int64_t>(number);
    }
    return value.get<int64_t>();
  }
  return std::nullopt;
}

std::optional<HostLayout> HostTrace::layout_of_schema(std::string_view schema) {
  std::string_view version = schema;
  if (const size_t dash = version.find('-'); dash != std::string_view::npos) {
    const std::string_view suffix = version.substr(dash + 1);
    if (suffix.substr(0, 7) != "chakra.") return std::nullopt;
    version = version.substr(0, dash);
  }
  if (version == "1.0.1") return HostLayout::kFlat;
  if (version == "1.0.2" || version == "1.0.3" || version == "1.1.0" || version == "1.1.1") {
    return HostLayout::kAttrs;
  }
  return std::nullopt;
}

std::optional<size_t> HostTrace::find(uint64_t id) const {
  const auto found = std::lower_bound(by_id_.begin(), by_id_.end(), std::make_pair(id, size_t{0}));
  if (found == by_id_.end() || found->first != id) return std::nullopt;
  return found->second;
}

const nlohmann::json* HostTrace::attr(const HostOp& op, std::string_view name) const {
  for (uint32_t at = op.attrs_begin; at < op.attrs_end; ++at) {
    if (attrs_[at].name == name) return &attrs_[at].value;
  }
  return nullptr;
}

std::optional<std::string> HostTrace::attr_string(const HostOp& op, std::string_view name) const {
  const nlohmann::json* value = attr(op, name);
  if (value == nullptr || !value->is_string()) return std::nullopt;
  return value->get<std::string>();
}

std::optional<int64_t> HostTrace::attr_int(const HostOp& op, std::string_view name) const {
  const nlohmann::json* value = attr(op, name);
  if (value == nullptr) return std::nullopt;
  return json_int(*value);
}

// nlohmann's SAX interface, turning the stream of a host trace into HostOp records.
class HostReader {
 public:
  HostReader(HostTrace& trace, const std::string& path, size_t text_size)
      : trace_(trace), text_size_(text_size) {
    trace_.path_ = path;
  }

  std::optional<Error> error;

  Expected<HostTrace> finish(HostTrace trace);

  // ---- nlohmann::json_sax interface ----
  bool null() { return scalar(nlohmann::json(), "null"); }
  bool boolean(bool value) { return scalar(nlohmann::json(value), value ? "true" : "false"); }
  bool number_integer(int64_t value) {
    return scalar(nlohmann::json(value), std::to_string(value));
  }
  bool number_unsigned(uint64_t value) {
    return scalar(nlohmann::json(value), std::to_string(value));
  }
  bool number_float(double value, const std::string& text) {
    return scalar(nlohmann::json(value), text);
  }
  bool string(std::string& value) {
    if (!stack_.empty() && stack_.back() == Ctx::kText) {
      comma();
      append_json_string(*text_, value);
      return true;
    }
    return scalar(nlohmann::json(std::move(value)), "");
  }
  bool binary(nlohmann::json::binary_t& /*value*/) { return scalar(nlohmann::json(), "null"); }
  bool start_object(std::size_t /*elements*/) { return open(true); }
  bool start_array(std::size_t /*elements*/) { return open(false); }
  bool end_object() { return close(true); }
  bool end_array() { return close(false); }
  bool key(std::string& name);
  bool parse_error(std::size_t position, const std::string& /*token*/,
                   const nlohmann::detail::exception& failure) {
    error = json_parse_error(trace_.path_, position, text_size_, failure.what());
    return false;
  }

 private:
  enum class Ctx : uint8_t {
    kRoot,     // the document
    kNodes,    // the nodes list
    kNode,     // one node
    kIo,       // {values, shapes, types} of a node (attrs layout)
    kText,     // a value written out as compact JSON text
    kAttrs,    // the attrs list of a node
    kAttr,     // one {name, type, value}
    kCapture,  // a value kept as JSON
    kParents,  // a ctrl_deps list: its first entry is the parent
    kSkip,
  };
  enum class Shape : uint8_t { kAbsent, kList, kObject, kOther };

  // The node being read, checked when it ends.
  struct Pending {
    std::optional<nlohmann::json> id;
    std::optional<nlohmann::json> name;
    std::optional<nlohmann::json> parent;     // flat layout
    std::optional<nlohmann::json> ctrl_deps;  // attrs layout (first entry of a list)
    bool ctrl_deps_list = false;
    Shape inputs_shape = Shape::kAbsent;
    Shape outputs_shape = Shape::kAbsent;
    HostIo inputs;
    HostIo outputs;
    std::string cat;
    std::optional<double> exclusive_dur;
    std::optional<double> dur;
    std::optional<double> ts;
    std::optional<int64_t> stream;
    std::string op_schema;
    std::vector<std::pair<std::string, nlohmann::json>> attrs;
  };
  // What finish() still has to check, per op: the layout's parent field and the io shapes.
  struct Deferred {
    size_t position = 0;
    std::optional<nlohmann::json> parent;
    std::optional<nlohmann::json> ctrl_deps;
    bool ctrl_deps_list = false;
    Shape inputs_shape = Shape::kAbsent;
    Shape outputs_shape = Shape::kAbsent;
  };

  bool fail(Error failure) {
    error = std::move(failure);
    return false;
  }

  std::string node_where(size_t position) const {
    if (node_.id && json_int(*node_.id))
      return fmt::format("{}: node {}", trace_.path_, *json_int(*node_.id));
    return fmt::format("{}: node #{} of the nodes list", trace_.path_, position);
  }

  // Starts writing a value into `target` as JSON text.
  void begin_text(std::string* target) {
    text_ = target;
    text_->clear();
  }

  void comma() {
    if (text_first_.empty()) return;
    if (text_after_key_) {
      text_after_key_ = false;
      return;
    }
    if (!text_first_.back()) *text_ += ',';
    text_first_.back() = false;
  }

  // The one stored copy of `text` (op names, attribute names and schemas repeat a lot).
  std::string_view intern(const std::string& text) {
    const auto found = names_index_.find(text);
    if (found != names_index_.end()) return found->second;
    const std::string& stored = trace_.names_.emplace_back(text);
    names_index_.emplace(stored, stored);
    return stored;
  }

  bool open(bool object);
  bool close(bool object);
  bool scalar(nlohmann::json value, const std::string& text);
  bool finish_node();

  HostTrace& trace_;
  size_t text_size_;
  std::vector<Ctx> stack_;
  std::string key_;
  size_t position_ = 0;  // of the node being read, in the nodes list
  Pending node_;
  std::vector<Deferred> deferred_;
  HostIo* io_ = nullptr;  // the inputs or outputs being read (kIo)
  // Text writing.
  std::string* text_ = nullptr;
  std::vector<bool> text_first_;
  bool text_after_key_ = false;
  // Value capture (attribute values).
  JsonCapture capture_;
  std::string attr_name_;
  nlohmann::json attr_value_;
  bool seen_nodes_ = false;
  bool seen_schema_ = false;
  std::unordered_map<std::string_view, std::string_view> names_index_;
};

bool HostReader::key(std::string& name) {
  if (!stack_.empty()) {
    switch (stack_.back()) {
      case Ctx::kRoot:
        if (name == "traceEvents") {
          return fail(Error::make(ErrorKind::kParse,
                                  "{}: this is a Kineto trace (it has 'traceEvents'), not a "
                                  "PyTorch execution trace: give it with --device",
                                  trace_.path_));
        }
        break;
      case Ctx::kText:
        comma();
        append_json_string(*text_, name);
        *text_ += ':';
        text_after_key_ = true;
        return true;
      default:
        break;
    }
  }
  key_ = std::move(name);
  return true;
}

bool HostReader::open(bool object) {
  if (stack_.empty()) {
    if (!object) {
      return fail(Error::make(ErrorKind::kParse,
                              "{}: expected a PyTorch execution trace (an object with 'schema' and "
                              "'nodes'), found a list",
                              trace_.path_));
    }
    stack_.push_back(Ctx::kRoot);
    return true;
  }
  const auto start_text = [&](std::string* target) {
    begin_text(target);
    *text_ += object ? '{' : '[';
    text_first_.assign(1, true);
    text_after_key_ = false;
    stack_.push_back(Ctx::kText);
  };
  switch (stack_.back()) {
    case Ctx::kRoot:
      if (key_ == "nodes" && !object) {
        seen_nodes_ = true;
        stack_.push_back(Ctx::kNodes);
      } else {
        stack_.push_back(Ctx::kSkip);
      }
      return true;
    case Ctx::kNodes:
      if (!object) {
        return fail(Error::make(ErrorKind::kParse,
                                "{}: node #{} of the nodes list is not an object", trace_.path_,
                                position_));
      }
      node_ = Pending();
      stack_.push_back(Ctx::kNode);
      return true;
    case Ctx::kNode:
      if (key_ == "inputs" || key_ == "outputs") {
        const bool inputs = key_ == "inputs";
        (inputs ? node_.inputs_shape : node_.outputs_shape) =
            object ? Shape::kObject : Shape::kList;
        HostIo& io = inputs ? node_.inputs : node_.outputs;
        if (object) {
          io_ = &io;
          stack_.push_back(Ctx::kIo);
        } else {
          start_text(&io.values_text);
        }
      } else if (key_ == "input_shapes" || key_ == "input_types" || key_ == "output_shapes" ||
                 key_ == "output_types") {
        HostIo& io = key_[0] == 'i' ? node_.inputs : node_.outputs;
        start_text(key_.find("shapes") != std::string::npos ? &io.shapes_text : &io.types_text);
      } else if (key_ == "attrs" && !object) {
        stack_.push_back(Ctx::kAttrs);
      } else if (key_ == "ctrl_deps" && !object) {
        node_.ctrl_deps_list = true;
        stack_.push_back(Ctx::kParents);
      } else {
        stack_.push_back(Ctx::kSkip);
      }
      return true;
    case Ctx::kIo:
      if (key_ == "values") {
        start_text(&io_->values_text);
      } else if (key_ == "shapes") {
        start_text(&io_->shapes_text);
      } else if (key_ == "types") {
        start_text(&io_->types_text);
      } else if (key_ == "strides") {
        start_text(&io_->strides_text);
      } else {
        stack_.push_back(Ctx::kSkip);
      }
      return true;
    case Ctx::kText:
      comma();
      *text_ += object ? '{' : '[';
      text_first_.push_back(true);
      stack_.push_back(Ctx::kText);
      return true;
    case Ctx::kAttrs:
      if (object) {
        attr_name_.clear();
        attr_value_ = nlohmann::json();
        stack_.push_back(Ctx::kAttr);
      } else {
        stack_.push_back(Ctx::kSkip);
      }
      return true;
    case Ctx::kAttr:
      if (key_ == "value") {
        capture_.begin(attr_value_, object);
        stack_.push_back(Ctx::kCapture);
      } else {
        stack_.push_back(Ctx::kSkip);
      }
      return true;
    case Ctx::kCapture:
      capture_.open(key_, object);
      stack_.push_back(Ctx::kCapture);
      return true;
    case Ctx::kParents:
    case Ctx::kSkip:
      stack_.push_back(Ctx::kSkip);
      return true;
  }
  return true;
}

bool HostReader::close(bool object) {
  const Ctx top = stack_.back();
  stack_.pop_back();
  switch (top) {
    case Ctx::kText:
      *text_ += object ? '}' : ']';
      text_first_.pop_back();
      return true;
    case Ctx::kCapture:
      capture_.close();
      return true;
    case Ctx::kIo:
      io_ = nullptr;
      return true;
    case Ctx::kAttr:
      if (attr_name_ == "op_schema") {
        if (attr_value_.is_string()) node_.op_schema = attr_value_.get<std::string>();
      } else if (is_kept_attr(attr_name_)) {
        node_.attrs.emplace_back(attr_name_, std::move(attr_value_));
      }
      return true;
    case Ctx::kNode:
      return finish_node();
    default:
      return true;
  }
}

bool HostReader::scalar(nlohmann::json value, const std::string& text) {
  if (stack_.empty()) return true;
  switch (stack_.back()) {
    case Ctx::kRoot:
      if (key_ == "schema") {
        seen_schema_ = true;
        if (!value.is_string()) {
          return fail(Error::make(ErrorKind::kParse, "{}: 'schema' is {}, expected text",
                                  trace_.path_, json_excerpt(value)));
        }
        trace_.schema_ = value.get<std::string>();
        const std::optional<HostLayout> layout = HostTrace::layout_of_schema(trace_.schema_);
        if (!layout) {
          return fail(Error::make(ErrorKind::kParse,
                                  "{}: unknown schema '{}' (known: 1.0.1, 1.0.2, 1.0.3, 1.1.0 and "
                                  "1.1.1, optionally with a -chakra.0.0.4 suffix)",
                                  trace_.path_, trace_.schema_));
        }
        trace_.layout_ = *layout;
      } else if (key_ == "pid") {
        trace_.pid_ = json_int(value);
      }
      trace_.header_[key_] = std::move(value);
      return true;
    case Ctx::kNodes:
      return fail(Error::make(ErrorKind::kParse,
                              "{}: node #{} of the nodes list is not an object: {}", trace_.path_,
                              position_, json_excerpt(value)));
    case Ctx::kNode:
      if (key_ == "id") {
        node_.id = std::move(value);
      } else if (key_ == "name") {
        node_.name = std::move(value);
      } else if (key_ == "parent") {
        node_.parent = std::move(value);
      } else if (key_ == "ctrl_deps") {
        node_.ctrl_deps = std::move(value);
      } else if (key_ == "inputs" || key_ == "outputs") {
        (key_ == "inputs" ? node_.inputs_shape : node_.outputs_shape) = Shape::kOther;
      } else if (key_ == "cat") {
        if (value.is_string()) node_.cat = value.get<std::string>();
      } else if (key_ == "exclusive_dur") {
        node_.exclusive_dur = as_number(value);
      } else if (key_ == "dur") {
        node_.dur = as_number(value);
      } else if (key_ == "ts") {
        node_.ts = as_number(value);
      } else if (key_ == "stream") {
        node_.stream = json_int(value);
      } else if (key_ == "op_schema") {
        if (value.is_string()) node_.op_schema = value.get<std::string>();
      } else if (is_kept_attr(key_)) {
        node_.attrs.emplace_back(key_, std::move(value));
      }
      return true;
    case Ctx::kText:
      comma();
      if (value.is_string()) {
        append_json_string(*text_, value.get_ref<const std::string&>());
      } else {
        *text_ += text;
      }
      return true;
    case Ctx::kAttr:
      if (key_ == "name" && value.is_string()) {
        attr_name_ = value.get<std::string>();
      } else if (key_ == "value") {
        attr_value_ = std::move(value);
      }
      return true;
    case Ctx::kCapture:
      capture_.value(key_, std::move(value));
      return true;
    case Ctx::kParents:
      if (!node_.ctrl_deps) node_.ctrl_deps = std::move(value);
      return true;
    default:
      return true;
  }
}

bool HostReader::finish_node() {
  const size_t position = position_++;
  if (!node_.id)
    return fail(Error::make(ErrorKind::kParse, "{}: has no 'id'", node_where(position)));
  const std::optional<int64_t> id = json_int(*node_.id);
  if (!id || *id < 0) {
    return fail(Error::make(ErrorKind::kParse, "{}: 'id' is {}, expected a non-negative integer",
                            node_where(position), json_excerpt(*node_.id)));
  }
  if (!node_.name || !node_.name->is_string()) {
    return fail(Error::make(ErrorKind::kParse, "{}: {} (expected the operator name as text)",
                            node_where(position),
                            node_.name ? "'name' is not text" : "has no 'name'"));
  }
  HostOp op;
  op.id = static_cast<uint64_t>(*id);
  op.name = intern(node_.name->get_ref<const std::string&>());
  if (!node_.op_schema.empty()) op.op_schema = intern(node_.op_schema);
  op.inputs = std::move(node_.inputs);
  op.outputs = std::move(node_.outputs);
  op.exclusive_dur_us = node_.exclusive_dur ? node_.exclusive_dur : node_.dur;
  op.ts_us = node_.ts;
  op.stream = node_.stream;
  op.attrs_begin = static_cast<uint32_t>(trace_.attrs_.size());
  for (auto& [name, value] : node_.attrs) trace_.attrs_.push_back({intern(name), std::move(value)});
  op.attrs_end = static_cast<uint32_t>(trace_.attrs_.size());
  op.rf_id = trace_.attr_int(op, "rf_id");
  op.tid = trace_.attr_int(op, "tid").value_or(0);
  if (is_annotation(op.name)) {
    op.kind = HostOpKind::kAnnotation;
  } else if (op.name.find("process_group:init") != std::string_view::npos) {
    op.kind = HostOpKind::kProcessGroup;
  } else if (is_gpu_category(node_.cat)) {
    op.kind = HostOpKind::kGpuOp;
  }
  trace_.ops_.push_back(std::move(op));
  deferred_.push_back({position, std::move(node_.parent), std::move(node_.ctrl_deps),
                       node_.ctrl_deps_list, node_.inputs_shape, node_.outputs_shape});
  return true;
}

Expected<HostTrace> HostReader::finish(HostTrace trace) {
  if (error) return *error;
  const std::string& path = trace.path_;
  if (!seen_schema_) {
    return Error::make(ErrorKind::kParse,
                       "{}: no 'schema' version (expected a PyTorch execution trace: "
                       "{{\"schema\": \"1.1.0-chakra.0.0.4\", \"nodes\": [...]}})",
                       path);
  }
  if (!seen_nodes_) {
    return Error::make(ErrorKind::kParse, "{}: no 'nodes' list (schema {})", path, trace.schema_);
  }
  const bool flat = trace.layout_ == HostLayout::kFlat;
  const char* parent_key = flat ? "parent" : "ctrl_deps";
  for (size_t index = 0; index < trace.ops_.size(); ++index) {
    HostOp& op = trace.ops_[index];
    const Deferred& check = deferred_[index];
    const std::string where = fmt::format("{}: node {}", path, op.id);
    const std::optional<nlohmann::json>& parent = flat ? check.parent : check.ctrl_deps;
    if (!parent) {
      if (!(check.ctrl_deps_list && !flat)) {
        return Error::make(ErrorKind::kParse,
                           "{}: has no '{}' (schema {} nodes name their parent there)", where,
                           parent_key, trace.schema_);
      }
    } else if (const std::optional<int64_t> value = json_int(*parent)) {
      if (*value >= 0) op.parent = static_cast<uint64_t>(*value);
    } else {
      return Error::make(ErrorKind::kParse, "{}: '{}' is {}, expected the parent's id", where,
                         parent_key, json_excerpt(*parent));
    }
    const Shape wanted = flat ? Shape::kList : Shape::kObject;
    for (const auto& [key, shape] :
         {std::pair{"inputs", check.inputs_shape}, std::pair{"outputs", check.outputs_shape}}) {
      if (shape != Shape::kAbsent && shape != wanted) {
        return Error::make(ErrorKind::kParse, "{}: '{}' is not {} (schema {})", where, key,
                           flat ? "a list of values" : "an object {values, shapes, types}",
                           trace.schema_);
      }
    }
    if (needs_values(op.name, op.kind)) {
      for (HostIo* io : {&op.inputs, &op.outputs}) {
        if (!io->values_text.empty()) {
          io->values = &trace.parsed_.emplace_back(
              nlohmann::json::parse(io->values_text, nullptr, /*allow_exceptions=*/false));
        }
        if (!io->types_text.empty()) {
          io->types = &trace.parsed_.emplace_back(
              nlohmann::json::parse(io->types_text, nullptr, /*allow_exceptions=*/false));
        }
      }
    }
  }
  trace.by_id_.reserve(trace.ops_.size());
  for (size_t index = 0; index < trace.ops_.size(); ++index)
    trace.by_id_.emplace_back(trace.ops_[index].id, index);
  std::sort(trace.by_id_.begin(), trace.by_id_.end());
  for (size_t index = 1; index < trace.by_id_.size(); ++index) {
    if (trace.by_id_[index].first == trace.by_id_[index - 1].first) {
      return Error::make(ErrorKind::kParse, "{}: node {}: the id is used more than once", path,
                         trace.by_id_[index].first);
    }
  }
  return trace;
}

Expected<HostTrace> parse_host_text(const std::string& path, const std::string& text) {
  HostTrace trace;
  HostReader reader(trace, path, text.size());
  nlohmann::json::sax_parse(text, &reader);
  return reader.finish(std::move(trace));
}

Expected<HostTrace> read_host_trace(const std::string& path) {
  Expected<std::string> text = read_file_text(path);
  if (!text) return text.error();
  return parse_host_text(path, *text);
}

Expected<HostTrace> parse_host_trace(const std::string& path, const nlohmann::json& doc) {
  return parse_host_text(path, doc.dump());
}

namespace {

// Tensors sit at most a few lists deep (a list of lists of tensors); deeper nesting is not a
// trace's, and unbounded recursion on it would exhaust the stack.
constexpr int kMaxTensorNesting = 32;

void collect_tensors_at(const nlohmann::json& value, std::vector<HostTensor>& out, int depth) {
  if (!value.is_array() || depth > kMaxTensorNesting) return;
  if (value.size() == 6 && value[5].is_string() && json_int(value[3]) && json_int(value[4])) {
    const int64_t elements = *json_int(value[3]);
    const int64_t bytes = *json_int(value[4]);
    if (elements >= 0 && bytes >= 0) {
      out.push_back({static_cast<uint64_t>(elements), static_cast<uint64_t>(bytes),
                     json_int(value[1]), json_int(value[0])});
    }
    return;
  }
  for (const nlohmann::json& item : value) collect_tensors_at(item, out, depth + 1);
}

}  // namespace

void collect_tensors(const nlohmann::json& value, std::vector<HostTensor>& out) {
  collect_tensors_at(value, out, 0);
}

uint64_t tensor_bytes(const HostIo& io) {
  if (io.values == nullptr || !io.values->is_array()) return 0;
  std::vector<HostTensor> tensors;
  const bool typed =
      io.types != nullptr && io.types->is_array() && io.types->size() == io.values->size();
  for (size_t index = 0; index < io.values->size(); ++index) {
    if (typed) {
      const nlohmann::json& type = (*io.types)[index];
      if (!type.is_string() ||
          type.get_ref<const std::string&>().find("Tensor") == std::string::npos) {
        continue;
      }
    }
    collect_tensors((*io.values)[index], tensors);
  }
  uint64_t total = 0;
  for (const HostTensor& tensor : tensors) total = saturating_add(total, tensor.bytes());
  return total;
}

}  // namespace orrery::convert
