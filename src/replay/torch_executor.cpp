// The one file of orrery that includes libtorch (its headers take seconds to compile; see
// CMakeLists.txt). Everything about ATen, the dispatcher and IValues stays in here.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <tuple>

#include "core/units.h"
#include "replay/executor.h"

namespace orrery::replay {

namespace {

at::ScalarType scalar_type(DType type) {
  switch (type) {
    case DType::kFloat:
      return at::kFloat;
    case DType::kDouble:
      return at::kDouble;
    case DType::kHalf:
      return at::kHalf;
    case DType::kBFloat16:
      return at::kBFloat16;
    case DType::kComplexFloat:
      return at::kComplexFloat;
    case DType::kComplexDouble:
      return at::kComplexDouble;
    case DType::kInt8:
      return at::kChar;
    case DType::kUInt8:
      return at::kByte;
    case DType::kInt16:
      return at::kShort;
    case DType::kInt32:
      return at::kInt;
    case DType::kInt64:
      return at::kLong;
    case DType::kBool:
      return at::kBool;
  }
  return at::kFloat;
}

// The first line of a libtorch error, without its C++ backtrace.
std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  // libtorch's "Could not run 'x' with arguments from the 'CPU' backend. This could be because..."
  if (const size_t sentence = line.find(". ", 40); sentence != std::string::npos)
    line = line.substr(0, sentence);
  if (line.size() > 240) line = line.substr(0, 237) + "...";
  return line;
}

// What the executor needs to know about one integer storage: the bound of the values it may
// hold (an index into a dimension of that size), or that it holds embedding offsets.
struct IntegerUse {
  std::optional<int64_t> bound;
  bool offsets = false;
  int64_t offsets_over = 0;  // the number of indices the offsets split
  bool include_last = false;
};

// One operator, ready to run: the call and the arguments it is given every time.
// Where a value of the replay comes from or goes to: argument or output `position` of an op, or
// item `item` of the list there.
struct Place {
  size_t position = 0;
  int64_t item = -1;  // -1: the value itself
  size_t slot = 0;    // in Executor::Impl::slots
};

// How a floating storage is filled (why: note_normalization_uses).
enum class Fill : uint8_t {
  kSymmetric,  // uniform [-1, 1)
  kPositive,   // uniform [0.5, 1.5)
  kShift,      // uniform [-0.1, 0.1)
};

struct PreparedOp {
  std::function<void(torch::jit::Stack&)> call;
  std::vector<c10::IValue> args;
  // Inputs that an earlier op produced (the same tensor id and storage): given that op's output
  // when it ran, so views keep their strides and layouts (schema 1.0.1 records no strides).
  std::vector<Place> inputs_from;
  std::vector<Place> outputs_to;  // outputs a later op reads
  std::vector<size_t> releases;   // slots whose last reader this op is
};

class ArgError {
 public:
  explicit ArgError(std::string message) : message_(std::move(message)) {}
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

int64_t now_ns() {
  return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now().time_since_epoch())
                                  .count());
}

// The outermost operators the autograd engine runs during one backward(), as the trace's
// observer saw them: a thread-local RecordFunction callback, on for that call only (an active
// callback makes every operator call pay for RecordFunction), times each operator with a schema
// that starts outside another (labels such as `autograd::engine::evaluate_function: ...` have
// none and are walked through). The engine runs a CPU graph on the calling thread.
struct EngineOps {
  struct Op {
    std::string name;
    int64_t end_ns = 0;
  };
  std::vector<Op> ops;
  int depth = 0;  // > 0 inside a timed operator
};
thread_local EngineOps* engine_ops = nullptr;

std::unique_ptr<at::ObserverContext> engine_op_start(const at::RecordFunction& fn) {
  EngineOps* seen = engine_ops;
  if (seen == nullptr) return nullptr;
  if (seen->depth > 0) {
    ++seen->depth;
  } else if (c10::optional<c10::OperatorName> name = fn.operator_name()) {
    seen->depth = 1;
    seen->ops.push_back({std::move(name->name), 0});
  }
  return nullptr;
}

void engine_op_end(const at::RecordFunction&, at::ObserverContext*) {
  EngineOps* seen = engine_ops;
  if (seen == nullptr || seen->depth == 0) return;
  if (--seen->depth == 0) seen->ops.back().end_ns = now_ns();
}

}  // namespace

struct Executor::Impl {
  const ReplayPlan* plan = nullptr;
  ExecutorOptions options;
  // One byte buffer per plan storage, allocated when a built op first takes a view of it: a
  // storage that only operators which cannot be built read (the embedding tables of a GPU trace's
  // fbgemm lookups) takes no memory.
  std::vector<at::Tensor> storages;
  std::vector<at::Tensor> views;  // one per plan tensor (undefined until used)
  std::vector<std::optional<PreparedOp>> prepared;
  std::vector<std::optional<std::string>> failures;
  std::map<std::string, uint64_t> adjustments;
  std::vector<IntegerUse> integer_uses;  // per storage
  // Per storage: how a floating tensor is filled (note_normalization_uses).
  std::vector<Fill> fills;
  // Per storage: whether a built op writes it in place (its schema marks the argument `(a!)`).
  std::vector<bool> written;
  // The initial contents of the storages written in place, put back before every iteration.
  std::vector<std::pair<size_t, at::Tensor>> snapshots;
  std::vector<c10::IValue> slots;  // outputs kept for later readers, this iteration
  uint64_t allocated = 0;
  // ExecutorOptions::autograd: the recorded backward passes the engine runs, each replacing
  // the ops [first, last] of the plan, started by its first built op.
  struct BackwardPass {
    size_t first = 0;
    size_t last = 0;
    size_t trigger = 0;
    bool active = true;
    bool counted = false;  // in adjustments, once it has run
    at::Tensor loss;       // captured when the seed op runs
    at::Tensor seed;
    std::vector<size_t> timed;   // the ops of the pass the session times (built compute ops)
    std::vector<int64_t> times;  // per plan op in [first, last], ns, of the last run
    // Per timed op: its spans in the last kKeptSpans timed passes (a bound for --warmup 100000).
    std::vector<std::vector<int64_t>> samples;
    uint64_t timed_runs = 0;
    std::vector<double> shares;  // per timed op: its median span's part, once a pass needs it
  };
  std::vector<BackwardPass> backward_passes;
  std::vector<int32_t> backward_of;     // per op: its pass in backward_passes, or -1
  std::vector<int32_t> seed_of;         // per op: the pass it seeds, or -1
  std::vector<bool> optimizer_written;  // per storage
  std::vector<at::Tensor> leaves;       // the parameters, with their gradients
  std::vector<uint32_t> leaf_storages;  // per leaf
  bool grads_paired = false;            // pair_gradients()
  bool grads_kept = true;               // the recorded AccumulateGrad added into existing gradients
  bool time_engine_ops = true;          // Executor::time_backward_ops
  const std::optional<std::string> none;

