// Graphs, generators, routing and the graph topology file: counts and routes checked against the
// generators' definitions worked out by hand.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "network/generators.h"
#include "network/graph.h"
#include "network/graph_summary.h"
#include "network/graph_yaml.h"

namespace orrery::net {
namespace graph_test {

Graph build(Expected<GraphSpec> spec) {
  EXPECT_TRUE(spec.has_value()) << (spec ? "" : spec.error().message());
  Expected<Graph> graph = Graph::create(std::move(*spec));
  EXPECT_TRUE(graph.has_value()) << (graph ? "" : graph.error().message());
  return std::move(*graph);
}

uint32_t count_switches_named(const Graph& graph, const std::string& prefix) {
  uint32_t n = 0;
  for (NodeId node = graph.npu_count(); node < graph.node_count(); ++node) {
    if (graph.node_name(node).rfind(prefix, 0) == 0) ++n;
  }
  return n;
}

TEST(Generators, k4_fat_tree_has_the_textbook_counts_and_distances) {
  const Graph g = build(make_fat_tree(4, {}));
  EXPECT_EQ(g.npu_count(), 16u);                   // k^3/4
  EXPECT_EQ(g.switch_count(), 20u);                // k^2 edge+agg, (k/2)^2 core
  EXPECT_EQ(g.link_count(), 2u * (16 + 16 + 16));  // host, edge-agg, agg-core cables
  EXPECT_EQ(g.distance(0, 1), 2u);                 // same edge switch
  EXPECT_EQ(g.distance(0, 2), 4u);                 // same pod
  EXPECT_EQ(g.distance(0, 15), 6u);                // other pod, through a core
  // Logical layout [2 per edge, 2 edges, 4 pods].
  const Topology logical = *g.logical_topology();
  ASSERT_EQ(logical.dimension_count(), 3u);
  EXPECT_EQ(logical.size(0), 2u);
  EXPECT_EQ(logical.size(2), 4u);
}

TEST(Routing, ecmp_spreads_flows_over_every_core_and_is_deterministic) {
  const Graph g = build(make_fat_tree(4, {}));
  std::set<NodeId> cores;
  for (uint64_t flow = 0; flow < 64; ++flow) {
    Path path;
    g.route(0, 15, flow, path);
    ASSERT_EQ(path.size(), 6u);
    EXPECT_EQ(g.link(path.front()).src, 0u);
    EXPECT_EQ(g.link(path.back()).dst, 15u);
    for (size_t i = 1; i < path.size(); ++i)
      EXPECT_EQ(g.link(path[i - 1]).dst, g.link(path[i]).src);
    cores.insert(g.link(path[2]).dst);  // agg -> core
    Path again;
    g.route(0, 15, flow, again);
    EXPECT_EQ(path, again);
  }
  EXPECT_EQ(cores.size(), 4u);  // all (k/2)^2 equal-cost paths are used
  for (NodeId core : cores) EXPECT_EQ(g.node_name(core).rfind("core", 0), 0u);
}

TEST(Generators, the_128_npu_two_tier_clos_of_the_reference) {
  ClosParams p;  // 8 leaves x 16 NPUs, 8 spines
  p.npu_link = {*parse_bandwidth_text("200Gbps"), SimTime::from_ns(5000)};
  p.uplink = {*parse_bandwidth_text("200Gbps"), SimTime::from_ns(12500)};
  const Graph g = build(make_clos2(p));
  EXPECT_EQ(g.npu_count(), 128u);
  EXPECT_EQ(g.switch_count(), 16u);
  EXPECT_EQ(g.link_count(), 2u * (128 + 64));
  EXPECT_EQ(g.distance(0, 15), 2u);
  EXPECT_EQ(g.distance(0, 16), 4u);
  // 200 Gb/s = 25e9 bytes/s = 23.283064365 GB/s of 2^30 bytes.
  EXPECT_EQ(g.link(0).bandwidth.nano_gbps(), 23'283'064'365u);
  Path path;
  g.route(0, 127, 7, path);
  SimTime latency;
  for (LinkId link : path) latency += g.link_latency(link);
  EXPECT_EQ(latency, SimTime::from_ns(2 * 5000 + 2 * 12500));
}

TEST(Generators, oversubscription_sets_the_uplink_bandwidth) {
  ClosParams p;
  p.leaves = 4;
  p.npus_per_leaf = 8;
  p.spines = 2;
  p.npu_link.bandwidth = Bandwidth::from_gbps(10);
  p.oversubscription = 2;  // 8 x 10 down = 2 x (2 x up) -> up = 20
  const Graph g = build(make_clos2(p));
  EXPECT_EQ(g.link(2 * 32).bandwidth, Bandwidth::from_gbps(20));  // first leaf-spine link
  p.oversubscription = -1;
  EXPECT_FALSE(make_clos2(p).has_value());
}

TEST(Generators, three_tier_clos_wires_spine_j_to_its_core_group) {
  Clos3Params p;  // 4 pods x 4 leaves x 8 NPUs, 4 spines per pod, 4 cores
  const Graph g = build(make_clos3(p));
  EXPECT_EQ(g.npu_count(), 128u);
  EXPECT_EQ(g.switch_count(), 16u + 16 + 4);
  EXPECT_EQ(g.distance(0, 8), 4u);   // other leaf, same pod
  EXPECT_EQ(g.distance(0, 32), 6u);  // other pod
  p.cores = 6;
  EXPECT_EQ(make_clos3(p).error().message(),
            "clos3: cores (6) must be a multiple of spines-per-pod (4)");
}

TEST(Generators, rail_optimized_1024_gpus_goes_through_the_node_then_the_rail) {
  RailParams p;  // 128 nodes x 8 GPUs, 32 nodes per leaf, 16 spines, full bisection
  const Graph g = build(make_rail_optimized(p));
  EXPECT_EQ(g.npu_count(), 1024u);
  EXPECT_EQ(count_switches_named(g, "nvswitch"), 128u);
  EXPECT_EQ(count_switches_named(g, "rail"), 32u);
  EXPECT_EQ(count_switches_named(g, "spine"), 16u);
  // Uplinks: 32 x 50 GB/s down = 16 x up -> 100 GB/s.
  const LinkId last = g.link_count() - 1;
  EXPECT_EQ(g.link(last).bandwidth, Bandwidth::from_gbps(100));
  EXPECT_EQ(g.distance(0, 7), 2u);       // same node, through the NVSwitch
  EXPECT_EQ(g.distance(0, 8), 2u);       // same rail, same leaf
  EXPECT_EQ(g.distance(0, 8 * 32), 4u);  // same rail, next leaf, via a spine
  Path path;
  g.route(0, 8 * 64 + 1, 3, path);  // rail 0 to rail 1: leaf, spine, leaf
  ASSERT_EQ(path.size(), 4u);
  EXPECT_EQ(g.link(path[0]).dimension, 1u);
  EXPECT_EQ(g.link(path[1]).dimension, 2u);
  // GPUs never relay: no path passes through a third GPU.
  for (LinkId link : path)
    EXPECT_TRUE(g.is_switch(g.link(link).dst) || g.link(link).dst == 8 * 64 + 1);
  const Topology logical = *g.logical_topology();
  ASSERT_EQ(logical.dimension_count(), 2u);
  EXPECT_EQ(logical.size(0), 8u);
  EXPECT_EQ(logical.size(1), 128u);
  EXPECT_EQ(logical.dimension(0).bandwidth, Bandwidth::from_gbps(450));
  EXPECT_EQ(logical.dimension(1).bandwidth, Bandwidth::from_gbps(50));
}

TEST(Generators, nics_per_npu_build_planes_and_ecmp_uses_every_nic) {
  // The reference Clos with 2 NICs per NPU: two planes of 8 leaves and 8 spines; every NPU has
  // one cable into each plane, and the bisection doubles.
  ClosParams c;
  c.npu_link = {Bandwidth::from_gbps(25), SimTime::from_ns(5000)};
  c.uplink = {Bandwidth::from_gbps(25), SimTime::from_ns(12500)};
  c.nics = 2;
  const Graph g = build(make_clos2(c));
  EXPECT_EQ(g.switch_count(), 32u);
  EXPECT_EQ(g.link_count(), 2u * 384u);
  EXPECT_EQ(count_switches_named(g, "leaf"), 16u);
  EXPECT_EQ(g.out_links(0).size(), 2u);
  EXPECT_EQ(g.node_name(g.link(g.out_links(0)[1]).dst), "leaf0_p1");
  c.nics = 1;
  const GraphSummary one = summarize_graph(build(make_clos2(c)));
  const GraphSummary two = summarize_graph(g);
  EXPECT_EQ(two.bisection_nano_gbps, 2 * one.bisection_nano_gbps);
  EXPECT_EQ(two.diameter, 4u);
  // Messages from NPU 0 to NPU 1 (same leaf, either plane) leave by both NICs.
  std::set<LinkId> first_hops;
  for (uint64_t flow = 0; flow < 32; ++flow) {
    Path path;
    g.route(0, 1, flow, path);
    ASSERT_EQ(path.size(), 2u);
    first_hops.insert(path[0]);
  }
  EXPECT_EQ(first_hops.size(), 2u);
  // A rail fabric with 2 NICs per GPU: each plane has its own rail leaves and spines.
  RailParams r;
  r.nodes = 8;
  r.nodes_per_leaf = 4;
  r.spines = 2;
  r.nics = 2;
  const Graph rail = build(make_rail_optimized(r));
  EXPECT_EQ(count_switches_named(rail, "rail"), 2u * 16u);
  EXPECT_EQ(count_switches_named(rail, "spine"), 4u);
  EXPECT_EQ(rail.out_links(0).size(), 3u);  // NVSwitch and two NICs
  c.nics = 0;
  EXPECT_FALSE(make_clos2(c).has_value());
}

TEST(Routing, torus_goes_dimension_by_dimension_the_shorter_way) {
  const Graph g = build(make_torus({4, 4}, {}));
  EXPECT_EQ(g.npu_count(), 16u);
  EXPECT_EQ(g.switch_count(), 0u);
  EXPECT_EQ(g.link_count(), 64u);  // 2 cables per NPU per... 16 NPUs x 2 dims x 2 directions
  // (0,0) -> (2,3): x two hops clockwise (exactly half way), then y one hop anticlockwise.
  Path path;
  g.route(0, 2 + 3 * 4, 0, path);
  ASSERT_EQ(path.size(), 3u);
  EXPECT_EQ(g.link(path[0]).dst, 1u);
  EXPECT_EQ(g.link(path[1]).dst, 2u);
  EXPECT_EQ(g.link(path[2]).dst, 2u + 3 * 4);
  const Graph cube = build(make_torus({4, 4, 4}, {}));
  EXPECT_EQ(cube.npu_count(), 64u);
  EXPECT_EQ(cube.distance(0, 63), 3u);  // (3,3,3): one hop back in each dimension
  EXPECT_EQ(cube.distance(0, 42), 6u);  // (2,2,2): two hops in each
  const Graph pair = build(make_torus({2, 3}, {}));
  EXPECT_EQ(pair.link_count(), 2u * (3 + 6));  // one cable per pair in the size-2 dimension
}

TEST(Generators, dragonfly_joins_every_pair_of_groups_once) {
  DragonflyParams p;  // 9 groups x 4 routers x 2 NPUs, h = 2
  const Graph g = build(make_dragonfly(p));
  EXPECT_EQ(g.npu_count(), 72u);
  EXPECT_EQ(g.switch_count(), 36u);
  std::set<std::pair<uint32_t, uint32_t>> pairs;
  uint32_t global = 0;
  for (LinkId link = 0; link < g.link_count(); ++link) {
    if (g.link(link).dimension != 2) continue;
    ++global;
    const uint32_t a = (g.link(link).src - 72) / 4;
    const uint32_t b = (g.link(link).dst - 72) / 4;
    pairs.insert({std::min(a, b), std::max(a, b)});
  }
  EXPECT_EQ(global, 2u * 36);  // 9 choose 2 cables
  EXPECT_EQ(pairs.size(), 36u);
  // Minimal routes: NPU, router, (local), global, (local), router, NPU: at most 5 hops.
  uint32_t diameter = 0;
  for (Rank a = 0; a < 72; ++a) {
    for (Rank b = 0; b < 72; ++b) diameter = std::max(diameter, g.distance(a, b));
  }
  EXPECT_EQ(diameter, 5u);
  p.global_per_router = 1;  // 4 global ports for 8 other groups
  EXPECT_FALSE(make_dragonfly(p).has_value());
}

TEST(Generators, hgx_nodes_inside_a_clos) {
  ClosParams p;
  p.leaves = 2;
  p.npus_per_leaf = 2;
  p.spines = 1;
  const GraphSpec base = *make_clos2(p);
  const Graph g = build(with_nodes(base, 8, {Bandwidth::from_gbps(450), SimTime::from_ns(250)}));
  EXPECT_EQ(g.npu_count(), 32u);
  EXPECT_EQ(g.switch_count(), 3u + 4);
  EXPECT_EQ(g.distance(0, 7), 2u);   // inside the node
  EXPECT_EQ(g.distance(0, 8), 2u);   // next node, same leaf, via the NICs
  EXPECT_EQ(g.distance(0, 16), 4u);  // other leaf
  const Topology logical = *g.logical_topology();
  ASSERT_EQ(logical.dimension_count(), 3u);
  EXPECT_EQ(logical.size(0), 8u);
  EXPECT_FALSE(with_nodes(*make_torus({4, 4}, {}), 8, {}).has_value());
}

// Reachability is proved through the best-connected switch; when that fails the pair that cannot
// be joined is still the one named, and a graph that is connected another way is still valid.
TEST(Graph, reachability_is_checked_through_a_hub_and_names_the_pair_when_it_fails) {
  const Bandwidth bw = Bandwidth::from_gbps(1);
  auto both = [&](std::vector<GraphLink>& links, NodeId a, NodeId b) {
    links.push_back({a, b, bw, SimTime::zero(), 0});
    links.push_back({b, a, bw, SimTime::zero(), 0});
  };
  // Three NPUs on switch 3; the switch reaches npu2 but npu2 has no way back.
  GraphSpec star;
  star.name = "star";
  star.npus = 3;
  star.switch_names = {"sw"};
  both(star.links, 0, 3);
  both(star.links, 1, 3);
  star.links.push_back({3, 2, bw, SimTime::zero(), 0});
  EXPECT_EQ(Graph::create(star).error().message(), "graph 'star': npu2 cannot reach npu0");
  star.links.push_back({2, 3, bw, SimTime::zero(), 0});
  EXPECT_TRUE(Graph::create(star).has_value());

  // The switch of most links (4) serves only npu0 and npu1 and a dead end; switch 5 joins all
  // three NPUs: the hub check fails, the full check finds every pair joined.
  GraphSpec two;
  two.name = "two";
  two.npus = 3;
  two.switch_names = {"big", "small", "end"};
  both(two.links, 0, 3);
  both(two.links, 1, 3);
  both(two.links, 3, 5);
  both(two.links, 0, 4);
  both(two.links, 1, 4);
  both(two.links, 2, 4);
  two.links.push_back({3, 5, bw, SimTime::zero(), 0});  // more links for "big"
  const Expected<Graph> graph = Graph::create(two);
  ASSERT_TRUE(graph.has_value()) << graph.error().message();
  EXPECT_EQ(graph->distance(2, 0), 2u);
}

TEST(Graph, checks_its_input_and_names_what_is_wrong) {
  GraphSpec spec;
  spec.name = "bad";
  spec.npus = 3;
  spec.links = {{0, 1, Bandwidth::from_gbps(1), SimTime::zero(), 0},
                {1, 0, Bandwidth::from_gbps(1), SimTime::zero(), 0}};
  spec.npu_forwarding = true;
  EXPECT_EQ(Graph::create(spec).error().message(), "graph 'bad': npu2 cannot reach npu0");
  spec.links.push_back({2, 2, Bandwidth::from_gbps(1), SimTime::zero(), 0});
  EXPECT_EQ(Graph::create(spec).error().message(),
            "graph 'bad': link 2 goes from node 2 to itself");
  spec.links.back() = {1, 2, Bandwidth(), SimTime::zero(), 0};
  EXPECT_EQ(Graph::create(spec).error().message(), "graph 'bad': link 2 has zero bandwidth");
  spec.links.back() = {1, 2, Bandwidth::from_gbps(1), SimTime::zero(), 0};
  spec.links.push_back({2, 1, Bandwidth::from_gbps(1), SimTime::zero(), 0});
  spec.logical = {{TopologyKind::kSwitch, 2}};
  EXPECT_EQ(Graph::create(spec).error().message(),
            "graph 'bad': the logical dimensions multiply to 2 but there are 3 NPUs");
  spec.logical.clear();
  EXPECT_TRUE(Graph::create(spec).has_value());
}

TEST(GraphFile, written_graphs_read_back_identically) {
  const Graph g = build(generate_graph(
      "clos2",
      {{"leaves", "2"}, {"npus_per_leaf", "3"}, {"spines", "2"}, {"oversubscription", "1.5"}}));
  const std::string text = write_graph_yaml(g);
  Expected<GraphSpec> back = parse_graph_yaml(text, "g.yml");
  ASSERT_TRUE(back.has_value()) << back.error().message();
  ASSERT_EQ(back->links.size(), g.link_count());
  for (LinkId link = 0; link < g.link_count(); ++link) {
    EXPECT_EQ(back->links[link].src, g.link(link).src);
    EXPECT_EQ(back->links[link].dst, g.link(link).dst);
    EXPECT_EQ(back->links[link].bandwidth, g.link(link).bandwidth);
    EXPECT_EQ(back->links[link].latency, g.link(link).latency);
    EXPECT_EQ(back->links[link].dimension, g.link(link).dimension);
  }
  EXPECT_EQ(back->switch_names, g.spec().switch_names);
  EXPECT_EQ(back->logical.size(), 2u);
}

TEST(GraphFile, listed_and_generated_forms_and_their_errors) {
  const std::string listed =
      "name: tiny\nnpus: 2\nswitches: [s]\nlogical: [[Switch, 2]]\nlinks:\n"
      "  - [npu0, s, 200Gbps, 5us]\n  - [npu1, s, 25GB/s, 500, 0]\n";
  Expected<NetworkDescription> net = parse_network_yaml(listed, "t.yml");
  ASSERT_TRUE(net.has_value()) << net.error().message();
  ASSERT_NE(net->graph, nullptr);
  EXPECT_EQ(net->graph->link_count(), 4u);
  EXPECT_EQ(net->graph->link(0).latency, SimTime::from_ns(5000));
  EXPECT_EQ(net->graph->link(2).bandwidth, Bandwidth::from_gbps(25));
  EXPECT_EQ(net->logical.rank_count(), 2u);

  Expected<NetworkDescription> gen =
      parse_network_yaml("generator: torus\ndims: 2x2x2\nbandwidth: 10\n", "g.yml");
  ASSERT_TRUE(gen.has_value()) << gen.error().message();
  EXPECT_EQ(gen->graph->npu_count(), 8u);
  EXPECT_EQ(gen->logical.dimension_count(), 3u);

  // ASTRA-sim files are still read as before.
  Expected<NetworkDescription> astra = parse_network_yaml(
      "topology: [Ring]\nnpus_count: [4]\nbandwidth: [50]\nlatency: [500]\n", "a.yml");
  ASSERT_TRUE(astra.has_value());
  EXPECT_EQ(astra->graph, nullptr);
  EXPECT_EQ(astra->logical.rank_count(), 4u);

  auto error = [](const std::string& text) {
    Expected<NetworkDescription> result = parse_network_yaml(text, "t.yml");
    return result ? std::string("no error") : result.error().message();
  };
  EXPECT_EQ(error("npus: 2\nswitches: [s]\nlinks:\n  - [npu0, s, 1, 1]\n  - [npu9, s, 1, 1]\n"),
            "t.yml:5: link endpoint 'npu9' is neither an NPU (npu0 .. npu1) nor a listed switch");
  EXPECT_EQ(error("npus: 2\nswitches: [s]\nlinks:\n  - [npu0, s, fast, 1]\n"),
            "t.yml:4: link bandwidth: found 'fast', expected a positive bandwidth: GB/s (2^30 "
            "bytes/s) as a number or '25GB/s', or bits as '200Gbps'");
  EXPECT_EQ(error("npus: 2\nswitches: [s]\nlinks:\n  - [npu0, s, 1, -3us]\n"),
            "t.yml:4: link latency: found '-3us', expected a latency of 0 or more: ns as a "
            "number, or '500ns', '5us', '1ms'");
  EXPECT_EQ(error("npus: 2\ncolour: red\nlinks: []\n"),
            "t.yml:2: unknown key 'colour' in a graph topology file");
  EXPECT_EQ(error("generator: clos2\nleafs: 4\n"),
            "t.yml:1: generator clos2: unknown parameter 'leafs' (expected leaves, "
            "npus_per_leaf, spines, npu_bandwidth, npu_latency, uplink_bandwidth, uplink_latency, "
            "oversubscription, nics, node_gpus, nvlink_bandwidth, nvlink_latency)");
  EXPECT_EQ(error("generator: fat-tree\nk: 5\n"),
            "t.yml:1: fat-tree: k = 5; expected an even number from 2 to 160");
  EXPECT_EQ(error("npus: 3\nswitches: [s]\nlinks:\n  - [npu0, s, 1, 1]\n  - [npu1, s, 1, 1]\n"),
            "t.yml: npu2 cannot reach npu0");
}

TEST(GraphSummary, diameter_bisection_and_oversubscription_by_hand) {
  // The reference Clos: halves are leaves 0-3 and 4-7; the cut is their 4 x 8 uplinks.
  const Graph clos = build(generate_graph("clos2", {}));
  GraphSummary s = summarize_graph(clos);
  EXPECT_EQ(s.npus, 128u);
  EXPECT_EQ(s.switches, 16u);
  EXPECT_EQ(s.links, 384u);
  EXPECT_EQ(s.diameter, 4u);
  EXPECT_EQ(s.bisection_nano_gbps, 32u * 23'283'064'365u);
  EXPECT_DOUBLE_EQ(s.oversubscription, 2.0);  // 16 NPUs down, 8 spines up, equal links
  ASSERT_EQ(s.tiers.size(), 2u);
  EXPECT_EQ(s.tiers[1].min_latency, SimTime::from_ns(12'500));

  // k = 4 fat-tree: full bisection, 8 hosts x 25 GB/s.
  s = summarize_graph(build(make_fat_tree(4, {})));
  EXPECT_EQ(s.diameter, 6u);
  EXPECT_EQ(s.bisection_nano_gbps, 8u * 25'000'000'000u);
  EXPECT_DOUBLE_EQ(s.oversubscription, 1.0);

  // 4 x 4 torus: rows 0-1 against rows 2-3 are joined by 4 columns x 2 places (one wraps).
  s = summarize_graph(build(make_torus({4, 4}, {})));
  EXPECT_EQ(s.diameter, 4u);
  EXPECT_EQ(s.bisection_nano_gbps, 8u * 25'000'000'000u);

  // Oversubscribed 3-tier Clos: ratio 3 at both tiers.
  Clos3Params p;
  p.oversubscription = 3;
  s = summarize_graph(build(make_clos3(p)));
  EXPECT_NEAR(s.oversubscription, 3.0, 1e-9);
}

TEST(GraphSummary, astra_sim_networks_materialize_with_the_same_links) {
  Expected<NetworkDescription> astra = parse_network_yaml(
      "topology: [Ring, Switch]\nnpus_count: [4, 2]\nbandwidth: [50, 25]\nlatency: [500, 1000]\n",
      "a.yml");
  ASSERT_TRUE(astra.has_value());
  Expected<Graph> g = graph_from_topology(astra->logical);
  ASSERT_TRUE(g.has_value()) << g.error().message();
  EXPECT_EQ(g->npu_count(), 8u);
  EXPECT_EQ(g->switch_count(), 4u);
  EXPECT_EQ(g->link_count(), astra->logical.link_count());
  EXPECT_EQ(summarize_graph(*g).diameter, 4u);  // two ring hops, then up and down a switch
  const std::string dot = graph_to_dot(*g);
  EXPECT_NE(dot.find("\"npu0\" -- \"npu1\" [label=\"50 GB/s, 500 ns\", dir=forward]"),
            std::string::npos)
      << dot;
}

TEST(GraphFile, a_generator_file_may_bring_its_own_logical_layout) {
  Expected<NetworkDescription> net =
      parse_network_yaml("generator: clos2\nlogical: [[Ring, 128]]\n", "c.yml");
  ASSERT_TRUE(net.has_value()) << net.error().message();
  ASSERT_EQ(net->logical.dimension_count(), 1u);
  EXPECT_EQ(net->logical.dimension(0).kind, TopologyKind::kRing);
  Expected<NetworkDescription> bad =
      parse_network_yaml("generator: clos2\nlogical: [[Ring, 100]]\n", "c.yml");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message(),
            "c.yml: graph 'clos2-8x16-8spines': the logical dimensions multiply to 100 but there "
            "are 128 NPUs");
}

}  // namespace graph_test
}  // namespace orrery::net
