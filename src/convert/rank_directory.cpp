#include "convert/rank_directory.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "chakra/comm_groups.h"
#include "chakra/trace_set.h"
#include "convert/json_file.h"
#include "core/parallel.h"
#include "core/text_file.h"
#include "core/units.h"

namespace orrery::convert {

namespace {

namespace fs = std::filesystem;

// Bytes read from the start of each file to tell what it is.
constexpr size_t kSniffBytes = 1 << 16;

enum class FileKind : uint8_t { kHost, kKineto, kOther };

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// The kind of a JSON file from its first bytes: the top-level keys the two formats write first.
FileKind sniff_kind(const std::string& head) {
  if (head.find("\"traceEvents\"") != std::string::npos ||
      head.find("\"schemaVersion\"") != std::string::npos) {
    return FileKind::kKineto;
  }
  // The array form of a Chrome trace (the profiler without Kineto): a list of events.
  const size_t first = head.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && head[first] == '[' && head.find("\"ph\"") != std::string::npos)
    return FileKind::kKineto;
  if (head.find("\"nodes\"") != std::string::npos && head.find("\"schema\"") != std::string::npos)
    return FileKind::kHost;
  return FileKind::kOther;
}

// distributedInfo.rank from the first bytes of a Kineto trace.
std::optional<uint32_t> sniff_rank(const std::string& head) {
  const size_t info = head.find("\"distributedInfo\"");
  if (info == std::string::npos) return std::nullopt;
  const size_t close = head.find('}', info);
  const size_t key = head.find("\"rank\"", info);
  if (key == std::string::npos || (close != std::string::npos && key > close)) return std::nullopt;
  size_t at = head.find(':', key);
  if (at == std::string::npos) return std::nullopt;
  ++at;
  while (at < head.size() && std::isspace(static_cast<unsigned char>(head[at])) != 0) ++at;
  uint64_t value = 0;
  size_t digits = 0;
  while (at < head.size() && std::isdigit(static_cast<unsigned char>(head[at])) != 0 &&
         digits < 9) {
    value = value * 10 + static_cast<uint64_t>(head[at] - '0');
    ++at;
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  return static_cast<uint32_t>(value);
}

bool is_decimal(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
}

}  // namespace

std::optional<uint32_t> rank_from_file_name(const std::string& path) {
  std::string name = fs::path(path).filename().string();
  for (const char* suffix : {".gz", ".json", ".pt.trace"}) {
    if (ends_with(name, suffix)) name.resize(name.size() - std::string_view(suffix).size());
  }
  std::string lower;
  for (const char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const auto number_at = [&lower](size_t at) -> std::optional<uint32_t> {
    while (at < lower.size() && (lower[at] == '_' || lower[at] == '-' || lower[at] == '.')) ++at;
    uint64_t value = 0;
    size_t digits = 0;
    while (at < lower.size() && std::isdigit(static_cast<unsigned char>(lower[at])) != 0 &&
           digits < 9) {
      value = value * 10 + static_cast<uint64_t>(lower[at] - '0');
      ++at;
      ++digits;
    }
    if (digits == 0) return std::nullopt;
    return static_cast<uint32_t>(value);
  };
  for (const char* word : {"rank", "worker"}) {
    for (size_t at = lower.find(word); at != std::string::npos; at = lower.find(word, at + 1)) {
      if (const std::optional<uint32_t> rank = number_at(at + std::string_view(word).size()))
        return rank;
    }
  }
  // The last run of digits.
  size_t end = lower.size();
  while (end > 0 && std::isdigit(static_cast<unsigned char>(lower[end - 1])) == 0) --end;
  if (end == 0) return std::nullopt;
  size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(lower[begin - 1])) != 0) --begin;
  if (end - begin > 9) return std::nullopt;
  return number_at(begin);
}

