// tests/chakra/trace_builder.h: small traces written in a line or two, for tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "chakra/trace_file.h"
#include "chakra/trace_graph.h"

namespace orrery::test {

using ChakraProtoMsg::Node;

inline Node make_node(uint64_t id, ChakraProtoMsg::NodeType type,
                      std::initializer_list<uint64_t> data_deps = {},
                      std::initializer_list<uint64_t> ctrl_deps = {}) {
  Node node;
  node.set_id(id);
  node.set_name("node_" + std::to_string(id));
  node.set_type(type);
  for (uint64_t parent : data_deps) node.add_data_deps(parent);
  for (uint64_t parent : ctrl_deps) node.add_ctrl_deps(parent);
  return node;
}

inline ChakraProtoMsg::AttributeProto& add_attr(Node& node, const std::string& name) {
  ChakraProtoMsg::AttributeProto* attribute = node.add_attr();
  attribute->set_name(name);
  return *attribute;
}

inline Node comp_node(uint64_t id, std::initializer_list<uint64_t> data_deps = {}) {
  Node node = make_node(id, ChakraProtoMsg::COMP_NODE, data_deps);
  node.set_duration_micros(10);
  return node;
}

inline Node coll_node(uint64_t id, ChakraProtoMsg::CollectiveCommType type, int64_t bytes,
                      std::initializer_list<uint64_t> data_deps = {}) {
  Node node = make_node(id, ChakraProtoMsg::COMM_COLL_NODE, data_deps);
  add_attr(node, "is_cpu_op").set_bool_val(false);
  add_attr(node, "comm_type").set_int64_val(type);
  add_attr(node, "comm_size").set_int64_val(bytes);
  return node;
}

inline chakra::TraceGraph build_graph(const std::vector<Node>& nodes) {
  chakra::TraceGraph graph;
  ChakraProtoMsg::GlobalMetadata metadata;
  metadata.set_version("0.0.4");
  graph.set_metadata(metadata);
  for (const Node& node : nodes) graph.add_node(node);
  graph.finish();
  return graph;
}

// A fresh directory for one test, removed when the object goes.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            (std::string("orrery-") + info->test_suite_name() + "-" + info->name() + "-" +
             std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline void write_trace(const std::string& path, const std::vector<Node>& nodes,
                        const std::string& version = "0.0.4") {
  ChakraProtoMsg::GlobalMetadata metadata;
  metadata.set_version(version);
  auto writer = chakra::TraceWriter::create(path, metadata);
  ASSERT_TRUE(writer) << writer.error().message();
  for (const Node& node : nodes) ASSERT_TRUE(writer->write(node));
  ASSERT_TRUE(writer->close());
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline std::string test_data(const std::string& relative) {
  return std::string(ORRERY_TEST_DATA_DIR) + "/" + relative;
}

inline std::string feeder_trace() {
  return test_data("mlcommons-chakra/feeder_tests_chakra.0.et.gz");
}

inline bool shared_data_present() { return std::filesystem::is_directory(ORRERY_SHARED_DATA_DIR); }

inline std::string shared_data(const std::string& relative) {
  return std::string(ORRERY_SHARED_DATA_DIR) + "/" + relative;
}

// An input of PARAM's et_replay tests (../shared/data/facebookresearch+param).
inline std::string param_input(const std::string& name) {
  return shared_data("facebookresearch+param/et_replay/tests/inputs/" + name);
}

// Unpacks a .tar.gz into `dir`; false when tar fails.
inline bool untar(const std::string& archive, const std::string& dir) {
  std::filesystem::create_directories(dir);
  const std::string command = "tar -xzf '" + archive + "' -C '" + dir + "' 2>/dev/null";
  return std::system(command.c_str()) == 0;
}

// The public 8-rank DLRM set, host traces and Kineto traces, unpacked into `dir`.
inline bool untar_dlrm_set(const std::string& dir) {
  return untar(param_input("dlrm_pytorch_et.tar.gz"), dir) &&
         untar(param_input("dlrm_kineto.tar.gz"), dir);
}

}  // namespace orrery::test
