#include "design/sweep_file.h"

#include <cmath>
#include <filesystem>
#include <functional>
#include <set>
#include <type_traits>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/text_file.h"
#include "core/units.h"
#include "network/yaml_text.h"

namespace orrery::design {

namespace {

// Ranges are expanded here; a typo such as {from: 1, to: 1e9, step: 1} must not eat the machine.
constexpr size_t kMaxAxisValues = 100000;

// Errors carry "file:line: ".
class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  Error error(const YAML::Node& node, const std::string& what) const {
    return Error(ErrorKind::kConfig,
                 fmt::format("{}:{}: {}", path_, net::yaml_line(node, 0), what));
  }

  // Checks that `map` holds only `known` keys.
  Status keys(const YAML::Node& map, std::string_view where,
              const std::vector<std::string>& known) const {
    if (!map.IsMap()) return error(map, fmt::format("'{}' must be a mapping of keys", where));
    for (const auto& item : map) {
      const std::string key = item.first.Scalar();
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        return error(item.first, fmt::format("key '{}': unknown in '{}' (expected one of {})", key,
                                             where, fmt::join(known, ", ")));
      }
    }
    return Status::ok();
  }

  Expected<double> number(const YAML::Node& node, std::string_view key) const {
    if (!node.IsScalar()) return error(node, fmt::format("'{}' must be a number", key));
    const std::string& text = node.Scalar();
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value)) {
      return error(node, fmt::format("'{}' is '{}', not a number", key, text));
    }
    return value;
  }

  Expected<double> positive(const YAML::Node& node, std::string_view key) const {
    Expected<double> value = number(node, key);
    if (!value) return value;
    if (*value <= 0)
      return error(node, fmt::format("'{}' is {}, expected more than 0", key, *value));
    return value;
  }

  Expected<double> non_negative(const YAML::Node& node, std::string_view key) const {
    Expected<double> value = number(node, key);
    if (!value) return value;
    if (*value < 0) return error(node, fmt::format("'{}' is {}, expected 0 or more", key, *value));
    return value;
  }

  Expected<double> fraction(const YAML::Node& node, std::string_view key) const {
    Expected<double> value = number(node, key);
    if (!value) return value;
    if (*value <= 0 || *value > 1) {
      return error(node, fmt::format("'{}' is {}, expected a fraction in (0, 1]", key, *value));
    }
    return value;
  }

  template <typename T>
  Expected<T> count(const YAML::Node& node, std::string_view key, uint64_t minimum = 1) const {
    Expected<double> value = number(node, key);
    if (!value) return value.error();
    if (*value != std::floor(*value) || *value < static_cast<double>(minimum) ||
        *value > static_cast<double>(std::numeric_limits<T>::max())) {
      return error(node, fmt::format("'{}' is {}, expected a whole number of at least {}", key,
                                     node.Scalar(), minimum));
    }
    return static_cast<T>(*value);
  }

  Expected<uint64_t> bytes(const YAML::Node& node, std::string_view key) const {
    if (!node.IsScalar()) return error(node, fmt::format("'{}' must be a size such as 80GiB", key));
    Expected<uint64_t> value = parse_bytes(node.Scalar());
    if (!value) {
      return error(node, fmt::format("'{}': {}", key, value.error().message()));
    }
    return value;
  }

  Expected<bool> boolean(const YAML::Node& node, std::string_view key) const {
    if (node.IsScalar()) {
      const std::string& text = node.Scalar();
      if (text == "true" || text == "on" || text == "yes") return true;
      if (text == "false" || text == "off" || text == "no") return false;
    }
    return error(node, fmt::format("'{}' must be true or false", key));
  }

  Expected<std::string> text(const YAML::Node& node, std::string_view key) const {
    if (!node.IsScalar() || node.Scalar().empty()) {
      return error(node, fmt::format("'{}' must be a name", key));
    }
    return node.Scalar();
  }

  // A value, a list, a range or `all`. `convert` reads one value.
  template <typename T>
  Expected<Axis<T>> axis(const YAML::Node& node, std::string_view key, bool allow_all,
                         const std::function<Expected<T>(const YAML::Node&)>& convert) const {
    Axis<T> result;
    result.line = net::yaml_line(node, 0);
    if (node.IsScalar() && node.Scalar() == "all") {
      if (!allow_all) {
        return error(node, fmt::format("'{}': `all` is for plan axes; give a value, a list or a "
                                       "range",
                                       key));
      }
      result.all = true;
      return result;
    }
    if (node.IsScalar()) {
      Expected<T> value = convert(node);
      if (!value) return value.error();
      result.values.push_back(std::move(*value));
      return result;
    }
    if (node.IsSequence()) {
      if (node.size() == 0) return error(node, fmt::format("'{}' is an empty list", key));
      for (const YAML::Node& item : node) {
        Expected<T> value = convert(item);
        if (!value) return value.error();
        if (std::find(result.values.begin(), result.values.end(), *value) != result.values.end()) {
          return error(item, fmt::format("'{}' lists {} twice", key, item.Scalar()));
        }
        result.values.push_back(std::move(*value));
      }
      return result;
    }
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      if (node.IsMap()) {
        if (Status s = keys(node, key, {"from", "to", "step", "times"}); !s) return s.error();
        if (!node["from"] || !node["to"]) {
          return error(node, fmt::format("'{}': a range needs 'from' and 'to'", key));
        }
        if (static_cast<bool>(node["step"]) == static_cast<bool>(node["times"])) {
          return error(node, fmt::format("'{}': a range needs one of 'step' (from, from + step, "
                                         "...) or 'times' (from, from x times, ...)",
                                         key));
        }
        Expected<T> from = convert(node["from"]);
        if (!from) return from.error();
        Expected<T> to = convert(node["to"]);
        if (!to) return to.error();
        if (*to < *from) {
          return error(node["to"], fmt::format("'{}': the range ends below its start", key));
        }
        const bool geometric = static_cast<bool>(node["times"]);
        Expected<double> by =
            geometric ? number(node["times"], "times") : number(node["step"], "step");
        if (!by) return by.error();
        if ((geometric && *by <= 1) || (!geometric && *by <= 0)) {
          return error(node[geometric ? "times" : "step"],
                       fmt::format("'{}': a range's {} must be more than {}", key,
                                   geometric ? "'times'" : "'step'", geometric ? 1 : 0));
        }
        // Steps are counted, not accumulated, so that 0.1 steps end where they should.
        const double start = static_cast<double>(*from);
        const double stop = static_cast<double>(*to) * (1 + 1e-12);
        for (size_t k = 0;; ++k) {
          const double value = geometric ? start * std::pow(*by, static_cast<double>(k))
                                         : start + *by * static_cast<double>(k);
          if (value > stop) break;
          if (result.values.size() >= kMaxAxisValues) {
            return error(
                node, fmt::format("'{}': the range has more than {} values", key, kMaxAxisValues));
          }
          if constexpr (std::is_integral_v<T>) {
            if (value != std::floor(value)) {
              return error(
                  node, fmt::format("'{}': the range reaches {}, not a whole number", key, value));
            }
            result.values.push_back(static_cast<T>(value));
          } else {
            result.values.push_back(static_cast<T>(value));
          }
        }
        return result;
      }
    }
    return error(node,
                 fmt::format("'{}' must be a value, a list{}", key,
                             std::is_arithmetic_v<T> ? ", a range {from, to, step|times}" : ""));
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string resolve(const std::string& base_file, const std::string& path) {
  const std::filesystem::path p(path);
  std::error_code error;  // a path that cannot be examined is left as written: its reader says why
  if (p.is_absolute() || std::filesystem::exists(p, error)) return path;
  const std::filesystem::path beside = std::filesystem::path(base_file).parent_path() / p;
  return std::filesystem::exists(beside, error) ? beside.string() : path;
}

