// The one file of orrery that reads PyTorch's formats with libtorch (partition/model_file.h).
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/freeze_module.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/script.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "core/text_file.h"
#include "partition/model_file.h"

namespace orrery::partition {

namespace {

Error torch_error(const std::string& path, const std::string& what) {
  return Error::make(ErrorKind::kParse, "{}: {}", path, what);
}

// The first line of a libtorch exception (the rest is a C++ backtrace).
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

Matrix to_matrix(const at::Tensor& tensor, int64_t rows, int64_t cols) {
  const at::Tensor t = tensor.to(at::kDouble).contiguous().reshape({rows, cols});
  Matrix m(rows, cols);
  const double* data = t.data_ptr<double>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) m(r, c) = data[r * cols + c];
  }
  return m;
}

Vector to_vector(const at::Tensor& tensor) {
  const at::Tensor t = tensor.to(at::kDouble).contiguous().reshape({-1});
  Vector v(t.numel());
  const double* data = t.data_ptr<double>();
  for (int64_t i = 0; i < v.size(); ++i) v(i) = data[i];
  return v;
}

// ---- TorchScript ------------------------------------------------------------------------------

// Reads a frozen, inlined forward graph as a chain of layers.
class GraphReader {
 public:
  GraphReader(std::string path, Model& model) : path_(std::move(path)), model_(model) {}

  Status read(const torch::jit::Graph& graph) {
    const auto inputs = graph.inputs();
    // The first input is the module itself.
    if (inputs.size() != 2) {
      return torch_error(path_, fmt::format("forward takes {} inputs; a chain takes one tensor",
                                            inputs.size() - 1));
    }
    current_ = inputs[1];
    for (const torch::jit::Node* node : graph.nodes()) {
      Status status = visit(*node);
      if (!status) return status;
    }
    const torch::jit::Value* result = graph.outputs()[0];
    if (result->node()->kind() == c10::prim::TupleConstruct &&
        result->node()->inputs().size() == 1) {
      result = result->node()->inputs()[0];
    }
    if (result != current_) {
      return torch_error(path_, "forward does not return the output of its chain of layers");
    }
    return Status::ok();
  }

 private:
  std::string where(const torch::jit::Node& node) const {
    std::ostringstream text;
    text << node.kind().toQualString();
    const auto range = node.sourceRange();
    if (auto source = range.source()) {
      if (auto file = source->filename()) {
        text << " (" << *file << ":" << source->lineno_for_offset(range.start()) + 1 << ")";
      }
    }
    return text.str();
  }

  Error unsupported(const torch::jit::Node& node, const std::string& why) const {
    return torch_error(path_, fmt::format("{}: {}", where(node), why));
  }

  Expected<c10::IValue> constant(const torch::jit::Node& node, size_t input) const {
    const torch::jit::Value* value = node.inputs()[input];
    if (value == batch_) return c10::IValue(int64_t{-1});
    auto known = torch::jit::toIValue(value);
    if (!known) return unsupported(node, fmt::format("argument {} is not a constant", input));
    return *known;
  }

  Expected<std::vector<int64_t>> int_list(const torch::jit::Node& node, size_t input) const {
    const torch::jit::Value* value = node.inputs()[input];
    if (value->node()->kind() == c10::prim::ListConstruct) {
      std::vector<int64_t> out;
      for (const torch::jit::Value* item : value->node()->inputs()) {
        if (item == batch_) {
          out.push_back(-1);
          continue;
        }
        auto known = torch::jit::toIValue(item);
        if (!known || !known->isInt()) return unsupported(node, "a shape that is not constant");
        out.push_back(known->toInt());
      }
      return out;
    }
    Expected<c10::IValue> known = constant(node, input);
    if (!known) return known.error();
    if (known->isInt()) return std::vector<int64_t>{known->toInt()};
    if (!known->isIntList()) return unsupported(node, "expected a list of integers");
    return known->toIntVector();
  }

  Expected<at::Tensor> tensor(const torch::jit::Node& node, size_t input) const {
    Expected<c10::IValue> known = constant(node, input);
    if (!known) return known.error();
    if (!known->isTensor())
      return unsupported(node, fmt::format("argument {} is not a tensor", input));
    return known->toTensor();
  }

