// gen/rank_program.h: one rank's trace as a generator builds it, and the files it becomes.
//
// A RankProgram is a compact list of compute, collective, send and receive nodes with data and
// control dependencies, built in program order (the order a training framework launches the work).
// Every node belongs to a lane: the main lane (forward, backward, tensor/context/expert
// collectives, pipeline transfers) or the background lane (data-parallel gradient and parameter
// collectives, optimizer steps). Ids are given at emission: main-lane nodes first, in program
// order, then the background lane, so that a simulator which issues ready nodes in ascending id
// order (ASTRA-sim, orrery) lets background work fill the gaps that the main lane leaves (for
// communication only where order_communication() has not fixed one order).
//
// write_rank_files() builds and streams the programs of many ranks in parallel, one rank per thread
// at a time (never all ranks in memory), and write_comm_groups() the communicator-group file that
// `orrery run --comm-group-configuration` and ASTRA-sim read.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "chakra/comm_groups.h"
#include "chakra/trace_set.h"
#include "core/error.h"
#include "et_def.pb.h"
#include "gen/transformer_model.h"

namespace orrery::gen {

// A node of a RankProgram, by position.
using ProgRef = uint32_t;
inline constexpr ProgRef kNoNode = UINT32_MAX;

enum class ProgKind : uint8_t { kCompute, kCollective, kSend, kRecv };
enum class Lane : uint8_t { kMain, kBackground };

class RankProgram {
 public:
  struct Node {
    std::string name;
    ProgKind kind = ProgKind::kCompute;
    Lane lane = Lane::kMain;
    ChakraProtoMsg::CollectiveCommType comm_type = ChakraProtoMsg::ALL_REDUCE;
    uint64_t flops = 0;  // compute: num_ops
    uint64_t bytes = 0;  // compute: tensor_size; communication: comm_size
    uint32_t group = 0;  // collective: pg_name (0 = all ranks)
    int32_t peer = -1;   // send: destination; receive: source
    int32_t tag = 0;     // send, receive
    // compute: duration_micros (0: none, num_ops times it)
    uint64_t duration_us = 0;
    GemmShape gemm;  // compute: gemm_m/n/k/batch attributes when valid
  };

  // Each adder appends one node and returns it. Dependencies equal to kNoNode are skipped, so
  // optional parents can be passed as they are.
  ProgRef compute(std::string name, const OpCost& cost, std::initializer_list<ProgRef> data,
                  Lane lane = Lane::kMain);
  // A compute node timed by its duration (num_ops 0, so a roofline replays the duration).
  ProgRef timed(std::string name, uint64_t duration_us, uint64_t bytes,
                std::initializer_list<ProgRef> data, Lane lane = Lane::kMain);
  ProgRef collective(std::string name, ChakraProtoMsg::CollectiveCommType type, uint64_t bytes,
                     uint32_t group, std::initializer_list<ProgRef> data, Lane lane = Lane::kMain);
  ProgRef send(std::string name, uint32_t dst, int32_t tag, uint64_t bytes,
               std::initializer_list<ProgRef> data);
  ProgRef recv(std::string name, uint32_t src, int32_t tag, uint64_t bytes);
  // More parents for `child` (data or control).
  void depend(ProgRef child, ProgRef parent, bool control = false);
  void depend(ProgRef child, const std::vector<ProgRef>& parents, bool control = false);
  // Chains the nodes that take the rank's communication slot (collectives and sends) in program
  // order: each waits (a control dependency) for the one created before it, as work queued on one
  // NCCL stream runs in issue order. A simulator that runs one collective or send at a time per
  // rank and matches a group's collectives by issue order (ASTRA-sim, orrery) then issues them in
  // this order whatever the timing, so ranks whose programs order a group's collectives alike can
  // neither disagree on a group's k-th collective nor wait on each other in a cycle. Call once,
  // after the last node is added.
  void order_communication();
  // Places communication node `node` in that order just after `anchor` (an earlier node that
  // every parent of `node` is or precedes) instead of where it was created: a prefetch issued when
  // `anchor` is. Nodes placed after one anchor keep their creation order. kNoNode: no change.
  void issue_after(ProgRef node, ProgRef anchor);

  size_t size() const { return nodes_.size(); }
  // num_ops over every compute node.
  uint64_t total_flops() const;
  const Node& node(ProgRef ref) const { return nodes_[ref]; }
  // Number of dependency edges so far (a mark for open_compute).
  size_t edge_count() const { return edges_.size(); }
  // Compute nodes at or after `first` that no compute node at or after `first` depends on, when
  // the nodes from `first` on only gained parents through edges from `first_edge` on: the last
  // work of a pipeline step, which the next step waits for.
  std::vector<ProgRef> open_compute(ProgRef first, size_t first_edge) const;

