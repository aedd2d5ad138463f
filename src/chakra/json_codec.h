// chakra/json_codec.h: lossless conversion between a .et file and one JSON document.
//
// The document is {"format": "chakra-et-json/1", "global_metadata": {...}, "nodes": [{...}, ...]}
// with each message in protobuf's canonical proto3 JSON mapping (field names as in the schema,
// enums by name, 64-bit integers as strings), one node per line. Converting back gives identical
// messages, and identical bytes for files orrery wrote. Both directions stream node by node.
#pragma once

#include <ostream>
#include <string>

#include "core/error.h"

namespace orrery::chakra {

inline constexpr const char* kJsonFormat = "chakra-et-json/1";

// Writes the trace at `et_path` as JSON to `out`. Fails on a trace that does not decode.
Status trace_to_json(const std::string& et_path, std::ostream& out);

// Reads the JSON document at `json_path` and writes the trace to `et_path` (gzip for ".gz").
// Errors name the line and column of a syntax error or the index of a node that does not convert.
Status json_to_trace(const std::string& json_path, const std::string& et_path);

}  // namespace orrery::chakra
