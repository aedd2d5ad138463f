#include "hardware/calibrate.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <Eigen/Dense>

#include "core/checked.h"
#include "core/text_file.h"

namespace orrery::hw {

namespace {

std::string trim(std::string_view text) {
  size_t begin = 0;
  size_t end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin])) != 0) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1])) != 0) --end;
  return std::string(text.substr(begin, end - begin));
}

std::vector<std::string> split(const std::string& line, char separator) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, separator)) cells.push_back(trim(cell));
  if (!line.empty() && line.back() == separator) cells.emplace_back();
  return cells;
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// The columns a table may have (`name`, the operator's, is for people and ignored).
constexpr std::string_view kColumns[] = {"kind",  "m",     "n",       "k",   "batch",
                                         "flops", "bytes", "time_us", "name"};

}  // namespace

Expected<std::vector<OpSample>> parse_op_table(const std::string& text,
                                               const std::string& file_name) {
  std::istringstream in(text);
  std::string line;
  int number = 0;
  char separator = ',';
  std::map<std::string, size_t> column;  // name -> index
  std::vector<OpSample> samples;
  const auto fail = [&](std::string_view what) {
    return Error::make(ErrorKind::kParse, "{}:{}: {}", file_name, number, what);
  };
  bool header = false;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string stripped = trim(line);
    if (stripped.empty() || stripped.front() == '#') continue;
    if (!header) {
      separator = line.find('\t') != std::string::npos ? '\t' : ',';
      const std::vector<std::string> names = split(line, separator);
      for (size_t idx = 0; idx < names.size(); ++idx) {
        const std::string name = lower(names[idx]);
        if (std::find(std::begin(kColumns), std::end(kColumns), name) == std::end(kColumns)) {
          return fail(fmt::format(
              "column '{}' is not one of kind, m, n, k, batch, flops, bytes, time_us, name",
              names[idx]));
        }
        if (!column.emplace(name, idx).second) {
          return fail(fmt::format("column '{}' appears twice", names[idx]));
        }
      }
      for (std::string_view required : {"kind", "time_us"}) {
        if (column.count(std::string(required)) == 0) {
          return fail(fmt::format("the header has no '{}' column", required));
        }
      }
      header = true;
      continue;
    }
    const std::vector<std::string> cells = split(line, separator);
    if (cells.size() != column.size()) {
      return fail(fmt::format("{} cells, the header has {} columns", cells.size(), column.size()));
    }
    const auto cell = [&](std::string_view name) -> const std::string* {
      const auto found = column.find(std::string(name));
      if (found == column.end() || cells[found->second].empty()) return nullptr;
      return &cells[found->second];
    };
    // A whole number >= `min` in column `name`, or `fallback` when the cell is absent or empty.
    const auto whole = [&](std::string_view name, uint64_t min, std::optional<uint64_t> fallback,
                           uint64_t max = kMaxBytes) -> Expected<uint64_t> {
      const std::string* value = cell(name);
      if (value == nullptr) {
        if (fallback) return *fallback;
        return fail(fmt::format("column '{}' is empty (needed for this kind)", name));
      }
      uint64_t parsed = 0;
      const auto [end, error] =
          std::from_chars(value->data(), value->data() + value->size(), parsed);
      if (error != std::errc() || end != value->data() + value->size() || parsed < min ||
          parsed > max) {
        return fail(fmt::format("column '{}': '{}' is not a whole number from {} to {}", name,
                                *value, min, max));
      }
      return parsed;
    };
    OpSample sample;
    sample.line = number;
    const std::string* kind_cell = cell("kind");
    const std::string kind = lower(kind_cell == nullptr ? std::string() : *kind_cell);
    if (kind == "gemm") {
      sample.kind = OpKind::kGemm;
    } else if (kind == "memory") {
      sample.kind = OpKind::kMemory;
    } else {
      return fail(fmt::format("column 'kind': '{}' is not gemm or memory",
                              kind_cell == nullptr ? std::string() : *kind_cell));
    }
    if (sample.kind == OpKind::kGemm) {
      uint64_t* dims[3] = {&sample.shape.m, &sample.shape.n, &sample.shape.k};
      const char* names[3] = {"m", "n", "k"};
      for (size_t idx = 0; idx < 3; ++idx) {
        Expected<uint64_t> value = whole(names[idx], 1, std::nullopt);
        if (!value) return value.error();
        *dims[idx] = *value;
      }
      Expected<uint64_t> batch = whole("batch", 1, 1);
      if (!batch) return batch.error();
      sample.shape.batch = *batch;
      const sys::GemmShape& s = sample.shape;
      const uint64_t operands =
          saturating_add(saturating_add(saturating_mul(s.m, s.k), saturating_mul(s.k, s.n)),
                         saturating_mul(s.m, s.n));
      Expected<uint64_t> flops = whole("flops", 1, sys::gemm_flops(s), kMaxFlops);
      if (!flops) return flops.error();
      Expected<uint64_t> bytes = whole("bytes", 0, saturating_mul(2 * s.batch, operands));
      if (!bytes) return bytes.error();
      sample.flops = *flops;
      sample.bytes = *bytes;
    } else {
      Expected<uint64_t> bytes = whole("bytes", 1, std::nullopt);
      if (!bytes) return bytes.error();
      Expected<uint64_t> flops = whole("flops", 0, 0, kMaxFlops);
      if (!flops) return flops.error();
      sample.bytes = *bytes;
      sample.flops = *flops;
    }
    const std::string* time = cell("time_us");
    double us = 0;
    if (time == nullptr) return fail("column 'time_us' is empty");
    const auto [end, error] = std::from_chars(time->data(), time->data() + time->size(), us);
    if (error != std::errc() || end != time->data() + time->size() || !std::isfinite(us) ||
        us <= 0 || us > 1e12) {
      return fail(
          fmt::format("column 'time_us': '{}' is not a time above 0 (microseconds)", *time));
    }
    sample.seconds = us * 1e-6;
    samples.push_back(sample);
  }
  if (!header) return Error::make(ErrorKind::kParse, "{}: no header line (and no rows)", file_name);
  if (samples.empty())
    return Error::make(ErrorKind::kParse, "{}: no rows after the header", file_name);
  return samples;
}

