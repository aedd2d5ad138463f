#include "chakra/trace_set.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <filesystem>
#include <map>
#include <optional>

#include "chakra/rank_map.h"
#include "chakra/trace_file.h"
#include "chakra/trace_set_loader.h"
#include "core/parallel.h"
#include "core/same_file.h"

namespace orrery::chakra {

namespace fs = std::filesystem;

std::string rank_trace_path(const std::string& prefix, uint64_t rank) {
  return fmt::format("{}.{}.et", prefix, rank);
}

Expected<TraceFiles> resolve_trace_files(const std::string& target) {
  return resolve_rank_files(target, {".et", ".et.gz"});
}

Expected<TraceFiles> resolve_rank_files(const std::string& target,
                                        const std::vector<std::string>& suffixes) {
  std::error_code error;
  if (fs::is_regular_file(target, error)) return TraceFiles{{target}, false};
  if (fs::is_directory(target, error)) {
    return Error::make(ErrorKind::kIo,
                       "{}: is a directory; give a .et file or a prefix such as {}/workload "
                       "(for {}/workload.0.et, ...)",
                       target, target, target);
  }

  const fs::path prefix(target);
  const fs::path dir = prefix.has_parent_path() ? prefix.parent_path() : fs::path(".");
  const std::string stem = prefix.filename().string() + ".";
  // rank -> (preference, path): the order is fixed by `suffixes`, not by the directory listing.
  std::map<uint64_t, std::pair<size_t, std::string>> ranks;
  if (fs::is_directory(dir, error)) {
    // increment(error): the range-for's ++ would throw if the listing failed midway.
    for (fs::directory_iterator it(dir, error), last; !error && it != last; it.increment(error)) {
      const fs::directory_entry& entry = *it;
      const std::string name = entry.path().filename().string();
      if (name.size() <= stem.size() || name.compare(0, stem.size(), stem) != 0) continue;
      std::string_view rest = std::string_view(name).substr(stem.size());
      uint64_t rank = 0;
      auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), rank);
      if (ec != std::errc() || end == rest.data()) continue;
      const std::string_view suffix(end, static_cast<size_t>(rest.data() + rest.size() - end));
      const auto match = std::find(suffixes.begin(), suffixes.end(), suffix);
      if (match == suffixes.end()) continue;
      const auto preference = static_cast<size_t>(match - suffixes.begin());
      auto [slot, inserted] =
          ranks.emplace(rank, std::make_pair(preference, entry.path().string()));
      if (!inserted && preference < slot->second.first) {
        slot->second = {preference, entry.path().string()};
      }
    }
  }
  if (ranks.empty()) {
    if (fs::is_regular_file(rank_map_path(target), error)) {
      return Error::make(ErrorKind::kIo,
                         "{}: the prefix holds a rank map ({}) and no rank files; orrery run and "
                         "the Python module read it, other tools take one class file at a time "
                         "({})",
                         target, rank_map_path(target), class_trace_path(target, 0));
    }
    return Error::make(ErrorKind::kIo,
                       "{}: no such file, and no rank files {}.0{}, {}.1{}, ... beside it", target,
                       target, suffixes.front(), target, suffixes.front());
  }
  TraceFiles files;
  files.from_prefix = true;
  uint64_t expected = 0;
  for (auto& [rank, found] : ranks) {
    if (rank != expected) {
      return Error::make(ErrorKind::kIo,
                         "{}: rank file {}.{}{} is missing (found ranks up to {}, {} files in all)",
                         target, target, expected, suffixes.front(), ranks.rbegin()->first,
                         ranks.size());
    }
    files.paths.push_back(std::move(found.second));
    ++expected;
  }
  return files;
}

namespace {

// Whether every comm_src and comm_dst value a graph patched is a non-negative integer.
bool patched_peers_are_ranks(const TraceGraph& graph) {
  const AttributeKey src = graph.key("comm_src"), dst = graph.key("comm_dst");
  for (size_t k = 0; k < graph.patched_count(); ++k) {
    const NodeIndex node = graph.patched_node(k);
    for (const AttributeKey* peer : {&src, &dst}) {
      const Attribute* value = graph.find_attribute(node, peer->id);
      if (value == nullptr) continue;
      Expected<int64_t> number = graph.as_int(node, *value);
      if (!number || *number < 0) return false;
    }
  }
  return true;
}

}  // namespace

