#include "chakra/trace_set.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>

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
    for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
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

}  // namespace orrery::chakra
