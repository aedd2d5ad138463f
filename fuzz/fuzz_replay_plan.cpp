// fuzz_replay_plan: what `orrery replay` plans from a PyTorch execution trace (replay/plan.h),
// after the host trace reads (fuzz_host_trace covers the reading). Beyond not crashing, the plan
// keeps the promises the executor relies on, and a broken one aborts as a finding: every argument's
// tensor and every view's storage exist, and every storage covers each of its views (the executor
// allocates storages at their recorded size and makes views into them, so a view past its storage
// would read out of bounds).
#include <cstdlib>

#include "convert/host_trace.h"
#include "fuzz/fuzz_support.h"
#include "replay/plan.h"

namespace {

using orrery::replay::Arg;
using orrery::replay::ReplayPlan;

void check_arg(const ReplayPlan& plan, const Arg& arg) {
  if (arg.kind == Arg::Kind::kTensor && arg.tensor >= plan.tensors.size()) std::abort();
  for (const Arg& item : arg.items) check_arg(plan, item);
}

void check(const ReplayPlan& plan) {
  for (const orrery::replay::TensorView& view : plan.tensors) {
    if (view.storage >= plan.storages.size()) std::abort();
    if (orrery::replay::view_extent_bytes(view) > plan.storages[view.storage].bytes) std::abort();
  }
  for (const orrery::replay::ReplayOp& op : plan.ops) {
    for (const Arg& arg : op.inputs) check_arg(plan, arg);
    for (const Arg& arg : op.outputs) check_arg(plan, arg);
    if (op.comm) {
      for (uint32_t tensor : op.comm->tensors) {
        if (tensor >= plan.tensors.size()) std::abort();
      }
    }
    for (uint32_t storage : orrery::replay::op_storages(plan, op)) {
      if (storage >= plan.storages.size()) std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orrery;
  Expected<convert::HostTrace> host =
      convert::parse_host_text("host.json", fuzz::as_text(data, size));
  if (!host) return 0;
  // The first marker, and a named one (an error when the trace has no ProfilerStep#2).
  for (const std::optional<int64_t> iteration :
       {std::optional<int64_t>{}, std::optional<int64_t>{2}}) {
    replay::PlanOptions options;
    options.iteration = iteration;
    Expected<replay::ReplayPlan> plan = replay::build_plan(*host, options);
    if (plan) check(*plan);
  }
  return 0;
}
