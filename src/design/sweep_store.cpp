#include "design/sweep_store.h"

#include <sqlite3.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <map>

#include <fmt/format.h>

namespace orrery::design {

namespace {

constexpr const char* kFormat = "orrery-sweep 1";

Error sql_error(sqlite3* db, const std::string& path, std::string_view what) {
  return Error::make(ErrorKind::kIo, "{}: {}: {}", path, what,
                     db ? sqlite3_errmsg(db) : "no database");
}

Status exec(sqlite3* db, const std::string& path, const std::string& sql) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    Error error = Error::make(ErrorKind::kIo, "{}: {}", path, message ? message : "sqlite error");
    sqlite3_free(message);
    return error;
  }
  return Status::ok();
}

std::string sql_type(ColumnType type) {
  switch (type) {
    case ColumnType::kInteger:
      return "INTEGER";
    case ColumnType::kReal:
      return "REAL";
    case ColumnType::kText:
      return "TEXT";
  }
  return "TEXT";
}

// The result columns after the axes.
std::vector<Column> result_columns(size_t dimensions) {
  std::vector<Column> columns = {{"status", ColumnType::kText},
                                 {"reason", ColumnType::kText},
                                 {"offloaded", ColumnType::kText},
                                 {"iteration_ns", ColumnType::kReal},
                                 {"compute_ns", ColumnType::kReal}};
  for (size_t k = 0; k < kCommKinds; ++k) {
    columns.push_back({fmt::format("exposed_{}_ns", comm_kind_name(static_cast<CommKind>(k))),
                       ColumnType::kReal});
  }
  columns.push_back({"bubble_ns", ColumnType::kReal});
  columns.push_back({"offload_ns", ColumnType::kReal});
  for (size_t d = 0; d < dimensions; ++d) {
    columns.push_back({fmt::format("util_net{}", d), ColumnType::kReal});
  }
  for (const char* name : {"hbm_bytes", "need_bytes", "expansion_bytes"}) {
    columns.push_back({name, ColumnType::kInteger});
  }
  columns.push_back({"cost", ColumnType::kReal});
  columns.push_back({"throughput", ColumnType::kReal});
  columns.push_back({"events", ColumnType::kInteger});
  return columns;
}

std::string encode_axes(const std::vector<Column>& axes, size_t plan_from) {
  std::string out;
  for (size_t a = 0; a < axes.size(); ++a) {
    out += fmt::format("{}{}:{}:{}", a ? "," : "", axes[a].name, sql_type(axes[a].type),
                       a >= plan_from ? "plan" : "cluster");
  }
  return out;
}

size_t plan_axes_from(const std::vector<Column>& axes) {
  for (size_t a = 0; a < axes.size(); ++a) {
    if (axes[a].name == "tp" || axes[a].name == "sharding") return a;
  }
  return axes.size();
}

Expected<std::map<std::string, std::string>> read_meta(sqlite3* db, const std::string& path) {
  std::map<std::string, std::string> meta;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT key, value FROM meta", -1, &stmt, nullptr) != SQLITE_OK) {
    return Error::make(ErrorKind::kParse, "{}: not an orrery sweep database (no meta table)", path);
  }
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    const auto* key = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    const auto* value = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 1));
    meta[key ? key : ""] = value ? value : "";
  }
  sqlite3_finalize(stmt);
  if (meta["format"] != kFormat) {
    return Error::make(ErrorKind::kParse, "{}: not an orrery sweep database (format '{}')", path,
                       meta["format"]);
  }
  return meta;
}

// A meta value the writer stored as a whole number (missing: 0), checked because the file may
// not be one this program wrote: std::stoull threw on "1e99" and read "12abc" as 12.
Expected<uint64_t> meta_whole(const std::map<std::string, std::string>& meta,
                              const std::string& key, const std::string& path,
                              uint64_t most = UINT64_MAX) {
  const auto found = meta.find(key);
  if (found == meta.end() || found->second.empty()) return uint64_t{0};
  const std::string& text = found->second;
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value > most) {
    return Error::make(ErrorKind::kParse, "{}: meta '{}' is '{}', not a whole number{}", path, key,
                       text, most == UINT64_MAX ? "" : fmt::format(" up to {}", most));
  }
  return value;
}

