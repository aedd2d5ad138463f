// synth/corpus.h: the traces under a folder, as rank programs to learn from or to compare.
//
// load_corpus() walks a folder (recursively, in path order) for .et and .et.gz files. Files named
// <prefix>.<r>.et form the trace set <prefix> (ranks contiguous from 0, as ASTRA-sim reads them);
// other files are single-rank traces. A set's communicator groups come from <prefix>.json when it
// exists and from its METADATA nodes. Every rank becomes a Dag (synth/dag.h); ranks of one set
// with the same program (data-parallel replicas) are kept once. A file that does not decode or a
// set with a missing rank is an Error; a trace with a cycle of data dependencies is skipped with a
// note, as the model could not generate it anyway.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "synth/dag.h"

namespace orrery::synth {

struct Corpus {
  std::vector<Dag> graphs;          // by set (path order), then rank
  std::vector<uint32_t> graph_set;  // index into `sets` of every graph
  std::vector<std::string> sets;    // a prefix or a file
  std::vector<std::string> notes;   // what was skipped or assumed, one line each
  uint32_t duplicates = 0;          // rank programs equal to an earlier rank of their set
};

// `threads`: sets are read in parallel (0: one per core); the result does not depend on it.
Expected<Corpus> load_corpus(const std::string& folder, size_t threads = 0);

// One trace set (a prefix) or file, as load_corpus reads each.
Expected<Corpus> load_trace_set(const std::string& target);

}  // namespace orrery::synth