  Status add_dense(const torch::jit::Node& node, const torch::jit::Value* bias_value) {
    Expected<at::Tensor> w = tensor(node, 1);
    if (!w) return w.error();
    if (w->dim() != 2) return unsupported(node, "a weight that is not a matrix");
    Layer layer;
    layer.kind = LayerKind::kDense;
    layer.name = fmt::format("linear{}", model_.weighted_layers());
    layer.weight = to_matrix(*w, w->size(0), w->size(1));
    if (bias_value) {
      auto b = torch::jit::toIValue(bias_value);
      if (b && b->isTensor()) layer.bias = to_vector(b->toTensor());
    }
    model_.layers.push_back(std::move(layer));
    return Status::ok();
  }

  Status add_conv(const torch::jit::Node& node, bool underscore) {
    Expected<at::Tensor> w = tensor(node, 1);
    if (!w) return w.error();
    if (w->dim() != 4) return unsupported(node, "only 2-D convolutions (4-D weights)");
    auto stride = int_list(node, 3);
    if (!stride) return stride.error();
    auto padding = constant(node, 4);
    if (!padding) return padding.error();
    if (!padding->isIntList()) {
      return unsupported(node, "padding given by name (\"same\"): save the model with numbers");
    }
    auto dilation = int_list(node, 5);
    if (!dilation) return dilation.error();
    const size_t groups_at = underscore ? 8 : 6;
    auto groups = constant(node, groups_at);
    if (!groups) return groups.error();
    if (underscore) {
      auto transposed = constant(node, 6);
      if (!transposed) return transposed.error();
      if (transposed->toBool()) return unsupported(node, "transposed convolutions");
    }
    const std::vector<int64_t> pad = padding->toIntVector();
    if (stride->size() != 2 || pad.size() != 2 || dilation->size() != 2) {
      return unsupported(node, "stride, padding and dilation of two numbers each");
    }
    if ((*dilation)[0] != 1 || (*dilation)[1] != 1 || groups->toInt() != 1) {
      return unsupported(node, "dilated or grouped convolutions");
    }
    Layer layer;
    layer.kind = LayerKind::kConv2d;
    layer.name = fmt::format("conv{}", model_.weighted_layers());
    layer.kernel_h = w->size(2);
    layer.kernel_w = w->size(3);
    layer.stride_h = (*stride)[0];
    layer.stride_w = (*stride)[1];
    layer.pad_h = pad[0];
    layer.pad_w = pad[1];
    layer.weight = to_matrix(*w, w->size(0), w->size(1) * w->size(2) * w->size(3));
    auto b = torch::jit::toIValue(node.inputs()[2]);
    if (b && b->isTensor()) layer.bias = to_vector(b->toTensor());
    model_.layers.push_back(std::move(layer));
    return Status::ok();
  }

  Status add_reshape(const torch::jit::Node& node, const std::vector<int64_t>& shape) {
    if (shape.empty() || (shape[0] != -1 && shape[0] != 0 && shape.size() > 1 && shape[0] < 0)) {
      return unsupported(node, "a reshape whose first dimension is not the batch");
    }
    Layer layer;
    layer.kind = LayerKind::kReshape;
    layer.name = "reshape";
    const bool open = std::count(shape.begin() + 1, shape.end(), -1) > 0;
    if (shape.size() == 2 || open) {
      if (open && shape.size() != 2) {
        return unsupported(node, "a reshape with an open dimension other than flatten");
      }
      layer.reshape_to = {0, 1, 1};  // flatten: finish_model gives the feature count
      if (!open) layer.reshape_to = {shape[1], 1, 1};
    } else if (shape.size() == 4) {
      layer.reshape_to = {shape[1], shape[2], shape[3]};
    } else {
      return unsupported(node, fmt::format("a reshape to {} dimensions", shape.size()));
    }
    model_.layers.push_back(std::move(layer));
    return Status::ok();
  }

