// network/graph_yaml.h: the graph topology file (docs/formats/topology.md), generators by name,
// and loading either kind of network file.
//
// A graph file lists NPUs, switches and cables, or names a generator with its parameters:
//   name: tiny                       generator: clos2
//   npus: 4                          leaves: 8
//   switches: [leaf0, leaf1, spine]  npus_per_leaf: 16
//   logical: [[Switch, 2], [Switch, 2]]   spines: 8
//   links:                           npu_bandwidth: 200Gbps
//     - [npu0, leaf0, 200Gbps, 5us]  ...
// Bandwidths: a plain number is GB/s (2^30 bytes/s, ASTRA-sim's unit); "200Gbps" or "200Gb/s" are
// 10^9 bits per second; "25GB/s" is GB/s. Latencies: a plain number is ns; "5us", "500ns", "1ms".
// Every error names the file and line (or the generator parameter) and what was expected.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "network/generators.h"
#include "network/graph.h"
#include "network/topology.h"

namespace orrery::net {

// "25" (GB/s), "25GB/s", "200Gbps", "200Gb/s" -> Bandwidth; error text names what was found.
Expected<Bandwidth> parse_bandwidth_text(std::string_view text);
// "500" (ns), "500ns", "5us", "1ms" -> SimTime.
Expected<SimTime> parse_latency_text(std::string_view text);

using GeneratorParams = std::vector<std::pair<std::string, std::string>>;

// The generator names: fat-tree, clos2, clos3, rail, torus, dragonfly.
std::vector<std::string_view> generator_names();
// One line per parameter of `generator` with its default, for --help and errors.
std::string generator_help(std::string_view generator);
// Builds a graph from a generator name and key=value parameters (unknown keys are errors; keys
// node_gpus, nvlink_bandwidth and nvlink_latency put an HGX-like node at every NPU).
Expected<GraphSpec> generate_graph(std::string_view generator, const GeneratorParams& params);

// Parses a graph file (listed or generated form); `file_name` prefixes messages.
Expected<GraphSpec> parse_graph_yaml(std::string_view text, std::string_view file_name);
// Writes `graph` in the listed form (read back by parse_graph_yaml into the same graph).
std::string write_graph_yaml(const Graph& graph);

// A network file of either kind: ASTRA-sim's multi-dimensional YAML (graph == nullptr) or a graph
// file (graph set; `logical` is its logical layout).
struct NetworkDescription {
  Topology logical;
  std::shared_ptr<const Graph> graph;
  // Complete messages about what was read but ignored (keys ASTRA-sim does not read), for the
  // command line to print (and --strict to refuse).
  std::vector<std::string> warnings;
};
// Reads `path` and tells the kinds apart by their keys ('topology' vs 'links'/'generator').
Expected<NetworkDescription> load_network_file(const std::filesystem::path& path);
Expected<NetworkDescription> parse_network_yaml(std::string_view text, std::string_view file_name);

}  // namespace orrery::net
