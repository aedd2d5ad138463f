// partition/partitioner.h: a trained network spread over K workers (RePurpose and its baselines).
//
// Every dense or convolution layer's output units (neurons, channels) are placed on workers, each
// worker holding floor(n/K) or ceil(n/K) of them; a worker computes its units from the inputs it
// holds and the ones it receives. An input group (one input neuron, or a whole input channel map)
// that lives on worker a and is used by a unit on worker b != a is sent from a to b once per
// inference: that is the cross-worker traffic. The network's input is available on every worker;
// at the end every worker sends its outputs to worker 0. Methods (docs/models/partition.md):
//   contiguous  units [kn/K, (k+1)n/K) on worker k, every weight kept: exact, the most traffic
//   magnitude   contiguous placement; the cross-worker (group, worker) connections of least weight
//               norm dropped down to the budget, no refit
//   random      a seeded random balanced placement per layer, then the same pruning
//   repurpose   placements by the Hungarian algorithm and weights refit by L0-constrained least
//               squares (group OMP, sparse_fit.h) on calibration data, layer by layer: each layer
//               fitted to the trained layer's outputs from the partitioned network's inputs. A
//               layer starts from the contiguous placement or the one keeping the most trained
//               weight mass with its inputs (a co-placement of all layers seeds the first layer),
//               then alternates the Hungarian algorithm on each unit's refit loss per worker with
//               the refit, keeping a change only when the next layer's refit objective (the
//               layer's own, for the last) decreases
//   refit       (an ablation) contiguous placement with repurpose's refit: what the placement adds
// The budget of a layer is `keep` times the contiguous split's traffic of that layer: in total, or
// (per_pair) for each ordered worker pair. Deterministic: one seed, stable orders.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "partition/model.h"
#include "partition/sparse_fit.h"

namespace orrery::partition {

enum class Method : uint8_t { kRepurpose, kContiguous, kRandom, kMagnitude, kRefit };
std::string_view method_name(Method method);
Expected<Method> parse_method(std::string_view name);

struct PartitionOptions {
  int32_t workers = 2;
  double keep = 1.0;      // in [0, 1]: the share of each layer's contiguous-split traffic allowed
  bool per_pair = false;  // the share bounds each ordered worker pair instead of the layer total
  double ridge = 1e-3;    // times the mean diagonal of the layer's Gram matrix
  int32_t rounds = 3;     // repurpose: Hungarian and refit alternations per layer
  uint64_t seed = 1;      // random placements
};

// One dense or convolution layer of a partitioned model.
struct LayerPlan {
  size_t layer = 0;                 // index in Model::layers
  std::vector<int32_t> placement;   // worker of each output unit
  Matrix traffic;                   // workers x workers: values a sends to b per inference
  std::vector<int64_t> macs;        // per worker per inference
  std::vector<int64_t> local_macs;  // per worker: the part on inputs it holds
};

struct Partition {
  Method method = Method::kContiguous;
  PartitionOptions options;
  Model model;  // the weights the workers compute with (zero where a worker lacks the input)
  std::vector<LayerPlan> layers;
  std::vector<int64_t> gather;  // per worker: output values sent to worker 0 at the end

  // Cross-worker values per inference: every layer's traffic and the final gather.
  int64_t traffic_values() const;
  // 2 x multiply-adds per inference, per worker.
  std::vector<int64_t> flops_per_worker() const;
};

namespace detail {
struct LayerContext;
struct Fit;
}  // namespace detail

class Partitioner {
 public:
  // Runs the model on the calibration inputs (rows = samples) once; checks that every
  // convolution's input channels come from single units. Errors name the layer.
  static Expected<Partitioner> make(const Model& model, const Matrix& calibration);

  // 1 to the widest dense/conv layer's units: more would leave a worker idle in every layer.
  // Errors: kInvalidArgument naming both counts and the model.
  Status check_workers(int32_t workers) const;

  // Not thread-safe: caches the co-placement of each worker count. Errors: check_workers's, and
  // options out of range.
  Expected<Partition> run(Method method, const PartitionOptions& options);

  const Model& model() const { return model_; }
  // The contiguous split's traffic of each dense/conv layer's inputs, values per inference.
  std::vector<int64_t> full_traffic(int32_t workers) const;

 private:
  struct Weighted {
    size_t layer = 0;
    std::vector<int64_t> group_first;  // input groups: columns [first[g], first[g+1])
    std::vector<int64_t> group_unit;   // unit of the previous dense/conv layer, -1: model input
    int64_t group_values = 1;          // values sent per group (1, or a channel's map)
    Matrix importance;                 // units x previous units: trained weights^2 x mean input^2
  };
  // A layer's refit at one placement (the Gram matrix its fit refers to, kept alive with it).
  struct Refit {
    std::shared_ptr<LayerGram> gram;
    std::shared_ptr<detail::Fit> fit;
    Matrix weight;  // [W b]
  };
  Partitioner() = default;
  const std::vector<std::vector<int32_t>>& coplacement(int32_t workers);
  // A balanced placement of every dense/conv layer by recursive spectral bisection of the weight
  // mass graph (the co-placement's second start).
  std::vector<std::vector<int32_t>> spectral_placement(int32_t workers) const;
  // Dense/conv layer w's groups, their workers given the previous layer's placement, its budget.
  detail::LayerContext context(size_t w, const std::vector<int32_t>& previous,
                               const PartitionOptions& options) const;
  // The input of dense/conv layer w + 1 when w computes with `weight` ([W b]) from `input`.
  Matrix advance(size_t w, const Matrix& weight, const Matrix& input) const;
  Refit refit(size_t w, const Matrix& input, const detail::LayerContext& ctx,
              const std::vector<int32_t>& placement, const PartitionOptions& options,
              int64_t samples = -1) const;
  // The squared error of layer w's outputs computed with `weight` on the held-out calibration
  // rows (the last quarter), against the trained layer's.
  double held_out_error(size_t w, const Matrix& weight, const Matrix& input) const;
  static int64_t fit_samples(int64_t rows);
  // The placements repurpose starts layer w from: contiguous, and the one keeping the most
  // trained weight mass with its inputs (the Hungarian algorithm on the mass).
  std::vector<std::vector<int32_t>> starts(size_t w, const std::vector<int32_t>& previous,
                                           int32_t workers) const;
  // What repurpose minimises when it places layer w: the held-out error of the next layer's
  // refit from its best start, or (the last layer) of its own refit, both refit on the other
  // calibration rows.
  double score(size_t w, const Matrix& input, const detail::LayerContext& ctx,
               const std::vector<int32_t>& placement, const PartitionOptions& options) const;

  Model model_;
  Matrix calibration_;
  std::vector<Matrix> original_;  // calibration activations after each layer
  std::vector<Weighted> weighted_;
  std::vector<int64_t> output_unit_;  // per output feature: unit of the last dense/conv layer
  std::vector<std::pair<int32_t, std::vector<std::vector<int32_t>>>> coplacements_;
};

}  // namespace orrery::partition
