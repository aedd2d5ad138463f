// design/sweep_report.h: `orrery sweep report`: a sweep database as one self-contained HTML page.
//
// The page opens offline (inline SVG, no script, nothing loaded from elsewhere) and holds: the
// summary (points ran, rejected, failed; the best point; the spread between clusters; the gain
// from memory expansion), the best points with their breakdown as stacked bars (compute, exposed
// communication per parallelism, bubble, offload), the time-versus-cost chart of every point that
// ran with the Pareto frontier drawn through it and listed, the best point per budget with and
// without offload, each axis's sensitivity as bars and as the best time per value, and the
// rejections counted by reason. The same database always gives the same bytes.
#pragma once

#include <string>

#include "design/sweep_answers.h"
#include "design/sweep_store.h"

namespace orrery::design {

std::string sweep_report_html(const StoredSweep& sweep, const SweepAnswers& answers);

}  // namespace orrery::design
