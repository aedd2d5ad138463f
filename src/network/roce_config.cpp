#include "network/roce_config.h"

#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <vector>

#include "core/text_file.h"
#include "core/units.h"
#include "network/graph_yaml.h"
#include "network/yaml_text.h"

namespace orrery::net {

std::string_view congestion_control_name(CongestionControl cc) {
  switch (cc) {
    case CongestionControl::kNone:
      return "none";
    case CongestionControl::kDcqcn:
      return "dcqcn";
    case CongestionControl::kDctcp:
      return "dctcp";
    case CongestionControl::kTimely:
      return "timely";
    case CongestionControl::kHpcc:
      return "hpcc";
  }
  return "none";
}

Expected<double> parse_rate_text(std::string_view text) {
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"Tbps", 1e12}, {"Tb/s", 1e12}, {"Gbps", 1e9}, {"Gb/s", 1e9}, {"Mbps", 1e6}, {"Mb/s", 1e6},
      {"Kbps", 1e3},  {"kbps", 1e3},  {"Kb/s", 1e3}, {"kb/s", 1e3}, {"bps", 1.0},  {"b/s", 1.0}};
  double scale = 0;
  std::string_view number = text;
  for (const auto& [unit, factor] : kUnits) {
    if (text.size() > unit.size() && text.substr(text.size() - unit.size()) == unit) {
      scale = factor;
      number = text.substr(0, text.size() - unit.size());
      break;
    }
  }
  double value = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (scale == 0 || ec != std::errc() || end != number.data() + number.size() ||
      !std::isfinite(value) || value <= 0 || !std::isfinite(value * scale)) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "found '{}', expected a positive rate such as 50Mbps or 200Gbps", text);
  }
  return value * scale;
}

namespace {

class Reader {
 public:
  explicit Reader(std::string_view file) : file_(file) {}

  template <typename... Args>
  Error fail(const YAML::Node& node, fmt::format_string<Args...> format, Args&&... args) const {
    return Error(ErrorKind::kConfig, fmt::format("{}:{}: {}", file_, yaml_line(node),
                                                 fmt::format(format, std::forward<Args>(args)...)));
  }

