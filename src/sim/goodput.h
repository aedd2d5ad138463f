// sim/goodput.h: what failures leave of a long job: useful work per unit of wall time.
//
// The job runs iterations of the simulated length. It writes a checkpoint after every `k`
// iterations (the interval, whole iterations; the job pauses for the checkpoint), fails at the
// rate of `components` independent parts with exponential lifetimes (system MTBF = component MTBF
// / components), loses the work since its last completed checkpoint on a failure, and is running
// again `restart` later (a failure during the restart starts it over). Goodput is the work saved
// in checkpoints over the horizon, divided by the horizon.
//
// Simulated: failure times drawn from a seeded counter-based stream, walked failure by failure
// (the segments between two failures are counted, not stepped), so a year of a 1-ms iteration
// costs as much as a year of an hour's. Closed forms it should approach over a long horizon:
//   - Daly (2006), exact for this process: goodput = tau / (M e^(R/M) (e^((tau+delta)/M) - 1)),
//     tau the interval, delta the checkpoint, R the restart, M the system MTBF;
//   - Young (1974), first order: 1 - delta/tau - (tau/2 + R)/M.
// The default interval is Daly's optimum, sqrt(2 delta M) (1 + sqrt(delta/(2M))/3 + delta/(18M))
// - delta (M when delta >= 2M), next to Young's sqrt(2 delta M).
#pragma once

#include <cstdint>

#include "core/error.h"
#include "sim/perturbation.h"

namespace orrery::sim {

struct GoodputResult {
  double iteration_s = 0;
  uint64_t components = 0;
  double system_mtbf_s = 0;
  uint64_t iterations_per_checkpoint = 0;
  double interval_s = 0;        // the interval used: whole iterations
  double young_interval_s = 0;  // sqrt(2 delta M)
  double daly_interval_s = 0;   // Daly's higher-order optimum
  double simulated = 0;         // goodput over the horizon, failures drawn
  double daly = 0;              // Daly's expectation at the interval used
  double young = 0;             // Young's first order at the interval used (may be below 0)
  uint64_t failures = 0;        // drawn within the horizon (restarts that failed included)
  uint64_t checkpoints = 0;     // completed within the horizon
  double horizon_s = 0;
};

// Errors: a zero iteration time or component count, or a horizon holding more than 10^8
// failures.
Expected<GoodputResult> compute_goodput(const GoodputSpec& spec, double iteration_s,
                                        uint64_t components);

}  // namespace orrery::sim
