// tests/convert/convert_test_support.h: inputs for the converter tests. Small real traces live in
// tests/data/pytorch (see its NOTICE); the large ones are read from ../shared/data when present,
// and tarballs are unpacked with `tar` into a temporary folder.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>

#include "chakra/trace_builder.h"
#include "chakra/trace_file.h"
#include "chakra/validation.h"
#include "convert/pytorch_converter.h"

namespace orrery::test {

inline std::string pytorch_data(const std::string& name) { return test_data("pytorch/" + name); }

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Loads a written trace and validates it; the report of the checks.
inline chakra::ValidationReport validate_file(const std::string& path, size_t* nodes = nullptr) {
  Expected<chakra::TraceGraph> graph = chakra::load_trace(path);
  EXPECT_TRUE(graph) << (graph ? "" : graph.error().message());
  if (!graph) return {};
  if (nodes != nullptr) *nodes = graph->size();
  return chakra::validate_trace(*graph);
}

// Every diagnostic, one a line, for failure messages.
inline std::string findings(const chakra::ValidationReport& report) {
  std::string text;
  for (const auto& line : report.summary_lines(3)) text += line + "\n";
  return text;
}

// The converted nodes by type name.
inline std::map<std::string, size_t> count_types(const convert::Conversion& conversion) {
  std::map<std::string, size_t> counts;
  for (const auto& node : conversion.nodes) ++counts[ChakraProtoMsg::NodeType_Name(node.type())];
  return counts;
}

inline const ChakraProtoMsg::AttributeProto* find_attr(const ChakraProtoMsg::Node& node,
                                                       const std::string& name) {
  for (const auto& attr : node.attr())
    if (attr.name() == name) return &attr;
  return nullptr;
}

// Every edge goes from a lower id to a higher one (a sufficient condition for no cycle), and every
// parent is in the trace.
// Every edge goes forward in id (ids are a topological order), except a host op's wait for a
// communication, whose device node is numbered after every host op.
inline void expect_forward_edges(const convert::Conversion& conversion) {
  std::map<uint64_t, const ChakraProtoMsg::Node*> by_id;
  for (const auto& node : conversion.nodes) by_id[node.id()] = &node;
  const auto is_comm = [](const ChakraProtoMsg::Node& node) {
    return node.type() == ChakraProtoMsg::COMM_COLL_NODE ||
           node.type() == ChakraProtoMsg::COMM_SEND_NODE ||
           node.type() == ChakraProtoMsg::COMM_RECV_NODE;
  };
  for (const auto& node : conversion.nodes) {
    EXPECT_TRUE(node.ctrl_deps().empty()) << "node " << node.id();
    for (const uint64_t parent : node.data_deps()) {
      const auto found = by_id.find(parent);
      ASSERT_NE(found, by_id.end()) << "node " << node.id() << " parent " << parent;
      if (parent < node.id()) continue;
      EXPECT_TRUE(is_comm(*found->second) && find_attr(node, "host_op_id") == nullptr)
          << "node " << node.id() << " after node " << parent;
    }
  }
}

}  // namespace orrery::test
