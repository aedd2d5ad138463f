// python/module.cpp: the `orrery` Python module's native part (`orrery._orrery`), pybind11 over
// the same libraries as the orrery executable.
//
// What Python sees is in python/orrery/__init__.py, which wraps these types. Every library error
// becomes an orrery.Error carrying the message the command line prints. Simulations release the
// GIL while they run, so Python threads run them in parallel; a Scenario and the TraceSet it holds
// are immutable and shared, never copied, by the scenarios made from them.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "chakra/comm_groups.h"
#include "chakra/trace_file.h"
#include "chakra/trace_set.h"
#include "core/text_file.h"
#include "core/units.h"
#include "design/libra_input.h"
#include "design/libra_model.h"
#include "design/libra_report.h"
#include "design/libra_solver.h"
#include "gen/dlrm_generator.h"
#include "gen/inference_generator.h"
#include "gen/llm_options.h"
#include "gen/microbench.h"
#include "gen/rank_program.h"
#include "network/backend_registry.h"
#include "network/graph_yaml.h"
#include "report/run_report.h"
#include "sim/scenario.h"
#include "sim/simulation.h"

namespace py = pybind11;

namespace orrery::python {
namespace {

// The Python exception type for every orrery error (orrery.Error, a RuntimeError).
class OrreryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void raise(const Error& error) { throw OrreryError(error.message()); }

// `value` as a T, or an orrery.Error naming the argument: pybind11's own failure is a bare
// "Unable to cast Python instance to C++ type".
template <typename T>
T cast_arg(const py::handle& value, std::string_view name, std::string_view expected) {
  try {
    return value.template cast<T>();
  } catch (const py::cast_error&) {
    raise(Error::make(ErrorKind::kInvalidArgument, "{}: expected {}, found {} {}", name, expected,
                      py::str(py::type::of(value).attr("__name__")).cast<std::string>(),
                      py::repr(value).cast<std::string>()));
  }
}

template <typename T>
T unwrap(Expected<T> value) {
  if (!value) raise(value.error());
  return std::move(*value);
}

void check(const Status& status) {
  if (!status) raise(status.error());
}

std::string read_file(const std::string& path) {
  Expected<std::string> text = read_text_file(path);
  if (!text) raise(text.error());
  return std::move(*text);
}

// A Python dict (or list) as JSON text, through the json module: what a file would hold.
std::string to_json_text(const py::handle& value) {
  return py::module_::import("json").attr("dumps")(value).cast<std::string>();
}

// ---- trace sets ----

// A trace set and the communicator groups that came with it (a generator's), and for a
// generated set the way to write it as files.
struct PyTraceSet {
  std::shared_ptr<const chakra::TraceSet> traces;
  std::shared_ptr<const chakra::CommGroups> groups;
  std::function<Status(const std::string& prefix)> writer;  // empty for a set read from files
};

// One attribute as the Python value it holds (int, float, bool, str or a list of them).
py::object attribute_value(const chakra::TraceGraph& graph, chakra::NodeIndex node,
                           const chakra::Attribute& attribute) {
  using VC = chakra::ValueCase;
  const std::string_view name = graph.attribute_name(attribute);
  switch (attribute.value_case) {
    case VC::VALUE_NOT_SET:
      return py::none();
    case VC::kStringVal:
    case VC::kBytesVal:
      return py::str(std::string(graph.get_string(node, name).value().value()));
    case VC::kDoubleVal:
    case VC::kFloatVal:
      return py::float_(attribute.d);
    case VC::kBoolVal:
      return py::bool_(attribute.i != 0);
    case VC::kUint32Val:
    case VC::kUint64Val:
    case VC::kFixed32Val:
    case VC::kFixed64Val:
      return py::int_(attribute.u);
    case VC::kStringList:
    case VC::kBytesList: {
      const std::vector<std::string_view> texts = graph.get_string_list(node, name).value().value();
      py::list out;
      for (std::string_view text : texts) out.append(py::str(std::string(text)));
      return out;
    }
    case VC::kDoubleList:
    case VC::kFloatList:
      return py::cast(graph.get_double_list(node, name).value().value());
    case VC::kBoolList: {
      const std::vector<bool> values = graph.get_bool_list(node, name).value().value();
      py::list out;
      for (const bool value : values) out.append(value);
      return out;
    }
    default:
      break;
  }
  if (Expected<std::optional<std::vector<int64_t>>> list = graph.get_int_list(node, name); list) {
    return py::cast(list->value());
  }
  return py::int_(attribute.i);
}

py::list trace_nodes(const PyTraceSet& set, uint32_t rank) {
  if (rank >= set.traces->rank_count()) {
    raise(Error::make(ErrorKind::kInvalidArgument, "rank {}: the trace set has {} rank(s)", rank,
                      set.traces->rank_count()));
  }
  const chakra::TraceGraph& graph = set.traces->rank_graph(rank);
  py::list nodes;
  for (chakra::NodeIndex node = 0; node < graph.size(); ++node) {
    py::dict entry;
    entry["id"] = graph.id(node);
    entry["name"] = std::string(graph.name(node));
    entry["type"] = chakra::node_type_name(graph.type(node));
    entry["duration_micros"] = graph.duration_micros(node);
    const auto data = graph.data_deps(node);
    const auto ctrl = graph.ctrl_deps(node);
    entry["data_deps"] = std::vector<uint64_t>(data.begin(), data.end());
    entry["ctrl_deps"] = std::vector<uint64_t>(ctrl.begin(), ctrl.end());
    py::dict attrs;
    for (const chakra::Attribute& attribute : graph.attributes(node)) {
      attrs[py::str(std::string(graph.attribute_name(attribute)))] =
          attribute_value(graph, node, attribute);
    }
    entry["attrs"] = std::move(attrs);
    nodes.append(std::move(entry));
  }
  return nodes;
}

PyTraceSet load_traces(const std::string& path, bool uniform, size_t threads) {
  chakra::TraceSetOptions options;
  options.uniform = uniform;
  options.threads = threads;
  PyTraceSet set;
  {
    py::gil_scoped_release release;
    Expected<std::shared_ptr<const chakra::TraceSet>> loaded =
        chakra::TraceSet::load(path, options);
    if (!loaded) {
      py::gil_scoped_acquire acquire;
      raise(loaded.error());
    }
    set.traces = std::move(*loaded);
  }
  return set;
}

gen::RankFileOptions file_options(const std::string& generator, size_t threads) {
  gen::RankFileOptions options;
  options.threads = threads;
  options.generator = generator;
  return options;
}

// Builds a generated set in memory, the GIL released; `write` writes the same set as files.
template <typename Build, typename Write>
PyTraceSet generated(Build build, Write write) {
  PyTraceSet set;
  Expected<gen::BuiltTraces> built = [&] {
    py::gil_scoped_release release;
    return build();
  }();
  if (!built) raise(built.error());
  set.traces = std::move(built->traces);
  set.groups = std::move(built->groups);
  set.writer = [write](const std::string& prefix) -> Status {
    Expected<gen::GeneratedTraces> written = write(prefix);
    return written ? Status::ok() : Status(written.error());
  };
  return set;
}

PyTraceSet gen_llm(const py::kwargs& kwargs) {
  gen::LlmOptions options;
  size_t threads = 0;
  for (const auto& [key, value] : kwargs) {
    const std::string name = key.cast<std::string>();
    if (name == "threads") {
      threads = value.cast<size_t>();
      continue;
    }
    std::string text;
    if (py::isinstance<py::bool_>(value)) {
      text = value.cast<bool>() ? "true" : "false";
    } else {
      text = py::str(value).cast<std::string>();
    }
    check(gen::set_llm_option(options, name, text));
  }
  if (options.model.empty()) {
    raise(Error::make(ErrorKind::kInvalidArgument,
                      "gen.llm needs model= (a preset such as gpt3-175b, or a JSON model file)"));
  }
  auto generator = std::make_shared<gen::LlmGenerator>(unwrap(gen::make_llm_generator(options)));
  const gen::RankFileOptions files = file_options("orrery.gen.llm", threads);
  return generated([&] { return gen::build_llm_traces(*generator, options.model, files); },
                   [generator, files](const std::string& prefix) {
                     return gen::write_llm_traces(*generator, prefix, files);
                   });
}

PyTraceSet gen_microbench(const std::string& kind, const std::string& size, uint32_t ranks,
                          uint64_t compute_us) {
  gen::MicrobenchSpec spec;
  spec.kind = unwrap(gen::parse_microbench_kind(kind));
  spec.bytes = unwrap(parse_bytes(size));
  spec.ranks = ranks;
  spec.compute_us = compute_us;
  PyTraceSet set;
  set.traces = unwrap(gen::build_microbench(spec, fmt::format("{} {}", kind, size)));
  set.writer = [spec](const std::string& prefix) -> Status {
    Expected<std::vector<std::string>> written = gen::write_microbench(spec, prefix);
    return written ? Status::ok() : Status(written.error());
  };
  return set;
}

PyTraceSet gen_dlrm(const std::string& model_name, uint32_t ranks, uint64_t global_batch,
                    const std::string& sharding, size_t threads) {
  gen::DlrmPlan plan;
  plan.ranks = ranks;
  plan.global_batch = global_batch;
  plan.sharding = unwrap(gen::parse_sharding(sharding));
  gen::DlrmModel model = unwrap(gen::resolve_dlrm_model(model_name));
  auto generator = std::make_shared<gen::DlrmGenerator>(
      unwrap(gen::DlrmGenerator::create(std::move(model), plan)));
  const gen::RankFileOptions files = file_options("orrery.gen.dlrm", threads);
  return generated([&] { return gen::build_dlrm_traces(*generator, model_name, files); },
                   [generator, files](const std::string& prefix) {
                     return gen::write_dlrm_traces(*generator, prefix, files);
                   });
}

PyTraceSet gen_inference(const std::string& model_name, uint32_t tp, uint32_t pp,
                         std::vector<uint32_t> prompt_lengths, std::vector<uint32_t> output_lengths,
                         uint32_t micro_batches, size_t threads) {
  gen::InferencePlan plan;
  plan.tp = tp;
  plan.pp = pp;
  plan.prompt_lengths = std::move(prompt_lengths);
  plan.output_lengths = std::move(output_lengths);
  plan.micro_batches = micro_batches;
  gen::TransformerModel model = unwrap(gen::resolve_model(model_name));
  auto generator = std::make_shared<gen::InferenceGenerator>(
      unwrap(gen::InferenceGenerator::create(std::move(model), plan)));
  const gen::RankFileOptions files = file_options("orrery.gen.inference", threads);
  return generated([&] { return gen::build_inference_traces(*generator, model_name, files); },
                   [generator, files](const std::string& prefix) {
                     return gen::write_inference_traces(*generator, prefix, files);
                   });
}

// ---- scenarios ----

// A scenario and the texts it was made from, so that replace() can change a key of the system or
// a dimension of the network and build the new scenario without touching the traces.
struct PyScenario {
  std::shared_ptr<const sim::Scenario> scenario;
  nlohmann::ordered_json system;  // the system configuration, as its file says
  std::string system_name;
};

sim::RunSettings settings_from(const py::kwargs& kwargs, sim::RunSettings settings,
                               const std::vector<std::string>& skip) {
  for (const auto& [key, value] : kwargs) {
    const std::string name = key.cast<std::string>();
    if (std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
    auto as = [&name, value = value]<typename T>(std::type_identity<T>, const char* expected) {
      return cast_arg<T>(value, name, expected);
    };
    if (name == "backend") {
      settings.backend = as(std::type_identity<std::string>{}, "a backend name");
    } else if (name == "timing") {
      const std::string timing = as(std::type_identity<std::string>{}, "astra-sim or exact");
      if (timing != "astra-sim" && timing != "exact") {
        raise(Error::make(ErrorKind::kInvalidArgument, "timing '{}': expected astra-sim or exact",
                          timing));
      }
      settings.backend_options.rounding =
          timing == "exact" ? net::TimeRounding::kExact : net::TimeRounding::kAstraSim;
    } else if (name == "strict") {
      settings.mode = as(std::type_identity<bool>{}, "a bool") ? chakra::ValidationMode::kStrict
                                                               : chakra::ValidationMode::kLenient;
    } else if (name == "fast_path") {
      // True or False, or the command line's "auto" and "off".
      if (py::isinstance<py::str>(value)) {
        const std::string mode = value.cast<std::string>();
        if (mode != "auto" && mode != "off") {
          raise(Error::make(ErrorKind::kInvalidArgument,
                            "fast_path '{}': expected True, False, 'auto' or 'off'", mode));
        }
        settings.fast_path = mode == "auto";
      } else {
        settings.fast_path = as(std::type_identity<bool>{}, "True, False, 'auto' or 'off'");
      }
    } else if (name == "compute_scale") {
      settings.compute_scale = as(std::type_identity<double>{}, "a number");
    } else if (name == "comm_scale") {
      settings.comm_scale = as(std::type_identity<double>{}, "a number");
    } else if (name == "injection_scale") {
      settings.injection_scale = as(std::type_identity<double>{}, "a number");
    } else if (name == "queues_per_dim") {
      settings.queues_per_dim = as(std::type_identity<uint32_t>{}, "a whole number");
    } else if (name == "memory_capacity") {
      settings.memory_capacity = py::isinstance<py::str>(value)
                                     ? unwrap(parse_bytes(value.cast<std::string>()))
                                     : as(std::type_identity<uint64_t>{}, "bytes or '80GiB'");
    } else if (name == "threads") {
      settings.threads = as(std::type_identity<size_t>{}, "a whole number");
    } else if (name == "roce") {
      settings.backend_options.roce =
          py::isinstance<py::str>(value)
              ? unwrap(net::load_roce_config(as(std::type_identity<std::string>{}, "a path")))
              : unwrap(net::parse_roce_config(to_json_text(value), "roce configuration"));
    } else {
      raise(Error::make(ErrorKind::kInvalidArgument,
                        "unknown scenario option '{}' (expected backend, timing, strict, "
                        "fast_path, compute_scale, comm_scale, injection_scale, "
                        "queues_per_dim, memory_capacity, threads, roce{})",
                        name, skip.empty() ? "" : ", " + fmt::format("{}", fmt::join(skip, ", "))));
    }
  }
  return settings;
}

// A perturbation (sim/perturbation.h) from a YAML path or a dict of its keys; None: none.
std::shared_ptr<const sim::Perturbation> perturbation_from(const py::object& value) {
  if (value.is_none()) return nullptr;
  if (py::isinstance<py::str>(value)) {
    return std::make_shared<const sim::Perturbation>(
        unwrap(sim::load_perturbation(value.cast<std::string>())));
  }
  // JSON is YAML: a dict is read by the file's reader, with its checks.
  return std::make_shared<const sim::Perturbation>(
      unwrap(sim::parse_perturbation(to_json_text(value), "perturbation")));
}

PyScenario finish_scenario(sim::Scenario::Inputs inputs, nlohmann::ordered_json system,
                           std::string system_name) {
  PyScenario out;
  out.scenario =
      std::make_shared<const sim::Scenario>(unwrap(sim::Scenario::create(std::move(inputs))));
  out.system = std::move(system);
  out.system_name = std::move(system_name);
  return out;
}

std::shared_ptr<const sys::SystemConfig> parse_system(const nlohmann::ordered_json& system,
                                                      const std::string& name) {
  return std::make_shared<const sys::SystemConfig>(
      unwrap(sys::parse_system_config(name, system.dump(2) + "\n")));
}

// A scenario from inputs that are each a path or in memory: workload a TraceSet or a trace path,
// system a path or a dict, network a path or a dict, comm_groups and memory a path, a dict or
// None.
PyScenario make_scenario(const py::object& workload, const py::object& system,
                         const py::object& network, const py::object& comm_groups,
                         const py::object& memory, const py::kwargs& kwargs) {
  sim::RunSettings settings = settings_from(kwargs, sim::RunSettings{}, {"uniform", "perturb"});
  const bool uniform =
      kwargs.contains("uniform") && cast_arg<bool>(kwargs["uniform"], "uniform", "True or False");

  sim::Scenario::Inputs inputs;
  if (py::isinstance<py::str>(network)) {
    const std::string path = network.cast<std::string>();
    inputs.network =
        std::make_shared<const net::NetworkDescription>(unwrap(net::load_network_file(path)));
    inputs.network_name = path;
  } else {
    inputs.network = std::make_shared<const net::NetworkDescription>(
        unwrap(net::parse_network_yaml(to_json_text(network), "network")));
    inputs.network_name = "network";
  }
  const uint32_t ranks = inputs.network->logical.rank_count();

  std::string system_name = "system";
  std::string system_text;
  if (py::isinstance<py::str>(system)) {
    system_name = system.cast<std::string>();
    system_text = read_file(system_name);
  } else {
    system_text = to_json_text(system);
  }
  nlohmann::ordered_json system_json =
      nlohmann::ordered_json::parse(system_text, nullptr, /*allow_exceptions=*/false);
  // Parse through the system reader itself first, so a bad file gets its file:line message.
  inputs.system = std::make_shared<const sys::SystemConfig>(
      unwrap(sys::parse_system_config(system_name, system_text)));

  if (!memory.is_none()) {
    if (py::isinstance<py::str>(memory)) {
      inputs.memory = std::make_shared<const memory::RemoteMemoryConfig>(
          unwrap(memory::load_remote_memory_config(memory.cast<std::string>())));
    } else {
      inputs.memory = std::make_shared<const memory::RemoteMemoryConfig>(
          unwrap(memory::parse_remote_memory_config("memory", to_json_text(memory))));
    }
  }

  if (py::isinstance<PyTraceSet>(workload)) {
    const PyTraceSet& set = workload.cast<const PyTraceSet&>();
    inputs.traces = set.traces;
    inputs.comm_groups = set.groups;
  } else {
    chakra::TraceSetOptions options;
    options.uniform = uniform;
    options.max_ranks = ranks;
    options.threads = settings.threads;
    const std::string path =
        cast_arg<std::string>(workload, "workload", "a trace prefix or an orrery.TraceSet");
    py::gil_scoped_release release;
    Expected<std::shared_ptr<const chakra::TraceSet>> loaded =
        chakra::TraceSet::load(path, options);
    py::gil_scoped_acquire acquire;
    inputs.traces = unwrap(std::move(loaded));
  }
  if (!comm_groups.is_none()) {
    auto groups = std::make_shared<chakra::CommGroups>(ranks);
    if (py::isinstance<py::str>(comm_groups)) {
      check(chakra::load_comm_group_file(comm_groups.cast<std::string>(), *groups));
    } else {
      check(chakra::parse_comm_group_text("comm_groups", to_json_text(comm_groups), *groups));
    }
    inputs.comm_groups = std::move(groups);
  }
  inputs.settings = std::move(settings);
  if (kwargs.contains("perturb")) inputs.perturbation = perturbation_from(kwargs["perturb"]);
  if (system_json.is_discarded()) system_json = nlohmann::ordered_json::object();
  return finish_scenario(std::move(inputs), std::move(system_json), std::move(system_name));
}

// The network with new bandwidths (GB/s) or latencies (ns) per dimension; ASTRA-sim networks only.
std::shared_ptr<const net::NetworkDescription> replace_dimensions(
    const net::NetworkDescription& network, const std::string& name, const py::object& bandwidth,
    const py::object& latency) {
  if (network.graph != nullptr) {
    raise(Error::make(ErrorKind::kInvalidArgument,
                      "{}: bandwidth and latency per dimension apply to ASTRA-sim networks; a "
                      "graph topology's links are its own",
                      name));
  }
  std::vector<net::Dimension> dims;
  for (uint32_t dim = 0; dim < network.logical.dimension_count(); ++dim) {
    dims.push_back(network.logical.dimension(dim));
  }
  auto values = [&](const py::object& list, const char* what) {
    std::vector<double> out = cast_arg<std::vector<double>>(list, what, "a list of numbers");
    if (out.size() != dims.size()) {
      raise(Error::make(ErrorKind::kInvalidArgument,
                        "{}: {} values for a network of {} dimension(s)", what, out.size(),
                        dims.size()));
    }
    return out;
  };
  if (!bandwidth.is_none()) {
    const std::vector<double> gbps = values(bandwidth, "bandwidth");
    for (size_t dim = 0; dim < dims.size(); ++dim) {
      if (!(gbps[dim] > 0) || gbps[dim] > 1e9) {
        raise(Error::make(ErrorKind::kInvalidArgument,
                          "bandwidth of dimension {}: {} GB/s (expected above 0 and at most 1e9)",
                          dim, gbps[dim]));
      }
      dims[dim].bandwidth =
          net::Bandwidth::from_nano_gbps(static_cast<uint64_t>(std::llround(gbps[dim] * 1e9)));
    }
  }
  if (!latency.is_none()) {
    const std::vector<double> ns = values(latency, "latency");
    for (size_t dim = 0; dim < dims.size(); ++dim) {
      if (!(ns[dim] >= 0) || ns[dim] > 1e12) {
        raise(Error::make(ErrorKind::kInvalidArgument,
                          "latency of dimension {}: {} ns (expected 0 to 1e12)", dim, ns[dim]));
      }
      dims[dim].latency = SimTime::from_ps(std::llround(ns[dim] * 1000.0));
    }
  }
  net::NetworkDescription changed{unwrap(net::Topology::create(std::move(dims))), nullptr, {}};
  return std::make_shared<const net::NetworkDescription>(std::move(changed));
}

PyScenario replace_scenario(const PyScenario& base, const py::kwargs& kwargs) {
  sim::Scenario::Inputs inputs = base.scenario->inputs();
  nlohmann::ordered_json system = base.system;
  const std::vector<std::string> own = {"bandwidth", "latency",     "system",
                                        "workload",  "comm_groups", "perturb"};
  inputs.settings = settings_from(kwargs, inputs.settings, own);
  const py::object none = py::none();
  const py::object bandwidth = kwargs.contains("bandwidth") ? kwargs["bandwidth"] : none;
  const py::object latency = kwargs.contains("latency") ? kwargs["latency"] : none;
  if (!bandwidth.is_none() || !latency.is_none()) {
    inputs.network = replace_dimensions(*inputs.network, inputs.network_name, bandwidth, latency);
  }
  if (kwargs.contains("system")) {
    // Keys of ASTRA-sim's system file, merged over the current ones ("all-reduce-implementation":
    // [...], "preferred-dataset-splits": 8, ...).
    const nlohmann::ordered_json changes = nlohmann::ordered_json::parse(
        to_json_text(kwargs["system"]), nullptr, /*allow_exceptions=*/false);
    if (!changes.is_object()) {
      raise(
          Error::make(ErrorKind::kInvalidArgument, "system=: expected a dict of system-file keys"));
    }
    for (const auto& [key, value] : changes.items()) system[key] = value;
    inputs.system = parse_system(system, base.system_name);
  }
  if (kwargs.contains("perturb")) inputs.perturbation = perturbation_from(kwargs["perturb"]);
  if (kwargs.contains("workload")) {
    const PyTraceSet& set =
        cast_arg<const PyTraceSet&>(kwargs["workload"], "workload", "an orrery.TraceSet");
    inputs.traces = set.traces;
    inputs.comm_groups = set.groups;
  }
  if (kwargs.contains("comm_groups")) {
    const py::object groups = kwargs["comm_groups"];
    if (groups.is_none()) {
      inputs.comm_groups = nullptr;
    } else {
      auto parsed = std::make_shared<chakra::CommGroups>(inputs.network->logical.rank_count());
      if (py::isinstance<py::str>(groups)) {
        check(chakra::load_comm_group_file(groups.cast<std::string>(), *parsed));
      } else {
        check(chakra::parse_comm_group_text("comm_groups", to_json_text(groups), *parsed));
      }
      inputs.comm_groups = std::move(parsed);
    }
  }
  return finish_scenario(std::move(inputs), std::move(system), base.system_name);
}

// ---- runs ----

// What a run returns to Python: the document `orrery run --output` writes, and the per-rank
// figures as arrays.
struct PyRunOutput {
  std::string json;
  int64_t finish_ns = 0;
  std::vector<std::string> warnings;
  py::dict ranks;
};

PyRunOutput run_scenario(const PyScenario& scenario) {
  Expected<sim::RunResult> result = [&] {
    py::gil_scoped_release release;
    return sim::simulate(*scenario.scenario);
  }();
  if (!result) raise(result.error());
  PyRunOutput out;
  out.finish_ns = result->end.ns_truncated();
  out.warnings = scenario.scenario->warnings();
  out.warnings.insert(out.warnings.end(), result->warnings.begin(), result->warnings.end());
  // wall_seconds: the simulation itself is what `orrery run` times too; Python reports 0 so that
  // the same inputs give the same document (docs/python.md).
  out.json = report::run_result_json_text(*result, 0.0);
  const size_t count = result->rank_results.size();
  auto column = [&](auto&& value) {
    py::array_t<int64_t> array(static_cast<py::ssize_t>(count));
    auto view = array.mutable_unchecked<1>();
    for (size_t rank = 0; rank < count; ++rank) {
      view(static_cast<py::ssize_t>(rank)) = value(result->rank_results[rank]);
    }
    return array;
  };
  using workload::RankResult;
  out.ranks["rank"] = column([](const RankResult& r) { return static_cast<int64_t>(r.rank); });
  out.ranks["finish_ns"] = column([](const RankResult& r) { return r.finish.ns_truncated(); });
  out.ranks["exposed_comm_ns"] =
      column([](const RankResult& r) { return r.astra_exposed_comm().ns_truncated(); });
  out.ranks["compute_ns"] =
      column([](const RankResult& r) { return r.gpu_compute.ns_truncated(); });
  out.ranks["cpu_ns"] = column([](const RankResult& r) { return r.cpu_compute.ns_truncated(); });
  out.ranks["comm_ns"] = column([](const RankResult& r) { return r.comm_active.ns_truncated(); });
  out.ranks["comm_not_overlapped_ns"] =
      column([](const RankResult& r) { return r.comm_exposed.ns_truncated(); });
  out.ranks["memory_ns"] = column([](const RankResult& r) { return r.memory.ns_truncated(); });
  out.ranks["idle_ns"] = column([](const RankResult& r) { return r.idle().ns_truncated(); });
  return out;
}

std::string libra_solve(const std::string& problem_path) {
  const design::Problem problem = unwrap(design::load_problem(problem_path));
  const design::TrafficModel model = unwrap(design::build_traffic_model(problem));
  design::Solution solution;
  {
    py::gil_scoped_release release;
    Expected<design::Solution> solved = design::solve(problem);
    py::gil_scoped_acquire acquire;
    solution = unwrap(std::move(solved));
  }
  return design::libra_json(problem, model, solution).dump();
}

}  // namespace
}  // namespace orrery::python

PYBIND11_MODULE(_orrery, m) {
  using namespace orrery;
  using namespace orrery::python;
  m.doc() = "orrery's native module; use the `orrery` package (docs/python.md)";
  py::register_exception<OrreryError>(m, "Error", PyExc_RuntimeError);
  // pybind11 initializes its NumPy bindings in a function-local static on first use; done there
  // from a pool thread, a second thread waiting on that static while holding the GIL deadlocks
  // with the first (which needs the GIL to import numpy). Initialize it here, single-threaded.
  (void)py::array_t<int64_t>(0);

  m.def("backends", [] {
    py::list out;
    for (const net::BackendInfo& info : net::backends()) {
      py::dict row;
      row["name"] = std::string(info.name);
      row["description"] = std::string(info.description);
      row["astra_networks"] = info.on_astra_networks;
      row["graphs"] = info.on_graphs;
      out.append(std::move(row));
    }
    return out;
  });

  py::class_<PyTraceSet>(m, "TraceSet")
      .def_property_readonly("name", [](const PyTraceSet& s) { return s.traces->name(); })
      .def_property_readonly("ranks", [](const PyTraceSet& s) { return s.traces->rank_count(); })
      .def_property_readonly("distinct_traces",
                             [](const PyTraceSet& s) { return s.traces->graph_count(); })
      .def_property_readonly("uniform", [](const PyTraceSet& s) { return s.traces->uniform(); })
      .def_property_readonly("memory_bytes",
                             [](const PyTraceSet& s) { return s.traces->memory_bytes(); })
      .def_property_readonly("groups",
                             [](const PyTraceSet& s) {
                               std::map<std::string, std::vector<uint32_t>> out;
                               if (s.groups) {
                                 for (const auto& [name, group] : s.groups->named()) {
                                   out[name] = group.ranks;
                                 }
                               }
                               return out;
                             })
      .def("nodes", &trace_nodes, py::arg("rank") = 0)
      .def(
          "write",
          [](const PyTraceSet& s, const std::string& prefix) {
            if (!s.writer) {
              raise(Error::make(ErrorKind::kInvalidArgument,
                                "{}: a trace set read from files is written already",
                                s.traces->name()));
            }
            Status status;
            {
              py::gil_scoped_release release;
              status = s.writer(prefix);
            }
            check(status);
          },
          py::arg("prefix"));

  m.def("load_traces", &load_traces, py::arg("path"), py::arg("uniform") = false,
        py::arg("threads") = 0);
  m.def("gen_llm", &gen_llm);
  m.def("gen_microbench", &gen_microbench, py::arg("kind"), py::arg("size"), py::arg("ranks"),
        py::arg("compute_us") = 0);
  m.def("gen_dlrm", &gen_dlrm, py::arg("model"), py::arg("ranks"), py::arg("global_batch"),
        py::arg("sharding") = "table", py::arg("threads") = 0);
  m.def("gen_inference", &gen_inference, py::arg("model"), py::arg("tp") = 1, py::arg("pp") = 1,
        py::arg("prompt_lengths") = std::vector<uint32_t>{512},
        py::arg("output_lengths") = std::vector<uint32_t>{128}, py::arg("micro_batches") = 1,
        py::arg("threads") = 0);

  py::class_<PyScenario>(m, "Scenario")
      .def_property_readonly("ranks", [](const PyScenario& s) { return s.scenario->rank_count(); })
      .def_property_readonly("backend",
                             [](const PyScenario& s) { return s.scenario->settings().backend; })
      .def_property_readonly("warnings", [](const PyScenario& s) { return s.scenario->warnings(); })
      .def_property_readonly("system", [](const PyScenario& s) { return s.system.dump(); })
      .def_property_readonly("bandwidth",
                             [](const PyScenario& s) {
                               std::vector<double> out;
                               const net::Topology& t = s.scenario->network().logical;
                               for (uint32_t d = 0; d < t.dimension_count(); ++d) {
                                 out.push_back(t.dimension(d).bandwidth.gbps());
                               }
                               return out;
                             })
      .def("replace", &replace_scenario);
  m.def("make_scenario", &make_scenario, py::arg("workload"), py::arg("system"), py::arg("network"),
        py::arg("comm_groups") = py::none(), py::arg("memory") = py::none());

  py::class_<PyRunOutput>(m, "RunOutput")
      .def_readonly("json", &PyRunOutput::json)
      .def_readonly("finish_ns", &PyRunOutput::finish_ns)
      .def_readonly("warnings", &PyRunOutput::warnings)
      .def_readonly("ranks", &PyRunOutput::ranks);
  m.def("run", &run_scenario, py::arg("scenario"));
  m.def("libra_solve", &libra_solve, py::arg("problem"));
}