  Status visit(const torch::jit::Node& node) {
    const c10::Symbol kind = node.kind();
    const bool on_data = !node.inputs().empty() && node.inputs()[0] == current_;
    const std::string name = kind.toQualString();
    if (kind == c10::prim::Constant || kind == c10::prim::ListConstruct) return Status::ok();
    if (name == "aten::size" && on_data) {
      auto dim = constant(node, 1);
      if (!dim) return dim.error();
      if (dim->toInt() != 0) return unsupported(node, "a shape computed from other than the batch");
      batch_ = node.output();
      return Status::ok();
    }
    if ((name == "prim::NumToTensor" || name == "aten::Int") && node.inputs()[0] == batch_) {
      batch_ = node.output();
      return Status::ok();
    }
    for (size_t i = 1; i < node.inputs().size(); ++i) {
      if (node.inputs()[i] == current_) {
        return unsupported(node,
                           "the activations feed this operation as more than its input "
                           "(only chains of layers can be partitioned)");
      }
    }
    if (!on_data) {
      if (node.outputs().empty() || !node.hasUses()) return Status::ok();
      return unsupported(node, "an operation the reader does not know, outside the data path");
    }
    Status status = Status::ok();
    if (name == "aten::linear") {
      status = add_dense(node, node.inputs().size() > 2 ? node.inputs()[2] : nullptr);
    } else if (name == "aten::_convolution") {
      status = add_conv(node, true);
    } else if (name == "aten::conv2d") {
      status = add_conv(node, false);
    } else if (name == "aten::relu" || name == "aten::relu_") {
      Layer layer;
      layer.kind = LayerKind::kRelu;
      layer.name = "relu";
      model_.layers.push_back(std::move(layer));
    } else if (name == "aten::max_pool2d") {
      auto kernel = int_list(node, 1);
      if (!kernel) return kernel.error();
      auto stride = int_list(node, 2);
      if (!stride) return stride.error();
      auto padding = int_list(node, 3);
      if (!padding) return padding.error();
      auto dilation = int_list(node, 4);
      if (!dilation) return dilation.error();
      auto ceil = constant(node, 5);
      if (!ceil) return ceil.error();
      if (kernel->size() == 1) kernel->push_back((*kernel)[0]);
      if (stride->empty()) *stride = *kernel;
      if (stride->size() == 1) stride->push_back((*stride)[0]);
      const bool zero_pad =
          std::all_of(padding->begin(), padding->end(), [](int64_t p) { return p == 0; });
      const bool unit_dilation =
          std::all_of(dilation->begin(), dilation->end(), [](int64_t d) { return d == 1; });
      if (!zero_pad || !unit_dilation || ceil->toBool()) {
        return unsupported(node, "max pooling with padding, dilation or ceil mode");
      }
      Layer layer;
      layer.kind = LayerKind::kMaxPool2d;
      layer.name = "maxpool";
      layer.kernel_h = (*kernel)[0];
      layer.kernel_w = (*kernel)[1];
      layer.stride_h = (*stride)[0];
      layer.stride_w = (*stride)[1];
      model_.layers.push_back(std::move(layer));
    } else if (name == "aten::flatten") {
      auto start = constant(node, 1);
      if (!start) return start.error();
      auto end = constant(node, 2);
      if (!end) return end.error();
      if (start->toInt() != 1 || end->toInt() != -1) {
        return unsupported(node, "flatten other than from dimension 1 to the end");
      }
      status = add_reshape(node, {-1, -1});
    } else if (name == "aten::view" || name == "aten::reshape") {
      auto shape = int_list(node, 1);
      if (!shape) return shape.error();
      status = add_reshape(node, *shape);
    } else if (name == "aten::dropout" || name == "aten::dropout_" ||
               name == "aten::feature_dropout" || name == "aten::contiguous" ||
               name == "aten::detach") {
      // Inference: identity.
    } else {
      return unsupported(node, "an operation the partitioner does not know");
    }
    if (!status) return status;
    current_ = node.output();
    return Status::ok();
  }

  std::string path_;
  Model& model_;
  const torch::jit::Value* current_ = nullptr;
  const torch::jit::Value* batch_ = nullptr;  // the batch size, as the graph computes it
};

