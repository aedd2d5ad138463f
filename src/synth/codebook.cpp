#include "synth/codebook.h"

#include <algorithm>
#include <cassert>
#include <map>

namespace orrery::synth {

std::string_view attr_name(Attr attr) {
  static constexpr std::array<std::string_view, kAttrCount> kNames = {
      "kind", "group", "flops", "tensor_bytes", "comm_bytes", "duration"};
  return kNames[static_cast<size_t>(attr)];
}

Quantizer Quantizer::fit(std::vector<uint64_t> values, uint32_t bins) {
  std::erase(values, 0);
  std::sort(values.begin(), values.end());
  Quantizer out;
  if (values.empty()) return out;
  bins = std::max<uint32_t>(bins, 1);
  std::vector<uint64_t> distinct = values;
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (distinct.size() <= bins) {
    out.upper_ = distinct;  // exact: one bin per value
  } else {
    // Quantile cuts: bin b ends at the value of rank (b + 1) n / bins; equal cuts merge.
    for (uint32_t bin = 0; bin + 1 < bins; ++bin) {
      const size_t rank = (static_cast<size_t>(bin) + 1) * values.size() / bins;
      const uint64_t cut = values[std::min(rank, values.size() - 1)];
      if (out.upper_.empty() || cut > out.upper_.back()) out.upper_.push_back(cut);
    }
    // One bin has no cut before the last value.
    if (out.upper_.empty() || out.upper_.back() < values.back()) {
      out.upper_.push_back(values.back());
    }
  }
  size_t begin = 0;
  for (uint64_t upper : out.upper_) {
    size_t end = begin;
    while (end < values.size() && values[end] <= upper) ++end;
    out.medians_.push_back(values[begin + (end - begin - 1) / 2]);
    begin = end;
  }
  return out;
}

uint32_t Quantizer::encode(uint64_t value) const {
  if (value == 0 || upper_.empty()) return 0;
  const auto it = std::lower_bound(upper_.begin(), upper_.end(), value);
  const size_t bin =
      it == upper_.end() ? upper_.size() - 1 : static_cast<size_t>(it - upper_.begin());
  return static_cast<uint32_t>(bin) + 1;
}

uint64_t Quantizer::decode(uint32_t cls) const {
  if (cls == 0 || medians_.empty()) return 0;
  return medians_[std::min<size_t>(cls, medians_.size()) - 1];
}

nlohmann::json Quantizer::to_json() const {
  return {{"upper_bounds", upper_}, {"medians", medians_}};
}

Expected<Quantizer> Quantizer::from_json(const nlohmann::json& json, std::string_view what) {
  Quantizer out;
  try {
    out.upper_ = json.at("upper_bounds").get<std::vector<uint64_t>>();
    out.medians_ = json.at("medians").get<std::vector<uint64_t>>();
  } catch (const nlohmann::json::exception& error) {
    return Error::make(ErrorKind::kParse, "quantizer '{}': {}", what, error.what());
  }
  if (out.upper_.size() != out.medians_.size() ||
      !std::is_sorted(out.upper_.begin(), out.upper_.end())) {
    return Error::make(ErrorKind::kParse,
                       "quantizer '{}': {} bounds and {} medians (expected as many, bounds "
                       "ascending)",
                       what, out.upper_.size(), out.medians_.size());
  }
  return out;
}

Codebook Codebook::fit(const std::vector<Dag>& graphs, const CodebookOptions& options) {
  std::array<std::vector<uint64_t>, 4> values;
  std::map<GroupShape, uint64_t> shape_counts;
  for (const Dag& graph : graphs) {
    for (const DagNode& node : graph.nodes) {
      values[0].push_back(node.flops);
      values[1].push_back(node.tensor_bytes);
      values[2].push_back(node.comm_bytes);
      values[3].push_back(node.duration_us);
      if (is_collective(node.kind) && !node.group.whole_job()) ++shape_counts[node.group];
    }
  }
  Codebook out;
  for (size_t idx = 0; idx < 4; ++idx)
    out.magnitudes_[idx] = Quantizer::fit(values[idx], options.bins);
  std::vector<std::pair<uint64_t, GroupShape>> ranked;
  for (const auto& [shape, count] : shape_counts) ranked.emplace_back(count, shape);
  // Most frequent first; ties by shape, so the vocabulary is deterministic.
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t idx = 0; idx < ranked.size() && idx < options.max_groups; ++idx) {
    out.groups_.push_back(ranked[idx].second);
  }
  return out;
}

std::array<uint32_t, kAttrCount> Codebook::class_counts() const {
  return {kNodeKindCount,           static_cast<uint32_t>(groups_.size()) + 1,
          magnitudes_[0].classes(), magnitudes_[1].classes(),
          magnitudes_[2].classes(), magnitudes_[3].classes()};
}