Expected<DirectoryPlan> plan_rank_directory(const std::string& dir) {
  std::error_code code;
  if (!fs::is_directory(dir, code)) {
    return Error::make(ErrorKind::kIo, "{}: not a directory", dir);
  }
  std::vector<std::string> files;
  for (fs::recursive_directory_iterator
           it(dir, fs::directory_options::follow_directory_symlink, code),
       end;
       !code && it != end; it.increment(code)) {
    if (!it->is_regular_file(code)) continue;
    const std::string path = it->path().string();
    if (ends_with(path, ".json") || ends_with(path, ".json.gz")) files.push_back(path);
  }
  if (code) return Error::make(ErrorKind::kIo, "{}: cannot list: {}", dir, code.message());
  std::sort(files.begin(), files.end());

  DirectoryPlan plan;
  std::map<uint32_t, std::pair<std::string, std::string>> hosts;    // rank -> (path, source)
  std::map<uint32_t, std::pair<std::string, std::string>> devices;  // rank -> (path, source)
  for (const std::string& path : files) {
    Expected<std::string> head = read_file_head(path, kSniffBytes);
    if (!head) return head.error();
    const FileKind kind = sniff_kind(*head);
    if (kind == FileKind::kOther) {
      plan.ignored.push_back(path + ": neither a PyTorch execution trace nor a Kineto trace");
      continue;
    }
    std::optional<uint32_t> rank;
    std::string source = "file name";
    if (kind == FileKind::kKineto) {
      rank = sniff_rank(*head);
      if (rank) source = "distributedInfo.rank";
    }
    if (!rank) rank = rank_from_file_name(path);
    if (!rank) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "{}: cannot tell which rank this {} belongs to (no distributedInfo.rank, "
                         "no number in the file name)",
                         path, kind == FileKind::kHost ? "host trace" : "Kineto trace");
    }
    auto& table = kind == FileKind::kHost ? hosts : devices;
    const auto [found, inserted] = table.emplace(*rank, std::make_pair(path, source));
    if (!inserted) {
      return Error::make(ErrorKind::kInvalidArgument, "{} and {}: both {}s claim rank {}",
                         found->second.first, path,
                         kind == FileKind::kHost ? "host trace" : "Kineto trace", *rank);
    }
  }
  if (hosts.empty()) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "{}: no PyTorch execution trace (a JSON file with 'schema' and 'nodes') "
                       "found in it or below it",
                       dir);
  }
  uint32_t expected = 0;
  for (const auto& [rank, entry] : hosts) {
    if (rank != expected) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "{}: host traces for ranks {} to {} were found, but none for rank {} "
                         "(ranks must be 0 to n-1)",
                         dir, hosts.begin()->first, hosts.rbegin()->first, expected);
    }
    ++expected;
    RankInputs inputs;
    inputs.rank = rank;
    inputs.host = entry.first;
    inputs.rank_source = entry.second;
    if (const auto device = devices.find(rank); device != devices.end()) {
      inputs.device = device->second.first;
      inputs.rank_source = device->second.second;
    }
    plan.ranks.push_back(std::move(inputs));
  }
  for (const auto& [rank, entry] : devices) {
    if (hosts.count(rank) == 0) {
      plan.ignored.push_back(
          fmt::format("{}: Kineto trace of rank {}, which has no host trace", entry.first, rank));
    }
  }
  return plan;
}