const std::vector<std::string> kLlmPlanAxes = {"tp",
                                               "cp",
                                               "pp",
                                               "dp",
                                               "ep",
                                               "micro_batch",
                                               "sp",
                                               "zero",
                                               "recompute",
                                               "schedule",
                                               "virtual_stages",
                                               "offload"};

}  // namespace

Expected<OffloadChoice> parse_offload(std::string_view text) {
  OffloadChoice choice;
  if (text == "auto") {
    choice.automatic = true;
    return choice;
  }
  if (text == "none") return choice;
  if (text == "all") {
    choice.set = kOffloadAll;
    return choice;
  }
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('+', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view part = text.substr(start, end - start);
    if (part == "optimizer") {
      choice.set |= kOffloadOptimizer;
    } else if (part == "activations") {
      choice.set |= kOffloadActivations;
    } else if (part == "weights") {
      choice.set |= kOffloadWeights;
    } else {
      return Error::make(ErrorKind::kConfig,
                         "offload '{}': expected none, auto, all or optimizer, activations, "
                         "weights joined with '+'",
                         text);
    }
    start = end + 1;
  }
  return choice;
}

std::string offload_set_name(uint32_t set) {
  if (set == 0) return "none";
  std::vector<std::string> parts;
  if ((set & kOffloadOptimizer) != 0) parts.emplace_back("optimizer");
  if ((set & kOffloadActivations) != 0) parts.emplace_back("activations");
  if ((set & kOffloadWeights) != 0) parts.emplace_back("weights");
  return fmt::format("{}", fmt::join(parts, "+"));
}

