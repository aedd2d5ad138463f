#include "partition/partitioner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include <Eigen/Dense>
#include <Eigen/Eigenvalues>

#include "partition/assignment.h"
#include "partition/sparse_fit.h"

namespace orrery::partition {

std::string_view method_name(Method method) {
  switch (method) {
    case Method::kRepurpose:
      return "repurpose";
    case Method::kContiguous:
      return "contiguous";
    case Method::kRandom:
      return "random";
    case Method::kMagnitude:
      return "magnitude";
    case Method::kRefit:
      return "refit";
  }
  return "?";
}

Expected<Method> parse_method(std::string_view name) {
  for (Method m : {Method::kRepurpose, Method::kContiguous, Method::kRandom, Method::kMagnitude,
                   Method::kRefit}) {
    if (name == method_name(m)) return m;
  }
  return Error::make(ErrorKind::kInvalidArgument,
                     "unknown method \"{}\" (repurpose, contiguous, random, magnitude, refit)",
                     name);
}

int64_t Partition::traffic_values() const {
  int64_t total = std::accumulate(gather.begin(), gather.end(), int64_t{0});
  for (const LayerPlan& plan : layers)
    total += static_cast<int64_t>(std::llround(plan.traffic.sum()));
  return total;
}

std::vector<int64_t> Partition::flops_per_worker() const {
  std::vector<int64_t> flops(static_cast<size_t>(options.workers), 0);
  for (const LayerPlan& plan : layers) {
    for (size_t k = 0; k < flops.size(); ++k) flops[k] += 2 * plan.macs[k];
  }
  return flops;
}

namespace detail {

// The traffic budget of one layer, in values.
struct Budget {
  bool per_pair = false;
  int64_t total = 0;
  Eigen::Matrix<int64_t, Eigen::Dynamic, Eigen::Dynamic> pair;  // [from][to]

  bool affords(int32_t from, int32_t to, int64_t values) const {
    return per_pair ? pair(from, to) >= values : total >= values;
  }
  void spend(int32_t from, int32_t to, int64_t values) {
    if (per_pair) {
      pair(from, to) -= values;
    } else {
      total -= values;
    }
  }
};

// What one dense/conv layer is solved with.
struct LayerContext {
  int32_t workers = 1;
  int64_t units = 0;
  std::vector<int32_t> group_worker;  // -1: everywhere
  std::vector<int64_t> group_first;
  int64_t group_values = 1;
  int64_t held = 0;  // values of the layer's inputs that live on one worker (not everywhere)
  Budget budget;
};

struct Fit {
  std::vector<WorkerFit> workers;
  double objective = 0.0;
};

}  // namespace detail

namespace {

using detail::Budget;
using detail::Fit;
using detail::LayerContext;

// A convolution's outputs as (sample, position) rows and channel columns (the rows of its
// unfolded inputs); a dense layer's as they are.
Matrix target_rows(const Layer& layer, const Matrix& output) {
  if (layer.kind == LayerKind::kDense) return output;
  const int64_t positions = layer.out.positions();
  const int64_t channels = layer.out.channels;
  Matrix rows(output.rows() * positions, channels);
  for (int64_t n = 0; n < output.rows(); ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t p = 0; p < positions; ++p)
        rows(n * positions + p, c) = output(n, c * positions + p);
    }
  }
  return rows;
}

Matrix input_rows(const Layer& layer, const Matrix& input) {
  return layer.kind == LayerKind::kDense ? input : unfold(layer, input);
}

// [W b]: the bias as the last column.
Matrix with_bias(const Layer& layer) {
  Matrix w(layer.weight.rows(), layer.weight.cols() + 1);
  w.leftCols(layer.weight.cols()) = layer.weight;
  w.col(layer.weight.cols()) = layer.bias;
  return w;
}

// One-hot placement matrix: units x workers.
Matrix one_hot(const std::vector<int32_t>& placement, int32_t workers) {
  Matrix h = Matrix::Zero(static_cast<int64_t>(placement.size()), workers);
  for (size_t u = 0; u < placement.size(); ++u) h(static_cast<int64_t>(u), placement[u]) = 1.0;
  return h;
}

double placement_cost(const Matrix& cost, const std::vector<int32_t>& placement) {
  double sum = 0.0;
  for (size_t u = 0; u < placement.size(); ++u) sum += cost(static_cast<int64_t>(u), placement[u]);
  return sum;
}

