#include "network/topology_yaml.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/checked.h"
#include "core/text_file.h"
#include "network/yaml_text.h"

namespace orrery::net {

namespace {

// A decimal number scaled by 10^scale and rounded to an integer (halves up).
struct ScaledDecimal {
  bool negative = false;
  uint64_t value = 0;
};

enum class DecimalStatus { kOk, kNotANumber, kTooLarge };

// Reads [+-]digits[.digits][(e|E)[+-]digits] (or [+-].digits...) exactly, as value * 10^scale.
DecimalStatus parse_scaled_decimal(std::string_view text, int scale, ScaledDecimal& out) {
  size_t pos = 0;
  out = ScaledDecimal{};
  if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    out.negative = text[pos] == '-';
    ++pos;
  }
  std::string digits;  // significant digits, leading zeros dropped
  int64_t fraction_digits = 0;
  bool any_digit = false;
  bool in_fraction = false;
  for (; pos < text.size(); ++pos) {
    const char c = text[pos];
    if (c >= '0' && c <= '9') {
      any_digit = true;
      if (!(digits.empty() && c == '0')) digits.push_back(c);
      if (in_fraction) ++fraction_digits;
    } else if (c == '.' && !in_fraction) {
      in_fraction = true;
    } else {
      break;
    }
  }
  if (!any_digit) return DecimalStatus::kNotANumber;
  int64_t exponent = 0;
  if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
    ++pos;
    bool exponent_negative = false;
    if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
      exponent_negative = text[pos] == '-';
      ++pos;
    }
    bool any_exponent_digit = false;
    for (; pos < text.size() && text[pos] >= '0' && text[pos] <= '9'; ++pos) {
      any_exponent_digit = true;
      if (exponent < 100000) exponent = exponent * 10 + (text[pos] - '0');
    }
    if (!any_exponent_digit) return DecimalStatus::kNotANumber;
    if (exponent_negative) exponent = -exponent;
  }
  if (pos != text.size()) return DecimalStatus::kNotANumber;
  if (digits.empty()) return DecimalStatus::kOk;  // zero

  // value * 10^scale = digits * 10^shift
  const int64_t shift = exponent - fraction_digits + scale;
  const auto length = static_cast<int64_t>(digits.size());
  const int64_t kept = shift >= 0 ? length : length + shift;
  if (kept < 0) return DecimalStatus::kOk;  // far below one unit: rounds to 0
  uint64_t value = 0;
  for (int64_t idx = 0; idx < kept; ++idx) {
    const auto digit = static_cast<uint64_t>(digits[static_cast<size_t>(idx)] - '0');
    if (value > (UINT64_MAX - digit) / 10) return DecimalStatus::kTooLarge;
    value = value * 10 + digit;
  }
  if (kept < length && digits[static_cast<size_t>(kept)] >= '5') {
    if (value == UINT64_MAX) return DecimalStatus::kTooLarge;
    ++value;
  }
  for (int64_t idx = 0; idx < shift; ++idx) {
    if (value > UINT64_MAX / 10) return DecimalStatus::kTooLarge;
    value *= 10;
  }
  out.value = value;
  return DecimalStatus::kOk;
}

