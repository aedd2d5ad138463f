// `orrery net`: inspect a network file (ASTRA-sim's or a graph topology) and time single
// messages on it.
//
//   orrery net info --network FILE [--json]
//   orrery net send --network FILE [--backend NAME] --src A --dst B
//                   --size BYTES [--json]
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "cli/commands.h"
#include "core/event_engine.h"
#include "core/json_config.h"
#include "core/units.h"
#include "network/backend_registry.h"
#include "network/graph_yaml.h"
#include "network/network_backend.h"
#include "network/topology_yaml.h"

namespace orrery::cli {

namespace {

struct NetOptions {
  std::string network;
  std::string backend = "analytical";
  std::string src;
  std::string dst;
  std::string size;
  bool json = false;
};

// A non-negative decimal with its trailing zeros dropped: 12.5, 50, 936.25.
std::string format_fixed(uint64_t value, int decimals) {
  uint64_t scale = 1;
  for (int idx = 0; idx < decimals; ++idx) scale *= 10;
  std::string text = fmt::format("{}", value / scale);
  uint64_t fraction = value % scale;
  if (fraction == 0) return text;
  std::string digits = fmt::format("{:0{}}", fraction, decimals);
  while (!digits.empty() && digits.back() == '0') digits.pop_back();
  return text + "." + digits;
}

std::string format_gbps(const net::Bandwidth& bandwidth) {
  return format_fixed(bandwidth.nano_gbps(), 9);
}

std::string format_ns(SimTime time) { return format_fixed(static_cast<uint64_t>(time.ps()), 3); }

// As format_ns, with thousands separated: 60,093.75.
std::string format_ns_grouped(SimTime time) {
  const auto ps = static_cast<uint64_t>(time.ps());
  const std::string fraction = format_fixed(ps % 1000, 3);  // "0", or "0.75"
  return format_count(ps / 1000) + (fraction == "0" ? "" : fraction.substr(1));
}

std::string json_string(std::string_view text) {
  std::string out;
  append_json_string(out, text);
  return out;
}

Expected<net::NetworkDescription> load_network(const NetOptions& options) {
  if (options.network.empty()) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "missing --network FILE (an ASTRA-sim network file or a graph topology, "
                       ".yml)");
  }
  Expected<net::NetworkDescription> described = net::load_network_file(options.network);
  if (described) {
    for (const std::string& warning : described->warnings) {
      fmt::print(stderr, "orrery: warning: {}\n", warning);
    }
  }
  return described;
}

Expected<net::Rank> parse_rank(const std::string& flag, const std::string& text,
                               const net::Topology& topology) {
  if (text.empty()) {
    return Error::make(ErrorKind::kInvalidArgument, "missing {} RANK (0 to {})", flag,
                       topology.rank_count() - 1);
  }
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return Error::make(ErrorKind::kInvalidArgument, "{} '{}' is not a rank (expected 0 to {})",
                       flag, text, topology.rank_count() - 1);
  }
  if (value >= topology.rank_count()) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "{} {} is out of range: the network has {} ranks (0 to {})", flag, value,
                       topology.rank_count(), topology.rank_count() - 1);
  }
  return static_cast<net::Rank>(value);
}

int run_info(const NetOptions& options) {
  Expected<net::NetworkDescription> loaded = load_network(options);
  if (!loaded) return report_error(loaded.error());
  const net::Topology& net = loaded->logical;
  const net::Graph* graph = loaded->graph.get();
  if (options.json) {
    std::string dims;
    for (uint32_t dim = 0; dim < net.dimension_count(); ++dim) {
      const net::Dimension& spec = net.dimension(dim);
      dims += fmt::format(
          "{}{{\"topology\": {}, \"size\": {}, \"bandwidth_gbps\": {}, \"latency_ns\": {}, "
          "\"links\": {}}}",
          dim == 0 ? "" : ", ", json_string(net::topology_kind_name(spec.kind)), spec.size,
          format_gbps(spec.bandwidth), format_ns(spec.latency), net.link_count(dim));
    }
    const uint64_t switches = graph ? graph->switch_count() : net.switch_count();
    const uint64_t links = graph ? graph->link_count() : net.link_count();
    fmt::print(
        "{{\"network\": {}, \"kind\": {}, \"ranks\": {}, \"switches\": {}, \"links\": {}, "
        "\"dimensions\": [{}]}}\n",
        json_string(options.network), graph ? "\"graph\"" : "\"astra-sim\"", net.rank_count(),
        switches, links, dims);
    return 0;
  }
  fmt::print("network:    {}\n", options.network);
  fmt::print("ranks:      {}\n", format_count(net.rank_count()));
  fmt::print("dimensions: {}\n", net.dimension_count());
  if (graph != nullptr) {
    // A graph's links are its own; the dimensions are the logical layout collectives run on.
    fmt::print("switches:   {}\n", format_count(graph->switch_count()));
    fmt::print(
        "links:      {} (directed; orrery topo summarize for tiers, diameter, bisection)\n\n",
        format_count(graph->link_count()));
    fmt::print("logical layout (bandwidth and latency of NPU 0's first link of each tier):\n");
    fmt::print("{:<5}{:<16}{:>10}{:>14}{:>14}\n", "dim", "topology", "size", "bandwidth",
               "latency");
    for (uint32_t dim = 0; dim < net.dimension_count(); ++dim) {
      const net::Dimension& spec = net.dimension(dim);
      // A space before each figure: a bandwidth such as 23.283064365 GB/s (200 Gb/s) is wider
      // than its column and would otherwise run into the size.
      fmt::print("{:<5}{:<16}{:>10}{:>14}{:>14}\n", dim, net::topology_kind_name(spec.kind),
                 format_count(spec.size), " " + format_gbps(spec.bandwidth) + " GB/s",
                 " " + format_ns(spec.latency) + " ns");
    }
    return 0;
  }
  fmt::print("switches:   {}\n", format_count(net.switch_count()));
  fmt::print("links:      {} (directed)\n\n", format_count(net.link_count()));
  fmt::print("{:<5}{:<16}{:>10}{:>14}{:>14}{:>16}\n", "dim", "topology", "size", "bandwidth",
             "latency", "links");
  for (uint32_t dim = 0; dim < net.dimension_count(); ++dim) {
    const net::Dimension& spec = net.dimension(dim);
    fmt::print("{:<5}{:<16}{:>10}{:>14}{:>14}{:>16}\n", dim, net::topology_kind_name(spec.kind),
               format_count(spec.size), " " + format_gbps(spec.bandwidth) + " GB/s",
               " " + format_ns(spec.latency) + " ns", format_count(net.link_count(dim)));
  }
  return 0;
}