// A uniformly random balanced placement: the contiguous one shuffled (Fisher-Yates on a fixed
// generator, so that every platform draws the same placement).
std::vector<int32_t> random_placement(int64_t units, int32_t workers, std::mt19937_64& rng) {
  std::vector<int32_t> placement = contiguous_placement(units, workers);
  for (int64_t i = units - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(placement[static_cast<size_t>(i)], placement[static_cast<size_t>(j)]);
  }
  return placement;
}

std::vector<std::vector<int64_t>> units_by_worker(const std::vector<int32_t>& placement,
                                                  int32_t workers) {
  std::vector<std::vector<int64_t>> by(static_cast<size_t>(workers));
  for (size_t u = 0; u < placement.size(); ++u) {
    by[static_cast<size_t>(placement[u])].push_back(static_cast<int64_t>(u));
  }
  return by;
}

bool is_cross(const LayerContext& ctx, int64_t group, int32_t worker) {
  const int32_t at = ctx.group_worker[static_cast<size_t>(group)];
  return at >= 0 && at != worker;
}

// Drops the cross-worker (group, worker) connections of least squared weight until the budget
// holds; no refit. Returns the pruned [W b].
Matrix prune_by_magnitude(const Matrix& weight, const std::vector<int32_t>& placement,
                          const LayerContext& ctx) {
  const auto by_worker = units_by_worker(placement, ctx.workers);
  struct Candidate {
    double score;
    int32_t worker;
    int64_t group;
  };
  std::vector<Candidate> candidates;
  const auto groups = static_cast<int64_t>(ctx.group_worker.size());
  for (int32_t k = 0; k < ctx.workers; ++k) {
    const auto& units = by_worker[static_cast<size_t>(k)];
    if (units.empty()) continue;
    for (int64_t g = 0; g < groups; ++g) {
      if (!is_cross(ctx, g, k)) continue;
      const int64_t first = ctx.group_first[static_cast<size_t>(g)];
      const int64_t q = ctx.group_first[static_cast<size_t>(g) + 1] - first;
      double score = 0.0;
      for (int64_t j : units) score += weight.row(j).segment(first, q).squaredNorm();
      candidates.push_back({score, k, g});
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
  Budget budget = ctx.budget;
  std::vector<uint8_t> kept(static_cast<size_t>(groups * ctx.workers), 0);
  for (const Candidate& c : candidates) {
    const int32_t from = ctx.group_worker[static_cast<size_t>(c.group)];
    if (!budget.affords(from, c.worker, ctx.group_values)) continue;
    budget.spend(from, c.worker, ctx.group_values);
    kept[static_cast<size_t>(c.group * ctx.workers + c.worker)] = 1;
  }
  Matrix pruned = weight;
  for (int32_t k = 0; k < ctx.workers; ++k) {
    for (int64_t g = 0; g < groups; ++g) {
      if (!is_cross(ctx, g, k) || kept[static_cast<size_t>(g * ctx.workers + k)]) continue;
      const int64_t first = ctx.group_first[static_cast<size_t>(g)];
      const int64_t q = ctx.group_first[static_cast<size_t>(g) + 1] - first;
      for (int64_t j : by_worker[static_cast<size_t>(k)]) pruned.row(j).segment(first, q).setZero();
    }
  }
  return pruned;
}

// The refit of one placement: each worker's local groups, then the cross groups of greatest gain
// over all workers while the budget lasts (and a group still helps).

Fit fit_placement(const LayerGram& gram, const std::vector<int32_t>& placement,
                  const LayerContext& ctx) {
  const auto by_worker = units_by_worker(placement, ctx.workers);
  const auto groups = static_cast<int64_t>(ctx.group_worker.size());
  Fit fit;
  fit.workers.reserve(static_cast<size_t>(ctx.workers));
  for (int32_t k = 0; k < ctx.workers; ++k) {
    fit.workers.emplace_back(gram, by_worker[static_cast<size_t>(k)]);
    std::vector<int64_t> local;
    for (int64_t g = 0; g < groups; ++g) {
      if (!is_cross(ctx, g, k)) local.push_back(g);
    }
    fit.workers.back().add_groups(local);
  }
  Budget budget = ctx.budget;
  const double tolerance = 1e-12 * gram.energy.sum();
  struct Best {
    double gain = 0.0;
    int64_t group = -1;
  };
  auto best_of = [&](int32_t k) {
    Best best;
    const WorkerFit& w = fit.workers[static_cast<size_t>(k)];
    if (w.outputs().empty()) return best;
    for (int64_t g = 0; g < groups; ++g) {
      if (!is_cross(ctx, g, k) || w.has_group(g)) continue;
      if (!budget.affords(ctx.group_worker[static_cast<size_t>(g)], k, ctx.group_values)) continue;
      const double gain = w.gain(g);
      if (best.group < 0 || gain > best.gain) best = {gain, g};
    }
    return best;
  };
  std::vector<Best> best(static_cast<size_t>(ctx.workers));
  for (int32_t k = 0; k < ctx.workers; ++k) best[static_cast<size_t>(k)] = best_of(k);
  while (true) {
    int32_t pick = -1;
    for (int32_t k = 0; k < ctx.workers; ++k) {
      Best& b = best[static_cast<size_t>(k)];
      if (b.group >= 0 &&
          !budget.affords(ctx.group_worker[static_cast<size_t>(b.group)], k, ctx.group_values)) {
        b = best_of(k);  // its pair's budget ran out since
      }
      if (b.group >= 0 && b.gain > tolerance &&
          (pick < 0 || b.gain > best[static_cast<size_t>(pick)].gain)) {
        pick = k;
      }
    }
    if (pick < 0) break;
    const int64_t g = best[static_cast<size_t>(pick)].group;
    budget.spend(ctx.group_worker[static_cast<size_t>(g)], pick, ctx.group_values);
    fit.workers[static_cast<size_t>(pick)].add_group(g);
    best[static_cast<size_t>(pick)] = best_of(pick);
  }
  for (size_t u = 0; u < placement.size(); ++u) {
    fit.objective += fit.workers[static_cast<size_t>(placement[u])].loss(static_cast<int64_t>(u));
  }
  return fit;
}

Matrix fitted_weights(const Fit& fit, int64_t units, int64_t columns) {
  Matrix weight = Matrix::Zero(units, columns);
  for (const WorkerFit& w : fit.workers) {
    const Matrix rows = w.weights();
    for (size_t i = 0; i < w.outputs().size(); ++i) {
      weight.row(w.outputs()[i]) = rows.row(static_cast<int64_t>(i));
    }
  }
  return weight;
}

}  // namespace

Expected<Partitioner> Partitioner::make(const Model& model, const Matrix& calibration) {
  if (calibration.cols() != model.input.features()) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "the calibration data has {} features per row, the model ({}) takes {}",
                       calibration.cols(), model.source, model.input.features());
  }
  if (calibration.rows() == 0) {
    return Error::make(ErrorKind::kInvalidArgument, "no calibration rows");
  }
  Partitioner p;
  p.model_ = model;
  p.calibration_ = calibration;
  forward(model, calibration, &p.original_);
  // The unit (of the previous dense/conv layer) each feature of the current tensor belongs to.
  std::vector<int64_t> unit(static_cast<size_t>(model.input.features()), -1);
  const Matrix* input = &p.calibration_;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const Layer& layer = model.layers[i];
    const TensorShape in = layer.in;
    const TensorShape out = layer.out;
    auto channel_unit = [&](int64_t c) -> Expected<int64_t> {
      const int64_t positions = in.positions();
      const int64_t u = unit[static_cast<size_t>(c * positions)];
      for (int64_t q = 1; q < positions; ++q) {
        if (unit[static_cast<size_t>(c * positions + q)] != u) {
          return Error::make(ErrorKind::kConfig,
                             "layer {} ({} {}): input channel {} holds the outputs of several "
                             "units of the layer before; only whole channels can be placed",
                             i, layer_kind_name(layer.kind), layer.name, c);
        }
      }
      return u;
    };
    std::vector<int64_t> next(static_cast<size_t>(out.features()), -1);
    if (layer.weighted()) {
      Weighted w;
      w.layer = i;
      const int64_t taps = layer.kind == LayerKind::kDense ? 1 : layer.kernel_h * layer.kernel_w;
      const int64_t groups = layer.kind == LayerKind::kDense ? in.features() : in.channels;
      for (int64_t g = 0; g <= groups; ++g) w.group_first.push_back(g * taps);
      for (int64_t g = 0; g < groups; ++g) {
        if (layer.kind == LayerKind::kDense) {
          w.group_unit.push_back(unit[static_cast<size_t>(g)]);
        } else {
          Expected<int64_t> u = channel_unit(g);
          if (!u) return u.error();
          w.group_unit.push_back(*u);
        }
      }
      w.group_values = layer.kind == LayerKind::kDense ? 1 : in.positions();
      if (!p.weighted_.empty()) {
        // Squared weight times the input's summed square (the error of dropping the input, at
        // the scale of the layer's least-squares objective), summed per unit of the layer before.
        const Matrix rows = input_rows(layer, *input);
        const Vector power = rows.colwise().squaredNorm().transpose();
        const int64_t previous = p.model_.layers[p.weighted_.back().layer].units();
        w.importance = Matrix::Zero(layer.units(), previous);
        for (int64_t g = 0; g < groups; ++g) {
          const int64_t u = w.group_unit[static_cast<size_t>(g)];
          if (u < 0) continue;
          for (int64_t c = g * taps; c < (g + 1) * taps; ++c) {
            w.importance.col(u) += layer.weight.col(c).array().square().matrix() * power(c);
          }
        }
      }
      p.weighted_.push_back(std::move(w));
      const int64_t positions = out.positions();
      for (int64_t f = 0; f < out.features(); ++f) next[static_cast<size_t>(f)] = f / positions;
    } else if (layer.kind == LayerKind::kMaxPool2d) {
      for (int64_t c = 0; c < out.channels; ++c) {
        Expected<int64_t> u = channel_unit(c);
        if (!u) return u.error();
        for (int64_t q = 0; q < out.positions(); ++q) {
          next[static_cast<size_t>(c * out.positions() + q)] = *u;
        }
      }
    } else {
      next = unit;
    }
    unit = std::move(next);
    input = &p.original_[i];
  }
  p.output_unit_ = unit;
  return p;
}

