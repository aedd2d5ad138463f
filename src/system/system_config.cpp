#include "system/system_config.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <filesystem>
#include <limits>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "core/checked.h"
#include "core/json_config.h"

namespace orrery::sys {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kAlgorithmNames =
    "ring, direct, directN (e.g. direct4), halvingDoubling, doubleBinaryTree, oneRing, oneDirect, "
    "oneDirectN, oneHalvingDoubling, inSwitch, nccl";

// Keys ASTRA-sim 2.x reads (or older 2.x example files carry) that change nothing in its
// analytical results, or only name an output file orrery does not write.
constexpr std::array<std::string_view, 11> kIgnoredKeys = {
    "boost-mode",             // read by ASTRA-sim 1.0 only
    "local-reduction-delay",  // used only by the LogGP shared-bus model
    "L",                      // LogGP parameters: only with model-shared-bus 1
    "o",
    "g",
    "G",
    "model-shared-bus",            // accepted when 0; 1 is rejected below
    "intra-dimension-scheduling",  // ASTRA-sim 1.0 scheduling knobs, not read by 2.x
    "inter-dimension-scheduling",
    "local-mem-trace-filename",  // the file name of ASTRA-sim's own memory trace
    "frequency",                 // newer versions; no effect on the analytical timing
};

struct CollectiveKeys {
  std::string_view native;
  std::string_view custom;
};

constexpr std::array<CollectiveKeys, 4> kCollectiveKeys = {{
    {"all-reduce-implementation", "all-reduce-implementation-custom"},
    {"all-gather-implementation", "all-gather-implementation-custom"},
    {"reduce-scatter-implementation", "reduce-scatter-implementation-custom"},
    {"all-to-all-implementation", "all-to-all-implementation-custom"},
}};

constexpr std::array<std::string_view, 12> kScalarKeys = {"scheduling-policy",
                                                          "collective-optimization",
                                                          "preferred-dataset-splits",
                                                          "active-chunks-per-dimension",
                                                          "endpoint-delay",
                                                          "local-mem-bw",
                                                          "roofline-enabled",
                                                          "peak-perf",
                                                          "replay-only",
                                                          "track-local-mem",
                                                          "trace-enabled",
                                                          "per-node-custom-implementation"};

bool contains(const auto& list, std::string_view key) {
  return std::find(list.begin(), list.end(), key) != list.end();
}

bool is_collective_key(std::string_view key) {
  return std::any_of(
      kCollectiveKeys.begin(), kCollectiveKeys.end(),
      [&](const CollectiveKeys& keys) { return keys.native == key || keys.custom == key; });
}

// A 0/1/true/false switch: nullopt when absent.
Expected<std::optional<bool>> get_flag(const JsonConfig& config, std::string_view key) {
  const nlohmann::json& doc = config.doc();
  if (!doc.contains(key)) return std::optional<bool>();
  const nlohmann::json& value = doc.at(std::string(key));
  if (value.is_boolean()) return std::optional<bool>(value.get<bool>());
  if (value.is_number()) {
    const double number = value.get<double>();
    if (number == 0.0) return std::optional<bool>(false);
    if (number == 1.0) return std::optional<bool>(true);
  }
  return config.error(key,
                      fmt::format("expected 0, 1, true or false, found {}", json_excerpt(value)));
}

// Whether `<prefix>.0.et` exists.
bool prefix_exists(const fs::path& prefix) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(prefix.string() + ".0.et"), ec);
}

// Resolves one custom-collective prefix as documented in system_config.h; the error lists every
// location tried.
Expected<std::string> resolve_custom_prefix(const JsonConfig& config, std::string_view key,
                                            const std::string& prefix) {
  std::vector<std::string> tried;
  const fs::path given(prefix);
  tried.push_back(prefix);
  if (prefix_exists(given)) return prefix;
  if (!given.is_absolute()) {
    std::error_code ec;
    fs::path folder = fs::absolute(fs::path(config.path()), ec).parent_path();
    if (ec) folder = fs::path(config.path()).parent_path();
    folder = folder.lexically_normal();
    // The config file's folder, then each of its ancestors up to the root.
    while (true) {
      const fs::path candidate = (folder / given).lexically_normal();
      tried.push_back(candidate.string());
      if (prefix_exists(candidate)) return candidate.string();
      const fs::path parent = folder.parent_path();
      if (parent.empty() || parent == folder) break;
      folder = parent;
    }
  }
  std::string locations;
  for (const std::string& location : tried) {
    locations += fmt::format("{}{}.0.et", locations.empty() ? "" : ", ", location);
  }
  return config.error(key,
                      fmt::format("custom collective '{}' not found: no rank file {}.0.et relative "
                                  "to the working directory, the file's folder or its ancestors "
                                  "(tried {})",
                                  prefix, prefix, locations));
}