Expected<std::vector<OpSample>> read_op_table(const std::string& path) {
  Expected<std::string> text = read_text_file(path);
  if (!text) return text.error();
  return parse_op_table(*text, path);
}

namespace {

double predicted(const sys::ComputeModel& model, const OpSample& sample) {
  return sample.kind == OpKind::kGemm
             ? sys::gemm_seconds(model, sample.shape, sample.flops, sample.bytes)
             : sys::kernel_seconds(model, sample.flops, sample.bytes);
}

// Whether the model puts this GEMM on its memory bound.
bool memory_bound(const sys::ComputeModel& model, const OpSample& sample) {
  if (sample.kind == OpKind::kMemory) return true;
  const double compute = static_cast<double>(sample.flops) /
                         (model.peak_tflops * 1e12 * sys::gemm_efficiency(model, sample.shape));
  const double memory =
      static_cast<double>(sample.bytes) / (model.hbm_gbps * 1e9 * model.memory_efficiency);
  return memory > compute;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace

Expected<CalibrationFit> fit_compute_model(const std::vector<OpSample>& samples,
                                           const sys::ComputeModel& base) {
  if (samples.empty()) return Error::make(ErrorKind::kInvalidArgument, "no samples to fit");
  sys::ComputeModel model = base;
  // Which rows use the memory equation; all GEMMs start compute-bound.
  std::vector<bool> on_memory(samples.size());
  for (size_t idx = 0; idx < samples.size(); ++idx)
    on_memory[idx] = samples[idx].kind == OpKind::kMemory;
  CalibrationFit fit;
  for (int iteration = 1; iteration <= 32; ++iteration) {
    fit.iterations = iteration;
    size_t gemm_rows = 0;
    size_t memory_rows = 0;
    std::vector<uint64_t> ks;
    for (size_t idx = 0; idx < samples.size(); ++idx) {
      if (on_memory[idx]) {
        ++memory_rows;
      } else {
        ++gemm_rows;
        ks.push_back(samples[idx].shape.k);
      }
    }
    std::sort(ks.begin(), ks.end());
    const bool fit_gemm = gemm_rows > 0;
    const bool fit_memory = memory_rows > 0;
    if (fit_gemm && std::unique(ks.begin(), ks.end()) - ks.begin() < 2) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "the compute-bound GEMMs all have k = {}: gemm_k_half cannot be told from "
                         "gemm_efficiency (measure GEMMs of at least two inner sizes)",
                         ks.front());
    }
    // Unknowns: launch, then 1/e and h/e (GEMMs), then 1/q (memory).
    const Eigen::Index cols = 1 + (fit_gemm ? 2 : 0) + (fit_memory ? 1 : 0);
    if (samples.size() < static_cast<size_t>(cols) + 1) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "{} rows cannot determine {} parameters (give at least {})",
                         samples.size(), cols, cols + 1);
    }
    Eigen::MatrixXd a = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(samples.size()), cols);
    Eigen::VectorXd b(static_cast<Eigen::Index>(samples.size()));
    for (size_t idx = 0; idx < samples.size(); ++idx) {
      const OpSample& s = samples[idx];
      const Eigen::Index row = static_cast<Eigen::Index>(idx);
      // Rows weighted by 1 / measured: least squares on relative error.
      const double w = 1.0 / s.seconds;
      a(row, 0) = w;
      if (on_memory[idx]) {
        a(row, cols - 1) = w * static_cast<double>(s.bytes) / (model.hbm_gbps * 1e9);
      } else {
        const double x = static_cast<double>(s.flops) /
                         (model.peak_tflops * 1e12 * sys::gemm_wave_efficiency(model, s.shape));
        a(row, 1) = w * x;
        a(row, 2) = w * x / static_cast<double>(s.shape.k);
      }
      b(row) = 1.0;  // w * measured
    }
    // Columns scaled to unit norm: seconds and launch terms differ by orders of magnitude, and
    // the QR's rank test is relative to its largest pivot.
    const Eigen::VectorXd norms = a.colwise().norm().transpose();
    for (Eigen::Index col = 0; col < cols; ++col) {
      if (norms(col) > 0) a.col(col) /= norms(col);
    }
    const Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(a);
    if (qr.rank() < cols) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "the table does not determine the parameters (rank {} of {}): vary the "
                         "GEMM shapes and the memory kernels' sizes",
                         qr.rank(), cols);
    }
    Eigen::VectorXd x = qr.solve(b);
    for (Eigen::Index col = 0; col < cols; ++col) {
      if (norms(col) > 0) x(col) /= norms(col);
    }
    model.launch_us = x(0) * 1e6;
    if (fit_gemm) {
      model.gemm_efficiency = 1.0 / x(1);
      model.gemm_k_half = x(2) / x(1);
    }
    if (fit_memory) model.memory_efficiency = 1.0 / x(cols - 1);
    const auto out_of_range = [](std::string_view name, double value, std::string_view range) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "fitted {} = {:.4g} is outside {}: are the times in microseconds, and "
                         "the preset's peak and bandwidth the machine's?",
                         name, value, range);
    };
    if (!(model.launch_us >= -1e-9)) return out_of_range("launch_us", model.launch_us, "[0, inf)");
    model.launch_us = std::max(0.0, model.launch_us);
    if (fit_gemm && !(model.gemm_efficiency > 0 && model.gemm_efficiency <= 1 + 1e-9)) {
      return out_of_range("gemm_efficiency", model.gemm_efficiency, "(0, 1]");
    }
    if (fit_gemm && !(model.gemm_k_half >= -1e-9)) {
      return out_of_range("gemm_k_half", model.gemm_k_half, "[0, inf)");
    }
    if (fit_memory && !(model.memory_efficiency > 0 && model.memory_efficiency <= 1 + 1e-9)) {
      return out_of_range("memory_efficiency", model.memory_efficiency, "(0, 1]");
    }
    model.gemm_efficiency = std::min(1.0, model.gemm_efficiency);
    model.gemm_k_half = std::max(0.0, model.gemm_k_half);
    model.memory_efficiency = std::min(1.0, model.memory_efficiency);
    bool changed = false;
    for (size_t idx = 0; idx < samples.size(); ++idx) {
      const bool memory = memory_bound(model, samples[idx]);
      if (memory != on_memory[idx]) changed = true;
      on_memory[idx] = memory;
    }
    if (!changed) break;
  }
  fit.model = model;
  for (OpKind kind : {OpKind::kGemm, OpKind::kMemory}) {
    std::vector<double> errors;
    KindError summary;
    summary.kind = kind == OpKind::kGemm ? "gemm" : "memory";
    for (const OpSample& s : samples) {
      if (s.kind != kind) continue;
      const double error = std::fabs(predicted(model, s) - s.seconds) / s.seconds;
      errors.push_back(error);
      if (error >= summary.worst) {
        summary.worst = error;
        summary.worst_line = s.line;
      }
    }
    if (errors.empty()) continue;
    summary.rows = errors.size();
    summary.median = median(errors);
    fit.errors.push_back(summary);
  }
  return fit;
}

std::string compute_block_yaml(const CalibrationFit& fit, const std::string& source) {
  const sys::ComputeModel& m = fit.model;
  std::string out = fmt::format("# Fitted by orrery calibrate from {}\n", source);
  for (const KindError& e : fit.errors) {
    out += fmt::format("# {}: {} rows, median error {:.2f}%, worst {:.2f}% (line {})\n", e.kind,
                       e.rows, e.median * 100, e.worst * 100, e.worst_line);
  }
  out += "compute:\n";
  out += fmt::format("  gemm_efficiency: {:.4f}\n", m.gemm_efficiency);
  out += fmt::format("  gemm_k_half: {:.2f}\n", m.gemm_k_half);
  out += fmt::format("  sms: {}\n", m.sms);
  out += fmt::format("  tile_m: {}\n", m.tile_m);
  out += fmt::format("  tile_n: {}\n", m.tile_n);
  out += fmt::format("  memory_efficiency: {:.4f}\n", m.memory_efficiency);
  out += fmt::format("  launch_us: {:.3f}\n", m.launch_us);
  if (m.comm_sms != 0) out += fmt::format("  comm_sms: {}\n", m.comm_sms);
  return out;
}

}  // namespace orrery::hw