std::vector<int64_t> Partitioner::full_traffic(int32_t workers) const {
  std::vector<int64_t> full;
  std::vector<int32_t> previous;
  for (const Weighted& w : weighted_) {
    const Layer& layer = model_.layers[w.layer];
    const std::vector<int64_t> sizes =
        worker_sizes(contiguous_placement(layer.units(), workers), workers);
    int64_t values = 0;
    for (int32_t k = 0; k < workers; ++k) {
      if (sizes[static_cast<size_t>(k)] == 0) continue;
      for (int64_t u : w.group_unit) {
        if (u >= 0 && previous[static_cast<size_t>(u)] != k) values += w.group_values;
      }
    }
    full.push_back(values);
    previous = contiguous_placement(layer.units(), workers);
  }
  return full;
}

std::vector<std::vector<int32_t>> Partitioner::spectral_placement(int32_t workers) const {
  // One graph of every unit of every dense/conv layer, edges weighted by the trained weight mass
  // between consecutive layers (each layer's mass normalised to 1, plus a faint uniform edge so
  // that units without mass do not split off alone), cut in two by the Fiedler vector of its
  // Laplacian, each layer's units sorted along it; then each side again, down to single workers.
  const size_t count = weighted_.size();
  std::vector<int64_t> offset(count + 1, 0);
  for (size_t w = 0; w < count; ++w) {
    offset[w + 1] = offset[w] + model_.layers[weighted_[w].layer].units();
  }
  const int64_t n = offset[count];
  Matrix adjacency = Matrix::Zero(n, n);
  for (size_t w = 1; w < count; ++w) {
    const Matrix& mass = weighted_[w].importance;
    if (mass.size() == 0) continue;
    const double total = mass.sum();
    const double faint = 1e-3 / static_cast<double>(mass.size());
    const Matrix block =
        (total > 0 ? Matrix(mass / total) : Matrix::Zero(mass.rows(), mass.cols())).array() + faint;
    adjacency.block(offset[w], offset[w - 1], mass.rows(), mass.cols()) = block;
    adjacency.block(offset[w - 1], offset[w], mass.cols(), mass.rows()) = block.transpose();
  }
  std::vector<std::vector<int32_t>> placement(count);
  for (size_t w = 0; w < count; ++w) {
    placement[w].assign(static_cast<size_t>(offset[w + 1] - offset[w]), 0);
  }
  // (nodes, first worker, workers) still to split.
  struct Part {
    std::vector<int64_t> nodes;
    int32_t first;
    int32_t workers;
  };
  std::vector<Part> parts;
  {
    Part all{{}, 0, workers};
    for (int64_t v = 0; v < n; ++v) all.nodes.push_back(v);
    parts.push_back(std::move(all));
  }
  while (!parts.empty()) {
    Part part = std::move(parts.back());
    parts.pop_back();
    if (part.workers == 1) {
      for (int64_t v : part.nodes) {
        const auto w = static_cast<size_t>(std::upper_bound(offset.begin(), offset.end(), v) -
                                           offset.begin() - 1);
        placement[w][static_cast<size_t>(v - offset[w])] = part.first;
      }
      continue;
    }
    const auto size = static_cast<int64_t>(part.nodes.size());
    Matrix laplacian(size, size);
    for (int64_t a = 0; a < size; ++a) {
      for (int64_t b = 0; b < size; ++b) {
        laplacian(a, b) =
            -adjacency(part.nodes[static_cast<size_t>(a)], part.nodes[static_cast<size_t>(b)]);
      }
    }
    for (int64_t a = 0; a < size; ++a)
      laplacian(a, a) = -(laplacian.row(a).sum() - laplacian(a, a));
    Vector fiedler = Vector::Zero(size);
    if (size > 1) {
      const Eigen::SelfAdjointEigenSolver<Matrix> solver(laplacian);
      fiedler = solver.eigenvectors().col(1);
    }
    const int32_t left = (part.workers + 1) / 2;
    Part low{{}, part.first, left};
    Part high{{}, part.first + left, part.workers - left};
    // Per layer: its units of this part along the vector; as many to the low side as the
    // balanced sizes of its workers sum to.
    for (size_t w = 0; w < count; ++w) {
      std::vector<std::pair<double, int64_t>> units;
      for (int64_t a = 0; a < size; ++a) {
        const int64_t v = part.nodes[static_cast<size_t>(a)];
        if (v >= offset[w] && v < offset[w + 1]) units.emplace_back(fiedler(a), v);
      }
      std::stable_sort(units.begin(), units.end());
      const std::vector<int64_t> sizes =
          worker_sizes(contiguous_placement(offset[w + 1] - offset[w], workers), workers);
      int64_t take = 0;
      for (int32_t k = low.first; k < low.first + low.workers; ++k)
        take += sizes[static_cast<size_t>(k)];
      for (size_t i = 0; i < units.size(); ++i) {
        (static_cast<int64_t>(i) < take ? low : high).nodes.push_back(units[i].second);
      }
    }
    parts.push_back(std::move(high));
    parts.push_back(std::move(low));
  }
  return placement;
}

