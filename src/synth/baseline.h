// synth/baseline.h: the non-neural generator every metric is compared against.
//
// Counted from the encoded corpus, sampled layer by layer like LayerDAG:
// - layer sizes: the first layer's size from its histogram, then a Markov chain over the previous
//   layer's size (capped at 32) giving the next size, 0 ending the graph (no longer than the
//   deepest graph, no larger than the window);
// - node attributes: the whole class tuple of a node from its histogram at the layer's depth
//   (depth buckets 0, 1, 2, 3, 4-5, 6-7, 8-11, ... doubling), so kinds and magnitudes stay joint;
// - edges: a node's in-degree from the histogram of its kind; its first parent in the layer just
//   before (which keeps it in its layer), every other one at a layer distance drawn from the span
//   histogram; within a layer, parents by preferential attachment (weight = children so far + 1).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "synth/codebook.h"
#include "synth/random.h"

namespace orrery::synth {

uint32_t depth_bucket(uint32_t layer);

class Baseline {
 public:
  static Baseline fit(const std::vector<EncodedDag>& graphs, uint32_t max_nodes);

  EncodedDag sample(Rng& rng, uint32_t ranks) const;

  nlohmann::json to_json() const;
  static Expected<Baseline> from_json(const nlohmann::json& json);

 private:
  using Histogram = std::map<uint32_t, uint64_t>;
  static uint32_t draw(const Histogram& histogram, Rng& rng);

  Histogram first_size_;
  std::map<uint32_t, Histogram> next_size_;  // previous size (capped) -> next size (0 = end)
  Histogram any_next_size_;
  std::map<uint32_t, std::map<NodeClasses, uint64_t>> classes_;  // depth bucket -> tuples
  std::map<uint32_t, Histogram> in_degree_;                      // kind -> in-degree (>= 1)
  Histogram any_in_degree_;
  Histogram span_;  // layer distance of non-first parents
  uint32_t max_layers_ = 1;
  uint32_t max_nodes_ = 1;
};

}  // namespace orrery::synth