Status read_algorithms(const JsonConfig& config, const CollectiveKeys& keys,
                       std::vector<Algorithm>& out) {
  Expected<std::optional<std::vector<std::string>>> names = config.get_string_list(keys.native);
  if (!names) return names.error();
  if (!names->has_value()) return Status::ok();
  for (size_t idx = 0; idx < (*names)->size(); ++idx) {
    const std::string& name = (**names)[idx];
    Expected<Algorithm> algorithm = parse_algorithm(name);
    if (!algorithm) {
      return config.error(keys.native,
                          fmt::format("dimension {}: {}", idx, algorithm.error().message()));
    }
    // ASTRA-sim accepts doubleBinaryTree in every list and fails only when a collective other than
    // all-reduce runs it; so does the collective engine (issue_collective names it).
    if (algorithm->kind == AlgorithmKind::kInSwitch && keys.native == "all-to-all-implementation") {
      return config.error(keys.native,
                          fmt::format("dimension {}: inSwitch reduces or gathers inside a switch; "
                                      "an all-to-all has nothing to combine there",
                                      idx));
    }
    out.push_back(*algorithm);
  }
  return Status::ok();
}

Status read_custom(const JsonConfig& config, const CollectiveKeys& keys,
                   std::vector<std::string>& out) {
  Expected<std::optional<std::vector<std::string>>> prefixes = config.get_string_list(keys.custom);
  if (!prefixes) return prefixes.error();
  if (!prefixes->has_value()) return Status::ok();
  // ASTRA-sim takes exactly one graph: it spans every dimension.
  if ((*prefixes)->size() != 1) {
    return config.error(keys.custom,
                        fmt::format("expected exactly one trace prefix (one Chakra graph covers "
                                    "every dimension), found {}",
                                    (*prefixes)->size()));
  }
  for (const std::string& prefix : **prefixes) {
    Expected<std::string> resolved = resolve_custom_prefix(config, keys.custom, prefix);
    if (!resolved) return resolved.error();
    out.push_back(std::move(*resolved));
  }
  return Status::ok();
}

// Splits "direct12" into its window; nullopt when the rest is not a window.
std::optional<uint32_t> parse_window(std::string_view digits) {
  if (digits.empty() || digits.size() > 9) return std::nullopt;
  uint32_t window = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), window);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return window;
}

