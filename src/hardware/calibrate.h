// hardware/calibrate.h: `orrery calibrate`, the compute model's parameters (system/compute_model.h)
// fitted to measured operator times, written as a preset's `compute:` block.
//
// Input: a table, CSV or TSV (a tab in the header line makes it TSV), '#' lines ignored, whose
// header names its columns (any order, case-insensitive):
//   kind     gemm | memory (required)
//   m, n, k  a GEMM's shape (gemm rows: required); batch (default 1)
//   flops    operations (default: 2 m n k batch for a GEMM, 0 for a memory kernel)
//   bytes    bytes read and written (memory rows: required; GEMM default 2 (mk + kn + mn) batch,
//            BF16 operands)
//   time_us  the measured time of one kernel, microseconds (required, > 0)
// Every bad cell is one Error naming the file, the line and the column.
//
// The fit: the machine's peak, HBM bandwidth, SM count and tile stay the preset's; fitted are
// gemm_efficiency e, gemm_k_half h, memory_efficiency q and launch_us L. A compute-bound GEMM takes
// L + F/(P w) (1/e) + F/(P w k) (h/e) (w: its wave efficiency) and a memory-bound kernel
// L + B/H (1/q): linear in (L, 1/e, h/e, 1/q), solved by weighted least squares on relative error
// (Eigen's column-pivoting QR). A GEMM the current fit puts on its memory bound joins the memory
// rows; the split is iterated until it is stable. Exact on times the model itself produced.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "system/compute_model.h"

namespace orrery::hw {

enum class OpKind { kGemm, kMemory };

struct OpSample {
  OpKind kind = OpKind::kGemm;
  sys::GemmShape shape;  // GEMM rows
  uint64_t flops = 0;
  uint64_t bytes = 0;
  double seconds = 0;  // measured
  int line = 0;        // in the table, for messages
};

// Reads a table (format above). Errors: kIo (cannot open), kParse naming file:line and column.
Expected<std::vector<OpSample>> read_op_table(const std::string& path);
// The same from text, as if read from `file_name`.
Expected<std::vector<OpSample>> parse_op_table(const std::string& text,
                                               const std::string& file_name);

struct KindError {
  std::string kind;  // "gemm", "memory"
  size_t rows = 0;
  double median = 0;  // relative error |model - measured| / measured
  double worst = 0;
  int worst_line = 0;
};

struct CalibrationFit {
  sys::ComputeModel model;
  std::vector<KindError> errors;  // gemm first, then memory (kinds present only)
  int iterations = 0;
};

// Fits `base`'s gemm_efficiency, gemm_k_half, memory_efficiency and launch_us to `samples`
// (the others are kept). A kind absent from the table keeps base's parameters for it. Errors
// (kInvalidArgument): too few rows to determine the parameters, GEMMs of a single k (h cannot be
// told from e), or a fit outside the model's ranges (naming the parameter: times in the wrong unit
// are the usual cause).
Expected<CalibrationFit> fit_compute_model(const std::vector<OpSample>& samples,
                                           const sys::ComputeModel& base);

// The fit as a preset's `compute:` block (YAML), with its error as comments.
std::string compute_block_yaml(const CalibrationFit& fit, const std::string& source);

}  // namespace orrery::hw
