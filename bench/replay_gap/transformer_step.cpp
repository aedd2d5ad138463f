// The transformer block's training step of tests/replay/record_models.py (an encoder layer:
// d_model 128, 4 heads, feed-forward 512, dropout 0.1, post-norm; a batch of 2 sequences of 64;
// MSE loss; SGD, lr 0.01, momentum 0.9) written in C++ with libtorch's own module, autograd and
// optimizer: the framework's work without Python's. libtorch's layer takes (sequence, batch,
// feature), where the Python model is batch-first and transposes to that inside its attention.
// bench/replay_gap.sh builds and times it beside PyTorch's step and orrery's replay of its trace.
// Prints the median process CPU time of one step in microseconds.
#include "step_timer.h"

int main(int argc, char** argv) {
  const StepArgs args = step_args(argc, argv);
  set_up_like_the_replay();
  torch::nn::TransformerEncoderLayer model(
      torch::nn::TransformerEncoderLayerOptions(128, 4).dim_feedforward(512).dropout(0.1));
  model->train();
  const torch::Tensor x = torch::randn({64, 2 * args.scale, 128});
  const torch::Tensor target = torch::randn({64, 2 * args.scale, 128});
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  auto step = [&] {
    optimizer.zero_grad();
    torch::nn::functional::mse_loss(model->forward(x), target).backward();
    optimizer.step();
  };
  print_median_step_cpu_us(args.steps, step);
  return 0;
}