Expected<Model> read_torchscript(const std::string& path) {
  Model model;
  model.source = path;
  try {
    torch::jit::Module module = torch::jit::load(path, c10::Device(c10::kCPU));
    module.eval();
    torch::jit::Module frozen = torch::jit::freeze_module(module);
    std::shared_ptr<torch::jit::Graph> graph = frozen.get_method("forward").graph()->copy();
    torch::jit::Inline(*graph);
    torch::jit::ConstantPropagation(graph);
    GraphReader reader(path, model);
    Status status = reader.read(*graph);
    if (!status) return status.error();
  } catch (const c10::Error& error) {
    return torch_error(path, "TorchScript: " + first_line(error.what_without_backtrace()));
  } catch (const std::exception& error) {
    return torch_error(path, std::string("TorchScript: ") + first_line(error.what()));
  }
  return model;
}

// ---- state dicts: the pickle opcodes torch.save writes (protocol 2) ----------------------------

struct PyValue;
using PyRef = std::shared_ptr<PyValue>;

struct StorageRef {
  std::string key;
  c10::ScalarType dtype = c10::kFloat;
  int64_t numel = 0;
};

struct PyValue {
  enum class Kind : uint8_t {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kTuple,
    kList,
    kDict,
    kGlobal,
    kStorage,
    kTensor,
    kObject,
    kMark
  };
  Kind kind = Kind::kNone;
  int64_t integer = 0;
  double number = 0.0;
  std::string text;              // string; global "module.name"
  std::vector<PyRef> items;      // tuple, list; dict as key, value, key, value, ...
  StorageRef storage;            // storage; tensor: its storage
  int64_t offset = 0;            // tensor
  std::vector<int64_t> sizes;    // tensor
  std::vector<int64_t> strides;  // tensor
};

class Unpickler {
 public:
  Unpickler(const std::string& path, const std::string& bytes) : path_(path), bytes_(bytes) {}
  Unpickler(const Unpickler&) = delete;
  Unpickler& operator=(const Unpickler&) = delete;
  // The values form whatever graph the file builds, cycles included (a list appended to itself
  // through the memo leaked every value on it): the unpickler owns them all and cuts their links
  // when it ends, which also frees a deep nesting without recursing. Values the caller still holds
  // lose their items, so the caller reads them before the unpickler goes.
  ~Unpickler() {
    for (const PyRef& value : made_) value->items.clear();
  }

  Expected<PyRef> run() {
    while (true) {
      if (at_ >= bytes_.size()) return fail("the pickle ends before its STOP");
      const auto op = static_cast<uint8_t>(bytes_[at_++]);
      Status status = step(op);
      if (!status) return status.error();
      if (done_) break;
    }
    if (stack_.size() != 1) return fail("the pickle leaves more than one value");
    return stack_.back();
  }