// Hears the one delivery of `orrery net send`.
class OneDelivery final : public net::DeliveryListener {
 public:
  explicit OneDelivery(const EventEngine& engine) : engine_(engine) {}
  void on_delivered(uint64_t token) override {
    (void)token;
    time = engine_.now();
    delivered = true;
  }
  SimTime time;
  bool delivered = false;

 private:
  const EventEngine& engine_;
};

int run_send(const NetOptions& options) {
  Expected<net::NetworkDescription> loaded = load_network(options);
  if (!loaded) return report_error(loaded.error());
  const net::Topology* topology = &loaded->logical;
  const std::shared_ptr<const net::Graph>& graph = loaded->graph;
  Expected<net::Rank> src = parse_rank("--src", options.src, *topology);
  if (!src) return report_error(src.error());
  Expected<net::Rank> dst = parse_rank("--dst", options.dst, *topology);
  if (!dst) return report_error(dst.error());
  if (options.size.empty()) {
    return report_error(Error::make(ErrorKind::kInvalidArgument,
                                    "missing --size BYTES (e.g. 1048576, 1MiB or 64KB)"));
  }
  Expected<uint64_t> bytes = parse_bytes(options.size);
  if (!bytes) return report_error(bytes.error().with_context("--size"));

  // Refuse messages whose time would not fit the clock: any hop's serialization is at most
  // bytes / slowest bandwidth, so check that bound against the saturation point (per dimension
  // on ASTRA-sim's networks, per link on a graph, whose links differ within a tier).
  for (uint32_t dim = 0; graph == nullptr && dim < topology->dimension_count(); ++dim) {
    if (topology->dimension(dim).bandwidth.serialization_time(*bytes) >=
        net::Bandwidth::kMaxSerialization) {
      return report_error(Error::make(ErrorKind::kInvalidArgument,
                                      "--size {}: the message would take more than 2^61 ps "
                                      "(26 days) on dimension {}",
                                      options.size, dim));
    }
  }
  if (graph != nullptr) {
    for (net::LinkId link = 0; link < graph->link_count(); ++link) {
      if (graph->link_bandwidth(link).serialization_time(*bytes) >=
          net::Bandwidth::kMaxSerialization) {
        return report_error(Error::make(ErrorKind::kInvalidArgument,
                                        "--size {}: the message would take more than 2^61 ps "
                                        "(26 days) on link {}",
                                        options.size, link));
      }
    }
  }

  EventEngine engine;
  Expected<std::unique_ptr<net::NetworkBackend>> backend =
      net::make_backend(options.backend, engine, *loaded);
  if (!backend) return report_error(backend.error().with_context("--backend"));
  OneDelivery delivery(engine);
  (*backend)->set_listener(delivery);
  (*backend)->send(*src, *dst, *bytes, 0);
  (void)engine.run();
  if (!delivery.delivered) {
    return report_error(Error::make(ErrorKind::kDeadlock, "the message was never delivered"));
  }
  // Links crossed, per dimension (per tier on a graph), as the backend routes.
  std::vector<net::LinkStats> crossed = (*backend)->link_stats();
  // On a graph, the route node by node from the source: at each node the outgoing link that
  // carried the most bytes, never back to a node already on the route. A packet backend also
  // lists the links its acknowledgements took back (roce), which are not the message's route.
  std::string path;
  if (graph != nullptr && !crossed.empty()) {
    std::vector<net::LinkStats> route;
    std::vector<net::NodeId> visited{*src};
    net::NodeId at = *src;
    path = graph->node_name(at);
    while (at != *dst) {
      const net::LinkStats* next = nullptr;
      for (const net::LinkStats& link : crossed) {
        const net::NodeId to = graph->link(link.link).dst;
        if (graph->link(link.link).src != at ||
            std::find(visited.begin(), visited.end(), to) != visited.end()) {
          continue;
        }
        if (next == nullptr || link.bytes > next->bytes) next = &link;
      }
      if (next == nullptr) break;
      at = graph->link(next->link).dst;
      visited.push_back(at);
      route.push_back(*next);
      path += " -> " + graph->node_name(at);
    }
    crossed = std::move(route);
  }
  uint32_t total_hops = 0;
  std::vector<uint32_t> hops(topology->dimension_count(), 0);
  for (const net::LinkStats& link : crossed) {
    if (link.dimension >= hops.size()) hops.resize(link.dimension + 1, 0);
    ++hops[link.dimension];
    ++total_hops;
  }

  if (options.json) {
    std::string per_dim;
    for (uint32_t dim = 0; dim < hops.size(); ++dim) {
      per_dim += fmt::format("{}{}", dim == 0 ? "" : ", ", hops[dim]);
    }
    fmt::print(
        "{{\"time_ns\": {}, \"time_ps\": {}, \"backend\": {}, \"src\": {}, \"dst\": {}, "
        "\"bytes\": {}, \"hops\": {}, \"{}\": [{}]{}}}\n",
        delivery.time.ns_truncated(), delivery.time.ps(), json_string((*backend)->name()), *src,
        *dst, *bytes, total_hops, graph ? "hops_per_tier" : "hops_per_dimension", per_dim,
        graph ? ", \"path\": " + json_string(path) : std::string());
    return 0;
  }
  fmt::print("network: {} ({} ranks, {} dimension{})\n", options.network,
             format_count(topology->rank_count()), topology->dimension_count(),
             topology->dimension_count() == 1 ? "" : "s");
  fmt::print("backend: {}\n", (*backend)->name());
  fmt::print("message: rank {} -> rank {}, {} B ({})\n", *src, *dst, format_count(*bytes),
             format_bytes(*bytes));
  std::string route = path;
  for (uint32_t dim = 0; graph == nullptr && dim < hops.size(); ++dim) {
    if (hops[dim] == 0) continue;
    route += fmt::format("{}dimension {} ({}): {} hop{}", route.empty() ? "" : ", ", dim,
                         net::topology_kind_name(topology->dimension(dim).kind), hops[dim],
                         hops[dim] == 1 ? "" : "s");
  }
  fmt::print("route:   {}\n", route.empty() ? "none (source is destination)" : route);
  fmt::print("time:    {} ns ({} ns exactly)\n",
             format_count(static_cast<uint64_t>(delivery.time.ns_truncated())),
             format_ns_grouped(delivery.time));
  return 0;
}

}  // namespace

