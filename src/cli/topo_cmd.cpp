// cli/topo_cmd.cpp: `orrery topo` builds, checks, summarizes and draws network topologies.
//
//   orrery topo generate GENERATOR [key=value ...] [-o FILE]   (--list: generators and parameters)
//   orrery topo validate FILE
//   orrery topo summarize FILE [--json]
//   orrery topo draw FILE [-o FILE.dot] [--max-nodes N]
// FILE is a graph topology file (docs/formats/topology.md) or an ASTRA-sim network file.
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "cli/commands.h"
#include "core/text_file.h"
#include "network/graph_summary.h"
#include "network/graph_yaml.h"

namespace orrery::cli {

namespace {

struct TopoOptions {
  std::string generator;
  std::vector<std::string> params;
  std::string file;
  std::string output;
  bool list = false;
  bool json = false;
  uint32_t max_nodes = 512;
};

Status write_text(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    fmt::print("{}", text);
    return {};
  }
  return write_text_file(path, text);
}

// The file as a graph: graph files directly, ASTRA-sim files materialized.
Expected<std::shared_ptr<const net::Graph>> load_graph(const std::string& file) {
  if (file.empty()) return Error::make(ErrorKind::kInvalidArgument, "missing FILE");
  Expected<net::NetworkDescription> described = net::load_network_file(file);
  if (!described) return described.error();
  for (const std::string& warning : described->warnings) {
    fmt::print(stderr, "orrery: warning: {}\n", warning);
  }
  if (described->graph) return described->graph;
  Expected<net::Graph> graph = net::graph_from_topology(described->logical);
  if (!graph) return graph.error().with_context(file);
  return std::make_shared<const net::Graph>(std::move(*graph));
}

int run_generate(const TopoOptions& options) {
  if (options.list || options.generator.empty()) {
    std::string text = "generators and their parameters (key=value, defaults shown):\n";
    for (std::string_view name : net::generator_names()) {
      text += fmt::format("\n{}\n{}", name, net::generator_help(name));
    }
    fmt::print("{}", text);
    return options.list ? 0
                        : report_error(Error(ErrorKind::kInvalidArgument,
                                             "missing GENERATOR (one of the above)"));
  }
  net::GeneratorParams params;
  for (const std::string& param : options.params) {
    const size_t eq = param.find('=');
    if (eq == std::string::npos || eq == 0) {
      return report_error(Error::make(ErrorKind::kInvalidArgument,
                                      "parameter '{}': expected key=value, e.g. leaves=8", param));
    }
    params.emplace_back(param.substr(0, eq), param.substr(eq + 1));
  }
  Expected<net::GraphSpec> spec = net::generate_graph(options.generator, params);
  if (!spec) return report_error(spec.error());
  Expected<net::Graph> graph = net::Graph::create(std::move(*spec));
  if (!graph) return report_error(graph.error());
  if (Status status = write_text(options.output, net::write_graph_yaml(*graph)); !status) {
    return report_error(status.error());
  }
  if (!options.output.empty() && options.output != "-") {
    fmt::print(stderr, "wrote {}: {} NPUs, {} switches, {} links\n", options.output,
               graph->npu_count(), graph->switch_count(), graph->link_count());
  }
  return 0;
}

int run_validate(const TopoOptions& options) {
  Expected<std::shared_ptr<const net::Graph>> graph = load_graph(options.file);
  if (!graph) return report_error(graph.error());
  fmt::print("{}: valid: {} NPUs, {} switches, {} links, every NPU reaches every other\n",
             options.file, (*graph)->npu_count(), (*graph)->switch_count(), (*graph)->link_count());
  return 0;
}

std::string gbps(uint64_t nano) { return fmt::format("{:.6g}", static_cast<double>(nano) / 1e9); }

int run_summarize(const TopoOptions& options) {
  Expected<std::shared_ptr<const net::Graph>> loaded = load_graph(options.file);
  if (!loaded) return report_error(loaded.error());
  const net::Graph& graph = **loaded;
  const net::GraphSummary s = net::summarize_graph(graph);
  std::string logical;
  for (const net::LogicalDimension& dim : graph.spec().logical) {
    logical += fmt::format("{}{} {}", logical.empty() ? "" : ", ",
                           net::topology_kind_name(dim.kind), dim.size);
  }
  const char* routing = graph.spec().routing == net::Routing::kEcmp ? "ecmp" : "dimension-order";
  if (options.json) {
    std::string tiers;
    for (const net::TierSummary& t : s.tiers) {
      tiers += fmt::format(
          "{}{{\"tier\": {}, \"links\": {}, \"min_bandwidth_gbps\": {}, \"max_bandwidth_gbps\": "
          "{}, \"min_latency_ns\": {}, \"max_latency_ns\": {}}}",
          tiers.empty() ? "" : ", ", t.tier, t.links, gbps(t.min_bandwidth.nano_gbps()),
          gbps(t.max_bandwidth.nano_gbps()), static_cast<double>(t.min_latency.ps()) / 1000.0,
          static_cast<double>(t.max_latency.ps()) / 1000.0);
    }
    fmt::print(
        "{{\"name\": \"{}\", \"npus\": {}, \"switches\": {}, \"links\": {}, \"diameter\": {}, "
        "\"diameter_sampled\": {}, \"bisection_gbps\": {}, \"oversubscription\": {:.6g}, "
        "\"routing\": \"{}\", \"logical\": \"{}\", \"tiers\": [{}]}}\n",
        graph.name(), s.npus, s.switches, s.links, s.diameter, s.diameter_sampled,
        gbps(s.bisection_nano_gbps), s.oversubscription, routing, logical, tiers);
    return 0;
  }
  fmt::print("topology:          {} ({})\n", graph.name(), options.file);
  fmt::print("NPUs:              {}\n", s.npus);
  fmt::print("switches:          {}\n", s.switches);
  fmt::print("links:             {} (directed)\n", s.links);
  fmt::print("diameter:          {} hops{}\n", s.diameter,
             s.diameter_sampled ? " (at least; sampled from 64 NPUs)" : "");
  fmt::print("bisection:         {} GB/s each way (first half of the ranks to the second)\n",
             gbps(s.bisection_nano_gbps));
  fmt::print("oversubscription:  {:.4g}:1\n", s.oversubscription);
  fmt::print("routing:           {}\n", routing);
  fmt::print("logical layout:    [{}]\n\n", logical);
  fmt::print("{:<6}{:>8}{:>26}{:>26}\n", "tier", "links", "bandwidth (GB/s)", "latency (ns)");
  for (const net::TierSummary& t : s.tiers) {
    const std::string bw =
        t.min_bandwidth == t.max_bandwidth
            ? gbps(t.min_bandwidth.nano_gbps())
            : gbps(t.min_bandwidth.nano_gbps()) + " .. " + gbps(t.max_bandwidth.nano_gbps());
    const std::string lat =
        t.min_latency == t.max_latency
            ? fmt::format("{}", static_cast<double>(t.min_latency.ps()) / 1000.0)
            : fmt::format("{} .. {}", static_cast<double>(t.min_latency.ps()) / 1000.0,
                          static_cast<double>(t.max_latency.ps()) / 1000.0);
    fmt::print("{:<6}{:>8}{:>26}{:>26}\n", t.tier, t.links, bw, lat);
  }
  return 0;
}

int run_draw(const TopoOptions& options) {
  Expected<std::shared_ptr<const net::Graph>> loaded = load_graph(options.file);
  if (!loaded) return report_error(loaded.error());
  const net::Graph& graph = **loaded;
  if (graph.node_count() > options.max_nodes) {
    return report_error(Error::make(ErrorKind::kInvalidArgument,
                                    "{}: {} nodes is too many to draw legibly (limit {}; raise it "
                                    "with --max-nodes)",
                                    options.file, graph.node_count(), options.max_nodes));
  }
  if (Status status = write_text(options.output, net::graph_to_dot(graph)); !status) {
    return report_error(status.error());
  }
  return 0;
}

}  // namespace

