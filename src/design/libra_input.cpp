#include "design/libra_input.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "core/checked.h"
#include "core/text_file.h"
#include "gen/llm_options.h"
#include "network/yaml_text.h"

namespace orrery::design {

namespace {

using net::yaml_line;

Expected<YAML::Node> read_yaml(const std::string& path) {
  Expected<std::string> text = read_text_file(path);
  if (!text) return text.error();
  return net::parse_yaml_text(*text, path);
}

Error node_error(const std::string& path, const YAML::Node& node, const std::string& what) {
  return Error(ErrorKind::kConfig, fmt::format("{}:{}: {}", path, yaml_line(node, 0), what));
}

Expected<double> as_number(const std::string& path, const YAML::Node& node, std::string_view key) {
  if (!node.IsScalar()) return node_error(path, node, fmt::format("'{}' must be a number", key));
  const std::string& text = node.Scalar();
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value)) {
    return node_error(path, node, fmt::format("'{}' is '{}', not a number", key, text));
  }
  return value;
}

Expected<std::vector<int32_t>> as_groups(const std::string& path, const YAML::Node& node,
                                         std::string_view key) {
  if (!node.IsSequence()) {
    return node_error(path, node, fmt::format("'{}' must be a list of group sizes", key));
  }
  std::vector<int32_t> groups;
  for (const YAML::Node& item : node) {
    Expected<double> value = as_number(path, item, key);
    if (!value) return value.error();
    if (*value != std::floor(*value) || *value < -1 || *value > 1e9 || *value == 0) {
      return node_error(
          path, item, fmt::format("'{}' holds {}, expected a group size >= 1 or -1", key, *value));
    }
    groups.push_back(static_cast<int32_t>(*value));
  }
  return groups;
}

std::string resolve(const std::string& base_file, const std::string& path) {
  const std::filesystem::path p(path);
  if (p.is_absolute()) return path;
  return (std::filesystem::path(base_file).parent_path() / p).string();
}

// Tokenizer for constraint text.
struct Cursor {
  std::string_view text;
  size_t pos = 0;
  void skip() {
    while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos])) != 0) ++pos;
  }
  bool done() {
    skip();
    return pos >= text.size();
  }
  char peek() {
    skip();
    return pos < text.size() ? text[pos] : '\0';
  }
};

bool read_number(Cursor& cursor, double& value) {
  cursor.skip();
  const char* begin = cursor.text.data() + cursor.pos;
  const char* end = cursor.text.data() + cursor.text.size();
  if (begin == end || !(std::isdigit(static_cast<unsigned char>(*begin)) != 0 || *begin == '.')) {
    return false;
  }
  const std::string copy(begin, end);
  char* stop = nullptr;
  value = std::strtod(copy.c_str(), &stop);
  cursor.pos += static_cast<size_t>(stop - copy.c_str());
  return stop != copy.c_str();
}

// Numbers in constraints are bounded (kMaxLibraNumber): the LP and NLP solvers scale the problem
// by its coefficients, and GLPK aborts the process on a scale factor it cannot represent
// ('sum = 1e308').
Status check_constraint_number(double value, std::string_view text) {
  if (!in_range(value, 0.0, kMaxLibraNumber)) {
    return Error::make(ErrorKind::kConfig, "constraint '{}': the number {} is out of range ({})",
                       text, format_number(value), range_message(value, 0.0, kMaxLibraNumber));
  }
  return Status::ok();
}

