#include "synth/corpus.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>

#include "chakra/comm_groups.h"
#include "chakra/trace_file.h"
#include "chakra/trace_set.h"
#include "core/parallel.h"

namespace orrery::synth {
namespace {

namespace fs = std::filesystem;

uint64_t graph_hash(const Dag& dag) {
  // FNV-1a over the fields that same_graph compares.
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&](uint64_t value) {
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= (value >> (8 * byte)) & 0xff;
      hash *= 1099511628211ull;
    }
  };
  for (const DagNode& node : dag.nodes) {
    mix(static_cast<uint64_t>(node.kind));
    mix(uint64_t{node.group.size} << 32 | node.group.stride);
    mix(node.flops);
    mix(node.tensor_bytes);
    mix(node.comm_bytes);
    mix(node.duration_us);
  }
  for (const auto& [parent, child] : dag.edges) mix(uint64_t{parent} << 32 | child);
  return hash;
}

struct SetResult {
  std::vector<Dag> graphs;
  std::vector<std::string> notes;
  uint32_t duplicates = 0;
  std::optional<Error> error;
};

// The comm-group file of a set: <prefix>.json beside its rank files.
std::string group_file_of(const std::string& target, bool from_prefix) {
  if (from_prefix) return target + ".json";
  std::string base = target;
  for (const char* suffix : {".et.gz", ".et"}) {
    const std::string ending(suffix);
    if (base.size() > ending.size() && base.ends_with(ending)) {
      base.resize(base.size() - ending.size());
      break;
    }
  }
  return base + ".json";
}

SetResult read_set(const std::string& target) {
  SetResult result;
  Expected<chakra::TraceFiles> files = chakra::resolve_trace_files(target);
  if (!files) {
    result.error = files.error();
    return result;
  }
  const uint32_t ranks = static_cast<uint32_t>(files->paths.size());
  std::vector<chakra::TraceGraph> graphs;
  graphs.reserve(ranks);
  chakra::CommGroups groups(ranks);
  const std::string group_file = group_file_of(target, files->from_prefix);
  std::error_code ignored;
  if (fs::exists(group_file, ignored)) {
    if (Status status = chakra::load_comm_group_file(group_file, groups); !status) {
      result.error = status.error();
      return result;
    }
  }
  for (const std::string& path : files->paths) {
    Expected<chakra::TraceGraph> graph = chakra::load_trace(path);
    if (!graph) {
      result.error = graph.error();
      return result;
    }
    for (chakra::NodeIndex node = 0; node < graph->size(); ++node) {
      if (graph->type(node) != ChakraProtoMsg::METADATA_NODE) continue;
      const std::string where = fmt::format("{}: node {}", path, graph->id(node));
      if (Status status =
              chakra::add_groups_from_metadata(graph->inputs_values(node), where, groups);
          !status) {
        result.notes.push_back(status.error().message() + " (its groups are ignored)");
      }
    }
    graphs.push_back(std::move(*graph));
  }
  std::multimap<uint64_t, size_t> seen;
  uint32_t unknown_groups = 0;
  for (uint32_t rank = 0; rank < ranks; ++rank) {
    Expected<Dag> dag = dag_from_trace(graphs[rank], groups, ranks, &unknown_groups);
    if (!dag) {
      result.notes.push_back(dag.error().message() + " (skipped)");
      continue;
    }
    const uint64_t hash = graph_hash(*dag);
    bool duplicate = false;
    for (auto [it, end] = seen.equal_range(hash); it != end; ++it) {
      if (result.graphs[it->second].same_graph(*dag)) duplicate = true;
    }
    if (duplicate) {
      ++result.duplicates;
      continue;
    }
    seen.emplace(hash, result.graphs.size());
    result.graphs.push_back(std::move(*dag));
  }
  if (unknown_groups > 0) {
    result.notes.push_back(fmt::format(
        "{}: {} collectives name a communicator group that is neither in {} nor in a METADATA "
        "node; taken as the whole job",
        target, unknown_groups, group_file));
  }
  return result;
}

// "<prefix>.<digits>.et" or ".et.gz" -> <prefix>; anything else is a file of its own.
std::optional<std::string> rank_file_prefix(std::string_view path) {
  if (path.ends_with(".gz")) path.remove_suffix(3);
  if (!path.ends_with(".et")) return std::nullopt;
  path.remove_suffix(3);
  const size_t dot = path.rfind('.');
  if (dot == std::string_view::npos || dot + 1 == path.size()) return std::nullopt;
  for (char c : path.substr(dot + 1)) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  return std::string(path.substr(0, dot));
}

Corpus assemble(const std::vector<std::string>& targets, std::vector<SetResult>& results) {
  Corpus corpus;
  for (size_t idx = 0; idx < targets.size(); ++idx) {
    const uint32_t set = static_cast<uint32_t>(corpus.sets.size());
    corpus.sets.push_back(targets[idx]);
    for (Dag& dag : results[idx].graphs) {
      corpus.graphs.push_back(std::move(dag));
      corpus.graph_set.push_back(set);
    }
    corpus.notes.insert(corpus.notes.end(), results[idx].notes.begin(), results[idx].notes.end());
    corpus.duplicates += results[idx].duplicates;
  }
  return corpus;
}

}  // namespace

Expected<Corpus> load_corpus(const std::string& folder, size_t threads) {
  std::error_code error;
  if (!fs::is_directory(folder, error)) {
    return Error::make(ErrorKind::kIo, "{}: not a folder of traces", folder);
  }
  std::vector<std::string> targets;
  std::vector<std::string> paths;
  for (fs::recursive_directory_iterator it(folder, error), end; !error && it != end;
       it.increment(error)) {
    // A broken entry (a symbolic-link loop, say) is skipped as a dangling link is: it is no
    // trace, and the throwing overload would end the program.
    std::error_code ignored;
    if (!it->is_regular_file(ignored)) continue;
    const std::string path = it->path().string();
    if (path.ends_with(".et") || path.ends_with(".et.gz")) paths.push_back(path);
  }
  if (error) return Error::make(ErrorKind::kIo, "{}: {}", folder, error.message());
  std::sort(paths.begin(), paths.end());
  for (const std::string& path : paths) {
    const std::optional<std::string> prefix = rank_file_prefix(path);
    targets.push_back(prefix ? *prefix : path);
  }
  std::sort(targets.begin(), targets.end());
  targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
  if (targets.empty())
    return Error::make(ErrorKind::kIo, "{}: no .et files in this folder", folder);

  std::vector<SetResult> results(targets.size());
  parallel_for(targets.size(), threads, [&](size_t idx) { results[idx] = read_set(targets[idx]); });
  for (const SetResult& result : results) {
    if (result.error) return *result.error;
  }
  return assemble(targets, results);
}

Expected<Corpus> load_trace_set(const std::string& target) {
  std::vector<SetResult> results(1);
  results[0] = read_set(target);
  if (results[0].error) return *results[0].error;
  return assemble({target}, results);
}

}  // namespace orrery::synth