  Status read(const YAML::Node& root, RoceConfig& c) {
    static const std::vector<std::string> kTop = {"cc",
                                                  "mtu",
                                                  "header_bytes",
                                                  "control_bytes",
                                                  "int_hop_bytes",
                                                  "ack_interval",
                                                  "qp",
                                                  "qps_per_pair",
                                                  "seed",
                                                  "buffer",
                                                  "ecn",
                                                  "pfc",
                                                  "rto",
                                                  "dcqcn",
                                                  "dctcp",
                                                  "timely",
                                                  "hpcc",
                                                  "queue_sample_interval",
                                                  "trace_messages"};
    for (const auto& entry : root) {
      const std::string key = entry.first.as<std::string>();
      const YAML::Node& v = entry.second;
      Status s = Status::ok();
      if (key == "cc") {
        s = cc(v, c.cc);
      } else if (key == "mtu") {
        s = count(v, key, 64, 65536, c.mtu);
      } else if (key == "header_bytes") {
        s = count(v, key, 0, 4096, c.header_bytes);
      } else if (key == "control_bytes") {
        s = count(v, key, 1, 4096, c.control_bytes);
      } else if (key == "int_hop_bytes") {
        s = count(v, key, 0, 1024, c.int_hop_bytes);
      } else if (key == "ack_interval") {
        s = count(v, key, 1, 1u << 20, c.ack_interval);
      } else if (key == "qps_per_pair") {
        s = count(v, key, 1, 64, c.qps_per_pair);
      } else if (key == "qp") {
        const std::string mode = scalar(v);
        if (mode == "pair") {
          c.qp = QpMode::kPair;
        } else if (mode == "message") {
          c.qp = QpMode::kMessage;
        } else {
          return fail(v, "key 'qp': found '{}', expected pair or message", mode);
        }
      } else if (key == "seed") {
        s = u64(v, key, c.seed);
      } else if (key == "buffer") {
        s = bytes(v, key, false, c.buffer_bytes);
      } else if (key == "rto") {
        s = time(v, key, false, c.rto);
      } else if (key == "queue_sample_interval") {
        s = time(v, key, true, c.queue_sample_interval);
      } else if (key == "trace_messages") {
        if (!v.IsSequence())
          return fail(v, "key 'trace_messages': expected a list of message numbers");
        for (const YAML::Node& item : v) {
          uint64_t message = 0;
          if (Status status = u64(item, key, message); !status) return status;
          c.trace_messages.push_back(message);
        }
        std::sort(c.trace_messages.begin(), c.trace_messages.end());
      } else if (key == "ecn") {
        s = section(v, key, {"kmin", "kmax", "pmax"},
                    [&](const std::string& k, const YAML::Node& n) {
                      if (k == "kmin") return bytes(n, k, true, c.kmin_bytes);
                      if (k == "kmax") return bytes(n, k, true, c.kmax_bytes);
                      return fraction(n, k, c.pmax);
                    });
        if (s && c.kmax_bytes < c.kmin_bytes) {
          return fail(v, "ecn: kmax ({}) is below kmin ({})", c.kmax_bytes, c.kmin_bytes);
        }
      } else if (key == "pfc") {
        s = section(v, key, {"enabled", "xoff", "xon_offset", "headroom"},
                    [&](const std::string& k, const YAML::Node& n) -> Status {
                      if (k == "enabled") return boolean(n, k, c.pfc);
                      if (k == "xoff") return bytes_or_auto(n, k, c.xoff_bytes);
                      if (k == "xon_offset") return bytes_or_auto(n, k, c.xon_offset_bytes);
                      return bytes_or_auto(n, k, c.headroom_bytes);
                    });
      } else if (key == "dcqcn") {
        auto& d = c.dcqcn;
        s = section(
            v, key,
            {"g", "alpha_interval", "decrease_interval", "increase_interval", "cnp_interval",
             "byte_counter", "fast_recovery", "rate_ai", "rate_hai", "min_rate"},
            [&](const std::string& k, const YAML::Node& n) -> Status {
              if (k == "g") return fraction(n, k, d.g);
              if (k == "alpha_interval") return time(n, k, false, d.alpha_interval);
              if (k == "decrease_interval") return time(n, k, true, d.decrease_interval);
              if (k == "increase_interval") return time(n, k, false, d.increase_interval);
              if (k == "cnp_interval") return time(n, k, true, d.cnp_interval);
              if (k == "byte_counter") return bytes(n, k, false, d.byte_counter);
              if (k == "fast_recovery") return count(n, k, 0, 1000, d.fast_recovery);
              if (k == "rate_ai") return rate(n, k, d.rate_ai_bps);
              if (k == "rate_hai") return rate(n, k, d.rate_hai_bps);
              return rate(n, k, d.min_rate_bps);
            });
      } else if (key == "dctcp") {
        s = section(v, key, {"g"}, [&](const std::string& k, const YAML::Node& n) {
          return fraction(n, k, c.dctcp.g);
        });
      } else if (key == "timely") {
        auto& t = c.timely;
        s = section(v, key,
                    {"alpha", "beta", "delta", "t_low", "t_high", "min_rtt", "hai_after", "segment",
                     "min_rate"},
                    [&](const std::string& k, const YAML::Node& n) -> Status {
                      if (k == "alpha") return fraction(n, k, t.alpha);
                      if (k == "beta") return fraction(n, k, t.beta);
                      if (k == "delta") return rate(n, k, t.delta_bps);
                      if (k == "t_low") return time(n, k, true, t.t_low);
                      if (k == "t_high") return time(n, k, false, t.t_high);
                      if (k == "min_rtt") return time(n, k, false, t.min_rtt);
                      if (k == "hai_after") return count(n, k, 1, 1000, t.hai_after);
                      if (k == "segment") return bytes(n, k, false, t.segment_bytes);
                      return rate(n, k, t.min_rate_bps);
                    });
        if (s && t.t_high < t.t_low) return fail(v, "timely: t_high is below t_low");
      } else if (key == "hpcc") {
        auto& h = c.hpcc;
        s = section(v, key, {"eta", "max_stage", "rate_ai"},
                    [&](const std::string& k, const YAML::Node& n) -> Status {
                      if (k == "eta") return fraction(n, k, h.eta);
                      if (k == "max_stage") return count(n, k, 0, 1000, h.max_stage);
                      return rate(n, k, h.rate_ai_bps);
                    });
      } else {
        return fail(entry.first, "unknown key '{}' in a RoCE configuration (expected {})", key,
                    fmt::join(kTop, ", "));
      }
      if (!s) return s;
    }
    if (c.qps_per_pair > 1 && c.qp == QpMode::kMessage) {
      return fail(root["qps_per_pair"],
                  "qps_per_pair ({}) needs qp: pair (with qp: message every "
                  "message has a QP of its own)",
                  c.qps_per_pair);
    }
    return Status::ok();
  }

 private:
  template <typename F>
  Status section(const YAML::Node& v, const std::string& name, std::vector<std::string> keys,
                 F&& each) {
    if (!v.IsMap())
      return fail(v, "key '{}': expected a mapping of {}", name, fmt::join(keys, ", "));
    for (const auto& entry : v) {
      const std::string key = entry.first.as<std::string>();
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        return fail(entry.first, "unknown key '{}' in section '{}' (expected {})", key, name,
                    fmt::join(keys, ", "));
      }
      if (Status s = each(key, entry.second); !s) return s;
    }
    return Status::ok();
  }

