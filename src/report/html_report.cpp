#include "report/html_report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/markup.h"
#include "core/text_file.h"
#include "core/units.h"
#include "report/run_report.h"

namespace orrery::report {

namespace {

using Json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// The document, read into plain rows. Times are whole nanoseconds, as the JSON holds them.
// ---------------------------------------------------------------------------------------------

struct RankRow {
  int64_t rank = 0;
  int64_t finish = 0;
  // compute, host CPU, communication not overlapped with compute, memory, idle (kParts order).
  std::array<int64_t, 5> parts{};
};

struct CollectiveRow {
  std::string type;
  std::string group;
  std::string algorithm;  // empty when the document has none
  int64_t bytes = 0;
  int64_t ranks = 0;
  int64_t start = 0;
  int64_t duration = 0;
  std::optional<double> algbw;
  double busbw = 0;
};

struct LinkRow {
  int64_t src = 0;
  int64_t dst = 0;
  int64_t dimension = 0;
  int64_t bytes = 0;
  int64_t busy = 0;
  double utilization = 0;
  std::optional<int64_t> messages;
  std::optional<int64_t> peak_queue;
};

struct DimensionRow {
  int64_t dimension = 0;
  std::string topology;
  int64_t size = 0;
  double bandwidth_gbps = 0;
  int64_t links = 0;
  int64_t links_used = 0;
  int64_t bytes = 0;
  double utilization = 0;
};

struct RunDoc {
  std::string workload;
  std::string network;
  std::string system;
  std::string backend;
  std::string timing;
  int64_t ranks = 0;
  int64_t simulated = 0;
  int64_t slowest = 0;
  int64_t collectives = 0;
  int64_t messages = 0;
  std::optional<int64_t> events;
  std::vector<RankRow> rank_rows;
  std::vector<CollectiveRow> collective_rows;
  std::vector<LinkRow> link_rows;
  std::vector<DimensionRow> dimension_rows;
};

enum class Kind : uint8_t { kString, kNumber, kObject, kArray };

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kString:
      return "a string";
    case Kind::kNumber:
      return "a number";
    case Kind::kObject:
      return "an object";
    case Kind::kArray:
      return "an array";
  }
  return "a value";
}

bool has_kind(const Json& value, Kind kind) {
  switch (kind) {
    case Kind::kString:
      return value.is_string();
    case Kind::kNumber:
      return value.is_number();
    case Kind::kObject:
      return value.is_object();
    case Kind::kArray:
      return value.is_array();
  }
  return false;
}

std::string found_name(const Json& value) {
  if (value.is_null()) return "null";
  if (value.is_boolean()) return "a boolean";
  if (value.is_number()) return "a number";
  if (value.is_string()) return "a string";
  if (value.is_object()) return "an object";
  if (value.is_array()) return "an array";
  return "nothing";
}