 private:
  Error fail(const std::string& what) const {
    return Error::make(ErrorKind::kParse, "{}: state dict pickle, byte {}: {}", path_, at_, what);
  }
  PyRef make(PyValue::Kind kind) {
    auto value = std::make_shared<PyValue>();
    value->kind = kind;
    made_.push_back(value);
    return value;
  }
  bool take(size_t n, const char** out) {
    if (at_ + n > bytes_.size()) return false;
    *out = bytes_.data() + at_;
    at_ += n;
    return true;
  }
  template <typename T>
  bool read_le(T& value) {
    const char* p = nullptr;
    if (!take(sizeof(T), &p)) return false;
    std::memcpy(&value, p, sizeof(T));  // pickle integers are little-endian, as is x86-64
    return true;
  }
  bool read_line(std::string& line) {
    const size_t end = bytes_.find('\n', at_);
    if (end == std::string::npos) return false;
    line = bytes_.substr(at_, end - at_);
    at_ = end + 1;
    return true;
  }
  Expected<PyRef> pop() {
    if (stack_.empty()) return fail("pop from an empty stack");
    PyRef v = stack_.back();
    stack_.pop_back();
    return v;
  }
  // The values above the topmost mark, which is removed.
  Expected<std::vector<PyRef>> pop_mark() {
    size_t mark = stack_.size();
    while (mark > 0 && stack_[mark - 1]->kind != PyValue::Kind::kMark) --mark;
    if (mark == 0) return fail("no mark on the stack");
    std::vector<PyRef> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark - 1);
    return items;
  }
  void push_int(int64_t value) {
    PyRef v = make(PyValue::Kind::kInt);
    v->integer = value;
    stack_.push_back(v);
  }

  Expected<PyRef> reduce(const PyRef& callable, const PyRef& args) {
    if (callable->kind != PyValue::Kind::kGlobal)
      return fail("REDUCE on a value that is not callable");
    const std::string& name = callable->text;
    const auto& a = args->items;
    if (name == "collections.OrderedDict") return make(PyValue::Kind::kDict);
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
      if (a.size() < 4 || a[0]->kind != PyValue::Kind::kStorage) {
        return fail("_rebuild_tensor without a storage");
      }
      PyRef t = make(PyValue::Kind::kTensor);
      t->storage = a[0]->storage;
      t->offset = a[1]->integer;
      for (const PyRef& s : a[2]->items) t->sizes.push_back(s->integer);
      for (const PyRef& s : a[3]->items) t->strides.push_back(s->integer);
      return t;
    }
    if (name == "torch._utils._rebuild_parameter" && !a.empty()) return a[0];
    PyRef object = make(PyValue::Kind::kObject);  // anything else: kept opaque
    object->text = name;
    return object;
  }

  Expected<PyRef> persistent(const PyRef& pid) {
    const auto& a = pid->items;
    if (pid->kind != PyValue::Kind::kTuple || a.size() < 5 || a[0]->text != "storage") {
      return fail("a persistent id that is not a tensor storage");
    }
    static const std::map<std::string, c10::ScalarType> kTypes = {
        {"torch.FloatStorage", c10::kFloat}, {"torch.DoubleStorage", c10::kDouble},
        {"torch.HalfStorage", c10::kHalf},   {"torch.BFloat16Storage", c10::kBFloat16},
        {"torch.LongStorage", c10::kLong},   {"torch.IntStorage", c10::kInt},
        {"torch.ShortStorage", c10::kShort}, {"torch.CharStorage", c10::kChar},
        {"torch.ByteStorage", c10::kByte},   {"torch.BoolStorage", c10::kBool}};
    const auto type = kTypes.find(a[1]->text);
    if (type == kTypes.end()) return fail("storage of type " + a[1]->text);
    PyRef s = make(PyValue::Kind::kStorage);
    s->storage.key = a[2]->text;
    s->storage.dtype = type->second;
    s->storage.numel = a[4]->integer;
    return s;
  }

  Status step(uint8_t op) {
    using K = PyValue::Kind;
    switch (op) {
      case 0x80: {  // PROTO
        const char* p = nullptr;
        if (!take(1, &p)) return fail("truncated PROTO");
        return Status::ok();
      }
      case 0x95: {  // FRAME
        uint64_t size = 0;
        if (!read_le(size)) return fail("truncated FRAME");
        return Status::ok();
      }
      case 'c': {  // GLOBAL
        std::string module, name;
        if (!read_line(module) || !read_line(name)) return fail("truncated GLOBAL");
        PyRef g = make(K::kGlobal);
        g->text = module + "." + name;
        stack_.push_back(g);
        return Status::ok();
      }
      case 'q': {  // BINPUT
        uint8_t index = 0;
        if (!read_le(index) || stack_.empty()) return fail("bad BINPUT");
        memo_[index] = stack_.back();
        return Status::ok();
      }
      case 'r': {  // LONG_BINPUT
        uint32_t index = 0;
        if (!read_le(index) || stack_.empty()) return fail("bad LONG_BINPUT");
        memo_[index] = stack_.back();
        return Status::ok();
      }
      case 0x94:  // MEMOIZE
        if (stack_.empty()) return fail("bad MEMOIZE");
        memo_[static_cast<uint32_t>(memo_.size())] = stack_.back();
        return Status::ok();
      case 'h':
      case 'j': {  // BINGET, LONG_BINGET
        uint32_t index = 0;
        if (op == 'h') {
          uint8_t small = 0;
          if (!read_le(small)) return fail("truncated BINGET");
          index = small;
        } else if (!read_le(index)) {
          return fail("truncated LONG_BINGET");
        }
        const auto found = memo_.find(index);
        if (found == memo_.end()) return fail(fmt::format("memo {} is not set", index));
        stack_.push_back(found->second);
        return Status::ok();
      }
      case '(':
        stack_.push_back(make(K::kMark));
        return Status::ok();
      case ')':
        stack_.push_back(make(K::kTuple));
        return Status::ok();
      case ']':
        stack_.push_back(make(K::kList));
        return Status::ok();
      case '}':
        stack_.push_back(make(K::kDict));
        return Status::ok();
      case 't':
      case 'l': {  // TUPLE, LIST
        auto items = pop_mark();
        if (!items) return items.error();
        PyRef v = make(op == 't' ? K::kTuple : K::kList);
        v->items = std::move(*items);
        stack_.push_back(v);
        return Status::ok();
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        const size_t n = op - 0x84u;
        if (stack_.size() < n) return fail("TUPLE of too few values");
        PyRef v = make(K::kTuple);
        v->items.assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
        stack_.resize(stack_.size() - n);
        stack_.push_back(v);
        return Status::ok();
      }
      case 'X':
      case 0x8c: {  // BINUNICODE, SHORT_BINUNICODE
        uint32_t size = 0;
        if (op == 'X') {
          if (!read_le(size)) return fail("truncated BINUNICODE");
        } else {
          uint8_t small = 0;
          if (!read_le(small)) return fail("truncated SHORT_BINUNICODE");
          size = small;
        }
        const char* p = nullptr;
        if (!take(size, &p)) return fail("truncated string");
        PyRef v = make(K::kString);
        v->text.assign(p, size);
        stack_.push_back(v);
        return Status::ok();
      }
      case 'K': {
        uint8_t v = 0;
        if (!read_le(v)) return fail("truncated BININT1");
        push_int(v);
        return Status::ok();
      }
      case 'M': {
        uint16_t v = 0;
        if (!read_le(v)) return fail("truncated BININT2");
        push_int(v);
        return Status::ok();
      }
      case 'J': {
        int32_t v = 0;
        if (!read_le(v)) return fail("truncated BININT");
        push_int(v);
        return Status::ok();
      }
      case 0x8a: {  // LONG1
        uint8_t n = 0;
        const char* p = nullptr;
        if (!read_le(n) || n > 8 || !take(n, &p)) return fail("bad LONG1");
        uint64_t bits = 0;
        for (uint8_t i = 0; i < n; ++i)
          bits |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
        if (n > 0 && n < 8 && (static_cast<uint8_t>(p[n - 1]) & 0x80))
          bits |= ~uint64_t{0} << (8 * n);
        push_int(static_cast<int64_t>(bits));
        return Status::ok();
      }
      case 'G': {  // BINFLOAT: big-endian double
        const char* p = nullptr;
        if (!take(8, &p)) return fail("truncated BINFLOAT");
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<uint8_t>(p[i]);
        PyRef v = make(K::kFloat);
        std::memcpy(&v->number, &bits, sizeof bits);
        stack_.push_back(v);
        return Status::ok();
      }
      case 0x88:
      case 0x89: {
        PyRef v = make(K::kBool);
        v->integer = op == 0x88 ? 1 : 0;
        stack_.push_back(v);
        return Status::ok();
      }
      case 'N':
        stack_.push_back(make(K::kNone));
        return Status::ok();
      case 'R': {
        auto args = pop();
        if (!args) return args.error();
        auto callable = pop();
        if (!callable) return callable.error();
        auto result = reduce(*callable, *args);
        if (!result) return result.error();
        stack_.push_back(*result);
        return Status::ok();
      }
      case 'Q': {
        auto pid = pop();
        if (!pid) return pid.error();
        auto storage = persistent(*pid);
        if (!storage) return storage.error();
        stack_.push_back(*storage);
        return Status::ok();
      }
      case 's':
      case 'u': {  // SETITEM, SETITEMS
        std::vector<PyRef> items;
        if (op == 's') {
          if (stack_.size() < 3) return fail("SETITEM on a short stack");
          items.assign(stack_.end() - 2, stack_.end());
          stack_.resize(stack_.size() - 2);
        } else {
          auto marked = pop_mark();
          if (!marked) return marked.error();
          items = std::move(*marked);
        }
        if (stack_.empty() || stack_.back()->kind != K::kDict || items.size() % 2 != 0) {
          return fail("SETITEM on a value that is not a dict");
        }
        auto& dict = stack_.back()->items;
        dict.insert(dict.end(), items.begin(), items.end());
        return Status::ok();
      }
      case 'a':
      case 'e': {  // APPEND, APPENDS
        std::vector<PyRef> items;
        if (op == 'a') {
          auto item = pop();
          if (!item) return item.error();
          items.push_back(*item);
        } else {
          auto marked = pop_mark();
          if (!marked) return marked.error();
          items = std::move(*marked);
        }
        if (stack_.empty() || stack_.back()->kind != K::kList) return fail("APPEND to a non-list");
        auto& list = stack_.back()->items;
        list.insert(list.end(), items.begin(), items.end());
        return Status::ok();
      }
      case 'b': {  // BUILD: an object's state (OrderedDict's _metadata); not needed
        auto state = pop();
        if (!state) return state.error();
        if (stack_.empty()) return fail("BUILD on an empty stack");
        return Status::ok();
      }
      case '.':
        done_ = true;
        return Status::ok();
      default:
        return fail(fmt::format("pickle opcode 0x{:02x} is not one torch.save writes", op));
    }
  }

  const std::string& path_;
  const std::string& bytes_;
  size_t at_ = 0;
  bool done_ = false;
  std::vector<PyRef> stack_;
  std::map<uint32_t, PyRef> memo_;
  std::vector<PyRef> made_;  // every value made, for the destructor
};

