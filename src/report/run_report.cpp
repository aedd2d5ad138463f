#include "report/run_report.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "system/collective.h"

namespace orrery::report {

namespace {

int64_t ns(SimTime time) { return time.ns_truncated(); }

double link_utilization(const net::LinkStats& link, SimTime end) {
  return end > SimTime::zero() ? link.busy.seconds() / end.seconds() : 0.0;
}

nlohmann::ordered_json rank_json(const sim::RunResult& result, size_t index) {
  const workload::RankResult& rank = result.rank_results[index];
  nlohmann::ordered_json out = {{"rank", rank.rank},
                                {"finish_ns", ns(rank.finish)},
                                {"exposed_comm_ns", ns(rank.astra_exposed_comm())},
                                {"compute_ns", ns(rank.gpu_compute)},
                                {"cpu_ns", ns(rank.cpu_compute)},
                                {"comm_ns", ns(rank.comm_active)},
                                {"comm_not_overlapped_ns", ns(rank.comm_exposed)},
                                {"memory_ns", ns(rank.memory)},
                                {"busy_ns", ns(rank.busy)},
                                {"idle_ns", ns(rank.idle())},
                                {"nodes", rank.nodes},
                                {"collectives", rank.collectives},
                                {"sends", rank.sends},
                                {"recvs", rank.recvs}};
  if (index < result.peak_memory.size()) out["peak_memory_bytes"] = result.peak_memory[index];
  return out;
}

nlohmann::ordered_json collective_json(const sim::RunResult& result,
                                       const sys::CollectiveRecord& record) {
  const SimTime duration = record.last_finish - record.first_issue;
  // Bandwidths in decimal GB/s (1e9 bytes per second), as NCCL's tests report them.
  const double algbw = duration > SimTime::zero()
                           ? static_cast<double>(record.bytes) / duration.seconds() / 1e9
                           : 0.0;
  return {{"type", sys::collective_name(record.type)},
          {"group", result.collective_group_names[record.group]},
          {"sequence", record.sequence},
          {"bytes", record.bytes},
          {"ranks", record.ranks},
          {"start_ns", ns(record.first_issue)},
          {"end_ns", ns(record.last_finish)},
          {"duration_ns", ns(duration)},
          {"algbw_gbps", algbw},
          {"busbw_gbps", algbw * sys::bus_bandwidth_factor(record.type, record.ranks)},
          {"first_node", record.first_node}};
}

nlohmann::ordered_json link_json(const sim::RunResult& result, const net::LinkStats& link) {
  return {{"src", link.src},
          {"dst", link.dst},
          {"dimension", link.dimension},
          {"bytes", link.bytes},
          {"busy_ns", ns(link.busy)},
          {"utilization", link_utilization(link, result.end)},
          {"messages", link.messages},
          {"peak_queue", link.peak_queue}};
}

nlohmann::ordered_json dimension_json(const sim::RunResult& result, size_t dim) {
  const sim::DimensionSummary& summary = result.dimensions[dim];
  return {{"dimension", dim},
          {"topology", summary.topology},
          {"size", summary.size},
          {"bandwidth_gbps", summary.bandwidth_gbps},
          {"links", summary.links},
          {"links_used", summary.links_used},
          {"bytes", summary.bytes},
          {"busy_ns", ns(summary.busy)},
          {"utilization", summary.utilization(result.end)}};
}

// Writes `rows` (objects with the same keys) as CSV with a header from the first row's keys.
Status write_csv(const std::string& path, const std::vector<std::string>& columns,
                 const nlohmann::ordered_json& rows) {
  std::ofstream out(path);
  if (!out) return Error::make(ErrorKind::kIo, "{}: cannot create", path);
  for (size_t idx = 0; idx < columns.size(); ++idx) out << (idx ? "," : "") << columns[idx];
  out << "\n";
  for (const nlohmann::ordered_json& row : rows) {
    for (size_t idx = 0; idx < columns.size(); ++idx) {
      if (idx) out << ",";
      const nlohmann::ordered_json& value =
          row.contains(columns[idx]) ? row.at(columns[idx]) : nlohmann::ordered_json();
      if (value.is_string()) {
        out << '"' << value.get<std::string>() << '"';
      } else if (!value.is_null()) {
        out << value.dump();
      }
    }
    out << "\n";
  }
  if (!out) return Error::make(ErrorKind::kIo, "{}: write failed", path);
  return Status::ok();
}

std::vector<std::string> keys_of(const nlohmann::ordered_json& object) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.push_back(key);
  return keys;
}

}  // namespace

nlohmann::ordered_json run_result_to_json(const sim::RunResult& result, double wall_seconds) {
  nlohmann::ordered_json out;
  out["format"] = kResultFormat;
  out["workload"] = result.workload;
  out["network"] = result.network;
  out["system"] = result.system;
  out["backend"] = result.backend;
  out["timing"] = result.rounding == net::TimeRounding::kAstraSim ? "astra-sim" : "exact";
  // Which simulation ran (sim/simulation.h): full, symmetric or classes, and why not faster.
  out["simulation"] = {{"mode", result.mode},
                       {"simulated_ranks", result.simulated_ranks},
                       {"fast_path_note", result.fast_path_note}};
  uint32_t slowest = 0;
  for (const workload::RankResult& rank : result.rank_results) {
    if (rank.finish > result.rank_results[slowest].finish) slowest = rank.rank;
  }
  out["summary"] = {{"ranks", result.ranks},       {"simulated_ns", ns(result.end)},
                    {"slowest_rank", slowest},     {"collectives", result.collectives.size()},
                    {"events", result.events},     {"messages", result.messages},
                    {"wall_seconds", wall_seconds}};
  out["ranks"] = nlohmann::ordered_json::array();
  for (size_t idx = 0; idx < result.rank_results.size(); ++idx)
    out["ranks"].push_back(rank_json(result, idx));
  out["collectives"] = nlohmann::ordered_json::array();
  for (const sys::CollectiveRecord& record : result.collectives) {
    out["collectives"].push_back(collective_json(result, record));
  }
  out["links"] = nlohmann::ordered_json::array();
  for (const net::LinkStats& link : result.links) out["links"].push_back(link_json(result, link));
  out["dimensions"] = nlohmann::ordered_json::array();
  for (size_t dim = 0; dim < result.dimensions.size(); ++dim)
    out["dimensions"].push_back(dimension_json(result, dim));
  return out;
}

Status write_run_csv(const sim::RunResult& result, const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error)
    return Error::make(ErrorKind::kIo, "{}: cannot create the folder: {}", dir, error.message());
  const nlohmann::ordered_json json = run_result_to_json(result, 0.0);
  const std::pair<const char*, const char*> tables[] = {{"ranks", "ranks.csv"},
                                                        {"collectives", "collectives.csv"},
                                                        {"links", "links.csv"},
                                                        {"dimensions", "dimensions.csv"}};
  for (const auto& [key, file] : tables) {
    const nlohmann::ordered_json& rows = json.at(key);
    // Columns: those of the first row, or of an empty row's schema when there are none.
    std::vector<std::string> columns;
    if (!rows.empty()) {
      columns = keys_of(rows.front());
    } else if (std::string(key) == "links") {
      columns = {"src",     "dst",         "dimension", "bytes",
                 "busy_ns", "utilization", "messages",  "peak_queue"};
    }
    if (Status status = write_csv((std::filesystem::path(dir) / file).string(), columns, rows);
        !status) {
      return status;
    }
  }
  return Status::ok();
}

}  // namespace orrery::report