  at::Tensor view(uint32_t index) {
    at::Tensor& slot = views[index];
    if (!slot.defined()) {
      const TensorView& view = plan->tensors[index];
      slot = at::empty({0}, at::TensorOptions().dtype(scalar_type(view.dtype)));
      slot.set_(storage(view.storage).storage(), view.offset, view.shape, view.strides);
    }
    return slot;
  }

  // A storage too large for this machine skips the ops that read it, saying so (build() reports
  // an ArgError as the op's reason).
  at::Tensor& storage(uint32_t index) {
    at::Tensor& buffer = storages[index];
    if (!buffer.defined()) {
      const uint64_t bytes = plan->storages[index].bytes;
      try {
        buffer = at::empty({static_cast<int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte));
      } catch (const std::exception&) {
        throw ArgError(fmt::format("its storage {} of {} cannot be allocated here",
                                   plan->storages[index].id, format_bytes(bytes)));
      }
      allocated += bytes;
    }
    return buffer;
  }

  c10::IValue device_value(const Arg& arg) {
    if (arg.text != "cpu") ++adjustments[fmt::format("device arguments {} made cpu", arg.text)];
    return c10::IValue(c10::Device(c10::kCPU));
  }

  // Converts a recorded argument to the schema's type.
  c10::IValue convert(const Arg& arg, const c10::TypePtr& type, const c10::Argument& def) {
    using c10::TypeKind;
    const TypeKind kind = type->kind();
    if (kind == TypeKind::OptionalType) {
      if (arg.kind == Arg::Kind::kNone || arg.kind == Arg::Kind::kUndefinedTensor)
        return c10::IValue();
      return convert(arg, type->castRaw<c10::OptionalType>()->getElementType(), def);
    }
    if (arg.kind == Arg::Kind::kNone && kind != TypeKind::TensorType) {
      if (def.default_value()) return *def.default_value();
      return c10::IValue();
    }
    switch (kind) {
      case TypeKind::TensorType:
        if (arg.kind == Arg::Kind::kTensor) return c10::IValue(view(arg.tensor));
        if (arg.kind == Arg::Kind::kUndefinedTensor || arg.kind == Arg::Kind::kNone)
          return c10::IValue(at::Tensor());
        break;
      case TypeKind::ListType: {
        const c10::TypePtr element = type->castRaw<c10::ListType>()->getElementType();
        c10::impl::GenericList list(element);
        if (arg.kind == Arg::Kind::kList) {
          for (const Arg& item : arg.items) list.push_back(convert(item, element, def));
        } else if (arg.kind == Arg::Kind::kInt || arg.kind == Arg::Kind::kBool ||
                   arg.kind == Arg::Kind::kDouble) {
          // int[2] stride=1: a list of N the same, recorded as one value.
          const size_t count = def.N() ? static_cast<size_t>(*def.N()) : 1;
          for (size_t at = 0; at < count; ++at) list.push_back(convert(arg, element, def));
        } else {
          break;
        }
        return c10::IValue(std::move(list));
      }
      case TypeKind::IntType:
      case TypeKind::SymIntType:
      case TypeKind::ScalarTypeType:
      case TypeKind::LayoutType:
      case TypeKind::MemoryFormatType:
        if (arg.kind == Arg::Kind::kInt) return c10::IValue(arg.int_value);
        if (arg.kind == Arg::Kind::kBool) return c10::IValue(static_cast<int64_t>(arg.bool_value));
        break;
      case TypeKind::FloatType:
      case TypeKind::SymFloatType:
        if (arg.kind == Arg::Kind::kDouble) return c10::IValue(arg.double_value);
        if (arg.kind == Arg::Kind::kInt) return c10::IValue(static_cast<double>(arg.int_value));
        break;
      case TypeKind::BoolType:
        if (arg.kind == Arg::Kind::kBool) {
          if (def.name() == "pin_memory" && arg.bool_value) {
            ++adjustments["pin_memory=True made False (pinned memory needs CUDA)"];
            return c10::IValue(false);
          }
          return c10::IValue(arg.bool_value);
        }
        if (arg.kind == Arg::Kind::kInt) return c10::IValue(arg.int_value != 0);
        break;
      case TypeKind::NumberType:
        if (arg.kind == Arg::Kind::kInt) return c10::IValue(arg.int_value);
        if (arg.kind == Arg::Kind::kDouble) return c10::IValue(arg.double_value);
        if (arg.kind == Arg::Kind::kBool) return c10::IValue(arg.bool_value);
        break;
      case TypeKind::StringType:
        if (arg.kind == Arg::Kind::kString) return c10::IValue(arg.text);
        break;
      case TypeKind::DeviceObjType:
        if (arg.kind == Arg::Kind::kDevice || arg.kind == Arg::Kind::kString)
          return device_value(arg);
        break;
      case TypeKind::GeneratorType:
        return c10::IValue();
      case TypeKind::StreamObjType:
        ++adjustments["streams made the CPU's default stream"];
        return c10::IValue(c10::Stream(c10::Stream::DEFAULT, c10::Device(c10::kCPU)));
      case TypeKind::AnyType:
        if (arg.kind == Arg::Kind::kTensor) return c10::IValue(view(arg.tensor));
        if (arg.kind == Arg::Kind::kInt) return c10::IValue(arg.int_value);
        if (arg.kind == Arg::Kind::kDouble) return c10::IValue(arg.double_value);
        if (arg.kind == Arg::Kind::kBool) return c10::IValue(arg.bool_value);
        if (arg.kind == Arg::Kind::kString) return c10::IValue(arg.text);
        break;
      default:
        throw ArgError(fmt::format("argument '{}' is a {}, which the trace cannot give", def.name(),
                                   type->str()));
    }
    throw ArgError(fmt::format("argument '{}' ({}) was recorded as {} '{}'", def.name(),
                               type->str(), arg.type.empty() ? "a value" : arg.type,
                               arg.text.empty() ? std::string() : arg.text.substr(0, 40)));
  }

