// design/libra_input.h: LIBRA problems from LIBRA's own files and from orrery's YAML/JSON.
//
// LIBRA's files are read unchanged: the network YAML (Topology, NpusCount, CostDimension lists),
// the workload text (ASTRA-sim 1.0 layer lines of 12 fields: name, -1, then compute ns,
// collective, bytes for forward, input gradient and weight gradient, then the update time, which
// LIBRA ignores and so do we), the communicator YAML (Forward, InputGrad, WeightGrad group sizes
// per dimension, -1 = unused) and the cost model YAML (per cost dimension: Link, Switch, Nic in $
// per GB/s). orrery's problem file (YAML or JSON) holds the same things inline or names those
// files (paths relative to the problem file); see docs/models/libra.md. Every error names the
// file and line and what was expected.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "core/error.h"
#include "design/libra_model.h"

namespace orrery::design {

// The largest number a constraint, budget or cost may hold: 10^15 (a sum of 10^6 dimensions at
// 10^9 GB/s; a budget of a quadrillion dollars). Beyond it the solvers' scaling breaks down.
inline constexpr double kMaxLibraNumber = 1e15;

// "B0 + 2*B1 <= 300", "sum = 500" (sum of all B), "B0 >= B1", "B2 + B3 == 200", "B1 = 0.5 B0".
// Terms are numbers, B<d> (also b<d>, BW<d>) and sum, each with an optional numeric factor; every
// number is finite and at most kMaxLibraNumber.
Expected<LinearConstraint> parse_constraint(std::string_view text, size_t dims);

Expected<std::vector<Dimension>> load_libra_network(const std::string& path);
// Layers with compute and collectives; group sizes are left empty (see apply_communicator).
Expected<std::vector<Layer>> load_libra_workload(const std::string& path);
// Forward, InputGrad, WeightGrad group sizes.
Expected<std::array<std::vector<int32_t>, 3>> load_libra_communicator(const std::string& path);
Expected<std::vector<std::pair<std::string, UnitCosts>>> load_libra_cost_model(
    const std::string& path);

// Gives every phase that has no group sizes of its own the communicator's for its phase.
void apply_communicator(const std::array<std::vector<int32_t>, 3>& groups,
                        std::vector<Layer>& layers);

// orrery's problem file (YAML or JSON).
Expected<Problem> load_problem(const std::string& path);

}  // namespace orrery::design
