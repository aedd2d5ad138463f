// The mapping from PyTorch operators to Chakra nodes, on small traces written in the test.
#include <gtest/gtest.h>

#include "chakra/comm_groups.h"
#include "convert/collectives.h"
#include "convert/json_file.h"
#include "convert/kineto_trace.h"
#include "convert_test_support.h"

namespace orrery::convert {
namespace pytorch_converter_test {

using nlohmann::json;
using test::find_attr;
using test::TempDir;

// A node of a schema 1.1.0 host trace.
json op(uint64_t id, const std::string& name, uint64_t parent, json values = json::array(),
        json types = json::array(), json extra_attrs = json::array(), int64_t tid = 1) {
  json attrs = json::array({{{"name", "rf_id"}, {"type", "uint64"}, {"value", id}},
                            {{"name", "tid"}, {"type", "uint64"}, {"value", tid}}});
  for (const json& attr : extra_attrs) attrs.push_back(attr);
  return {
      {"id", id},
      {"name", name},
      {"ctrl_deps", parent},
      {"inputs", {{"values", values}, {"shapes", json::array()}, {"types", types}}},
      {"outputs", {{"values", json::array()}, {"shapes", json::array()}, {"types", json::array()}}},
      {"attrs", attrs}};
}

json attr(const std::string& name, const std::string& type, json value) {
  return {{"name", name}, {"type", type}, {"value", value}};
}

json tensor(uint64_t elements, uint64_t bytes) {
  return json::array({1, 2, 0, elements, bytes, "cuda:0"});
}

// One rank of a DDP step: groups, a matmul, an all-reduce of 1024 floats on group "0".
json ddp_trace() {
  json nodes = json::array();
  nodes.push_back(op(1, "[pytorch|profiler|execution_trace|process]", 1));
  nodes.push_back(op(2, "[pytorch|profiler|execution_trace|thread]", 1));
  nodes.push_back(op(3, "## process_group:init ##", 2,
                     {"[{\"pg_name\": \"0\", \"pg_desc\": \"default_pg\", \"ranks\": [], "
                      "\"group_size\": 2}, {\"pg_name\": \"1\", \"ranks\": [0, 1]}]"},
                     {"String"}));
  nodes.push_back(op(4, "aten::mm", 2));
  nodes.push_back(op(5, "c10d::allreduce_", 2));
  nodes.push_back(
      op(6, "record_param_comms", 5, json::array(), json::array(),
         {attr("collective_name", "string", "allreduce"), attr("dtype", "string", "Float"),
          attr("in_msg_nelems", "uint64", 1024), attr("pg_name", "string", "0")}));
  nodes.push_back(op(7, "nccl:all_reduce", 6, {tensor(1024, 4)}, {"Tensor(float)"}));
  nodes.push_back(op(8, "aten::add", 2));
  return {{"schema", "1.1.0-chakra.0.0.4"},
          {"pid", 42},
          {"time", "2024-01-01 00:00:00"},
          {"start_ts", 1},
          {"finish_ts", 2},
          {"nodes", nodes}};
}

Expected<HostTrace> host_of(const json& doc) { return parse_host_trace("host.json", doc); }

const ChakraProtoMsg::Node* node_named(const Conversion& conversion, const std::string& name,
                                       int32_t type) {
  for (const auto& node : conversion.nodes)
    if (node.name() == name && node.type() == type) return &node;
  return nullptr;
}

TEST(CommName, maps_collective_names_to_chakra_types) {
  const std::vector<std::pair<std::string, ChakraProtoMsg::CollectiveCommType>> cases = {
      {"nccl:all_reduce", ChakraProtoMsg::ALL_REDUCE},
      {"allreduce", ChakraProtoMsg::ALL_REDUCE},
      {"nccl:all_to_all", ChakraProtoMsg::ALL_TO_ALL},
      {"all_to_allv", ChakraProtoMsg::ALL_TO_ALL},
      {"_allgather_base", ChakraProtoMsg::ALL_GATHER},
      {"nccl:all_gather", ChakraProtoMsg::ALL_GATHER},
      {"reduce_scatter_tensor", ChakraProtoMsg::REDUCE_SCATTER},
      {"nccl:broadcast", ChakraProtoMsg::BROADCAST},
      {"nccl:reduce", ChakraProtoMsg::REDUCE},
      {"gather", ChakraProtoMsg::GATHER},
      {"scatter", ChakraProtoMsg::SCATTER},
      {"barrier", ChakraProtoMsg::BARRIER}};
  for (const auto& [name, type] : cases) {
    const std::optional<CommName> found = comm_name(name);
    ASSERT_TRUE(found) << name;
    EXPECT_EQ(found->kind, CommKind::kCollective) << name;
    EXPECT_EQ(found->type, type) << name;
  }
  EXPECT_EQ(comm_name("nccl:send")->kind, CommKind::kSend);
  EXPECT_EQ(comm_name("nccl:recv")->kind, CommKind::kRecv);
  EXPECT_FALSE(comm_name("wait"));
  EXPECT_FALSE(comm_name("nccl:coalesced"));
  EXPECT_EQ(dtype_bytes("Float"), 4u);
  EXPECT_EQ(dtype_bytes("BFloat16"), 2u);
  EXPECT_EQ(dtype_bytes("Long"), 8u);
  EXPECT_EQ(dtype_bytes("mystery"), 0u);
}

TEST(Converter, maps_ops_groups_and_collectives_of_a_host_trace) {
  Expected<HostTrace> host = host_of(ddp_trace());
  ASSERT_TRUE(host) << host.error().message();
  Expected<Conversion> conversion = convert_pytorch_trace(*host, nullptr, {});
  ASSERT_TRUE(conversion) << conversion.error().message();
  const auto counts = test::count_types(*conversion);
  EXPECT_EQ(counts.at("COMP_NODE"), 5u) << "mm, allreduce_, record_param_comms, nccl op, add";
  EXPECT_EQ(counts.at("METADATA_NODE"), 1u);
  EXPECT_EQ(counts.at("COMM_COLL_NODE"), 1u);
  test::expect_forward_edges(*conversion);

  const auto* metadata =
      node_named(*conversion, "## process_group:init ##", ChakraProtoMsg::METADATA_NODE);
  ASSERT_NE(metadata, nullptr);
  chakra::CommGroups groups(2);
  ASSERT_TRUE(chakra::add_groups_from_metadata(metadata->inputs().values(), "m", groups));
  ASSERT_NE(groups.find("1"), nullptr) << "the comm-group reader understands the METADATA text";
  EXPECT_EQ(groups.find("1")->ranks, (std::vector<uint32_t>{0, 1}));

  const auto* coll = node_named(*conversion, "nccl:all_reduce", ChakraProtoMsg::COMM_COLL_NODE);
  ASSERT_NE(coll, nullptr);
  EXPECT_EQ(find_attr(*coll, "comm_type")->int64_val(), ChakraProtoMsg::ALL_REDUCE);
  EXPECT_EQ(find_attr(*coll, "comm_size")->int64_val(), 4096);
  EXPECT_EQ(find_attr(*coll, "pg_name")->string_val(), "0");
  EXPECT_FALSE(find_attr(*coll, "is_cpu_op")->bool_val());
  EXPECT_GT(coll->id(), 8u) << "device-side nodes are numbered after the host ops";
  EXPECT_EQ(std::vector<uint64_t>(coll->data_deps().begin(), coll->data_deps().end()),
            std::vector<uint64_t>{7})
      << "it follows the nccl op that launched it";

  // Host ops: one chain in start order, each after the one before (annotations dropped).
  const auto* add = node_named(*conversion, "aten::add", ChakraProtoMsg::COMP_NODE);
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->data_deps(0), 7u) << "the host thread does not wait for the collective";
  EXPECT_TRUE(find_attr(*add, "is_cpu_op")->bool_val());
  const auto* mm = node_named(*conversion, "aten::mm", ChakraProtoMsg::COMP_NODE);
  EXPECT_EQ(mm->data_deps(0), 3u);

