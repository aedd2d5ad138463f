// replay/executor.h: the operators of a replay plan, built and run by libtorch.
//
// Executor::create() materialises a ReplayPlan on the replay's device (the CPU: this libtorch has
// no CUDA), then builds every compute operator:
//   - the operator is found by its recorded schema: the name and overload are looked up in the
//     c10 dispatcher (c10::Dispatcher::findSchema), else among the TorchScript (JIT) operators of
//     that name whose schema matches; there is no table of operators in orrery;
//   - its arguments are the recorded values converted to the registered schema's types: tensors
//     are views of one buffer per storage (replay/plan.h), integer and float scalars, lists,
//     optional values, devices (every recorded device, cuda:N included, becomes the replay's
//     device), ScalarType/Layout/MemoryFormat codes; arguments the trace leaves out take their
//     schema defaults; `pin_memory=True` becomes False (pinned memory needs CUDA);
//   - a storage is allocated when a built operator first takes a view of it (one that only
//     operators which cannot be built read takes no memory), and filled once, from a seeded
//     generator: floating-point values uniform in [-1, 1),
//     except those passed as a variance (an argument named running_var, var, invstd or
//     save_invstd): uniform in [0.5, 1.5), so normalizations give numbers, not NaN, and the
//     kernels after them run on numbers (max-pooling NaNs took half the time on this CPU);
//     integer tensors within their recorded range (tensor_range), else within the size of the
//     dimension they index (an argument named indices, index or target of an operator with a
//     weight or self tensor), embedding offsets evenly spaced over their indices, other integers
//     zero; bool tensors random; the affine scale and shift of a normalization (`weight`, `bias`
//     of an op named *norm*) uniform in [0.5, 1.5) and [-0.1, 0.1), near PyTorch's 1 and 0;
//   - storages ops write in place are restored before every iteration (restore()), so a training
//     replay's optimizer, fed gradients of random data, does not drift its parameters away.
// An operator that cannot be built (unknown to this libtorch, an argument it cannot make: a
// ProcessGroup, a Dimname) keeps the reason; run() of an operator that throws returns the error's
// first line. Nothing here includes libtorch in its header: torch_executor.cpp is the one file
// that does. One executor per process; not thread-safe (the session calls it from one thread).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "replay/plan.h"

namespace orrery::replay {

struct ExecutorOptions {
  uint64_t seed = 0;
  int threads = 0;  // intra-op threads; 0 keeps libtorch's default
  // Subnormal floats flushed to zero (FTZ and DAZ on the replay's threads). Subnormal arithmetic
  // takes microcode assists on x86 (a GEMM on subnormal inputs runs 10-100x slower), so it makes
  // an operator's time depend on its values, which a trace does not record: the replay's random
  // data and the recorded run's real data differ there, in either direction.
  bool flush_subnormals = true;
  // The backward pass run by libtorch's autograd engine rather than op by op (`--autograd`):
  // the forward ops run with gradients recorded on the parameters (the tensors an optimizer op
  // writes in place), and where the trace's backward pass begins (its first op under an
  // `autograd::engine::evaluate_function` label, after the `aten::ones_like` that seeded it)
  // the engine runs backward() from the loss, as the recorded run did; the recorded backward
  // ops do not run. Optimizer ops run without gradients, as PyTorch's do. What it adds to a
  // replay: the engine's own work and the graph the forward pass builds, which the trace's ops
  // do not hold. What it costs: the backward pass is timed as a whole, and its recorded ops get
  // their shares of that as time_backward_ops() says. A backward pass with communication in it
  // (DDP's hooks), with no seed, with no parameters to differentiate (no optimizer in the
  // trace), or that the engine cannot run, is replayed op by op, and adjustments() says why.
  bool autograd = false;
};

class Executor {
 public:
  // Builds every compute op of `plan` (which must outlive the executor). Errors only for what
  // stops the whole replay (a storage that cannot be allocated); ops that cannot be built are
  // reported by build_failure().
  static Expected<std::unique_ptr<Executor>> create(const ReplayPlan& plan,
                                                    const ExecutorOptions& options);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // ExecutorOptions::autograd: whether the engine's backward passes time each op (the session's
  // check and warm-up passes, the default) or run untimed within and give each op its share of
  // the measured whole in the proportions the timed passes found (measured passes: timing each
  // op costs about 5% of the transformer's training step). Switching to false computes those
  // proportions, so the measured passes do not.
  void time_backward_ops(bool each);
  // Why op `index` of the plan could not be built; nullopt when it was (or is not a compute op).
  const std::optional<std::string>& build_failure(size_t index) const;
  // Runs compute op `index` once; returns its wall time in nanoseconds, or the error's first line.
  Expected<int64_t> run(size_t index);
  // Puts back the initial contents of the storages ops write in place (parameters, optimizer
  // state, running statistics; each up to 64 MiB, 1 GiB in all; adjustments() counts them and
  // those left), so every iteration runs on the data the first one had.
  void restore();

  // The values of plan tensor `index` as the replay holds them, as doubles (tests, debugging);
  // empty when no built operator reads its storage (such storages are never allocated).
  std::vector<double> values(uint32_t index);
  int threads() const;
  // ExecutorOptions::autograd: the backward passes the engine runs (not replayed op by op).
  uint64_t autograd_passes() const;
  static std::string library_version();
  // What the build changed, counted ("devices mapped to cpu", "pin_memory=True made False", ...).
  const std::map<std::string, uint64_t>& adjustments() const;
  uint64_t allocated_bytes() const;

 private:
  struct Impl;
  explicit Executor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace orrery::replay
