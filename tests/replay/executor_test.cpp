// Operators built from their recorded schemas and run by libtorch: every recorded model in full,
// integer tensors kept in range, outputs passed on, and what cannot be built or run named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "replay/executor.h"
#include "replay/session.h"
#include "replay_test_support.h"

namespace orrery::replay {
namespace executor_test {

struct Replayed {
  ReplayPlan plan;
  std::unique_ptr<Executor> executor;
  SessionResult session;
};

// The plan of `host` and its executor on one thread, not yet run (a test reads the values the
// executor made before running it).
Replayed prepare_host(const Expected<convert::HostTrace>& host, bool autograd = false) {
  Replayed out;
  EXPECT_TRUE(host) << host.error().message();
  if (!host) return out;
  Expected<ReplayPlan> plan = build_plan(*host, {});
  EXPECT_TRUE(plan) << plan.error().message();
  if (!plan) return out;
  out.plan = std::move(*plan);
  ExecutorOptions options;
  options.threads = 1;
  options.autograd = autograd;
  Expected<std::unique_ptr<Executor>> executor = Executor::create(out.plan, options);
  EXPECT_TRUE(executor) << executor.error().message();
  if (executor) out.executor = std::move(*executor);
  return out;
}

// Runs a prepared replay: `warmup` iterations, then `iterations` measured ones.
void run_prepared(Replayed& run, int warmup = 0, int iterations = 1) {
  ASSERT_TRUE(run.executor);
  std::unique_ptr<Communicator> local = make_local_communicator();
  SessionOptions session;
  session.warmup = warmup;
  session.iterations = iterations;
  Expected<SessionResult> result = run_session(run.plan, *run.executor, *local, session);
  ASSERT_TRUE(result) << result.error().message();
  run.session = std::move(*result);
}

// One warm-up-free iteration of `host` on one thread.
Replayed replay_host(const Expected<convert::HostTrace>& host, bool autograd = false) {
  Replayed out = prepare_host(host, autograd);
  if (out.executor) run_prepared(out);
  return out;
}

Replayed replay_text(const std::string& text) { return replay_host(test::host_from_text(text)); }

Replayed replay_recorded(const std::string& model, bool autograd = false) {
  return replay_host(convert::read_host_trace(test::recorded_et(model)), autograd);
}

// Every operator of the six recorded models builds and runs: full coverage.
TEST(ReplayExecutor, every_recorded_model_replays_in_full) {
  for (const char* model : {"mlp_train", "mlp_infer", "cnn_train", "cnn_infer", "transformer_train",
                            "transformer_infer"}) {
    const Replayed run = replay_recorded(model);
    ASSERT_TRUE(run.executor) << model;
    ASSERT_EQ(run.session.iteration_wall_ns.size(), 1u) << model;
    EXPECT_GT(run.session.iteration_wall_ns[0], 0);
    for (size_t at = 0; at < run.plan.ops.size(); ++at) {
      EXPECT_TRUE(run.session.ops[at].replayed)
          << model << " node " << run.plan.ops[at].node_id << " " << run.plan.ops[at].name << ": "
          << run.session.ops[at].reason;
      EXPECT_EQ(run.session.ops[at].samples.size(), run.session.ops[at].replayed ? 1u : 0u);
    }
    EXPECT_EQ(run.executor->threads(), 1);
  }
}

// Variances are filled positive, so the CNN's batch norms (eval mode: running statistics) give
// numbers; with uniform(-1, 1) variances their outputs were NaN and the max-pools after them ran
// on NaNs, in half the time (the CNN's replay came out 35% faster than PyTorch).
TEST(ReplayExecutor, normalizations_see_positive_variances_and_give_numbers) {
  const Replayed run = replay_recorded("cnn_infer");
  ASSERT_TRUE(run.executor);
  const ReplayPlan* plan = &run.plan;
  Executor* executor = run.executor.get();
  size_t norms = 0;
  for (const ReplayOp& op : plan->ops) {
    if (op.name != "aten::batch_norm") continue;
    ++norms;
    // batch_norm(input, weight, bias, running_mean, running_var, ...)
    ASSERT_GE(op.inputs.size(), 5u);
    ASSERT_EQ(op.inputs[4].kind, Arg::Kind::kTensor);
    for (double v : executor->values(op.inputs[4].tensor)) {
      EXPECT_GE(v, 0.5);
      EXPECT_LT(v, 1.5);
    }
    ASSERT_EQ(op.outputs[0].kind, Arg::Kind::kTensor);
    const std::vector<double> out = executor->values(op.outputs[0].tensor);
    ASSERT_FALSE(out.empty());
    EXPECT_EQ(std::count_if(out.begin(), out.end(), [](double v) { return std::isnan(v); }), 0);
  }
  EXPECT_EQ(norms, 2u);
}

// A normalization's affine scale and shift start near PyTorch's 1 and 0: with uniform(-1, 1) ones
// whole channels came out all zero or all positive after the ReLU, and the max-pools after them
// ran three times faster than in PyTorch's own run.
TEST(ReplayExecutor, normalization_scales_and_shifts_are_near_one_and_zero) {
  const Replayed run = replay_recorded("cnn_infer");  // no optimizer step after the fill
  ASSERT_TRUE(run.executor);
  size_t norms = 0;
  for (const ReplayOp& op : run.plan.ops) {
    if (op.name != "aten::batch_norm") continue;
    ++norms;
    ASSERT_GE(op.inputs.size(), 3u);  // batch_norm(input, weight, bias, ...)
    for (double v : run.executor->values(op.inputs[1].tensor)) {
      EXPECT_GE(v, 0.5);
      EXPECT_LT(v, 1.5);
    }
    for (double v : run.executor->values(op.inputs[2].tensor)) {
      EXPECT_GE(v, -0.1);
      EXPECT_LT(v, 0.1);
    }
  }
  EXPECT_EQ(norms, 2u);
}

// What ops write in place is put back before every pass: after six passes of `self += other` the
// storage holds its initial values plus `other` once, not six times.
TEST(ReplayExecutor, storages_written_in_place_start_every_pass_as_the_first) {
  Expected<convert::HostTrace> host = test::host_from_text(test::flat_trace(R"J(
    {"id": 4, "name": "aten::add_", "parent": 3, "tid": 1,
     "op_schema": "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
     "inputs": [[1, 20, 0, 8, 4, "cpu"], [2, 21, 0, 8, 4, "cpu"], 1],
     "input_shapes": [[8], [8], []], "input_types": ["Tensor(float)", "Tensor(float)", "Int"],
     "outputs": [[1, 20, 0, 8, 4, "cpu"]], "output_shapes": [[8]], "output_types": ["Tensor(float)"]})J"));
  ASSERT_TRUE(host) << host.error().message();
  Expected<ReplayPlan> plan = build_plan(*host, {});
  ASSERT_TRUE(plan) << plan.error().message();
  Expected<std::unique_ptr<Executor>> executor = Executor::create(*plan, {});
  ASSERT_TRUE(executor) << executor.error().message();
  const uint32_t self = plan->ops[0].inputs[0].tensor;
  const uint32_t other = plan->ops[0].inputs[1].tensor;
  const std::vector<double> initial = (*executor)->values(self);
  const std::vector<double> addend = (*executor)->values(other);
  std::unique_ptr<Communicator> local = make_local_communicator();
  SessionOptions session;
  session.warmup = 2;
  session.iterations = 3;
  ASSERT_TRUE(run_session(*plan, **executor, *local, session));
  const std::vector<double> after = (*executor)->values(self);
  ASSERT_EQ(after.size(), 8u);
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_FLOAT_EQ(static_cast<float>(after[i]), static_cast<float>(initial[i] + addend[i])) << i;
  }
  bool counted = false;
  for (const auto& [what, count] : (*executor)->adjustments())
    counted |= what.find("written in place") != std::string::npos && count == 1;
  EXPECT_TRUE(counted);
}

// Subnormal floats are flushed to zero by default (their arithmetic is 10-100x slower on x86, so
// the replay's random values would set operators' times): x * 1e-39 is subnormal, and scaled back
// by 1e30 it is zero when flushed and x * 1e-9 when kept.
TEST(ReplayExecutor, subnormals_are_flushed_unless_kept) {
  Expected<convert::HostTrace> host = test::host_from_text(test::flat_trace(R"J(
    {"id": 4, "name": "aten::mul_", "parent": 3, "tid": 1,
     "op_schema": "aten::mul_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)",
     "inputs": [[1, 20, 0, 64, 4, "cpu"], 1e-39], "input_shapes": [[64], []],
     "input_types": ["Tensor(float)", "Double"],
     "outputs": [[1, 20, 0, 64, 4, "cpu"]], "output_shapes": [[64]], "output_types": ["Tensor(float)"]},
    {"id": 5, "name": "aten::mul_", "parent": 3, "tid": 1,
     "op_schema": "aten::mul_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)",
     "inputs": [[1, 20, 0, 64, 4, "cpu"], 1e30], "input_shapes": [[64], []],
     "input_types": ["Tensor(float)", "Double"],
     "outputs": [[1, 20, 0, 64, 4, "cpu"]], "output_shapes": [[64]], "output_types": ["Tensor(float)"]})J"));
  ASSERT_TRUE(host) << host.error().message();
  Expected<ReplayPlan> plan = build_plan(*host, {});
  ASSERT_TRUE(plan) << plan.error().message();
  ASSERT_EQ(plan->ops.size(), 2u);
  const uint32_t x = plan->ops[0].inputs[0].tensor;
  for (const bool flush : {false, true}) {
    ExecutorOptions options;
    options.threads = 1;
    options.flush_subnormals = flush;
    Expected<std::unique_ptr<Executor>> executor = Executor::create(*plan, options);
    ASSERT_TRUE(executor) << executor.error().message();
    const std::vector<double> initial = (*executor)->values(x);
    ASSERT_TRUE((*executor)->run(0)) << flush;
    ASSERT_TRUE((*executor)->run(1)) << flush;
    const std::vector<double> scaled = (*executor)->values(x);
    ASSERT_EQ(scaled.size(), 64u);
    for (size_t i = 0; i < scaled.size(); ++i) {
      if (flush) {
        EXPECT_EQ(scaled[i], 0.0) << i;
      } else {
        // Kept, x * 1e-39 has only the bits of a subnormal: about 2^-149 absolute error.
        EXPECT_NEAR(scaled[i], initial[i] * 1e-9, 2e-15) << i;
      }
    }
  }
  EXPECT_TRUE(ExecutorOptions{}.flush_subnormals);
}

// Index tensors stay within what they index: the recorded range, else the size of the dimension
// (embedding rows, loss classes), embedding-bag offsets evenly spaced over the indices.
TEST(ReplayExecutor, integer_tensors_stay_in_range) {
  const Replayed run = replay_text(test::flat_trace(R"J(
    {"id": 4, "name": "aten::embedding", "parent": 3, "tid": 1,
     "op_schema": "aten::embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor",
     "inputs": [[1, 20, 0, 40, 4, "cpu"], [2, 21, 0, 64, 8, "cpu"], -1, false, false],
     "input_shapes": [[10, 4], [64], [], [], []],
     "input_types": ["Tensor(float)", "Tensor(long int)", "Int", "Bool", "Bool"]},
    {"id": 5, "name": "aten::embedding", "parent": 3, "tid": 1,
     "op_schema": "aten::embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor",
     "inputs": [[1, 20, 0, 40, 4, "cpu"], [3, 22, 0, 8, 8, "cpu"], -1, false, false],
     "input_shapes": [[10, 4], [8], [], [], []],
     "input_types": ["Tensor(float)", "Tensor(long int)", "Int", "Bool", "Bool"],
     "tensor_range": "{\"1\": [2, 3]}"},
    {"id": 6, "name": "aten::nll_loss", "parent": 3, "tid": 1,
     "op_schema": "aten::nll_loss(Tensor self, Tensor target, Tensor? weight=None, int reduction=1, SymInt ignore_index=-100) -> Tensor",
     "inputs": [[5, 30, 0, 20, 4, "cpu"], [6, 31, 0, 4, 8, "cpu"], "<None>", 1, -100],
     "input_shapes": [[4, 5], [4], [], [], []],
     "input_types": ["Tensor(float)", "Tensor(long int)", "None", "Int", "Int"]},
    {"id": 7, "name": "aten::embedding_bag", "parent": 3, "tid": 1,
     "op_schema": "aten::embedding_bag(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False, int mode=0, bool sparse=False, Tensor? per_sample_weights=None, bool include_last_offset=False) -> (Tensor, Tensor, Tensor, Tensor)",
     "inputs": [[1, 20, 0, 40, 4, "cpu"], [7, 40, 0, 12, 8, "cpu"], [8, 41, 0, 4, 8, "cpu"], false, 0, false, "<None>", false],
     "input_shapes": [[10, 4], [12], [4], [], [], [], [], []],
     "input_types": ["Tensor(float)", "Tensor(long int)", "Tensor(long int)", "Bool", "Int", "Bool", "None", "Bool"]})J"));
  for (const OpResult& op : run.session.ops) EXPECT_TRUE(op.replayed) << op.reason;
  const auto values_of = [&](size_t op, size_t arg) {
    return run.executor->values(run.plan.ops[op].inputs[arg].tensor);
  };
  const std::vector<double> rows = values_of(0, 1);
  EXPECT_EQ(*std::min_element(rows.begin(), rows.end()), 0.0);
  EXPECT_EQ(*std::max_element(rows.begin(), rows.end()), 9.0) << "64 draws over the 10 rows";
  for (const double value : values_of(1, 1)) EXPECT_TRUE(value == 2.0 || value == 3.0) << value;
  for (const double value : values_of(2, 1)) EXPECT_TRUE(value >= 0 && value < 5) << value;
  EXPECT_EQ(values_of(3, 2), (std::vector<double>{0, 3, 6, 9}));
  const std::vector<double> weights = values_of(0, 0);
  EXPECT_GE(*std::min_element(weights.begin(), weights.end()), -1.0);
  EXPECT_LT(*std::max_element(weights.begin(), weights.end()), 1.0);
}

// A later op reads what an earlier one returned (aten::t's transposed view), not a contiguous
// buffer: viewing that transposed tensor as flat fails in libtorch as it would have in the
// original, so the view op is skipped with libtorch's message.
TEST(ReplayExecutor, outputs_pass_to_later_ops_with_their_strides) {
  const Replayed run = replay_text(test::flat_trace(R"J(
    {"id": 4, "name": "aten::t", "parent": 3, "tid": 1, "op_schema": "aten::t(Tensor(a) self) -> Tensor(a)",
     "inputs": [[1, 20, 0, 6, 4, "cpu"]], "input_shapes": [[3, 2]], "input_types": ["Tensor(float)"],
     "outputs": [[2, 20, 0, 6, 4, "cpu"]], "output_shapes": [[2, 3]], "output_types": ["Tensor(float)"]},
    {"id": 5, "name": "aten::view", "parent": 3, "tid": 1,
     "op_schema": "aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)",
     "inputs": [[2, 20, 0, 6, 4, "cpu"], [6]], "input_shapes": [[2, 3], [[]]],
     "input_types": ["Tensor(float)", "GenericList[Int]"]},
    {"id": 6, "name": "aten::view", "parent": 3, "tid": 1,
     "op_schema": "aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)",
     "inputs": [[1, 20, 0, 6, 4, "cpu"], [6]], "input_shapes": [[3, 2], [[]]],
     "input_types": ["Tensor(float)", "GenericList[Int]"]})J"));
  ASSERT_EQ(run.session.ops.size(), 3u);
  EXPECT_TRUE(run.session.ops[0].replayed);
  EXPECT_FALSE(run.session.ops[1].replayed);
  EXPECT_NE(run.session.ops[1].reason.find("libtorch: view size is not compatible"),
            std::string::npos)
      << run.session.ops[1].reason;
  EXPECT_TRUE(run.session.ops[2].replayed) << "the weight itself is contiguous";
}

TEST(ReplayExecutor, what_cannot_be_built_or_run_is_named) {
  const Replayed run = replay_text(test::flat_trace(R"J(
    {"id": 4, "name": "fbgemm::bounds_check_indices", "parent": 3, "tid": 1,
     "op_schema": "fbgemm::bounds_check_indices(Tensor rows_per_table, Tensor(a!) indices) -> ()",
     "inputs": [[1, 20, 0, 4, 8, "cuda:0"], [2, 21, 0, 4, 8, "cuda:0"]],
     "input_shapes": [[4], [4]], "input_types": ["Tensor(long int)", "Tensor(long int)"]},
    {"id": 5, "name": "aten::mm", "parent": 3, "tid": 1,
     "op_schema": "aten::mm(Tensor self, Tensor mat2) -> Tensor",
     "inputs": [[3, 30, 0, 6, 4, "cuda:0"], [4, 31, 0, 20, 4, "cuda:0"]],
     "input_shapes": [[2, 3], [4, 5]], "input_types": ["Tensor(float)", "Tensor(float)"]},
    {"id": 6, "name": "aten::mm", "parent": 3, "tid": 1,
     "op_schema": "aten::mm(Tensor self, Tensor mat2) -> Tensor",
     "inputs": [[3, 30, 0, 6, 4, "cuda:0"], [5, 32, 0, 15, 4, "cuda:0"]],
     "input_shapes": [[2, 3], [3, 5]], "input_types": ["Tensor(float)", "Tensor(float)"]},
    {"id": 7, "name": "aten::zeros", "parent": 3, "tid": 1,
     "op_schema": "aten::zeros(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
     "inputs": [[3, 5], 6, "<None>", "cuda:0", true], "input_shapes": [[[], []], [], [], [], []],
     "input_types": ["GenericList[Int,Int]", "Int", "None", "Device", "Bool"]},
    {"id": 8, "name": "aten::relu", "parent": 3, "tid": 1,
     "op_schema": "aten::relu(Tensor self, int extra) -> Tensor",
     "inputs": [[3, 30, 0, 6, 4, "cuda:0"], 1, 2], "input_shapes": [[2, 3], [], []],
     "input_types": ["Tensor(float)", "Int", "Int"]})J"));
  const std::vector<OpResult>& ops = run.session.ops;
  ASSERT_EQ(ops.size(), 5u);
  EXPECT_FALSE(ops[0].replayed);
  EXPECT_EQ(ops[0].reason, "no operator fbgemm::bounds_check_indices in libtorch 1.13.0");
  EXPECT_FALSE(ops[1].replayed);
  EXPECT_NE(ops[1].reason.find("libtorch: mat1 and mat2 shapes cannot be multiplied (2x3 and "
                               "4x5)"),
            std::string::npos)
      << ops[1].reason;
  EXPECT_TRUE(ops[2].replayed) << ops[2].reason;
  EXPECT_TRUE(ops[3].replayed) << ops[3].reason;
  EXPECT_FALSE(ops[4].replayed);
  EXPECT_EQ(ops[4].reason, "the trace records 3 arguments, the schema of libtorch 1.13.0 has 1");
  const std::map<std::string, uint64_t>& changes = run.executor->adjustments();
  EXPECT_EQ(changes.at("device arguments cuda:0 made cpu"), 1u);
  EXPECT_EQ(changes.at("pin_memory=True made False (pinned memory needs CUDA)"), 1u);
  EXPECT_EQ(changes.at("tensors on cuda:0 made cpu tensors"), 7u);
  // Storages 20 and 21 are read by the fbgemm op alone, which cannot be built: they are never
  // allocated (a GPU trace's embedding tables, read by fbgemm lookups, held 5.2 GB of a DLRM
  // rank's replay). Storages 30, 31 and 32 are, for the ops that build (24 + 80 + 60 bytes).
  EXPECT_EQ(run.executor->allocated_bytes(), 24u + 80u + 60u);
  EXPECT_TRUE(run.executor->values(run.plan.ops[0].inputs[0].tensor).empty());
  EXPECT_EQ(run.executor->values(run.plan.ops[2].inputs[1].tensor).size(), 15u);
}

// One SGD step of loss = sum(x * w) as PyTorch 1.13 records it: zero_grad, the forward pass,
// ones_like of the loss, the backward pass (SumBackward0's expand, MulBackward0's mul,
// AccumulateGrad's add_ into the gradient) and step's update of w at a learning rate of 0.5.
// Variants: without `optimizer`, no zero_grad and no step; without `loss_of_product`, the loss
// sums x alone, so it does not depend on w; without `seeded`, no ones_like before the backward
// pass.
struct StepVariant {
  bool optimizer = true;
  bool loss_of_product = true;
  bool seeded = true;
};
std::string sgd_step_trace(const StepVariant& variant) {
  const bool optimizer = variant.optimizer;
  const std::string loss_input =
      variant.loss_of_product ? R"J([3, 22, 0, 4, 4, "cpu"])J" : R"J([1, 20, 0, 4, 4, "cpu"])J";
  const std::string zero_grad = R"J(
    {"id": 4, "name": "Optimizer.zero_grad#SGD.zero_grad", "parent": 3, "tid": 1},
    {"id": 5, "name": "aten::zero_", "parent": 4, "tid": 1,
     "op_schema": "aten::zero_(Tensor(a!) self) -> Tensor(a!)",
     "inputs": [[5, 30, 0, 4, 4, "cpu"]], "input_shapes": [[4]], "input_types": ["Tensor(float)"],
     "outputs": [[5, 30, 0, 4, 4, "cpu"]], "output_shapes": [[4]], "output_types": ["Tensor(float)"]},)J";
  const std::string ones_like = R"J(
    {"id": 8, "name": "aten::ones_like", "parent": 3, "tid": 1,
     "op_schema": "aten::ones_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
     "inputs": [[4, 23, 0, 1, 4, "cpu"], 6, 0, "cpu", false, 1],
     "input_shapes": [[], [], [], [], [], []],
     "input_types": ["Tensor(float)", "Int", "Int", "Device", "Bool", "Int"],
     "outputs": [[6, 24, 0, 1, 4, "cpu"]], "output_shapes": [[]], "output_types": ["Tensor(float)"]},)J";
  const std::string step = R"J(,
    {"id": 18, "name": "Optimizer.step#SGD.step", "parent": 3, "tid": 1},
    {"id": 19, "name": "aten::add_", "parent": 18, "tid": 1,
     "op_schema": "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
     "inputs": [[2, 21, 0, 4, 4, "cpu"], [5, 30, 0, 4, 4, "cpu"], -0.5],
     "input_shapes": [[4], [4], []], "input_types": ["Tensor(float)", "Tensor(float)", "Double"],
     "outputs": [[2, 21, 0, 4, 4, "cpu"]], "output_shapes": [[4]], "output_types": ["Tensor(float)"]})J";
  return test::flat_trace((optimizer ? zero_grad : std::string()) + R"J(
    {"id": 6, "name": "aten::mul", "parent": 3, "tid": 1,
     "op_schema": "aten::mul.Tensor(Tensor self, Tensor other) -> Tensor",
     "inputs": [[1, 20, 0, 4, 4, "cpu"], [2, 21, 0, 4, 4, "cpu"]],
     "input_shapes": [[4], [4]], "input_types": ["Tensor(float)", "Tensor(float)"],
     "outputs": [[3, 22, 0, 4, 4, "cpu"]], "output_shapes": [[4]], "output_types": ["Tensor(float)"]},
    {"id": 7, "name": "aten::sum", "parent": 3, "tid": 1,
     "op_schema": "aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor",
     "inputs": [)J" + loss_input +
                          R"J(, "<None>"], "input_shapes": [[4], []],
     "input_types": ["Tensor(float)", "None"],
     "outputs": [[4, 23, 0, 1, 4, "cpu"]], "output_shapes": [[]], "output_types": ["Tensor(float)"]},
)J" + (variant.seeded ? ones_like : std::string()) +
                          R"J(
    {"id": 9, "name": "autograd::engine::evaluate_function: SumBackward0", "parent": 3, "tid": 1},
    {"id": 10, "name": "SumBackward0", "parent": 9, "tid": 1},
    {"id": 11, "name": "aten::expand", "parent": 10, "tid": 1,
     "op_schema": "aten::expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)",
     "inputs": [[6, 24, 0, 1, 4, "cpu"], [4], false], "input_shapes": [[], [[]], []],
     "input_types": ["Tensor(float)", "GenericList[Int]", "Bool"],
     "outputs": [[7, 24, 0, 4, 4, "cpu"]], "output_shapes": [[4]], "output_types": ["Tensor(float)"]},
    {"id": 12, "name": "autograd::engine::evaluate_function: MulBackward0", "parent": 3, "tid": 1},
    {"id": 13, "name": "MulBackward0", "parent": 12, "tid": 1},
    {"id": 14, "name": "aten::mul", "parent": 13, "tid": 1,
     "op_schema": "aten::mul.Tensor(Tensor self, Tensor other) -> Tensor",
     "inputs": [[7, 24, 0, 4, 4, "cpu"], [1, 20, 0, 4, 4, "cpu"]],
     "input_shapes": [[4], [4]], "input_types": ["Tensor(float)", "Tensor(float)"],
     "outputs": [[8, 25, 0, 4, 4, "cpu"]], "output_shapes": [[4]], "output_types": ["Tensor(float)"]},
    {"id": 15, "name": "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", "parent": 3, "tid": 1},
    {"id": 16, "name": "torch::autograd::AccumulateGrad", "parent": 15, "tid": 1},
    {"id": 17, "name": "aten::add_", "parent": 16, "tid": 1,
     "op_schema": "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
     "inputs": [[5, 30, 0, 4, 4, "cpu"], [8, 25, 0, 4, 4, "cpu"], 1],
     "input_shapes": [[4], [4], []], "input_types": ["Tensor(float)", "Tensor(float)", "Int"],
     "outputs": [[5, 30, 0, 4, 4, "cpu"]], "output_shapes": [[4]], "output_types": ["Tensor(float)"]})J" +
                          (optimizer ? step : std::string()));
}

// --autograd on a step whose gradient is known: loss = sum(x * w), so dL/dw = x, and SGD with a
// learning rate of 0.5 leaves w = w0 - 0.5 x. The engine computes the gradient into the buffer
// the recorded zero_grad zeroes and the recorded step reads (unpaired, the step would read zeros
// and leave w0), its three ops (expand, mul, AccumulateGrad's add_) are matched to the recorded
// ones, and the op-by-op replay gives the same numbers.
TEST(ReplayExecutor, autograd_computes_the_gradient_the_recorded_optimizer_reads) {
  const std::string trace = sgd_step_trace({});
  for (const bool autograd : {true, false}) {
    Replayed run = prepare_host(test::host_from_text(trace), autograd);
    ASSERT_TRUE(run.executor);
    const ReplayPlan& plan = run.plan;
    ASSERT_EQ(plan.ops.size(), 8u);
    const std::vector<Pass> passes{Pass::kOptimizer, Pass::kForward,  Pass::kForward,
                                   Pass::kForward,   Pass::kBackward, Pass::kBackward,
                                   Pass::kBackward,  Pass::kOptimizer};
    for (size_t at = 0; at < passes.size(); ++at) EXPECT_EQ(plan.ops[at].pass, passes[at]) << at;
    EXPECT_EQ(plan.ops[6].scope, "torch::autograd::AccumulateGrad");
    EXPECT_EQ(plan.ops[7].scope, "Optimizer.step#SGD.step");
    const uint32_t w = plan.ops[7].inputs[0].tensor;
    const std::vector<double> x_values = run.executor->values(plan.ops[1].inputs[0].tensor);
    const std::vector<double> w0 = run.executor->values(w);
    run_prepared(run, 1, 2);
    const std::vector<double> w1 = run.executor->values(w);
    ASSERT_EQ(w1.size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_NE(x_values[i], 0.0);
      EXPECT_FLOAT_EQ(static_cast<float>(w1[i]), static_cast<float>(w0[i] - 0.5 * x_values[i]))
          << "autograd " << autograd << " element " << i;
    }
    const std::map<std::string, uint64_t>& changes = run.executor->adjustments();
    EXPECT_EQ(changes.count("backward passes run by the autograd engine (1 parameters)"),
              autograd ? 1u : 0u);
    for (const auto& [what, count] : changes) {
      EXPECT_EQ(what.find("did not run"), std::string::npos) << what;
      EXPECT_EQ(what.find("does not have"), std::string::npos) << what;
      EXPECT_EQ(what.find("of their own"), std::string::npos) << what;
    }
    // The measured passes give the backward pass's three ops their shares of it.
    for (size_t at = 4; at < 7; ++at) {
      ASSERT_EQ(run.session.ops[at].samples.size(), 2u);
      for (const int64_t ns : run.session.ops[at].samples) EXPECT_GT(ns, 0) << at;
    }
  }
}

// The recorded training steps under --autograd: the engine runs every recorded backward op (each
// matched by name, in order) on the parameters the optimizer updates, and the ops' shares of the
// pass add up to less than the iteration.
TEST(ReplayExecutor, autograd_runs_the_recorded_training_steps_backward_passes) {
  for (const auto& [model, parameters] :
       std::vector<std::pair<const char*, uint64_t>>{{"mlp_train", 6}, {"transformer_train", 12}}) {
    const Replayed engine = replay_recorded(model, true);
    ASSERT_TRUE(engine.executor) << model;
    const std::map<std::string, uint64_t>& changes = engine.executor->adjustments();
    EXPECT_EQ(changes.count(fmt::format(
                  "backward passes run by the autograd engine ({} parameters)", parameters)),
              1u)
        << model;
    for (const auto& [what, count] : changes) {
      EXPECT_EQ(what.find("did not run"), std::string::npos) << model << ": " << what;
      EXPECT_EQ(what.find("does not have"), std::string::npos) << model << ": " << what;
      EXPECT_EQ(what.find("of their own"), std::string::npos) << model << ": " << what;
    }
    int64_t backward_ns = 0;
    size_t backward_ops = 0;
    for (size_t at = 0; at < engine.plan.ops.size(); ++at) {
      ASSERT_TRUE(engine.session.ops[at].replayed) << model << " " << engine.plan.ops[at].name;
      if (engine.plan.ops[at].pass != Pass::kBackward) continue;
      ++backward_ops;
      backward_ns += engine.session.ops[at].samples.at(0);
    }
    EXPECT_GT(backward_ops, 20u) << model;
    EXPECT_GT(backward_ns, 0) << model;
    EXPECT_LT(backward_ns, engine.session.iteration_wall_ns.at(0)) << model;
  }
}

// A backward pass the engine cannot start from (no seed gradient before it) is replayed op by
// op, and the adjustments say why.
TEST(ReplayExecutor, autograd_replays_op_by_op_what_it_cannot_start) {
  const Replayed run = replay_host(test::host_from_text(sgd_step_trace({.seeded = false})), true);
  ASSERT_TRUE(run.executor);
  ASSERT_EQ(run.plan.ops.size(), 7u);
  EXPECT_EQ(run.plan.ops[3].pass, Pass::kBackward);
  EXPECT_EQ(run.plan.ops[3].scope, "SumBackward0");
  EXPECT_EQ(run.executor->adjustments().count(
                "backward passes replayed op by op: no aten::ones_like of a computed loss just "
                "before it (the seed gradient)"),
            1u);
  EXPECT_EQ(run.executor->autograd_passes(), 0u);
  for (const OpResult& op : run.session.ops) {
    EXPECT_TRUE(op.replayed) << op.reason;
    EXPECT_EQ(op.samples.size(), 1u);
  }
}

// With no optimizer in the trace there is no parameter to give a gradient to (the loss would
// require none): the backward pass replays op by op, and the notes say why, not that the engine
// ran it.
TEST(ReplayExecutor, autograd_needs_parameters_an_optimizer_updates) {
  const Replayed run =
      replay_host(test::host_from_text(sgd_step_trace({.optimizer = false})), true);
  ASSERT_TRUE(run.executor);
  ASSERT_EQ(run.plan.ops.size(), 6u);
  const std::map<std::string, uint64_t>& changes = run.executor->adjustments();
  EXPECT_EQ(changes.count("backward passes replayed op by op: no parameters (no optimizer op "
                          "writes a tensor the forward pass reads)"),
            1u);
  for (const auto& [what, count] : changes)
    EXPECT_EQ(what.find("run by the autograd engine"), std::string::npos) << what;
  EXPECT_EQ(run.executor->autograd_passes(), 0u);
  for (const OpResult& op : run.session.ops) {
    EXPECT_TRUE(op.replayed) << op.reason;
    ASSERT_EQ(op.samples.size(), 1u);
  }
  for (size_t at = 3; at < 6; ++at)
    EXPECT_GT(run.session.ops[at].samples[0], 0) << "recorded backward op " << at << " ran";
}

// A loss that does not depend on the parameters (it sums x alone): the engine refuses it in the
// check pass ("does not require grad"), and the backward pass replays op by op from then on; its
// recorded ops still compute the recorded gradient (dL/dw of the recorded ops is x), so the step
// leaves w = w0 - 0.5 x, as in the other tests.
TEST(ReplayExecutor, autograd_replays_op_by_op_a_pass_the_engine_stops_on) {
  Replayed run =
      prepare_host(test::host_from_text(sgd_step_trace({.loss_of_product = false})), true);
  ASSERT_TRUE(run.executor);
  const std::vector<double> x = run.executor->values(run.plan.ops[1].inputs[0].tensor);
  const uint32_t w = run.plan.ops[7].inputs[0].tensor;
  const std::vector<double> w0 = run.executor->values(w);
  run_prepared(run);
  bool stopped = false;
  for (const auto& [what, count] : run.executor->adjustments()) {
    stopped |= what.starts_with("backward passes replayed op by op: the engine stopped: ") &&
               what.find("does not require grad") != std::string::npos;
    EXPECT_EQ(what.find("run by the autograd engine"), std::string::npos) << what;
  }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(run.executor->autograd_passes(), 0u);
  for (const OpResult& op : run.session.ops) EXPECT_TRUE(op.replayed) << op.reason;
  const std::vector<double> w1 = run.executor->values(w);
  ASSERT_EQ(w1.size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_FLOAT_EQ(static_cast<float>(w1[i]), static_cast<float>(w0[i] - 0.5 * x[i])) << i;
}

// A storage no machine holds (4 TiB of floats) skips the ops that read it with the reason; the
// rest of the trace replays.
TEST(ReplayExecutor, a_storage_too_large_to_allocate_skips_its_ops_with_the_reason) {
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer aborts on an allocation it cannot make (allocator_may_return_null=0, as CI
  // runs it) instead of failing it; the Release tests cover this path.
  GTEST_SKIP() << "AddressSanitizer aborts on a failed allocation";
#endif
  const Replayed run = replay_text(test::flat_trace(R"J(
    {"id": 4, "name": "aten::relu", "parent": 3, "tid": 1,
     "op_schema": "aten::relu(Tensor self) -> Tensor",
     "inputs": [[1, 20, 0, 1099511627776, 4, "cpu"]], "input_shapes": [[1099511627776]],
     "input_types": ["Tensor(float)"]},
    {"id": 5, "name": "aten::relu", "parent": 3, "tid": 1,
     "op_schema": "aten::relu(Tensor self) -> Tensor",
     "inputs": [[2, 21, 0, 4, 4, "cpu"]], "input_shapes": [[4]],
     "input_types": ["Tensor(float)"]})J"));
  const std::vector<OpResult>& ops = run.session.ops;
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_FALSE(ops[0].replayed);
  EXPECT_EQ(ops[0].reason, "its storage 20 of 4.00 TiB cannot be allocated here");
  EXPECT_TRUE(ops[1].replayed) << ops[1].reason;
  EXPECT_EQ(run.executor->allocated_bytes(), 16u);
}

}  // namespace executor_test
}  // namespace orrery::replay
