#include "report/run_report.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "system/collective.h"

namespace orrery::report {

namespace {

int64_t ns(SimTime time) { return time.ns_truncated(); }

double link_utilization(const net::LinkStats& link, SimTime end) {
  return end > SimTime::zero() ? link.busy.seconds() / end.seconds() : 0.0;
}

// The text nlohmann::ordered_json::dump(1) gives, written as it goes: a run of 150,000
// collectives took a second to build as a JSON tree and dump, and a fifth of that streamed.
// Numbers and strings are rendered by nlohmann's own serializer, so the text is the same byte
// for byte (tests/report/run_report_test.cpp compares it with a parse and dump of itself). The
// serializer writes into the text itself: a dump() per number made and freed a string each time
// (4.7% of a profile of a class-mode run of the 1,024-rank example; its wall-time gain is within
// that run's noise).
class JsonText {
 public:
  JsonText() : serializer_(nlohmann::detail::output_adapter<char, std::string>(out_), ' ') {}
  JsonText(const JsonText&) = delete;
  JsonText& operator=(const JsonText&) = delete;
  std::string take() {
    out_ += '\n';
    return std::move(out_);
  }
  void open_object() { open('{'); }
  void close_object() { close('}'); }
  void open_array() { open('['); }
  void close_array() { close(']'); }
  // The next member of the current object; its value follows.
  JsonText& key(std::string_view name) {
    next();
    string(name);
    out_ += ": ";
    return *this;
  }
  // The next element of the current array.
  JsonText& element() {
    next();
    return *this;
  }
  template <typename T>
  void value(const T& v) {
    if constexpr (std::is_same_v<T, bool>) {
      out_ += v ? "true" : "false";
    } else if constexpr (std::is_integral_v<T>) {
      const fmt::format_int text(v);
      out_.append(text.data(), text.size());
    } else if constexpr (std::is_floating_point_v<T>) {
      serializer_.dump(nlohmann::ordered_json(v), false, false, 0);
    } else {
      string(v);
    }
  }