const std::vector<std::vector<int32_t>>& Partitioner::coplacement(int32_t workers) {
  for (const auto& [k, placements] : coplacements_) {
    if (k == workers) return placements;
  }
  // Coordinate ascent on the weight mass kept inside workers, over consecutive layers: each
  // layer's placement by the Hungarian algorithm given the layers on either side. Each step is
  // optimal given the others, so the kept mass never decreases; it can stop at a local optimum,
  // hence two starts, the contiguous placement and a spectral one, the better kept.
  const size_t count = weighted_.size();
  std::vector<std::vector<int32_t>> placement;
  double placement_mass = -1.0;
  for (int start = 0; start < 2; ++start) {
    std::vector<std::vector<int32_t>> trial(count);
    if (start == 0) {
      for (size_t w = 0; w < count; ++w) {
        trial[w] = contiguous_placement(model_.layers[weighted_[w].layer].units(), workers);
      }
    } else {
      trial = spectral_placement(workers);
    }
    for (int sweep = 0; sweep < 8; ++sweep) {
      bool changed = false;
      for (size_t w = 0; w < count; ++w) {
        const int64_t units = model_.layers[weighted_[w].layer].units();
        Matrix cost = Matrix::Zero(units, workers);
        if (w > 0 && weighted_[w].importance.size() > 0) {
          cost.noalias() -= weighted_[w].importance * one_hot(trial[w - 1], workers);
        }
        if (w + 1 < count && weighted_[w + 1].importance.size() > 0) {
          cost.noalias() -=
              weighted_[w + 1].importance.transpose() * one_hot(trial[w + 1], workers);
        }
        if (cost.isZero(0.0)) continue;
        std::vector<int32_t> next = balanced_assignment(cost);
        const double now = placement_cost(cost, trial[w]);
        if (placement_cost(cost, next) < now - 1e-12 * std::abs(now)) {
          trial[w] = std::move(next);
          changed = true;
        }
      }
      if (!changed) break;
    }
    double mass = 0.0;
    for (size_t w = 1; w < count; ++w) {
      if (weighted_[w].importance.size() == 0) continue;
      mass += (one_hot(trial[w], workers).transpose() * weighted_[w].importance *
               one_hot(trial[w - 1], workers))
                  .trace();
    }
    if (mass > placement_mass) {
      placement_mass = mass;
      placement = std::move(trial);
    }
  }
  coplacements_.emplace_back(workers, std::move(placement));
  return coplacements_.back().second;
}

