// synth/codebook.h: node attributes as classes, and back to values.
//
// The generative model works on categorical attributes. A node has six: its kind (synth/dag.h), its
// communicator group (class 0 = the whole job; 1.. = the most frequent group shapes of the corpus),
// and four magnitudes (FLOPs, tensor bytes, communication bytes, recorded microseconds), each
// quantized on its own: class 0 is zero (or absent), classes 1..K are bins of the corpus's nonzero
// values (one bin per distinct value when there are at most K of them, else quantile bins) whose
// inclusive upper bounds are stored, and a class decodes to the median corpus value of its bin.
// The Codebook (bounds, medians, group shapes) is stored with the model, so that samples decode
// into real values. A decoded node keeps only the magnitudes its kind uses (compute: FLOPs, tensor
// bytes, duration; host compute: duration; memory: tensor bytes; communication: communication
// bytes and, for collectives, the group); the others are counted as dropped.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "synth/dag.h"
#include "synth/layers.h"

namespace orrery::synth {

enum class Attr : uint8_t { kKind, kGroup, kFlops, kTensorBytes, kCommBytes, kDuration };
inline constexpr size_t kAttrCount = 6;
// "kind", "group", "flops", "tensor_bytes", "comm_bytes", "duration".
std::string_view attr_name(Attr attr);

using NodeClasses = std::array<uint16_t, kAttrCount>;

class Quantizer {
 public:
  // Bins for the nonzero `values` (zeros are class 0). `bins` >= 1.
  static Quantizer fit(std::vector<uint64_t> values, uint32_t bins);

  // Classes including class 0.
  uint32_t classes() const { return static_cast<uint32_t>(medians_.size()) + 1; }
  uint32_t encode(uint64_t value) const;
  // 0 for class 0; the bin's median otherwise (a class past the last decodes as the last).
  uint64_t decode(uint32_t cls) const;
  const std::vector<uint64_t>& upper_bounds() const { return upper_; }

  nlohmann::json to_json() const;
  static Expected<Quantizer> from_json(const nlohmann::json& json, std::string_view what);

 private:
  std::vector<uint64_t> upper_;    // bin c (1-based) holds (upper_[c-2], upper_[c-1]]
  std::vector<uint64_t> medians_;  // decoded value of bin c: medians_[c-1]
};

struct CodebookOptions {
  uint32_t bins = 16;       // classes per magnitude besides 0
  uint32_t max_groups = 8;  // group shapes kept besides the whole job
};

class Codebook {
 public:
  static Codebook fit(const std::vector<Dag>& graphs, const CodebookOptions& options);

  // Classes of every attribute, in Attr order.
  std::array<uint32_t, kAttrCount> class_counts() const;
  NodeClasses encode(const DagNode& node) const;
  // `dropped` (when given) counts magnitudes set where the kind does not use them.
  DagNode decode(const NodeClasses& classes, uint32_t* dropped = nullptr) const;
  // Group class g >= 1 is groups()[g - 1].
  const std::vector<GroupShape>& groups() const { return groups_; }
  const Quantizer& quantizer(Attr attr) const;

  nlohmann::json to_json() const;
  static Expected<Codebook> from_json(const nlohmann::json& json);

 private:
  std::vector<GroupShape> groups_;
  std::array<Quantizer, 4> magnitudes_;  // flops, tensor bytes, comm bytes, duration
};

// A layered graph with its nodes as classes: what the model trains on and produces.
struct EncodedDag {
  std::vector<NodeClasses> x;                        // in layer order
  std::vector<std::pair<uint32_t, uint32_t>> edges;  // (parent, child), sorted
  std::vector<uint32_t> layer_start;                 // as LayeredDag
  uint32_t ranks = 1;

  uint32_t size() const { return static_cast<uint32_t>(x.size()); }
  uint32_t layers() const { return static_cast<uint32_t>(layer_start.size()) - 1; }
};

EncodedDag encode_dag(const LayeredDag& layered, const Codebook& codebook);
// The graph as it decodes (nodes in layer order). `dropped` as in Codebook::decode.
Dag decode_dag(const EncodedDag& encoded, const Codebook& codebook, uint32_t* dropped = nullptr);

}  // namespace orrery::synth
