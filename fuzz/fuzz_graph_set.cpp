// fuzz_graph_set: graph sets (synth/graphs.h, `orrery synth train --graphs`), read leniently and
// strictly; every graph read is layered and summarised, and the set written reads back the same
// (a set that does not is a finding: abort).
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "fuzz/fuzz_support.h"
#include "synth/graphs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orrery::synth;
  const nlohmann::json json =
      nlohmann::json::parse(orrery::fuzz::as_text(data, size), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return 0;
  (void)graph_set_from_json(json, "graphs.json");
  GraphSetIssues issues;
  orrery::Expected<GraphSet> set = graph_set_from_json(json, "graphs.json", &issues);
  if (!set) return 0;
  for (const LabelledGraph& graph : set->graphs) {
    (void)labelled_graph_statistics(encode_graph(graph), set->categories);
  }
  orrery::Expected<GraphSet> back = graph_set_from_json(graph_set_to_json(*set), "written");
  if (!back || back->graphs.size() != set->graphs.size()) std::abort();
  for (size_t idx = 0; idx < set->graphs.size(); ++idx) {
    if (back->graphs[idx].x != set->graphs[idx].x ||
        back->graphs[idx].edges != set->graphs[idx].edges) {
      std::abort();
    }
  }
  return 0;
}