TraceSet::Entry TraceSet::make_entry(TraceGraph graph, const Entry* base) {
  Entry entry;
  if (base != nullptr && graph.renamed_only() && graph.shares_structure(base->graph) &&
      base->graph.patched_count() == 0 && base->report.diagnostics().empty() &&
      patched_peers_are_ranks(graph)) {
    // A renaming changes only comm_src and comm_dst integers (here checked to be ranks) and
    // pg_name strings (to strings): of a clean base, every check validate_trace makes says what
    // it said of the base (structure, attribute kinds and signs are kept). Its clean report is
    // the graph's, without checking every patched node again (a third of building a generated
    // 1,024-rank set).
    entry.report = base->report;
    entry.metadata = base->metadata;
  } else if (base != nullptr && graph.shares_structure(base->graph)) {
    entry.report = validate_trace(graph, base->graph, base->report);
    entry.metadata = base->metadata;  // node types are structure
  } else {
    entry.report = validate_trace(graph);
    for (NodeIndex node = 0; node < graph.size(); ++node) {
      if (graph.type(node) == ChakraProtoMsg::METADATA_NODE) entry.metadata.push_back(node);
    }
  }
  entry.graph = std::move(graph);
  return entry;
}

Expected<std::shared_ptr<const TraceSet>> TraceSet::load_classes(const std::string& target,
                                                                 const std::string& map_path,
                                                                 const TraceSetOptions& options) {
  Expected<RankMap> map = read_rank_map(map_path);
  if (!map) return map.error();
  auto set = std::make_shared<TraceSet>();
  set->name_ = target;
  set->uniform_ = options.uniform;
  size_t count = map->ranks.size();
  if (options.uniform) {
    count = 1;
  } else if (count > options.max_ranks) {
    set->ranks_left_out_ = static_cast<uint32_t>(count - options.max_ranks);
    count = options.max_ranks;
  }
  // The class traces the kept ranks run, each parsed and validated once.
  const fs::path folder = fs::path(map_path).parent_path();
  std::vector<uint32_t> entry_of_class(map->classes.size(), UINT32_MAX);
  std::vector<uint32_t> used;
  for (size_t r = 0; r < count; ++r) {
    const uint32_t k = map->ranks[r].trace;
    if (entry_of_class[k] == UINT32_MAX) {
      entry_of_class[k] = static_cast<uint32_t>(used.size());
      used.push_back(k);
    }
  }
  auto class_path = [&](uint32_t k) {
    const fs::path file(map->classes[k]);
    return (file.is_absolute() ? file : folder / file).string();
  };
  std::vector<std::optional<Entry>> classes(used.size());
  std::vector<std::optional<Error>> errors(used.size());
  parallel_for(used.size(), options.threads, [&](size_t index) {
    Expected<TraceGraph> graph = load_trace(class_path(used[index]));
    if (!graph) {
      errors[index] =
          graph.error().with_context(fmt::format("{}: class {}", map_path, used[index]));
      return;
    }
    std::vector<NodeIndex> renamable = graph->renamable_nodes();
    classes[index] = make_entry(std::move(*graph));
    classes[index]->renamable = std::move(renamable);
  });
  for (const std::optional<Error>& error : errors) {
    if (error) return *error;
  }
  set->graphs_.reserve(used.size());
  for (std::optional<Entry>& entry : classes) set->graphs_.push_back(std::move(*entry));
  // A rank of a clean class is kept as its renaming: a renaming changes only comm_src and
  // comm_dst integers (to ranks: read_rank_map checks) and pg_name strings, so every check
  // validate_trace makes says of the renamed graph what it said of the class's (structure,
  // attribute kinds and signs are kept), and the graph is built only if asked for. A rank of a
  // class with findings is built and validated now, so that its report is its own.
  auto renames = [&](size_t r) {
    return !map->ranks[r].rename.peers.empty() || !map->ranks[r].rename.groups.empty();
  };
  auto clean = [&](size_t r) {
    return set->graphs_[entry_of_class[map->ranks[r].trace]].report.diagnostics().empty();
  };
  std::vector<std::optional<Entry>> eager(count);
  parallel_for(count, options.threads, [&](size_t r) {
    if (!renames(r) || clean(r)) return;
    const RankMap::Rank& rank = map->ranks[r];
    const Entry& base = set->graphs_[entry_of_class[rank.trace]];
    TraceGraph graph = TraceGraph::renamed_from(base.graph, rank.rename, base.renamable);
    if (graph.patched_count() == 0) return;
    graph.set_source(fmt::format("{} as rank {}", class_path(rank.trace), r));
    eager[r] = make_entry(std::move(graph), &base);
  });
  set->rank_graph_.resize(count);
  set->paths_.resize(count);
  // Ranks built now first: the graphs kept renamed are numbered after every graph held whole.
  for (size_t r = 0; r < count; ++r) {
    set->paths_[r] = class_path(map->ranks[r].trace);
    if (!eager[r]) continue;
    set->rank_graph_[r] = static_cast<uint32_t>(set->graphs_.size());
    set->graphs_.push_back(std::move(*eager[r]));
  }
  for (size_t r = 0; r < count; ++r) {
    if (eager[r]) continue;
    RankMap::Rank& rank = map->ranks[r];
    const uint32_t base = entry_of_class[rank.trace];
    if (!renames(r) || !clean(r)) {
      set->rank_graph_[r] = base;  // nothing renamed, or renamed to the class's own values
      continue;
    }
    auto renamed = std::make_unique<Renamed>();
    renamed->base = base;
    renamed->renaming = std::move(rank.rename);
    renamed->source = fmt::format("{} as rank {}", set->paths_[r], r);
    set->rank_graph_[r] = static_cast<uint32_t>(set->graphs_.size() + set->renamed_.size());
    set->renamed_.push_back(std::move(renamed));
  }
  return std::shared_ptr<const TraceSet>(std::move(set));
}

