#include "chakra/trace_set_loader.h"

#include <algorithm>

#include "chakra/trace_file.h"

namespace orrery::chakra {

bool TraceSetLoader::read_raw(const std::string& path, RawTrace& raw) {
  raw.bytes.clear();
  raw.ends.clear();
  Expected<TraceReader> reader = TraceReader::open(path);
  if (!reader) return false;
  raw.metadata = reader->metadata();
  raw.compressed = reader->compressed();
  raw.file_bytes = reader->file_bytes();
  if (!raw.compressed && raw.file_bytes > 0) raw.bytes.reserve(raw.file_bytes);
  while (true) {
    Expected<bool> got = reader->next_record(raw.bytes);
    if (!got) return false;
    if (!*got) break;
    raw.ends.push_back(raw.bytes.size());
  }
  return true;
}

std::optional<TraceGraph> TraceSetLoader::parse(const std::string& path, const RawTrace& raw) {
  TraceGraph graph;
  graph.set_source(path);
  graph.set_metadata(raw.metadata);
  ChakraProtoMsg::Node node;
  // The record count is known: the tables are sized once from the first nodes (load_trace
  // estimates the same from the file size).
  constexpr size_t kSample = 4096;
  for (size_t index = 0; index < raw.ends.size(); ++index) {
    const std::string_view bytes = raw.record(index);
    if (!node.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return std::nullopt;
    graph.add_node(node);
    if (has_unknown_fields(node)) graph.mark_unknown_fields();
    if (graph.size() == kSample) graph.reserve_like_current(raw.ends.size() - kSample);
  }
  graph.finish();
  return graph;
}

std::optional<TraceGraph> TraceSetLoader::derive(const std::string& path, const RawTrace& raw,
                                                 const Template& tmpl, bool& undecodable,
                                                 uint64_t& patched) {
  if (raw.ends.size() != tmpl.raw.ends.size()) return std::nullopt;
  TraceGraph graph = TraceGraph::derived_from(tmpl.graph);
  graph.set_source(path);
  graph.set_metadata(raw.metadata);
  ChakraProtoMsg::Node node;
  for (size_t index = 0; index < raw.ends.size(); ++index) {
    const std::string_view bytes = raw.record(index);
    if (bytes == tmpl.raw.record(index)) continue;
    if (!node.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      undecodable = true;
      return std::nullopt;
    }
    if (!graph.patch_node(static_cast<NodeIndex>(index), node, has_unknown_fields(node))) {
      return std::nullopt;
    }
  }
  patched = graph.patched_count();
  return graph;
}

Expected<TraceGraph> TraceSetLoader::load(const std::string& path) {
  // Each thread reads into buffers of its own, reused from file to file (fresh pages for every
  // file were a tenth of the loading time); a file that becomes a template takes them along.
  thread_local std::unique_ptr<RawTrace> scratch;
  if (!scratch) scratch = std::make_unique<RawTrace>();
  RawTrace* raw = scratch.get();
  if (!read_raw(path, *raw)) return load_trace(path);  // its exact error

  bool undecodable = false;
  if (std::optional<TraceGraph> graph = try_templates(path, *raw, undecodable)) {
    return std::move(*graph);
  }
  if (undecodable) return load_trace(path);

  std::optional<TraceGraph> graph = parse(path, *raw);
  if (!graph) return load_trace(path);
  if (keep_template(*graph, *scratch)) scratch.reset();
  return std::move(*graph);
}

bool TraceSetLoader::keep_template(const TraceGraph& graph, RawTrace& raw) {
  parsed_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mutex_);
  if (templates_.size() >= max_templates_) return false;
  templates_.push_back(std::make_shared<Template>(Template{graph, std::move(raw)}));
  return true;
}

std::optional<TraceGraph> TraceSetLoader::try_templates(const std::string& path,
                                                        const RawTrace& raw, bool& undecodable) {
  std::vector<std::shared_ptr<const Template>> candidates;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    candidates = templates_;
  }
  // Files of one shape come in runs (the ranks of a stage): the template that matched last first.
  const size_t first = std::min(last_hit_.load(std::memory_order_relaxed),
                                candidates.empty() ? size_t{0} : candidates.size() - 1);
  for (size_t tried = 0; tried < candidates.size(); ++tried) {
    const size_t index = (first + tried) % candidates.size();
    uint64_t patched = 0;
    std::optional<TraceGraph> graph = derive(path, raw, *candidates[index], undecodable, patched);
    if (undecodable) return std::nullopt;
    if (graph) {
      last_hit_.store(index, std::memory_order_relaxed);
      derived_.fetch_add(1, std::memory_order_relaxed);
      patched_nodes_.fetch_add(patched, std::memory_order_relaxed);
      return graph;
    }
  }
  return std::nullopt;
}

std::optional<TraceGraph> TraceSetLoader::derive_from_templates(const std::string& source,
                                                                const RawTrace& raw) {
  bool undecodable = false;
  return try_templates(source, raw, undecodable);
}

Expected<TraceGraph> TraceSetLoader::add_template(const std::string& source, RawTrace raw) {
  std::optional<TraceGraph> graph = parse(source, raw);
  if (!graph) {
    return Error::make(ErrorKind::kParse, "{}: a record does not decode as a Chakra Node", source);
  }
  keep_template(*graph, raw);
  return std::move(*graph);
}

TraceSetLoader::Stats TraceSetLoader::stats() const {
  Stats stats;
  stats.parsed = parsed_.load();
  stats.derived = derived_.load();
  stats.patched_nodes = patched_nodes_.load();
  std::lock_guard<std::mutex> lock(mutex_);
  stats.templates = templates_.size();
  return stats;
}

}  // namespace orrery::chakra