std::vector<std::string> split(const std::string& text, char by) {
  std::vector<std::string> parts;
  if (text.empty()) return parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(by, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return parts;
}

}  // namespace

std::string sweep_hash(const std::string& text) {
  uint64_t hash = 1469598103934665603ull;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return fmt::format("{:016x}", hash);
}

SweepStore::SweepStore(sqlite3* db, const SweepSpec& spec, std::string path)
    : db_(db), spec_(spec), path_(std::move(path)), axes_(axis_columns(spec)) {}

SweepStore::~SweepStore() {
  if (insert_ != nullptr) sqlite3_finalize(insert_);
  if (db_ != nullptr) sqlite3_close(db_);
}

Expected<std::unique_ptr<SweepStore>> SweepStore::open(const std::string& path,
                                                       const SweepSpec& spec, uint64_t points) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    Error error = sql_error(db, path, "cannot open");
    sqlite3_close(db);
    return error;
  }
  std::unique_ptr<SweepStore> store(new SweepStore(db, spec, path));
  sqlite3_busy_timeout(db, 5000);
  // A rollback journal: every transaction is all or nothing, even after kill -9, and the database
  // stays one file.
  if (Status s = exec(db, path, "PRAGMA journal_mode=DELETE; PRAGMA synchronous=NORMAL;"); !s) {
    return s.error();
  }
  bool fresh = true;
  {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master WHERE name = 'meta'", -1, &stmt,
                           nullptr) != SQLITE_OK) {
      return sql_error(db, path, "not a database");
    }
    if (sqlite3_step(stmt) == SQLITE_ROW) fresh = sqlite3_column_int(stmt, 0) == 0;
    sqlite3_finalize(stmt);
  }
  const std::string hash = sweep_hash(spec.text);
  if (!fresh) {
    Expected<std::map<std::string, std::string>> meta = read_meta(db, path);
    if (!meta) return meta.error();
    if ((*meta)["sweep_hash"] != hash) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "{} holds the results of another sweep file ({}, hash {}); {} has hash "
                         "{}: give another --db or delete it",
                         path, (*meta)["sweep_path"], (*meta)["sweep_hash"], spec.path, hash);
    }
    if (Status s = store->prepare(); !s) return s.error();
    return store;
  }
  const std::vector<Column> results = result_columns(spec.network.size());
  std::string create = "BEGIN;\nCREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);\n";
  create += "CREATE TABLE points (id INTEGER PRIMARY KEY";
  for (const Column& c : store->axes_) create += fmt::format(", {} {}", c.name, sql_type(c.type));
  for (const Column& c : results) create += fmt::format(", {} {}", c.name, sql_type(c.type));
  create += ");\nCOMMIT;\n";
  if (Status s = exec(db, path, create); !s) return s.error();
  const std::string workload =
      fmt::format("{} {}", spec.workload == SweepWorkload::kLlm ? "llm" : "dlrm", spec.model_name);
  std::vector<std::string> budgets;
  for (double b : spec.budgets) budgets.push_back(fmt::format("{}", b));
  const std::vector<std::pair<std::string, std::string>> meta = {
      {"format", kFormat},
      {"name", spec.name},
      {"sweep_path", spec.path},
      {"sweep_hash", hash},
      {"sweep_file", spec.text},
      {"workload", workload},
      {"global_batch", std::to_string(spec.global_batch)},
      {"points", std::to_string(points)},
      {"dimensions", std::to_string(spec.network.size())},
      {"axes", encode_axes(store->axes_, plan_axes_from(store->axes_))},
      {"budgets", fmt::format("{}", fmt::join(budgets, ","))},
  };
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, "INSERT INTO meta (key, value) VALUES (?, ?)", -1, &stmt, nullptr) !=
      SQLITE_OK) {
    return sql_error(db, path, "cannot prepare");
  }
  if (Status s = exec(db, path, "BEGIN"); !s) return s.error();
  for (const auto& [key, value] : meta) {
    sqlite3_bind_text(stmt, 1, key.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt, 2, value.c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(stmt) != SQLITE_DONE) {
      sqlite3_finalize(stmt);
      return sql_error(db, path, "cannot write the sweep's description");
    }
    sqlite3_reset(stmt);
  }
  sqlite3_finalize(stmt);
  if (Status s = exec(db, path, "COMMIT"); !s) return s.error();
  if (Status s = store->prepare(); !s) return s.error();
  return store;
}

