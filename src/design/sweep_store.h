// design/sweep_store.h: a sweep's results in SQLite, one row per point, resumable.
//
// The database has two tables (docs/formats/sweep.md): `meta` (key, value: the sweep file's text
// and hash, its name, the workload, the axis columns, the number of points, the budgets) and
// `points` (id INTEGER PRIMARY KEY, one column per axis, then status, reason, the offloaded set,
// the iteration time and its breakdown, the link utilization of every network dimension, memory,
// cost, throughput and simulation events). Rows are written in transactions: a sweep killed at any
// instant leaves every committed point and nothing half-written, and the same command continues
// with the points that are missing (a point is never written twice: its id is the primary key).
// A database made by another sweep file (a different hash) is refused, naming both files. No
// column depends on time, threads or ranks, so the same sweep gives the same rows however it ran.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "design/sweep_eval.h"
#include "design/sweep_file.h"
#include "design/sweep_space.h"

struct sqlite3;
struct sqlite3_stmt;

namespace orrery::design {

// The FNV-1a hash of a sweep file's bytes, as 16 hex digits.
std::string sweep_hash(const std::string& text);

// One stored point: its axes (in `StoredSweep::axes` order) and its result.
struct StoredRow {
  std::vector<Value> axes;
  PointResult result;
};

// What a database holds, for the answers and the report.
struct StoredSweep {
  std::string path;
  std::string name;
  std::string sweep_file;  // the text of the sweep file
  std::string workload;    // "llm gpt3-175b" / "dlrm dlrm-mlperf"
  uint64_t global_batch = 0;
  uint64_t points = 0;  // in the sweep (rows may be fewer while it runs)
  std::vector<Column> axes;
  size_t plan_axes_from = 0;  // axes[plan_axes_from..] are the plan's, the rest the cluster's
  size_t dimensions = 0;      // network dimensions
  std::vector<double> budgets;
  std::vector<StoredRow> rows;  // by id
};

class SweepStore {
 public:
  // Opens (or creates) the database for `spec` with `points` points. Errors: a database of another
  // sweep file, a file that is not an orrery sweep database, SQLite's own.
  static Expected<std::unique_ptr<SweepStore>> open(const std::string& path, const SweepSpec& spec,
                                                    uint64_t points);
  ~SweepStore();
  SweepStore(const SweepStore&) = delete;
  SweepStore& operator=(const SweepStore&) = delete;

  // Which ids have a row (index = id).
  Expected<std::vector<uint8_t>> stored() const;
  // Writes `results` (of `points`, by id) in one transaction.
  Status write(const std::vector<SweepPoint>& points, const std::vector<PointResult>& results);

 private:
  SweepStore(sqlite3* db, const SweepSpec& spec, std::string path);
  Status prepare();

  sqlite3* db_ = nullptr;
  sqlite3_stmt* insert_ = nullptr;
  const SweepSpec& spec_;
  std::string path_;
  std::vector<Column> axes_;
};

// Reads a database (every row, by id).
Expected<StoredSweep> read_sweep_db(const std::string& path);

// The `points` table as CSV (a header, then one line per row by id; text quoted when needed).
Status write_sweep_csv(const std::string& db_path, const std::string& csv_path);

}  // namespace orrery::design