  const ConversionReport& report = conversion->report;
  ASSERT_EQ(report.comms.size(), 1u);
  EXPECT_EQ(report.comms[0].host_id, 7u);
  ASSERT_FALSE(report.notes.empty());
  EXPECT_EQ(report.notes[0].what, "thread and process annotation nodes (structure only)");
  EXPECT_EQ(report.notes[0].count, 2u);
  EXPECT_NE(report.durations.find("none in the host trace"), std::string::npos);

  TempDir dir;
  ASSERT_TRUE(write_conversion(*conversion, dir.file("out.et")));
  const chakra::ValidationReport checks = test::validate_file(dir.file("out.et"));
  EXPECT_TRUE(checks.diagnostics().empty()) << test::findings(checks);
}

// A recording in which the observer left out rank 0's second gloo:all_reduce and filed its first
// under the second c10d::allreduce_ (rank 1: its second under its first): each rank converts to
// the two buckets in the order its calls issued them, the call without a backend op standing for
// its all-reduce. Before, rank 0 converted to one all-reduce and rank 1 to two, and a simulation
// of the pair could not finish.
TEST(Converter, calls_issue_their_collectives_whatever_the_observer_lost_or_misfiled) {
  for (const std::string rank : {"0", "1"}) {
    Expected<HostTrace> host =
        read_host_trace(test::pytorch_data("recorded/ddp_lost_op/rank" + rank + "_et.json.gz"));
    ASSERT_TRUE(host) << host.error().message();
    Expected<Conversion> conversion = convert_pytorch_trace(*host, nullptr, {});
    ASSERT_TRUE(conversion) << conversion.error().message();
    std::vector<uint64_t> bytes;
    std::vector<uint64_t> hosts;
    for (const CommRecord& comm : conversion->report.comms) {
      bytes.push_back(comm.bytes);
      hosts.push_back(comm.host_id);
    }
    EXPECT_EQ(bytes, (std::vector<uint64_t>{267'786u * 4, 131'584u * 4})) << "rank " << rank;
    // Rank 0: the first call (244) issues the op filed under the second (293); the second call
    // (292) stands for its own. Rank 1: the first call (247) issues its op (297, filed under the
    // second call); the second's op (298) is under its call.
    EXPECT_EQ(hosts,
              rank == "0" ? (std::vector<uint64_t>{244, 292}) : (std::vector<uint64_t>{247, 298}));
  }
}

// c10d runs the all-reduce beside the computation: the first later op on its tensors (storage 2)
// waits for it; an op on another storage, the ops inside the communication's own call and the
// later users after the first do not.
TEST(Converter, the_first_later_op_on_a_communications_tensors_waits_for_it) {
  json doc = ddp_trace();
  json& nodes = doc["nodes"];
  nodes.erase(nodes.size() - 1);  // aten::add
  const json float_tensor = {"Tensor(float)"};
  nodes.push_back(op(8, "aten::view", 7, {tensor(1024, 4)}, float_tensor));  // inside the call
  nodes.push_back(op(9, "aten::mul", 2, {json::array({3, 9, 0, 16, 4, "cuda:0"})}, float_tensor));
  nodes.push_back(op(10, "aten::div_", 2, {tensor(1024, 4)}, float_tensor));
  nodes.push_back(op(11, "aten::add_", 2, {tensor(1024, 4)}, float_tensor));
  Expected<HostTrace> host = host_of(doc);
  ASSERT_TRUE(host) << host.error().message();
  Expected<Conversion> conversion = convert_pytorch_trace(*host, nullptr, {});
  ASSERT_TRUE(conversion) << conversion.error().message();
  const auto* coll = node_named(*conversion, "nccl:all_reduce", ChakraProtoMsg::COMM_COLL_NODE);
  ASSERT_NE(coll, nullptr);
  const auto deps = [&](const std::string& name) {
    const auto* node = node_named(*conversion, name, ChakraProtoMsg::COMP_NODE);
    return node == nullptr
               ? std::vector<uint64_t>{}
               : std::vector<uint64_t>(node->data_deps().begin(), node->data_deps().end());
  };
  EXPECT_EQ(deps("aten::view"), std::vector<uint64_t>{7});
  EXPECT_EQ(deps("aten::mul"), std::vector<uint64_t>{8});
  EXPECT_EQ(deps("aten::div_"), (std::vector<uint64_t>{9, coll->id()}));
  EXPECT_EQ(deps("aten::add_"), std::vector<uint64_t>{10});
  const ConversionReport& report = conversion->report;
  ASSERT_EQ(report.comms.size(), 1u);
  EXPECT_EQ(report.comms[0].waiter_id, std::optional<uint64_t>{10});
  TempDir dir;
  ASSERT_TRUE(write_conversion(*conversion, dir.file("out.et")));
  const chakra::ValidationReport checks = test::validate_file(dir.file("out.et"));
  EXPECT_TRUE(checks.diagnostics().empty()) << test::findings(checks);
}

TEST(Converter, sizes_fall_back_to_record_param_comms) {
  json doc = ddp_trace();
  doc["nodes"][6]["inputs"]["values"] = json::array();  // the nccl op without tensors
  doc["nodes"][6]["inputs"]["types"] = json::array();
  Expected<HostTrace> host = host_of(doc);
  ASSERT_TRUE(host);
  Expected<Conversion> conversion = convert_pytorch_trace(*host, nullptr, {});
  ASSERT_TRUE(conversion) << conversion.error().message();
  const auto* coll = node_named(*conversion, "nccl:all_reduce", ChakraProtoMsg::COMM_COLL_NODE);
  ASSERT_NE(coll, nullptr);
  EXPECT_EQ(find_attr(*coll, "comm_size")->int64_val(), 4096) << "1024 x Float";
}

TEST(Converter, collectives_of_a_group_keep_their_order) {
  json doc = ddp_trace();
  doc["nodes"].push_back(op(9, "c10d::broadcast_", 2));
  doc["nodes"].push_back(op(10, "record_param_comms", 9, json::array(), json::array(),
                            {attr("pg_name", "string", "0")}));
  doc["nodes"].push_back(op(11, "nccl:broadcast", 10, {tensor(53, 8)}, {"Tensor(long)"}));
  Expected<HostTrace> host = host_of(doc);
  ASSERT_TRUE(host);
  Expected<Conversion> conversion = convert_pytorch_trace(*host, nullptr, {});
  ASSERT_TRUE(conversion) << conversion.error().message();
  const auto* first = node_named(*conversion, "nccl:all_reduce", ChakraProtoMsg::COMM_COLL_NODE);
  const auto* second = node_named(*conversion, "nccl:broadcast", ChakraProtoMsg::COMM_COLL_NODE);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(find_attr(*second, "comm_size")->int64_val(), 53 * 8);
  EXPECT_NE(std::find(second->data_deps().begin(), second->data_deps().end(), first->id()),
            second->data_deps().end());
  test::expect_forward_edges(*conversion);
}

TEST(Converter, sends_and_receives_carry_peer_tag_and_size) {
  json doc = ddp_trace();
  doc["nodes"].push_back(op(9, "c10d::send", 2, {json::array({tensor(256, 4)}), "<Object>", 1, 7},
                            {"GenericList[Tensor(float)]", "Object", "Int", "Int"}));
  doc["nodes"].push_back(op(10, "record_param_comms", 9, json::array(), json::array(),
                            {attr("pg_name", "string", "1"), attr("global_rank_start", "uint64", 0),
                             attr("global_rank_stride", "uint64", 1)}));
  doc["nodes"].push_back(op(11, "nccl:send", 10, {tensor(256, 4)}, {"Tensor(float)"}));
  doc["nodes"].push_back(op(12, "c10d::recv_", 2, {json::array({tensor(256, 4)}), "<Object>", 1, 8},
                            {"GenericList[Tensor(float)]", "Object", "Int", "Int"}));
  doc["nodes"].push_back(op(13, "record_param_comms", 12));
  doc["nodes"].push_back(op(14, "nccl:recv", 13, {tensor(256, 4)}, {"Tensor(float)"}));
  Expected<HostTrace> host = host_of(doc);
  ASSERT_TRUE(host);
  Expected<Conversion> conversion = convert_pytorch_trace(*host, nullptr, {});
  ASSERT_TRUE(conversion) << conversion.error().message();
  const auto* send = node_named(*conversion, "nccl:send", ChakraProtoMsg::COMM_SEND_NODE);
  const auto* recv = node_named(*conversion, "nccl:recv", ChakraProtoMsg::COMM_RECV_NODE);
  ASSERT_NE(send, nullptr);
  ASSERT_NE(recv, nullptr);
  EXPECT_EQ(find_attr(*send, "comm_dst")->int64_val(), 1);
  EXPECT_EQ(find_attr(*send, "comm_tag")->int64_val(), 7);
  EXPECT_EQ(find_attr(*send, "comm_size")->int64_val(), 1024);
  EXPECT_EQ(find_attr(*recv, "comm_src")->int64_val(), 1);
  EXPECT_EQ(find_attr(*recv, "comm_tag")->int64_val(), 8);
  TempDir dir;
  ASSERT_TRUE(write_conversion(*conversion, dir.file("p2p.et")));
  const chakra::ValidationReport checks = test::validate_file(dir.file("p2p.et"));
  EXPECT_TRUE(checks.diagnostics().empty()) << test::findings(checks);
}

TEST(Converter, a_record_param_comms_without_an_nccl_op_is_the_collective) {
  json doc = ddp_trace();
  doc["nodes"].erase(6);  // the nccl:all_reduce under record_param_comms
  // DDP's wait, which moves nothing: kept as a host op, and named.
  doc["nodes"].push_back(op(9, "record_param_comms", 8, json::array(), json::array(),
                            {attr("collective_name", "string", "wait")}));
  Expected<HostTrace> host = host_of(doc);
  ASSERT_TRUE(host) << host.error().message();
  Expected<Conversion> conversion = convert_pytorch_trace(*host, nullptr, {});
  ASSERT_TRUE(conversion) << conversion.error().message();
  test::expect_forward_edges(*conversion);
  const auto* coll = node_named(*conversion, "record_param_comms", ChakraProtoMsg::COMM_COLL_NODE);
  ASSERT_NE(coll, nullptr);
  EXPECT_EQ(find_attr(*coll, "comm_type")->int64_val(), ChakraProtoMsg::ALL_REDUCE);
  EXPECT_EQ(find_attr(*coll, "comm_size")->int64_val(), 4096) << "in_msg_nelems 1024 x Float";
  EXPECT_EQ(find_attr(*coll, "pg_name")->string_val(), "0");
  EXPECT_EQ(find_attr(*coll, "host_op_id")->int64_val(), 6);
  ASSERT_EQ(conversion->report.comms.size(), 1u);
  const ConversionNote* waits = nullptr;
  for (const ConversionNote& note : conversion->report.notes)
    if (note.what == "record_param_comms that move no data (kept as host ops only)") waits = &note;
  ASSERT_NE(waits, nullptr);
  EXPECT_EQ(waits->count, 1u);
  EXPECT_EQ(waits->examples, std::vector<std::string>{"node 9 'record_param_comms' ('wait')"});
}

TEST(Converter, ops_whose_parent_is_not_in_the_trace_are_named) {
  json doc = ddp_trace();
  doc["nodes"].push_back(op(9, "aten::relu", 77));
  Expected<HostTrace> host = host_of(doc);
  ASSERT_TRUE(host) << host.error().message();
  Expected<Conversion> conversion = convert_pytorch_trace(*host, nullptr, {});
  ASSERT_TRUE(conversion) << conversion.error().message();
  EXPECT_NE(node_named(*conversion, "aten::relu", ChakraProtoMsg::COMP_NODE), nullptr);
  bool named = false;
  for (const ConversionNote& note : conversion->report.notes) {
    if (note.what != "ops whose parent is not in the trace (taken as top-level)") continue;
    EXPECT_EQ(note.count, 1u);
    EXPECT_EQ(note.examples, std::vector<std::string>{"node 9 'aten::relu' (parent 77)"});
    named = true;
  }
  EXPECT_TRUE(named);
}

TEST(Converter, a_send_without_a_peer_is_an_error_naming_the_node) {
  json doc = ddp_trace();
  doc["nodes"].push_back(op(9, "nccl:send", 2, {tensor(256, 4)}, {"Tensor(float)"}));
  Expected<HostTrace> host = host_of(doc);
  ASSERT_TRUE(host);
  Expected<Conversion> conversion = convert_pytorch_trace(*host, nullptr, {});
  ASSERT_FALSE(conversion);
  EXPECT_NE(conversion.error().message().find("node 9 'nccl:send': a send without a peer rank"),
            std::string::npos)
      << conversion.error().message();
}

TEST(Converter, process_groups_that_do_not_read_are_an_error) {
  json doc = ddp_trace();
  doc["nodes"][2]["inputs"]["values"][0] = "[{\"pg_name\": \"1\", \"ranks\": [0, 1";
  Expected<HostTrace> host = host_of(doc);
  ASSERT_TRUE(host);
  Expected<Conversion> conversion = convert_pytorch_trace(*host, nullptr, {});
  ASSERT_FALSE(conversion);
  EXPECT_NE(conversion.error().message().find("host.json: node 3"), std::string::npos)
      << conversion.error().message();
}

TEST(Converter, linked_host_traces_bring_their_durations_and_gpu_entries) {
  // Chakra's trace_link writes exclusive_dur on host ops, and GPU entries (with a Kineto "cat")
  // whose parent is the op that launched them.
  json doc = ddp_trace();
  doc["nodes"][3]["exclusive_dur"] = 25;  // aten::mm
  json gpu = op(9, "volta_sgemm_128x64_nn", 4);
  gpu["cat"] = "kernel";
  gpu["exclusive_dur"] = 300;
  gpu["ts"] = 1000;
  gpu["stream"] = 7;
  doc["nodes"].push_back(gpu);
  Expected<HostTrace> host = host_of(doc);
  ASSERT_TRUE(host) << host.error().message();
  Expected<Conversion> conversion = convert_pytorch_trace(*host, nullptr, {});
  ASSERT_TRUE(conversion) << conversion.error().message();
  test::expect_forward_edges(*conversion);
  EXPECT_EQ(node_named(*conversion, "aten::mm", ChakraProtoMsg::COMP_NODE)->duration_micros(), 25u);
  const auto* kernel = node_named(*conversion, "volta_sgemm_128x64_nn", ChakraProtoMsg::COMP_NODE);
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->duration_micros(), 300u);
  EXPECT_EQ(find_attr(*kernel, "stream")->int64_val(), 7);
  EXPECT_FALSE(find_attr(*kernel, "is_cpu_op")->bool_val());
  EXPECT_EQ(kernel->data_deps(0), 4u) << "after aten::mm, which launched it";
  EXPECT_EQ(conversion->report.host_ops, 5u);
  EXPECT_EQ(conversion->report.durations, "host ops: exclusive_dur from the host trace");
}