Expected<SystemConfig> read_system_config(const JsonConfig& config) {
  SystemConfig out;
  out.path = config.path();
  const nlohmann::json& doc = config.doc();
  if (!doc.is_object()) {
    return Error::make(ErrorKind::kConfig, "{}: expected a JSON object of settings, found {}",
                       config.path(), json_excerpt(doc));
  }

  // Keys: known, ignored, unknown (listed in the order they appear in the file).
  std::vector<std::string> keys;
  for (const auto& item : doc.items()) keys.push_back(item.key());
  std::stable_sort(keys.begin(), keys.end(), [&](const std::string& a, const std::string& b) {
    return config.line_of(a) < config.line_of(b);
  });
  for (const std::string& key : keys) {
    if (contains(kScalarKeys, key) || is_collective_key(key)) continue;
    if (contains(kIgnoredKeys, key)) {
      out.ignored_keys.push_back(key);
    } else {
      out.unknown_keys.push_back(key);
    }
  }

  if (doc.contains("per-node-custom-implementation")) {
    return config.error("per-node-custom-implementation",
                        "per-node custom collectives are not supported yet (use the "
                        "*-implementation-custom keys)");
  }
  if (Expected<std::optional<bool>> shared_bus = get_flag(config, "model-shared-bus");
      !shared_bus) {
    return shared_bus.error();
  } else if (shared_bus->value_or(false)) {
    return config.error("model-shared-bus",
                        "the LogGP shared-bus model (model-shared-bus 1) is not supported; remove "
                        "the key or set it to 0");
  }

  if (Expected<std::optional<std::string>> policy = config.get_string("scheduling-policy");
      !policy) {
    return policy.error();
  } else if (policy->has_value()) {
    if (**policy == "LIFO") {
      out.scheduling_policy = SchedulingPolicy::kLifo;
    } else if (**policy == "FIFO") {
      out.scheduling_policy = SchedulingPolicy::kFifo;
    } else if (**policy == "EXPLICIT") {
      out.scheduling_policy = SchedulingPolicy::kExplicit;
    } else {
      return config.error(
          "scheduling-policy",
          fmt::format("unknown policy \"{}\" (expected LIFO, FIFO or EXPLICIT)", **policy));
    }
  }

  if (Expected<std::optional<std::string>> optimization =
          config.get_string("collective-optimization");
      !optimization) {
    return optimization.error();
  } else if (optimization->has_value()) {
    if (**optimization == "baseline") {
      out.collective_optimization = CollectiveOptimization::kBaseline;
    } else if (**optimization == "localBWAware") {
      out.collective_optimization = CollectiveOptimization::kLocalBwAware;
    } else {
      return config.error("collective-optimization",
                          fmt::format("unknown optimization \"{}\" (expected baseline or "
                                      "localBWAware)",
                                      **optimization));
    }
  }

  constexpr int64_t kMaxU32 = std::numeric_limits<uint32_t>::max();
  // The collective engine's work grows with the square of the chunk count (16,000 splits take
  // half a second per collective, 100,000 about 20 s): above kMaxDatasetSplits a run would not
  // finish in any useful time, and no chunking that fine changes a result measurably.
  if (auto splits = config.get_int("preferred-dataset-splits", 1, kMaxDatasetSplits); !splits) {
    return splits.error();
  } else if (splits->has_value()) {
    out.preferred_dataset_splits = static_cast<uint32_t>(**splits);
    if (out.preferred_dataset_splits > kSlowDatasetSplits) {
      out.warnings.push_back(fmt::format(
          "{}: {} chunks per collective: the run's work grows with the square of the chunk count "
          "(16,000 take about half a second per collective); ASTRA-sim's examples use 1 to 64",
          config.where("preferred-dataset-splits"), out.preferred_dataset_splits));
    }
  }
  if (auto active = config.get_int("active-chunks-per-dimension", 1, kMaxU32); !active) {
    return active.error();
  } else if (active->has_value()) {
    out.active_chunks_per_dimension = static_cast<uint32_t>(**active);
  }
  // ASTRA-sim keeps the delay in an int.
  if (auto delay = config.get_int("endpoint-delay", 0, std::numeric_limits<int32_t>::max());
      !delay) {
    return delay.error();
  } else if (delay->has_value()) {
    out.endpoint_delay_ns = **delay;
    out.endpoint_delay_given = true;
  }
  // Ranges (core/checked.h): with sizes at most 2^50 bytes, a reduction's 3 x bytes / local-mem-bw
  // stays below 2^62 ns, inside int64 before the saturating conversion to picoseconds.
  if (auto bandwidth = config.get_number_in("local-mem-bw", kMinGbps, kMaxLocalMemGbps, "GB/s");
      !bandwidth) {
    return bandwidth.error();
  } else {
    out.local_mem_bw_gbps = *bandwidth;
  }
  if (auto peak = config.get_number_in("peak-perf", kMinTflops, kMaxTflops, "TFLOPS"); !peak) {
    return peak.error();
  } else {
    out.peak_perf_tflops = *peak;
  }

  const std::array<std::pair<std::string_view, bool*>, 4> flags = {{
      {"roofline-enabled", &out.roofline_enabled},
      {"replay-only", &out.replay_only},
      {"track-local-mem", &out.track_local_mem},
      {"trace-enabled", &out.trace_enabled},
  }};
  for (const auto& [key, target] : flags) {
    Expected<std::optional<bool>> flag = get_flag(config, key);
    if (!flag) return flag.error();
    *target = flag->value_or(false);
  }
  if (out.roofline_enabled && !out.peak_perf_tflops) {
    return config.error("roofline-enabled",
                        "roofline is enabled but 'peak-perf' (TFLOPS) is not given");
  }
  if (out.roofline_enabled && !out.local_mem_bw_gbps) {
    return config.error("roofline-enabled",
                        "roofline is enabled but 'local-mem-bw' (GB/s) is not given");
  }

  const std::array<std::pair<std::vector<Algorithm>*, std::vector<std::string>*>, 4> targets = {{
      {&out.all_reduce, &out.all_reduce_custom},
      {&out.all_gather, &out.all_gather_custom},
      {&out.reduce_scatter, &out.reduce_scatter_custom},
      {&out.all_to_all, &out.all_to_all_custom},
  }};
  for (size_t idx = 0; idx < kCollectiveKeys.size(); ++idx) {
    if (Status status = read_algorithms(config, kCollectiveKeys[idx], *targets[idx].first);
        !status) {
      return status.error();
    }
    if (Status status = read_custom(config, kCollectiveKeys[idx], *targets[idx].second); !status) {
      return status.error();
    }
  }
  return out;
}

}  // namespace