  // Finds the operator of a schema: the dispatcher first, then the JIT operators.
  std::optional<std::pair<c10::FunctionSchema, std::function<void(torch::jit::Stack&)>>> find(
      const c10::FunctionSchema& recorded) {
    const c10::optional<c10::OperatorHandle> handle =
        c10::Dispatcher::singleton().findSchema({recorded.name(), recorded.overload_name()});
    if (handle) {
      const c10::OperatorHandle op = *handle;
      return std::make_pair(op.schema(),
                            std::function<void(torch::jit::Stack&)>(
                                [op](torch::jit::Stack& stack) { op.callBoxed(&stack); }));
    }
    const c10::Symbol symbol = c10::Symbol::fromQualString(recorded.name());
    for (const std::shared_ptr<torch::jit::Operator>& op : torch::jit::getAllOperatorsFor(symbol)) {
      if (op->schema().overload_name() != recorded.overload_name()) continue;
      torch::jit::Operation operation = op->getOperation();
      return std::make_pair(
          op->schema(), std::function<void(torch::jit::Stack&)>(
                            [operation](torch::jit::Stack& stack) mutable { operation(stack); }));
    }
    return std::nullopt;
  }

  // Builds op `index`; returns the reason when it cannot be built.
  std::optional<std::string> build(size_t index) {
    const ReplayOp& op = plan->ops[index];
    c10::FunctionSchema recorded("", "", {}, {});
    try {
      recorded = torch::jit::parseSchema(op.schema);
    } catch (const std::exception& failure) {
      return fmt::format("the recorded schema does not parse ({})", first_line(failure.what()));
    }
    auto found = find(recorded);
    if (!found) {
      return fmt::format("no operator {}{}{} in libtorch {}", recorded.name(),
                         recorded.overload_name().empty() ? "" : ".", recorded.overload_name(),
                         TORCH_VERSION);
    }
    const c10::FunctionSchema& schema = found->first;
    const std::vector<c10::Argument>& params = schema.arguments();
    if (op.inputs.size() > params.size() && !schema.is_vararg()) {
      return fmt::format("the trace records {} arguments, the schema of libtorch {} has {}",
                         op.inputs.size(), TORCH_VERSION, params.size());
    }
    PreparedOp ready;
    ready.call = std::move(found->second);
    try {
      for (size_t at = 0; at < params.size(); ++at) {
        const c10::Argument& param = params[at];
        if (at < op.inputs.size()) {
          ready.args.push_back(convert(op.inputs[at], param.type(), param));
        } else if (param.default_value()) {
          ready.args.push_back(*param.default_value());
        } else {
          return fmt::format("argument '{}' is not in the trace and has no default", param.name());
        }
      }
    } catch (const ArgError& failure) {
      return failure.message();
    } catch (const std::exception& failure) {
      return fmt::format("its arguments cannot be made: {}", first_line(failure.what()));
    }
    note_integer_uses(op, params);
    note_normalization_uses(op, params);
    note_writes(op, params);
    prepared[index] = std::move(ready);
    return std::nullopt;
  }

  // What normalizations read, by the schema's argument names: variances and their inverse square
  // roots (running_var, var, invstd, save_invstd) positive, and the affine scale (`weight`) and
  // shift (`bias`) of an op named *norm* (batch, layer, group, instance norms and their backward)
  // as PyTorch initializes them and training keeps them, near 1 and near 0. Uniform(-1, 1)
  // variances made the outputs NaN, and the kernels after them timed NaNs; uniform(-1, 1) scales
  // and shifts left whole channels all zero or all positive after a ReLU, and max-pooling (whose
  // time follows how often a window's maximum changes) ran three times fast.
  void note_normalization_uses(const ReplayOp& op, const std::vector<c10::Argument>& params) {
    const bool normalization = op.name.find("norm") != std::string::npos;
    for (size_t at = 0; at < params.size() && at < op.inputs.size(); ++at) {
      const std::string& name = params[at].name();
      Fill fill = Fill::kSymmetric;
      if (name == "running_var" || name == "var" || name == "invstd" || name == "save_invstd") {
        fill = Fill::kPositive;
      } else if (normalization && name == "weight") {
        fill = Fill::kPositive;
      } else if (normalization && name == "bias") {
        fill = Fill::kShift;
      } else {
        continue;
      }
      const Arg& arg = op.inputs[at];
      if (arg.kind != Arg::Kind::kTensor) continue;
      const TensorView& view = plan->tensors[arg.tensor];
      if (!is_integral(view.dtype) && view.dtype != DType::kBool) fills[view.storage] = fill;
    }
  }

  // Storages an op writes in place: optimizer updates, running statistics, accumulated gradients.
  void note_writes(const ReplayOp& op, const std::vector<c10::Argument>& params) {
    const bool optimizer = op.pass == Pass::kOptimizer;
    const auto write = [&](const Arg& arg) {
      if (arg.kind != Arg::Kind::kTensor) return;
      written[plan->tensors[arg.tensor].storage] = true;
      if (optimizer) optimizer_written[plan->tensors[arg.tensor].storage] = true;
    };
    for (size_t at = 0; at < params.size() && at < op.inputs.size(); ++at) {
      const c10::AliasInfo* alias = params[at].alias_info();
      if (alias == nullptr || !alias->isWrite()) continue;
      write(op.inputs[at]);
      for (const Arg& item : op.inputs[at].items) write(item);
    }
  }

