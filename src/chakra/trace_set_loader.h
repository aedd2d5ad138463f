// chakra/trace_set_loader.h: the rank files of one trace set, parsed once per distinct shape.
//
// The ranks of a training step run few distinct programs: the files of one pipeline stage differ
// only in peers (comm_src, comm_dst) and communicator group names (pg_name). The loader keeps the
// first file of each shape as a template (its graph and its raw records). A later file with as
// many records is compared with a template record by record, byte for byte: equal records are
// not decoded at all, and a record that differs is decoded and kept as a patch when it is the
// template's node up to scalar attribute values (TraceGraph::patch_node). Such a file's graph
// shares the template's tables (TraceGraph::shares_structure) and holds only its patched values.
// A file that matches no template is parsed whole and becomes one (up to `max_templates`).
//
// The graph load() returns is the one load_trace(path) returns, node for node and attribute for
// attribute, and so are the errors (a file that fails to read or decode is reloaded by
// load_trace for its exact message); only time and memory differ. Thread-safe: rank files may be
// loaded in parallel, in any order.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "chakra/trace_graph.h"
#include "core/error.h"

namespace orrery::chakra {

class TraceSetLoader {
 public:
  explicit TraceSetLoader(size_t max_templates = 64) : max_templates_(max_templates) {}
  TraceSetLoader(const TraceSetLoader&) = delete;
  TraceSetLoader& operator=(const TraceSetLoader&) = delete;

  Expected<TraceGraph> load(const std::string& path);

  // A trace's records held in memory (a generator's): the GlobalMetadata and every node record,
  // serialized back to back.
  struct RawTrace {
    ChakraProtoMsg::GlobalMetadata metadata;
    std::string bytes;           // every node record, back to back
    std::vector<uint64_t> ends;  // record k is bytes [ends[k-1], ends[k])
    bool compressed = false;
    uint64_t file_bytes = 0;
    std::string_view record(size_t index) const {
      const uint64_t begin = index == 0 ? 0 : ends[index - 1];
      return std::string_view(bytes).substr(begin, ends[index] - begin);
    }
  };
  // The graph of `raw` built from a template (as load() builds a file's), or nullopt when no
  // template fits; adds no template, so that the caller decides which trace becomes one (in rank
  // order, for a result that does not depend on thread timing). `source` names the graph.
  std::optional<TraceGraph> derive_from_templates(const std::string& source, const RawTrace& raw);
  // Parses `raw` whole and keeps it as a template (up to max_templates). Error: a record that does
  // not decode (named by index).
  Expected<TraceGraph> add_template(const std::string& source, RawTrace raw);

  struct Stats {
    uint64_t parsed = 0;   // files parsed whole
    uint64_t derived = 0;  // files built from a template
    uint64_t patched_nodes = 0;
    uint64_t templates = 0;
  };
  Stats stats() const;

 private:
  struct Template {
    TraceGraph graph;
    RawTrace raw;
  };

  // Reads `path` into `raw` (emptied first); false when the file fails to read (load_trace reports
  // it).
  static bool read_raw(const std::string& path, RawTrace& raw);
  // The graph of `raw` built from `tmpl`, or nullopt when its shape differs (or a record does not
  // decode: `undecodable` is set then).
  static std::optional<TraceGraph> derive(const std::string& path, const RawTrace& raw,
                                          const Template& tmpl, bool& undecodable,
                                          uint64_t& patched);
  // The graph of `raw` parsed whole; nullopt when a record does not decode.
  static std::optional<TraceGraph> parse(const std::string& path, const RawTrace& raw);
  // Counts a trace parsed whole and keeps it as a template (taking `raw`) unless there are
  // max_templates already; true when kept.
  bool keep_template(const TraceGraph& graph, RawTrace& raw);
  // Tries every template, the one that matched last first. `undecodable` as for derive.
  std::optional<TraceGraph> try_templates(const std::string& path, const RawTrace& raw,
                                          bool& undecodable);

  size_t max_templates_;
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<const Template>> templates_;
  std::atomic<size_t> last_hit_{0};
  std::atomic<uint64_t> parsed_{0};
  std::atomic<uint64_t> derived_{0};
  std::atomic<uint64_t> patched_nodes_{0};
};

}  // namespace orrery::chakra