  // Streams the nodes as Chakra nodes in id order (main lane, then background).
  Status emit(const std::function<Status(const ChakraProtoMsg::Node&)>& out) const;

 private:
  struct Edge {
    ProgRef child;
    ProgRef parent;
    bool control;
  };
  ProgRef add(Node node, std::initializer_list<ProgRef> data);

  std::vector<Node> nodes_;
  std::vector<Edge> edges_;
  std::vector<ProgRef> issue_after_;  // by node: its anchor in order_communication, or kNoNode
};

// Builds the program of one rank (called concurrently for different ranks).
using ProgramBuilder = std::function<Expected<RankProgram>(uint32_t rank)>;

struct RankFileOptions {
  bool gzip = false;  // write <prefix>.<rank>.et.gz
  // write_trace_set: one file per class of alike ranks and a rank map (chakra/rank_map.h)
  bool classes = false;
  size_t threads = 0;     // 0 = one per core
  std::string generator;  // recorded in each file's GlobalMetadata ("orrery gen llm ...")
};

struct RankFiles {
  std::vector<std::string> paths;  // by rank
  uint64_t nodes = 0;              // over all ranks
  uint64_t flops = 0;              // num_ops over all ranks
  uint64_t bytes = 0;              // record bytes written (before gzip compression)
};

// Writes <prefix>.<rank>.et (or .et.gz) for every rank in [0, ranks), creating the prefix's folder.
// Returns the paths and totals, or the first error in rank order.
Expected<RankFiles> write_rank_files(uint32_t ranks, const std::string& prefix,
                                     const RankFileOptions& options, const ProgramBuilder& build);

// Writes a communicator-group file: {"1": [0, 1], "2": [2, 3], ...}, group i + 1 = groups[i].
Status write_comm_groups(const std::string& path, const std::vector<std::vector<uint32_t>>& groups);

// What a generator wrote: a whole trace set.
struct GeneratedTraces {
  std::vector<std::string> rank_files;  // by rank; with classes, by class
  std::string rank_map;                 // with classes: <prefix>.ranks.json
  uint32_t ranks = 0;
  std::string group_file;
  size_t groups = 0;
  uint64_t nodes = 0;  // over all ranks
  uint64_t flops = 0;  // num_ops over all ranks
  uint64_t bytes_written = 0;
};

// A rank whose program is another's (its representative's) with peers and group ids renamed, as
// a generator knows of its own ranks (the ranks of one pipeline stage, say). Each list sorted by
// its first member: the representative's value, then this rank's. A representative is its own.
struct RankRenaming {
  uint32_t representative = 0;
  std::vector<std::pair<int64_t, int64_t>> peers;
  std::vector<std::pair<uint32_t, uint32_t>> groups;
};
using RenamingOf = std::function<RankRenaming(uint32_t rank)>;

// write_rank_files() for every rank, then `groups` to <prefix>.json: what every `orrery gen`
// generator writes. With options.classes, each class of alike ranks is written once
// (<prefix>.class.<k>.et, k in order of the classes' first ranks) with <prefix>.ranks.json: the
// classes are the representatives of `renaming_of` or, without one, ranks whose programs are
// identical. Read back (chakra::TraceSet::load), every rank's graph is the one its own file gives.
Expected<GeneratedTraces> write_trace_set(uint32_t ranks, const std::string& prefix,
                                          const RankFileOptions& options,
                                          const ProgramBuilder& build,
                                          const std::vector<std::vector<uint32_t>>& groups,
                                          const RenamingOf& renaming_of = {});

// A generated trace set held in memory: what write_trace_set would write, node for node, without
// a file. Ranks whose programs are identical share one graph.
struct BuiltTraces {
  std::shared_ptr<const chakra::TraceSet> traces;
  std::shared_ptr<const chakra::CommGroups> groups;  // group i + 1 = groups[i]
  uint64_t nodes = 0;                                // over all ranks
  uint64_t flops = 0;                                // num_ops over all ranks
};

// Builds every rank's program in parallel (options.threads; gzip is ignored) into graphs named
// "<name> rank <r>", and `groups` as communicator groups. The first error in rank order.
// With `renaming_of`, only representatives' programs are built; every other rank's graph is its
// representative's renamed (chakra::TraceGraph::renamed_from), the graph its own program would
// give (tests/gen/llm_classes_test.cpp checks it node for node).
Expected<BuiltTraces> build_trace_set(uint32_t ranks, const std::string& name,
                                      const RankFileOptions& options, const ProgramBuilder& build,
                                      const std::vector<std::vector<uint32_t>>& groups,
                                      const RenamingOf& renaming_of = {});

}  // namespace orrery::gen