LayerContext Partitioner::context(size_t w, const std::vector<int32_t>& previous,
                                  const PartitionOptions& options) const {
  const Weighted& info = weighted_[w];
  const int32_t workers = options.workers;
  LayerContext ctx;
  ctx.workers = workers;
  ctx.units = model_.layers[info.layer].units();
  ctx.group_first = info.group_first;
  ctx.group_values = info.group_values;
  for (int64_t u : info.group_unit) {
    ctx.group_worker.push_back(u < 0 ? -1 : previous[static_cast<size_t>(u)]);
  }
  // The budget: `keep` of what the contiguous split of this layer sends.
  std::vector<int64_t> held(static_cast<size_t>(workers), 0);
  for (int32_t at : ctx.group_worker) {
    if (at >= 0) held[static_cast<size_t>(at)] += ctx.group_values;
  }
  ctx.held = std::accumulate(held.begin(), held.end(), int64_t{0});
  const std::vector<int64_t> sizes =
      worker_sizes(contiguous_placement(ctx.units, workers), workers);
  ctx.budget.per_pair = options.per_pair;
  ctx.budget.pair.resize(workers, workers);
  int64_t full = 0;
  for (int32_t b = 0; b < workers; ++b) {
    if (sizes[static_cast<size_t>(b)] > 0) full += ctx.held - held[static_cast<size_t>(b)];
    for (int32_t a = 0; a < workers; ++a) {
      ctx.budget.pair(a, b) =
          a == b ? 0
                 : static_cast<int64_t>(std::floor(
                       options.keep * static_cast<double>(held[static_cast<size_t>(a)])));
    }
  }
  ctx.budget.total = static_cast<int64_t>(std::floor(options.keep * static_cast<double>(full)));
  return ctx;
}