// ---- Linking with Kineto ------------------------------------------------------------------------

json cpu_event(const std::string& name, int64_t ts, int64_t dur, int64_t external,
               int64_t tid = 100, int64_t pid = 42) {
  return {{"ph", "X"},  {"cat", "cpu_op"}, {"name", name}, {"pid", pid},
          {"tid", tid}, {"ts", ts},        {"dur", dur},   {"args", {{"External id", external}}}};
}

json launch(int64_t ts, int64_t correlation, int64_t tid = 100) {
  return {{"ph", "X"},
          {"cat", "cuda_runtime"},
          {"name", "cudaLaunchKernel"},
          {"pid", 42},
          {"tid", tid},
          {"ts", ts},
          {"dur", 2},
          {"args", {{"External id", correlation}, {"correlation", correlation}}}};
}

json kernel(const std::string& name, int64_t ts, int64_t dur, int64_t correlation, int64_t stream) {
  return {
      {"ph", "X"},
      {"cat", "kernel"},
      {"name", name},
      {"pid", 0},
      {"tid", stream},
      {"ts", ts},
      {"dur", dur},
      {"args", {{"External id", correlation}, {"correlation", correlation}, {"stream", stream}}}};
}

// The Kineto side of ddp_trace(): the host ops in order, a matmul kernel on stream 7 and the
// all-reduce kernel on stream 20. The profiler recorded one op the observer did not.
json ddp_kineto() {
  json events = json::array();
  events.push_back(cpu_event("ProfilerStep#3", 0, 1000, 1));
  events.push_back(cpu_event("## process_group:init ##", 10, 5, 2));
  events.push_back(cpu_event("aten::mm", 20, 30, 3));
  events.push_back(launch(30, 900));
  events.push_back(cpu_event("c10d::allreduce_", 60, 40, 4));
  events.push_back(cpu_event("record_param_comms", 65, 30, 5));
  events.push_back(cpu_event("nccl:all_reduce", 70, 20, 6));
  events.push_back(launch(75, 901));
  events.push_back(cpu_event("aten::add", 110, 10, 7));
  events.push_back(launch(112, 902));
  events.push_back(kernel("volta_sgemm_128x64_nn", 40, 300, 900, 7));
  events.push_back(kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 340, 120, 901, 20));
  events.push_back(kernel("vectorized_elementwise_kernel", 341, 4, 902, 7));
  events.push_back(kernel("orphan_kernel", 500, 4, 999, 7));
  return {{"schemaVersion", 1},
          {"distributedInfo", {{"rank", 0}, {"world_size", 2}}},
          {"traceEvents", events}};
}