const Quantizer& Codebook::quantizer(Attr attr) const {
  assert(attr >= Attr::kFlops);
  return magnitudes_[static_cast<size_t>(attr) - static_cast<size_t>(Attr::kFlops)];
}

NodeClasses Codebook::encode(const DagNode& node) const {
  NodeClasses out{};
  out[0] = static_cast<uint16_t>(node.kind);
  if (is_collective(node.kind) && !node.group.whole_job()) {
    const auto it = std::find(groups_.begin(), groups_.end(), node.group);
    if (it != groups_.end()) out[1] = static_cast<uint16_t>(it - groups_.begin() + 1);
  }
  out[2] = static_cast<uint16_t>(magnitudes_[0].encode(node.flops));
  out[3] = static_cast<uint16_t>(magnitudes_[1].encode(node.tensor_bytes));
  out[4] = static_cast<uint16_t>(magnitudes_[2].encode(node.comm_bytes));
  out[5] = static_cast<uint16_t>(magnitudes_[3].encode(node.duration_us));
  return out;
}

DagNode Codebook::decode(const NodeClasses& classes, uint32_t* dropped) const {
  DagNode node;
  node.kind = static_cast<NodeKind>(std::min<uint32_t>(classes[0], kNodeKindCount - 1));
  const bool compute = node.kind == NodeKind::kCompute;
  const bool cpu = node.kind == NodeKind::kCpuCompute;
  const bool memory = node.kind == NodeKind::kMemLoad || node.kind == NodeKind::kMemStore;
  const bool comm = is_collective(node.kind) || is_point_to_point(node.kind);
  auto take = [&](bool used, uint16_t cls) -> bool {
    if (!used && cls != 0 && dropped != nullptr) ++*dropped;
    return used;
  };
  if (take(is_collective(node.kind), classes[1]) && classes[1] > 0 &&
      classes[1] <= groups_.size()) {
    node.group = groups_[classes[1] - 1];
  }
  if (take(compute, classes[2])) node.flops = magnitudes_[0].decode(classes[2]);
  if (take(compute || memory, classes[3])) node.tensor_bytes = magnitudes_[1].decode(classes[3]);
  if (take(comm, classes[4])) node.comm_bytes = magnitudes_[2].decode(classes[4]);
  if (take(compute || cpu, classes[5])) node.duration_us = magnitudes_[3].decode(classes[5]);
  return node;
}

nlohmann::json Codebook::to_json() const {
  nlohmann::json groups = nlohmann::json::array();
  for (const GroupShape& shape : groups_) groups.push_back({shape.size, shape.stride});
  return {{"groups", groups},
          {"flops", magnitudes_[0].to_json()},
          {"tensor_bytes", magnitudes_[1].to_json()},
          {"comm_bytes", magnitudes_[2].to_json()},
          {"duration", magnitudes_[3].to_json()}};
}

Expected<Codebook> Codebook::from_json(const nlohmann::json& json) {
  Codebook out;
  try {
    for (const auto& shape : json.at("groups")) {
      out.groups_.push_back(GroupShape{shape.at(0).get<uint32_t>(), shape.at(1).get<uint32_t>()});
    }
  } catch (const nlohmann::json::exception& error) {
    return Error::make(ErrorKind::kParse, "codebook groups: {}", error.what());
  }
  static constexpr std::array<const char*, 4> kKeys = {"flops", "tensor_bytes", "comm_bytes",
                                                       "duration"};
  for (size_t idx = 0; idx < 4; ++idx) {
    if (!json.contains(kKeys[idx])) {
      return Error::make(ErrorKind::kParse, "codebook: no '{}' quantizer", kKeys[idx]);
    }
    Expected<Quantizer> quantizer = Quantizer::from_json(json.at(kKeys[idx]), kKeys[idx]);
    if (!quantizer) return quantizer.error();
    out.magnitudes_[idx] = std::move(*quantizer);
  }
  return out;
}

EncodedDag encode_dag(const LayeredDag& layered, const Codebook& codebook) {
  EncodedDag out;
  out.ranks = layered.dag.ranks;
  out.layer_start = layered.layer_start;
  out.edges = layered.dag.edges;
  out.x.reserve(layered.dag.size());
  for (const DagNode& node : layered.dag.nodes) out.x.push_back(codebook.encode(node));
  return out;
}

Dag decode_dag(const EncodedDag& encoded, const Codebook& codebook, uint32_t* dropped) {
  Dag out;
  out.ranks = encoded.ranks;
  out.nodes.reserve(encoded.size());
  for (const NodeClasses& classes : encoded.x)
    out.nodes.push_back(codebook.decode(classes, dropped));
  out.edges = encoded.edges;
  normalize_edges(out);
  return out;
}

}  // namespace orrery::synth
