#include "design/libra_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>

namespace orrery::design {

namespace {

// Lowercase, without '-', '_' and spaces: "All-Reduce" and "ALLREDUCE" read alike.
std::string squash(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '-' || c == '_' || c == ' ') continue;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

const char* phase_name(size_t phase) {
  static constexpr const char* kNames[] = {"forward", "input_grad", "weight_grad"};
  return kNames[phase];
}

}  // namespace

const char* topology_name(TopologyKind kind) {
  switch (kind) {
    case TopologyKind::kRing:
      return "Ring";
    case TopologyKind::kFullyConnected:
      return "FullyConnected";
    case TopologyKind::kSwitch:
      return "Switch";
  }
  return "?";
}

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kNone:
      return "NONE";
    case CollectiveKind::kAllReduce:
      return "ALLREDUCE";
    case CollectiveKind::kReduceScatter:
      return "REDUCESCATTER";
    case CollectiveKind::kAllGather:
      return "ALLGATHER";
    case CollectiveKind::kAllToAll:
      return "ALLTOALL";
  }
  return "?";
}

const char* objective_name(Objective objective) {
  switch (objective) {
    case Objective::kPerfOpt:
      return "PerfOpt";
    case Objective::kPerfPerCost:
      return "PerfPerCost";
    case Objective::kPerfOptBudget:
      return "PerfOptBudget";
  }
  return "?";
}

Expected<TopologyKind> parse_topology(std::string_view name) {
  const std::string key = squash(name);
  if (key == "ring") return TopologyKind::kRing;
  if (key == "fullyconnected" || key == "fc") return TopologyKind::kFullyConnected;
  if (key == "switch") return TopologyKind::kSwitch;
  return Error::make(ErrorKind::kConfig,
                     "unknown topology '{}' (expected Ring, FullyConnected or Switch)", name);
}

Expected<CollectiveKind> parse_collective(std::string_view name) {
  const std::string key = squash(name);
  if (key == "none") return CollectiveKind::kNone;
  if (key == "allreduce") return CollectiveKind::kAllReduce;
  if (key == "reducescatter") return CollectiveKind::kReduceScatter;
  if (key == "allgather") return CollectiveKind::kAllGather;
  if (key == "alltoall") return CollectiveKind::kAllToAll;
  return Error::make(ErrorKind::kConfig,
                     "unknown collective '{}' (expected NONE, ALLREDUCE, REDUCESCATTER, "
                     "ALLGATHER or ALLTOALL)",
                     name);
}

Expected<Objective> parse_objective(std::string_view name) {
  const std::string key = squash(name);
  if (key == "perfopt") return Objective::kPerfOpt;
  if (key == "perfpercost" || key == "perfpercostopt") return Objective::kPerfPerCost;
  if (key == "perfoptbudget" || key == "budget") return Objective::kPerfOptBudget;
  return Error::make(ErrorKind::kInvalidArgument,
                     "unknown objective '{}' (expected PerfOpt, PerfPerCost or PerfOptBudget)",
                     name);
}

std::vector<double> dimension_traffic(CollectiveKind kind, double bytes,
                                      const std::vector<int32_t>& groups) {
  std::vector<double> traffic(groups.size(), 0.0);
  double chunk = bytes;
  const size_t dims = groups.size();
  for (size_t step = 0; step < dims; ++step) {
    // All-gather grows the chunk, so it starts from the last dimension (LIBRA's order).
    const size_t dim = kind == CollectiveKind::kAllGather ? dims - 1 - step : step;
    if (groups[dim] < 1) continue;
    const double n = static_cast<double>(groups[dim]);
    switch (kind) {
      case CollectiveKind::kNone:
        return traffic;
      case CollectiveKind::kAllReduce:
        traffic[dim] = 2.0 * chunk * (n - 1.0) / n;
        chunk /= n;
        break;
      case CollectiveKind::kReduceScatter:
        traffic[dim] = chunk * (n - 1.0) / n;
        chunk /= n;
        break;
      case CollectiveKind::kAllGather:
        traffic[dim] = chunk * (n - 1.0);
        chunk *= n;
        break;
      case CollectiveKind::kAllToAll:
        traffic[dim] = chunk * (n - 1.0) / n;
        break;
    }
  }
  return traffic;
}

