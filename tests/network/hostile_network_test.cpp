// Network files a hostile or careless user writes (docs/numbers.md): keys given twice, aliases that
// expand the tree, ranges of bandwidth and latency, keys ASTRA-sim ignores, cables to nowhere,
// networks too large to run.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "network/graph_yaml.h"
#include "network/topology_yaml.h"
#include "network/yaml_text.h"

namespace orrery::net {
namespace hostile_network_test {

std::string error_of(const std::string& text) {
  Expected<NetworkDescription> network = parse_network_yaml(text, "net.yml");
  return network ? std::string("(read)") : network.error().message();
}

const std::string kRing = "topology: [ Ring ]\nnpus_count: [ 4 ]\n";

TEST(HostileNetwork, a_key_given_twice_is_an_error_with_both_lines) {
  EXPECT_EQ(error_of(kRing + "bandwidth: [ 50 ]\nlatency: [ 500 ]\nlatency: [ 1 ]\n"),
            "net.yml:5: key 'latency' is given twice (first on line 4); a key may appear once");
  // Inside a nested mapping too (a graph generator's link spec, a RoCE section ...).
  Expected<YAML::Node> nested = parse_yaml_text("a:\n  x: 1\n  y: 2\n  x: 3\n", "f.yml");
  ASSERT_FALSE(nested);
  EXPECT_EQ(nested.error().message(),
            "f.yml:4: key 'x' is given twice (first on line 2); a key may appear once");
  EXPECT_TRUE(parse_yaml_text("a: {x: 1}\nb: {x: 2}\n", "f.yml"));
}

TEST(HostileNetwork, a_key_that_is_a_mapping_or_a_list_is_an_error_with_its_line) {
  // Readers take keys as strings: yaml-cpp threw converting these, and a hardware preset with one
  // ended the program (found by fuzz_study_files).
  Expected<YAML::Node> list = parse_yaml_text("gpu:\n  ? [model, name]\n  : H100\n", "p.yml");
  ASSERT_FALSE(list);
  EXPECT_EQ(list.error().message(), "p.yml:2: a key must be a plain value, not a list");
  Expected<YAML::Node> map = parse_yaml_text("name: x\n? {a: 1}: 2\n", "p.yml");
  ASSERT_FALSE(map);
  EXPECT_EQ(map.error().message(), "p.yml:2: a key must be a plain value, not a mapping");
  // An empty key is a null one, which reads as the string "null" and is refused by name.
  EXPECT_TRUE(parse_yaml_text(": 1\nb: 2\n", "p.yml"));
}

TEST(HostileNetwork, aliases_cannot_expand_a_small_text_into_a_huge_tree) {
  // Each level lists the one before ten times: 10^9 nodes from under 300 bytes.
  std::string text = "a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n";
  for (int level = 1; level <= 9; ++level) {
    const std::string prev = "*a" + std::to_string(level - 1);
    text += "a" + std::to_string(level) + ": &a" + std::to_string(level) + " [";
    for (int idx = 0; idx < 10; ++idx) text += (idx ? ", " : "") + prev;
    text += "]\n";
  }
  Expected<YAML::Node> tree = parse_yaml_text(text, "bomb.yml");
  ASSERT_FALSE(tree);
  EXPECT_NE(tree.error().message().find("bomb.yml: the document expands to more than"),
            std::string::npos)
      << tree.error().message();
  // A few aliases in an ordinary file are fine.
  EXPECT_TRUE(parse_yaml_text("l: &l [50, 50]\nm: *l\n", "ok.yml"));
}

TEST(HostileNetwork, bandwidths_and_latencies_outside_the_model_are_refused_by_line) {
  EXPECT_EQ(error_of(kRing + "bandwidth: [ 1e-12 ]\nlatency: [ 500 ]\n"),
            "net.yml:3: key 'bandwidth': found 1e-12, expected a positive number of GB/s from "
            "0.001 to 1e+09");
  EXPECT_EQ(error_of(kRing + "bandwidth: [ 1e300 ]\nlatency: [ 500 ]\n"),
            "net.yml:3: key 'bandwidth': found 1e300, which is too large");
  EXPECT_EQ(error_of(kRing + "bandwidth: [ 50 ]\nlatency: [ 2e9 ]\n"),
            "net.yml:4: key 'latency': found 2e9, expected at most 1e+09 ns (one second) per hop");
  EXPECT_EQ(error_of(kRing + "bandwidth: [ .nan ]\nlatency: [ 500 ]\n"),
            "net.yml:3: key 'bandwidth': found '.nan', expected a positive number of GB/s");
  // Graph files read bandwidths with units.
  const std::string graph = "npus: 2\nswitches: [s0]\nlinks:\n  - [npu0, s0, ";
  EXPECT_EQ(error_of(graph + "1e-9, 1us]\n  - [npu1, s0, 100Gbps, 1us]\n"),
            "net.yml:4: link bandwidth: found '1e-9' (1e-09 GB/s), expected 0.001 to 1e+09 GB/s");
  EXPECT_EQ(error_of(graph + "100Gbps, 5000ms]\n  - [npu1, s0, 100Gbps, 1us]\n"),
            "net.yml:4: link latency: found '5000ms', expected at most 1e+09 ns (one second) per "
            "link");
}

TEST(HostileNetwork, keys_astra_sim_ignores_are_ignored_with_a_warning_naming_them) {
  Expected<NetworkDescription> network = parse_network_yaml(
      kRing + "bandwidth: [ 50 ]\nlatancy: [ 5 ]\nlatency: [ 500 ]\nunits: ns\n", "net.yml");
  ASSERT_TRUE(network) << network.error().message();
  EXPECT_EQ(network->warnings,
            (std::vector<std::string>{
                "net.yml:4: key 'latancy' is not an ASTRA-sim network key (topology, npus_count, "
                "bandwidth, latency); ignored",
                "net.yml:6: key 'units' is not an ASTRA-sim network key (topology, npus_count, "
                "bandwidth, latency); ignored"}));
  Expected<NetworkDescription> clean =
      parse_network_yaml(kRing + "bandwidth: [ 50 ]\nlatency: [ 500 ]\n", "net.yml");
  ASSERT_TRUE(clean);
  EXPECT_TRUE(clean->warnings.empty());
}

TEST(HostileNetwork, a_cable_from_a_switch_to_itself_names_its_line_and_the_switch) {
  EXPECT_EQ(error_of("npus: 2\nswitches: [leaf0, spine]\nlinks:\n  - [npu0, leaf0, 100Gbps, 1us]\n"
                     "  - [npu1, leaf0, 100Gbps, 1us]\n  - [spine, spine, 100Gbps, 1us]\n"),
            "net.yml:6: link [spine, spine] connects 'spine' to itself; a cable joins two nodes");
}

TEST(HostileNetwork, networks_beyond_two_to_the_24_ranks_are_refused_before_any_allocation) {
  // The 2^30 NPUs.
  EXPECT_EQ(error_of("topology: [ Ring ]\nnpus_count: [ 1073741824 ]\nbandwidth: [ 50 ]\n"
                     "latency: [ 500 ]\n"),
            "net.yml:2: the dimensions up to 0 make more than 16,777,216 ranks (2^24), the most "
            "orrery simulates (a run keeps results per rank)");
  EXPECT_EQ(error_of("topology: [ Ring, Switch ]\nnpus_count: [ 8192, 4096 ]\n"
                     "bandwidth: [ 50, 50 ]\nlatency: [ 500, 500 ]\n"),
            "net.yml:2: the dimensions up to 1 make more than 16,777,216 ranks (2^24), the most "
            "orrery simulates (a run keeps results per rank)");
  EXPECT_EQ(error_of("topology: [ Switch ]\nnpus_count: [ 16777216 ]\nbandwidth: [ 50 ]\n"
                     "latency: [ 500 ]\n"),
            "(read)");
}

// fuzz_network's timeout (fuzz/corpus/network/regression_switch_count_beyond_links): a 100-byte
// file naming 1,073,657 switches made a name for each (1.4 s, 125 MB; over 20 s under the
// sanitizers) before it read the links. The links bound the nodes now, and are read first.
TEST(HostileNetwork, more_nodes_than_the_links_can_connect_are_refused_before_they_are_named) {
  EXPECT_EQ(error_of("name: tiny\nnpus: 4\nswitches: 0000001073657\nlinks:\n  -1, oseway]\n"),
            "net.yml:1: key 'links': expected a list of [from, to, bandwidth, latency] cables");
  EXPECT_EQ(error_of("npus: 2\nswitches: 1073657\nlinks:\n  - [npu0, npu1, 100Gbps, 1us]\n"),
            "net.yml:2: key 'switches': 1073657 switches but 1 links: a link joins two nodes, so "
            "at most 2 switches can be connected");
  EXPECT_EQ(error_of("npus: 3000000\nlinks:\n  - [npu0, npu1, 100Gbps, 1us]\n"),
            "net.yml:1: key 'npus': 3000000 NPUs but 1 links: a link joins two nodes, so at most 2 "
            "NPUs can be connected");
  // As many as the links can hold is still a network (a switch on no link stays harmless).
  EXPECT_EQ(error_of("npus: 2\nswitches: 2\nlinks:\n  - [npu0, npu1, 100Gbps, 1us]\n"), "(read)");
}

// fuzz_network's second timeout (fuzz/corpus/network/regression_torus_beyond_a_million): a
// 30-byte file asking for a 4,864,553-NPU torus built it (1.4 s, 540 MB; 21 s under the
// sanitizers). Generated graphs stop at 2^20 NPUs.
TEST(HostileNetwork, generated_graphs_beyond_a_million_npus_are_refused) {
  EXPECT_EQ(error_of("generator: torus\ndims: 04864553\n"),
            "net.yml:1: torus: more than 2^20 NPUs");
  EXPECT_EQ(error_of("generator: fat-tree\nk: 162\n"),
            "net.yml:1: fat-tree: k = 162; expected an even number from 2 to 160");
  EXPECT_EQ(error_of("generator: torus\ndims: 1024x1024\n"), "(read)");
}

}  // namespace hostile_network_test
}  // namespace orrery::net