void add_net_command(CLI::App& app, int& exit_code) {
  CLI::App* net = app.add_subcommand(
      "net",
      "Inspect networks and time single messages on them (ASTRA-sim network files or graph "
      "topologies)");
  net->require_subcommand(1);
  auto options = std::make_shared<NetOptions>();

  CLI::App* info = net->add_subcommand(
      "info",
      "Print a network's ranks, dimensions, links, and bandwidth and latency per dimension");
  info->add_option("--network", options->network,
                   "ASTRA-sim network file (.yml: topology, npus_count, bandwidth, latency) or "
                   "graph topology file (docs/formats/topology.md)");
  info->add_flag("--json", options->json, "Print one JSON object instead of a table");
  info->callback([options, &exit_code] { exit_code = run_info(*options); });

  CLI::App* send = net->add_subcommand(
      "send", "Time one message from --src to --dst on an otherwise idle network");
  send->add_option("--network", options->network,
                   "ASTRA-sim network file (.yml: topology, npus_count, bandwidth, latency) or "
                   "graph topology file (docs/formats/topology.md)");
  send->add_option("--backend", options->backend,
                   "one of " + net::backend_names_text() + " (orrery run --help describes them)")
      ->capture_default_str();
  send->add_option("--src", options->src, "Sending rank");
  send->add_option("--dst", options->dst, "Receiving rank");
  send->add_option("--size", options->size, "Message size: bytes, or with a unit (64KiB, 1MB)");
  send->add_flag("--json", options->json,
                 "Print {\"time_ns\": ..., \"time_ps\": ...} (time_ns truncated, as ASTRA-sim "
                 "reports it)");
  send->callback([options, &exit_code] { exit_code = run_send(*options); });
}

}  // namespace orrery::cli