  // ExecutorOptions::autograd: finds the backward passes and the parameters. Runs after
  // link_outputs().
  void setup_autograd() {
    const size_t count = plan->ops.size();
    backward_of.assign(count, -1);
    seed_of.assign(count, -1);
    const auto refuse = [&](std::string_view why) {
      ++adjustments[fmt::format("backward passes replayed op by op: {}", why)];
    };
    for (size_t first = 0; first < count;) {
      if (plan->ops[first].pass != Pass::kBackward) {
        ++first;
        continue;
      }
      // The pass runs to its last backward op; communication between its ops (DDP's gradient
      // hooks issue all-reduces from inside it) belongs to it.
      size_t last = first;
      for (size_t index = first + 1; index < count; ++index) {
        if (plan->ops[index].pass == Pass::kBackward) {
          last = index;
        } else if (plan->ops[index].kind != OpKind::kComm) {
          break;
        }
      }
      const size_t next = last + 1;
      BackwardPass pass;
      pass.first = first;
      pass.last = last;
      bool communicates = false;
      std::optional<size_t> trigger;
      for (size_t index = first; index <= last; ++index) {
        if (plan->ops[index].kind == OpKind::kComm) communicates = true;
        if (!trigger && prepared[index]) trigger = index;
      }
      // The seed: the last forward op before the pass, if it is torch.autograd.backward's
      // ones_like of a loss an earlier op produced.
      std::optional<size_t> seed;
      for (size_t index = first; index-- > 0;) {
        if (plan->ops[index].kind == OpKind::kUnsupported) continue;
        if (plan->ops[index].pass == Pass::kForward && prepared[index] &&
            plan->ops[index].name == "aten::ones_like") {
          const std::vector<Place>& from = prepared[index]->inputs_from;
          if (std::any_of(from.begin(), from.end(),
                          [](const Place& place) { return place.position == 0 && place.item < 0; }))
            seed = index;
        }
        break;
      }
      first = next;
      if (!trigger) continue;
      if (communicates) {
        refuse("it communicates (gradient hooks, such as DDP's, that the replay does not have)");
        continue;
      }
      if (!seed) {
        refuse("no aten::ones_like of a computed loss just before it (the seed gradient)");
        continue;
      }
      pass.trigger = *trigger;
      for (size_t index = pass.first; index <= pass.last; ++index)
        if (prepared[index]) pass.timed.push_back(index);
      const int32_t number = static_cast<int32_t>(backward_passes.size());
      for (size_t index = pass.first; index <= pass.last; ++index) backward_of[index] = number;
      seed_of[*seed] = number;
      backward_passes.push_back(pass);
    }
    // The recorded AccumulateGrad either added into a gradient zero_grad() had zeroed (an op
    // under it) or took the new gradient as it was (zero_grad(set_to_none=True): none).
    bool accumulated = false;
    for (const ReplayOp& op : plan->ops)
      if (op.pass == Pass::kBackward && op.scope == "torch::autograd::AccumulateGrad")
        accumulated = true;
    grads_kept = accumulated;
    if (backward_passes.empty()) return;
    // The parameters: floating tensors forward ops read that no earlier op produced and an
    // optimizer op writes in place.
    for (size_t index = 0; index < count; ++index) {
      if (plan->ops[index].pass != Pass::kForward || !prepared[index]) continue;
      const ReplayOp& op = plan->ops[index];
      std::vector<std::pair<size_t, int64_t>> produced;
      for (const Place& place : prepared[index]->inputs_from)
        produced.emplace_back(place.position, place.item);
      const auto leaf = [&](const Arg& arg, size_t position, int64_t item) {
        if (arg.kind != Arg::Kind::kTensor) return;
        const TensorView& view = plan->tensors[arg.tensor];
        if (is_integral(view.dtype) || view.dtype == DType::kBool) return;
        if (!optimizer_written[view.storage]) return;
        if (std::find(produced.begin(), produced.end(), std::make_pair(position, item)) !=
            produced.end())
          return;
        if (!views[arg.tensor].defined()) return;
        at::Tensor tensor = views[arg.tensor];
        if (tensor.requires_grad()) return;
        tensor.requires_grad_(true);
        leaves.push_back(tensor);
        leaf_storages.push_back(view.storage);
      };
      for (size_t position = 0; position < op.inputs.size(); ++position) {
        leaf(op.inputs[position], position, -1);
        for (size_t item = 0; item < op.inputs[position].items.size(); ++item)
          leaf(op.inputs[position].items[item], position, static_cast<int64_t>(item));
      }
    }
    if (leaves.empty()) {
      // Nothing the engine could give a gradient to: the loss would not require one.
      for (BackwardPass& pass : backward_passes) {
        pass.active = false;
        refuse("no parameters (no optimizer op writes a tensor the forward pass reads)");
      }
      return;
    }
    if (grads_kept) pair_gradients();
  }