// The op on the all-reduce's tensors (aten::div_, thread 1) comes before, in id order, an op of
// another thread (aten::mul) that launched a kernel earlier than the all-reduce; the all-reduce
// follows that kernel (compute launched before it on another stream), so the wait would close a
// cycle: it is left out and said so.
TEST(Converter, a_wait_for_communication_that_would_close_a_cycle_is_left_out) {
  json doc = ddp_trace();
  json& nodes = doc["nodes"];
  nodes.erase(nodes.size() - 1);  // aten::add
  nodes.push_back(op(8, "aten::div_", 2, {tensor(1024, 4)}, {"Tensor(float)"}));
  nodes.push_back(op(9, "aten::mul", 2, json::array(), json::array(), json::array(), 2));
  json kineto = ddp_kineto();
  json events = json::array();
  for (const json& event : kineto["traceEvents"]) {
    const std::string name = event["name"];
    if (name != "aten::add" && name != "vectorized_elementwise_kernel" &&
        !(name == "cudaLaunchKernel" && event["ts"] == 112))
      events.push_back(event);
  }
  events.push_back(cpu_event("aten::div_", 110, 10, 7));
  events.push_back(cpu_event("aten::mul", 50, 10, 8, 200));
  events.push_back(launch(52, 903, 200));
  events.push_back(kernel("mul_kernel", 60, 5, 903, 7));
  kineto["traceEvents"] = events;
  Expected<HostTrace> host = host_of(doc);
  ASSERT_TRUE(host) << host.error().message();
  Expected<KinetoTrace> profile = parse_kineto_trace("kineto.json", kineto);
  ASSERT_TRUE(profile) << profile.error().message();
  Expected<Conversion> conversion = convert_pytorch_trace(*host, &*profile, {});
  ASSERT_TRUE(conversion) << conversion.error().message();
  const auto* coll = node_named(*conversion, "ncclKernel_AllReduce_RING_LL_Sum_float",
                                ChakraProtoMsg::COMM_COLL_NODE);
  const auto* mul = node_named(*conversion, "mul_kernel", ChakraProtoMsg::COMP_NODE);
  ASSERT_NE(coll, nullptr);
  ASSERT_NE(mul, nullptr);
  ASSERT_NE(std::find(coll->data_deps().begin(), coll->data_deps().end(), mul->id()),
            coll->data_deps().end())
      << "the all-reduce follows the kernel launched before it on another stream";
  const auto* div = node_named(*conversion, "aten::div_", ChakraProtoMsg::COMP_NODE);
  ASSERT_NE(div, nullptr);
  EXPECT_EQ(std::vector<uint64_t>(div->data_deps().begin(), div->data_deps().end()),
            std::vector<uint64_t>{7});
  EXPECT_FALSE(conversion->report.comms.at(0).waiter_id);
  bool noted = false;
  for (const ConversionNote& note : conversion->report.notes) {
    if (note.what.find("would close a cycle") == std::string::npos) continue;
    noted = true;
    ASSERT_FALSE(note.examples.empty());
    EXPECT_NE(note.examples[0].find("node 8 'aten::div_'"), std::string::npos) << note.examples[0];
  }
  EXPECT_TRUE(noted);
  TempDir dir;
  ASSERT_TRUE(write_conversion(*conversion, dir.file("out.et")));
  const chakra::ValidationReport checks = test::validate_file(dir.file("out.et"));
  EXPECT_TRUE(checks.diagnostics().empty()) << test::findings(checks);
}