Matrix Partitioner::advance(size_t w, const Matrix& weight, const Matrix& input) const {
  Layer layer = model_.layers[weighted_[w].layer];
  layer.weight = weight.leftCols(weight.cols() - 1);
  layer.bias = weight.col(weight.cols() - 1);
  Matrix out = apply_layer(layer, input);
  const size_t end = w + 1 < weighted_.size() ? weighted_[w + 1].layer : model_.layers.size();
  for (size_t i = weighted_[w].layer + 1; i < end; ++i) out = apply_layer(model_.layers[i], out);
  return out;
}

Partitioner::Refit Partitioner::refit(size_t w, const Matrix& input, const LayerContext& ctx,
                                      const std::vector<int32_t>& placement,
                                      const PartitionOptions& options, int64_t samples) const {
  const Layer& layer = model_.layers[weighted_[w].layer];
  const int64_t rows = samples < 0 ? input.rows() : samples;
  Refit r;
  r.gram = std::make_shared<LayerGram>(
      make_layer_gram(input_rows(layer, input.topRows(rows)),
                      target_rows(layer, original_[weighted_[w].layer].topRows(rows)),
                      with_bias(layer), ctx.group_first, options.ridge));
  r.fit = std::make_shared<Fit>(fit_placement(*r.gram, placement, ctx));
  r.weight = fitted_weights(*r.fit, ctx.units, layer.weight.cols() + 1);
  return r;
}

