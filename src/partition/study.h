// partition/study.h: methods compared at equal accuracy, budget sweeps, and what is reported.
//
// run_study() partitions the model by each method over a sweep of budget shares (`keep`, a
// geometric grid from 1 down to 1/256, then 0), measures each point's test accuracy, traffic and
// FLOPs per worker, and picks each method's operating point: the least traffic whose accuracy
// stays within max_drop of the unpartitioned model's, refined by bisection between the last grid
// share that holds and the first that does not. The contiguous split keeps every weight (keep 1)
// and is exact. With a fixed share, that one point is each method's operating point.
// study_json (the `--json` document), format_study (the table), study_svg (accuracy against
// traffic, one curve per method) are pure functions of the study.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "partition/dataset.h"
#include "partition/partitioner.h"

namespace orrery::partition {

struct StudyOptions {
  PartitionOptions partition;  // workers, per_pair, ridge, rounds, seed (keep is swept)
  std::vector<Method> methods = {Method::kRepurpose, Method::kContiguous, Method::kRandom,
                                 Method::kMagnitude};
  double max_drop = 0.01;      // accuracy, as a fraction (1 point = 0.01)
  std::optional<double> keep;  // a fixed share instead of the search
  int32_t grid_points = 17;    // shares 1, 2^-1/2, ..., 2^-(n-2)/2, then 0
  int32_t refine_steps = 5;
  int64_t bytes_per_value = 4;
};

struct Evaluation {
  double keep = 1.0;
  double accuracy = 0.0;
  int64_t traffic_values = 0;
  std::vector<int64_t> flops_per_worker;
};

struct MethodStudy {
  Method method = Method::kContiguous;
  std::vector<Evaluation> curve;  // by decreasing keep
  Evaluation operating;
  bool within_drop = false;  // whether any point met the accuracy target
  Partition partition;       // at the operating point
};

struct Study {
  int32_t workers = 1;
  int64_t bytes_per_value = 4;
  double max_drop = 0.01;
  double unpartitioned_accuracy = 0.0;
  int64_t calibration_rows = 0;
  int64_t test_rows = 0;
  std::vector<int64_t> full_traffic;  // contiguous split, per dense/conv layer, values
  std::vector<MethodStudy> methods;
  // Simulated latency of each method's operating point (ns), when a network was given.
  std::vector<std::optional<int64_t>> latency_ns;

  const MethodStudy* find(Method method) const;
};

Expected<Study> run_study(Partitioner& partitioner, int64_t calibration_rows, const Dataset& test,
                          const StudyOptions& options);

nlohmann::json study_json(const Study& study);
std::string format_study(const Study& study);
std::string study_svg(const Study& study, const std::string& title);

}  // namespace orrery::partition