TEST(Converter, links_kernels_to_their_launching_ops) {
  Expected<HostTrace> host = host_of(ddp_trace());
  ASSERT_TRUE(host);
  Expected<KinetoTrace> kineto = parse_kineto_trace("kineto.json", ddp_kineto());
  ASSERT_TRUE(kineto) << kineto.error().message();
  Expected<Conversion> conversion = convert_pytorch_trace(*host, &*kineto, {});
  ASSERT_TRUE(conversion) << conversion.error().message();
  test::expect_forward_edges(*conversion);
  const ConversionReport& report = conversion->report;
  EXPECT_EQ(report.host_ops_linked, 6u);
  EXPECT_EQ(report.host_ops_linkable, 6u);
  EXPECT_EQ(report.gpu_events, 4u);
  EXPECT_EQ(report.gpu_events_linked, 3u);
  EXPECT_EQ(report.kernels, 2u);

  const auto* gemm = node_named(*conversion, "volta_sgemm_128x64_nn", ChakraProtoMsg::COMP_NODE);
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ(gemm->duration_micros(), 300u);
  EXPECT_EQ(find_attr(*gemm, "stream")->int64_val(), 7);
  EXPECT_EQ(find_attr(*gemm, "host_op_id")->int64_val(), 4) << "launched by aten::mm";
  EXPECT_FALSE(find_attr(*gemm, "is_cpu_op")->bool_val());

  const auto* coll = node_named(*conversion, "ncclKernel_AllReduce_RING_LL_Sum_float",
                                ChakraProtoMsg::COMM_COLL_NODE);
  ASSERT_NE(coll, nullptr) << "the NCCL kernel is the collective";
  EXPECT_EQ(find_attr(*coll, "comm_size")->int64_val(), 4096);
  EXPECT_EQ(coll->duration_micros(), 120u);
  std::vector<uint64_t> deps(coll->data_deps().begin(), coll->data_deps().end());
  EXPECT_EQ(deps, (std::vector<uint64_t>{7, gemm->id()}))
      << "after its launch, and after the compute launched before it on another stream";
  EXPECT_EQ(node_named(*conversion, "nccl:all_reduce", ChakraProtoMsg::COMM_COLL_NODE), nullptr)
      << "no second collective from the host op";

  const auto* add =
      node_named(*conversion, "vectorized_elementwise_kernel", ChakraProtoMsg::COMP_NODE);
  ASSERT_NE(add, nullptr);
  EXPECT_NE(std::find(add->data_deps().begin(), add->data_deps().end(), gemm->id()),
            add->data_deps().end())
      << "stream order on stream 7";

  // CPU time: each instant to the most recently started op.
  const auto* mm = node_named(*conversion, "aten::mm", ChakraProtoMsg::COMP_NODE);
  EXPECT_EQ(mm->duration_micros(), 30u);
  const auto* allreduce = node_named(*conversion, "c10d::allreduce_", ChakraProtoMsg::COMP_NODE);
  EXPECT_EQ(allreduce->duration_micros(), 10u) << "40 us minus the 30 us of record_param_comms";
  const auto* rpc = node_named(*conversion, "record_param_comms", ChakraProtoMsg::COMP_NODE);
  EXPECT_EQ(rpc->duration_micros(), 10u) << "30 us minus the 20 us of the nccl op";

  bool named_orphan = false;
  bool named_profiler_step = false;
  for (const ConversionNote& note : report.notes) {
    for (const std::string& example : note.examples) {
      named_orphan = named_orphan || example.find("orphan_kernel") != std::string::npos;
      named_profiler_step =
          named_profiler_step || example.find("ProfilerStep#3") != std::string::npos;
    }
  }
  EXPECT_TRUE(named_orphan) << "a kernel that matches no op is named";
  EXPECT_TRUE(named_profiler_step) << "a Kineto op the host trace lacks is named";

  TempDir dir;
  ASSERT_TRUE(write_conversion(*conversion, dir.file("linked.et")));
  const chakra::ValidationReport checks = test::validate_file(dir.file("linked.et"));
  EXPECT_TRUE(checks.diagnostics().empty()) << test::findings(checks);
}