std::string offload_name(const OffloadChoice& choice) {
  return choice.automatic ? "auto" : offload_set_name(choice.set);
}

Expected<SweepSpec> load_sweep_file(const std::string& path) {
  Expected<std::string> text = read_text_file(path, "the sweep file");
  if (!text) return text.error();
  return parse_sweep_file(path, std::move(*text));
}

Expected<SweepSpec> parse_sweep_file(const std::string& path, std::string text) {
  Expected<YAML::Node> parsed = net::parse_yaml_text(text, path);
  if (!parsed) return parsed.error();
  const YAML::Node root = *parsed;
  const Reader r(path);
  SweepSpec spec;
  spec.path = path;
  spec.text = std::move(text);
  if (!root.IsMap()) {
    return Error::make(ErrorKind::kConfig,
                       "{}: a sweep file is a mapping with 'workload', "
                       "'cluster' and 'plan'",
                       path);
  }
  if (Status s = r.keys(root, "sweep file",
                        {"name", "workload", "cluster", "plan", "system", "costs", "constraints"});
      !s) {
    return s.error();
  }
  spec.name = root["name"] ? root["name"].Scalar() : std::filesystem::path(path).stem().string();

  // ---- the workload ----
  const YAML::Node workload = root["workload"];
  if (!workload) {
    return Error::make(ErrorKind::kConfig,
                       "{}: missing 'workload' (llm: <model> or dlrm: <model>, "
                       "global_batch)",
                       path);
  }
  if (Status s = r.keys(workload, "workload", {"llm", "dlrm", "global_batch", "seq", "dtype"}); !s)
    return s.error();
  if (static_cast<bool>(workload["llm"]) == static_cast<bool>(workload["dlrm"])) {
    return r.error(workload,
                   "'workload' names one model: 'llm: <preset or file>' or 'dlrm: "
                   "<preset or file>'");
  }
  if (workload["llm"]) {
    spec.workload = SweepWorkload::kLlm;
    Expected<std::string> name = r.text(workload["llm"], "llm");
    if (!name) return name.error();
    spec.model_name = *name;
    Expected<gen::TransformerModel> model = gen::resolve_model(resolve(path, *name));
    if (!model) return r.error(workload["llm"], model.error().message());
    spec.llm = std::move(*model);
    if (workload["dtype"]) {
      Expected<gen::DType> dtype = gen::parse_dtype(workload["dtype"].Scalar());
      if (!dtype) return r.error(workload["dtype"], dtype.error().message());
      spec.llm.dtype = *dtype;
    }
  } else {
    spec.workload = SweepWorkload::kDlrm;
    Expected<std::string> name = r.text(workload["dlrm"], "dlrm");
    if (!name) return name.error();
    spec.model_name = *name;
    Expected<gen::DlrmModel> model = gen::resolve_dlrm_model(resolve(path, *name));
    if (!model) return r.error(workload["dlrm"], model.error().message());
    spec.dlrm = std::move(*model);
    if (workload["seq"] || workload["dtype"]) {
      return r.error(workload, "'seq' and 'dtype' are for transformer workloads");
    }
  }
  if (!workload["global_batch"]) {
    return r.error(workload,
                   "missing 'global_batch' (sequences, or DLRM samples, per iteration: "
                   "fixed for every point)");
  }
  {
    Expected<uint64_t> batch = r.count<uint64_t>(workload["global_batch"], "global_batch");
    if (!batch) return batch.error();
    spec.global_batch = *batch;
  }
  if (workload["seq"]) {
    Expected<uint32_t> seq = r.count<uint32_t>(workload["seq"], "seq");
    if (!seq) return seq.error();
    spec.seq = *seq;
  }

  // ---- the cluster ----
  const YAML::Node cluster = root["cluster"];
  if (!cluster) return Error::make(ErrorKind::kConfig, "{}: missing 'cluster'", path);
  if (Status s = r.keys(cluster, "cluster",
                        {"accelerators", "peak_tflops", "efficiency", "hbm_capacity",
                         "hbm_bandwidth", "network", "expansion"});
      !s) {
    return s.error();
  }
  const auto count32 = [&](std::string_view key) {
    return [&r, key](const YAML::Node& n) { return r.count<uint32_t>(n, key); };
  };
  const auto positive = [&](std::string_view key) {
    return [&r, key](const YAML::Node& n) { return r.positive(n, key); };
  };
  const auto non_negative = [&](std::string_view key) {
    return [&r, key](const YAML::Node& n) { return r.non_negative(n, key); };
  };
  const auto bytes = [&](std::string_view key) {
    return [&r, key](const YAML::Node& n) { return r.bytes(n, key); };
  };
  // A required cluster axis.
  auto need = [&](const YAML::Node& parent, const char* key,
                  std::string_view where) -> Expected<YAML::Node> {
    if (!parent[key]) return r.error(parent, fmt::format("'{}' needs '{}'", where, key));
    return parent[key];
  };
  {
    Expected<YAML::Node> node = need(cluster, "accelerators", "cluster");
    if (!node) return node.error();
    Expected<Axis<uint32_t>> a =
        r.axis<uint32_t>(*node, "accelerators", false, count32("accelerators"));
    if (!a) return a.error();
    spec.accelerators = std::move(*a);
  }
  {
    Expected<YAML::Node> node = need(cluster, "peak_tflops", "cluster");
    if (!node) return node.error();
    Expected<Axis<double>> a = r.axis<double>(*node, "peak_tflops", false, positive("peak_tflops"));
    if (!a) return a.error();
    spec.peak_tflops = std::move(*a);
  }
  if (cluster["efficiency"]) {
    Expected<Axis<double>> a =
        r.axis<double>(cluster["efficiency"], "efficiency", false,
                       [&r](const YAML::Node& n) { return r.fraction(n, "efficiency"); });
    if (!a) return a.error();
    spec.efficiency = std::move(*a);
  } else {
    spec.efficiency.values = {1.0};
  }
  {
    Expected<YAML::Node> node = need(cluster, "hbm_capacity", "cluster");
    if (!node) return node.error();
    Expected<Axis<uint64_t>> a =
        r.axis<uint64_t>(*node, "hbm_capacity", false, bytes("hbm_capacity"));
    if (!a) return a.error();
    for (uint64_t value : a->values) {
      if (value == 0) return r.error(*node, "'hbm_capacity' must be more than 0");
    }
    spec.hbm_bytes = std::move(*a);
  }
  {
    Expected<YAML::Node> node = need(cluster, "hbm_bandwidth", "cluster");
    if (!node) return node.error();
    Expected<Axis<double>> a =
        r.axis<double>(*node, "hbm_bandwidth", false, positive("hbm_bandwidth"));
    if (!a) return a.error();
    spec.hbm_gbps = std::move(*a);
  }
  {
    Expected<YAML::Node> node = need(cluster, "network", "cluster");
    if (!node) return node.error();
    if (!node->IsSequence() || node->size() == 0) {
      return r.error(*node, "'network' must be a list of dimensions, innermost first");
    }
    bool rest_seen = false;
    for (const YAML::Node& item : *node) {
      DimensionSpec dim;
      dim.line = net::yaml_line(item, 0);
      if (Status s = r.keys(
              item, "network dimension",
              {"topology", "size", "bandwidth", "latency", "cost", "all_reduce", "all_to_all"});
          !s) {
        return s.error();
      }
      if (item["topology"]) {
        dim.topology = item["topology"].Scalar();
        if (dim.topology != "Ring" && dim.topology != "FullyConnected" &&
            dim.topology != "Switch") {
          return r.error(
              item["topology"],
              fmt::format("topology '{}': expected Ring, FullyConnected or Switch", dim.topology));
        }
      }
      Expected<YAML::Node> size = need(item, "size", "network dimension");
      if (!size) return size.error();
      if (size->IsScalar() && size->Scalar() == "rest") {
        if (rest_seen) return r.error(*size, "only one dimension may have size 'rest'");
        rest_seen = true;
        dim.size.values = {0};
        dim.size.line = net::yaml_line(*size, 0);
      } else {
        Expected<Axis<uint32_t>> a =
            r.axis<uint32_t>(*size, "size", false,
                             [&r](const YAML::Node& n) { return r.count<uint32_t>(n, "size", 2); });
        if (!a) return a.error();
        dim.size = std::move(*a);
      }
      Expected<YAML::Node> bw = need(item, "bandwidth", "network dimension");
      if (!bw) return bw.error();
      Expected<Axis<double>> b = r.axis<double>(*bw, "bandwidth", false, positive("bandwidth"));
      if (!b) return b.error();
      dim.bandwidth_gbps = std::move(*b);
      if (item["latency"]) {
        Expected<Axis<double>> l =
            r.axis<double>(item["latency"], "latency", false, non_negative("latency"));
        if (!l) return l.error();
        dim.latency_ns = std::move(*l);
      } else {
        dim.latency_ns.values = {0};
      }
      if (item["cost"]) {
        Expected<double> cost = r.non_negative(item["cost"], "cost");
        if (!cost) return cost.error();
        dim.cost_per_gbps = *cost;
      }
      if (item["all_reduce"]) dim.all_reduce = item["all_reduce"].Scalar();
      if (item["all_to_all"]) dim.all_to_all = item["all_to_all"].Scalar();
      spec.network.push_back(std::move(dim));
    }
  }
  if (const YAML::Node expansion = cluster["expansion"]) {
    if (Status s =
            r.keys(expansion, "expansion", {"capacity", "bandwidth", "latency", "shared_by"});
        !s) {
      return s.error();
    }
    Expected<YAML::Node> capacity = need(expansion, "capacity", "expansion");
    if (!capacity) return capacity.error();
    Expected<Axis<uint64_t>> c = r.axis<uint64_t>(*capacity, "capacity", false, bytes("capacity"));
    if (!c) return c.error();
    spec.expansion_bytes = std::move(*c);
    Expected<YAML::Node> bw = need(expansion, "bandwidth", "expansion");
    if (!bw) return bw.error();
    Expected<Axis<double>> b = r.axis<double>(*bw, "bandwidth", false, positive("bandwidth"));
    if (!b) return b.error();
    spec.expansion_gbps = std::move(*b);
    if (expansion["latency"]) {
      Expected<Axis<double>> l =
          r.axis<double>(expansion["latency"], "latency", false, non_negative("latency"));
      if (!l) return l.error();
      spec.expansion_latency_ns = std::move(*l);
    } else {
      spec.expansion_latency_ns.values = {0};
    }
    if (expansion["shared_by"]) {
      Expected<uint32_t> shared = r.count<uint32_t>(expansion["shared_by"], "shared_by");
      if (!shared) return shared.error();
      spec.expansion_shared_by = *shared;
    }
  } else {
    spec.expansion_bytes.values = {0};
    spec.expansion_gbps.values = {1};
    spec.expansion_latency_ns.values = {0};
  }

  // ---- the plan ----
  const YAML::Node plan = root["plan"] ? root["plan"] : YAML::Node(YAML::NodeType::Map);
  const bool llm = spec.workload == SweepWorkload::kLlm;
  if (plan.IsMap()) {
    for (const auto& item : plan) {
      const std::string key = item.first.Scalar();
      const bool llm_axis =
          std::find(kLlmPlanAxes.begin(), kLlmPlanAxes.end(), key) != kLlmPlanAxes.end();
      if (llm && !llm_axis) {
        return r.error(item.first,
                       fmt::format("key '{}': unknown plan axis of a transformer (expected one of "
                                   "{})",
                                   key, fmt::join(kLlmPlanAxes, ", ")));
      }
      if (!llm && key != "sharding") {
        return r.error(item.first,
                       fmt::format("key '{}': a DLRM sweep's plan axis is 'sharding' (its MLPs "
                                   "are data-parallel over every accelerator){}",
                                   key, llm_axis ? "; transformer axes do not apply" : ""));
      }
    }
  } else {
    return r.error(plan, "'plan' must be a mapping of axes");
  }
  // An optional plan axis, `all` allowed, with its default.
  auto plan_axis = [&]<typename T>(
                       const char* key, Axis<T>& out, std::vector<T> fallback,
                       const std::function<Expected<T>(const YAML::Node&)>& convert) -> Status {
    if (!plan[key]) {
      out.values = std::move(fallback);
      return Status::ok();
    }
    Expected<Axis<T>> a = r.axis<T>(plan[key], key, true, convert);
    if (!a) return a.error();
    out = std::move(*a);
    return Status::ok();
  };
  const auto count_of = [&r](const char* key) {
    return std::function<Expected<uint32_t>(const YAML::Node&)>(
        [&r, key](const YAML::Node& n) { return r.count<uint32_t>(n, key); });
  };
  const auto bool_of = [&r](const char* key) {
    return std::function<Expected<bool>(const YAML::Node&)>(
        [&r, key](const YAML::Node& n) { return r.boolean(n, key); });
  };
  if (llm) {
    Axis<uint32_t> all_axis;
    all_axis.all = true;
    for (auto [key, axis] : {std::pair<const char*, Axis<uint32_t>*>{"tp", &spec.tp},
                             {"cp", &spec.cp},
                             {"pp", &spec.pp},
                             {"ep", &spec.ep}}) {
      if (Status s = plan_axis(key, *axis, std::vector<uint32_t>{1}, count_of(key)); !s)
        return s.error();
    }
    // dp is what the accelerators leave unless the file says otherwise.
    if (Status s = plan_axis("dp", spec.dp, std::vector<uint32_t>{}, count_of("dp")); !s)
      return s.error();
    if (!plan["dp"]) spec.dp.all = true;
    if (Status s = plan_axis(
            "micro_batch", spec.micro_batch, std::vector<uint64_t>{1},
            std::function<Expected<uint64_t>(const YAML::Node&)>(
                [&r](const YAML::Node& n) { return r.count<uint64_t>(n, "micro_batch"); }));
        !s) {
      return s.error();
    }
    if (Status s = plan_axis("sp", spec.sp, std::vector<bool>{false}, bool_of("sp")); !s)
      return s.error();
    if (Status s =
            plan_axis("recompute", spec.recompute, std::vector<bool>{false}, bool_of("recompute"));
        !s) {
      return s.error();
    }
    if (Status s = plan_axis("zero", spec.zero, std::vector<uint32_t>{0},
                             std::function<Expected<uint32_t>(const YAML::Node&)>(
                                 [&r](const YAML::Node& n) -> Expected<uint32_t> {
                                   Expected<uint32_t> z = r.count<uint32_t>(n, "zero", 0);
                                   if (z && *z > 3) return r.error(n, "'zero' is 0, 1, 2 or 3");
                                   return z;
                                 }));
        !s) {
      return s.error();
    }
    if (Status s = plan_axis("schedule", spec.schedule, std::vector<std::string>{"1f1b"},
                             std::function<Expected<std::string>(const YAML::Node&)>(
                                 [&r](const YAML::Node& n) -> Expected<std::string> {
                                   if (n.IsScalar() &&
                                       (n.Scalar() == "1f1b" || n.Scalar() == "interleaved")) {
                                     return n.Scalar();
                                   }
                                   return r.error(n, "'schedule' is 1f1b or interleaved");
                                 }));
        !s) {
      return s.error();
    }
    if (Status s = plan_axis("virtual_stages", spec.virtual_stages, std::vector<uint32_t>{},
                             count_of("virtual_stages"));
        !s) {
      return s.error();
    }
    // The default follows the schedule: 1 for 1F1B, 2 for the interleaved one.
    if (!plan["virtual_stages"]) spec.virtual_stages.all = false;
    if (Status s = plan_axis("offload", spec.offload, std::vector<OffloadChoice>{OffloadChoice{}},
                             std::function<Expected<OffloadChoice>(const YAML::Node&)>(
                                 [&r](const YAML::Node& n) -> Expected<OffloadChoice> {
                                   if (!n.IsScalar()) return r.error(n, "'offload' must be a name");
                                   Expected<OffloadChoice> c = parse_offload(n.Scalar());
                                   if (!c) return r.error(n, c.error().message());
                                   return c;
                                 }));
        !s) {
      return s.error();
    }
  } else {
    if (Status s = plan_axis("sharding", spec.sharding, std::vector<std::string>{"table"},
                             std::function<Expected<std::string>(const YAML::Node&)>(
                                 [&r](const YAML::Node& n) -> Expected<std::string> {
                                   if (!n.IsScalar())
                                     return r.error(n, "'sharding' must be a name");
                                   Expected<gen::Sharding> kind = gen::parse_sharding(n.Scalar());
                                   if (!kind) return r.error(n, kind.error().message());
                                   return std::string(gen::sharding_name(*kind));
                                 }));
        !s) {
      return s.error();
    }
  }

  // ---- the simulated system ----
  if (const YAML::Node system = root["system"]) {
    if (Status s = r.keys(system, "system", {"backend", "scheduling", "splits", "endpoint_delay"});
        !s) {
      return s.error();
    }
    if (system["backend"]) {
      spec.backend = system["backend"].Scalar();
      if (spec.backend != "analytical" && spec.backend != "congestion-aware") {
        return r.error(system["backend"],
                       fmt::format("backend '{}': a sweep runs on ASTRA-sim's multi-dimensional "
                                   "networks with the analytical or congestion-aware backend",
                                   spec.backend));
      }
    }
    if (system["scheduling"]) {
      spec.scheduling = system["scheduling"].Scalar();
      if (spec.scheduling != "LIFO" && spec.scheduling != "FIFO") {
        return r.error(system["scheduling"], "'scheduling' is LIFO or FIFO");
      }
    }
    if (system["splits"]) {
      Expected<uint32_t> splits = r.count<uint32_t>(system["splits"], "splits");
      if (!splits) return splits.error();
      spec.splits = *splits;
    }
    if (system["endpoint_delay"]) {
      Expected<double> delay = r.non_negative(system["endpoint_delay"], "endpoint_delay");
      if (!delay) return delay.error();
      spec.endpoint_delay_ns = *delay;
    }
  }

  // ---- costs and constraints ----
  if (const YAML::Node costs = root["costs"]) {
    if (Status s = r.keys(costs, "costs",
                          {"accelerator", "per_tflops", "hbm_per_gib", "hbm_per_gbps",
                           "expansion_per_gib", "expansion_per_gbps"});
        !s) {
      return s.error();
    }
    for (auto [key, field] :
         {std::pair<const char*, double*>{"accelerator", &spec.costs.accelerator},
          {"per_tflops", &spec.costs.per_tflops},
          {"hbm_per_gib", &spec.costs.hbm_per_gib},
          {"hbm_per_gbps", &spec.costs.hbm_per_gbps},
          {"expansion_per_gib", &spec.costs.expansion_per_gib},
          {"expansion_per_gbps", &spec.costs.expansion_per_gbps}}) {
      if (!costs[key]) continue;
      Expected<double> value = r.non_negative(costs[key], key);
      if (!value) return value.error();
      *field = *value;
    }
  }
  if (const YAML::Node constraints = root["constraints"]) {
    if (Status s = r.keys(constraints, "constraints", {"memory", "budget", "budgets"}); !s) {
      return s.error();
    }
    if (constraints["memory"]) {
      const std::string value = constraints["memory"].Scalar();
      if (value != "fit" && value != "ignore") {
        return r.error(constraints["memory"],
                       "'memory' is fit (reject points whose memory exceeds HBM and the "
                       "expansion tier) or ignore");
      }
      spec.memory_must_fit = value == "fit";
    }
    if (constraints["budget"]) {
      Expected<double> budget = r.positive(constraints["budget"], "budget");
      if (!budget) return budget.error();
      spec.budget = *budget;
    }
    if (const YAML::Node budgets = constraints["budgets"]) {
      if (!budgets.IsSequence()) return r.error(budgets, "'budgets' must be a list of dollars");
      for (const YAML::Node& item : budgets) {
        Expected<double> budget = r.positive(item, "budgets");
        if (!budget) return budget.error();
        spec.budgets.push_back(*budget);
      }
      std::sort(spec.budgets.begin(), spec.budgets.end());
    }
  }
  return spec;
}

}  // namespace orrery::design