  static std::string scalar(const YAML::Node& v) { return v.IsScalar() ? v.Scalar() : ""; }

  Status cc(const YAML::Node& v, CongestionControl& out) {
    const std::string s = scalar(v);
    for (CongestionControl c :
         {CongestionControl::kNone, CongestionControl::kDcqcn, CongestionControl::kDctcp,
          CongestionControl::kTimely, CongestionControl::kHpcc}) {
      if (s == congestion_control_name(c)) {
        out = c;
        return Status::ok();
      }
    }
    return fail(v, "key 'cc': found '{}', expected none, dcqcn, dctcp, timely or hpcc", s);
  }
  Status u64(const YAML::Node& v, const std::string& key, uint64_t& out) {
    const std::string s = scalar(v);
    uint64_t value = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
      return fail(v, "key '{}': found '{}', expected a non-negative integer", key, s);
    }
    out = value;
    return Status::ok();
  }
  Status count(const YAML::Node& v, const std::string& key, uint32_t lo, uint32_t hi,
               uint32_t& out) {
    uint64_t value = 0;
    if (Status s = u64(v, key, value); !s || value < lo || value > hi) {
      return fail(v, "key '{}': found '{}', expected an integer from {} to {}", key, scalar(v), lo,
                  hi);
    }
    out = static_cast<uint32_t>(value);
    return Status::ok();
  }
  Status bytes(const YAML::Node& v, const std::string& key, bool zero_ok, uint64_t& out) {
    Expected<uint64_t> value = parse_bytes(scalar(v));
    if (!value || (!zero_ok && *value == 0)) {
      return fail(v, "key '{}': found '{}', expected a {}byte size such as 100KB or 32MiB", key,
                  scalar(v), zero_ok ? "" : "positive ");
    }
    out = *value;
    return Status::ok();
  }
  Status bytes_or_auto(const YAML::Node& v, const std::string& key, uint64_t& out) {
    if (scalar(v) == "auto") {
      out = 0;
      return Status::ok();
    }
    return bytes(v, key, false, out);
  }
  Status time(const YAML::Node& v, const std::string& key, bool zero_ok, SimTime& out) {
    Expected<SimTime> value = parse_latency_text(scalar(v));
    if (!value || (!zero_ok && *value == SimTime::zero())) {
      return fail(v, "key '{}': found '{}', expected a {}time such as 4us or 500ns", key, scalar(v),
                  zero_ok ? "" : "positive ");
    }
    out = *value;
    return Status::ok();
  }
  Status rate(const YAML::Node& v, const std::string& key, double& out) {
    Expected<double> value = parse_rate_text(scalar(v));
    if (!value) return fail(v, "key '{}': {}", key, value.error().message());
    out = *value;
    return Status::ok();
  }
  Status fraction(const YAML::Node& v, const std::string& key, double& out) {
    const std::string s = scalar(v);
    double value = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !(value > 0) || value > 1) {
      return fail(v, "key '{}': found '{}', expected a number in (0, 1]", key, s);
    }
    out = value;
    return Status::ok();
  }
  Status boolean(const YAML::Node& v, const std::string& key, bool& out) {
    const std::string s = scalar(v);
    if (s == "true" || s == "on" || s == "yes") {
      out = true;
    } else if (s == "false" || s == "off" || s == "no") {
      out = false;
    } else {
      return fail(v, "key '{}': found '{}', expected true or false", key, s);
    }
    return Status::ok();
  }

  std::string file_;
};

}  // namespace

Expected<RoceConfig> parse_roce_config(std::string_view text, std::string_view file_name) {
  Expected<YAML::Node> parsed = parse_yaml_text(text, file_name);
  if (!parsed) return parsed.error();
  const YAML::Node& root = *parsed;
  RoceConfig config;
  if (root.IsNull()) return config;
  if (!root.IsMap()) {
    return Error::make(ErrorKind::kConfig, "{}:{}: expected a mapping (a RoCE configuration)",
                       file_name, yaml_line(root));
  }
  try {
    if (Status s = Reader(file_name).read(root, config); !s) return s.error();
  } catch (const YAML::Exception& error) {
    return Error(ErrorKind::kConfig,
                 fmt::format("{}:{}: {}", file_name, error.mark.line + 1, error.msg));
  }
  return config;
}

Expected<RoceConfig> load_roce_config(const std::filesystem::path& path) {
  Expected<std::string> text = read_text_file(path, "the RoCE configuration");
  if (!text) return text.error();
  return parse_roce_config(*text, path.string());
}

}  // namespace orrery::net
