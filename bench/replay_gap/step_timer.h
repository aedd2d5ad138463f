// What the C++ steps of bench/replay_gap share: their arguments (steps to time, 200 by default;
// the batch's multiple, 1 by default, as record_models.py --batch-scale), libtorch set up as
// record_models.py and orrery replay run (subnormals flushed, one intra-op thread, seed 0), and the
// timing of a step: 5 warm-up steps, then the median process CPU time of `steps` steps, printed in
// microseconds.
#pragma once

#include <torch/torch.h>

#include <pmmintrin.h>
#include <xmmintrin.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

struct StepArgs {
  int steps = 200;
  int64_t scale = 1;  // times the model's batch
};

// `step [steps] [scale]`; a value that is not a positive number exits with a message.
inline StepArgs step_args(int argc, char** argv) {
  StepArgs args;
  for (int i = 1; i < argc && i <= 2; ++i) {
    char* end = nullptr;
    const long value = std::strtol(argv[i], &end, 10);
    if (value <= 0 || *end != '\0') {
      std::fprintf(stderr, "%s: argument %d must be a positive number, not '%s'\n", argv[0], i,
                   argv[i]);
      std::exit(2);
    }
    if (i == 1) args.steps = static_cast<int>(value);
    if (i == 2) args.scale = value;
  }
  return args;
}

inline void set_up_like_the_replay() {
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
  torch::set_num_threads(1);
  torch::manual_seed(0);
}

template <typename Step>
void print_median_step_cpu_us(int steps, Step&& step) {
  for (int i = 0; i < 5; ++i) step();
  std::vector<double> cpu;
  for (int i = 0; i < steps; ++i) {
    const std::clock_t start = std::clock();
    step();
    cpu.push_back(1e6 * static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC);
  }
  std::nth_element(cpu.begin(), cpu.begin() + cpu.size() / 2, cpu.end());
  std::printf("%.1f\n", cpu[cpu.size() / 2]);
}
