// Replay plans: the iteration, the outermost operators, tensors as views of storages, and the
// communication ops, read from real traces and from small ones written here.
#include <gtest/gtest.h>

#include <set>

#include "replay/op_cost.h"
#include "replay/plan.h"
#include "replay_test_support.h"

namespace orrery::replay {
namespace plan_test {

ReplayPlan plan_of(const std::string& path, PlanOptions options = {}) {
  Expected<convert::HostTrace> host = convert::read_host_trace(path);
  EXPECT_TRUE(host) << host.error().message();
  if (!host) return {};
  Expected<ReplayPlan> plan = build_plan(*host, options);
  EXPECT_TRUE(plan) << plan.error().message();
  return plan ? std::move(*plan) : ReplayPlan{};
}

Expected<ReplayPlan> plan_of_text(const std::string& text, PlanOptions options = {}) {
  Expected<convert::HostTrace> host = test::host_from_text(text);
  if (!host) return host.error();
  return build_plan(*host, options);
}

TEST(ReplayPlan, element_types_by_their_recorded_names) {
  EXPECT_EQ(dtype_from_trace("Tensor(float)"), DType::kFloat);
  EXPECT_EQ(dtype_from_trace("Tensor(long int)"), DType::kInt64);
  EXPECT_EQ(dtype_from_trace("Tensor(long)"), DType::kInt64);
  EXPECT_EQ(dtype_from_trace("Tensor(int)"), DType::kInt32);
  EXPECT_EQ(dtype_from_trace("Tensor(unsigned char)"), DType::kUInt8);
  EXPECT_EQ(dtype_from_trace("Tensor(c10::BFloat16)"), DType::kBFloat16);
  EXPECT_EQ(dtype_from_trace("Tensor(c10::Half)"), DType::kHalf);
  EXPECT_EQ(dtype_from_trace("Tensor(bool)"), DType::kBool);
  EXPECT_EQ(dtype_from_trace("double"), DType::kDouble);
  EXPECT_FALSE(dtype_from_trace("Tensor(nullptr (uninitialized))"));
  EXPECT_EQ(dtype_bytes(DType::kBFloat16), 2u);
  EXPECT_EQ(dtype_bytes(DType::kComplexDouble), 16u);
}

// The MLP's training step: ProfilerStep#2's outermost operators only (aten::linear, not the
// aten::addmm it calls), in start order, with the optimizer's and autograd's ops.
TEST(ReplayPlan, training_step_keeps_the_outermost_operators_in_start_order) {
  const ReplayPlan plan = plan_of(test::recorded_et("mlp_train"));
  EXPECT_EQ(plan.schema, "1.0.1");
  EXPECT_EQ(plan.iteration, "ProfilerStep#2");
  ASSERT_EQ(plan.ops.size(), 68u);
  std::map<std::string, size_t> names;
  for (const ReplayOp& op : plan.ops) {
    ++names[op.name];
    EXPECT_EQ(op.kind, OpKind::kCompute) << op.name;
    EXPECT_FALSE(op.schema.empty()) << op.name;
  }
  EXPECT_EQ(names["aten::linear"], 3u);
  EXPECT_EQ(names["aten::mm"], 5u) << "backward's matrix products";
  EXPECT_EQ(names["aten::add_"], 18u) << "gradient accumulation and the SGD update";
  EXPECT_EQ(names.count("aten::addmm"), 0u) << "inside aten::linear";
  EXPECT_EQ(names.count("aten::as_strided"), 0u) << "inside aten::t";
  for (size_t at = 1; at < plan.ops.size(); ++at)
    EXPECT_LT(plan.ops[at - 1].node_id, plan.ops[at].node_id);
  const ReplayOp& first_linear =
      *std::find_if(plan.ops.begin(), plan.ops.end(),
                    [](const ReplayOp& op) { return op.name == "aten::linear"; });
  EXPECT_EQ(first_linear.schema,
            "aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor");
  ASSERT_EQ(first_linear.inputs.size(), 3u);
  const TensorView& input = plan.tensors[first_linear.inputs[0].tensor];
  const TensorView& weight = plan.tensors[first_linear.inputs[1].tensor];
  EXPECT_EQ(input.shape, (std::vector<int64_t>{32, 256}));
  EXPECT_EQ(weight.shape, (std::vector<int64_t>{512, 256}));
  EXPECT_EQ(weight.strides, (std::vector<int64_t>{256, 1})) << "contiguous: 1.0.1 has no strides";
  EXPECT_FALSE(weight.recorded_strides);
  EXPECT_GT(first_linear.children, 5u);
}

// Every view fits in its storage, and every storage is as large as its largest view.
TEST(ReplayPlan, storages_cover_every_view) {
  for (const char* model : {"mlp_train", "cnn_train", "transformer_train", "transformer_infer"}) {
    const ReplayPlan plan = plan_of(test::recorded_et(model));
    ASSERT_FALSE(plan.tensors.empty()) << model;
    std::vector<uint64_t> largest(plan.storages.size(), 0);
    for (const TensorView& view : plan.tensors) {
      const Storage& storage = plan.storages[view.storage];
      EXPECT_EQ(storage.dtype, view.dtype) << model;
      EXPECT_LE(view_extent_bytes(view), storage.bytes) << model << " tensor " << view.tensor_id;
      largest[view.storage] =
          std::max({largest[view.storage], view_extent_bytes(view),
                    static_cast<uint64_t>(view.offset + view.numel()) * dtype_bytes(view.dtype)});
    }
    for (size_t at = 0; at < plan.storages.size(); ++at)
      EXPECT_EQ(plan.storages[at].bytes, largest[at]) << model << " storage " << at;
  }
}

// DDP over Gloo: each bucket's c10d::allreduce_ is one collective of the bucket's bytes, the
// gloo:all_reduce that the observer left outside its call merged with it.
TEST(ReplayPlan, ddp_buckets_are_all_reduces_of_their_bytes) {
  for (const char* rank : {"0", "1"}) {
    const ReplayPlan plan =
        plan_of(test::recorded("ddp", std::string("rank") + rank + "_et.json.gz"));
    std::vector<const ReplayOp*> comms;
    for (const ReplayOp& op : plan.ops) {
      if (op.kind == OpKind::kComm) comms.push_back(&op);
    }
    ASSERT_EQ(comms.size(), 2u) << "rank " << rank;
    EXPECT_EQ(comms[0]->name, "c10d::allreduce_");
    EXPECT_EQ(comms[0]->comm->spec.name.type, ChakraProtoMsg::ALL_REDUCE);
    EXPECT_EQ(comms[0]->comm->spec.bytes, 267'786u * 4);
    EXPECT_EQ(comms[1]->comm->spec.bytes, 131'584u * 4);
    EXPECT_EQ(comms[0]->comm->dtype, DType::kFloat);
    EXPECT_NE(comms[0]->comm->described_by.find("gloo:all_reduce"), std::string::npos)
        << comms[0]->comm->described_by;
    EXPECT_FALSE(comms[0]->comm->tensors.empty());
    EXPECT_EQ(plan.ops.size(), std::string(rank) == "0" ? 91u : 90u)
        << "the observer put one aten::to of rank 0 at the top, rank 1's inside another op";
  }
}

// The observer keeps an asynchronous backend op's scope open until it completes: in this
// recording rank 1's first gloo:all_reduce is the parent of the rest of the backward pass, the
// second bucket's c10d::allreduce_ and its gloo:all_reduce. Walking them as its siblings keeps
// both ranks' plans alike; before, rank 1 lost 20 operators and its second all-reduce, and the
// ranks' collectives disagreed.
TEST(ReplayPlan, ops_filed_under_an_asynchronous_backend_op_are_replayed) {
  std::vector<ReplayPlan> plans;
  for (const char* rank : {"0", "1"})
    plans.push_back(
        plan_of(test::recorded("ddp_batch4", std::string("rank") + rank + "_et.json.gz")));
  ASSERT_EQ(plans.size(), 2u);
  size_t misfiled_mms = 0;
  for (const ReplayOp& op : plans[1].ops) misfiled_mms += op.name == "aten::mm" && op.node_id > 247;
  EXPECT_GT(misfiled_mms, 0u) << "the backward products after node 247 are replayed";
  for (const ReplayPlan& plan : plans) {
    std::vector<uint64_t> bytes;
    for (const ReplayOp& op : plan.ops)
      if (op.kind == OpKind::kComm) bytes.push_back(op.comm->spec.bytes);
    EXPECT_EQ(bytes, (std::vector<uint64_t>{267'786u * 4, 131'584u * 4}));
    EXPECT_EQ(plan.ops.size(), 90u);
  }
}

// In this recording the observer left out rank 0's second gloo:all_reduce and filed its first
// under the second c10d::allreduce_ (rank 1: the second under the first). Pairing each backend op
// with the call whose tensor it carries gives both ranks the two buckets in the order issued,
// the second call on rank 0 standing for itself; before, rank 0 had two 1 MiB all-reduces and
// rank 1 three all-reduces, and the replay stopped at the ranks' disagreement.
TEST(ReplayPlan, a_call_whose_backend_op_the_trace_lost_stands_for_it) {
  for (const char* rank : {"0", "1"}) {
    const ReplayPlan plan =
        plan_of(test::recorded("ddp_lost_op", std::string("rank") + rank + "_et.json.gz"));
    std::vector<uint64_t> bytes;
    std::vector<std::string> described;
    for (const ReplayOp& op : plan.ops) {
      if (op.kind != OpKind::kComm) continue;
      bytes.push_back(op.comm->spec.bytes);
      described.push_back(op.comm->described_by);
    }
    EXPECT_EQ(bytes, (std::vector<uint64_t>{267'786u * 4, 131'584u * 4})) << "rank " << rank;
    ASSERT_EQ(described.size(), 2u);
    EXPECT_EQ(described[0], std::string(rank) == "0" ? "node 293 'gloo:all_reduce'"
                                                     : "node 297 'gloo:all_reduce'");
    EXPECT_EQ(described[1], std::string(rank) == "0" ? "node 292 'c10d::allreduce_'"
                                                     : "node 298 'gloo:all_reduce'");
  }
}

TEST(ReplayPlan, iteration_is_chosen_by_its_marker) {
  Expected<convert::HostTrace> host =
      convert::read_host_trace(test::test_data("pytorch/pt2_et.json.gz"));
  ASSERT_TRUE(host) << host.error().message();
  Expected<ReplayPlan> first = build_plan(*host, {});
  ASSERT_TRUE(first);
  EXPECT_EQ(first->iteration, "ProfilerStep#5");
  PlanOptions options;
  options.iteration = 6;
  Expected<ReplayPlan> second = build_plan(*host, options);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->iteration, "ProfilerStep#6");
  for (const Expected<ReplayPlan>* plan : {&first, &second}) {
    ASSERT_EQ((*plan)->ops.size(), 2u);
    EXPECT_EQ((*plan)->ops[0].name, "aten::mm");
    EXPECT_EQ((*plan)->ops[0].kind, OpKind::kCompute);
    EXPECT_TRUE((*plan)->tensors[(*plan)->ops[0].inputs[1].tensor].recorded_strides);
    EXPECT_EQ((*plan)->tensors[(*plan)->ops[0].inputs[1].tensor].strides,
              (std::vector<int64_t>{1, 4}))
        << "schema 1.1.1 records strides: a transposed view";
    EXPECT_EQ((*plan)->ops[1].kind, OpKind::kUnsupported);
    EXPECT_NE((*plan)->ops[1].reason.find("a compiled kernel (triton"), std::string::npos)
        << (*plan)->ops[1].reason;
  }
  EXPECT_NE(first->ops[0].node_id, second->ops[0].node_id);
  options.iteration = 9;
  Expected<ReplayPlan> missing = build_plan(*host, options);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("--iteration 9: no ProfilerStep#9 in the trace (it has "
                                           "5, 6)"),
            std::string::npos)
      << missing.error().message();
}

TEST(ReplayPlan, labels_data_loading_and_waits_are_not_operators) {
  Expected<ReplayPlan> plan = plan_of_text(test::flat_trace(R"J(
    {"id": 4, "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "parent": 3,
     "tid": 1, "op_schema": ""},
    {"id": 5, "name": "aten::stack", "parent": 4, "tid": 1, "op_schema": "aten::stack(Tensor[] tensors, int dim=0) -> Tensor",
     "inputs": [], "input_types": []},
    {"id": 6, "name": "## forward ##", "parent": 3, "tid": 1, "op_schema": ""},
    {"id": 7, "name": "aten::relu", "parent": 6, "tid": 1,
     "op_schema": "aten::relu(Tensor self) -> Tensor",
     "inputs": [[10, 11, 0, 8, 4, "cpu"]], "input_shapes": [[2, 4]], "input_types": ["Tensor(float)"],
     "outputs": [[12, 13, 0, 8, 4, "cpu"]], "output_shapes": [[2, 4]], "output_types": ["Tensor(float)"]},
    {"id": 8, "name": "AddBackward0", "parent": 3, "tid": 1, "op_schema": "",
     "inputs": [[12, 13, 0, 8, 4, "cpu"]], "input_shapes": [[2, 4]], "input_types": ["Tensor(float)"]},
    {"id": 9, "name": "record_param_comms", "parent": 3, "tid": 1, "op_schema": "",
     "inputs": ["wait"], "input_types": ["String"]})J"));
  ASSERT_TRUE(plan) << plan.error().message();
  ASSERT_EQ(plan->ops.size(), 1u);
  EXPECT_EQ(plan->ops[0].name, "aten::relu");
  std::set<std::string> notes;
  for (const PlanNote& note : plan->notes) notes.insert(note.what);
  EXPECT_EQ(notes.count("data loading subtrees (not replayed)"), 1u);
  EXPECT_EQ(
      notes.count("labels and autograd nodes with no operator under them (nothing to replay)"), 1u);
  EXPECT_EQ(notes.count("waits on a collective (the replay waits where a later operator uses its "
                        "tensors)"),
            1u);
  const auto data = std::find_if(plan->notes.begin(), plan->notes.end(), [](const PlanNote& note) {
    return note.what == "data loading subtrees (not replayed)";
  });
  EXPECT_EQ(data->count, 2u) << "the loader and the op under it";
}

// Arguments as recorded: scalars, lists, None, devices, undefined tensors; a storage seen with two
// element types gets a buffer per type; tensor_range sets an integer storage's values.
TEST(ReplayPlan, arguments_and_storages_as_recorded) {
  Expected<ReplayPlan> plan = plan_of_text(test::flat_trace(R"J(
    {"id": 4, "name": "aten::embedding", "parent": 3, "tid": 1,
     "op_schema": "aten::embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor",
     "inputs": [[1, 20, 0, 40, 4, "cuda:0"], [2, 21, 3, 6, 8, "cuda:0"], -1, false, false],
     "input_shapes": [[10, 4], [6], [], [], []],
     "input_types": ["Tensor(float)", "Tensor(long int)", "Int", "Bool", "Bool"],
     "tensor_range": "{\"1\": [2, 7]}"},
    {"id": 5, "name": "aten::zeros", "parent": 3, "tid": 1,
     "op_schema": "aten::zeros(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
     "inputs": [[3, 5], 6, "<None>", "cuda:0", true], "input_shapes": [[[], []], [], [], [], []],
     "input_types": ["GenericList[Int,Int]", "Int", "None", "Device", "Bool"]},
    {"id": 6, "name": "aten::add", "parent": 3, "tid": 1,
     "op_schema": "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
     "inputs": [[7, 21, 0, 4, 4, "cuda:0"], [8, 0, 0, 0, 0, ""], 2.5],
     "input_shapes": [[4], [], []],
     "input_types": ["Tensor(float)", "Tensor(nullptr (uninitialized))", "Double"]})J"));
  ASSERT_TRUE(plan) << plan.error().message();
  ASSERT_EQ(plan->ops.size(), 3u);
  const ReplayOp& embedding = plan->ops[0];
  EXPECT_EQ(embedding.inputs[2].kind, Arg::Kind::kInt);
  EXPECT_EQ(embedding.inputs[2].int_value, -1);
  EXPECT_EQ(embedding.inputs[3].kind, Arg::Kind::kBool);
  const TensorView& indices = plan->tensors[embedding.inputs[1].tensor];
  EXPECT_EQ(indices.offset, 3);
  EXPECT_EQ(indices.dtype, DType::kInt64);
  EXPECT_EQ(indices.device, "cuda:0");
  const Storage& index_storage = plan->storages[indices.storage];
  EXPECT_EQ(index_storage.bytes, (3u + 6u) * 8u);
  ASSERT_TRUE(index_storage.recorded_range);
  EXPECT_EQ(*index_storage.recorded_range, (std::pair<int64_t, int64_t>{2, 7}));
  const ReplayOp& zeros = plan->ops[1];
  ASSERT_EQ(zeros.inputs[0].kind, Arg::Kind::kList);
  ASSERT_EQ(zeros.inputs[0].items.size(), 2u);
  EXPECT_EQ(zeros.inputs[0].items[1].int_value, 5);
  EXPECT_EQ(zeros.inputs[2].kind, Arg::Kind::kNone);
  EXPECT_EQ(zeros.inputs[3].kind, Arg::Kind::kDevice);
  EXPECT_EQ(zeros.inputs[3].text, "cuda:0");
  const ReplayOp& add = plan->ops[2];
  EXPECT_EQ(add.inputs[1].kind, Arg::Kind::kUndefinedTensor);
  EXPECT_EQ(add.inputs[2].kind, Arg::Kind::kDouble);
  EXPECT_DOUBLE_EQ(add.inputs[2].double_value, 2.5);
  // Storage 21 as int64 (the indices) and as float: two buffers.
  EXPECT_NE(plan->tensors[add.inputs[0].tensor].storage, indices.storage);
  EXPECT_EQ(plan->storages.size(), 3u);
  EXPECT_EQ(plan->devices.at("cuda:0"), 3u);
}

TEST(ReplayPlan, malformed_tensor_values_name_the_node) {
  Expected<ReplayPlan> plan = plan_of_text(test::flat_trace(R"J(
    {"id": 4, "name": "aten::relu", "parent": 3, "tid": 1,
     "op_schema": "aten::relu(Tensor self) -> Tensor",
     "inputs": [[10, 11, 0]], "input_shapes": [[2, 4]], "input_types": ["Tensor(float)"]})J"));
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.error().message().find("t.json: node 4 'aten::relu': a Tensor(float) value is "
                                        "[10,11,0], expected [tensor id, storage id, offset, "
                                        "elements, element bytes, device]"),
            std::string::npos)
      << plan.error().message();
  Expected<ReplayPlan> odd = plan_of_text(test::flat_trace(R"J(
    {"id": 4, "name": "aten::relu", "parent": 3, "tid": 1,
     "op_schema": "aten::relu(Tensor self) -> Tensor",
     "inputs": [[10, 11, 0, 8, 3, "cpu"]], "input_shapes": [[2, 4]], "input_types": ["Tensor(float)"]})J"));
  ASSERT_FALSE(odd);
  EXPECT_NE(odd.error().message().find("node 4 'aten::relu': tensor [10,11,0,8,3,\"cpu\"] has "
                                       "elements of 3 bytes"),
            std::string::npos)
      << odd.error().message();
}

// FLOPs in closed form from the recorded shapes: the MLP's linear layers (2 x batch x in x out),
// backward's products, and the CNN's convolutions (2 x output elements x C x kh x kw).
TEST(ReplayPlan, matrix_and_convolution_flops_from_the_shapes) {
  const ReplayPlan mlp = plan_of(test::recorded_et("mlp_train"));
  std::vector<uint64_t> linear;
  uint64_t mm = 0;
  for (const ReplayOp& op : mlp.ops) {
    const std::optional<OpCost> cost = op_cost(mlp, op);
    if (op.name == "aten::linear") linear.push_back(cost->flops);
    if (op.name == "aten::mm") mm += cost->flops;
    if (op.name == "aten::relu") {
      EXPECT_FALSE(cost);
      // It streams its 32 x 512 float input and output.
      EXPECT_EQ(streamed_bytes(mlp, op), std::optional<uint64_t>(2 * 32 * 512 * 4));
    }
    if (op.name == "aten::linear" && cost->flops == 2ull * 32 * 256 * 512) {
      ASSERT_TRUE(cost->gemm);  // (32 x 256) by (256 x 512)
      EXPECT_EQ(cost->gemm->m, 32u);
      EXPECT_EQ(cost->gemm->n, 512u);
      EXPECT_EQ(cost->gemm->k, 256u);
      EXPECT_EQ(cost->gemm->batch, 1u);
    }
    if (op.name == "aten::t" || op.name == "aten::view") {
      EXPECT_FALSE(streamed_bytes(mlp, op)) << op.name;  // views move nothing
    }
  }
  EXPECT_EQ(linear, (std::vector<uint64_t>{2ull * 32 * 256 * 512, 2ull * 32 * 512 * 512,
                                           2ull * 32 * 512 * 10}));
  // Input gradients of layers 2 and 3, weight gradients of all three.
  EXPECT_EQ(mm,
            2ull * 32 * (512 * 512 + 512 * 10) + 2ull * 32 * (256 * 512 + 512 * 512 + 512 * 10));
  const ReplayPlan cnn = plan_of(test::recorded_et("cnn_infer"));
  std::vector<uint64_t> conv;
  for (const ReplayOp& op : cnn.ops) {
    if (op.name == "aten::conv2d") conv.push_back(op_cost(cnn, op)->flops);
  }
  EXPECT_EQ(conv, (std::vector<uint64_t>{2ull * 16 * 32 * 32 * 32 * 3 * 9,
                                         2ull * 16 * 64 * 16 * 16 * 32 * 9}));
}

}  // namespace plan_test
}  // namespace orrery::replay
