#include "synth/diffusion.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numbers>

namespace orrery::synth {

NoiseSchedule NoiseSchedule::cosine(uint32_t steps, double offset) {
  NoiseSchedule schedule;
  schedule.steps = steps;
  auto f = [&](double t) {
    const double c = std::cos((t / steps + offset) / (1 + offset) * std::numbers::pi / 2);
    return c * c;
  };
  const double f0 = f(0);
  for (uint32_t t = 0; t <= steps; ++t) {
    schedule.alpha_bar.push_back(std::clamp(f(t) / f0, 0.0, 1.0));
  }
  schedule.alpha_bar[0] = 1.0;
  schedule.alpha_bar[steps] = 0.0;  // cos(pi / 2), exactly: the last step is pure marginal
  return schedule;
}

double NoiseSchedule::alpha(uint32_t t) const {
  assert(t >= 1 && t <= steps);
  if (alpha_bar[t - 1] <= 0) return 0;
  return std::clamp(alpha_bar[t] / alpha_bar[t - 1], 0.0, 1.0);
}

void noised_distribution(uint32_t x0, double alpha_bar, std::span<const double> marginal,
                         std::span<double> out) {
  for (size_t k = 0; k < marginal.size(); ++k) out[k] = (1 - alpha_bar) * marginal[k];
  out[x0] += alpha_bar;
}

uint32_t noise_class(uint32_t x0, double alpha_bar, std::span<const double> marginal, Rng& rng) {
  if (rng.uniform() < alpha_bar) return x0;
  return rng.pick(marginal);
}

void reverse_step(std::span<const double> p_x0, uint32_t x_t, const NoiseSchedule& schedule,
                  uint32_t t, std::span<const double> marginal, std::span<double> out) {
  const size_t classes = marginal.size();
  const double a_t = schedule.alpha(t);
  const double abar_s = schedule.alpha_bar[t - 1];
  const double abar_t = schedule.alpha_bar[t];
  // q(x_t | x_{t-1} = k) for every k: the same whatever x_0 is.
  std::fill(out.begin(), out.end(), 0.0);
  double total = 0;
  for (size_t x0 = 0; x0 < classes; ++x0) {
    if (p_x0[x0] <= 0) continue;
    const double given_x0 = abar_t * (x0 == x_t ? 1.0 : 0.0) + (1 - abar_t) * marginal[x_t];
    if (given_x0 <= 0) continue;  // this x_0 cannot have produced x_t
    const double weight = p_x0[x0] / given_x0;
    for (size_t k = 0; k < classes; ++k) {
      const double forward = a_t * (k == x_t ? 1.0 : 0.0) + (1 - a_t) * marginal[x_t];
      const double from_x0 = abar_s * (k == x0 ? 1.0 : 0.0) + (1 - abar_s) * marginal[k];
      const double term = weight * forward * from_x0;
      out[k] += term;
      total += term;
    }
  }
  if (total <= 0) {  // the prediction gives no mass to any x_0 consistent with x_t: stay
    std::fill(out.begin(), out.end(), 0.0);
    out[x_t] = 1.0;
    return;
  }
  for (double& value : out) value /= total;
}

double edge_marginal(double mean_in_degree, uint32_t candidates) {
  if (candidates == 0) return 0;
  return std::min(mean_in_degree, static_cast<double>(candidates)) / candidates;
}

}  // namespace orrery::synth