// A host trace that says nothing of the collective's size or group (schema 1.0.1 records group
// pointers only): the NCCL kernel's args, as newer Kineto writes them, fill both in.
TEST(Converter, nccl_kernel_args_give_size_and_group_when_the_host_trace_does_not) {
  json doc = ddp_trace();
  doc["nodes"][5]["attrs"] = json::array({attr("rf_id", "uint64", 6), attr("tid", "uint64", 1),
                                          attr("collective_name", "string", "allreduce")});
  doc["nodes"][6]["inputs"]["values"] = json::array();
  doc["nodes"][6]["inputs"]["types"] = json::array();
  json events = ddp_kineto();
  events["traceEvents"][11]["args"]["In msg nelems"] = 2048;
  events["traceEvents"][11]["args"]["dtype"] = "BFloat16";
  events["traceEvents"][11]["args"]["Process Group Name"] = "1";
  Expected<HostTrace> host = host_of(doc);
  ASSERT_TRUE(host) << host.error().message();
  Expected<KinetoTrace> kineto = parse_kineto_trace("kineto.json", events);
  ASSERT_TRUE(kineto) << kineto.error().message();
  Expected<Conversion> conversion = convert_pytorch_trace(*host, &*kineto, {});
  ASSERT_TRUE(conversion) << conversion.error().message();
  const auto* coll = node_named(*conversion, "ncclKernel_AllReduce_RING_LL_Sum_float",
                                ChakraProtoMsg::COMM_COLL_NODE);
  ASSERT_NE(coll, nullptr);
  EXPECT_EQ(find_attr(*coll, "comm_type")->int64_val(), ChakraProtoMsg::ALL_REDUCE);
  EXPECT_EQ(find_attr(*coll, "comm_size")->int64_val(), 2048 * 2);
  EXPECT_EQ(find_attr(*coll, "pg_name")->string_val(), "1");
  ASSERT_EQ(conversion->report.comms.size(), 1u);
  EXPECT_EQ(conversion->report.comms[0].bytes, 4096u);
  EXPECT_EQ(conversion->report.comms[0].pg_name, "1");
}

