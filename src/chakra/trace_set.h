// chakra/trace_set.h: a multi-rank trace, as files found from what the user typed and as the
// loaded graphs every run of it shares.
//
// Tools are given either one .et file or a `<prefix>` whose ranks are `<prefix>.<r>.et` (or
// `.et.gz`), r = 0 .. n-1, as ASTRA-sim expects. resolve_trace_files() finds them and insists the
// ranks are contiguous from 0, so a missing rank file is named rather than silently skipped.
//
// A TraceSet is loaded once (in parallel, each distinct file parsed and validated once) or built
// in memory by a generator, and is then read-only: any number of scenarios and simulations, on any
// threads, share one through a shared_ptr<const TraceSet>.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "chakra/trace_graph.h"
#include "chakra/validation.h"
#include "core/error.h"

namespace orrery::chakra {

struct TraceFiles {
  // One path per rank, index = rank. A single file given directly is rank 0.
  std::vector<std::string> paths;
  // True when `paths` came from a prefix.
  bool from_prefix = false;
};

// `target` is a file (used as it is) or a prefix. Cost: one directory listing.
Expected<TraceFiles> resolve_trace_files(const std::string& target);

// As resolve_trace_files, for rank files ending in one of `suffixes` (".json"), earlier ones
// preferred when a rank has several.
Expected<TraceFiles> resolve_rank_files(const std::string& target,
                                        const std::vector<std::string>& suffixes);

// The path of rank `rank` under `prefix` ("<prefix>.<rank>.et").
std::string rank_trace_path(const std::string& prefix, uint64_t rank);

struct TraceSetOptions {
  size_t threads = 0;  // for reading and validating files; 0 = one per core
  // Read at most this many ranks (a network smaller than the trace set); UINT32_MAX = all.
  uint32_t max_ranks = UINT32_MAX;
  // Read only rank 0's file; every rank of a run executes it (`orrery run --uniform`).
  bool uniform = false;
};

class TraceSet {
 public:
  // Reads `target` (a file or a prefix, as resolve_trace_files). Files byte-identical to rank 0's
  // share its graph. Errors: a missing rank, a file that does not decode (its path and record).
  // A prefix with a rank map (`<prefix>.ranks.json`, chakra/rank_map.h) and no rank files is
  // read as its class traces, each rank's renamed from its class's: every class file is parsed
  // and validated once. A rank of a clean class is kept as its class and renaming (a few hundred
  // bytes) and its graph built on first use (graph(), rank_graph()), so that a run simulating a
  // representative per class never builds the others. Both forms under one prefix are refused
  // (which one was meant is not known).
  static Expected<std::shared_ptr<const TraceSet>> load(const std::string& target,
                                                        const TraceSetOptions& options = {});
  // A trace set of graphs built in memory (finished TraceGraphs). `rank_graph[r]` is the graph
  // rank r runs (empty: rank r runs graphs[r]). `name` stands for the workload in reports.
  // Each graph is validated here. Asserts that every index is in range.
  static std::shared_ptr<const TraceSet> from_graphs(std::string name,
                                                     std::vector<TraceGraph> graphs,
                                                     std::vector<uint32_t> rank_graph = {},
                                                     bool uniform = false);

  // The prefix or file it was read from, or the name given to from_graphs.
  const std::string& name() const { return name_; }
  // Ranks with a trace (1 for a uniform set, which stands for any number of ranks).
  uint32_t rank_count() const { return static_cast<uint32_t>(rank_graph_.size()); }
  bool uniform() const { return uniform_; }
  // How many ranks were found but not read because of max_ranks.
  uint32_t ranks_left_out() const { return ranks_left_out_; }

  uint32_t graph_count() const { return static_cast<uint32_t>(graphs_.size() + renamed_.size()); }
  uint32_t graph_index(uint32_t rank) const { return rank_graph_[uniform_ ? 0 : rank]; }
  // The graph (built on first use when it is kept renamed; thread-safe).
  const TraceGraph& graph(uint32_t index) const;
  const TraceGraph& rank_graph(uint32_t rank) const { return graph(graph_index(rank)); }
  const ValidationReport& report(uint32_t index) const { return graphs_[base(index)].report; }
  // The METADATA nodes of a graph, in file order (where communicator groups are declared).
  std::span<const NodeIndex> metadata_nodes(uint32_t index) const {
    return graphs_[base(index)].metadata;
  }
  // Where graph `index` came from, for messages (its source path, "<class file> as rank r").
  const std::string& source(uint32_t index) const;

  // ---- Graphs kept renamed (a class trace set's ranks), without building them ----
  // The graph `index` is renamed from: index itself for a graph held whole, else a graph held
  // whole that shares its structure (nodes, ids, types, dependencies, attribute names) and its
  // validation report, and differs only in the values renaming() replaces.
  uint32_t base(uint32_t index) const {
    return index < graphs_.size() ? index : renamed_[index - graphs_.size()]->base;
  }
  // The renaming of a graph kept renamed (TraceGraph::renamed_from of graph(base(index)));
  // nullptr for a graph held whole.
  const TraceGraph::Renaming* renaming(uint32_t index) const {
    return index < graphs_.size() ? nullptr : &renamed_[index - graphs_.size()]->renaming;
  }
  // The file rank `rank`'s trace came from ("" when built in memory).
  const std::string& rank_path(uint32_t rank) const;
  // Bytes held by the graphs built so far.
  size_t memory_bytes() const;

 private:
  struct Entry {
    TraceGraph graph;
    ValidationReport report;
    std::vector<NodeIndex> metadata;
    std::vector<NodeIndex> renamable;  // TraceGraph::renamable_nodes, of a class trace
  };
  // A graph kept as a renaming of a clean class trace (graphs_[base]); graph() builds it once.
  struct Renamed {
    uint32_t base = 0;
    TraceGraph::Renaming renaming;
    std::string source;
    mutable std::once_flag built;
    mutable std::optional<TraceGraph> graph;
    mutable std::atomic<bool> ready{false};  // graph is built (memory_bytes reads it)
  };
  // Validates `graph`. `base`, when given, is an entry whose graph shares this one's structure
  // (TraceGraph::shares_structure): then only what the graph patched is checked again.
  static Entry make_entry(TraceGraph graph, const Entry* base = nullptr);
  // load() of a prefix with a rank map at `map_path`.
  static Expected<std::shared_ptr<const TraceSet>> load_classes(const std::string& target,
                                                                const std::string& map_path,
                                                                const TraceSetOptions& options);

  std::string name_;
  std::vector<Entry> graphs_;  // graph indices 0 .. graphs_.size() - 1
  // Graph indices graphs_.size() and on (pointers: a once_flag does not move).
  std::vector<std::unique_ptr<Renamed>> renamed_;
  std::vector<uint32_t> rank_graph_;  // rank -> graph
  std::vector<std::string> paths_;    // by rank; empty when built in memory
  bool uniform_ = false;
  uint32_t ranks_left_out_ = 0;
};

}  // namespace orrery::chakra