// Parses one side: adds sign * terms into coefficients and constant.
Status parse_side(Cursor& cursor, double sign, size_t dims, std::vector<double>& coefficients,
                  double& constant, std::string_view text) {
  bool first = true;
  while (true) {
    double term_sign = sign;
    char c = cursor.peek();
    if (c == '+' || c == '-') {
      if (c == '-') term_sign = -sign;
      ++cursor.pos;
    } else if (!first) {
      return Status::ok();
    }
    first = false;
    double factor = 1.0;
    const bool has_number = read_number(cursor, factor);
    if (has_number) {
      if (Status status = check_constraint_number(factor, text); !status) return status;
    }
    if (cursor.peek() == '*') ++cursor.pos;
    cursor.skip();
    size_t start = cursor.pos;
    while (cursor.pos < cursor.text.size() &&
           (std::isalnum(static_cast<unsigned char>(cursor.text[cursor.pos])) != 0 ||
            cursor.text[cursor.pos] == '_')) {
      ++cursor.pos;
    }
    std::string name(cursor.text.substr(start, cursor.pos - start));
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (name.empty()) {
      if (!has_number) {
        return Error::make(ErrorKind::kConfig, "constraint '{}': expected a term at column {}",
                           text, start + 1);
      }
      constant += term_sign * factor;
      continue;
    }
    if (name == "sum") {
      for (double& coefficient : coefficients) coefficient += term_sign * factor;
      continue;
    }
    size_t digits = name.rfind("bw", 0) == 0 ? 2 : (name[0] == 'b' ? 1 : 0);
    size_t dim = 0;
    const char* begin = name.data() + digits;
    const char* end = name.data() + name.size();
    const auto [ptr, ec] = std::from_chars(begin, end, dim);
    if (digits == 0 || begin == end || ec != std::errc() || ptr != end) {
      return Error::make(ErrorKind::kConfig,
                         "constraint '{}': unknown term '{}' (expected B0..B{}, sum or a number)",
                         text, name, dims - 1);
    }
    if (dim >= dims) {
      return Error::make(ErrorKind::kConfig,
                         "constraint '{}': B{} but the network has {} dimensions (B0..B{})", text,
                         dim, dims, dims - 1);
    }
    coefficients[dim] += term_sign * factor;
  }
}

}  // namespace

Expected<LinearConstraint> parse_constraint(std::string_view text, size_t dims) {
  LinearConstraint constraint;
  constraint.text = std::string(text);
  constraint.coefficients.assign(dims, 0.0);
  Cursor cursor{text};
  double constant = 0;
  if (Status s = parse_side(cursor, 1.0, dims, constraint.coefficients, constant, text); !s) {
    return s.error();
  }
  cursor.skip();
  const std::string_view rest = text.substr(cursor.pos);
  size_t width = 0;
  if (rest.rfind("<=", 0) == 0) {
    constraint.relation = Relation::kLessEqual;
    width = 2;
  } else if (rest.rfind(">=", 0) == 0) {
    constraint.relation = Relation::kGreaterEqual;
    width = 2;
  } else if (rest.rfind("==", 0) == 0) {
    constraint.relation = Relation::kEqual;
    width = 2;
  } else if (rest.rfind('=', 0) == 0) {
    constraint.relation = Relation::kEqual;
    width = 1;
  } else {
    return Error::make(ErrorKind::kConfig, "constraint '{}': expected <=, >= or = at column {}",
                       text, cursor.pos + 1);
  }
  cursor.pos += width;
  if (Status s = parse_side(cursor, -1.0, dims, constraint.coefficients, constant, text); !s) {
    return s.error();
  }
  if (!cursor.done()) {
    return Error::make(ErrorKind::kConfig,
                       "constraint '{}': unexpected '{}' at column {} (one relation per "
                       "constraint; write a chain as two constraints)",
                       text, text.substr(cursor.pos), cursor.pos + 1);
  }
  constraint.rhs = -constant;
  bool any = false;
  for (double c : constraint.coefficients) any = any || c != 0;
  if (!any) {
    return Error::make(ErrorKind::kConfig, "constraint '{}' does not involve any bandwidth", text);
  }
  return constraint;
}