double Partitioner::held_out_error(size_t w, const Matrix& weight, const Matrix& input) const {
  const int64_t fit = fit_samples(input.rows());
  const int64_t rest = input.rows() - fit;
  const int64_t first = rest > 0 ? fit : 0;
  const int64_t count = rest > 0 ? rest : input.rows();
  Layer layer = model_.layers[weighted_[w].layer];
  layer.weight = weight.leftCols(weight.cols() - 1);
  layer.bias = weight.col(weight.cols() - 1);
  return (apply_layer(layer, input.middleRows(first, count)) -
          original_[weighted_[w].layer].middleRows(first, count))
      .squaredNorm();
}

int64_t Partitioner::fit_samples(int64_t rows) { return rows >= 8 ? rows - rows / 4 : rows; }

double Partitioner::score(size_t w, const Matrix& input, const LayerContext& ctx,
                          const std::vector<int32_t>& placement,
                          const PartitionOptions& options) const {
  // Refit on three quarters of the calibration rows, judged on the other quarter: a placement
  // must help on rows its refit did not see.
  const int64_t fit = fit_samples(input.rows());
  if (w + 1 >= weighted_.size()) {
    return held_out_error(w, refit(w, input, ctx, placement, options, fit).weight, input);
  }
  // The next layer from the better of its two starting placements: this measures this layer's
  // error as it reaches the next layer, and how well the next layer's units can be computed from
  // what each worker holds. This layer computes with its refit on the same rows.
  const Matrix weight = ctx.held > 0 ? refit(w, input, ctx, placement, options, fit).weight
                                     : with_bias(model_.layers[weighted_[w].layer]);
  const Matrix next_input = advance(w, weight, input);
  const LayerContext next = context(w + 1, placement, options);
  double best = std::numeric_limits<double>::infinity();
  for (const std::vector<int32_t>& start : starts(w + 1, placement, options.workers)) {
    const Matrix next_weight = refit(w + 1, next_input, next, start, options, fit).weight;
    best = std::min(best, held_out_error(w + 1, next_weight, next_input));
  }
  return best;
}

std::vector<std::vector<int32_t>> Partitioner::starts(size_t w,
                                                      const std::vector<int32_t>& previous,
                                                      int32_t workers) const {
  std::vector<std::vector<int32_t>> out;
  out.push_back(contiguous_placement(model_.layers[weighted_[w].layer].units(), workers));
  if (weighted_[w].importance.size() > 0) {
    std::vector<int32_t> massed =
        balanced_assignment(-(weighted_[w].importance * one_hot(previous, workers)));
    if (massed != out.front()) out.push_back(std::move(massed));
  }
  return out;
}

Status Partitioner::check_workers(int32_t workers) const {
  if (workers < 1) {
    return Error::make(ErrorKind::kInvalidArgument, "{} workers: at least 1", workers);
  }
  // More workers than the widest layer has units leaves some worker idle in every layer: not a
  // partition, and the placements' cost grows with the worker count for nothing.
  int64_t widest = 0;
  for (const Weighted& info : weighted_) {
    widest = std::max(widest, model_.layers[info.layer].units());
  }
  if (workers > widest) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "{} workers but the widest layer of {} has {} units: some worker would "
                       "hold nothing in any layer",
                       workers, model_.source, widest);
  }
  return {};
}