std::string_view node_type_name(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return "a single value";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

class Reader {
 public:
  Reader(std::string_view file_name, std::vector<std::string>* warnings)
      : file_(file_name), warnings_(warnings) {}

  template <typename... Args>
  Error fail(int line, fmt::format_string<Args...> format, Args&&... args) const {
    return Error(
        ErrorKind::kTopology,
        fmt::format("{}:{}: {}", file_, line, fmt::format(format, std::forward<Args>(args)...)));
  }

  Expected<Topology> read(std::string_view text) {
    Expected<YAML::Node> parsed = parse_yaml_text(text, file_);
    if (!parsed) return parsed.error();
    const YAML::Node& root = *parsed;
    if (!root.IsMap()) {
      return fail(yaml_line(root, 1),
                  "expected a mapping with keys topology, npus_count, bandwidth and latency, "
                  "found {}",
                  node_type_name(root));
    }
    const YAML::Node& const_root = root;
    const int root_line = yaml_line(const_root, 1);
    // ASTRA-sim reads four keys and ignores the rest; so does orrery, but it says so (a typo such
    // as 'latancy' would otherwise pass unnoticed).
    if (warnings_ != nullptr) {
      for (const auto& entry : const_root) {
        const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : std::string("?");
        if (std::find(kAstraKeys.begin(), kAstraKeys.end(), key) == kAstraKeys.end()) {
          warnings_->push_back(fmt::format(
              "{}:{}: key '{}' is not an ASTRA-sim network key (topology, npus_count, bandwidth, "
              "latency); ignored",
              file_, yaml_line(entry.first, root_line), key));
        }
      }
    }

    std::array<YAML::Node, 4> lists;
    static constexpr std::array<std::string_view, 4> kKeys = {"topology", "npus_count", "bandwidth",
                                                              "latency"};
    static constexpr std::array<std::string_view, 4> kLibraKeys = {"Topology", "NpusCount",
                                                                   "Bandwidth", "Latency"};
    for (size_t idx = 0; idx < kKeys.size(); ++idx) {
      const std::string key(kKeys[idx]);
      const YAML::Node node = const_root[key];
      if (!node.IsDefined()) {
        if (const_root[std::string(kLibraKeys[idx])].IsDefined()) {
          return fail(root_line,
                      "missing key '{}' (found '{}': this looks like a LIBRA network file, which "
                      "orrery does not read; write ASTRA-sim's analytical format)",
                      key, kLibraKeys[idx]);
        }
        return fail(root_line, "missing key '{}' (expected a list with one value per dimension)",
                    key);
      }
      if (!node.IsSequence()) {
        return fail(yaml_line(node, root_line),
                    "key '{}': expected a list with one value per dimension, found {}", key,
                    node_type_name(node));
      }
      lists[idx] = node;
    }
    const size_t dims = lists[0].size();
    if (dims == 0) {
      return fail(yaml_line(lists[0], root_line),
                  "key 'topology': expected at least one dimension, found an empty list");
    }
    for (size_t idx = 1; idx < lists.size(); ++idx) {
      if (lists[idx].size() != dims) {
        return fail(yaml_line(lists[idx], root_line),
                    "key '{}': expected {} values (one per dimension, as in 'topology'), found {}",
                    kKeys[idx], dims, lists[idx].size());
      }
    }

    std::vector<Dimension> dimensions(dims);
    for (size_t dim = 0; dim < dims; ++dim) {
      Dimension& spec = dimensions[dim];
      if (auto status = read_kind(lists[0][dim], root_line, spec.kind); !status) {
        return status.error();
      }
      if (auto status = read_size(lists[1][dim], root_line, spec.size); !status) {
        return status.error();
      }
      if (auto status = read_bandwidth(lists[2][dim], root_line, spec.bandwidth); !status) {
        return status.error();
      }
      if (auto status = read_latency(lists[3][dim], root_line, spec.latency); !status) {
        return status.error();
      }
    }
    Expected<Topology> topology = Topology::create(std::move(dimensions));
    if (!topology) {
      return topology.error().with_context(
          fmt::format("{}:{}", file_, yaml_line(lists[1], root_line)));
    }
    return topology;
  }

 private:
  Expected<std::string> scalar(const YAML::Node& node, int root_line, std::string_view key,
                               std::string_view expected) const {
    if (!node.IsScalar()) {
      return fail(yaml_line(node, root_line), "key '{}': expected {}, found {}", key, expected,
                  node_type_name(node));
    }
    return node.Scalar();
  }

  Status read_kind(const YAML::Node& node, int root_line, TopologyKind& kind) const {
    constexpr std::string_view kExpected = "Ring, FullyConnected or Switch";
    Expected<std::string> text = scalar(node, root_line, "topology", kExpected);
    if (!text) return text.error();
    for (const TopologyKind candidate :
         {TopologyKind::kRing, TopologyKind::kFullyConnected, TopologyKind::kSwitch}) {
      if (*text == topology_kind_name(candidate)) {
        kind = candidate;
        return Status::ok();
      }
    }
    return fail(yaml_line(node, root_line), "key 'topology': unknown topology '{}' (expected {})",
                *text, kExpected);
  }

  Status read_size(const YAML::Node& node, int root_line, uint32_t& size) const {
    constexpr std::string_view kExpected = "a whole number of ranks, at least 2";
    Expected<std::string> text = scalar(node, root_line, "npus_count", kExpected);
    if (!text) return text.error();
    std::string_view digits = *text;
    if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || end != digits.data() + digits.size() ||
        (ec != std::errc() && ec != std::errc::result_out_of_range)) {
      return fail(yaml_line(node, root_line), "key 'npus_count': found '{}', expected {}", *text,
                  kExpected);
    }
    if (ec == std::errc::result_out_of_range || value > int64_t{UINT32_MAX}) {
      return fail(yaml_line(node, root_line),
                  "key 'npus_count': found {}, expected at most {} ranks per dimension", *text,
                  UINT32_MAX);
    }
    if (value < 2) {
      return fail(yaml_line(node, root_line),
                  "key 'npus_count': found {}, expected at least 2 ranks per dimension", *text);
    }
    size = static_cast<uint32_t>(value);
    return Status::ok();
  }

  Status read_bandwidth(const YAML::Node& node, int root_line, Bandwidth& bandwidth) const {
    constexpr std::string_view kExpected = "a positive number of GB/s";
    Expected<std::string> text = scalar(node, root_line, "bandwidth", kExpected);
    if (!text) return text.error();
    ScaledDecimal number;
    switch (parse_scaled_decimal(*text, 9, number)) {
      case DecimalStatus::kNotANumber:
        return fail(yaml_line(node, root_line), "key 'bandwidth': found '{}', expected {}", *text,
                    kExpected);
      case DecimalStatus::kTooLarge:
        return fail(yaml_line(node, root_line), "key 'bandwidth': found {}, which is too large",
                    *text);
      case DecimalStatus::kOk:
        break;
    }
    // kMinGbps .. kMaxGbps (core/checked.h) in units of 10^-9 GB/s.
    constexpr auto kMinNano = static_cast<uint64_t>(kMinGbps * 1e9);
    constexpr auto kMaxNano = static_cast<uint64_t>(kMaxGbps * 1e9);
    if (number.negative || number.value < kMinNano || number.value > kMaxNano) {
      return fail(yaml_line(node, root_line),
                  "key 'bandwidth': found {}, expected {} from {} to {}", *text, kExpected,
                  format_number(kMinGbps), format_number(kMaxGbps));
    }
    bandwidth = Bandwidth::from_nano_gbps(number.value);
    return Status::ok();
  }

  Status read_latency(const YAML::Node& node, int root_line, SimTime& latency) const {
    constexpr std::string_view kExpected = "a number of ns, zero or more";
    Expected<std::string> text = scalar(node, root_line, "latency", kExpected);
    if (!text) return text.error();
    ScaledDecimal number;
    const DecimalStatus status = parse_scaled_decimal(*text, 3, number);
    if (status == DecimalStatus::kNotANumber) {
      return fail(yaml_line(node, root_line), "key 'latency': found '{}', expected {}", *text,
                  kExpected);
    }
    constexpr auto kMaxLatencyPs = static_cast<uint64_t>(kMaxLatencyNs * 1000);
    if (status == DecimalStatus::kTooLarge || number.value > kMaxLatencyPs) {
      return fail(yaml_line(node, root_line),
                  "key 'latency': found {}, expected at most {} ns (one second) per hop", *text,
                  format_number(kMaxLatencyNs));
    }
    if (number.negative && number.value != 0) {
      return fail(yaml_line(node, root_line), "key 'latency': found {}, expected {}", *text,
                  kExpected);
    }
    latency = SimTime::from_ps(static_cast<int64_t>(number.value));
    return Status::ok();
  }

  static constexpr std::array<std::string_view, 4> kAstraKeys = {"topology", "npus_count",
                                                                 "bandwidth", "latency"};
  std::string file_;
  std::vector<std::string>* warnings_ = nullptr;
};

}  // namespace

Expected<Topology> parse_topology_yaml(std::string_view text, std::string_view file_name,
                                       std::vector<std::string>* warnings) {
  return Reader(file_name, warnings).read(text);
}

Expected<Topology> load_topology_file(const std::filesystem::path& path,
                                      std::vector<std::string>* warnings) {
  Expected<std::string> text = read_text_file(path, "the network file");
  if (!text) return text.error();
  return parse_topology_yaml(*text, path.string(), warnings);
}

}  // namespace orrery::net
