// Named diagnostics for everything simulation relies on, and what lenient mode repairs.
#include "chakra/validation.h"

#include <gtest/gtest.h>

#include "chakra/trace_builder.h"
#include "chakra/trace_file.h"

namespace orrery::chakra {
namespace validation_test {

using test::add_attr;
using test::build_graph;
using test::comp_node;
using test::make_node;

std::vector<std::string> messages(const ValidationReport& report, Check check) {
  std::vector<std::string> out;
  for (const Diagnostic& diagnostic : report.diagnostics()) {
    if (diagnostic.check == check) out.push_back(diagnostic.message);
  }
  return out;
}

TEST(Validation, a_clean_trace_passes_both_modes) {
  const TraceGraph graph =
      build_graph({comp_node(1), test::coll_node(2, ChakraProtoMsg::ALL_REDUCE, 1048576, {1}),
                   comp_node(3, {2})});
  const ValidationReport report = validate_trace(graph);
  EXPECT_TRUE(report.diagnostics().empty()) << report.diagnostics().front().message;
  EXPECT_TRUE(report.passes(ValidationMode::kStrict));
}

TEST(Validation, a_cycle_prints_its_node_ids_and_fails_both_modes) {
  // 1 -> 2 -> 3 -> 1 by data edges, and 4 hangs behind the cycle.
  const TraceGraph graph = build_graph(
      {make_node(1, ChakraProtoMsg::COMP_NODE, {3}), make_node(2, ChakraProtoMsg::COMP_NODE, {1}),
       make_node(3, ChakraProtoMsg::COMP_NODE, {2}), make_node(4, ChakraProtoMsg::COMP_NODE, {3}),
       make_node(5, ChakraProtoMsg::COMP_NODE)});
  const ValidationReport report = validate_trace(graph);
  ASSERT_EQ(report.count(Check::kCycle), 1u);
  const std::string message = messages(report, Check::kCycle).front();
  // The cycle is printed parent to child, starting and ending on the same node.
  const bool one_of_the_rotations = message.find("1 -> 2 -> 3 -> 1") != std::string::npos ||
                                    message.find("2 -> 3 -> 1 -> 2") != std::string::npos ||
                                    message.find("3 -> 1 -> 2 -> 3") != std::string::npos;
  EXPECT_TRUE(one_of_the_rotations) << message;
  EXPECT_NE(message.find("(4 nodes can never run)"), std::string::npos) << message;
  EXPECT_FALSE(report.passes(ValidationMode::kLenient));
}

TEST(Validation, a_control_edge_closing_a_cycle_is_dropped_in_lenient_mode) {
  // 2 consumes 1's data, but 1 names 2 as its control parent (a launch edge drawn backwards).
  const TraceGraph graph = build_graph({make_node(1, ChakraProtoMsg::COMP_NODE, {}, {2}),
                                        make_node(2, ChakraProtoMsg::COMP_NODE, {1}),
                                        make_node(3, ChakraProtoMsg::COMP_NODE, {}, {2})});
  const ValidationReport report = validate_trace(graph);
  EXPECT_EQ(messages(report, Check::kControlCycle),
            (std::vector<std::string>{"node 1: control parent 2 closes a dependency cycle"}));
  EXPECT_EQ(report.count(Check::kCycle), 0u);
  EXPECT_TRUE(report.passes(ValidationMode::kLenient));
  EXPECT_FALSE(report.passes(ValidationMode::kStrict));
}

TEST(Validation, missing_and_self_parents_are_repairable) {
  const TraceGraph graph = build_graph({make_node(1, ChakraProtoMsg::COMP_NODE, {}, {1}),
                                        make_node(2, ChakraProtoMsg::COMP_NODE, {1, 50}, {60}),
                                        make_node(3, ChakraProtoMsg::COMP_NODE, {3})});
  const ValidationReport report = validate_trace(graph);
  EXPECT_EQ(messages(report, Check::kSelfCtrlDependency),
            (std::vector<std::string>{"node 1: lists itself as a control parent"}));
  EXPECT_EQ(messages(report, Check::kMissingDataParent),
            (std::vector<std::string>{"node 2: data parent 50 is not in the file"}));
  EXPECT_EQ(messages(report, Check::kMissingCtrlParent),
            (std::vector<std::string>{"node 2: control parent 60 is not in the file"}));
  EXPECT_EQ(report.count(Check::kSelfDataDependency), 1u);
  EXPECT_EQ(report.count(Check::kCycle), 0u) << "a self-reference is dropped, not a cycle";
  EXPECT_TRUE(report.passes(ValidationMode::kLenient));
  EXPECT_FALSE(report.passes(ValidationMode::kStrict));
}

TEST(Validation, duplicate_ids_are_fatal) {
  const ValidationReport report = validate_trace(build_graph({comp_node(5), comp_node(5)}));
  EXPECT_EQ(messages(report, Check::kDuplicateId),
            (std::vector<std::string>{"node 5: the id is used more than once"}));
  EXPECT_FALSE(report.passes(ValidationMode::kLenient));
}

TEST(Validation, required_attributes_per_node_type) {
  auto send = make_node(1, ChakraProtoMsg::COMM_SEND_NODE);
  add_attr(send, "comm_size").set_int64_val(64);
  auto recv = make_node(2, ChakraProtoMsg::COMM_RECV_NODE);
  add_attr(recv, "comm_src").set_int32_val(0);
  add_attr(recv, "comm_tag").set_int32_val(0);
  auto coll = make_node(3, ChakraProtoMsg::COMM_COLL_NODE);
  add_attr(coll, "comm_size").set_int64_val(64);
  auto load = make_node(4, ChakraProtoMsg::MEM_LOAD_NODE);
  auto barrier = make_node(5, ChakraProtoMsg::COMM_COLL_NODE);
  add_attr(barrier, "comm_type").set_int64_val(ChakraProtoMsg::BARRIER);
  const ValidationReport report = validate_trace(build_graph({send, recv, coll, load, barrier}));
  EXPECT_EQ(messages(report, Check::kMissingAttribute),
            (std::vector<std::string>{"node 1: COMM_SEND_NODE has no 'comm_dst' attribute",
                                      "node 1: COMM_SEND_NODE has no 'comm_tag' attribute",
                                      "node 2: COMM_RECV_NODE has no 'comm_size' attribute",
                                      "node 3: COMM_COLL_NODE has no 'comm_type' attribute",
                                      "node 4: MEM_LOAD_NODE has no 'tensor_size' attribute"}));
  EXPECT_FALSE(report.passes(ValidationMode::kLenient));
}

TEST(Validation, unknown_enum_values_are_named) {
  auto odd_type = make_node(1, ChakraProtoMsg::COMP_NODE);
  odd_type.set_type(static_cast<ChakraProtoMsg::NodeType>(12));
  const auto odd_coll = test::coll_node(2, static_cast<ChakraProtoMsg::CollectiveCommType>(42), 8);
  const ValidationReport report = validate_trace(build_graph({odd_type, odd_coll}));
  EXPECT_EQ(messages(report, Check::kUnknownNodeType),
            (std::vector<std::string>{"node 1: type 12 is not a NodeType (0 to 7)"}));
  EXPECT_EQ(
      messages(report, Check::kUnknownCommType),
      (std::vector<std::string>{"node 2: comm_type 42 is not a CollectiveCommType (0 to 9)"}));
  EXPECT_FALSE(report.passes(ValidationMode::kLenient));
}

TEST(Validation, invalid_node_type_runs_as_a_no_op_in_lenient_mode) {
  const ValidationReport report =
      validate_trace(build_graph({make_node(1, ChakraProtoMsg::INVALID_NODE)}));
  EXPECT_EQ(report.count(Check::kInvalidNodeType), 1u);
  EXPECT_TRUE(report.passes(ValidationMode::kLenient));
  EXPECT_FALSE(report.passes(ValidationMode::kStrict));
}

TEST(Validation, mistyped_simulation_attributes_are_fatal) {
  auto coll = test::coll_node(1, ChakraProtoMsg::ALL_REDUCE, 8);
  add_attr(coll, "pg_name").set_int64_val(3);
  add_attr(coll, "comm_priority").set_string_val("high");
  auto comp = make_node(2, ChakraProtoMsg::COMP_NODE);
  add_attr(comp, "num_ops").set_double_val(1e9);
  add_attr(comp, "tensor_size").set_int64_val(-4);
  const ValidationReport report = validate_trace(build_graph({coll, comp}));
  EXPECT_EQ(messages(report, Check::kBadAttribute),
            (std::vector<std::string>{
                "node 1: attribute 'comm_priority' holds string_val, expected an integer",
                "node 1: attribute 'pg_name' holds int64_val, expected a string",
                "node 2: attribute 'num_ops' holds double_val, expected an integer",
                "node 2: attribute 'tensor_size' is -4, expected a value >= 0"}));
}

TEST(Validation, summary_lines_count_each_kind_and_show_examples) {
  const TraceGraph graph = build_graph({make_node(1, ChakraProtoMsg::COMP_NODE, {}, {7}),
                                        make_node(2, ChakraProtoMsg::COMP_NODE, {}, {8}),
                                        make_node(3, ChakraProtoMsg::COMP_NODE, {}, {9})});
  const auto lines = validate_trace(graph).summary_lines(2);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "warning: 3 control dependencies on nodes not in the file [lenient: dropped]\n"
            "    node 1: control parent 7 is not in the file\n"
            "    node 2: control parent 8 is not in the file\n"
            "    ... and 1 more");
}

TEST(Validation, feeder_trace_has_its_known_quirks) {
  auto graph = load_trace(test::feeder_trace());
  ASSERT_TRUE(graph) << graph.error().message();
  const ValidationReport report = validate_trace(*graph);
  EXPECT_EQ(report.count(Check::kMissingCtrlParent), 1277u);
  EXPECT_EQ(report.count(Check::kSelfCtrlDependency), 383u);
  const auto self = messages(report, Check::kSelfCtrlDependency);
  EXPECT_NE(std::find(self.begin(), self.end(), "node 3511: lists itself as a control parent"),
            self.end());
  EXPECT_EQ(report.count(Check::kMissingDataParent), 0u);
  EXPECT_EQ(report.count(Check::kCycle), 0u);
  EXPECT_GT(report.count(Check::kControlCycle), 0u);
  EXPECT_EQ(report.count(Check::kCpuCollectiveWithoutType), 14u);
  EXPECT_EQ(report.fatal_count(), 0u);
  EXPECT_TRUE(report.passes(ValidationMode::kLenient));
  EXPECT_FALSE(report.passes(ValidationMode::kStrict));
}

}  // namespace validation_test
}  // namespace orrery::chakra
