#include "memory/remote_memory_config.h"

#include <algorithm>
#include <array>
#include <limits>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "core/checked.h"
#include "core/json_config.h"

namespace orrery::memory {

namespace {

struct TypeName {
  std::string_view name;
  MemoryType type;
};

constexpr std::array<TypeName, 4> kTypes = {{
    {"NO_MEMORY_EXPANSION", MemoryType::kNoExpansion},
    {"PER_NPU_MEMORY_EXPANSION", MemoryType::kPerNpu},
    {"PER_NODE_MEMORY_EXPANSION", MemoryType::kPerNode},
    {"MEMORY_POOL", MemoryType::kPool},
}};

constexpr std::array<std::string_view, 5> kKnownKeys = {
    "memory-type", "remote-mem-latency", "remote-mem-bw", "num-nodes", "num-npus-per-node"};

constexpr std::string_view kTypeList =
    "NO_MEMORY_EXPANSION, PER_NPU_MEMORY_EXPANSION, PER_NODE_MEMORY_EXPANSION or MEMORY_POOL";

Expected<RemoteMemoryConfig> read_remote_memory_config(const JsonConfig& config) {
  RemoteMemoryConfig out;
  out.path = config.path();
  const nlohmann::json& doc = config.doc();
  if (!doc.is_object()) {
    return Error::make(ErrorKind::kConfig,
                       "{}: expected a JSON object ({{\"memory-type\": ...}}), found {}",
                       config.path(), json_excerpt(doc));
  }
  std::vector<std::string> keys;
  for (const auto& item : doc.items()) keys.push_back(item.key());
  std::stable_sort(keys.begin(), keys.end(), [&](const std::string& a, const std::string& b) {
    return config.line_of(a) < config.line_of(b);
  });
  for (const std::string& key : keys) {
    if (std::find(kKnownKeys.begin(), kKnownKeys.end(), key) == kKnownKeys.end()) {
      out.unknown_keys.push_back(key);
    }
  }

  Expected<std::optional<std::string>> type = config.get_string("memory-type");
  if (!type) return type.error();
  if (!type->has_value()) {
    return config.error("memory-type", fmt::format("missing (expected {})", kTypeList));
  }
  const auto found = std::find_if(kTypes.begin(), kTypes.end(),
                                  [&](const TypeName& entry) { return entry.name == **type; });
  if (found == kTypes.end()) {
    return config.error("memory-type",
                        fmt::format("unknown memory type \"{}\" (expected {})", **type, kTypeList));
  }
  out.type = found->type;
  if (out.type == MemoryType::kNoExpansion) return out;

  // Every expansion type times an access as latency + bytes / bandwidth.
  const std::string type_name(found->name);
  // Ranges (core/checked.h): an access of at most 2^50 bytes at 0.001 GB/s or more takes under
  // 2^60 ns, so the conversion to picoseconds saturates at worst, and the run's time limit says so.
  Expected<std::optional<double>> latency =
      config.get_number_in("remote-mem-latency", 0.0, kMaxLatencyNs, "ns");
  if (!latency) return latency.error();
  if (!latency->has_value()) {
    return config.error("remote-mem-latency", fmt::format("missing: {} needs the access latency "
                                                          "in ns",
                                                          type_name));
  }
  out.latency_ns = **latency;
  Expected<std::optional<double>> bandwidth =
      config.get_number_in("remote-mem-bw", kMinGbps, kMaxGbps, "GB/s");
  if (!bandwidth) return bandwidth.error();
  if (!bandwidth->has_value()) {
    return config.error("remote-mem-bw",
                        fmt::format("missing: {} needs the bandwidth in GB/s", type_name));
  }
  out.bandwidth_gbps = **bandwidth;

  if (out.type == MemoryType::kPerNode) {
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max();  // ASTRA-sim keeps an int
    for (const auto& [key, target] : {std::pair{"num-nodes", &out.num_nodes},
                                      std::pair{"num-npus-per-node", &out.num_npus_per_node}}) {
      Expected<std::optional<int64_t>> count = config.get_int(key, 1, kMax);
      if (!count) return count.error();
      if (!count->has_value()) {
        return config.error(key,
                            fmt::format("missing: {} needs it (a count of 1 or more)", type_name));
      }
      *target = static_cast<uint32_t>(**count);
    }
  }
  return out;
}

}  // namespace

Expected<RemoteMemoryConfig> load_remote_memory_config(const std::string& path) {
  Expected<JsonConfig> config = JsonConfig::load(path);
  if (!config) return config.error();
  return read_remote_memory_config(*config);
}

Expected<RemoteMemoryConfig> parse_remote_memory_config(const std::string& path, std::string text) {
  Expected<JsonConfig> config = JsonConfig::parse(path, std::move(text));
  if (!config) return config.error();
  return read_remote_memory_config(*config);
}

}  // namespace orrery::memory