Status SweepStore::prepare() {
  const size_t columns = 1 + axes_.size() + result_columns(spec_.network.size()).size();
  std::string sql = "INSERT INTO points VALUES (?";
  for (size_t c = 1; c < columns; ++c) sql += ", ?";
  sql += ")";
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &insert_, nullptr) != SQLITE_OK) {
    return sql_error(db_, path_, "the points table does not match this sweep");
  }
  return Status::ok();
}

Expected<std::vector<uint8_t>> SweepStore::stored() const {
  std::vector<uint8_t> done;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, "SELECT id FROM points", -1, &stmt, nullptr) != SQLITE_OK) {
    return sql_error(db_, path_, "cannot read the points");
  }
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    const auto id = static_cast<uint64_t>(sqlite3_column_int64(stmt, 0));
    if (done.size() <= id) done.resize(id + 1, 0);
    done[id] = 1;
  }
  sqlite3_finalize(stmt);
  return done;
}

Status SweepStore::write(const std::vector<SweepPoint>& points,
                         const std::vector<PointResult>& results) {
  if (results.empty()) return Status::ok();
  if (Status s = exec(db_, path_, "BEGIN IMMEDIATE"); !s) return s;
  for (const PointResult& r : results) {
    const std::vector<Value> axes = axis_values(spec_, points[r.id]);
    int index = 1;
    sqlite3_bind_int64(insert_, index++, static_cast<sqlite3_int64>(r.id));
    for (size_t a = 0; a < axes.size(); ++a) {
      switch (axes_[a].type) {
        case ColumnType::kInteger:
          sqlite3_bind_int64(insert_, index++, static_cast<sqlite3_int64>(axes[a].number));
          break;
        case ColumnType::kReal:
          sqlite3_bind_double(insert_, index++, axes[a].number);
          break;
        case ColumnType::kText:
          sqlite3_bind_text(insert_, index++, axes[a].text.c_str(), -1, SQLITE_TRANSIENT);
          break;
      }
    }
    const std::string status(point_status_name(r.status));
    sqlite3_bind_text(insert_, index++, status.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(insert_, index++, r.reason.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(insert_, index++, r.offloaded.c_str(), -1, SQLITE_TRANSIENT);
    const bool ok = r.status == PointStatus::kOk;
    auto real = [&](double v) {
      if (ok) {
        sqlite3_bind_double(insert_, index++, v);
      } else {
        sqlite3_bind_null(insert_, index++);
      }
    };
    real(r.iteration_ns);
    real(r.compute_ns);
    for (double e : r.exposed_ns) real(e);
    real(r.bubble_ns);
    real(r.offload_ns);
    for (size_t d = 0; d < spec_.network.size(); ++d) {
      real(d < r.dim_utilization.size() ? r.dim_utilization[d] : 0);
    }
    sqlite3_bind_int64(insert_, index++, static_cast<sqlite3_int64>(r.hbm_bytes));
    sqlite3_bind_int64(insert_, index++, static_cast<sqlite3_int64>(r.need_bytes));
    sqlite3_bind_int64(insert_, index++, static_cast<sqlite3_int64>(r.expansion_bytes));
    sqlite3_bind_double(insert_, index++, r.cost);
    real(r.throughput);
    sqlite3_bind_int64(insert_, index++, static_cast<sqlite3_int64>(r.events));
    if (sqlite3_step(insert_) != SQLITE_DONE) {
      Error error = sql_error(db_, path_, fmt::format("cannot write point {}", r.id));
      sqlite3_reset(insert_);
      (void)exec(db_, path_, "ROLLBACK");
      return error;
    }
    sqlite3_reset(insert_);
    sqlite3_clear_bindings(insert_);
  }
  return exec(db_, path_, "COMMIT");
}

Expected<StoredSweep> read_sweep_db(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    Error error = sql_error(db, path, "cannot open");
    sqlite3_close(db);
    return error;
  }
  struct Closer {
    sqlite3* db;
    ~Closer() { sqlite3_close(db); }
  } closer{db};
  Expected<std::map<std::string, std::string>> meta = read_meta(db, path);
  if (!meta) return meta.error();
  StoredSweep sweep;
  sweep.path = path;
  sweep.name = (*meta)["name"];
  sweep.sweep_file = (*meta)["sweep_file"];
  sweep.workload = (*meta)["workload"];
  Expected<uint64_t> global_batch = meta_whole(*meta, "global_batch", path);
  Expected<uint64_t> points = meta_whole(*meta, "points", path);
  // Each dimension adds result columns, and SQLite's tables hold at most 32,767.
  Expected<uint64_t> dimensions = meta_whole(*meta, "dimensions", path, 32767);
  for (const Expected<uint64_t>* value : {&global_batch, &points, &dimensions}) {
    if (!*value) return value->error();
  }
  sweep.global_batch = *global_batch;
  sweep.points = *points;
  sweep.dimensions = *dimensions;
  for (const std::string& b : split((*meta)["budgets"], ',')) {
    double budget = 0;
    const auto [end, ec] = std::from_chars(b.data(), b.data() + b.size(), budget);
    if (ec != std::errc() || end != b.data() + b.size() || !std::isfinite(budget)) {
      return Error::make(ErrorKind::kParse, "{}: meta 'budgets' entry '{}' is not a number", path,
                         b);
    }
    sweep.budgets.push_back(budget);
  }
  sweep.plan_axes_from = SIZE_MAX;
  for (const std::string& a : split((*meta)["axes"], ',')) {
    const std::vector<std::string> parts = split(a, ':');
    if (parts.size() != 3) {
      return Error::make(ErrorKind::kParse, "{}: meta 'axes' entry '{}' is not name:type:role",
                         path, a);
    }
    const ColumnType type = parts[1] == "INTEGER" ? ColumnType::kInteger
                            : parts[1] == "REAL"  ? ColumnType::kReal
                                                  : ColumnType::kText;
    if (parts[2] == "plan" && sweep.plan_axes_from == SIZE_MAX) {
      sweep.plan_axes_from = sweep.axes.size();
    }
    sweep.axes.push_back({parts[0], type});
  }
  if (sweep.plan_axes_from == SIZE_MAX) sweep.plan_axes_from = sweep.axes.size();

  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT * FROM points ORDER BY id", -1, &stmt, nullptr) != SQLITE_OK) {
    return sql_error(db, path, "cannot read the points");
  }
  const std::vector<Column> results = result_columns(sweep.dimensions);
  const int expected = static_cast<int>(1 + sweep.axes.size() + results.size());
  if (sqlite3_column_count(stmt) != expected) {
    sqlite3_finalize(stmt);
    return Error::make(ErrorKind::kParse, "{}: the points table has {} columns, expected {}", path,
                       sqlite3_column_count(stmt), expected);
  }
  int rc = SQLITE_ROW;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    StoredRow row;
    int index = 0;
    row.result.id = static_cast<uint64_t>(sqlite3_column_int64(stmt, index++));
    auto text = [&](int i) {
      const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(stmt, i));
      return std::string(t ? t : "");
    };
    for (const Column& c : sweep.axes) {
      if (c.type == ColumnType::kText) {
        row.axes.push_back({0, text(index++)});
      } else {
        row.axes.push_back({sqlite3_column_double(stmt, index++), ""});
      }
    }
    const std::string status = text(index++);
    if (status != "ok" && status != "failed" && status != "rejected") {
      sqlite3_finalize(stmt);
      return Error::make(ErrorKind::kParse,
                         "{}: point {}: status '{}' is not ok, rejected or failed", path,
                         row.result.id, status);
    }
    row.result.status = status == "ok"       ? PointStatus::kOk
                        : status == "failed" ? PointStatus::kFailed
                                             : PointStatus::kRejected;
    row.result.reason = text(index++);
    row.result.offloaded = text(index++);
    auto real = [&]() { return sqlite3_column_double(stmt, index++); };
    row.result.iteration_ns = real();
    row.result.compute_ns = real();
    for (double& e : row.result.exposed_ns) e = real();
    row.result.bubble_ns = real();
    row.result.offload_ns = real();
    for (size_t d = 0; d < sweep.dimensions; ++d) row.result.dim_utilization.push_back(real());
    auto integer = [&]() { return static_cast<uint64_t>(sqlite3_column_int64(stmt, index++)); };
    row.result.hbm_bytes = integer();
    row.result.need_bytes = integer();
    row.result.expansion_bytes = integer();
    row.result.cost = real();
    row.result.throughput = real();
    row.result.events = integer();
    // SQLite keeps infinities (and no NaN); a simulated point's figures rank the answers.
    if (row.result.status == PointStatus::kOk &&
        !(std::isfinite(row.result.iteration_ns) && std::isfinite(row.result.cost) &&
          std::isfinite(row.result.throughput))) {
      sqlite3_finalize(stmt);
      return Error::make(ErrorKind::kParse,
                         "{}: point {}: an infinite iteration time, cost or throughput", path,
                         row.result.id);
    }
    sweep.rows.push_back(std::move(row));
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return sql_error(db, path, "cannot read the points");
  return sweep;
}

