// synth/diffusion.h: the discrete diffusion arithmetic of LayerDAG, without the networks.
//
// A categorical variable (a node attribute with K classes, or an edge: 2 classes) is noised towards
// its corpus marginal m: one step is Q_t = a_t I + (1 - a_t) 1 m^T, so t steps from x_0 give
// q(x_t | x_0) = abar_t onehot(x_0) + (1 - abar_t) m with abar_t = prod a_s (the cosine schedule,
// s = 0.008). Sampling starts from m and runs t = T .. 1: the network predicts p(x_0 | x_t), and
// p(x_{t-1} | x_t) = sum_x0 p(x_0) q(x_t | x_{t-1}) q(x_{t-1} | x_0) / q(x_t | x_0).
// Edges use m = (1 - rho, rho) with rho = min(mean in-degree, B) / B for B candidate parents.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "synth/random.h"

namespace orrery::synth {

struct NoiseSchedule {
  uint32_t steps = 0;
  std::vector<double> alpha_bar;  // steps + 1 values, alpha_bar[0] = 1, alpha_bar[steps] = 0

  static NoiseSchedule cosine(uint32_t steps, double offset = 0.008);
  // a_t = abar_t / abar_{t-1}, for t in [1, steps].
  double alpha(uint32_t t) const;
};

// q(x_t | x_0) into `out` (K values).
void noised_distribution(uint32_t x0, double alpha_bar, std::span<const double> marginal,
                         std::span<double> out);
// A draw of x_t given x_0.
uint32_t noise_class(uint32_t x0, double alpha_bar, std::span<const double> marginal, Rng& rng);

// p(x_{t-1} | x_t) into `out` (K values, normalized) from the predicted p(x_0) (K values).
void reverse_step(std::span<const double> p_x0, uint32_t x_t, const NoiseSchedule& schedule,
                  uint32_t t, std::span<const double> marginal, std::span<double> out);

// The edge marginal for `candidates` parents and the corpus's mean in-degree.
double edge_marginal(double mean_in_degree, uint32_t candidates);

}  // namespace orrery::synth
