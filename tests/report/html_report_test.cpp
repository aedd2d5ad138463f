// The HTML report: what it shows for a run's JSON, how it groups many ranks, that it loads nothing
// from elsewhere, that it is deterministic, and the errors for documents of another kind.
#include "report/html_report.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "report/run_report.h"
#include "sim/simulation.h"
#include "system/collective.h"

namespace orrery::report {
namespace html_report_test {

using nlohmann::json;

size_t count_of(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++count;
  return count;
}

// The part of `html` from the element with `id` to the end of its section.
std::string section(const std::string& html, const std::string& id) {
  const size_t start = html.find("id=\"" + id + "\"");
  EXPECT_NE(start, std::string::npos) << id;
  if (start == std::string::npos) return "";
  return html.substr(start, html.find("</section>", start) - start);
}

// An orrery-run/1 document as `orrery run --output` writes it: `ranks` ranks whose finish times
// grow with the rank (the last is the slowest), three collectives, two dimensions, four links.
json make_result(int ranks) {
  json doc = {{"format", "orrery-run/1"},
              {"workload", "examples/llama/workload"},
              {"network", "examples/llama/network.yml"},
              {"system", "examples/llama/system.json"},
              {"backend", "analytical"},
              {"timing", "astra-sim"}};
  const int64_t slowest_finish = 200000 + 1000 * static_cast<int64_t>(ranks - 1);
  doc["summary"] = {{"ranks", ranks},
                    {"simulated_ns", slowest_finish},
                    {"slowest_rank", ranks - 1},
                    {"collectives", 3},
                    {"events", 3520},
                    {"messages", 912},
                    {"wall_seconds", 0.01}};
  doc["ranks"] = json::array();
  for (int rank = 0; rank < ranks; ++rank) {
    const int64_t finish = 200000 + 1000 * static_cast<int64_t>(rank);
    doc["ranks"].push_back({{"rank", rank},
                            {"finish_ns", finish},
                            {"exposed_comm_ns", finish - 3000},
                            {"compute_ns", 3000},
                            {"cpu_ns", 500},
                            {"comm_ns", 150000},
                            {"comm_not_overlapped_ns", 140000},
                            {"memory_ns", 1500},
                            {"busy_ns", 145000},
                            {"idle_ns", finish - 145000},
                            {"nodes", 96},
                            {"collectives", 24},
                            {"sends", 2},
                            {"recvs", 2}});
  }
  doc["collectives"] = json::array({{{"type", "all-gather"},
                                     {"group", "5"},
                                     {"sequence", 0},
                                     {"bytes", 32768},
                                     {"ranks", 2},
                                     {"start_ns", 57},
                                     {"end_ns", 4289},
                                     {"duration_ns", 4232},
                                     {"algbw_gbps", 7.74},
                                     {"busbw_gbps", 3.87},
                                     {"first_node", 8}},
                                    {{"type", "all-reduce"},
                                     {"group", ""},
                                     {"sequence", 0},
                                     {"bytes", 10485760},
                                     {"ranks", 8},
                                     {"start_ns", 100000},
                                     {"end_ns", 187654},
                                     {"duration_ns", 87654},
                                     {"algbw_gbps", 119.6},
                                     {"busbw_gbps", 209.3},
                                     {"first_node", 40}},
                                    {{"type", "all-reduce"},
                                     {"group", "1"},
                                     {"sequence", 1},
                                     {"bytes", 393216},
                                     {"ranks", 2},
                                     {"start_ns", 5000},
                                     {"end_ns", 11300},
                                     {"duration_ns", 6300},
                                     {"algbw_gbps", 62.4},
                                     {"busbw_gbps", 62.4},
                                     {"first_node", 12}}});
  doc["links"] = json::array({{{"src", 0},
                               {"dst", 1},
                               {"dimension", 0},
                               {"bytes", 2883584},
                               {"busy_ns", 13427},
                               {"utilization", 0.0568},
                               {"messages", 200},
                               {"peak_queue", 2}},
                              {{"src", 1},
                               {"dst", 2},
                               {"dimension", 0},
                               {"bytes", 1441792},
                               {"busy_ns", 6713},
                               {"utilization", 0.0284},
                               {"messages", 100},
                               {"peak_queue", 1}},
                              {{"src", 0},
                               {"dst", 4},
                               {"dimension", 1},
                               {"bytes", 65536},
                               {"busy_ns", 1220},
                               {"utilization", 0.0052},
                               {"messages", 4},
                               {"peak_queue", 1}},
                              {{"src", 4},
                               {"dst", 0},
                               {"dimension", 1},
                               {"bytes", 65536},
                               {"busy_ns", 1220},
                               {"utilization", 0.0052},
                               {"messages", 4},
                               {"peak_queue", 1}}});
  doc["dimensions"] = json::array({{{"dimension", 0},
                                    {"topology", "Ring"},
                                    {"size", 4},
                                    {"bandwidth_gbps", 200.0},
                                    {"links", 16},
                                    {"links_used", 2},
                                    {"bytes", 4325376},
                                    {"busy_ns", 20140},
                                    {"utilization", 0.00533}},
                                   {{"dimension", 1},
                                    {"topology", "Switch"},
                                    {"size", 2},
                                    {"bandwidth_gbps", 50.0},
                                    {"links", 16},
                                    {"links_used", 2},
                                    {"bytes", 131072},
                                    {"busy_ns", 2440},
                                    {"utilization", 0.00065}}});
  return doc;
}

std::string render(const json& doc, const HtmlReportOptions& options = {}) {
  Expected<std::string> html = render_html_report(doc, options);
  EXPECT_TRUE(html) << html.error().message();
  return html ? *html : std::string();
}

std::string error_of(const json& doc) {
  Expected<std::string> html = render_html_report(doc);
  EXPECT_FALSE(html) << "expected an error";
  return html ? std::string() : html.error().message();
}

// ---- what the page shows ----

TEST(HtmlReport, is_one_complete_html_page) {
  const std::string html = render(make_result(8));
  EXPECT_EQ(html.rfind("<!DOCTYPE html>\n<html lang=\"en\">", 0), 0u);
  EXPECT_NE(html.find("<meta charset=\"utf-8\">"), std::string::npos);
  EXPECT_NE(html.find("<title>orrery report: llama/workload</title>"), std::string::npos);
  // The title names the workload by its last two path components; the summary has the full path.
  EXPECT_NE(html.find("<h1>llama/workload</h1>"), std::string::npos);
  EXPECT_EQ(html.substr(html.size() - 8), "</html>\n");
  for (const char* id : {"summary", "breakdown", "collectives", "links"})
    EXPECT_NE(html.find(fmt::format("<section id=\"{}\">", id)), std::string::npos) << id;
}

TEST(HtmlReport, summary_shows_the_run_figures) {
  const std::string summary = section(render(make_result(8)), "summary");
  // Simulated time: people's units and the exact nanoseconds.
  EXPECT_NE(summary.find("<div class=\"value\">207.0 \u00b5s</div>"), std::string::npos) << summary;
  EXPECT_NE(summary.find("207,000 ns"), std::string::npos);
  // The slowest rank, when it finishes, and the fastest for the spread.
  EXPECT_NE(summary.find("data-key=\"slowest_rank\"><div class=\"label\">Slowest rank</div>"
                         "<div class=\"value\">7</div>"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("finishes at 207.0 \u00b5s; fastest rank 0 at 200.0 \u00b5s"),
            std::string::npos);
  for (const char* text : {">8<", ">analytical<", "astra-sim timing", ">912<", "3,520 events",
                           "examples/llama/workload", "examples/llama/network.yml",
                           "examples/llama/system.json", "longest 87.65 \u00b5s"}) {
    EXPECT_NE(summary.find(text), std::string::npos) << text;
  }
  // Means over the ranks: 3 us compute, 140 us communication not overlapped with compute.
  EXPECT_NE(summary.find("<div class=\"value\">3.00 \u00b5s</div>"), std::string::npos);
  EXPECT_NE(summary.find("<div class=\"value\">140.0 \u00b5s</div>"), std::string::npos);
}

TEST(HtmlReport, one_stacked_bar_per_rank_for_small_runs) {
  const std::string chart = section(render(make_result(8)), "breakdown-chart");
  EXPECT_NE(chart.find("data-bars=\"8\" data-ranks-per-bar=\"1\""), std::string::npos);
  EXPECT_EQ(count_of(chart, "<g class=\"rank-bar\""), 8u);
  // Every activity is a segment of every bar, and each bar has its finish line.
  for (const char* part : {"seg-compute", "seg-cpu", "seg-comm", "seg-memory", "seg-idle"})
    EXPECT_EQ(count_of(chart, part), 8u) << part;
  EXPECT_EQ(count_of(chart, "class=\"finish\""), 8u);
  EXPECT_NE(chart.find("data-label=\"7\" data-finish-ns=\"207000\""), std::string::npos);
  // Tick labels in microseconds, on a 1-2-5 scale.
  EXPECT_NE(chart.find(">250 \u00b5s</text>"), std::string::npos) << chart;
  EXPECT_NE(chart.find(">rank</text>"), std::string::npos);
}

TEST(HtmlReport, a_rank_without_some_activity_has_no_empty_segment) {
  json doc = make_result(2);
  doc["ranks"][1]["memory_ns"] = 0;
  const std::string chart = section(render(doc), "breakdown-chart");
  EXPECT_EQ(count_of(chart, "seg-memory"), 1u);
}

TEST(HtmlReport, many_ranks_share_bars_of_consecutive_ranks) {
  const std::string html = render(make_result(1000));
  const std::string chart = section(html, "breakdown-chart");
  // 1000 ranks, at most 64 bars: 16 ranks per bar, 63 bars (the last holds 8 ranks).
  EXPECT_NE(chart.find("data-bars=\"63\" data-ranks-per-bar=\"16\""), std::string::npos);
  EXPECT_EQ(count_of(chart, "<g class=\"rank-bar\""), 63u);
  EXPECT_NE(chart.find("data-label=\"0\u201315\""), std::string::npos);
  EXPECT_NE(chart.find("data-label=\"992\u2013999\""), std::string::npos);
  // A bar's finish line is its slowest rank; the tooltip gives the spread.
  EXPECT_NE(chart.find("data-label=\"992\u2013999\" data-finish-ns=\"1199000\""),
            std::string::npos);
  EXPECT_NE(chart.find("ranks 0\u201315 (16 ranks): finish 200.0 \u00b5s to 215.0 \u00b5s "
                       "(slowest rank 15)"),
            std::string::npos);
  EXPECT_NE(section(html, "breakdown").find("1,000 ranks in 63 bars of 16 consecutive ranks"),
            std::string::npos);
}

TEST(HtmlReport, the_bar_limit_is_an_option) {
  HtmlReportOptions options;
  options.max_rank_bars = 4;
  const std::string chart = section(render(make_result(8), options), "breakdown-chart");
  EXPECT_EQ(count_of(chart, "<g class=\"rank-bar\""), 4u);
  EXPECT_NE(chart.find("data-label=\"6\u20137\""), std::string::npos);
}

TEST(HtmlReport, longest_collectives_first_with_their_figures) {
  const std::string html = render(make_result(8));
  const std::string chart = section(html, "collectives-chart");
  EXPECT_EQ(count_of(chart, "<g class=\"collective-bar\""), 3u);
  // Longest first: the all-reduce over all ranks (87,654 ns), then the all-reduce of group 1, then
  // the all-gather.
  const size_t first = chart.find("data-duration-ns=\"87654\"");
  const size_t second = chart.find("data-duration-ns=\"6300\"");
  const size_t third = chart.find("data-duration-ns=\"4232\"");
  EXPECT_LT(first, second);
  EXPECT_LT(second, third);
  EXPECT_NE(chart.find("1. all-reduce \u00b7 all ranks \u00b7 10.00 MiB"), std::string::npos);
  const std::string table = section(html, "collectives-table");
  const size_t row = table.find("<tr><td class=\"num\">1</td>");
  ASSERT_NE(row, std::string::npos) << table;
  const std::string first_row = table.substr(row, table.find("</tr>", row) - row);
  EXPECT_NE(first_row.find("all-reduce</td><td>all ranks</td><td class=\"num\">8</td>"
                           "<td class=\"num\">10.00 MiB</td><td class=\"num\">100.0 \u00b5s</td>"
                           "<td class=\"num\">87.65 \u00b5s</td><td class=\"num\">120 GB/s</td>"
                           "<td class=\"num\">209 GB/s</td>"),
            std::string::npos)
      << first_row;
  // No algorithm column when the result names none.
  EXPECT_EQ(table.find("<th>algorithm</th>"), std::string::npos);
}

TEST(HtmlReport, shows_the_algorithm_when_the_result_names_it) {
  json doc = make_result(8);
  doc["collectives"][1]["algorithm"] = "ring";
  const std::string table = section(render(doc), "collectives-table");
  EXPECT_NE(table.find("<th>algorithm</th>"), std::string::npos);
  EXPECT_NE(table.find("<td>ring</td>"), std::string::npos);
  EXPECT_EQ(count_of(table, "<td>&ndash;</td>"), 2u) << "the other two have none";
}

TEST(HtmlReport, top_cuts_the_collectives) {
  HtmlReportOptions options;
  options.top_collectives = 1;
  const std::string html = render(make_result(8), options);
  EXPECT_EQ(count_of(section(html, "collectives-chart"), "<g class=\"collective-bar\""), 1u);
  EXPECT_NE(html.find("The 1 longest of 3 collectives"), std::string::npos);
}

TEST(HtmlReport, link_utilization_by_dimension_and_histogram) {
  const std::string html = render(make_result(8));
  const std::string dims = section(html, "dimensions-chart");
  EXPECT_EQ(count_of(dims, "<g class=\"dimension-bar\""), 2u);
  EXPECT_NE(dims.find("dim 0 \u00b7 Ring \u00d7 4"), std::string::npos);
  EXPECT_NE(dims.find("200 GB/s \u00b7 2/16 links"), std::string::npos);
  EXPECT_NE(dims.find("0.53% mean"), std::string::npos);
  EXPECT_NE(dims.find("busiest 5.68%"), std::string::npos);
  // Bins of 1% up to 6% (the busiest link, 5.68%, rounded up); every listed link in one bin.
  const std::string histogram = section(html, "links-histogram");
  EXPECT_NE(histogram.find("data-bins=\"6\""), std::string::npos);
  EXPECT_EQ(count_of(histogram, "<g class=\"histogram-bin\""), 6u);
  EXPECT_NE(histogram.find("data-links=\"2\"><title>0 to 1%: 2 links"), std::string::npos);
  EXPECT_NE(histogram.find("data-links=\"1\"><title>2% to 3%: 1 links"), std::string::npos);
  EXPECT_NE(histogram.find("data-links=\"1\"><title>5% to 6%: 1 links"), std::string::npos);
  // Idle links are not in the result; the page says how many.
  EXPECT_NE(html.find("32 directed links in 2 dimensions; 4 carried traffic (the 28 idle"),
            std::string::npos);
  // Busiest links first.
  const std::string table = section(html, "links-table");
  EXPECT_LT(table.find("0 &rarr; 1"), table.find("1 &rarr; 2"));
  EXPECT_NE(table.find("<td class=\"num\">5.68%</td>"), std::string::npos);
}

TEST(HtmlReport, an_empty_run_still_renders) {
  json doc = make_result(0);
  doc["collectives"] = json::array();
  doc["links"] = json::array();
  doc["dimensions"] = json::array();
  const std::string html = render(doc);
  EXPECT_NE(html.find("The result lists no ranks."), std::string::npos);
  EXPECT_NE(html.find("The run has no collectives."), std::string::npos);
  EXPECT_NE(html.find("The result lists no network dimensions or links."), std::string::npos);
}

TEST(HtmlReport, accepts_what_run_result_to_json_writes) {
  sim::RunResult result;
  result.ranks = 2;
  result.backend = "congestion-aware";
  result.collective_group_names = {"", "tp"};
  for (uint32_t rank = 0; rank < 2; ++rank) {
    workload::RankResult row;
    row.rank = rank;
    row.finished = true;
    row.finish = SimTime::from_ps(1'000'000 * (rank + 1));
    row.gpu_compute = SimTime::from_ps(400'000);
    row.comm_active = SimTime::from_ps(500'000);
    row.comm_exposed = SimTime::from_ps(300'000);
    row.busy = SimTime::from_ps(700'000);
    result.rank_results.push_back(row);
  }
  result.end = SimTime::from_ps(2'000'000);
  sys::CollectiveRecord record;
  record.group = 1;
  record.bytes = 1 << 20;
  record.ranks = 2;
  record.first_issue = SimTime::from_ps(10'000);
  record.last_finish = SimTime::from_ps(610'000);
  result.collectives.push_back(record);
  net::LinkStats link;
  link.src = 0;
  link.dst = 1;
  link.bytes = 1 << 20;
  link.busy = SimTime::from_ps(500'000);
  link.messages = 4;
  result.links.push_back(link);
  sim::DimensionSummary dim;
  dim.topology = "Ring";
  dim.size = 2;
  dim.bandwidth_gbps = 50;
  dim.links = 2;
  dim.links_used = 1;
  dim.bytes = 1 << 20;
  dim.busy = SimTime::from_ps(500'000);
  result.dimensions.push_back(dim);
  result.workload = "w";
  result.network = "n.yml";
  const json doc = json::parse(run_result_to_json(result, 0.5).dump());
  const std::string html = render(doc);
  EXPECT_NE(html.find("2,000 ns"), std::string::npos);
  EXPECT_NE(html.find("all-reduce \u00b7 group tp \u00b7 1.00 MiB"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">25.0%</td>"), std::string::npos) << "link 0 -> 1";
}

// ---- a page that stands alone ----

TEST(HtmlReport, loads_nothing_from_elsewhere) {
  const std::string html = render(make_result(8));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_EQ(html.find("https:"), std::string::npos);
  // The only URL is the SVG namespace, which names and loads nothing.
  EXPECT_EQ(count_of(html, "http:"), count_of(html, "xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_EQ(count_of(html, " src="), 0u);
  EXPECT_EQ(count_of(html, "href="), 1u);
  EXPECT_NE(html.find("<link rel=\"icon\" href=\"data:,\">"), std::string::npos);
}

TEST(HtmlReport, escapes_text_from_the_document) {
  json doc = make_result(2);
  doc["workload"] = "<script>alert('x')</script> & co";
  doc["collectives"][0]["group"] = "\"><b>";
  const std::string html = render(doc);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; co"),
            std::string::npos);
}

TEST(HtmlReport, the_same_document_gives_the_same_bytes) {
  const json doc = make_result(300);
  const std::string first = render(doc);
  EXPECT_EQ(first, render(json::parse(doc.dump())));
  EXPECT_EQ(first, render(doc));
  // The run's wall-clock time is not shown, so identical runs give identical pages.
  json again = doc;
  again["summary"]["wall_seconds"] = 12.5;
  EXPECT_EQ(first, render(again));
}

// ---- documents of another kind ----

TEST(HtmlReportErrors, a_document_without_format_is_of_another_kind) {
  const std::string message = error_of(json{{"traceEvents", json::array()}});
  EXPECT_NE(message.find("missing \"format\""), std::string::npos) << message;
  EXPECT_NE(message.find("not an orrery-run/1 document"), std::string::npos) << message;
}

TEST(HtmlReportErrors, another_format_is_named) {
  json doc = make_result(2);
  doc["format"] = "orrery-run/2";
  EXPECT_EQ(error_of(doc), "format is \"orrery-run/2\", expected \"orrery-run/1\"");
}

TEST(HtmlReportErrors, not_an_object) {
  EXPECT_EQ(error_of(json::array({1, 2})),
            "expected an orrery-run/1 document (a JSON object), found an array");
}

TEST(HtmlReportErrors, a_missing_key_is_named_by_its_path) {
  json doc = make_result(4);
  doc["ranks"][3].erase("finish_ns");
  EXPECT_EQ(error_of(doc), "ranks[3]: missing \"finish_ns\" (expected a number)");
  doc = make_result(4);
  doc.erase("summary");
  EXPECT_EQ(error_of(doc), "missing \"summary\" (expected an object)");
}

TEST(HtmlReportErrors, a_mistyped_key_is_named_by_its_path) {
  json doc = make_result(4);
  doc["summary"]["ranks"] = "4";
  EXPECT_EQ(error_of(doc), "summary.ranks: expected a number, found a string");
  doc = make_result(4);
  doc["links"][1] = 7;
  EXPECT_EQ(error_of(doc), "links[1]: expected an object, found a number");
  doc = make_result(4);
  doc["collectives"] = json::object();
  EXPECT_EQ(error_of(doc), "collectives: expected an array, found an object");
}

TEST(HtmlReportErrors, a_count_or_time_beyond_2_to_the_53_or_below_0_is_named_by_its_path) {
  // A duration of 2^64 ns saturated, and the chart's axis then stepped past it forever.
  json doc = make_result(4);
  doc["collectives"][1]["duration_ns"] = 18446744073709551616.0;
  EXPECT_EQ(error_of(doc),
            "collectives[1].duration_ns: expected a whole number from 0 to 2^53, found "
            "1.8446744073709552e+19");
  doc = make_result(4);
  doc["ranks"][0]["compute_ns"] = -5;
  EXPECT_EQ(error_of(doc), "ranks[0].compute_ns: expected a whole number from 0 to 2^53, found -5");
  doc = make_result(4);
  doc["links"][0]["peak_queue"] = 2.5;
  EXPECT_EQ(error_of(doc),
            "links[0].peak_queue: expected a whole number from 0 to 2^53, found 2.5");
  // 2^53 itself renders.
  doc = make_result(4);
  doc["collectives"][1]["duration_ns"] = int64_t{1} << 53;
  EXPECT_TRUE(render_html_report(doc));
}

TEST(HtmlReportErrors, optional_keys_may_be_absent) {
  json doc = make_result(2);
  doc.erase("system");
  doc.erase("timing");
  doc["summary"].erase("events");
  doc["links"][0].erase("messages");
  doc["collectives"][0].erase("algbw_gbps");
  EXPECT_TRUE(render_html_report(doc));
}

TEST(ReadJsonFile, names_the_file_that_cannot_be_read_or_parsed) {
  Expected<json> missing = read_json_file("/no/such/result.json");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message(),
            "/no/such/result.json: cannot open: No such file or directory");

  const std::string path =
      (std::filesystem::temp_directory_path() / "orrery-html-report-not-json.json").string();
  std::ofstream(path) << "{\"format\": \"orrery-run/1\",\n  oops}";
  Expected<json> broken = read_json_file(path);
  std::filesystem::remove(path);
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error().message().rfind(path + ": not JSON: parse error at line 2", 0), 0u)
      << broken.error().message();
}

// A number beyond a double is nlohmann's out_of_range, not a parse_error: it used to escape as an
// uncaught exception (exit 134).
TEST(ReadJsonFile, a_number_beyond_a_double_is_an_error_not_a_crash) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "orrery-html-report-overflow.json").string();
  std::ofstream(path) << "{\"summary\": {\"simulated_ns\": 1e999}}";
  Expected<json> overflow = read_json_file(path);
  std::filesystem::remove(path);
  ASSERT_FALSE(overflow);
  EXPECT_EQ(overflow.error().message(), path + ": not JSON: number overflow parsing '1e999'");
}

}  // namespace html_report_test
}  // namespace orrery::report
