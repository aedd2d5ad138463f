#include "synth/baseline.h"

#include <algorithm>
#include <bit>

namespace orrery::synth {
namespace {

constexpr uint32_t kSizeCap = 32;

nlohmann::json histogram_json(const std::map<uint32_t, uint64_t>& histogram) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [value, count] : histogram) out.push_back({value, count});
  return out;
}

std::map<uint32_t, uint64_t> histogram_from(const nlohmann::json& json) {
  std::map<uint32_t, uint64_t> out;
  for (const auto& pair : json) out[pair.at(0).get<uint32_t>()] = pair.at(1).get<uint64_t>();
  return out;
}

}  // namespace

uint32_t depth_bucket(uint32_t layer) {
  if (layer < 4) return layer;
  // 4-5 -> 4, 6-7 -> 5, 8-11 -> 6, 12-15 -> 7, ...: two buckets per power of two.
  const uint32_t power = static_cast<uint32_t>(std::bit_width(layer)) - 1;  // >= 2
  const uint32_t half = (layer >> (power - 1)) & 1u;
  return 4 + 2 * (power - 2) + half;
}

Baseline Baseline::fit(const std::vector<EncodedDag>& graphs, uint32_t max_nodes) {
  Baseline model;
  model.max_nodes_ = std::max<uint32_t>(max_nodes, 1);
  for (const EncodedDag& graph : graphs) {
    if (graph.size() == 0) continue;
    model.max_layers_ = std::max(model.max_layers_, graph.layers());
    ++model.first_size_[graph.layer_start[1] - graph.layer_start[0]];
    for (uint32_t layer = 0; layer < graph.layers(); ++layer) {
      const uint32_t size = graph.layer_start[layer + 1] - graph.layer_start[layer];
      const uint32_t next = layer + 1 < graph.layers()
                                ? graph.layer_start[layer + 2] - graph.layer_start[layer + 1]
                                : 0;
      ++model.next_size_[std::min(size, kSizeCap)][next];
      ++model.any_next_size_[next];
      for (uint32_t node = graph.layer_start[layer]; node < graph.layer_start[layer + 1]; ++node) {
        ++model.classes_[depth_bucket(layer)][graph.x[node]];
      }
    }
    std::vector<uint32_t> layer_of(graph.size());
    for (uint32_t layer = 0; layer < graph.layers(); ++layer) {
      for (uint32_t node = graph.layer_start[layer]; node < graph.layer_start[layer + 1]; ++node) {
        layer_of[node] = layer;
      }
    }
    std::vector<uint32_t> in_degree(graph.size(), 0);
    std::vector<uint8_t> first_seen(graph.size(), 0);
    for (const auto& [parent, child] : graph.edges) {
      ++in_degree[child];
      const uint32_t span = layer_of[child] - layer_of[parent];
      // One parent in the layer just before is implied by the layering; the rest make spans.
      if (span == 1 && !first_seen[child]) {
        first_seen[child] = 1;
      } else {
        ++model.span_[span];
      }
    }
    for (uint32_t node = graph.layer_start.size() > 1 ? graph.layer_start[1] : 0;
         node < graph.size(); ++node) {
      ++model.in_degree_[graph.x[node][0]][in_degree[node]];
      ++model.any_in_degree_[in_degree[node]];
    }
  }
  if (model.first_size_.empty()) model.first_size_[1] = 1;
  if (model.any_next_size_.empty()) model.any_next_size_[0] = 1;
  if (model.any_in_degree_.empty()) model.any_in_degree_[1] = 1;
  return model;
}

uint32_t Baseline::draw(const Histogram& histogram, Rng& rng) {
  std::vector<uint64_t> weights;
  std::vector<uint32_t> values;
  for (const auto& [value, count] : histogram) {
    values.push_back(value);
    weights.push_back(count);
  }
  return values[rng.pick(std::span<const uint64_t>(weights))];
}