Expected<TrafficModel> build_traffic_model(const Problem& problem) {
  const size_t dims = problem.dimensions.size();
  if (dims == 0) return Error::make(ErrorKind::kConfig, "the network has no dimensions");
  if (dims > 16) return Error::make(ErrorKind::kConfig, "{} dimensions (at most 16)", dims);
  TrafficModel model;
  model.npus = 1;
  for (size_t dim = 0; dim < dims; ++dim) {
    const Dimension& dimension = problem.dimensions[dim];
    if (dimension.size < 2) {
      return Error::make(ErrorKind::kConfig, "dimension {}: size {} (expected at least 2)", dim,
                         dimension.size);
    }
    model.npus *= dimension.size;
  }
  if (problem.layers.empty()) return Error::make(ErrorKind::kConfig, "the workload has no layers");

  // Identical traffic vectors are merged so the optimizer has one variable per distinct one; the
  // map keeps them in a deterministic order (first occurrence).
  std::map<std::vector<double>, size_t> index;
  for (const Layer& layer : problem.layers) {
    for (size_t phase = 0; phase < 3; ++phase) {
      const Phase& p = layer.phases[phase];
      const std::string where = fmt::format("layer '{}' {}", layer.name, phase_name(phase));
      if (!(p.compute_ns >= 0) || !std::isfinite(p.compute_ns)) {
        return Error::make(ErrorKind::kConfig, "{}: compute time {} (expected >= 0 ns)", where,
                           p.compute_ns);
      }
      model.compute_ns += p.compute_ns;
      if (p.collective == CollectiveKind::kNone || p.bytes == 0) continue;
      if (!(p.bytes > 0) || !std::isfinite(p.bytes)) {
        return Error::make(ErrorKind::kConfig, "{}: collective size {} (expected > 0 bytes)", where,
                           p.bytes);
      }
      if (p.groups.size() != dims) {
        return Error::make(ErrorKind::kConfig,
                           "{}: {} communicator group sizes for a {}-dimensional network", where,
                           p.groups.size(), dims);
      }
      bool any = false;
      for (size_t dim = 0; dim < dims; ++dim) {
        const int32_t n = p.groups[dim];
        if (n == -1) continue;
        if (n < 1 || static_cast<uint32_t>(n) > problem.dimensions[dim].size) {
          return Error::make(ErrorKind::kConfig,
                             "{}: group size {} in dimension {} (expected -1 or 1..{})", where, n,
                             dim, problem.dimensions[dim].size);
        }
        any = any || n > 1;
      }
      if (!any) continue;  // a collective over one rank moves nothing
      std::vector<double> traffic = dimension_traffic(p.collective, p.bytes, p.groups);
      auto [it, inserted] = index.emplace(traffic, model.collectives.size());
      if (inserted) {
        model.collectives.push_back(
            {std::move(traffic), 0.0,
             fmt::format("{} {} {}", where, collective_name(p.collective), p.bytes)});
      }
      model.collectives[it->second].count += 1.0;
    }
  }

  for (const LinearConstraint& constraint : problem.constraints) {
    if (constraint.coefficients.size() != dims) {
      return Error::make(ErrorKind::kConfig,
                         "constraint '{}' has {} coefficients for a {}-dimensional network",
                         constraint.text, constraint.coefficients.size(), dims);
    }
  }

  model.unit_cost.assign(dims, 0.0);
  if (!problem.cost_model.empty()) {
    for (size_t dim = 0; dim < dims; ++dim) {
      const Dimension& dimension = problem.dimensions[dim];
      const auto found =
          std::find_if(problem.cost_model.begin(), problem.cost_model.end(),
                       [&](const auto& entry) { return entry.first == dimension.cost_dimension; });
      if (found == problem.cost_model.end()) {
        return Error::make(ErrorKind::kConfig,
                           "dimension {}: cost dimension '{}' is not in the cost model", dim,
                           dimension.cost_dimension);
      }
      const UnitCosts& unit = found->second;
      if (!(unit.link > 0)) {
        return Error::make(ErrorKind::kConfig, "cost dimension '{}': no positive Link cost",
                           found->first);
      }
      double per_gbps = unit.link;
      if (dimension.kind == TopologyKind::kSwitch) {
        if (!(unit.switch_ > 0) || !(unit.nic > 0)) {
          return Error::make(ErrorKind::kConfig,
                             "cost dimension '{}' prices Switch dimension {} but lacks a positive "
                             "Switch or Nic cost",
                             found->first, dim);
        }
        per_gbps += unit.switch_ + unit.nic;
      }
      model.unit_cost[dim] = static_cast<double>(model.npus) * per_gbps;
    }
  }
  return model;
}

double communication_time_ns(const TrafficModel& model, const std::vector<double>& bw) {
  double total = 0;
  for (const CollectiveTraffic& collective : model.collectives) {
    double slowest = 0;
    for (size_t dim = 0; dim < bw.size(); ++dim) {
      const double bytes = collective.bytes_per_dim[dim];
      if (bytes == 0) continue;
      if (!(bw[dim] > 0)) return std::numeric_limits<double>::infinity();
      slowest = std::max(slowest, bytes / bw[dim]);
    }
    total += collective.count * slowest;
  }
  return total;
}

double iteration_time_ns(const TrafficModel& model, const std::vector<double>& bw) {
  return model.compute_ns + communication_time_ns(model, bw);
}

double network_cost(const TrafficModel& model, const std::vector<double>& bw) {
  double cost = 0;
  for (size_t dim = 0; dim < bw.size(); ++dim) cost += model.unit_cost[dim] * bw[dim];
  return cost;
}

double constraint_violation(const std::vector<LinearConstraint>& constraints,
                            const std::vector<double>& bw) {
  double worst = 0;
  for (const LinearConstraint& constraint : constraints) {
    double lhs = 0;
    for (size_t dim = 0; dim < bw.size(); ++dim) lhs += constraint.coefficients[dim] * bw[dim];
    const double excess = lhs - constraint.rhs;
    switch (constraint.relation) {
      case Relation::kLessEqual:
        worst = std::max(worst, excess);
        break;
      case Relation::kGreaterEqual:
        worst = std::max(worst, -excess);
        break;
      case Relation::kEqual:
        worst = std::max(worst, std::fabs(excess));
        break;
    }
  }
  for (double b : bw) worst = std::max(worst, -b);
  return worst;
}

}  // namespace orrery::design
