// The compact node table: ids, dependencies and typed attribute access by name.
#include "chakra/trace_graph.h"

#include <gtest/gtest.h>

#include "chakra/trace_builder.h"

namespace orrery::chakra {
namespace trace_graph_test {

using test::add_attr;
using test::build_graph;
using test::make_node;

TEST(TraceGraph, integer_getters_accept_every_integer_member) {
  auto node = make_node(7, ChakraProtoMsg::COMM_COLL_NODE);
  add_attr(node, "a_bool").set_bool_val(true);
  add_attr(node, "a_int32").set_int32_val(-5);
  add_attr(node, "a_int64").set_int64_val(1ll << 40);
  add_attr(node, "a_uint32").set_uint32_val(4000000000u);
  add_attr(node, "a_uint64").set_uint64_val(1048576);
  add_attr(node, "a_sint64").set_sint64_val(-9);
  add_attr(node, "a_fixed64").set_fixed64_val(12);
  add_attr(node, "a_sfixed32").set_sfixed32_val(-3);
  const TraceGraph graph = build_graph({node});
  EXPECT_EQ(*graph.get_int(0, "a_bool"), 1);
  EXPECT_EQ(*graph.get_int(0, "a_int32"), -5);
  EXPECT_EQ(*graph.get_int(0, "a_int64"), 1ll << 40);
  EXPECT_EQ(*graph.get_int(0, "a_uint32"), 4000000000ll);
  EXPECT_EQ(*graph.get_uint(0, "a_uint64"), 1048576u);
  EXPECT_EQ(*graph.get_int(0, "a_sint64"), -9);
  EXPECT_EQ(*graph.get_int(0, "a_fixed64"), 12);
  EXPECT_EQ(*graph.get_int(0, "a_sfixed32"), -3);
  EXPECT_TRUE(*graph.get_bool_or(0, "a_bool", false));
  EXPECT_TRUE(*graph.get_bool_or(0, "a_int64", false));
  EXPECT_FALSE(graph.get_int(0, "absent")->has_value());
  EXPECT_EQ(*graph.get_int_or(0, "absent", 42), 42);
}

TEST(TraceGraph, is_cpu_op_reads_the_same_as_bool_or_int32) {
  auto as_bool = make_node(1, ChakraProtoMsg::COMP_NODE);
  add_attr(as_bool, "is_cpu_op").set_bool_val(true);
  auto as_int32 = make_node(2, ChakraProtoMsg::COMP_NODE);
  add_attr(as_int32, "is_cpu_op").set_int32_val(1);
  auto as_zero = make_node(3, ChakraProtoMsg::COMP_NODE);
  add_attr(as_zero, "is_cpu_op").set_int32_val(0);
  const TraceGraph graph = build_graph({as_bool, as_int32, as_zero});
  EXPECT_TRUE(*graph.get_bool_or(0, "is_cpu_op", false));
  EXPECT_TRUE(*graph.get_bool_or(1, "is_cpu_op", false));
  EXPECT_FALSE(*graph.get_bool_or(2, "is_cpu_op", true));
}

TEST(TraceGraph, a_float_where_an_integer_is_needed_names_node_and_attribute) {
  auto node = make_node(3511, ChakraProtoMsg::COMM_COLL_NODE);
  add_attr(node, "comm_size").set_float_val(1.5f);
  add_attr(node, "pg_name").set_string_val("3");
  const TraceGraph graph = build_graph({node});
  auto size = graph.get_int(0, "comm_size");
  ASSERT_FALSE(size);
  EXPECT_EQ(size.error().message(),
            "node 3511: attribute 'comm_size' holds float_val, expected an integer");
  auto as_text = graph.get_int(0, "pg_name");
  ASSERT_FALSE(as_text);
  EXPECT_EQ(as_text.error().message(),
            "node 3511: attribute 'pg_name' holds string_val, expected an integer");
  EXPECT_EQ(**graph.get_string(0, "pg_name"), "3");
  EXPECT_DOUBLE_EQ(**graph.get_double(0, "comm_size"), 1.5);
}

TEST(TraceGraph, negative_sizes_and_oversized_unsigned_values_are_errors) {
  auto node = make_node(9, ChakraProtoMsg::COMM_COLL_NODE);
  add_attr(node, "comm_size").set_int64_val(-1);
  add_attr(node, "huge").set_uint64_val(UINT64_MAX);
  const TraceGraph graph = build_graph({node});
  auto size = graph.get_uint(0, "comm_size");
  ASSERT_FALSE(size);
  EXPECT_EQ(size.error().message(), "node 9: attribute 'comm_size' is -1, expected a value >= 0");
  EXPECT_FALSE(graph.get_int(0, "huge"));
  EXPECT_EQ(**graph.get_uint(0, "huge"), UINT64_MAX);
}

TEST(TraceGraph, lists_come_back_in_order) {
  auto node = make_node(1, ChakraProtoMsg::COMP_NODE);
  auto& dims = add_attr(node, "involved_dim");
  for (bool value : {true, false, true}) dims.mutable_bool_list()->add_values(value);
  auto& names = add_attr(node, "inputs");
  for (const char* value : {"x", "4096.0", "w", "65536"})
    names.mutable_string_list()->add_values(value);
  const TraceGraph graph = build_graph({node});
  EXPECT_EQ(**graph.get_bool_list(0, "involved_dim"), (std::vector<bool>{true, false, true}));
  const auto inputs = **graph.get_string_list(0, "inputs");
  ASSERT_EQ(inputs.size(), 4u);
  EXPECT_EQ(inputs[1], "4096.0");
  EXPECT_FALSE(graph.get_bool_list(0, "inputs"));
}

TEST(TraceGraph, finds_nodes_by_id_whatever_the_file_order) {
  const TraceGraph sorted =
      build_graph({test::comp_node(2), test::comp_node(5), test::comp_node(9)});
  EXPECT_EQ(sorted.find(5), NodeIndex{1});
  EXPECT_FALSE(sorted.find(4));
  const TraceGraph shuffled =
      build_graph({test::comp_node(9), test::comp_node(2), test::comp_node(5)});
  EXPECT_EQ(shuffled.find(9), NodeIndex{0});
  EXPECT_EQ(shuffled.find(2), NodeIndex{1});
  EXPECT_FALSE(shuffled.find(1000));
  EXPECT_TRUE(shuffled.duplicate_ids().empty());
}

TEST(TraceGraph, duplicate_ids_are_listed_once_each) {
  const TraceGraph graph = build_graph({test::comp_node(4), test::comp_node(1), test::comp_node(4),
                                        test::comp_node(4), test::comp_node(1)});
  EXPECT_EQ(graph.duplicate_ids(), (std::vector<uint64_t>{1, 4}));
  EXPECT_EQ(graph.find(4), NodeIndex{0});  // the first in file order
}

TEST(TraceGraph, dependencies_are_kept_as_written_data_and_control_apart) {
  const TraceGraph graph =
      build_graph({test::make_node(1, ChakraProtoMsg::COMP_NODE),
                   test::make_node(2, ChakraProtoMsg::COMP_NODE, {1, 77}, {2, 1})});
  EXPECT_EQ(std::vector<uint64_t>(graph.data_deps(1).begin(), graph.data_deps(1).end()),
            (std::vector<uint64_t>{1, 77}));
  EXPECT_EQ(std::vector<uint64_t>(graph.ctrl_deps(1).begin(), graph.ctrl_deps(1).end()),
            (std::vector<uint64_t>{2, 1}));
  EXPECT_TRUE(graph.data_deps(0).empty());
}

TEST(NodeTypeNames, unknown_values_are_named_with_their_number) {
  EXPECT_EQ(node_type_name(ChakraProtoMsg::COMM_COLL_NODE), "COMM_COLL_NODE");
  EXPECT_EQ(node_type_name(12), "unknown node type 12");
  EXPECT_EQ(comm_type_name(ChakraProtoMsg::REDUCE_SCATTER), "REDUCE_SCATTER");
  EXPECT_EQ(comm_type_name(42), "unknown collective 42");
}

}  // namespace trace_graph_test
}  // namespace orrery::chakra
