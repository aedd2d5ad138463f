// synth/trace_writer.h: one rank's DAG written as a consistent multi-rank Chakra trace set.
//
// A synthetic sample is one rank's program; write_trace_set() runs it on every rank of an N-rank
// job (SPMD), which is what keeps the ranks consistent:
// - Node ids follow the layers (layer 0 first), the order the simulator issues ready nodes in, and
//   are the same on every rank. Names are the node kind ("comp", "all_reduce"): no operator names.
// - Every rank issues the same collectives in the same order: two collectives on one communicator
//   that no path orders get an edge, the earlier in layer order first (counted as orderings added).
//   A collective on group shape {s, d}
//   runs on the group of its rank among the blocks {b + d i : i < s} that partition the ranks
//   (irregular shapes as contiguous blocks); shapes that do not partition N ranks, or as large as
//   the job, run on the whole job (counted). The groups go to <prefix>.json.
// - Sends go to rank r + 1 and receives come from rank r - 1 (mod N), paired by tag: in layer
//   order, each receive takes the oldest unpaired send before it, so every pairing goes forward in
//   one topological order of the program and the program with "send before its receive" edges
//   stays acyclic, which makes the job deadlock-free (docs/models/synth.md). A receive with no send
//   before it gets a new send of its size as a source, a send left unpaired gets a new receive as a
//   sink (counted as partners added). A pair carries the send's size.
// - Edges become data dependencies.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "synth/dag.h"

namespace orrery::synth {

struct TraceSetOptions {
  uint32_t ranks = 0;     // 0: the Dag's own rank count
  std::string generator;  // recorded in every file's GlobalMetadata ("orrery synth sample ...")
};

struct TraceSetReport {
  std::vector<std::string> rank_files;
  std::string group_file;
  uint32_t ranks = 0;
  uint32_t nodes = 0;                 // per rank, partners included
  uint32_t partners_added = 0;        // sends and receives added to pair every one
  uint32_t collective_orderings = 0;  // edges added between collectives of one communicator
  uint32_t whole_job_fallbacks = 0;   // collectives whose group shape does not fit the ranks
  Dag program;                        // what every rank runs (pair_point_to_point's program)
};

// The program every rank of the set runs: `dag` in layer order with its point-to-point nodes
// paired, partners added and the collectives of each communicator ordered, for a job of `ranks`
// (0: the Dag's own); tags[i] is node i's tag (-1 for other nodes).
struct SpmdProgram {
  Dag dag;
  std::vector<int32_t> tags;
  uint32_t partners_added = 0;
  uint32_t collective_orderings = 0;  // edges added between collectives of one communicator
};
SpmdProgram pair_point_to_point(const Dag& dag, uint32_t ranks = 0);

// The members of the group of `rank` for shape `shape` in a job of `ranks`, or empty when the shape
// does not partition the job (then the collective runs on the whole job).
std::vector<uint32_t> group_members(GroupShape shape, uint32_t rank, uint32_t ranks);

// Writes <prefix>.<r>.et for r < ranks and the groups to <prefix>.json (creating the folder).
Expected<TraceSetReport> write_trace_set(const Dag& dag, const std::string& prefix,
                                         const TraceSetOptions& options);

}  // namespace orrery::synth