TEST(Converter, a_kineto_trace_of_another_process_is_refused) {
  Expected<HostTrace> host = host_of(ddp_trace());
  json other = ddp_kineto();
  for (json& event : other["traceEvents"])
    if (event["cat"] == "cpu_op") event["pid"] = 77;
  Expected<KinetoTrace> kineto = parse_kineto_trace("kineto.json", other);
  ASSERT_TRUE(kineto);
  Expected<Conversion> refused = convert_pytorch_trace(*host, &*kineto, {});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message().find("process 42"), std::string::npos);
  EXPECT_NE(refused.error().message().find("process 77"), std::string::npos);
  ConvertOptions options;
  options.allow_pid_mismatch = true;
  EXPECT_TRUE(convert_pytorch_trace(*host, &*kineto, options));
}

TEST(Converter, a_collective_without_a_kernel_comes_from_the_host_op) {
  json events = ddp_kineto();
  events["traceEvents"].erase(11);  // the NCCL kernel
  Expected<HostTrace> host = host_of(ddp_trace());
  Expected<KinetoTrace> kineto = parse_kineto_trace("kineto.json", events);
  ASSERT_TRUE(kineto);
  Expected<Conversion> conversion = convert_pytorch_trace(*host, &*kineto, {});
  ASSERT_TRUE(conversion) << conversion.error().message();
  EXPECT_NE(node_named(*conversion, "nccl:all_reduce", ChakraProtoMsg::COMM_COLL_NODE), nullptr);
  bool noted = false;
  for (const ConversionNote& note : conversion->report.notes)
    noted = noted || note.what.find("no kernel in the Kineto trace") != std::string::npos;
  EXPECT_TRUE(noted);
  test::expect_forward_edges(*conversion);
}

}  // namespace pytorch_converter_test
}  // namespace orrery::convert
