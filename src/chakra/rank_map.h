// chakra/rank_map.h: a trace set stored as one trace per class of alike ranks plus a rank map.
//
// A generated training step has few distinct programs: the ranks of one pipeline stage run the
// same nodes with other peers and communicator groups. `orrery gen ... --classes` writes each
// distinct program once (`<prefix>.class.<k>.et`) and `<prefix>.ranks.json`, which says for every
// rank which class file it runs and how its peers (comm_src, comm_dst) and group names (pg_name)
// are renamed; docs/formats/rank-map.md is the format. Rank r's trace is the class file's with
// those values replaced (chakra::TraceGraph::renamed_from): node for node the file `orrery gen`
// writes for rank r without --classes. TraceSet::load reads either form from a prefix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chakra/trace_graph.h"
#include "core/error.h"

namespace orrery::chakra {

// "<prefix>.ranks.json".
std::string rank_map_path(const std::string& prefix);
// "<prefix>.class.<k>.et".
std::string class_trace_path(const std::string& prefix, uint64_t k);

struct RankMap {
  // The class traces, as written in the map (relative to the map's folder, or absolute).
  std::vector<std::string> classes;
  struct Rank {
    uint32_t trace = 0;           // index into classes
    TraceGraph::Renaming rename;  // sorted by first member, each first member once
  };
  std::vector<Rank> ranks;  // by rank
};

// Reads and checks a rank map: every class index in range, peers integers within [0, ranks),
// group names strings, no value renamed twice. Errors name the file and the rank.
Expected<RankMap> read_rank_map(const std::string& path);
// Writes `map` to `path`, one rank a line. Each rank's lists must be sorted (as read_rank_map
// returns them).
Status write_rank_map(const std::string& path, const RankMap& map);

}  // namespace orrery::chakra