Expected<std::shared_ptr<const TraceSet>> TraceSet::load(const std::string& target,
                                                         const TraceSetOptions& options) {
  std::error_code ec;
  if (const std::string map_path = rank_map_path(target);
      !fs::is_regular_file(target, ec) && fs::is_regular_file(map_path, ec)) {
    for (const char* suffix : {".et", ".et.gz"}) {
      const std::string rank0 = fmt::format("{}.0{}", target, suffix);
      if (fs::exists(rank0, ec)) {
        return Error::make(ErrorKind::kIo,
                           "{}: both rank files ({}) and a rank map ({}) are there: remove the "
                           "form you do not mean",
                           target, rank0, map_path);
      }
    }
    return load_classes(target, map_path, options);
  }
  Expected<TraceFiles> files = resolve_trace_files(target);
  if (!files) return files.error();
  auto set = std::make_shared<TraceSet>();
  set->name_ = target;
  set->uniform_ = options.uniform;
  if (options.uniform) {
    files->paths.resize(1);
  } else if (files->paths.size() > options.max_ranks) {
    set->ranks_left_out_ = static_cast<uint32_t>(files->paths.size() - options.max_ranks);
    files->paths.resize(options.max_ranks);
  }
  const auto count = static_cast<uint32_t>(files->paths.size());

  // Files that are copies of rank 0's (every data-parallel rank of a generated set) are compared,
  // not parsed; the others are read (chakra/trace_set_loader.h) in parallel.
  struct Loaded {
    std::optional<Error> error;
    std::optional<TraceGraph> graph;
    std::optional<Entry> entry;
    bool copy_of_first = false;
  };
  std::vector<Loaded> loaded(count);
  std::optional<SameFileChecker> first_file;
  if (count > 1) first_file.emplace(files->paths[0]);
  // Files that differ from an earlier one only in peers and group names are built from it.
  TraceSetLoader loader;
  parallel_for(count, options.threads, [&](size_t rank) {
    if (rank > 0 && first_file->matches(files->paths[rank])) {
      loaded[rank].copy_of_first = true;
      return;
    }
    Expected<TraceGraph> graph = loader.load(files->paths[rank]);
    if (!graph) {
      loaded[rank].error = graph.error();
      return;
    }
    loaded[rank].graph = std::move(*graph);
  });
  for (const Loaded& rank : loaded) {
    if (rank.error) return *rank.error;
  }

  // Validated in two rounds: the graphs parsed whole, then those built from one of them, whose
  // checks reuse the first's (a derived rank file costs the nodes it patched).
  std::map<const void*, uint32_t> base_of;  // structure -> rank whose graph was parsed whole
  std::vector<uint32_t> bases;
  std::vector<uint32_t> derived;
  for (uint32_t rank = 0; rank < count; ++rank) {
    if (!loaded[rank].graph) continue;
    const TraceGraph& graph = *loaded[rank].graph;
    if (graph.patched_count() == 0 && base_of.emplace(graph.structure(), rank).second) {
      bases.push_back(rank);
    } else {
      derived.push_back(rank);
    }
  }
  parallel_for(bases.size(), options.threads, [&](size_t index) {
    Loaded& rank = loaded[bases[index]];
    rank.entry = make_entry(std::move(*rank.graph));
  });
  parallel_for(derived.size(), options.threads, [&](size_t index) {
    Loaded& rank = loaded[derived[index]];
    const auto base = base_of.find(rank.graph->structure());
    rank.entry = make_entry(std::move(*rank.graph),
                            base == base_of.end() ? nullptr : &*loaded[base->second].entry);
  });

  set->rank_graph_.resize(count);
  size_t distinct = 0;
  for (const Loaded& rank : loaded) distinct += rank.entry ? size_t{1} : size_t{0};
  set->graphs_.reserve(distinct);
  for (uint32_t rank = 0; rank < count; ++rank) {
    if (loaded[rank].copy_of_first) {
      set->rank_graph_[rank] = 0;
      continue;
    }
    set->rank_graph_[rank] = static_cast<uint32_t>(set->graphs_.size());
    set->graphs_.push_back(std::move(*loaded[rank].entry));
  }
  set->paths_ = std::move(files->paths);
  return std::shared_ptr<const TraceSet>(std::move(set));
}