Expected<at::Tensor> load_tensor(caffe2::serialize::PyTorchStreamReader& archive,
                                 const std::string& path, const std::string& name,
                                 const PyValue& value) {
  auto [data, size] = archive.getRecord("data/" + value.storage.key);
  const auto element = static_cast<size_t>(c10::elementSize(value.storage.dtype));
  // The pickle may say anything: the element count must fit the record (compared by division, as
  // count x element size can wrap), and the view must lie inside it with the non-negative sizes
  // and strides torch.save writes, its extent summed without overflow.
  if (value.storage.numel < 0 || static_cast<size_t>(value.storage.numel) > size / element) {
    return torch_error(path, fmt::format("{}: its storage holds {} bytes, not {} elements", name,
                                         size, value.storage.numel));
  }
  if (value.sizes.size() != value.strides.size()) {
    return torch_error(path, fmt::format("{}: {} sizes but {} strides", name, value.sizes.size(),
                                         value.strides.size()));
  }
  bool empty = false;
  for (size_t d = 0; d < value.sizes.size(); ++d) {
    if (value.sizes[d] < 0 || value.strides[d] < 0) {
      return torch_error(path, fmt::format("{}: a negative size or stride", name));
    }
    empty = empty || value.sizes[d] == 0;
  }
  int64_t last = value.offset;
  bool past = value.offset < 0;
  for (size_t d = 0; d < value.sizes.size() && !empty && !past; ++d) {
    int64_t step = 0;
    past = __builtin_mul_overflow(value.sizes[d] - 1, value.strides[d], &step) ||
           __builtin_add_overflow(last, step, &last);
  }
  if (past || (!empty && last >= value.storage.numel)) {
    return torch_error(path, fmt::format("{}: its shape reaches past its storage", name));
  }
  at::Tensor storage = at::from_blob(data.get(), {value.storage.numel},
                                     at::TensorOptions().dtype(value.storage.dtype))
                           .clone();
  return storage.as_strided(value.sizes, value.strides, value.offset).clone();
}