Expected<std::vector<Dimension>> load_libra_network(const std::string& path) {
  Expected<YAML::Node> root = read_yaml(path);
  if (!root) return root.error();
  if (!root->IsMap()) return Error::make(ErrorKind::kConfig, "{}: expected a YAML mapping", path);
  const YAML::Node topology = (*root)["Topology"];
  const YAML::Node npus = (*root)["NpusCount"];
  const YAML::Node cost = (*root)["CostDimension"];
  if (!topology || !topology.IsSequence()) {
    return Error::make(ErrorKind::kConfig, "{}: missing 'Topology' list", path);
  }
  if (!npus || !npus.IsSequence() || npus.size() != topology.size()) {
    return Error::make(ErrorKind::kConfig, "{}: 'NpusCount' must list {} sizes, one per dimension",
                       path, topology.size());
  }
  if (cost && (!cost.IsSequence() || cost.size() != topology.size())) {
    return node_error(path, cost,
                      fmt::format("'CostDimension' must list {} names", topology.size()));
  }
  std::vector<Dimension> dims;
  for (size_t i = 0; i < topology.size(); ++i) {
    Dimension dim;
    if (!topology[i].IsScalar()) return node_error(path, topology[i], "topology must be a name");
    Expected<TopologyKind> kind = parse_topology(topology[i].Scalar());
    if (!kind)
      return kind.error().with_context(fmt::format("{}:{}", path, yaml_line(topology[i], 0)));
    dim.kind = *kind;
    Expected<double> size = as_number(path, npus[i], "NpusCount");
    if (!size) return size.error();
    if (*size < 2 || *size != std::floor(*size) || *size > 1e9) {
      return node_error(path, npus[i],
                        fmt::format("dimension {} size {} (expected >= 2)", i, *size));
    }
    dim.size = static_cast<uint32_t>(*size);
    if (cost) dim.cost_dimension = cost[i].Scalar();
    dims.push_back(dim);
  }
  return dims;
}

Expected<std::vector<Layer>> load_libra_workload(const std::string& path) {
  Expected<std::string> text = read_text_file(path);
  if (!text) return text.error();
  std::vector<Layer> layers;
  std::istringstream lines(*text);
  std::string line;
  size_t number = 0;
  while (std::getline(lines, line)) {
    ++number;
    std::istringstream fields_in(line);
    std::vector<std::string> fields;
    for (std::string field; fields_in >> field;) fields.push_back(field);
    if (fields.empty()) continue;
    if (fields.size() != 12) {
      return Error::make(ErrorKind::kParse,
                         "{}:{}: {} fields, expected 12 (name, -1, then compute ns, collective, "
                         "bytes for forward, input gradient and weight gradient, then update time)",
                         path, number, fields.size());
    }
    Layer layer;
    layer.name = fields[0];
    for (size_t phase = 0; phase < 3; ++phase) {
      const size_t base = 2 + 3 * phase;
      Phase& p = layer.phases[phase];
      for (size_t k : {base, base + 2}) {
        char* end = nullptr;
        const double value = std::strtod(fields[k].c_str(), &end);
        if (*end != '\0' || !std::isfinite(value) || value < 0) {
          return Error::make(ErrorKind::kParse, "{}:{}: field {} is '{}', expected a number >= 0",
                             path, number, k + 1, fields[k]);
        }
        (k == base ? p.compute_ns : p.bytes) = value;
      }
      Expected<CollectiveKind> kind = parse_collective(fields[base + 1]);
      if (!kind) return kind.error().with_context(fmt::format("{}:{}", path, number));
      p.collective = *kind;
    }
    layers.push_back(std::move(layer));
  }
  if (layers.empty()) return Error::make(ErrorKind::kParse, "{}: no layers", path);
  return layers;
}

Expected<std::array<std::vector<int32_t>, 3>> load_libra_communicator(const std::string& path) {
  Expected<YAML::Node> root = read_yaml(path);
  if (!root) return root.error();
  if (!root->IsMap()) return Error::make(ErrorKind::kConfig, "{}: expected a YAML mapping", path);
  std::array<std::vector<int32_t>, 3> groups;
  static constexpr const char* kKeys[] = {"Forward", "InputGrad", "WeightGrad"};
  for (size_t phase = 0; phase < 3; ++phase) {
    const YAML::Node node = (*root)[kKeys[phase]];
    if (!node) return Error::make(ErrorKind::kConfig, "{}: missing '{}'", path, kKeys[phase]);
    Expected<std::vector<int32_t>> list = as_groups(path, node, kKeys[phase]);
    if (!list) return list.error();
    groups[phase] = std::move(*list);
  }
  return groups;
}