Expected<DirectoryReport> convert_rank_directory(const std::string& dir, const std::string& prefix,
                                                 const ConvertOptions& options, size_t threads) {
  Expected<DirectoryPlan> plan = plan_rank_directory(dir);
  if (!plan) return plan.error();
  DirectoryReport report;
  report.plan = std::move(*plan);
  const size_t count = report.plan.ranks.size();
  ConvertOptions rank_options = options;
  rank_options.world_size = static_cast<uint32_t>(count);

  if (const fs::path parent = fs::path(prefix).parent_path(); !parent.empty()) {
    std::error_code code;
    fs::create_directories(parent, code);
  }
  report.ranks.resize(count);
  report.outputs.resize(count);
  std::vector<std::optional<Error>> errors(count);
  parallel_for(count, threads, [&](size_t rank) {
    const RankInputs& inputs = report.plan.ranks[rank];
    report.outputs[rank] = chakra::rank_trace_path(prefix, rank);
    Expected<ConversionReport> converted =
        convert_files(inputs.host, inputs.device, report.outputs[rank], rank_options);
    if (!converted) {
      errors[rank] = converted.error();
      return;
    }
    report.ranks[rank] = std::move(*converted);
  });
  for (size_t rank = 0; rank < count; ++rank) {
    if (errors[rank]) return errors[rank]->with_context(fmt::format("rank {}", rank));
    const RankInputs& inputs = report.plan.ranks[rank];
    const ConversionReport& converted = report.ranks[rank];
    if (converted.kineto_rank && *converted.kineto_rank != static_cast<int64_t>(rank)) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "{}: distributedInfo.rank is {}, but the file was taken for rank {}",
                         inputs.device, *converted.kineto_rank, rank);
    }
  }

  // Communicator groups of all ranks.
  chakra::CommGroups merged(static_cast<uint32_t>(count));
  for (size_t rank = 0; rank < count; ++rank) {
    for (const std::string& text : report.ranks[rank].process_group_texts) {
      chakra::CommGroups own(static_cast<uint32_t>(count));
      const std::string where = fmt::format("{} (rank {})", report.plan.ranks[rank].host, rank);
      if (Status status = chakra::add_groups_from_metadata(text, where, own); !status)
        return status.error();
      for (const auto& [name, group] : own.named()) {
        const chakra::CommGroup* known = merged.find(name);
        if (known != nullptr && merged.named().count(name) != 0 && known->ranks != group.ranks) {
          return Error::make(ErrorKind::kInvalidArgument,
                             "{}: process group '{}' has other ranks than in an earlier rank's "
                             "trace",
                             where, name);
        }
        if (Status status = merged.add(name, group.ranks, where); !status) return status.error();
      }
    }
  }
  nlohmann::json groups = nlohmann::json::object();
  if (merged.named().count("0") == 0) groups["0"] = merged.all().ranks;
  for (const auto& [name, group] : merged.named()) {
    if (!is_decimal(name)) {
      report.warnings.push_back(fmt::format(
          "process group '{}' has no decimal id: left out of {} (runs read it from the METADATA "
          "nodes)",
          name, prefix + ".json"));
      continue;
    }
    groups[name] = group.ranks;
  }
  report.comm_group_path = prefix + ".json";
  report.comm_group_text = groups.dump() + "\n";
  if (Status written = write_text_file(report.comm_group_path, report.comm_group_text); !written) {
    return written.error();
  }

  // Rank files left from an earlier, larger conversion would be read as more ranks: `orrery run`
  // takes every <prefix>.<r>.et[.gz] from 0 up. They are the user's files, so they are named, not
  // removed.
  std::vector<std::string> stale;
  for (size_t rank = count;; ++rank) {
    std::error_code code;
    const std::string plain = chakra::rank_trace_path(prefix, rank);
    if (fs::exists(plain, code)) {
      stale.push_back(plain);
    } else if (fs::exists(plain + ".gz", code)) {
      stale.push_back(plain + ".gz");
    } else {
      break;
    }
  }
  if (!stale.empty()) {
    report.warnings.push_back(fmt::format(
        "{} {} left from an earlier conversion; tools reading the prefix take {} as rank{} {}: "
        "remove {}",
        stale.size() == 1 ? stale.front() : fmt::format("{} to {}", stale.front(), stale.back()),
        stale.size() == 1 ? "is" : "are", stale.size() == 1 ? "it" : "them",
        stale.size() == 1 ? "" : "s",
        stale.size() == 1 ? std::to_string(count)
                          : fmt::format("{} to {}", count, count + stale.size() - 1),
        stale.size() == 1 ? "it" : "them"));
  }

  // The ranks must agree on the collectives of each process group: count, types and sizes.
  std::map<std::string, std::vector<std::pair<size_t, std::vector<const CommRecord*>>>> by_group;
  for (size_t rank = 0; rank < count; ++rank) {
    std::map<std::string, std::vector<const CommRecord*>> own;
    for (const CommRecord& comm : report.ranks[rank].comms) {
      if (comm.node_type == ChakraProtoMsg::COMM_COLL_NODE) own[comm.pg_name].push_back(&comm);
    }
    for (auto& [group, list] : own) by_group[group].emplace_back(rank, std::move(list));
  }
  for (const auto& [group, members] : by_group) {
    const std::string label = group.empty() ? "the default group" : "process group " + group;
    const auto& [first_rank, first] = members.front();
    size_t problems = 0;
    for (const auto& [rank, list] : members) {
      if (list.size() != first.size()) {
        report.warnings.push_back(
            fmt::format("{}: rank {} issues {} collectives, rank {} issues {}", label, first_rank,
                        first.size(), rank, list.size()));
        ++problems;
      }
      for (size_t at = 0; at < std::min(list.size(), first.size()) && problems < 5; ++at) {
        const CommRecord& a = *first[at];
        const CommRecord& b = *list[at];
        if (a.comm_type != b.comm_type || a.bytes != b.bytes) {
          report.warnings.push_back(fmt::format(
              "{}: collective #{} is {} of {} B on rank {} (node {}) but {} of {} B on rank {} "
              "(node {})",
              label, at + 1, ChakraProtoMsg::CollectiveCommType_Name(a.comm_type), a.bytes,
              first_rank, a.node_id, ChakraProtoMsg::CollectiveCommType_Name(b.comm_type), b.bytes,
              rank, b.node_id));
          ++problems;
        }
      }
    }
    if (members.size() != count && (group.empty() || group == "0")) {
      report.warnings.push_back(fmt::format("{}: only {} of {} ranks issue collectives on it",
                                            label, members.size(), count));
    }
  }
  return report;
}