 private:
  void string(std::string_view text) {
    // Printable ASCII without quotes or backslashes is written as it is by nlohmann too.
    const bool plain = std::all_of(text.begin(), text.end(), [](char c) {
      return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
    });
    if (!plain) {
      serializer_.dump(nlohmann::ordered_json(text), false, false, 0);
      return;
    }
    out_ += '"';
    out_ += text;
    out_ += '"';
  }
  void open(char bracket) {
    out_ += bracket;
    empty_.push_back(true);
  }
  void close(char bracket) {
    const bool empty = empty_.back();
    empty_.pop_back();
    if (!empty) {
      out_ += '\n';
      out_.append(empty_.size(), ' ');
    }
    out_ += bracket;
  }
  void next() {
    if (!empty_.back()) out_ += ',';
    empty_.back() = false;
    out_ += '\n';
    out_.append(empty_.size(), ' ');
  }
  std::string out_;
  nlohmann::detail::serializer<nlohmann::ordered_json> serializer_;  // writes into out_
  std::vector<bool> empty_;  // per open bracket: nothing written inside yet
};

void write_rank(JsonText& out, const sim::RunResult& result, size_t index) {
  const workload::RankResult& rank = result.rank_results[index];
  out.open_object();
  out.key("rank").value(rank.rank);
  out.key("finish_ns").value(ns(rank.finish));
  out.key("exposed_comm_ns").value(ns(rank.astra_exposed_comm()));
  out.key("compute_ns").value(ns(rank.gpu_compute));
  out.key("cpu_ns").value(ns(rank.cpu_compute));
  out.key("comm_ns").value(ns(rank.comm_active));
  out.key("comm_not_overlapped_ns").value(ns(rank.comm_exposed));
  out.key("memory_ns").value(ns(rank.memory));
  out.key("busy_ns").value(ns(rank.busy));
  out.key("idle_ns").value(ns(rank.idle()));
  out.key("nodes").value(rank.nodes);
  out.key("collectives").value(rank.collectives);
  out.key("sends").value(rank.sends);
  out.key("recvs").value(rank.recvs);
  if (index < result.peak_memory.size())
    out.key("peak_memory_bytes").value(result.peak_memory[index]);
  out.close_object();
}

void write_collective(JsonText& out, const sim::RunResult& result,
                      const sys::CollectiveRecord& record) {
  const SimTime duration = record.last_finish - record.first_issue;
  // Bandwidths in decimal GB/s (1e9 bytes per second), as NCCL's tests report them.
  const double algbw = duration > SimTime::zero()
                           ? static_cast<double>(record.bytes) / duration.seconds() / 1e9
                           : 0.0;
  out.open_object();
  out.key("type").value(sys::collective_name(record.type));
  out.key("group").value(result.collective_group_names[record.group]);
  out.key("sequence").value(record.sequence);
  out.key("bytes").value(record.bytes);
  out.key("ranks").value(record.ranks);
  out.key("start_ns").value(ns(record.first_issue));
  out.key("end_ns").value(ns(record.last_finish));
  out.key("duration_ns").value(ns(duration));
  out.key("algbw_gbps").value(algbw);
  out.key("busbw_gbps").value(algbw * sys::bus_bandwidth_factor(record.type, record.ranks));
  out.key("first_node").value(record.first_node);
  out.close_object();
}

void write_link(JsonText& out, const sim::RunResult& result, const net::LinkStats& link) {
  out.open_object();
  out.key("src").value(link.src);
  out.key("dst").value(link.dst);
  out.key("dimension").value(link.dimension);
  out.key("bytes").value(link.bytes);
  out.key("busy_ns").value(ns(link.busy));
  out.key("utilization").value(link_utilization(link, result.end));
  out.key("messages").value(link.messages);
  out.key("peak_queue").value(link.peak_queue);
  out.close_object();
}

void write_dimension(JsonText& out, const sim::RunResult& result, size_t dim) {
  const sim::DimensionSummary& summary = result.dimensions[dim];
  out.open_object();
  out.key("dimension").value(dim);
  out.key("topology").value(summary.topology);
  out.key("size").value(summary.size);
  out.key("bandwidth_gbps").value(summary.bandwidth_gbps);
  out.key("links").value(summary.links);
  out.key("links_used").value(summary.links_used);
  out.key("bytes").value(summary.bytes);
  out.key("busy_ns").value(ns(summary.busy));
  out.key("utilization").value(summary.utilization(result.end));
  out.close_object();
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
  out.close();  // a full disk may show only at the final flush
  if (!out) return Error::make(ErrorKind::kIo, "{}: write failed", path);
  return Status::ok();
}

std::vector<std::string> keys_of(const nlohmann::ordered_json& object) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.push_back(key);
  return keys;
}

}  // namespace

std::string run_result_json_text(const sim::RunResult& result, double wall_seconds) {
  JsonText out;
  out.open_object();
  out.key("format").value(kResultFormat);
  out.key("workload").value(result.workload);
  out.key("network").value(result.network);
  out.key("system").value(result.system);
  out.key("backend").value(result.backend);
  out.key("timing").value(result.rounding == net::TimeRounding::kAstraSim ? "astra-sim" : "exact");
  // Which simulation ran (sim/simulation.h): full, symmetric or classes, and why not faster.
  out.key("simulation").open_object();
  out.key("mode").value(result.mode);
  out.key("simulated_ranks").value(result.simulated_ranks);
  out.key("fast_path_note").value(result.fast_path_note);
  out.close_object();
  uint32_t slowest = 0;
  for (const workload::RankResult& rank : result.rank_results) {
    if (rank.finish > result.rank_results[slowest].finish) slowest = rank.rank;
  }
  out.key("summary").open_object();
  out.key("ranks").value(result.ranks);
  out.key("simulated_ns").value(ns(result.end));
  out.key("slowest_rank").value(slowest);
  out.key("collectives").value(result.collectives.size());
  out.key("events").value(result.events);
  out.key("messages").value(result.messages);
  out.key("wall_seconds").value(wall_seconds);
  out.close_object();
  if (!result.perturbation.empty()) out.key("perturbation").value(result.perturbation);
  if (!result.stopped.empty()) out.key("stopped").value(result.stopped);
  if (result.goodput) {
    const sim::GoodputResult& g = *result.goodput;
    out.key("goodput").open_object();
    out.key("simulated").value(g.simulated);
    out.key("daly").value(g.daly);
    out.key("young").value(g.young);
    out.key("iteration_s").value(g.iteration_s);
    out.key("components").value(g.components);
    out.key("system_mtbf_s").value(g.system_mtbf_s);
    out.key("interval_s").value(g.interval_s);
    out.key("iterations_per_checkpoint").value(g.iterations_per_checkpoint);
    out.key("young_interval_s").value(g.young_interval_s);
    out.key("daly_interval_s").value(g.daly_interval_s);
    out.key("failures").value(g.failures);
    out.key("checkpoints").value(g.checkpoints);
    out.key("horizon_s").value(g.horizon_s);
    out.close_object();
  }
  out.key("ranks").open_array();
  for (size_t idx = 0; idx < result.rank_results.size(); ++idx) {
    write_rank(out.element(), result, idx);
  }
  out.close_array();
  out.key("collectives").open_array();
  for (const sys::CollectiveRecord& record : result.collectives) {
    write_collective(out.element(), result, record);
  }
  out.close_array();
  out.key("links").open_array();
  for (const net::LinkStats& link : result.links) write_link(out.element(), result, link);
  out.close_array();
  out.key("dimensions").open_array();
  for (size_t dim = 0; dim < result.dimensions.size(); ++dim) {
    write_dimension(out.element(), result, dim);
  }
  out.close_array();
  out.close_object();
  return out.take();
}