Expected<Model> read_state_dict(const std::string& path,
                                caffe2::serialize::PyTorchStreamReader& archive) {
  auto [data, size] = archive.getRecord("data.pkl");
  const std::string bytes(static_cast<const char*>(data.get()), size);
  Unpickler unpickler(path, bytes);
  Expected<PyRef> root = unpickler.run();
  if (!root) return root.error();
  if ((*root)->kind != PyValue::Kind::kDict) {
    return torch_error(path, "the saved object is not a state dict (a dict of tensors)");
  }
  Model model;
  model.source = path;
  const auto& items = (*root)->items;
  // Tensors grouped by module prefix, in file order (the order modules were registered in).
  std::vector<std::string> prefixes;
  std::map<std::string, std::map<std::string, at::Tensor>> by_prefix;
  for (size_t i = 0; i + 1 < items.size(); i += 2) {
    if (items[i]->kind != PyValue::Kind::kString || items[i + 1]->kind != PyValue::Kind::kTensor) {
      return torch_error(path, "a state dict entry that is not a named tensor");
    }
    const std::string& key = items[i]->text;
    const size_t dot = key.rfind('.');
    const std::string prefix = dot == std::string::npos ? "" : key.substr(0, dot);
    const std::string leaf = dot == std::string::npos ? key : key.substr(dot + 1);
    Expected<at::Tensor> t = load_tensor(archive, path, key, *items[i + 1]);
    if (!t) return t.error();
    if (by_prefix.find(prefix) == by_prefix.end()) prefixes.push_back(prefix);
    by_prefix[prefix][leaf] = *t;
  }
  for (const std::string& prefix : prefixes) {
    const auto& tensors = by_prefix[prefix];
    const auto weight = tensors.find("weight");
    if (weight == tensors.end() || tensors.size() > 2 ||
        (tensors.size() == 2 && tensors.find("bias") == tensors.end())) {
      std::string names;
      for (const auto& [leaf, t] : tensors) names += (names.empty() ? "" : ", ") + leaf;
      return torch_error(path, fmt::format("{}tensors {}: only dense layers (weight, bias) can be "
                                           "read from a state dict",
                                           prefix.empty() ? "" : prefix + ": ", names));
    }
    if (weight->second.dim() != 2) {
      return torch_error(
          path, fmt::format("{}.weight has {} dimensions: a state dict does not say how "
                            "convolutions stride, pad or pool; give a TorchScript module or ONNX",
                            prefix, weight->second.dim()));
    }
    if (!model.layers.empty()) {
      Layer relu;
      relu.kind = LayerKind::kRelu;
      relu.name = "relu (assumed)";
      model.layers.push_back(std::move(relu));
    }
    Layer layer;
    layer.kind = LayerKind::kDense;
    layer.name = prefix;
    layer.weight = to_matrix(weight->second, weight->second.size(0), weight->second.size(1));
    const auto bias = tensors.find("bias");
    if (bias != tensors.end()) layer.bias = to_vector(bias->second);
    model.layers.push_back(std::move(layer));
  }
  return model;
}

}  // namespace

