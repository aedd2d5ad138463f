#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "synth/diffusion.h"

namespace orrery::synth {
namespace diffusion_test {

TEST(Diffusion, cosine_schedule_runs_from_clean_to_pure_marginal) {
  const NoiseSchedule schedule = NoiseSchedule::cosine(16);
  ASSERT_EQ(schedule.alpha_bar.size(), 17u);
  EXPECT_EQ(schedule.alpha_bar[0], 1.0);
  EXPECT_EQ(schedule.alpha_bar[16], 0.0);
  // abar_t = cos^2(((t/T + s)/(1 + s)) pi/2) / cos^2((s/(1 + s)) pi/2), s = 0.008.
  const double s = 0.008;
  auto f = [&](double t) {
    const double c = std::cos((t / 16 + s) / (1 + s) * std::numbers::pi / 2);
    return c * c;
  };
  EXPECT_NEAR(schedule.alpha_bar[8], f(8) / f(0), 1e-12);
  for (uint32_t t = 1; t <= 16; ++t) {
    EXPECT_LT(schedule.alpha_bar[t], schedule.alpha_bar[t - 1]);
    EXPECT_NEAR(schedule.alpha(t) * schedule.alpha_bar[t - 1], schedule.alpha_bar[t], 1e-12);
  }
}

TEST(Diffusion, the_last_reverse_step_returns_the_predicted_clean_class) {
  // At t = 1, abar_0 = 1: x_0 is drawn from the prediction itself (restricted to classes that
  // could have produced x_1).
  const NoiseSchedule schedule = NoiseSchedule::cosine(8);
  const std::vector<double> marginal = {0.5, 0.3, 0.2};
  const std::vector<double> p_x0 = {0.1, 0.6, 0.3};
  std::vector<double> out(3);
  reverse_step(p_x0, 2, schedule, 1, marginal, out);
  // Weights p(x0) q(x_1 = 2 | x0) / q(x_1 = 2 | x0) = p(x0): exactly the prediction.
  EXPECT_NEAR(out[0], 0.1, 1e-12);
  EXPECT_NEAR(out[1], 0.6, 1e-12);
  EXPECT_NEAR(out[2], 0.3, 1e-12);
}

TEST(Diffusion, a_reverse_step_matches_bayes_rule_by_hand) {
  const NoiseSchedule schedule = NoiseSchedule::cosine(4);
  const std::vector<double> m = {0.75, 0.25};
  const uint32_t t = 2, x_t = 1;
  const std::vector<double> p_x0 = {0.4, 0.6};
  std::vector<double> out(2);
  reverse_step(p_x0, x_t, schedule, t, m, out);
  const double a = schedule.alpha(t), abar_s = schedule.alpha_bar[t - 1],
               abar_t = schedule.alpha_bar[t];
  // p(x_s = k) ~ sum_x0 p(x0) q(x_t | k) q(k | x0) / q(x_t | x0).
  double expected[2] = {0, 0};
  for (size_t x0 = 0; x0 < 2; ++x0) {
    const double q_t0 = abar_t * (x0 == 1) + (1 - abar_t) * m[1];
    for (size_t k = 0; k < 2; ++k) {
      const double q_tk = a * (k == 1) + (1 - a) * m[1];
      const double q_k0 = abar_s * (k == x0) + (1 - abar_s) * m[k];
      expected[k] += p_x0[x0] * q_tk * q_k0 / q_t0;
    }
  }
  const double total = expected[0] + expected[1];
  EXPECT_NEAR(out[0], expected[0] / total, 1e-12);
  EXPECT_NEAR(out[1], expected[1] / total, 1e-12);
}

TEST(Diffusion, noising_converges_to_the_marginal) {
  Rng rng(7);
  const std::vector<double> m = {0.2, 0.8};
  int ones = 0;
  for (int idx = 0; idx < 20000; ++idx) ones += noise_class(0, 0.0, m, rng) == 1;
  EXPECT_NEAR(ones / 20000.0, 0.8, 0.01);
  for (int idx = 0; idx < 100; ++idx) EXPECT_EQ(noise_class(1, 1.0, m, rng), 1u);
}

TEST(Diffusion, edge_marginal_is_the_mean_in_degree_over_the_candidates) {
  EXPECT_DOUBLE_EQ(edge_marginal(1.5, 6), 0.25);
  EXPECT_DOUBLE_EQ(edge_marginal(3.0, 2), 1.0);
  EXPECT_DOUBLE_EQ(edge_marginal(1.0, 0), 0.0);
}

}  // namespace diffusion_test
}  // namespace orrery::synth