Expected<Algorithm> parse_algorithm(std::string_view name) {
  struct Plain {
    std::string_view name;
    AlgorithmKind kind;
  };
  static constexpr std::array<Plain, 7> kPlain = {{
      {"inSwitch", AlgorithmKind::kInSwitch},
      {"nccl", AlgorithmKind::kNccl},
      {"ring", AlgorithmKind::kRing},
      {"halvingDoubling", AlgorithmKind::kHalvingDoubling},
      {"doubleBinaryTree", AlgorithmKind::kDoubleBinaryTree},
      {"oneRing", AlgorithmKind::kOneRing},
      {"oneHalvingDoubling", AlgorithmKind::kOneHalvingDoubling},
  }};
  for (const Plain& plain : kPlain) {
    if (name == plain.name) return Algorithm{plain.kind, 0};
  }
  const std::array<std::pair<std::string_view, AlgorithmKind>, 2> windowed = {{
      {"oneDirect", AlgorithmKind::kOneDirect},
      {"direct", AlgorithmKind::kDirect},
  }};
  for (const auto& [stem, kind] : windowed) {
    if (!name.starts_with(stem)) continue;
    const std::string_view rest = name.substr(stem.size());
    if (rest.empty()) return Algorithm{kind, 0};
    const std::optional<uint32_t> window = parse_window(rest);
    if (window && *window >= 1) return Algorithm{kind, *window};
    if (window) {
      return Error::make(ErrorKind::kConfig,
                         "algorithm \"{}\": the window after \"{}\" must be at least 1", name,
                         stem);
    }
  }
  return Error::make(ErrorKind::kConfig, "unknown collective algorithm \"{}\" (expected {})", name,
                     kAlgorithmNames);
}

std::string algorithm_name(const Algorithm& algorithm) {
  switch (algorithm.kind) {
    case AlgorithmKind::kRing:
      return "ring";
    case AlgorithmKind::kDirect:
      return algorithm.window == 0 ? "direct" : fmt::format("direct{}", algorithm.window);
    case AlgorithmKind::kHalvingDoubling:
      return "halvingDoubling";
    case AlgorithmKind::kDoubleBinaryTree:
      return "doubleBinaryTree";
    case AlgorithmKind::kOneRing:
      return "oneRing";
    case AlgorithmKind::kOneDirect:
      return algorithm.window == 0 ? "oneDirect" : fmt::format("oneDirect{}", algorithm.window);
    case AlgorithmKind::kOneHalvingDoubling:
      return "oneHalvingDoubling";
    case AlgorithmKind::kInSwitch:
      return "inSwitch";
    case AlgorithmKind::kNccl:
      return "nccl";
  }
  return "unknown";
}

Expected<SystemConfig> load_system_config(const std::string& path) {
  Expected<JsonConfig> config = JsonConfig::load(path);
  if (!config) return config.error();
  return read_system_config(*config);
}

Expected<SystemConfig> parse_system_config(const std::string& path, std::string text) {
  Expected<JsonConfig> config = JsonConfig::parse(path, std::move(text));
  if (!config) return config.error();
  return read_system_config(*config);
}

}  // namespace orrery::sys
