// report/run_report.h: a run's results as JSON (`orrery run --output`) and CSV (`--csv-dir`).
//
// The schema is documented in docs/formats/results.md; `orrery report` reads the JSON back.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"
#include "sim/jobs.h"
#include "sim/simulation.h"

namespace orrery::report {

inline constexpr const char* kResultFormat = "orrery-run/1";

// Everything the run measured, as the text of one JSON document (indented by one space, a newline
// at the end): `orrery run --output`, the Python module's `json`. Streamed, not built as a tree.
std::string run_result_json_text(const sim::RunResult& result, double wall_seconds);

// Everything the run measured, in one JSON document (run_result_json_text, parsed). `wall_seconds`
// is the only field that varies between identical runs.
nlohmann::ordered_json run_result_to_json(const sim::RunResult& result, double wall_seconds);

// Several jobs on one network (`orrery run --jobs --output`, "format": "orrery-jobs/1",
// docs/formats/jobs.md): per job its iteration, alone, slowdown and per-rank figures; per link
// its bytes and the jobs that crossed it.
std::string jobs_result_json_text(const sim::Jobs& jobs, const sim::JobsResult& result,
                                  double wall_seconds);

// ranks.csv, collectives.csv, links.csv and dimensions.csv in `dir` (created if needed), with the
// same fields as the JSON arrays.
Status write_run_csv(const sim::RunResult& result, const std::string& dir);

}  // namespace orrery::report
