// report/html_report.h: a run's JSON result (orrery-run/1) as one self-contained HTML page.
//
// `orrery report result.json -o report.html` reads what `orrery run --output` wrote and renders a
// summary, a stacked time breakdown per rank, the longest collectives and link utilization by
// dimension. Charts are inline SVG drawn here; the page loads nothing (no scripts, fonts or style
// sheets from elsewhere) and works offline. What it shows and how it aggregates many ranks:
// docs/formats/report.md.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"

namespace orrery::report {

// What the page shows; the defaults are those of `orrery report`.
struct HtmlReportOptions {
  uint32_t top_collectives = 10;  // rows in the longest-collectives chart and table (at least 1)
  uint32_t top_links = 10;        // rows in the busiest-links table
  uint32_t max_rank_bars = 64;    // above this many ranks, consecutive ranks share one bar
};

// Reads the JSON document at `path`. Errors name the file: it cannot be opened, or it is not JSON
// (with the parser's line and column).
Expected<nlohmann::json> read_json_file(const std::string& path);

// Renders an orrery-run/1 document (report::run_result_to_json) as a complete HTML page.
//
// Errors (ErrorKind::kParse) say why `result` is not such a document, naming the first missing or
// mistyped key by its path: `ranks[3]: missing "finish_ns" (expected a number)`. Keys the page does
// not need may be absent. Deterministic: the same document gives byte-identical HTML (the run's
// wall-clock time is not shown, so two identical runs give identical pages). Cost: linear in the
// document, plus sorting the collectives and links.
Expected<std::string> render_html_report(const nlohmann::json& result,
                                         const HtmlReportOptions& options = {});

}  // namespace orrery::report