std::shared_ptr<const TraceSet> TraceSet::from_graphs(std::string name,
                                                      std::vector<TraceGraph> graphs,
                                                      std::vector<uint32_t> rank_graph,
                                                      bool uniform) {
  auto set = std::make_shared<TraceSet>();
  set->name_ = std::move(name);
  set->uniform_ = uniform;
  if (rank_graph.empty()) {
    rank_graph.resize(uniform ? 1 : graphs.size());
    for (uint32_t rank = 0; rank < rank_graph.size(); ++rank) rank_graph[rank] = rank;
  }
  for (const uint32_t index : rank_graph) {
    assert(index < graphs.size() && "TraceSet::from_graphs: rank graph index out of range");
    (void)index;
  }
  set->rank_graph_ = std::move(rank_graph);
  set->graphs_.resize(graphs.size());
  // As load: graphs that hold their own values first, then those sharing one's tables, validated
  // by what they patched (a generator's ranks derived from a stage's template).
  std::map<const void*, size_t> base_of;
  std::vector<size_t> bases, derived;
  for (size_t index = 0; index < graphs.size(); ++index) {
    if (graphs[index].patched_count() == 0 &&
        base_of.emplace(graphs[index].structure(), index).second) {
      bases.push_back(index);
    } else {
      derived.push_back(index);
    }
  }
  parallel_for(bases.size(), 0,
               [&](size_t k) { set->graphs_[bases[k]] = make_entry(std::move(graphs[bases[k]])); });
  parallel_for(derived.size(), 0, [&](size_t k) {
    TraceGraph& graph = graphs[derived[k]];
    const auto base = base_of.find(graph.structure());
    set->graphs_[derived[k]] =
        make_entry(std::move(graph), base == base_of.end() ? nullptr : &set->graphs_[base->second]);
  });
  return set;
}

const TraceGraph& TraceSet::graph(uint32_t index) const {
  if (index < graphs_.size()) return graphs_[index].graph;
  const Renamed& renamed = *renamed_[index - graphs_.size()];
  std::call_once(renamed.built, [&] {
    const Entry& base = graphs_[renamed.base];
    renamed.graph = TraceGraph::renamed_from(base.graph, renamed.renaming, base.renamable);
    renamed.graph->set_source(renamed.source);
    renamed.ready.store(true, std::memory_order_release);
  });
  return *renamed.graph;
}

const std::string& TraceSet::source(uint32_t index) const {
  if (index < graphs_.size()) return graphs_[index].graph.source();
  return renamed_[index - graphs_.size()]->source;
}

const std::string& TraceSet::rank_path(uint32_t rank) const {
  static const std::string kNone;
  if (paths_.empty()) return kNone;
  return paths_[uniform_ ? 0 : rank];
}

size_t TraceSet::memory_bytes() const {
  size_t bytes = 0;
  for (const Entry& entry : graphs_) bytes += entry.graph.memory_bytes();
  for (const std::unique_ptr<Renamed>& renamed : renamed_) {
    bytes += sizeof(Renamed) + renamed->source.capacity() +
             renamed->renaming.peers.capacity() * sizeof(renamed->renaming.peers[0]);
    for (const auto& [from, to] : renamed->renaming.groups) {
      bytes += sizeof(from) + sizeof(to) + from.capacity() + to.capacity();
    }
    // Built graphs share the class's tables: only what they hold themselves.
    if (renamed->ready.load(std::memory_order_acquire)) bytes += renamed->graph->overlay_bytes();
  }
  return bytes;
}

}  // namespace orrery::chakra
