// `orrery calibrate`: the compute model of a hardware preset fitted to measured operator times
// (hardware/calibrate.h), printed as a `compute:` block to paste into a copy of the preset, with
// the fit's error per kind of operation.
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "core/text_file.h"
#include "hardware/calibrate.h"
#include "hardware/preset.h"

namespace orrery::cli {

namespace {

struct CalibrateOptions {
  std::string hardware;
  std::string table;
  std::string output;
};

int run(const CalibrateOptions& options) {
  Expected<hw::HardwarePreset> preset = hw::load_preset(options.hardware);
  if (!preset) return report_error(preset.error());
  Expected<std::vector<hw::OpSample>> samples = hw::read_op_table(options.table);
  if (!samples) return report_error(samples.error());
  Expected<hw::CalibrationFit> fit = hw::fit_compute_model(*samples, preset->compute);
  if (!fit) return report_error(fit.error().with_context(options.table));
  const std::string block = hw::compute_block_yaml(*fit, options.table);
  if (!options.output.empty()) {
    if (Status written = write_text_file(options.output, block); !written) {
      return report_error(written.error());
    }
  }
  std::cout << block;
  std::cout << fmt::format("\nfit of {} rows on {} ({} iterations of the memory-bound split)\n",
                           samples->size(), preset->name, fit->iterations);
  std::cout << fmt::format("{:<8} {:>6} {:>14} {:>14}\n", "kind", "rows", "median error",
                           "worst error");
  for (const hw::KindError& e : fit->errors) {
    std::cout << fmt::format("{:<8} {:>6} {:>13.2f}% {:>13.2f}%  (line {})\n", e.kind, e.rows,
                             e.median * 100, e.worst * 100, e.worst_line);
  }
  return 0;
}

}  // namespace

void add_calibrate_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<CalibrateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "Fit a hardware preset's compute model to measured operator times: prints its compute: "
      "block\n  e.g. orrery calibrate --hardware dgx-a100 --table a100_ops.tsv -o compute.yaml");
  cmd->add_option("--hardware", options->hardware,
                  "the preset whose peak, bandwidth, SMs and tile the fit keeps (dgx-a100, "
                  "dgx-h100, hgx-h200, hgx-b200 or a preset YAML file)")
      ->required();
  cmd->add_option("--table", options->table,
                  "CSV or TSV of measured kernels: kind (gemm, memory), m, n, k, batch, flops, "
                  "bytes, time_us, name (ignored); orrery replay --calibration-table writes one "
                  "(docs/models/compute.md)")
      ->required();
  cmd->add_option("-o,--output", options->output, "also write the compute: block to this file");
  cmd->callback([options, &exit_code] { exit_code = run(*options); });
}

}  // namespace orrery::cli
