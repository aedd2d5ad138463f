// design/libra_report.h: what `orrery libra` prints and writes.
//
// format_libra_table: the per-dimension table (optimal, equal-split and given bandwidths, traffic,
// busy time, cost) and the summary lines (time, speedup, cost change, certificate).
// libra_json: the same as one JSON document. frontier_svg: a self-contained SVG of iteration time
// against network cost over a budget sweep, with the equal split, the given network and the
// optimum marked; frontier_html the same as a page with a table. All output is a pure function of
// its inputs (fixed number formatting).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "design/libra_model.h"
#include "design/libra_solver.h"

namespace orrery::design {

std::string format_libra_table(const Problem& problem, const TrafficModel& model,
                               const Solution& solution);
nlohmann::json libra_json(const Problem& problem, const TrafficModel& model,
                          const Solution& solution);
std::string frontier_svg(const Problem& problem, const Solution& solution,
                         const std::vector<FrontierPoint>& frontier);
// A self-contained HTML page: the optimum, equal split and given network, the SVG inline and a
// table of every frontier point (budget, cost, time, bandwidths, gap). No scripts, no external
// files.
std::string frontier_html(const Problem& problem, const Solution& solution,
                          const std::vector<FrontierPoint>& frontier);

}  // namespace orrery::design