  // Gives each parameter, as its .grad, the gradient buffer the recorded run had: zero_grad()
  // and step() walk the optimizer's parameters in the same order, so the k-th tensor zero_grad
  // zeroes is the gradient of the k-th parameter step writes. Then the engine's AccumulateGrad
  // adds into the buffer the recorded zero_grad zeroes and the recorded optimizer reads, as in
  // the recorded run. When they do not pair up (counts or shapes), each parameter gets a
  // gradient of its own, zeroed before every pass, and the optimizer reads the recorded buffers.
  void pair_gradients() {
    std::vector<uint32_t> zeroed;   // plan tensors
    std::vector<uint32_t> stepped;  // storages, in first-touch order
    for (size_t index = 0; index < plan->ops.size(); ++index) {
      const ReplayOp& op = plan->ops[index];
      if (op.pass != Pass::kOptimizer || !prepared[index]) continue;
      if (op.scope.starts_with("Optimizer.zero_grad") && op.name == "aten::zero_" &&
          !op.inputs.empty() && op.inputs[0].kind == Arg::Kind::kTensor)
        zeroed.push_back(op.inputs[0].tensor);
      if (!op.scope.starts_with("Optimizer.step")) continue;
      const auto touch = [&](const Arg& arg) {
        if (arg.kind != Arg::Kind::kTensor) return;
        const uint32_t storage = plan->tensors[arg.tensor].storage;
        if (std::find(leaf_storages.begin(), leaf_storages.end(), storage) != leaf_storages.end() &&
            std::find(stepped.begin(), stepped.end(), storage) == stepped.end())
          stepped.push_back(storage);
      };
      for (const Arg& arg : op.inputs) {
        touch(arg);
        for (const Arg& item : arg.items) touch(item);
      }
    }
    const auto step_of = [&](size_t leaf) {
      return static_cast<size_t>(std::find(stepped.begin(), stepped.end(), leaf_storages[leaf]) -
                                 stepped.begin());
    };
    bool paired = zeroed.size() == stepped.size() && !zeroed.empty();
    for (size_t at = 0; paired && at < leaves.size(); ++at) {
      const size_t k = step_of(at);
      if (k == stepped.size() || !views[zeroed[k]].defined() ||
          views[zeroed[k]].sizes() != leaves[at].sizes() ||
          views[zeroed[k]].scalar_type() != leaves[at].scalar_type())
        paired = false;
    }
    for (size_t at = 0; at < leaves.size(); ++at)
      leaves[at].mutable_grad() = paired ? views[zeroed[step_of(at)]] : at::zeros_like(leaves[at]);
    grads_paired = paired;
    if (!paired && !leaves.empty()) {
      ++adjustments
          ["parameters with gradients of their own (zero_grad and step do not pair them with the "
           "recorded gradients)"];
    }
  }

  // Runs a backward pass through the engine and sets pass.times, its recorded ops' parts of it;
  // returns the whole, or the error's first line. Timed passes (the session's check and warm-up
  // passes, and any pass before one was timed) time each op the engine runs (engine_op_start)
  // and give each recorded op its span (match_spans). RecordFunction on every operator call costs
  // about 5% of the transformer's training step, so the other passes run without it and share
  // their time in the proportions of the ops' median spans.
  Expected<int64_t> run_backward(BackwardPass& pass) {
    if (!pass.loss.defined() || !pass.seed.defined())
      return Error::make(ErrorKind::kInvalidArgument, "its loss was not computed");
    const bool time_ops = time_engine_ops || pass.timed_runs == 0;
    EngineOps seen;
    std::optional<at::CallbackHandle> handle;
    if (time_ops) {
      seen.ops.reserve(pass.timed.size() + 16);
      handle = at::addThreadLocalCallback(at::RecordFunctionCallback(engine_op_start, engine_op_end)
                                              .scopes({at::RecordScope::FUNCTION}));
      engine_ops = &seen;
    }
    const int64_t start = now_ns();
    std::optional<std::string> failure;
    try {
      torch::autograd::backward({pass.loss}, {pass.seed});
    } catch (const c10::Error& error) {
      failure = first_line(error.what_without_backtrace());
    } catch (const std::exception& error) {
      failure = first_line(error.what());
    }
    const int64_t end = now_ns();
    if (handle) {
      engine_ops = nullptr;
      at::removeCallback(*handle);
    }
    pass.loss = at::Tensor();
    pass.seed = at::Tensor();
    if (failure) return Error::make(ErrorKind::kInvalidArgument, "{}", *failure);
    // What the recorded ops would have let go.
    for (size_t index = pass.first; index <= pass.last; ++index) {
      if (!prepared[index]) continue;
      for (const size_t slot : prepared[index]->releases) slots[slot] = c10::IValue();
    }
    if (!pass.counted) {
      pass.counted = true;
      ++adjustments[fmt::format("backward passes run by the autograd engine ({} parameters)",
                                leaves.size())];
    }
    pass.times.assign(pass.last - pass.first + 1, 0);
    if (time_ops) {
      const std::vector<int64_t> spans = match_spans(pass, seen, start, end);
      for (size_t at = 0; at < spans.size(); ++at)
        pass.times[pass.timed[at] - pass.first] = spans[at];
    } else {
      share_time(pass, end - start);
    }
    return end - start;
  }

  // Matches the engine's ops to the recorded ones by name, in order (a recorded op the engine
  // did not run is looked past, up to 16 ahead), and returns each recorded op's span: from the
  // end of the engine's op before it to the end of its own (the engine's work between ops counts
  // in the op after it, its work after the last op in the last: the spans add up to the pass).
  // Keeps the spans for share_time(); the first timed pass counts what did not match.
  std::vector<int64_t> match_spans(BackwardPass& pass, const EngineOps& seen, int64_t start,
                                   int64_t end) {
    std::vector<int64_t> spans(pass.timed.size(), 0);
    size_t expected = 0;
    size_t matched = 0;
    size_t unmatched_engine = 0;
    int64_t previous_end = start;
    std::optional<size_t> last_matched;
    for (const EngineOps::Op& op : seen.ops) {
      size_t ahead = expected;
      while (ahead < pass.timed.size() && ahead < expected + 16 &&
             plan->ops[pass.timed[ahead]].name != op.name)
        ++ahead;
      if (ahead == pass.timed.size() || plan->ops[pass.timed[ahead]].name != op.name) {
        ++unmatched_engine;
        continue;
      }
      spans[ahead] = op.end_ns - previous_end;
      previous_end = op.end_ns;
      last_matched = ahead;
      expected = ahead + 1;
      ++matched;
    }
    // With nothing matched, the first timed op (the trigger) takes the whole pass.
    spans[last_matched.value_or(0)] += end - previous_end;
    if (pass.timed_runs == 0) {
      if (matched < pass.timed.size()) {
        adjustments["recorded backward ops the autograd engine did not run (timed as 0)"] +=
            pass.timed.size() - matched;
      }
      if (unmatched_engine > 0) {
        adjustments
            ["ops the autograd engine ran that the trace's backward pass does not have "
             "(timed in the recorded op after them)"] += unmatched_engine;
      }
      pass.samples.assign(pass.timed.size(), {});
    }
    constexpr uint64_t kKeptSpans = 64;
    for (size_t at = 0; at < spans.size(); ++at) {
      if (pass.samples[at].size() < kKeptSpans) {
        pass.samples[at].push_back(spans[at]);
      } else {
        pass.samples[at][pass.timed_runs % kKeptSpans] = spans[at];
      }
    }
    ++pass.timed_runs;
    pass.shares.clear();  // stale
    return spans;
  }

