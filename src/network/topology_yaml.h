// network/topology_yaml.h: reads ASTRA-sim's analytical network file (YAML) into a Topology.
//
// The file is accepted as ASTRA-sim writes it:
//   topology: [ Ring, FullyConnected, Switch ]   # one entry per dimension, innermost first
//   npus_count: [ 2, 8, 4 ]                      # ranks per dimension (>= 2); ranks = product
//   bandwidth: [ 200.0, 100.0, 50.0 ]            # GB/s per link, 1 GB = 2^30 bytes
//   latency: [ 100.0, 500.0, 1000.0 ]            # ns per hop
// Other keys are ignored, as ASTRA-sim does, each with a warning (`warnings`, when given).
// Bandwidths are 0.001 to 10^9 GB/s and latencies at most 10^9 ns (core/checked.h). Numbers are
// read as exact decimals: bandwidth to 10^-9 GB/s and latency to the picosecond (936.25 ns is
// 936,250 ps); finer digits are rounded to the nearest (halves up). LIBRA's network files
// (Topology/NpusCount/CostDimension) are a different format and are rejected with a message that
// says so.
//
// Every error names the file, the line and the key: "net.yml:3: key 'bandwidth': expected 3 values
// (one per dimension), found 2". Lines count from 1.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "network/topology.h"

namespace orrery::net {

// Reads and parses the file at `path`; the path as given prefixes every message. Build phase.
Expected<Topology> load_topology_file(const std::filesystem::path& path,
                                      std::vector<std::string>* warnings = nullptr);

// Parses YAML text; `file_name` prefixes every message. Build phase; O(text size).
// Keys other than the four are listed in `warnings` (file:line: ...) when it is given.
Expected<Topology> parse_topology_yaml(std::string_view text, std::string_view file_name,
                                       std::vector<std::string>* warnings = nullptr);

}  // namespace orrery::net
