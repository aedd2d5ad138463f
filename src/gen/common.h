// gen/common.h: what the generators share: their rank limit, rounding up, the error of a plan
// that cannot be, and the Chakra attribute they add to every node they write.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "core/error.h"
#include "et_def.pb.h"

namespace orrery::gen {

// The most ranks a generator writes (one file each): far beyond any cluster studied, and a guard
// against a typo that would write millions of files.
inline constexpr uint64_t kMaxRanks = uint64_t{1} << 20;

// Bytes of one dropout mask element, as PyTorch keeps it (a bool).
inline constexpr uint64_t kMaskBytes = 1;

inline uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// An option or a combination of options no plan can satisfy.
inline Error plan_error(std::string message) {
  return Error(ErrorKind::kInvalidArgument, std::move(message));
}

// A new attribute named `name` on `node`.
inline ChakraProtoMsg::AttributeProto& add_attr(ChakraProtoMsg::Node& node, const char* name) {
  ChakraProtoMsg::AttributeProto* attribute = node.add_attr();
  attribute->set_name(name);
  return *attribute;
}

}  // namespace orrery::gen
