// Reading ASTRA-sim's network files: accepted unchanged, exact numbers, and errors that name the
// file, the line and the key.
#include "network/topology_yaml.h"

#include <gtest/gtest.h>

#include <string>

#include "network/network_test_support.h"

namespace orrery::net {
namespace topology_yaml_test {

const std::string kDataDir = std::string(ORRERY_TEST_DATA_DIR) + "/network/";

std::string error_of(const std::string& text) {
  const Expected<Topology> topology = parse_topology_yaml(text, "net.yml");
  EXPECT_FALSE(topology.has_value()) << "expected an error for:\n" << text;
  return topology ? "" : topology.error().message();
}

TEST(TopologyYaml, accepts_astra_sim_example_files_unchanged) {
  for (const int ranks : {4, 8, 16}) {
    const Expected<Topology> topology =
        load_topology_file(kDataDir + "Ring_" + std::to_string(ranks) + "npus.yml");
    ASSERT_TRUE(topology.has_value()) << topology.error().message();
    EXPECT_EQ(topology->rank_count(), static_cast<uint32_t>(ranks));
    EXPECT_EQ(topology->dimension_count(), 1u);
    EXPECT_EQ(topology->dimension(0).kind, TopologyKind::kRing);
    EXPECT_EQ(topology->dimension(0).bandwidth, Bandwidth::from_gbps(50));
    EXPECT_EQ(topology->dimension(0).latency, SimTime::from_ns(500));
  }
}

TEST(TopologyYaml, fractional_latency_is_kept_to_the_picosecond) {
  const Expected<Topology> topology = load_topology_file(kDataDir + "HGX-H100-validated.yml");
  ASSERT_TRUE(topology.has_value()) << topology.error().message();
  EXPECT_EQ(topology->dimension(0).kind, TopologyKind::kSwitch);
  EXPECT_EQ(topology->rank_count(), 8u);
  EXPECT_EQ(topology->dimension(0).latency.ps(), 936'250);
  EXPECT_EQ(topology->dimension(0).bandwidth, Bandwidth::from_gbps(400));
}

TEST(TopologyYaml, reads_every_dimension_in_order) {
  const Topology topology = testing::topology_from_yaml(
      "topology: [ Ring, FullyConnected, Switch ]   # innermost first\n"
      "npus_count: [ 2, 8, 4 ]\n"
      "bandwidth: [ 200.0, 12.5, 0.75 ]\n"
      "latency: [ 100.0, 1.2345, 1e3 ]\n");
  ASSERT_EQ(topology.dimension_count(), 3u);
  EXPECT_EQ(topology.dimension(1).kind, TopologyKind::kFullyConnected);
  EXPECT_EQ(topology.dimension(2).kind, TopologyKind::kSwitch);
  EXPECT_EQ(topology.size(1), 8u);
  EXPECT_EQ(topology.dimension(1).bandwidth.nano_gbps(), 12'500'000'000u);
  EXPECT_EQ(topology.dimension(2).bandwidth.nano_gbps(), 750'000'000u);
  EXPECT_EQ(topology.dimension(1).latency.ps(), 1235);  // 1.2345 ns rounds to 1,235 ps
  EXPECT_EQ(topology.dimension(2).latency, SimTime::from_ns(1000));
}

TEST(TopologyYaml, block_style_lists_and_extra_keys_are_accepted) {
  const Topology topology = testing::topology_from_yaml(
      "name: my network\n"
      "topology:\n"
      "  - Switch\n"
      "npus_count:\n"
      "  - 4\n"
      "bandwidth:\n"
      "  - 25\n"
      "latency:\n"
      "  - 0\n");
  EXPECT_EQ(topology.rank_count(), 4u);
  EXPECT_EQ(topology.dimension(0).latency, SimTime::zero());
}

TEST(TopologyYaml, unknown_topology_name_is_reported_at_its_line) {
  EXPECT_EQ(error_of("topology: [ Ring,\n  Torus2D ]\nnpus_count: [ 4, 4 ]\n"
                     "bandwidth: [ 50, 50 ]\nlatency: [ 500, 500 ]\n"),
            "net.yml:2: key 'topology': unknown topology 'Torus2D' (expected Ring, FullyConnected "
            "or Switch)");
  // Names are case-sensitive, as in ASTRA-sim.
  EXPECT_EQ(error_of("topology: [ ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50 ]\nlatency: [ 5 ]\n")
                .substr(0, 30),
            "net.yml:1: key 'topology': unk");
}

TEST(TopologyYaml, lists_of_different_lengths_name_the_key_and_line) {
  EXPECT_EQ(error_of("topology: [ Ring, FullyConnected, Switch ]\n"
                     "npus_count: [ 2, 8, 4 ]\n"
                     "bandwidth: [ 200.0, 100.0 ]\n"
                     "latency: [ 100.0, 500.0, 1000.0 ]\n"),
            "net.yml:3: key 'bandwidth': expected 3 values (one per dimension, as in 'topology'), "
            "found 2");
  EXPECT_EQ(error_of("topology: [ Ring ]\nnpus_count: [ 2, 8 ]\nbandwidth: [ 1 ]\n"
                     "latency: [ 1 ]\n"),
            "net.yml:2: key 'npus_count': expected 1 values (one per dimension, as in 'topology'), "
            "found 2");
  EXPECT_EQ(error_of("topology: [ Ring ]\nnpus_count: [ 2 ]\nbandwidth: [ 1 ]\n\n\n"
                     "latency: [ ]\n"),
            "net.yml:6: key 'latency': expected 1 values (one per dimension, as in 'topology'), "
            "found 0");
}

TEST(TopologyYaml, zero_or_negative_bandwidth_is_refused) {
  EXPECT_EQ(error_of("topology: [ Ring, Ring ]\nnpus_count: [ 4, 4 ]\n"
                     "bandwidth: [ 50,\n    0 ]\nlatency: [ 500, 500 ]\n"),
            "net.yml:4: key 'bandwidth': found 0, expected a positive number of GB/s from 0.001 "
            "to 1e+09");
  EXPECT_EQ(error_of("topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ -50.0 ]\n"
                     "latency: [ 500 ]\n"),
            "net.yml:3: key 'bandwidth': found -50.0, expected a positive number of GB/s from "
            "0.001 to 1e+09");
  EXPECT_EQ(error_of("topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 1e-12 ]\n"
                     "latency: [ 500 ]\n")
                .substr(0, 42),
            "net.yml:3: key 'bandwidth': found 1e-12, e");
}

TEST(TopologyYaml, missing_key_is_named) {
  EXPECT_EQ(error_of("topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50 ]\n"),
            "net.yml:1: missing key 'latency' (expected a list with one value per dimension)");
  EXPECT_EQ(error_of("# a comment first\nnpus_count: [ 4 ]\nbandwidth: [ 50 ]\nlatency: [ 1 ]\n"),
            "net.yml:2: missing key 'topology' (expected a list with one value per dimension)");
}

TEST(TopologyYaml, non_numeric_values_name_the_key_and_line) {
  EXPECT_EQ(error_of("topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ fast ]\n"
                     "latency: [ 500 ]\n"),
            "net.yml:3: key 'bandwidth': found 'fast', expected a positive number of GB/s");
  EXPECT_EQ(error_of("topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50 ]\n"
                     "latency: [ 500ns ]\n"),
            "net.yml:4: key 'latency': found '500ns', expected a number of ns, zero or more");
  EXPECT_EQ(error_of("topology: [ Ring ]\nnpus_count: [ eight ]\nbandwidth: [ 50 ]\n"
                     "latency: [ 500 ]\n"),
            "net.yml:2: key 'npus_count': found 'eight', expected a whole number of ranks, at "
            "least 2");
  EXPECT_EQ(error_of("topology: [ Ring ]\nnpus_count: [ 4.5 ]\nbandwidth: [ 50 ]\n"
                     "latency: [ 500 ]\n"),
            "net.yml:2: key 'npus_count': found '4.5', expected a whole number of ranks, at "
            "least 2");
  EXPECT_EQ(error_of("topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ [50] ]\n"
                     "latency: [ 500 ]\n"),
            "net.yml:3: key 'bandwidth': expected a positive number of GB/s, found a list");
  EXPECT_EQ(error_of("topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ .nan ]\n"
                     "latency: [ 500 ]\n"),
            "net.yml:3: key 'bandwidth': found '.nan', expected a positive number of GB/s");
}

TEST(TopologyYaml, negative_latency_is_refused) {
  EXPECT_EQ(error_of("topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50 ]\n"
                     "latency: [ -1 ]\n"),
            "net.yml:4: key 'latency': found -1, expected a number of ns, zero or more");
}

TEST(TopologyYaml, a_dimension_below_2_ranks_is_refused) {
  for (const char* size : {"1", "0", "-3"}) {
    EXPECT_EQ(error_of(std::string("topology: [ Ring, Switch ]\nnpus_count: [ 4,\n ") + size +
                       " ]\nbandwidth: [ 50, 50 ]\nlatency: [ 500, 500 ]\n"),
              std::string("net.yml:3: key 'npus_count': found ") + size +
                  ", expected at least 2 ranks per dimension");
  }
}

TEST(TopologyYaml, too_many_ranks_are_refused_at_the_npus_count_line) {
  const std::string message = error_of(
      "topology: [ Ring, Ring, Ring ]\n\nnpus_count: [ 4096, 4096, 4096 ]\n"
      "bandwidth: [ 1, 1, 1 ]\nlatency: [ 1, 1, 1 ]\n");
  EXPECT_EQ(message.substr(0, 10), "net.yml:3:");
  EXPECT_NE(message.find("ranks"), std::string::npos);
}

TEST(TopologyYaml, a_value_instead_of_a_list_is_refused) {
  EXPECT_EQ(error_of("topology: Ring\nnpus_count: [ 4 ]\nbandwidth: [ 50 ]\nlatency: [ 5 ]\n"),
            "net.yml:1: key 'topology': expected a list with one value per dimension, found a "
            "single value");
  EXPECT_EQ(error_of("topology: []\nnpus_count: []\nbandwidth: []\nlatency: []\n"),
            "net.yml:1: key 'topology': expected at least one dimension, found an empty list");
}

TEST(TopologyYaml, broken_yaml_is_reported_with_its_line) {
  const std::string message =
      error_of("topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50\nlatency: [ 5 ]\n: :\n");
  EXPECT_EQ(message.substr(0, 8), "net.yml:");
  EXPECT_NE(message.find("not valid YAML"), std::string::npos);
  EXPECT_EQ(error_of(""),
            "net.yml:1: expected a mapping with keys topology, npus_count, bandwidth and latency, "
            "found nothing");
}

TEST(TopologyYaml, libra_network_files_are_recognized_and_refused) {
  const Expected<Topology> topology = load_topology_file(kDataDir + "libra_3d_network.yml");
  ASSERT_FALSE(topology.has_value());
  EXPECT_NE(topology.error().message().find("LIBRA"), std::string::npos)
      << topology.error().message();
  EXPECT_EQ(topology.error().message().find(kDataDir + "libra_3d_network.yml:"), 0u);
}

TEST(TopologyYaml, a_missing_file_is_an_io_error) {
  const Expected<Topology> topology = load_topology_file(kDataDir + "no_such_file.yml");
  ASSERT_FALSE(topology.has_value());
  EXPECT_EQ(topology.error().kind(), ErrorKind::kIo);
  EXPECT_NE(topology.error().message().find("no_such_file.yml"), std::string::npos);
  EXPECT_EQ(load_topology_file(kDataDir).error().kind(), ErrorKind::kIo);
}

}  // namespace topology_yaml_test
}  // namespace orrery::net