  // pass.shares, from the ops' median spans; when a timed pass has added spans since.
  static void update_shares(BackwardPass& pass) {
    if (!pass.shares.empty() || pass.samples.empty()) return;
    std::vector<double> medians(pass.samples.size(), 0.0);
    double total = 0;
    for (size_t at = 0; at < medians.size(); ++at) {
      std::vector<int64_t> sorted = pass.samples[at];
      std::sort(sorted.begin(), sorted.end());
      const size_t n = sorted.size();
      medians[at] = n % 2 == 1 ? static_cast<double>(sorted[n / 2])
                               : 0.5 * static_cast<double>(sorted[n / 2 - 1] + sorted[n / 2]);
      total += medians[at];
    }
    pass.shares.assign(medians.size(), 0.0);
    for (size_t at = 0; at < medians.size(); ++at)
      pass.shares[at] = total > 0 ? medians[at] / total : (at == 0 ? 1.0 : 0.0);
  }

  // pass.times: `elapsed` in the proportions of the ops' median spans, the rounding in the
  // trigger (the sum is exact). The shares are normally ready (time_backward_ops(false) makes
  // them before the measured passes, outside their timing).
  void share_time(BackwardPass& pass, int64_t elapsed) {
    update_shares(pass);
    int64_t given = 0;
    for (size_t at = 0; at < pass.timed.size(); ++at) {
      const auto part = static_cast<int64_t>(static_cast<double>(elapsed) * pass.shares[at]);
      pass.times[pass.timed[at] - pass.first] = part;
      given += part;
    }
    pass.times[pass.trigger - pass.first] += elapsed - given;
  }

  // Keeps the initial contents of the storages written in place, up to a bound per storage and in
  // all, so every iteration starts from the state the first one had. Without it a training
  // replay's optimizer ops, fed gradients of random data, drove the parameters away within two
  // iterations (the CNN's batch-norm shifts grew until every ReLU output was positive), and the
  // data-dependent kernels were timed on data no real run has.
  void snapshot_written() {
    constexpr uint64_t kMaxStorage = uint64_t{64} << 20;
    constexpr uint64_t kMaxTotal = uint64_t{1} << 30;
    uint64_t total = 0;
    uint64_t left = 0;
    for (size_t index = 0; index < storages.size(); ++index) {
      if (!written[index] || !storages[index].defined()) continue;
      const uint64_t bytes = plan->storages[index].bytes;
      if (bytes > kMaxStorage || total + bytes > kMaxTotal) {
        ++left;
        continue;
      }
      snapshots.emplace_back(index, storages[index].clone());
      total += bytes;
    }
    if (!snapshots.empty()) {
      adjustments[fmt::format("storages written in place ({:.1f} MiB) restored before each pass",
                              static_cast<double>(total) / (1 << 20))] += snapshots.size();
    }
    if (left > 0) {
      adjustments["storages written in place not restored (over 64 MiB, or 1 GiB in all)"] += left;
    }
  }

  // The bound of the values an integer argument indexes with, from the names of the schema:
  // indices/index/target of an op with a weight or self tensor; offsets of an embedding bag.
  void note_integer_uses(const ReplayOp& op, const std::vector<c10::Argument>& params) {
    const auto input_named = [&](std::string_view name) -> const Arg* {
      for (size_t at = 0; at < params.size() && at < op.inputs.size(); ++at) {
        if (params[at].name() == name) return &op.inputs[at];
      }
      return nullptr;
    };
    const Arg* table = input_named("weight");
    if (table == nullptr || table->kind != Arg::Kind::kTensor) table = input_named("self");
    if (table != nullptr && table->kind != Arg::Kind::kTensor) table = nullptr;
    std::optional<int64_t> dim;
    if (const Arg* given = input_named("dim"); given != nullptr && given->kind == Arg::Kind::kInt)
      dim = given->int_value;
    const auto bound_of = [&](std::string_view name,
                              size_t list_position) -> std::optional<int64_t> {
      if (table == nullptr) return std::nullopt;
      const std::vector<int64_t>& shape = plan->tensors[table->tensor].shape;
      if (shape.empty()) return std::nullopt;
      int64_t axis = 0;
      if (name == "target") {
        axis = shape.size() >= 2 ? 1 : 0;
      } else if (dim) {
        axis = *dim < 0 ? *dim + static_cast<int64_t>(shape.size()) : *dim;
      } else {
        axis = static_cast<int64_t>(list_position);
      }
      if (axis < 0 || axis >= static_cast<int64_t>(shape.size())) return std::nullopt;
      return shape[static_cast<size_t>(axis)];
    };
    const auto bound_storage = [&](const Arg& arg, std::optional<int64_t> bound) {
      if (arg.kind != Arg::Kind::kTensor || !bound) return;
      const TensorView& view = plan->tensors[arg.tensor];
      if (!is_integral(view.dtype)) return;
      IntegerUse& use = integer_uses[view.storage];
      use.bound = use.bound ? std::min(*use.bound, *bound) : *bound;
    };
    for (const char* name : {"indices", "index", "target"}) {
      const Arg* arg = input_named(name);
      if (arg == nullptr) continue;
      if (arg->kind == Arg::Kind::kList) {
        for (size_t at = 0; at < arg->items.size(); ++at)
          bound_storage(arg->items[at], bound_of(name, at));
      } else {
        bound_storage(*arg, bound_of(name, 0));
      }
    }
    const Arg* offsets = input_named("offsets");
    const Arg* indices = input_named("indices");
    if (offsets != nullptr && offsets->kind == Arg::Kind::kTensor && indices != nullptr &&
        indices->kind == Arg::Kind::kTensor && is_integral(plan->tensors[offsets->tensor].dtype)) {
      IntegerUse& use = integer_uses[plan->tensors[offsets->tensor].storage];
      use.offsets = true;
      use.offsets_over = plan->tensors[indices->tensor].numel();
      const Arg* last = input_named("include_last_offset");
      use.include_last = last != nullptr && last->kind == Arg::Kind::kBool && last->bool_value;
    }
  }