nlohmann::ordered_json run_result_to_json(const sim::RunResult& result, double wall_seconds) {
  return nlohmann::ordered_json::parse(run_result_json_text(result, wall_seconds));
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

std::string jobs_result_json_text(const sim::Jobs& jobs, const sim::JobsResult& result,
                                  double wall_seconds) {
  nlohmann::ordered_json doc;
  doc["format"] = "orrery-jobs/1";
  doc["jobs_file"] = jobs.file;
  doc["network"] = jobs.network_name;
  doc["backend"] = jobs.backend;
  doc["summary"] = {{"jobs", result.jobs.size()},
                    {"simulated_ns", ns(result.end)},
                    {"events", result.events},
                    {"messages", result.messages},
                    {"wall_seconds", wall_seconds}};
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (size_t index = 0; index < result.jobs.size(); ++index) {
    const sim::JobResult& job = result.jobs[index];
    nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
    for (const workload::RankResult& rank : job.ranks_detail) {
      ranks.push_back({{"rank", rank.rank},
                       {"npu", jobs.jobs[index].spec.placement[rank.rank]},
                       {"finish_ns", ns(rank.finish)},
                       {"compute_ns", ns(rank.gpu_compute)},
                       {"comm_ns", ns(rank.comm_active)},
                       {"comm_not_overlapped_ns", ns(rank.comm_exposed)}});
    }
    list.push_back({{"name", job.name},
                    {"ranks", job.ranks},
                    {"start_ns", ns(job.start)},
                    {"iteration_ns", ns(job.iteration)},
                    {"alone_ns", ns(job.alone)},
                    {"slowdown", job.slowdown},
                    {"compute_ns", ns(job.compute_mean)},
                    {"exposed_comm_ns", ns(job.exposed_mean)},
                    {"rank_results", std::move(ranks)}});
  }
  doc["jobs"] = std::move(list);
  nlohmann::ordered_json links = nlohmann::ordered_json::array();
  for (const sim::JobLink& link : result.links) {
    nlohmann::ordered_json by_job = nlohmann::ordered_json::object();
    nlohmann::ordered_json names = nlohmann::ordered_json::array();
    for (size_t k = 0; k < link.jobs.size(); ++k) {
      names.push_back(result.jobs[link.jobs[k]].name);
      by_job[result.jobs[link.jobs[k]].name] = link.bytes_by_job[k];
    }
    links.push_back({{"link", link.stats.link},
                     {"src", link.src},
                     {"dst", link.dst},
                     {"tier", link.stats.dimension},
                     {"bytes", link.stats.bytes},
                     {"busy_ns", ns(link.stats.busy)},
                     {"messages", link.stats.messages},
                     {"peak_queue", link.stats.peak_queue},
                     {"jobs", std::move(names)},
                     {"bytes_by_job", std::move(by_job)}});
  }
  doc["links"] = std::move(links);
  return doc.dump(1) + "\n";
}

}  // namespace orrery::report
