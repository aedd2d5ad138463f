// tests/replay/replay_test_support.h: inputs of the replay tests: the traces recorded with Debian's
// torch 1.13 (tests/data/pytorch/recorded, see its NOTICE) and small traces written in the test.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chakra/trace_builder.h"
#include "convert/host_trace.h"
#include "convert/json_file.h"
#include "replay/plan.h"

namespace orrery::test {

inline std::string recorded(const std::string& model, const std::string& file) {
  return test_data("pytorch/recorded/" + model + "/" + file);
}
inline std::string recorded_et(const std::string& model) {
  return recorded(model, model + "_et.json.gz");
}
inline std::string recorded_profile(const std::string& model) {
  return recorded(model, model + "_trace.json.gz");
}

inline Expected<convert::HostTrace> host_from_text(const std::string& text) {
  return convert::parse_host_text("t.json", text);
}

// A schema 1.0.1 trace of one iteration: `nodes` are the JSON objects of its operators (each with
// id, name, parent, op_schema, inputs, input_shapes, input_types, ...), under ProfilerStep#1.
inline std::string flat_trace(const std::string& nodes) {
  return R"({"schema": "1.0.1", "pid": 1, "nodes": [
    {"id": 1, "name": "[pytorch|profiler|execution_graph|process]", "parent": 1},
    {"id": 2, "name": "[pytorch|profiler|execution_graph|thread]", "parent": 1, "tid": 1},
    {"id": 3, "name": "ProfilerStep#1", "parent": 2, "tid": 1, "op_schema": ""})" +
         std::string(nodes.empty() ? "" : ",\n") + nodes + "]}";
}

inline std::string mpirun_path() {
  for (const char* candidate : {"/usr/bin/mpirun", "/usr/local/bin/mpirun"}) {
    if (std::filesystem::exists(candidate)) return candidate;
  }
  return "";
}

// Under ASan, Open MPI's own allocations (its reduction ops, components it unloads at exit, so
// their frames do not symbolize) are reported as leaks when a rank process exits: the processes a
// test starts (not the test) run without leak detection. mpirun passes the variable on.
inline void ranks_without_leak_detection() {
  if (const char* asan = std::getenv("ASAN_OPTIONS"); asan != nullptr) {
    if (std::string(asan).find("detect_leaks=0") == std::string::npos)
      setenv("ASAN_OPTIONS", (std::string(asan) + ":detect_leaks=0").c_str(), 1);
  }
}

// The two-rank DDP trace replayed by two processes (`job` is the --json object): every operator
// replayed on both ranks, and the two all-reduces run for real with the recorded bucket sizes.
inline void expect_ddp_replayed(const nlohmann::json& job, const std::string& communicator) {
  EXPECT_EQ(job.at("world"), 2);
  EXPECT_NE(job.at("communicator").get<std::string>().find(communicator), std::string::npos)
      << job.at("communicator");
  ASSERT_EQ(job.at("ranks").size(), 2u);
  for (const nlohmann::json& rank : job.at("ranks")) {
    EXPECT_EQ(rank.at("coverage_by_count"), 1.0) << rank.dump();
    EXPECT_EQ(rank.at("coverage_by_time"), 1.0);
    EXPECT_EQ(rank.at("communication_ops"), 2);
    std::vector<uint64_t> bytes;
    for (const nlohmann::json& op : rank.at("operators")) {
      if (op.at("kind") != "communication") continue;
      EXPECT_TRUE(op.at("replayed").get<bool>());
      EXPECT_GT(op.at("measured_us").get<double>(), 0.0);
      bytes.push_back(op.at("bytes").get<uint64_t>());
    }
    // DDP's two gradient buckets, as recorded (floats).
    EXPECT_EQ(bytes, (std::vector<uint64_t>{267'786 * 4, 131'584 * 4}));
  }
}

}  // namespace orrery::test