  // Links every input of a built op to the latest earlier built op that output the same tensor
  // (tensor id and storage), in plan order.
  void link_outputs() {
    struct Producer {
      size_t op;
      size_t position;
      int64_t item;
    };
    std::map<std::pair<uint64_t, uint32_t>, Producer> latest;
    std::map<std::tuple<size_t, size_t, int64_t>, size_t> slot_of;
    std::vector<size_t> last_reader;
    const auto key_of = [this](const Arg& arg) {
      const TensorView& view = plan->tensors[arg.tensor];
      return std::make_pair(view.tensor_id, view.storage);
    };
    for (size_t index = 0; index < plan->ops.size(); ++index) {
      const ReplayOp& op = plan->ops[index];
      if (!prepared[index]) {
        // A producer that does not run: its readers fall back to the storage views.
        for (const Arg& arg : op.outputs) {
          if (arg.kind == Arg::Kind::kTensor) latest.erase(key_of(arg));
          for (const Arg& item : arg.items)
            if (item.kind == Arg::Kind::kTensor) latest.erase(key_of(item));
        }
        continue;
      }
      PreparedOp& ready = *prepared[index];
      const auto read = [&](const Arg& arg, size_t position, int64_t item) {
        if (arg.kind != Arg::Kind::kTensor) return;
        const auto found = latest.find(key_of(arg));
        if (found == latest.end()) return;
        const Producer& from = found->second;
        const auto key = std::make_tuple(from.op, from.position, from.item);
        auto slot = slot_of.find(key);
        if (slot == slot_of.end()) {
          slot = slot_of.emplace(key, last_reader.size()).first;
          last_reader.push_back(index);
          prepared[from.op]->outputs_to.push_back({from.position, from.item, slot->second});
        }
        last_reader[slot->second] = index;
        ready.inputs_from.push_back({position, item, slot->second});
      };
      for (size_t position = 0; position < op.inputs.size() && position < ready.args.size();
           ++position) {
        const Arg& arg = op.inputs[position];
        read(arg, position, -1);
        if (arg.kind == Arg::Kind::kList && ready.args[position].isList()) {
          for (size_t item = 0; item < arg.items.size(); ++item)
            read(arg.items[item], position, static_cast<int64_t>(item));
        }
      }
      for (size_t position = 0; position < op.outputs.size(); ++position) {
        const Arg& arg = op.outputs[position];
        if (arg.kind == Arg::Kind::kTensor) latest[key_of(arg)] = {index, position, -1};
        for (size_t item = 0; item < arg.items.size(); ++item) {
          if (arg.items[item].kind == Arg::Kind::kTensor)
            latest[key_of(arg.items[item])] = {index, position, static_cast<int64_t>(item)};
        }
      }
    }
    slots.assign(last_reader.size(), c10::IValue());
    for (size_t slot = 0; slot < last_reader.size(); ++slot)
      prepared[last_reader[slot]]->releases.push_back(slot);
  }

  void fill(at::Generator& generator) {
    for (size_t index = 0; index < storages.size(); ++index) {
      if (!storages[index].defined()) continue;  // no built op reads it
      const Storage& storage = plan->storages[index];
      const at::ScalarType type = scalar_type(storage.dtype);
      const int64_t count = static_cast<int64_t>(storage.bytes / dtype_bytes(storage.dtype));
      if (count == 0) continue;
      at::Tensor flat = at::empty({0}, at::TensorOptions().dtype(type));
      flat.set_(storages[index].storage(), 0, {count}, {1});
      const IntegerUse& use = integer_uses[index];
      if (storage.dtype == DType::kBool) {
        flat.random_(0, 2, generator);
      } else if (is_integral(storage.dtype)) {
        if (storage.recorded_range) {
          flat.random_(storage.recorded_range->first, storage.recorded_range->second + 1,
                       generator);
        } else if (use.offsets) {
          // Offsets into `offsets_over` indices: evenly spaced, non-decreasing, the last at the
          // end when include_last_offset.
          const int64_t parts = std::max<int64_t>(count - (use.include_last ? 1 : 0), 1);
          at::Tensor spaced = at::arange(count, at::TensorOptions().dtype(at::kLong))
                                  .mul_(use.offsets_over)
                                  .div_(parts, "floor")
                                  .clamp_max_(use.offsets_over);
          flat.copy_(spaced);
        } else if (use.bound && *use.bound > 0) {
          flat.random_(0, *use.bound, generator);
        } else {
          flat.zero_();
        }
      } else if (fills[index] == Fill::kPositive) {
        flat.uniform_(0.5, 1.5, generator);
      } else if (fills[index] == Fill::kShift) {
        flat.uniform_(-0.1, 0.1, generator);
      } else {
        flat.uniform_(-1.0, 1.0, generator);
      }
    }
  }
};

Expected<std::unique_ptr<Executor>> Executor::create(const ReplayPlan& plan,
                                                     const ExecutorOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->plan = &plan;
  impl->options = options;
  if (options.threads > 0) at::set_num_threads(options.threads);
  // Threads created later (libtorch's intra-op pool) inherit the mode from this one.
  at::globalContext().setFlushDenormal(options.flush_subnormals);
  at::manual_seed(options.seed);
  impl->storages.resize(plan.storages.size());
  impl->views.resize(plan.tensors.size());
  impl->prepared.resize(plan.ops.size());
  impl->failures.resize(plan.ops.size());
  impl->integer_uses.resize(plan.storages.size());
  impl->fills.assign(plan.storages.size(), Fill::kSymmetric);
  impl->written.assign(plan.storages.size(), false);
  impl->optimizer_written.assign(plan.storages.size(), false);
  for (size_t index = 0; index < plan.ops.size(); ++index) {
    if (plan.ops[index].kind != OpKind::kCompute) continue;
    impl->failures[index] = impl->build(index);
  }
  impl->link_outputs();
  if (options.autograd) impl->setup_autograd();
  for (const auto& [device, count] : plan.devices) {
    if (device != "cpu" && !device.empty())
      impl->adjustments[fmt::format("tensors on {} made cpu tensors", device)] += count;
  }
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  try {
    impl->fill(generator);
    impl->snapshot_written();
  } catch (const std::exception& failure) {
    return Error::make(ErrorKind::kInvalidArgument, "{}: cannot fill the storages: {}", plan.path,
                       first_line(failure.what()));
  }
  return std::unique_ptr<Executor>(new Executor(std::move(impl)));
}

