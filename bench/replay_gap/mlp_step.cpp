// The MLP training step of tests/replay/record_models.py (Linear 256-512, ReLU, Linear 512-512,
// ReLU, Linear 512-10; cross-entropy on a batch of 32; SGD, lr 0.01, momentum 0.9) written in C++
// with libtorch's own modules, autograd and optimizer: the framework's work without Python's.
// bench/replay_gap.sh builds and times it beside PyTorch's step and orrery's replay of its trace.
// Prints the median process CPU time of one step in microseconds.
#include "step_timer.h"

int main(int argc, char** argv) {
  const StepArgs args = step_args(argc, argv);
  set_up_like_the_replay();
  torch::nn::Sequential model(torch::nn::Linear(256, 512), torch::nn::ReLU(),
                              torch::nn::Linear(512, 512), torch::nn::ReLU(),
                              torch::nn::Linear(512, 10));
  const torch::Tensor x = torch::randn({32 * args.scale, 256});
  const torch::Tensor target = torch::randint(0, 10, {32 * args.scale});
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  auto step = [&] {
    optimizer.zero_grad();
    torch::nn::functional::cross_entropy(model->forward(x), target).backward();
    optimizer.step();
  };
  print_median_step_cpu_us(args.steps, step);
  return 0;
}
