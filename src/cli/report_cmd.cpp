// `orrery report`: a run's JSON result as one self-contained HTML page.
//
//   orrery report result.json -o report.html [--top N] [--top-links N] [--max-rank-bars N]
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/text_file.h"
#include "report/html_report.h"

namespace orrery::cli {

namespace {

struct ReportOptions {
  std::string input;
  std::string output;
  report::HtmlReportOptions html;
};

int run_report(const ReportOptions& options) {
  Expected<nlohmann::json> json = report::read_json_file(options.input);
  if (!json) return report_error(json.error());
  Expected<std::string> html = report::render_html_report(*json, options.html);
  if (!html) return report_error(html.error().with_context(options.input));
  if (options.output == "-") {
    std::cout << *html;
    return std::cout ? 0 : 1;
  }
  std::string output = options.output;
  if (output.empty()) output = std::filesystem::path(options.input).replace_extension(".html");
  if (Status written = write_text_file(output, *html); !written) {
    return report_error(written.error());
  }
  fmt::print("wrote {}\n", output);
  return 0;
}

}  // namespace

void add_report_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<ReportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Render the JSON of `orrery run --output` as one self-contained HTML page (works offline):\n"
      "summary, time per rank (compute, host CPU, exposed communication, memory, idle), the\n"
      "longest collectives and link utilization by dimension, as inline SVG charts. Above\n"
      "--max-rank-bars ranks, consecutive ranks share a bar (their mean, with the spread of\n"
      "finish times). See docs/formats/report.md\n"
      "  e.g. orrery report result.json -o report.html");
  cmd->add_option("result", options->input, "JSON result written by `orrery run --output`")
      ->required();
  cmd->add_option("-o,--output", options->output,
                  "HTML file to write (default: the result's name with .html; - for stdout)");
  cmd->add_option("--top", options->html.top_collectives,
                  "collectives in the longest-collectives chart and table")
      ->default_val(options->html.top_collectives)
      ->check(CLI::PositiveNumber);
  cmd->add_option("--top-links", options->html.top_links, "links in the busiest-links table")
      ->default_val(options->html.top_links)
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-rank-bars", options->html.max_rank_bars,
                  "most bars in the time-per-rank chart; more ranks are grouped")
      ->default_val(options->html.max_rank_bars)
      ->check(CLI::PositiveNumber);
  cmd->callback([options, &exit_code] { exit_code = run_report(*options); });
}

}  // namespace orrery::cli