std::string format_directory_report(const DirectoryReport& report, size_t examples) {
  std::string out;
  const size_t count = report.ranks.size();
  size_t with_kineto = 0;
  for (const RankInputs& inputs : report.plan.ranks) {
    if (!inputs.device.empty()) ++with_kineto;
  }
  out += fmt::format("{} ranks: {} with a Kineto trace, {} from the host trace alone\n", count,
                     with_kineto, count - with_kineto);
  uint64_t total_nodes = 0;
  std::map<int32_t, uint64_t> by_type;
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_kind;
  for (size_t rank = 0; rank < count; ++rank) {
    const ConversionReport& converted = report.ranks[rank];
    const RankInputs& inputs = report.plan.ranks[rank];
    out += fmt::format("  rank {}: {}{} -> {}: {} nodes, {} communication ops\n", rank, inputs.host,
                       inputs.device.empty() ? "" : " + " + inputs.device, report.outputs[rank],
                       format_count(converted.output_nodes), format_count(converted.comms.size()));
    total_nodes += converted.output_nodes;
    for (const auto& [type, nodes] : converted.nodes_by_type) by_type[type] += nodes;
    for (const CommRecord& comm : converted.comms) {
      std::string kind = comm.node_type == ChakraProtoMsg::COMM_COLL_NODE
                             ? ChakraProtoMsg::CollectiveCommType_Name(comm.comm_type)
                             : (comm.node_type == ChakraProtoMsg::COMM_SEND_NODE ? "SEND" : "RECV");
      by_kind[kind].first += 1;
      by_kind[kind].second += comm.bytes;
    }
  }
  out += fmt::format("wrote {} rank files and {}: {} nodes in all\n", count, report.comm_group_path,
                     format_count(total_nodes));
  for (const auto& [type, nodes] : by_type) {
    out += fmt::format("  {:<20}{}\n", ChakraProtoMsg::NodeType_Name(type), format_count(nodes));
  }
  if (!by_kind.empty()) {
    out += "  communication (all ranks)\n";
    for (const auto& [kind, figures] : by_kind) {
      out += fmt::format("    {:<18}{} x, {} ({} B)\n", kind, format_count(figures.first),
                         format_bytes(figures.second), format_count(figures.second));
    }
  }
  // Notes summed over ranks, with examples from the first rank that has them.
  std::vector<std::string> order;
  std::map<std::string, std::pair<uint64_t, std::vector<std::string>>> notes;
  for (size_t rank = 0; rank < count; ++rank) {
    for (const ConversionNote& note : report.ranks[rank].notes) {
      auto [found, inserted] =
          notes.emplace(note.what, std::make_pair(0, std::vector<std::string>()));
      if (inserted) order.push_back(note.what);
      found->second.first += note.count;
      for (const std::string& example : note.examples) {
        if (found->second.second.size() < examples)
          found->second.second.push_back(fmt::format("rank {} {}", rank, example));
      }
    }
  }
  if (!order.empty()) {
    out += "  dropped or changed (all ranks)\n";
    for (const std::string& what : order) {
      const auto& [total, shown] = notes.at(what);
      std::string list;
      for (size_t at = 0; at < shown.size(); ++at) list += (at == 0 ? ": " : ", ") + shown[at];
      if (total > shown.size() && !shown.empty()) list += ", ...";
      out += fmt::format("    {} {}{}\n", format_count(total), what, list);
    }
  }
  for (const std::string& ignored : report.plan.ignored) out += "  ignored " + ignored + "\n";
  for (const std::string& warning : report.warnings) out += "  warning: " + warning + "\n";
  return out;
}

}  // namespace orrery::convert