void add_topo_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<TopoOptions>();
  CLI::App* topo = app.add_subcommand(
      "topo", "Graph network topologies: generate, validate, summarize, draw (docs/network.md)");
  topo->require_subcommand(1);

  CLI::App* generate = topo->add_subcommand(
      "generate",
      "Build a topology from a generator and write its graph file\n  e.g. orrery topo generate "
      "clos2 leaves=8 npus_per_leaf=16 spines=8 -o clos.yml");
  generate->add_option("generator", options->generator,
                       "fat-tree, clos2, clos3, rail, torus or dragonfly");
  generate->add_option("params", options->params, "key=value parameters (see --list)");
  generate->add_option("-o,--output", options->output, "graph file to write (default: stdout)");
  generate->add_flag("--list", options->list, "list the generators and their parameters");
  generate->callback([options, &exit_code] { exit_code = run_generate(*options); });

  CLI::App* validate = topo->add_subcommand(
      "validate", "Check a graph topology file (or an ASTRA-sim network file)");
  validate->add_option("file", options->file, "topology file")->required();
  validate->callback([options, &exit_code] { exit_code = run_validate(*options); });

  CLI::App* summarize = topo->add_subcommand(
      "summarize", "NPUs, switches, links, diameter, bisection bandwidth, oversubscription");
  summarize->add_option("file", options->file, "topology file")->required();
  summarize->add_flag("--json", options->json, "one JSON object");
  summarize->callback([options, &exit_code] { exit_code = run_summarize(*options); });

  CLI::App* draw = topo->add_subcommand("draw", "Graphviz drawing of a small topology");
  draw->add_option("file", options->file, "topology file")->required();
  draw->add_option("-o,--output", options->output, ".dot file to write (default: stdout)");
  draw->add_option("--max-nodes", options->max_nodes, "refuse larger graphs (512)");
  draw->callback([options, &exit_code] { exit_code = run_draw(*options); });
}

}  // namespace orrery::cli