Expected<std::vector<std::pair<std::string, UnitCosts>>> load_libra_cost_model(
    const std::string& path) {
  Expected<YAML::Node> root = read_yaml(path);
  if (!root) return root.error();
  if (!root->IsMap()) return Error::make(ErrorKind::kConfig, "{}: expected a YAML mapping", path);
  std::vector<std::pair<std::string, UnitCosts>> model;
  for (const auto& entry : *root) {
    const std::string name = entry.first.Scalar();
    if (!entry.second.IsMap()) {
      return node_error(path, entry.second,
                        fmt::format("cost dimension '{}' must map Link/Switch/Nic to costs", name));
    }
    UnitCosts unit;
    for (const auto& item : entry.second) {
      const std::string key = item.first.Scalar();
      Expected<double> value = as_number(path, item.second, key);
      if (!value) return value.error();
      if (!(*value > 0)) {
        return node_error(path, item.second,
                          fmt::format("'{}' cost {} (expected > 0)", key, *value));
      }
      if (key == "Link") {
        unit.link = *value;
      } else if (key == "Switch") {
        unit.switch_ = *value;
      } else if (key == "Nic") {
        unit.nic = *value;
      } else {
        return node_error(
            path, item.first,
            fmt::format("unknown cost element '{}' (expected Link, Switch, Nic)", key));
      }
    }
    model.emplace_back(name, unit);
  }
  return model;
}

void apply_communicator(const std::array<std::vector<int32_t>, 3>& groups,
                        std::vector<Layer>& layers) {
  for (Layer& layer : layers) {
    for (size_t phase = 0; phase < 3; ++phase) {
      if (layer.phases[phase].groups.empty()) layer.phases[phase].groups = groups[phase];
    }
  }
}