Executor::Executor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executor::~Executor() = default;

void Executor::time_backward_ops(bool each) {
  impl_->time_engine_ops = each;
  if (!each)
    for (Impl::BackwardPass& pass : impl_->backward_passes) Impl::update_shares(pass);
}

const std::optional<std::string>& Executor::build_failure(size_t index) const {
  if (index >= impl_->failures.size()) return impl_->none;
  return impl_->failures[index];
}

void Executor::restore() {
  at::NoGradGuard no_grad;
  for (const auto& [index, initial] : impl_->snapshots) impl_->storages[index].copy_(initial);
  // Paired gradients are the recorded buffers (restored above, zeroed by zero_grad's ops).
  for (at::Tensor& leaf : impl_->leaves) {
    if (!impl_->grads_kept) {
      leaf.mutable_grad() = at::Tensor();
    } else if (!impl_->grads_paired && leaf.grad().defined()) {
      leaf.mutable_grad().zero_();
    }
  }
}

Expected<int64_t> Executor::run(size_t index) {
  std::optional<PreparedOp>& op = impl_->prepared[index];
  if (!op) return Error::make(ErrorKind::kInvalidArgument, "not built");
  if (!impl_->backward_of.empty() && impl_->backward_of[index] >= 0) {
    Impl::BackwardPass& pass =
        impl_->backward_passes[static_cast<size_t>(impl_->backward_of[index])];
    if (pass.active) {
      if (index != pass.trigger) return pass.times.empty() ? 0 : pass.times[index - pass.first];
      Expected<int64_t> time = impl_->run_backward(pass);
      if (time) return pass.times[index - pass.first];
      // The engine could not run it (the first pass finds out): op by op from now on.
      pass.active = false;
      ++impl_->adjustments[fmt::format("backward passes replayed op by op: the engine stopped: {}",
                                       time.error().message())];
      pass.loss = at::Tensor();
      pass.seed = at::Tensor();
    }
  }
  // Optimizer ops, and backward ops replayed one by one, run without gradients, as PyTorch's do.
  std::optional<at::NoGradGuard> no_grad;
  if (impl_->options.autograd && impl_->plan->ops[index].pass != Pass::kForward) no_grad.emplace();
  std::vector<c10::IValue>& slots = impl_->slots;
  torch::jit::Stack stack(op->args.begin(), op->args.end());
  // Produced values replace the storage views when they have the recorded sizes.
  for (const Place& place : op->inputs_from) {
    const c10::IValue& value = slots[place.slot];
    if (!value.isTensor()) continue;
    c10::IValue& arg = stack[place.position];
    if (place.item < 0) {
      if (arg.isTensor() && arg.toTensor().sizes() == value.toTensor().sizes()) arg = value;
      continue;
    }
    if (!arg.isList()) continue;
    c10::impl::GenericList list = arg.toList();
    const size_t item = static_cast<size_t>(place.item);
    if (item >= list.size()) continue;
    const c10::IValue current = list.get(item);
    if (!current.isTensor() || current.toTensor().sizes() != value.toTensor().sizes()) continue;
    c10::impl::GenericList copy = list.copy();  // the prepared list is reused every iteration
    copy.set(item, value);
    arg = c10::IValue(std::move(copy));
  }
  int64_t elapsed = 0;
  const int32_t seeds = impl_->seed_of.empty() ? -1 : impl_->seed_of[index];
  if (seeds >= 0 && !stack.empty() && stack[0].isTensor())
    impl_->backward_passes[static_cast<size_t>(seeds)].loss = stack[0].toTensor();
  try {
    const auto start = std::chrono::steady_clock::now();
    op->call(stack);
    const auto end = std::chrono::steady_clock::now();
    elapsed = static_cast<int64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count());
  } catch (const c10::Error& failure) {
    return Error::make(ErrorKind::kInvalidArgument, "libtorch: {}",
                       first_line(failure.what_without_backtrace()));
  } catch (const std::exception& failure) {
    return Error::make(ErrorKind::kInvalidArgument, "libtorch: {}", first_line(failure.what()));
  }
  if (seeds >= 0 && !stack.empty() && stack[0].isTensor())
    impl_->backward_passes[static_cast<size_t>(seeds)].seed = stack[0].toTensor();
  for (const Place& place : op->outputs_to) {
    if (place.position >= stack.size()) continue;
    const c10::IValue& out = stack[place.position];
    if (place.item < 0) {
      if (out.isTensor()) slots[place.slot] = out;
    } else if (out.isTensorList() || out.isList()) {
      const c10::impl::GenericList list = out.toList();
      if (static_cast<size_t>(place.item) < list.size()) {
        const c10::IValue item = list.get(static_cast<size_t>(place.item));
        if (item.isTensor()) slots[place.slot] = item;
      }
    }
  }
  stack.clear();
  for (const size_t slot : op->releases) slots[slot] = c10::IValue();
  return elapsed;
}

std::vector<double> Executor::values(uint32_t index) {
  if (!impl_->storages[impl_->plan->tensors[index].storage].defined()) return {};
  const at::Tensor flat = impl_->view(index).to(at::kDouble).contiguous().reshape({-1});
  const double* data = flat.data_ptr<double>();
  return std::vector<double>(data, data + flat.numel());
}

int Executor::threads() const { return at::get_num_threads(); }

uint64_t Executor::autograd_passes() const {
  return static_cast<uint64_t>(
      std::count_if(impl_->backward_passes.begin(), impl_->backward_passes.end(),
                    [](const Impl::BackwardPass& pass) { return pass.active; }));
}

std::string Executor::library_version() { return TORCH_VERSION; }

const std::map<std::string, uint64_t>& Executor::adjustments() const { return impl_->adjustments; }

uint64_t Executor::allocated_bytes() const { return impl_->allocated; }

}  // namespace orrery::replay
