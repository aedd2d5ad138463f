// fuzz_network: network files, either kind (network/graph_yaml.h): ASTRA-sim's multi-dimensional
// YAML and graph topology files (listed links or a generator with parameters), then what a run
// builds from them: the logical topology, the graph and routes between a few NPU pairs.
#include "fuzz/fuzz_support.h"
#include "network/graph.h"
#include "network/graph_yaml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orrery;
  Expected<net::NetworkDescription> network =
      net::parse_network_yaml(fuzz::as_text(data, size), "net.yml");
  if (!network) return 0;
  const net::Topology& topology = network->logical;
  const uint32_t ranks = topology.rank_count();
  net::Path path;
  for (uint32_t src : {0u, ranks / 2, ranks - 1}) {
    for (uint32_t dst : {0u, ranks / 3, ranks - 1}) {
      if (src == dst) continue;
      if (network->graph) {
        path.clear();
        network->graph->route(src, dst, 0, path);
      } else {
        (void)topology.lowest_differing_dimension(src, dst);
      }
    }
  }
  return 0;
}