std::string join_path(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

int64_t to_int64(const Json& value) {
  if (value.is_number_unsigned()) {
    const auto raw = value.get<uint64_t>();
    return raw > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(raw);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  const double raw = value.get<double>();
  if (!(raw > -9.2e18 && raw < 9.2e18)) return raw > 0 ? INT64_MAX : 0;
  return static_cast<int64_t>(std::llround(raw));
}

// Reads typed members and remembers the first missing or mistyped one, by its key path.
class DocReader {
 public:
  // The member `key` of `object` (found at `path`) if it has `kind`; null otherwise, after noting
  // the problem (an absent optional member is no problem).
  const Json* member(const Json& object, std::string_view path, const char* key, Kind kind,
                     bool required = true) {
    const auto found = object.find(key);
    if (found == object.end()) {
      if (required) {
        fail(path.empty()
                 ? fmt::format("missing \"{}\" (expected {})", key, kind_name(kind))
                 : fmt::format("{}: missing \"{}\" (expected {})", path, key, kind_name(kind)));
      }
      return nullptr;
    }
    if (!has_kind(*found, kind)) {
      fail(fmt::format("{}: expected {}, found {}", join_path(path, key), kind_name(kind),
                       found_name(*found)));
      return nullptr;
    }
    return &*found;
  }

  // `lowest`: -1 where the writer says "none" so (summary.slowest_rank of a run without ranks).
  int64_t integer(const Json& object, std::string_view path, const char* key, int lowest = 0) {
    const Json* value = member(object, path, key, Kind::kNumber);
    return value && counted(*value, path, key, lowest) ? to_int64(*value) : 0;
  }
  std::optional<int64_t> optional_integer(const Json& object, std::string_view path,
                                          const char* key) {
    const Json* value = member(object, path, key, Kind::kNumber, false);
    if (!value || !counted(*value, path, key)) return std::nullopt;
    return to_int64(*value);
  }
  double number(const Json& object, std::string_view path, const char* key) {
    const Json* value = member(object, path, key, Kind::kNumber);
    return value ? value->get<double>() : 0.0;
  }
  std::optional<double> optional_number(const Json& object, std::string_view path,
                                        const char* key) {
    const Json* value = member(object, path, key, Kind::kNumber, false);
    return value ? std::optional<double>(value->get<double>()) : std::nullopt;
  }
  std::string text(const Json& object, std::string_view path, const char* key,
                   bool required = true) {
    const Json* value = member(object, path, key, Kind::kString, required);
    return value ? value->get<std::string>() : std::string();
  }

  // Calls `read(element, path)` for each element of the array `key`, which must hold objects.
  template <typename Read>
  void each(const Json& object, const char* key, Read read) {
    const Json* array = member(object, "", key, Kind::kArray);
    if (!array) return;
    for (size_t idx = 0; idx < array->size() && !error_; ++idx) {
      const std::string path = fmt::format("{}[{}]", key, idx);
      const Json& element = (*array)[idx];
      if (!element.is_object()) {
        fail(fmt::format("{}: expected an object, found {}", path, found_name(element)));
        return;
      }
      read(element, path);
    }
  }

  const std::optional<Error>& error() const { return error_; }

 private:
  void fail(std::string message) {
    if (!error_) error_ = Error(ErrorKind::kParse, std::move(message));
  }

  // Every whole number of a result (times in ns, bytes, counts, ranks, dimensions) is one from 0
  // to 2^53, exact in a double: a time of 2^64 ns saturated to INT64_MAX, and the chart's axis
  // then stepped past it forever.
  bool counted(const Json& value, std::string_view path, const char* key, int lowest = 0) {
    constexpr double kMost = 9007199254740992.0;  // 2^53
    const double number = value.get<double>();
    if (number >= lowest && number <= kMost && number == std::floor(number)) return true;
    fail(fmt::format("{}: expected a whole number from {} to 2^53, found {}", join_path(path, key),
                     lowest, value.dump()));
    return false;
  }

  std::optional<Error> error_;
};

std::string shortened(std::string text) {
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

Expected<RunDoc> read_document(const Json& root) {
  if (!root.is_object()) {
    return Error::make(ErrorKind::kParse,
                       "expected an orrery-run/1 document (a JSON object), found {}",
                       found_name(root));
  }
  const auto format = root.find("format");
  if (format == root.end()) {
    return Error::make(ErrorKind::kParse,
                       "missing \"format\": not an orrery-run/1 document (`orrery run --output` "
                       "writes one)");
  }
  if (!format->is_string()) {
    return Error::make(ErrorKind::kParse, "format: expected a string, found {}",
                       found_name(*format));
  }
  if (format->get<std::string>() != kResultFormat) {
    return Error::make(ErrorKind::kParse, "format is \"{}\", expected \"{}\"",
                       shortened(format->get<std::string>()), kResultFormat);
  }

  DocReader reader;
  RunDoc doc;
  doc.workload = reader.text(root, "", "workload");
  doc.network = reader.text(root, "", "network");
  doc.system = reader.text(root, "", "system", false);
  doc.backend = reader.text(root, "", "backend");
  doc.timing = reader.text(root, "", "timing", false);
  if (const Json* summary = reader.member(root, "", "summary", Kind::kObject)) {
    doc.ranks = reader.integer(*summary, "summary", "ranks");
    doc.simulated = reader.integer(*summary, "summary", "simulated_ns");
    doc.slowest = reader.integer(*summary, "summary", "slowest_rank", -1);
    doc.collectives = reader.integer(*summary, "summary", "collectives");
    doc.messages = reader.integer(*summary, "summary", "messages");
    doc.events = reader.optional_integer(*summary, "summary", "events");
  }
  reader.each(root, "ranks", [&](const Json& row, const std::string& path) {
    RankRow rank;
    rank.rank = reader.integer(row, path, "rank");
    rank.finish = reader.integer(row, path, "finish_ns");
    rank.parts = {reader.integer(row, path, "compute_ns"), reader.integer(row, path, "cpu_ns"),
                  reader.integer(row, path, "comm_not_overlapped_ns"),
                  reader.integer(row, path, "memory_ns"), reader.integer(row, path, "idle_ns")};
    doc.rank_rows.push_back(rank);
  });
  reader.each(root, "collectives", [&](const Json& row, const std::string& path) {
    CollectiveRow collective;
    collective.type = reader.text(row, path, "type");
    collective.group = reader.text(row, path, "group");
    collective.algorithm = reader.text(row, path, "algorithm", false);
    collective.bytes = reader.integer(row, path, "bytes");
    collective.ranks = reader.integer(row, path, "ranks");
    collective.start = reader.integer(row, path, "start_ns");
    collective.duration = reader.integer(row, path, "duration_ns");
    collective.algbw = reader.optional_number(row, path, "algbw_gbps");
    collective.busbw = reader.number(row, path, "busbw_gbps");
    doc.collective_rows.push_back(std::move(collective));
  });
  reader.each(root, "links", [&](const Json& row, const std::string& path) {
    LinkRow link;
    link.src = reader.integer(row, path, "src");
    link.dst = reader.integer(row, path, "dst");
    link.dimension = reader.integer(row, path, "dimension");
    link.bytes = reader.integer(row, path, "bytes");
    link.busy = reader.integer(row, path, "busy_ns");
    link.utilization = reader.number(row, path, "utilization");
    link.messages = reader.optional_integer(row, path, "messages");
    link.peak_queue = reader.optional_integer(row, path, "peak_queue");
    doc.link_rows.push_back(link);
  });
  reader.each(root, "dimensions", [&](const Json& row, const std::string& path) {
    DimensionRow dim;
    dim.dimension = reader.integer(row, path, "dimension");
    dim.topology = reader.text(row, path, "topology");
    dim.size = reader.integer(row, path, "size");
    dim.bandwidth_gbps = reader.number(row, path, "bandwidth_gbps");
    dim.links = reader.integer(row, path, "links");
    dim.links_used = reader.integer(row, path, "links_used");
    dim.bytes = reader.integer(row, path, "bytes");
    dim.utilization = reader.number(row, path, "utilization");
    doc.dimension_rows.push_back(std::move(dim));
  });
  if (reader.error()) return *reader.error();
  std::stable_sort(doc.rank_rows.begin(), doc.rank_rows.end(),
                   [](const RankRow& a, const RankRow& b) { return a.rank < b.rank; });
  std::stable_sort(
      doc.dimension_rows.begin(), doc.dimension_rows.end(),
      [](const DimensionRow& a, const DimensionRow& b) { return a.dimension < b.dimension; });
  return doc;
}

// ---------------------------------------------------------------------------------------------
// Text: escaping and numbers as people read them. Everything is locale-independent.
// ---------------------------------------------------------------------------------------------

// An SVG coordinate: one decimal, never "-0.0".
std::string coord(double value) { return fmt::format("{:.1f}", std::round(value * 10) / 10 + 0.0); }

std::string count_text(int64_t value) {
  return value < 0 ? "-" + format_count(static_cast<uint64_t>(-value))
                   : format_count(static_cast<uint64_t>(value));
}

std::string bytes_text(int64_t bytes) {
  return bytes < 0 ? count_text(bytes) + " B" : format_bytes(static_cast<uint64_t>(bytes));
}

// Three or four significant digits in the largest unit that keeps the number at least 1.
std::string time_text(double ns) {
  const double magnitude = std::fabs(ns);
  auto scaled = [](double value, const char* unit) {
    return std::fabs(value) >= 100 ? fmt::format("{:.1f} {}", value, unit)
                                   : fmt::format("{:.2f} {}", value, unit);
  };
  if (magnitude < 1e3) return fmt::format("{:.0f} ns", ns);
  if (magnitude < 1e6) return scaled(ns / 1e3, "\u00b5s");
  if (magnitude < 1e9) return scaled(ns / 1e6, "ms");
  return scaled(ns / 1e9, "s");
}
std::string time_text(int64_t ns) { return time_text(static_cast<double>(ns)); }

std::string percent_text(double fraction) {
  const double percent = fraction * 100;
  return percent >= 10 ? fmt::format("{:.1f}%", percent) : fmt::format("{:.2f}%", percent);
}

std::string gbps_text(double gbps) {
  if (gbps >= 100) return fmt::format("{:.0f} GB/s", gbps);
  return gbps >= 10 ? fmt::format("{:.1f} GB/s", gbps) : fmt::format("{:.2f} GB/s", gbps);
}

// The communicator group as the page names it: "" (every rank) is "all ranks".
std::string group_text(const std::string& group) { return group.empty() ? "all ranks" : group; }
std::string group_label(const std::string& group) {
  return group.empty() ? "all ranks" : "group " + group;
}

// ---------------------------------------------------------------------------------------------
// Axes: integer steps of 1, 2 or 5 times a power of ten, so tick labels are exact.
// ---------------------------------------------------------------------------------------------

struct Axis {
  int64_t step = 1;
  int64_t max = 1;  // a whole number of steps, at least the largest value
};

Axis nice_axis(int64_t value, int64_t max_ticks) {
  value = std::max<int64_t>(value, 1);
  for (int64_t scale = 1; scale <= INT64_MAX / 50; scale *= 10) {
    for (const int64_t mantissa : {1, 2, 5}) {
      const int64_t step = mantissa * scale;
      const int64_t ticks = value / step + (value % step != 0 ? 1 : 0);
      if (ticks <= max_ticks) return {step, ticks * step};
    }
  }
  return {value, value};
}

int64_t pow10(int exponent) {
  int64_t result = 1;
  for (int idx = 0; idx < exponent; ++idx) result *= 10;
  return result;
}

int trailing_zeros(int64_t value) {
  int zeros = 0;
  while (value != 0 && value % 10 == 0) {
    value /= 10;
    ++zeros;
  }
  return zeros;
}

// `value` / 10^unit_exponent with exactly the decimals that `step` needs ("0.5", "250").
std::string scaled_text(int64_t value, int unit_exponent, int64_t step) {
  const int decimals = std::max(0, unit_exponent - trailing_zeros(step));
  const int64_t unit = pow10(unit_exponent);
  std::string text = count_text(value / unit);
  if (decimals > 0) {
    const std::string fraction = fmt::format("{:0{}}", value % unit, unit_exponent);
    text += "." + fraction.substr(0, static_cast<size_t>(decimals));
  }
  return text;
}

// A tick label on a time axis in nanoseconds: "0", "50 µs", "1.5 ms".
std::string time_tick(int64_t ns, const Axis& axis) {
  if (ns == 0) return "0";
  int exponent = 0;
  for (const int candidate : {3, 6, 9}) {
    if (axis.max >= pow10(candidate)) exponent = candidate;
  }
  static constexpr std::array<const char*, 4> kUnits = {"ns", "\u00b5s", "ms", "s"};
  return scaled_text(ns, exponent, axis.step) + " " + kUnits[static_cast<size_t>(exponent / 3)];
}

// Utilization axes count basis points (1/10,000): a tick label is a percentage.
int64_t basis_points(double fraction) {
  return static_cast<int64_t>(std::ceil(std::max(0.0, fraction) * 10000 - 1e-9));
}
std::string percent_tick(int64_t points, const Axis& axis) {
  return points == 0 ? "0" : scaled_text(points, 2, axis.step) + "%";
}

// ---------------------------------------------------------------------------------------------
// Colours: the Okabe-Ito palette, distinguishable with the common colour-vision deficiencies.
// ---------------------------------------------------------------------------------------------

struct Part {
  const char* key;
  const char* label;
  const char* color;
};

constexpr std::array<Part, 5> kParts = {{
    {"compute", "compute", "#0072B2"},
    {"cpu", "host CPU", "#56B4E9"},
    {"comm", "communication not overlapped with compute", "#E69F00"},
    {"memory", "memory", "#CC79A7"},
    {"idle", "idle", "#C4C9CF"},
}};

constexpr std::array<const char*, 7> kPalette = {"#0072B2", "#E69F00", "#009E73", "#CC79A7",
                                                 "#56B4E9", "#D55E00", "#F0E442"};

const char* palette(size_t index) { return kPalette[index % kPalette.size()]; }

constexpr const char* kInk = "#1f2328";

// ---------------------------------------------------------------------------------------------
// The page.
// ---------------------------------------------------------------------------------------------

constexpr double kWideChart = 1120;
constexpr double kHalfChart = 548;

class Page {
 public:
  explicit Page(const RunDoc& doc, const HtmlReportOptions& options)
      : doc_(doc), options_(options) {}

  std::string render() {
    head();
    header();
    summary();
    breakdown();
    collectives();
    links();
    add("<footer>Rendered by orrery from an {} result. Charts are inline SVG; hover over a bar "
        "for its figures. See docs/formats/report.md.</footer>\n</main>\n</body>\n</html>\n",
        kResultFormat);
    return std::move(out_);
  }

 private:
  template <typename... Args>
  void add(fmt::format_string<Args...> format, Args&&... args) {
    fmt::format_to(std::back_inserter(out_), format, std::forward<Args>(args)...);
  }

  void head();
  void header();
  void summary();
  void card(const char* key, const char* label, const std::string& value,
            const std::string& detail);
  void breakdown();
  void collectives();
  void links();
  void dimension_chart(const std::vector<double>& busiest);
  void link_histogram();
  void legend(const std::vector<std::pair<std::string, std::string>>& entries,
              const std::string& marker = "");

  // Chart frame helpers, writing into out_.
  void open_svg(const char* id, double width, double height, const std::string& label,
                const std::string& extra_attributes);
  void vertical_value_axis(const Axis& axis, double left, double right, double top, double bottom,
                           bool time);
  void horizontal_value_axis(const Axis& axis, double left, double right, double top, double bottom,
                             bool time);

  const RunDoc& doc_;
  const HtmlReportOptions& options_;
  std::string out_;
};

constexpr const char* kStyle = R"(
:root { color-scheme: light; --ink: #1f2328; --muted: #57606a; --line: #d0d7de;
  --panel: #f6f8fa; --accent: #0072B2; }
* { box-sizing: border-box; }
html { background: #ffffff; }
body { margin: 0; color: var(--ink); background: #ffffff;
  font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
    "Noto Sans", "DejaVu Sans", "Liberation Sans", sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 28px 30px 40px; }
header.top { border-bottom: 3px solid var(--accent); padding-bottom: 14px; margin-bottom: 22px; }
.eyebrow { font-size: 12px; font-weight: 600; letter-spacing: .08em; text-transform: uppercase;
  color: var(--accent); }
h1 { font-size: 26px; line-height: 1.25; margin: 2px 0 6px; font-weight: 650; }
h2 { font-size: 19px; margin: 34px 0 4px; font-weight: 650; }
h3 { font-size: 15px; margin: 0 0 4px; font-weight: 600; }
p { margin: 0 0 10px; }
.note { color: var(--muted); max-width: 92ch; }
.meta { color: var(--muted); margin: 0; }
code, .path { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono",
  "Liberation Mono", monospace; font-size: 12.5px; }
.cards { display: grid; grid-template-columns: repeat(4, minmax(0, 1fr)); gap: 12px; margin: 0 0 14px; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 11px 14px 12px;
  background: var(--panel); min-width: 0; }
.card .label { font-size: 12px; color: var(--muted); text-transform: uppercase;
  letter-spacing: .05em; font-weight: 600; }
.card .value { font-size: 23px; font-weight: 650; font-variant-numeric: tabular-nums;
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.card .detail { font-size: 12.5px; color: var(--muted); font-variant-numeric: tabular-nums; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 3px 18px; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
.legend { list-style: none; display: flex; flex-wrap: wrap; gap: 4px 20px; padding: 0;
  margin: 8px 0 6px; font-size: 13px; }
.legend li { display: flex; align-items: center; gap: 7px; }
.swatch { display: inline-block; width: 13px; height: 13px; border-radius: 3px; }
.marker { display: inline-block; width: 16px; height: 0; border-top: 2.5px solid var(--ink); }
.chart { display: block; width: 100%; height: auto; margin: 2px 0 6px; overflow: visible; }
.chart text { font-size: 12px; fill: var(--muted); }
.chart text.label { fill: var(--ink); }
.chart text.value { fill: var(--ink); font-weight: 600; }
.chart text.title { font-size: 12.5px; fill: var(--muted); }
.chart .grid { stroke: #e7ebef; stroke-width: 1; }
.chart .baseline { stroke: #8c959f; stroke-width: 1; }
.two { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 28px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; font-variant-numeric: tabular-nums;
  margin: 6px 0 4px; }
th { text-align: left; font-weight: 600; color: var(--muted); font-size: 12px;
  border-bottom: 1.5px solid var(--line); padding: 6px 10px; white-space: nowrap; }
td { padding: 5px 10px; border-bottom: 1px solid #eaeef2; white-space: nowrap; }
th.num, td.num { text-align: right; }
tbody tr:nth-child(even) { background: #fafbfc; }
.dot { display: inline-block; width: 10px; height: 10px; border-radius: 50%; margin-right: 7px; }
.empty { color: var(--muted); font-style: italic; }
footer { margin-top: 36px; padding-top: 12px; border-top: 1px solid var(--line); color: var(--muted);
  font-size: 12.5px; }
)";

std::string short_name(const std::string& path);

void Page::head() {
  const std::string title = doc_.workload.empty() ? "run" : short_name(doc_.workload);
  add("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<meta name=\"generator\" content=\"orrery report\">\n"
      "<title>orrery report: {}</title>\n"
      // An empty icon, so that no browser asks for /favicon.ico.
      "<link rel=\"icon\" href=\"data:,\">\n<style>{}</style>\n</head>\n<body>\n<main>\n",
      escape_markup(title), kStyle);
}

// The last two components of a path, for a title: "examples/llama/workload" -> "llama/workload".
std::string short_name(const std::string& path) {
  const std::filesystem::path normal = std::filesystem::path(path).lexically_normal();
  const std::filesystem::path parent = normal.parent_path().filename();
  const std::filesystem::path name = normal.filename();
  if (name.empty()) return path;
  return parent.empty() || parent == ".." ? name.string() : (parent / name).string();
}

void Page::header() {
  add("<header class=\"top\">\n<div class=\"eyebrow\">orrery &middot; simulation report</div>\n"
      "<h1>{}</h1>\n<p class=\"meta\">{} ranks on <span class=\"path\">{}</span>, {} "
      "backend{}</p>\n</header>\n",
      escape_markup(doc_.workload.empty() ? std::string("run") : short_name(doc_.workload)),
      count_text(doc_.ranks), escape_markup(doc_.network), escape_markup(doc_.backend),
      doc_.timing.empty() ? std::string() : fmt::format(", {} timing", escape_markup(doc_.timing)));
}

void Page::card(const char* key, const char* label, const std::string& value,
                const std::string& detail) {
  add("<div class=\"card\" data-key=\"{}\"><div class=\"label\">{}</div>"
      "<div class=\"value\">{}</div><div class=\"detail\">{}</div></div>\n",
      key, label, value, detail);
}

void Page::summary() {
  add("<section id=\"summary\">\n<h2>Summary</h2>\n<div class=\"cards\">\n");
  // Means over the ranks listed, and the fastest rank for the spread.
  std::array<double, 5> mean{};
  const RankRow* fastest = nullptr;
  for (const RankRow& rank : doc_.rank_rows) {
    for (size_t part = 0; part < mean.size(); ++part)
      mean[part] += static_cast<double>(rank.parts[part]);
    if (!fastest || rank.finish < fastest->finish) fastest = &rank;
  }
  const double listed = static_cast<double>(std::max<size_t>(doc_.rank_rows.size(), 1));
  for (double& value : mean) value /= listed;
  int64_t slowest_finish = doc_.simulated;
  for (const RankRow& rank : doc_.rank_rows) {
    if (rank.rank == doc_.slowest) slowest_finish = rank.finish;
  }

  card("ranks", "Ranks", count_text(doc_.ranks),
       doc_.ranks == 1 ? std::string("one trace") : std::string("one trace each"));
  card("simulated_ns", "Simulated time", time_text(doc_.simulated),
       count_text(doc_.simulated) + " ns");
  card("slowest_rank", "Slowest rank", count_text(doc_.slowest),
       fastest ? fmt::format("finishes at {}; fastest rank {} at {}", time_text(slowest_finish),
                             count_text(fastest->rank), time_text(fastest->finish))
               : std::string("finishes last"));
  card("backend", "Network backend", escape_markup(doc_.backend),
       doc_.timing.empty() ? std::string() : escape_markup(doc_.timing) + " timing");
  card("collectives", "Collectives", count_text(doc_.collectives),
       doc_.collective_rows.empty()
           ? std::string("none")
           : fmt::format("longest {}", time_text(std::max_element(doc_.collective_rows.begin(),
                                                                  doc_.collective_rows.end(),
                                                                  [](const auto& a, const auto& b) {
                                                                    return a.duration < b.duration;
                                                                  })
                                                     ->duration)));
  card("messages", "Network messages", count_text(doc_.messages),
       doc_.events ? fmt::format("{} events", count_text(*doc_.events)) : std::string());
  card("compute_mean", "Compute per rank", time_text(mean[0]),
       doc_.simulated > 0 ? fmt::format("mean; {} of the run",
                                        percent_text(mean[0] / static_cast<double>(doc_.simulated)))
                          : std::string("mean"));
  card("comm_not_overlapped_mean", "Exposed communication", time_text(mean[2]),
       doc_.simulated > 0 ? fmt::format("mean, not hidden by compute; {} of the run",
                                        percent_text(mean[2] / static_cast<double>(doc_.simulated)))
                          : std::string("mean not overlapped with compute"));
  add("</div>\n<dl class=\"facts\">\n");
  const std::pair<const char*, const std::string*> facts[] = {
      {"Workload", &doc_.workload}, {"Network", &doc_.network}, {"System", &doc_.system}};
  for (const auto& [name, value] : facts) {
    if (!value->empty())
      add("<dt>{}</dt><dd class=\"path\">{}</dd>\n", name, escape_markup(*value));
  }
  add("</dl>\n</section>\n");
}

void Page::legend(const std::vector<std::pair<std::string, std::string>>& entries,
                  const std::string& marker) {
  add("<ul class=\"legend\">");
  for (const auto& [color, label] : entries) {
    add("<li><span class=\"swatch\" style=\"background:{}\"></span>{}</li>", color, label);
  }
  if (!marker.empty()) add("<li><span class=\"marker\"></span>{}</li>", marker);
  add("</ul>\n");
}

void Page::open_svg(const char* id, double width, double height, const std::string& label,
                    const std::string& extra_attributes) {
  add("<svg id=\"{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" "
      "width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"{}\"{}>\n",
      id, coord(width), coord(height), coord(width), coord(height), escape_markup(label),
      extra_attributes);
}

// Grid lines and labels for values growing upwards, from `bottom` to `top`.
void Page::vertical_value_axis(const Axis& axis, double left, double right, double top,
                               double bottom, bool time) {
  for (int64_t ticks = axis.max / axis.step, idx = 0; idx <= ticks; ++idx) {
    const int64_t tick = idx * axis.step;
    const double y =
        bottom - (bottom - top) * static_cast<double>(tick) / static_cast<double>(axis.max);
    add("<line class=\"{}\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/>"
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" dy=\"0.32em\">{}</text>\n",
        tick == 0 ? "baseline" : "grid", coord(left), coord(right), coord(y), coord(y),
        coord(left - 8), coord(y), time ? time_tick(tick, axis) : count_text(tick));
  }
}

// Grid lines and labels for values growing rightwards, from `left` to `right`.
void Page::horizontal_value_axis(const Axis& axis, double left, double right, double top,
                                 double bottom, bool time) {
  for (int64_t ticks = axis.max / axis.step, idx = 0; idx <= ticks; ++idx) {
    const int64_t tick = idx * axis.step;
    const double x =
        left + (right - left) * static_cast<double>(tick) / static_cast<double>(axis.max);
    add("<line class=\"{}\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/>"
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
        tick == 0 ? "baseline" : "grid", coord(x), coord(x), coord(top), coord(bottom), coord(x),
        coord(bottom + 16), time ? time_tick(tick, axis) : percent_tick(tick, axis));
  }
}

// One bar of the breakdown: a rank, or consecutive ranks when there are many.
struct RankBar {
  std::string label;              // under the bar: "3" or "0-15"
  std::string ranks;              // in the tooltip: "rank 3" or "ranks 0-15 (16 ranks)"
  std::array<double, 5> parts{};  // ns; the mean over the ranks of the bar
  int64_t min_finish = 0;
  int64_t max_finish = 0;
  int64_t slowest = 0;  // the rank that finishes at max_finish (the first such)
  size_t count = 0;
};

std::vector<RankBar> rank_bars(const std::vector<RankRow>& rows, size_t max_bars) {
  std::vector<RankBar> bars;
  if (rows.empty()) return bars;
  max_bars = std::max<size_t>(max_bars, 1);
  const size_t per_bar = (rows.size() + max_bars - 1) / max_bars;
  for (size_t first = 0; first < rows.size(); first += per_bar) {
    const size_t last = std::min(rows.size(), first + per_bar) - 1;
    RankBar bar;
    bar.count = last - first + 1;
    bar.min_finish = rows[first].finish;
    bar.max_finish = rows[first].finish;
    bar.slowest = rows[first].rank;
    for (size_t idx = first; idx <= last; ++idx) {
      for (size_t part = 0; part < bar.parts.size(); ++part)
        bar.parts[part] += static_cast<double>(rows[idx].parts[part]);
      bar.min_finish = std::min(bar.min_finish, rows[idx].finish);
      if (rows[idx].finish > bar.max_finish) {
        bar.max_finish = rows[idx].finish;
        bar.slowest = rows[idx].rank;
      }
    }
    for (double& part : bar.parts) part /= static_cast<double>(bar.count);
    if (per_bar == 1) {
      bar.label = count_text(rows[first].rank);
      bar.ranks = "rank " + bar.label;
    } else {
      bar.label = fmt::format("{}\u2013{}", rows[first].rank, rows[last].rank);
      bar.ranks = fmt::format("ranks {} ({} ranks)", bar.label, bar.count);
    }
    bars.push_back(std::move(bar));
  }
  return bars;
}

void Page::breakdown() {
  add("<section id=\"breakdown\">\n<h2>Time per rank</h2>\n");
  const std::vector<RankBar> bars = rank_bars(doc_.rank_rows, options_.max_rank_bars);
  if (bars.empty()) {
    add("<p class=\"empty\">The result lists no ranks.</p>\n</section>\n");
    return;
  }
  const bool grouped = bars.size() < doc_.rank_rows.size();
  const size_t per_bar = grouped ? bars.front().count : 1;
  if (grouped) {
    add("<p class=\"note\">{} ranks in {} bars of {} consecutive ranks: each bar stacks the mean "
        "time of its ranks; the black line spans the earliest to the latest finish among them. "
        "Compute, host CPU and memory can overlap, so a stack may be taller than the finish "
        "time.</p>\n",
        count_text(static_cast<int64_t>(doc_.rank_rows.size())), bars.size(), per_bar);
  } else {
    add("<p class=\"note\">Where each rank's time went, summed over the run; the black line marks "
        "when the rank finished. Compute, host CPU and memory can overlap, so a stack may be "
        "taller than the finish time.</p>\n");
  }
  std::vector<std::pair<std::string, std::string>> entries;
  for (const Part& part : kParts) entries.emplace_back(part.color, part.label);
  legend(entries, grouped ? "finish time (earliest to latest in the bar)" : "finish time");

  double highest = 0;
  for (const RankBar& bar : bars) {
    double stacked = 0;
    for (const double part : bar.parts) stacked += std::max(0.0, part);
    highest = std::max({highest, stacked, static_cast<double>(bar.max_finish)});
  }
  const Axis axis = nice_axis(static_cast<int64_t>(std::ceil(highest)), 6);
  constexpr double kHeight = 340;
  constexpr double kLeft = 78;
  constexpr double kRight = kWideChart - 16;
  constexpr double kTop = 12;
  constexpr double kBottom = kHeight - 52;
  open_svg("breakdown-chart", kWideChart, kHeight, "time per rank, stacked by activity",
           fmt::format(" data-bars=\"{}\" data-ranks-per-bar=\"{}\"", bars.size(), per_bar));
  vertical_value_axis(axis, kLeft, kRight, kTop, kBottom, true);
  const double slot = (kRight - kLeft) / static_cast<double>(bars.size());
  const double width = std::min(slot * 0.72, 56.0);
  auto y_of = [&](double ns) {
    return kBottom - (kBottom - kTop) * ns / static_cast<double>(axis.max);
  };
  // Label every n-th bar so that labels never collide.
  const size_t longest_label =
      std::max_element(bars.begin(), bars.end(), [](const RankBar& a, const RankBar& b) {
        return a.label.size() < b.label.size();
      })->label.size();
  const double label_width = 7.0 * static_cast<double>(longest_label) + 10;
  const auto every = static_cast<size_t>(std::max(1.0, std::ceil(label_width / slot)));
  for (size_t idx = 0; idx < bars.size(); ++idx) {
    const RankBar& bar = bars[idx];
    const double x = kLeft + slot * static_cast<double>(idx) + (slot - width) / 2;
    std::string tooltip = fmt::format("{}: finish {}", bar.ranks, time_text(bar.max_finish));
    if (bar.count > 1) {
      tooltip = fmt::format("{}: finish {} to {} (slowest rank {}); means:", bar.ranks,
                            time_text(bar.min_finish), time_text(bar.max_finish), bar.slowest);
    }
    for (size_t part = 0; part < kParts.size(); ++part) {
      tooltip += fmt::format("\n{}: {}", kParts[part].label, time_text(bar.parts[part]));
    }
    add("<g class=\"rank-bar\" data-label=\"{}\" data-finish-ns=\"{}\"><title>{}</title>",
        escape_markup(bar.label), bar.max_finish, escape_markup(tooltip));
    double stacked = 0;
    for (size_t part = 0; part < kParts.size(); ++part) {
      const double value = std::max(0.0, bar.parts[part]);
      if (value <= 0) continue;
      const double top = y_of(stacked + value);
      const double bottom = y_of(stacked);
      add("<rect class=\"seg-{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>",
          kParts[part].key, coord(x), coord(top), coord(width), coord(std::max(bottom - top, 0.0)),
          kParts[part].color);
      stacked += value;
    }
    const double center = x + width / 2;
    const double finish_y = y_of(static_cast<double>(bar.max_finish));
    if (bar.min_finish != bar.max_finish) {
      const double early_y = y_of(static_cast<double>(bar.min_finish));
      add("<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"1.5\"/>"
          "<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"1.5\"/>",
          coord(center), coord(center), coord(early_y), coord(finish_y), kInk,
          coord(center - width / 4), coord(center + width / 4), coord(early_y), coord(early_y),
          kInk);
    }
    add("<line class=\"finish\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"{}\" "
        "stroke-width=\"2.5\"/>",
        coord(x - 3), coord(x + width + 3), coord(finish_y), coord(finish_y), kInk);
    if (idx % every == 0) {
      add("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>", coord(center),
          coord(kBottom + 17), escape_markup(bar.label));
    }
    add("</g>\n");
  }
  add("<text class=\"title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
      coord((kLeft + kRight) / 2), coord(kHeight - 10),
      grouped ? fmt::format("ranks ({} per bar)", per_bar) : std::string("rank"));
  add("<text class=\"title\" transform=\"translate(16 {}) rotate(-90)\" "
      "text-anchor=\"middle\">simulated time</text>\n",
      coord((kTop + kBottom) / 2));
  add("</svg>\n</section>\n");
}

void Page::collectives() {
  add("<section id=\"collectives\">\n<h2>Longest collectives</h2>\n");
  if (doc_.collective_rows.empty()) {
    add("<p class=\"empty\">The run has no collectives.</p>\n</section>\n");
    return;
  }
  // Longest first; equal durations in the order they started, then in the document's order.
  std::vector<const CollectiveRow*> order;
  for (const CollectiveRow& row : doc_.collective_rows) order.push_back(&row);
  std::stable_sort(order.begin(), order.end(), [](const CollectiveRow* a, const CollectiveRow* b) {
    if (a->duration != b->duration) return a->duration > b->duration;
    return a->start < b->start;
  });
  const size_t shown =
      std::min<size_t>(order.size(), std::max<uint32_t>(options_.top_collectives, 1));
  order.resize(shown);
  // Colours by type, over every type in the run, so that they do not depend on the cut.
  std::map<std::string, size_t> type_color;
  for (const CollectiveRow& row : doc_.collective_rows) type_color.emplace(row.type, 0);
  size_t next = 0;
  for (auto& [type, color] : type_color) color = next++;

  add("<p class=\"note\">The {} longest of {} collectives, from the first rank issuing it to the "
      "last rank finishing it. Bus bandwidth is size over duration scaled by the algorithm's "
      "traffic factor (as NCCL's tests report it).</p>\n",
      shown, count_text(static_cast<int64_t>(doc_.collective_rows.size())));
  std::vector<std::pair<std::string, std::string>> entries;
  std::map<std::string, bool> seen;
  for (const CollectiveRow* row : order) {
    if (!seen.emplace(row->type, true).second) continue;
    entries.emplace_back(palette(type_color[row->type]), escape_markup(row->type));
  }
  legend(entries);

  constexpr double kRow = 26;
  constexpr double kLeft = 300;
  constexpr double kRight = kWideChart - 86;
  constexpr double kTop = 6;
  const double bottom = kTop + kRow * static_cast<double>(shown);
  const double height = bottom + 44;
  const Axis axis = nice_axis(order.front()->duration, 6);
  open_svg("collectives-chart", kWideChart, height, "the longest collectives by duration",
           fmt::format(" data-bars=\"{}\"", shown));
  horizontal_value_axis(axis, kLeft, kRight, kTop, bottom, true);
  for (size_t idx = 0; idx < shown; ++idx) {
    const CollectiveRow& row = *order[idx];
    const double y = kTop + kRow * static_cast<double>(idx);
    const double width = (kRight - kLeft) *
                         static_cast<double>(std::max<int64_t>(row.duration, 0)) /
                         static_cast<double>(axis.max);
    const std::string tooltip =
        fmt::format("{} on {} ({} ranks), {}\nstart {}, duration {}\nbus bandwidth {}{}", row.type,
                    group_label(row.group), row.ranks, bytes_text(row.bytes), time_text(row.start),
                    time_text(row.duration), gbps_text(row.busbw),
                    row.algorithm.empty() ? std::string() : "\nalgorithm " + row.algorithm);
    add("<g class=\"collective-bar\" data-duration-ns=\"{}\"><title>{}</title>"
        "<text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"end\" dy=\"0.32em\">{}. {} "
        "\u00b7 {} \u00b7 {}</text>"
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"2\" fill=\"{}\"/>"
        "<text class=\"value\" x=\"{}\" y=\"{}\" dy=\"0.32em\">{}</text></g>\n",
        row.duration, escape_markup(tooltip), coord(kLeft - 10), coord(y + kRow / 2), idx + 1,
        escape_markup(row.type), escape_markup(group_label(row.group)), bytes_text(row.bytes),
        coord(kLeft), coord(y + 4), coord(width), coord(kRow - 8), palette(type_color[row.type]),
        coord(kLeft + width + 6), coord(y + kRow / 2), time_text(row.duration));
  }
  add("<text class=\"title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">duration</text>\n",
      coord((kLeft + kRight) / 2), coord(height - 6));
  add("</svg>\n");

  const bool algorithms = std::any_of(
      order.begin(), order.end(), [](const CollectiveRow* row) { return !row->algorithm.empty(); });
  const bool algbw = std::any_of(order.begin(), order.end(),
                                 [](const CollectiveRow* row) { return row->algbw.has_value(); });
  add("<table id=\"collectives-table\">\n<thead><tr><th class=\"num\">#</th><th>type</th>"
      "<th>group</th><th class=\"num\">ranks</th><th class=\"num\">size</th>"
      "<th class=\"num\">start</th><th class=\"num\">duration</th>{}{}"
      "<th class=\"num\">bus bandwidth</th></tr></thead>\n<tbody>\n",
      algorithms ? "<th>algorithm</th>" : "",
      algbw ? "<th class=\"num\">algorithm bandwidth</th>" : "");
  for (size_t idx = 0; idx < shown; ++idx) {
    const CollectiveRow& row = *order[idx];
    add("<tr><td class=\"num\">{}</td><td><span class=\"dot\" style=\"background:{}\"></span>{}"
        "</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td><td class=\"num\">{}</td>",
        idx + 1, palette(type_color[row.type]), escape_markup(row.type),
        escape_markup(group_text(row.group)), count_text(row.ranks), bytes_text(row.bytes),
        time_text(row.start), time_text(row.duration));
    if (algorithms)
      add("<td>{}</td>", row.algorithm.empty() ? "&ndash;" : escape_markup(row.algorithm));
    if (algbw) {
      add("<td class=\"num\">{}</td>", row.algbw ? gbps_text(*row.algbw) : "&ndash;");
    }
    add("<td class=\"num\">{}</td></tr>\n", gbps_text(row.busbw));
  }
  add("</tbody>\n</table>\n</section>\n");
}

void Page::links() {
  add("<section id=\"links\">\n<h2>Link utilization</h2>\n");
  if (doc_.dimension_rows.empty() && doc_.link_rows.empty()) {
    add("<p class=\"empty\">The result lists no network dimensions or links.</p>\n</section>\n");
    return;
  }
  // The busiest link of each dimension, by position in dimension_rows.
  std::vector<double> busiest(doc_.dimension_rows.size(), 0.0);
  for (const LinkRow& link : doc_.link_rows) {
    for (size_t dim = 0; dim < doc_.dimension_rows.size(); ++dim) {
      if (doc_.dimension_rows[dim].dimension == link.dimension)
        busiest[dim] = std::max(busiest[dim], link.utilization);
    }
  }
  int64_t links_total = 0;
  for (const DimensionRow& dim : doc_.dimension_rows) links_total += dim.links;
  const auto listed = static_cast<int64_t>(doc_.link_rows.size());
  add("<p class=\"note\">Utilization is the time a link was busy over the simulated time. {} "
      "directed links in {} dimensions; {} carried traffic{}.</p>\n",
      count_text(links_total), doc_.dimension_rows.size(), count_text(listed),
      links_total > listed
          ? fmt::format(" (the {} idle ones are not in the result, nor in the histogram)",
                        count_text(links_total - listed))
          : std::string());
  add("<div class=\"two\">\n<div>\n<h3>By dimension</h3>\n");
  dimension_chart(busiest);
  add("</div>\n<div>\n<h3>Links by utilization</h3>\n");
  link_histogram();
  add("</div>\n</div>\n");

  if (doc_.link_rows.empty()) {
    add("</section>\n");
    return;
  }
  std::vector<const LinkRow*> order;
  for (const LinkRow& link : doc_.link_rows) order.push_back(&link);
  std::stable_sort(order.begin(), order.end(), [](const LinkRow* a, const LinkRow* b) {
    return a->utilization > b->utilization;
  });
  const size_t shown = std::min<size_t>(order.size(), options_.top_links);
  add("<h3>Busiest links</h3>\n<table id=\"links-table\">\n<thead><tr><th class=\"num\">#</th>"
      "<th>link</th><th class=\"num\">dimension</th><th class=\"num\">bytes</th>"
      "<th class=\"num\">messages</th><th class=\"num\">busy</th>"
      "<th class=\"num\">utilization</th><th class=\"num\">peak queue</th></tr></thead>\n"
      "<tbody>\n");
  for (size_t idx = 0; idx < shown; ++idx) {
    const LinkRow& link = *order[idx];
    add("<tr><td class=\"num\">{}</td><td>{} &rarr; {}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
        idx + 1, link.src, link.dst, link.dimension, bytes_text(link.bytes),
        link.messages ? count_text(*link.messages) : "&ndash;", time_text(link.busy),
        percent_text(link.utilization), link.peak_queue ? count_text(*link.peak_queue) : "&ndash;");
  }
  add("</tbody>\n</table>\n</section>\n");
}

void Page::dimension_chart(const std::vector<double>& busiest) {
  const size_t count = doc_.dimension_rows.size();
  if (count == 0) {
    add("<p class=\"empty\">No dimensions.</p>\n");
    return;
  }
  std::vector<std::pair<std::string, std::string>> entries;
  for (size_t idx = 0; idx < count; ++idx) {
    entries.emplace_back(palette(idx + 2),
                         fmt::format("dim {}", doc_.dimension_rows[idx].dimension));
  }
  legend(entries, "busiest link (bars: mean over the links)");
  double highest = 0;
  for (size_t dim = 0; dim < count; ++dim)
    highest = std::max({highest, doc_.dimension_rows[dim].utilization, busiest[dim]});
  const Axis axis = nice_axis(basis_points(highest), 5);
  // Rows fill about the histogram's height when there are few dimensions.
  const double row = std::max(52.0, 200.0 / static_cast<double>(count));
  constexpr double kLeft = 150;
  constexpr double kRight = kHalfChart - 128;
  constexpr double kValues = kRight + 20;  // the figures, in a column right of the bars
  constexpr double kTop = 6;
  const double bottom = kTop + row * static_cast<double>(count);
  const double height = bottom + 44;
  open_svg("dimensions-chart", kHalfChart, height, "utilization per network dimension",
           fmt::format(" data-bars=\"{}\"", count));
  horizontal_value_axis(axis, kLeft, kRight, kTop, bottom, false);
  auto x_of = [&](double fraction) {
    return kLeft + (kRight - kLeft) * fraction * 10000 / static_cast<double>(axis.max);
  };
  for (size_t idx = 0; idx < count; ++idx) {
    const DimensionRow& dim = doc_.dimension_rows[idx];
    const double y = kTop + row * static_cast<double>(idx);
    const double bar_height = std::min(28.0, row - 24);
    const double bar_top = y + (row - bar_height) / 2;
    const std::string tooltip = fmt::format(
        "dimension {}: {} of {}, {} per link\nmean utilization {}, busiest link {}\n{} of {} links "
        "used, {} carried",
        dim.dimension, dim.topology, dim.size, gbps_text(dim.bandwidth_gbps),
        percent_text(dim.utilization), percent_text(busiest[idx]), count_text(dim.links_used),
        count_text(dim.links), bytes_text(dim.bytes));
    add("<g class=\"dimension-bar\" data-dimension=\"{}\" data-utilization=\"{:.6f}\">"
        "<title>{}</title>"
        "<text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">dim {} \u00b7 {} \u00d7 {}"
        "</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{} \u00b7 {}/{} links</text>"
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"2\" fill=\"{}\"/>"
        "<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2.5\"/>"
        "<text class=\"value\" x=\"{}\" y=\"{}\">{} mean</text>"
        "<text x=\"{}\" y=\"{}\">busiest {}</text></g>\n",
        dim.dimension, dim.utilization, escape_markup(tooltip), coord(kLeft - 10),
        coord(y + row / 2 - 3), dim.dimension, escape_markup(dim.topology), dim.size,
        coord(kLeft - 10), coord(y + row / 2 + 12), gbps_text(dim.bandwidth_gbps),
        count_text(dim.links_used), count_text(dim.links), coord(kLeft), coord(bar_top),
        coord(x_of(dim.utilization) - kLeft), coord(bar_height), palette(idx + 2),
        coord(x_of(busiest[idx])), coord(x_of(busiest[idx])), coord(bar_top - 4),
        coord(bar_top + bar_height + 4), kInk, coord(kValues), coord(y + row / 2 - 3),
        percent_text(dim.utilization), coord(kValues), coord(y + row / 2 + 12),
        percent_text(busiest[idx]));
  }
  add("<text class=\"title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">utilization</text>\n",
      coord((kLeft + kRight) / 2), coord(height - 6));
  add("</svg>\n");
}

void Page::link_histogram() {
  if (doc_.link_rows.empty()) {
    add("<p class=\"empty\">No link carried traffic.</p>\n");
    return;
  }
  double highest = 0;
  for (const LinkRow& link : doc_.link_rows) highest = std::max(highest, link.utilization);
  // Bins of equal width from 0 to the busiest link's utilization, rounded up to a whole step.
  const Axis bins_axis = nice_axis(basis_points(highest), 10);
  const auto bins = static_cast<size_t>(bins_axis.max / bins_axis.step);
  // Dimensions in order; links of a dimension missing from `dimensions` stack last, together.
  std::vector<int64_t> dims;
  for (const DimensionRow& dim : doc_.dimension_rows) dims.push_back(dim.dimension);
  std::vector<std::vector<int64_t>> counts(bins, std::vector<int64_t>(dims.size() + 1, 0));
  bool unknown_dim = false;
  for (const LinkRow& link : doc_.link_rows) {
    const int64_t points = basis_points(link.utilization);
    size_t bin = static_cast<size_t>(std::max<int64_t>(points - 1, 0) / bins_axis.step);
    bin = std::min(bin, bins - 1);
    size_t layer = dims.size();
    for (size_t idx = 0; idx < dims.size(); ++idx) {
      if (dims[idx] == link.dimension) layer = idx;
    }
    unknown_dim = unknown_dim || layer == dims.size();
    ++counts[bin][layer];
  }
  std::vector<std::pair<std::string, std::string>> entries;
  for (size_t idx = 0; idx < dims.size(); ++idx)
    entries.emplace_back(palette(idx + 2), fmt::format("dim {}", dims[idx]));
  if (unknown_dim) entries.emplace_back("#8c959f", "other");
  legend(entries);

  int64_t tallest = 0;
  for (const auto& bin : counts) {
    int64_t total = 0;
    for (const int64_t value : bin) total += value;
    tallest = std::max(tallest, total);
  }
  const Axis y_axis = nice_axis(tallest, 5);
  constexpr double kHeight = 250;
  constexpr double kLeft = 46;
  constexpr double kRight = kHalfChart - 14;
  constexpr double kTop = 8;
  constexpr double kBottom = kHeight - 44;
  open_svg("links-histogram", kHalfChart, kHeight, "histogram of link utilization",
           fmt::format(" data-bins=\"{}\"", bins));
  vertical_value_axis(y_axis, kLeft, kRight, kTop, kBottom, false);
  const double slot = (kRight - kLeft) / static_cast<double>(bins);
  auto y_of = [&](int64_t value) {
    return kBottom -
           (kBottom - kTop) * static_cast<double>(value) / static_cast<double>(y_axis.max);
  };
  for (size_t bin = 0; bin < bins; ++bin) {
    const int64_t low = bins_axis.step * static_cast<int64_t>(bin);
    const int64_t high = low + bins_axis.step;
    int64_t total = 0;
    for (const int64_t value : counts[bin]) total += value;
    add("<g class=\"histogram-bin\" data-links=\"{}\"><title>{} to {}: {} links</title>", total,
        percent_tick(low, bins_axis), percent_tick(high, bins_axis), total);
    int64_t stacked = 0;
    const double x = kLeft + slot * static_cast<double>(bin) + 1;
    for (size_t layer = 0; layer < counts[bin].size(); ++layer) {
      const int64_t value = counts[bin][layer];
      if (value == 0) continue;
      add("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>", coord(x),
          coord(y_of(stacked + value)), coord(slot - 2),
          coord(y_of(stacked) - y_of(stacked + value)),
          layer < dims.size() ? palette(layer + 2) : "#8c959f");
      stacked += value;
    }
    add("</g>\n");
  }
  // Bin edges under the axis, thinned out when bins are narrow.
  const size_t every = slot < 44 ? 2 : 1;
  for (size_t edge = 0; edge <= bins; edge += every) {
    add("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
        coord(kLeft + slot * static_cast<double>(edge)), coord(kBottom + 16),
        percent_tick(bins_axis.step * static_cast<int64_t>(edge), bins_axis));
  }
  add("\n<text class=\"title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">utilization</text>\n",
      coord((kLeft + kRight) / 2), coord(kHeight - 6));
  add("<text class=\"title\" transform=\"translate(12 {}) rotate(-90)\" "
      "text-anchor=\"middle\">links</text>\n",
      coord((kTop + kBottom) / 2));
  add("</svg>\n");
}

}  // namespace

Expected<nlohmann::json> read_json_file(const std::string& path) {
  Expected<std::string> text = read_text_file(path);
  if (!text) return text.error();
  try {
    return nlohmann::json::parse(*text);
  } catch (const nlohmann::json::exception& error) {
    // A syntax error or a number beyond a double's range ("1e999"). The library's message starts
    // with "[json.exception.parse_error.101] "; keep what follows.
    std::string message = error.what();
    if (const size_t end = message.find("] ");
        message.rfind("[json.", 0) == 0 && end != std::string::npos) {
      message = message.substr(end + 2);
    }
    return Error::make(ErrorKind::kParse, "{}: not JSON: {}", path, message);
  }
}

Expected<std::string> render_html_report(const nlohmann::json& result,
                                         const HtmlReportOptions& options) {
  Expected<RunDoc> doc = read_document(result);
  if (!doc) return doc.error();
  return Page(*doc, options).render();
}

}  // namespace orrery::report
