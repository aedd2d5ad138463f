// fuzz_study_files: the files of the design and calibration tools and of the simulator's studies,
// which no other target reads: sweep files (then expanded, up to 4,096 points), hardware presets
// (then built for one and two nodes), nccl-tests outputs (`orrery collective --compare`), operator
// tables (`orrery calibrate`, then fitted), DLRM table CSVs (`orrery shard`), jobs files (shared
// clusters) and perturbation files (stragglers and failures). The first byte picks the reader.
#include "design/shard_input.h"
#include "design/sweep_file.h"
#include "design/sweep_space.h"
#include "fuzz/fuzz_support.h"
#include "hardware/calibrate.h"
#include "hardware/nccl_tests_file.h"
#include "hardware/preset.h"
#include "sim/jobs.h"
#include "sim/perturbation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orrery;
  if (size == 0) return 0;
  const uint8_t which = data[0] % 7;
  const std::string text = fuzz::as_text(data + 1, size - 1);
  switch (which) {
    case 0: {
      Expected<design::SweepSpec> spec = design::parse_sweep_file("sweep.yml", text);
      if (spec) (void)design::expand_sweep(*spec, 4096);
      break;
    }
    case 1: {
      Expected<hw::HardwarePreset> preset = hw::parse_preset(text, "preset.yml");
      if (preset) {
        (void)hw::build_hardware(*preset, 1, "");
        (void)hw::build_hardware(*preset, 2, "");
      }
      break;
    }
    case 2:
      (void)hw::parse_nccl_tests(text, "nccl-tests.txt");
      break;
    case 3: {
      Expected<std::vector<hw::OpSample>> samples = hw::parse_op_table(text, "ops.csv");
      if (samples) {
        sys::ComputeModel base;  // an A100's peak and HBM, as a preset gives them
        base.peak_tflops = 312;
        base.hbm_gbps = 2039;
        (void)hw::fit_compute_model(*samples, base);
      }
      break;
    }
    case 4:
      (void)design::parse_tables_csv(text, "tables.csv");
      break;
    case 5:
      (void)sim::parse_jobs_file(text, "jobs.yml");
      break;
    default:
      (void)sim::parse_perturbation(text, "perturbation.yml");
      break;
  }
  return 0;
}