Expected<Problem> load_problem(const std::string& path) {
  Expected<YAML::Node> loaded = read_yaml(path);
  if (!loaded) return loaded.error();
  const YAML::Node root = *loaded;
  if (!root.IsMap()) return Error::make(ErrorKind::kConfig, "{}: expected a mapping", path);
  for (const auto& entry : root) {
    static const std::vector<std::string> kKnown = {"network",    "workload",    "communicator",
                                                    "cost_model", "constraints", "objective",
                                                    "budget",     "baseline",    "name"};
    const std::string key = entry.first.Scalar();
    if (std::find(kKnown.begin(), kKnown.end(), key) == kKnown.end()) {
      return node_error(path, entry.first,
                        fmt::format("unknown key '{}' (expected network, workload, communicator, "
                                    "cost_model, constraints, objective, budget, baseline, name)",
                                    key));
    }
  }
  Problem problem;
  if (root["name"]) problem.workload_name = root["name"].Scalar();

  const YAML::Node network = root["network"];
  if (!network) return Error::make(ErrorKind::kConfig, "{}: missing 'network'", path);
  if (network.IsScalar()) {
    Expected<std::vector<Dimension>> dims = load_libra_network(resolve(path, network.Scalar()));
    if (!dims) return dims.error();
    problem.dimensions = std::move(*dims);
  } else if (network.IsSequence()) {
    for (const YAML::Node& item : network) {
      if (!item.IsMap() || !item["topology"] || !item["size"]) {
        return node_error(path, item, "a dimension needs 'topology' and 'size'");
      }
      Dimension dim;
      Expected<TopologyKind> kind = parse_topology(item["topology"].Scalar());
      if (!kind) return kind.error().with_context(fmt::format("{}:{}", path, yaml_line(item, 0)));
      dim.kind = *kind;
      Expected<double> size = as_number(path, item["size"], "size");
      if (!size) return size.error();
      if (*size < 2 || *size != std::floor(*size) || *size > 1e9) {
        return node_error(path, item["size"], fmt::format("size {} (expected >= 2)", *size));
      }
      dim.size = static_cast<uint32_t>(*size);
      if (item["cost_dimension"]) dim.cost_dimension = item["cost_dimension"].Scalar();
      problem.dimensions.push_back(dim);
    }
  } else {
    return node_error(path, network, "'network' must be a file name or a list of dimensions");
  }
  const size_t dims = problem.dimensions.size();

  const YAML::Node workload = root["workload"];
  if (!workload) return Error::make(ErrorKind::kConfig, "{}: missing 'workload'", path);
  if (workload.IsScalar()) {
    const std::string file = resolve(path, workload.Scalar());
    Expected<std::vector<Layer>> layers = load_libra_workload(file);
    if (!layers) return layers.error();
    problem.layers = std::move(*layers);
    if (problem.workload_name.empty()) {
      problem.workload_name = std::filesystem::path(file).stem().string();
    }
  } else if (workload.IsSequence()) {
    static constexpr const char* kPhases[] = {"forward", "input_grad", "weight_grad"};
    for (const YAML::Node& item : workload) {
      if (!item.IsMap()) return node_error(path, item, "a layer must be a mapping");
      Layer layer;
      layer.name =
          item["name"] ? item["name"].Scalar() : fmt::format("layer{}", problem.layers.size());
      for (size_t phase = 0; phase < 3; ++phase) {
        const YAML::Node node = item[kPhases[phase]];
        if (!node) continue;
        if (!node.IsMap()) {
          return node_error(path, node, fmt::format("'{}' must be a mapping", kPhases[phase]));
        }
        Phase& p = layer.phases[phase];
        if (node["compute_ns"]) {
          Expected<double> v = as_number(path, node["compute_ns"], "compute_ns");
          if (!v) return v.error();
          p.compute_ns = *v;
        }
        if (node["collective"]) {
          Expected<CollectiveKind> kind = parse_collective(node["collective"].Scalar());
          if (!kind) {
            return kind.error().with_context(
                fmt::format("{}:{}", path, yaml_line(node["collective"], 0)));
          }
          p.collective = *kind;
        }
        if (node["bytes"]) {
          Expected<double> v = as_number(path, node["bytes"], "bytes");
          if (!v) return v.error();
          p.bytes = *v;
        }
        if (node["groups"]) {
          Expected<std::vector<int32_t>> g = as_groups(path, node["groups"], "groups");
          if (!g) return g.error();
          if (g->size() != dims) {
            return node_error(path, node["groups"],
                              fmt::format("{} group sizes for {} dimensions", g->size(), dims));
          }
          p.groups = std::move(*g);
        }
      }
      problem.layers.push_back(std::move(layer));
    }
  } else if (workload.IsMap()) {
    // Derived later, once the network is final (libra_workload.h).
    WorkloadSource source;
    source.where = fmt::format("{}:{}", path, yaml_line(workload, 0));
    for (const auto& entry : workload) {
      const std::string key = entry.first.Scalar();
      const YAML::Node value = entry.second;
      if (key == "trace") {
        source.trace = resolve(path, value.Scalar());
      } else if (key == "groups") {
        source.groups = resolve(path, value.Scalar());
      } else if (key == "system") {
        source.system = resolve(path, value.Scalar());
      } else if (key == "rank") {
        Expected<double> rank = as_number(path, value, "rank");
        if (!rank) return rank.error();
        if (*rank < 0 || *rank != std::floor(*rank) || *rank > 4e9) {
          return node_error(path, value, fmt::format("rank {} (expected a rank number)", *rank));
        }
        source.rank = static_cast<uint32_t>(*rank);
      } else if (key == "llm") {
        if (!value.IsMap()) {
          return node_error(path, value,
                            "'llm' must be a mapping of orrery gen llm options (model, tp, ...)");
        }
        for (const auto& option : value) {
          if (!option.second.IsScalar()) {
            return node_error(path, option.second, "an orrery gen llm option takes one value");
          }
          gen::LlmOptions check;  // names and values checked here, so errors get the line
          const std::string name = option.first.Scalar();
          if (Status st = gen::set_llm_option(check, name, option.second.Scalar()); !st) {
            return st.error().with_context(fmt::format("{}:{}", path, yaml_line(option.first, 0)));
          }
          source.llm.emplace_back(name, option.second.Scalar());
        }
      } else {
        return node_error(path, entry.first,
                          fmt::format("unknown key '{}' in 'workload' (expected trace, groups, "
                                      "llm, rank, system)",
                                      key));
      }
    }
    if (source.trace.empty() == source.llm.empty()) {
      return node_error(path, workload,
                        "'workload' as a mapping needs exactly one of 'trace' (a Chakra trace "
                        "set) and 'llm' (orrery gen llm options)");
    }
    if (!source.llm.empty() && !source.groups.empty()) {
      return node_error(path, workload, "'groups' belongs to a trace; a plan has its own groups");
    }
    if (problem.workload_name.empty()) {
      problem.workload_name = source.trace.empty()
                                  ? "llm plan"
                                  : std::filesystem::path(source.trace).filename().string();
    }
    problem.workload_source = std::move(source);
  } else {
    return node_error(path, workload,
                      "'workload' must be a file name, a list of layers, or a mapping with "
                      "'trace' or 'llm'");
  }

  if (const YAML::Node communicator = root["communicator"]) {
    if (problem.workload_source) {
      return node_error(path, communicator,
                        "'communicator' gives LIBRA layers their groups; a workload derived from "
                        "a trace or a plan takes its groups from there");
    }
    std::array<std::vector<int32_t>, 3> groups;
    if (communicator.IsScalar()) {
      Expected<std::array<std::vector<int32_t>, 3>> g =
          load_libra_communicator(resolve(path, communicator.Scalar()));
      if (!g) return g.error();
      groups = std::move(*g);
    } else if (communicator.IsMap()) {
      static constexpr const char* kPhases[] = {"forward", "input_grad", "weight_grad"};
      for (size_t phase = 0; phase < 3; ++phase) {
        if (!communicator[kPhases[phase]]) continue;
        Expected<std::vector<int32_t>> g =
            as_groups(path, communicator[kPhases[phase]], kPhases[phase]);
        if (!g) return g.error();
        groups[phase] = std::move(*g);
      }
    } else {
      return node_error(path, communicator, "'communicator' must be a file name or a mapping");
    }
    for (const auto& g : groups) {
      if (!g.empty() && g.size() != dims) {
        return node_error(
            path, communicator,
            fmt::format("communicator has {} group sizes for {} dimensions", g.size(), dims));
      }
    }
    apply_communicator(groups, problem.layers);
  }

  if (const YAML::Node cost = root["cost_model"]) {
    if (cost.IsScalar()) {
      auto model = load_libra_cost_model(resolve(path, cost.Scalar()));
      if (!model) return model.error();
      problem.cost_model = std::move(*model);
    } else if (cost.IsMap()) {
      for (const auto& entry : cost) {
        UnitCosts unit;
        for (const auto& item : entry.second) {
          const std::string key = item.first.Scalar();
          Expected<double> value = as_number(path, item.second, key);
          if (!value) return value.error();
          if (key == "Link") {
            unit.link = *value;
          } else if (key == "Switch") {
            unit.switch_ = *value;
          } else if (key == "Nic") {
            unit.nic = *value;
          } else {
            return node_error(path, item.first, fmt::format("unknown cost element '{}'", key));
          }
        }
        problem.cost_model.emplace_back(entry.first.Scalar(), unit);
      }
    } else {
      return node_error(path, cost, "'cost_model' must be a file name or a mapping");
    }
  }

  if (const YAML::Node constraints = root["constraints"]) {
    if (!constraints.IsSequence()) {
      return node_error(path, constraints, "'constraints' must be a list of strings");
    }
    for (const YAML::Node& item : constraints) {
      Expected<LinearConstraint> c = parse_constraint(item.Scalar(), dims);
      if (!c) return c.error().with_context(fmt::format("{}:{}", path, yaml_line(item, 0)));
      problem.constraints.push_back(std::move(*c));
    }
  }
  if (const YAML::Node objective = root["objective"]) {
    Expected<Objective> o = parse_objective(objective.Scalar());
    if (!o) return o.error().with_context(fmt::format("{}:{}", path, yaml_line(objective, 0)));
    problem.objective = *o;
  }
  if (const YAML::Node budget = root["budget"]) {
    Expected<double> b = as_number(path, budget, "budget");
    if (!b) return b.error();
    if (!in_range(*b, 0.0, kMaxLibraNumber)) {
      return node_error(path, budget,
                        fmt::format("'budget': {}", range_message(*b, 0.0, kMaxLibraNumber, "$")));
    }
    problem.budget = *b;
  }
  if (const YAML::Node baseline = root["baseline"]) {
    if (!baseline.IsSequence() || baseline.size() != dims) {
      return node_error(path, baseline, fmt::format("'baseline' must list {} bandwidths", dims));
    }
    for (const YAML::Node& item : baseline) {
      Expected<double> b = as_number(path, item, "baseline");
      if (!b) return b.error();
      if (!in_range(*b, kMinGbps, kMaxGbps)) {
        return node_error(
            path, item,
            fmt::format("'baseline': {}", range_message(*b, kMinGbps, kMaxGbps, "GB/s")));
      }
      problem.baseline.push_back(*b);
    }
  }
  return problem;
}

}  // namespace orrery::design