Expected<Model> read_torch_model(const std::string& path) {
  try {
    caffe2::serialize::PyTorchStreamReader archive(path);
    if (archive.hasRecord("constants.pkl")) return read_torchscript(path);
    if (!archive.hasRecord("data.pkl")) {
      return torch_error(path, "a zip archive, but neither a TorchScript module nor torch.save's");
    }
    return read_state_dict(path, archive);
  } catch (const c10::Error& error) {
    return torch_error(path, "PyTorch archive: " + first_line(error.what_without_backtrace()));
  }
}

Expected<Model> read_model(const std::string& path) {
  // Only the first bytes tell the kind: a PyTorch archive is read by libtorch from the path.
  if (Status file = refuse_folder(path, "a model"); !file) return file.error();
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) return cannot_open(path, "a model", errno);
  char magic[4] = {0, 0, 0, 0};
  in.read(magic, 4);
  if (in.gcount() == 4 && std::memcmp(magic, "PK\x03\x04", 4) == 0) return read_torch_model(path);
  if (in.gcount() >= 2 && static_cast<uint8_t>(magic[0]) == 0x80 && magic[1] >= 2 &&
      magic[1] <= 5) {
    return torch_error(path,
                       "PyTorch's legacy (non-zip) torch.save format: save it again with "
                       "PyTorch 1.6 or later");
  }
  return read_onnx_model(path);
}

}  // namespace orrery::partition
