#include "sim/goodput.h"

#include <algorithm>
#include <cmath>

#include "core/counter_random.h"

namespace orrery::sim {

Expected<GoodputResult> compute_goodput(const GoodputSpec& spec, double iteration_s,
                                        uint64_t components) {
  if (!(iteration_s > 0) || !std::isfinite(iteration_s)) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "goodput: the iteration takes no time, so there is no work to lose");
  }
  if (spec.components != 0) components = spec.components;
  if (components == 0)
    return Error::make(ErrorKind::kInvalidArgument, "goodput: no component can fail");
  GoodputResult result;
  result.iteration_s = iteration_s;
  result.components = components;
  result.horizon_s = spec.horizon_hours * 3600.0;
  const double mtbf = spec.mtbf_hours * 3600.0 / static_cast<double>(components);
  const double delta = spec.checkpoint_s;
  const double restart = spec.restart_s;
  result.system_mtbf_s = mtbf;
  result.young_interval_s = std::sqrt(2.0 * delta * mtbf);
  result.daly_interval_s =
      delta >= 2.0 * mtbf
          ? mtbf
          : std::sqrt(2.0 * delta * mtbf) *
                    (1.0 + std::sqrt(delta / (2.0 * mtbf)) / 3.0 + delta / (18.0 * mtbf)) -
                delta;
  const double wanted = spec.interval_s > 0 ? spec.interval_s : result.daly_interval_s;
  result.iterations_per_checkpoint =
      static_cast<uint64_t>(std::max(1.0, std::round(wanted / iteration_s)));
  const double tau = static_cast<double>(result.iterations_per_checkpoint) * iteration_s;
  result.interval_s = tau;
  const double segment = tau + delta;
  result.daly = tau / (mtbf * std::exp(restart / mtbf) * std::expm1(segment / mtbf));
  result.young = 1.0 - delta / tau - (tau / 2.0 + restart) / mtbf;

  constexpr double kMaxFailures = 1e8;
  if (result.horizon_s / mtbf > kMaxFailures) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "goodput: the horizon holds about {:.3g} failures (system MTBF {:.3g} s); "
                       "at most {:.0e} are drawn",
                       result.horizon_s / mtbf, mtbf, kMaxFailures);
  }
  const double horizon = result.horizon_s;
  double now = 0;
  uint64_t saved_segments = 0;
  uint64_t draw = 0;
  while (now < horizon) {
    const double life = exponential_draw(spec.seed, draw++, mtbf);
    if (now + life >= horizon) {
      saved_segments += static_cast<uint64_t>(std::floor((horizon - now) / segment));
      break;
    }
    saved_segments += static_cast<uint64_t>(std::floor(life / segment));
    now += life;
    ++result.failures;
    // Restart; a failure during it starts it over.
    for (;;) {
      const double next = exponential_draw(spec.seed, draw++, mtbf);
      if (next >= restart) {
        now += restart;
        break;
      }
      if (now + next >= horizon) {
        now = horizon;
        break;
      }
      now += next;
      ++result.failures;
    }
  }
  result.checkpoints = saved_segments;
  result.simulated = static_cast<double>(saved_segments) * tau / horizon;
  return result;
}

}  // namespace orrery::sim
