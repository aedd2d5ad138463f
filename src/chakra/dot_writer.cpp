#include "chakra/dot_writer.h"

#include <fmt/ostream.h>

namespace orrery::chakra {

namespace {

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

std::string_view shape_of(int32_t type) {
  switch (type) {
    case ChakraProtoMsg::COMP_NODE:
      return "box";
    case ChakraProtoMsg::COMM_COLL_NODE:
      return "hexagon";
    case ChakraProtoMsg::COMM_SEND_NODE:
      return "invhouse";
    case ChakraProtoMsg::COMM_RECV_NODE:
      return "house";
    case ChakraProtoMsg::MEM_LOAD_NODE:
    case ChakraProtoMsg::MEM_STORE_NODE:
      return "cylinder";
    default:
      return "ellipse";
  }
}

void write_rank(const TraceGraph& graph, size_t rank, const std::string& indent,
                std::ostream& out) {
  auto vertex = [rank](uint64_t id) { return fmt::format("r{}_n{}", rank, id); };
  bool any_missing = false;
  for (NodeIndex node = 0; node < graph.size(); ++node) {
    std::string name(graph.name(node));
    if (name.size() > 48) name = name.substr(0, 45) + "...";
    fmt::print(out, "{}{} [label=\"{}\\n{}\\n{}\", shape={}];\n", indent, vertex(graph.id(node)),
               graph.id(node), escape(name), node_type_name(graph.type(node)),
               shape_of(graph.type(node)));
  }
  for (NodeIndex node = 0; node < graph.size(); ++node) {
    auto edges = [&](std::span<const uint64_t> parents, std::string_view style) {
      for (uint64_t parent : parents) {
        const bool present = graph.find(parent).has_value();
        any_missing = any_missing || !present;
        fmt::print(out, "{}{} -> {} [style={}];\n", indent,
                   present ? vertex(parent) : fmt::format("r{}_missing", rank),
                   vertex(graph.id(node)), style);
      }
    };
    edges(graph.data_deps(node), "solid");
    edges(graph.ctrl_deps(node), "dashed");
  }
  if (any_missing) {
    fmt::print(out, "{}r{}_missing [label=\"not in file\", style=dashed, color=grey];\n", indent,
               rank);
  }
}

}  // namespace

void write_dot(const std::vector<const TraceGraph*>& graphs, std::ostream& out) {
  out << "digraph chakra {\n  rankdir=TB;\n  node [fontsize=10];\n";
  if (graphs.size() == 1) {
    write_rank(*graphs.front(), 0, "  ", out);
  } else {
    for (size_t rank = 0; rank < graphs.size(); ++rank) {
      fmt::print(out, "  subgraph cluster_rank{} {{\n    label=\"rank {}\";\n", rank, rank);
      write_rank(*graphs[rank], rank, "    ", out);
      out << "  }\n";
    }
  }
  out << "}\n";
}

}  // namespace orrery::chakra