Status write_sweep_csv(const std::string& db_path, const std::string& csv_path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    Error error = sql_error(db, db_path, "cannot open");
    sqlite3_close(db);
    return error;
  }
  struct Closer {
    sqlite3* db;
    ~Closer() { sqlite3_close(db); }
  } closer{db};
  if (Expected<std::map<std::string, std::string>> meta = read_meta(db, db_path); !meta) {
    return meta.error();
  }
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT * FROM points ORDER BY id", -1, &stmt, nullptr) != SQLITE_OK) {
    return sql_error(db, db_path, "cannot read the points");
  }
  std::ofstream out(csv_path, std::ios::binary);
  if (!out) {
    sqlite3_finalize(stmt);
    return Error::make(ErrorKind::kIo, "{}: cannot write", csv_path);
  }
  const int columns = sqlite3_column_count(stmt);
  for (int c = 0; c < columns; ++c) out << (c ? "," : "") << sqlite3_column_name(stmt, c);
  out << '\n';
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    for (int c = 0; c < columns; ++c) {
      if (c) out << ',';
      switch (sqlite3_column_type(stmt, c)) {
        case SQLITE_INTEGER:
          out << sqlite3_column_int64(stmt, c);
          break;
        case SQLITE_FLOAT:
          out << fmt::format("{}", sqlite3_column_double(stmt, c));
          break;
        case SQLITE_NULL:
          break;
        default: {
          const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(stmt, c));
          const std::string value = t ? t : "";
          if (value.find_first_of(",\"\n") != std::string::npos) {
            std::string quoted = "\"";
            for (char ch : value) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
            out << quoted << '"';
          } else {
            out << value;
          }
        }
      }
    }
    out << '\n';
  }
  sqlite3_finalize(stmt);
  out.close();
  if (!out) return Error::make(ErrorKind::kIo, "{}: write failed", csv_path);
  return Status::ok();
}

}  // namespace orrery::design