Expected<Partition> Partitioner::run(Method method, const PartitionOptions& options) {
  const int32_t workers = options.workers;
  if (Status valid = check_workers(workers); !valid) return valid.error();
  if (!(options.keep >= 0.0 && options.keep <= 1.0)) {
    return Error::make(ErrorKind::kInvalidArgument, "keep share {} is not in [0, 1]", options.keep);
  }
  if (!(options.ridge >= 0.0) || options.rounds < 0) {
    return Error::make(ErrorKind::kInvalidArgument, "ridge must be >= 0 and rounds >= 0");
  }
  Partition part;
  part.method = method;
  part.options = options;
  part.model = model_;
  std::mt19937_64 rng(options.seed);
  const std::vector<std::vector<int32_t>>* co =
      method == Method::kRepurpose ? &coplacement(workers) : nullptr;
  Matrix current = calibration_;  // the partitioned model's activations on calibration data
  std::vector<int32_t> previous;  // placement of the previous dense/conv layer's units
  for (size_t w = 0; w < weighted_.size(); ++w) {
    const size_t i = weighted_[w].layer;
    Layer& layer = part.model.layers[i];
    const LayerContext ctx = context(w, previous, options);
    const bool any_cross = ctx.held > 0 && workers > 1;
    const Matrix trained = with_bias(layer);
    Matrix weight = trained;
    std::vector<int32_t> placement = contiguous_placement(ctx.units, workers);
    switch (method) {
      case Method::kContiguous:
        break;
      case Method::kMagnitude:
        weight = prune_by_magnitude(trained, placement, ctx);
        break;
      case Method::kRandom:
        placement = random_placement(ctx.units, workers, rng);
        weight = prune_by_magnitude(trained, placement, ctx);
        break;
      case Method::kRefit:
        if (any_cross) weight = refit(w, current, ctx, placement, options).weight;
        break;
      case Method::kRepurpose: {
        if (!any_cross) {
          // Every worker holds this layer's inputs: its placement matters only to the next layer.
          // The contiguous placement or the co-placement, whichever the next layer fits better.
          if (workers > 1 && w + 1 < weighted_.size() && (*co)[w] != placement) {
            const double contiguous = score(w, current, ctx, placement, options);
            if (score(w, current, ctx, (*co)[w], options) < contiguous) placement = (*co)[w];
          }
          break;
        }
        // Start from the contiguous placement or the one keeping the most weight mass with its
        // inputs, then alternate: the Hungarian algorithm on each unit's refit loss on each
        // worker, and the refit of the new placement, while the score improves.
        Refit best;
        double best_score = std::numeric_limits<double>::infinity();
        for (std::vector<int32_t>& start : starts(w, previous, workers)) {
          Refit r = refit(w, current, ctx, start, options);
          const double s = score(w, current, ctx, start, options);
          if (s < best_score) {
            best = std::move(r);
            best_score = s;
            placement = std::move(start);
          }
        }
        for (int32_t round = 0; round < options.rounds; ++round) {
          Matrix cost(ctx.units, workers);
          for (int64_t j = 0; j < ctx.units; ++j) {
            for (int32_t k = 0; k < workers; ++k) {
              cost(j, k) = best.fit->workers[static_cast<size_t>(k)].loss(j);
            }
          }
          std::vector<int32_t> next = balanced_assignment(cost);
          if (next == placement) break;
          Refit r = refit(w, current, ctx, next, options);
          const double s = score(w, current, ctx, next, options);
          if (!(s < best_score)) break;
          best = std::move(r);
          best_score = s;
          placement = std::move(next);
        }
        weight = best.weight;
        break;
      }
    }
    layer.weight = weight.leftCols(weight.cols() - 1);
    layer.bias = weight.col(weight.cols() - 1);

    // What the weights make each worker receive and compute.
    LayerPlan plan;
    plan.layer = i;
    plan.placement = placement;
    plan.traffic = Matrix::Zero(workers, workers);
    plan.macs.assign(static_cast<size_t>(workers), 0);
    plan.local_macs.assign(static_cast<size_t>(workers), 0);
    const auto by_worker = units_by_worker(placement, workers);
    const auto groups = static_cast<int64_t>(ctx.group_worker.size());
    const int64_t positions = layer.out.positions();
    for (int32_t k = 0; k < workers; ++k) {
      const auto& units = by_worker[static_cast<size_t>(k)];
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t first = ctx.group_first[static_cast<size_t>(g)];
        const int64_t q = ctx.group_first[static_cast<size_t>(g) + 1] - first;
        int64_t nonzero = 0;
        for (int64_t j : units) {
          nonzero += (layer.weight.row(j).segment(first, q).array() != 0.0).count();
        }
        plan.macs[static_cast<size_t>(k)] += nonzero * positions;
        if (is_cross(ctx, g, k)) {
          if (nonzero > 0) {
            plan.traffic(ctx.group_worker[static_cast<size_t>(g)], k) +=
                static_cast<double>(ctx.group_values);
          }
        } else {
          plan.local_macs[static_cast<size_t>(k)] += nonzero * positions;
        }
      }
    }
    part.layers.push_back(std::move(plan));
    current = advance(w, weight, current);
    previous = placement;
  }
  part.gather.assign(static_cast<size_t>(workers), 0);
  for (int64_t u : output_unit_) {
    const int32_t at = previous[static_cast<size_t>(u)];
    if (at != 0) ++part.gather[static_cast<size_t>(at)];
  }
  return part;
}

}  // namespace orrery::partition