EncodedDag Baseline::sample(Rng& rng, uint32_t ranks) const {
  EncodedDag out;
  out.ranks = ranks;
  out.layer_start.push_back(0);
  if (classes_.empty()) return out;
  std::vector<uint32_t> children;  // per node, for preferential attachment
  uint32_t size = draw(first_size_, rng);
  for (uint32_t layer = 0; size > 0 && layer < max_layers_; ++layer) {
    size = std::min(size, max_nodes_ - out.size());
    if (size == 0) break;
    // Attributes: the nearest bucket at or below this depth that was seen.
    auto bucket = classes_.upper_bound(depth_bucket(layer));
    if (bucket != classes_.begin()) --bucket;
    std::vector<uint64_t> weights;
    std::vector<NodeClasses> tuples;
    for (const auto& [tuple, count] : bucket->second) {
      tuples.push_back(tuple);
      weights.push_back(count);
    }
    const uint32_t first = out.size();
    for (uint32_t idx = 0; idx < size; ++idx) {
      out.x.push_back(tuples[rng.pick(std::span<const uint64_t>(weights))]);
      children.push_back(0);
    }
    if (layer > 0) {
      for (uint32_t node = first; node < first + size; ++node) {
        const auto kind_degree = in_degree_.find(out.x[node][0]);
        uint32_t degree =
            draw(kind_degree != in_degree_.end() ? kind_degree->second : any_in_degree_, rng);
        degree = std::max<uint32_t>(degree, 1);
        std::vector<uint32_t> parents;
        for (uint32_t attempt = 0; parents.size() < degree && attempt < 4 * degree; ++attempt) {
          const uint32_t span =
              parents.empty() || span_.empty() ? 1 : std::min(draw(span_, rng), layer);
          const uint32_t from = out.layer_start[layer - std::max<uint32_t>(span, 1)];
          const uint32_t to = out.layer_start[layer - std::max<uint32_t>(span, 1) + 1];
          std::vector<uint32_t> weight;
          for (uint32_t candidate = from; candidate < to; ++candidate) {
            weight.push_back(children[candidate] + 1);
          }
          const uint32_t parent = from + rng.pick(std::span<const uint32_t>(weight));
          if (std::find(parents.begin(), parents.end(), parent) != parents.end()) continue;
          parents.push_back(parent);
          ++children[parent];
          out.edges.emplace_back(parent, node);
        }
      }
    }
    out.layer_start.push_back(out.size());
    const auto chain = next_size_.find(std::min(size, kSizeCap));
    size = draw(chain != next_size_.end() ? chain->second : any_next_size_, rng);
  }
  std::sort(out.edges.begin(), out.edges.end());
  return out;
}

nlohmann::json Baseline::to_json() const {
  nlohmann::json next = nlohmann::json::array();
  for (const auto& [previous, histogram] : next_size_)
    next.push_back({previous, histogram_json(histogram)});
  nlohmann::json classes = nlohmann::json::array();
  for (const auto& [bucket, tuples] : classes_) {
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& [tuple, count] : tuples) {
      entries.push_back({std::vector<uint16_t>(tuple.begin(), tuple.end()), count});
    }
    classes.push_back({bucket, entries});
  }
  nlohmann::json degrees = nlohmann::json::array();
  for (const auto& [kind, histogram] : in_degree_)
    degrees.push_back({kind, histogram_json(histogram)});
  return {{"first_size", histogram_json(first_size_)},
          {"next_size", next},
          {"any_next_size", histogram_json(any_next_size_)},
          {"classes", classes},
          {"in_degree", degrees},
          {"any_in_degree", histogram_json(any_in_degree_)},
          {"span", histogram_json(span_)},
          {"max_layers", max_layers_},
          {"max_nodes", max_nodes_}};
}

Expected<Baseline> Baseline::from_json(const nlohmann::json& json) {
  Baseline model;
  try {
    model.first_size_ = histogram_from(json.at("first_size"));
    for (const auto& entry : json.at("next_size")) {
      model.next_size_[entry.at(0).get<uint32_t>()] = histogram_from(entry.at(1));
    }
    model.any_next_size_ = histogram_from(json.at("any_next_size"));
    for (const auto& entry : json.at("classes")) {
      auto& tuples = model.classes_[entry.at(0).get<uint32_t>()];
      for (const auto& pair : entry.at(1)) {
        const auto values = pair.at(0).get<std::vector<uint16_t>>();
        if (values.size() != kAttrCount) {
          return Error::make(ErrorKind::kParse, "baseline: a class tuple of {} values, expected {}",
                             values.size(), kAttrCount);
        }
        NodeClasses tuple{};
        std::copy(values.begin(), values.end(), tuple.begin());
        tuples[tuple] = pair.at(1).get<uint64_t>();
      }
    }
    for (const auto& entry : json.at("in_degree")) {
      model.in_degree_[entry.at(0).get<uint32_t>()] = histogram_from(entry.at(1));
    }
    model.any_in_degree_ = histogram_from(json.at("any_in_degree"));
    model.span_ = histogram_from(json.at("span"));
    model.max_layers_ = json.at("max_layers").get<uint32_t>();
    model.max_nodes_ = json.at("max_nodes").get<uint32_t>();
  } catch (const nlohmann::json::exception& error) {
    return Error::make(ErrorKind::kParse, "baseline: {}", error.what());
  }
  if (model.first_size_.empty() || model.any_next_size_.empty() || model.any_in_degree_.empty() ||
      model.classes_.empty()) {
    return Error::make(ErrorKind::kParse, "baseline: empty histograms");
  }
  return model;
}

}  // namespace orrery::synth
