// tests/replay/replay_test_support.h: inputs of the replay tests: the traces recorded with Debian's
// torch 1.13 (tests/data/pytorch/recorded, see its NOTICE) and small traces written in the test.
#pragma once

#include <gtest/gtest.h>

#include <string>

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

}  // namespace orrery::test
