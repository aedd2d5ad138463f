// `orrery net`: what a user sees when timing messages and inspecting networks.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "e2e/run_command.h"

namespace orrery {
namespace net_cli_test {

const std::string kNetworkDir = std::string(ORRERY_TEST_DATA_DIR) + "/network/";

// Writes a one-dimension network file like ASTRA-sim's examples and returns its path.
std::string write_network(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("orrery-net-" + std::to_string(::getpid()) + "-" + name + ".yml");
  std::ofstream(path) << text;
  return path.string();
}

std::string sixteen_ranks(const std::string& kind) {
  return write_network(kind, "topology: [ " + kind +
                                 " ]\nnpus_count: [ 16 ]\nbandwidth: [ 50.0 ]  # GB/s\n"
                                 "latency: [ 500.0 ]  # ns\n");
}

// The "time_ns" value of a one-line JSON object.
long long json_time_ns(const std::string& out) {
  const std::string key = "\"time_ns\": ";
  const size_t at = out.find(key);
  EXPECT_NE(at, std::string::npos) << out;
  return at == std::string::npos ? -1 : std::stoll(out.substr(at + key.size()));
}

TEST(NetCli, send_reproduces_astra_sim_single_message_figures) {
  // astra-sim-compat.md: 16 ranks, 50 GB/s, 500 ns, 1 MiB from rank 1 to rank 4.
  const struct {
    const char* kind;
    const char* backend;
    long long ns;
  } cases[] = {{"Ring", "analytical", 21'031},
               {"FullyConnected", "analytical", 20'031},
               {"Switch", "analytical", 20'531},
               {"Ring", "congestion-aware", 60'093},
               {"FullyConnected", "congestion-aware", 20'031},
               {"Switch", "congestion-aware", 40'062}};
  for (const auto& c : cases) {
    const std::string network = sixteen_ranks(c.kind);
    const CommandResult result =
        run_orrery({"net", "send", "--network", network, "--backend", c.backend, "--src", "1",
                    "--dst", "4", "--size", "1048576", "--json"});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(json_time_ns(result.out), c.ns) << c.kind << " " << c.backend;
    std::filesystem::remove(network);
  }
}

TEST(NetCli, send_prints_the_route_and_the_time_for_people) {
  const CommandResult result =
      run_orrery({"net", "send", "--network", kNetworkDir + "Ring_16npus.yml", "--backend",
                  "congestion-aware", "--src", "1", "--dst", "4", "--size", "1MiB"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("60,093 ns"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("3 hops"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("1,048,576 B"), std::string::npos) << result.out;
}

TEST(NetCli, info_lists_ranks_dimensions_links_and_bandwidth) {
  const std::string network =
      write_network("info",
                    "topology: [ Ring, FullyConnected, Switch ]\nnpus_count: [ 2, 8, 4 ]\n"
                    "bandwidth: [ 200.0, 100.0, 12.5 ]\nlatency: [ 100.0, 500.0, 936.25 ]\n");
  const CommandResult text = run_orrery({"net", "info", "--network", network});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  for (const char* expected :
       {"ranks:      64", "dimensions: 3", "12.5 GB/s", "936.25 ns", "FullyConnected", "Switch"}) {
    EXPECT_NE(text.out.find(expected), std::string::npos) << expected << "\n" << text.out;
  }
  const CommandResult json = run_orrery({"net", "info", "--network", network, "--json"});
  EXPECT_EQ(json.exit_code, 0) << json.err;
  // Links: Ring(2) 32 groups x 4, FC(8) 8 groups x 56, Switch(4) 16 groups x 8.
  EXPECT_NE(json.out.find("\"ranks\": 64"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"links\": 704"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"bandwidth_gbps\": 12.5"), std::string::npos) << json.out;
  std::filesystem::remove(network);
}

TEST(NetCli, help_describes_send_and_info) {
  const CommandResult result = run_orrery({"net", "--help"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_NE(result.out.find("send"), std::string::npos);
  EXPECT_NE(result.out.find("info"), std::string::npos);
  const CommandResult send_help = run_orrery({"net", "send", "--help"});
  for (const char* flag : {"--network", "--backend", "--src", "--dst", "--size", "--json"}) {
    EXPECT_NE(send_help.out.find(flag), std::string::npos) << flag;
  }
}

TEST(NetCli, a_bad_network_file_fails_with_its_line) {
  const std::string network =
      write_network("bad",
                    "topology: [ Ring, Ring ]\nnpus_count: [ 4, 4 ]\nbandwidth: [ 50 ]\n"
                    "latency: [ 500, 500 ]\n");
  const CommandResult result = run_orrery({"net", "info", "--network", network});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find(network + ":3: key 'bandwidth'"), std::string::npos) << result.err;
  std::filesystem::remove(network);
}

TEST(NetCli, bad_arguments_fail_with_a_message) {
  const std::string ring = kNetworkDir + "Ring_4npus.yml";
  const struct {
    std::vector<std::string> args;
    const char* message;
  } cases[] = {
      {{"net", "send", "--src", "0", "--dst", "1", "--size", "1"}, "missing --network"},
      {{"net", "send", "--network", ring, "--src", "0", "--dst", "4", "--size", "1"},
       "--dst 4 is out of range: the network has 4 ranks"},
      {{"net", "send", "--network", ring, "--src", "x", "--dst", "1", "--size", "1"},
       "--src 'x' is not a rank"},
      {{"net", "send", "--network", ring, "--src", "0", "--dst", "1"}, "missing --size"},
      {{"net", "send", "--network", ring, "--src", "0", "--dst", "1", "--size", "lots"},
       "--size: cannot read 'lots'"},
      {{"net", "send", "--network", ring, "--backend", "garnet", "--src", "0", "--dst", "1",
        "--size", "1"},
       "unknown network backend 'garnet'"},
      {{"net", "info", "--network", kNetworkDir + "missing.yml"}, "cannot open the network file"},
  };
  for (const auto& c : cases) {
    const CommandResult result = run_orrery(c.args);
    EXPECT_EQ(result.exit_code, 1) << c.message;
    EXPECT_NE(result.err.find(c.message), std::string::npos) << result.err;
    EXPECT_EQ(result.err.rfind("orrery: error: ", 0), 0u) << result.err;
  }
}

TEST(NetCli, a_message_to_oneself_takes_no_time) {
  const CommandResult result =
      run_orrery({"net", "send", "--network", kNetworkDir + "Ring_8npus.yml", "--src", "3", "--dst",
                  "3", "--size", "1GiB", "--json"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(json_time_ns(result.out), 0);
}

}  // namespace net_cli_test
}  // namespace orrery

namespace orrery {
namespace net_cli_test {

TEST(NetCli, send_and_info_read_graph_topologies) {
  // A 2-leaf Clos: 200 Gb/s = 25e9 B/s everywhere, 5 us to the leaf, 12.5 us to the spine.
  const std::string clos =
      write_network("clos", "generator: clos2\nleaves: 2\nnpus_per_leaf: 2\nspines: 1\n");
  // 1 MiB from npu0 to npu3: four hops. Cut-through (flow, analytical): 35 us + one
  // serialization of 41,943.04 ns; store and forward: four serializations.
  const struct {
    const char* backend;
    long long ns;
  } cases[] = {{"flow", 76'943},
               {"analytical", 76'943},
               {"congestion-aware", 202'772},
               {"roce", 0}};  // packets: its route is checked, its time by tests/network
  for (const auto& c : cases) {
    const CommandResult result =
        run_orrery({"net", "send", "--network", clos, "--backend", c.backend, "--src", "0", "--dst",
                    "3", "--size", "1MiB", "--json"});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    if (c.ns != 0) {
      EXPECT_EQ(json_time_ns(result.out), c.ns) << c.backend;
    }
    // roce also lists the links its acknowledgements took back; they are not the route.
    EXPECT_NE(result.out.find("\"hops\": 4, \"hops_per_tier\": [2, 2]"), std::string::npos)
        << result.out;
    EXPECT_NE(result.out.find("\"path\": \"npu0 -> leaf0 -> spine0 -> leaf1 -> npu3\""),
              std::string::npos)
        << result.out;
  }
  const CommandResult info = run_orrery({"net", "info", "--network", clos});
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("switches:   3"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("links:      12 (directed"), std::string::npos) << info.out;
  // 200 Gb/s is 23.283064365 GB/s (2^30 bytes), wider than its column: still apart from the size.
  EXPECT_NE(info.out.find(" 2 23.283064365 GB/s"), std::string::npos) << info.out;
  const struct {
    std::vector<std::string> args;
    const char* message;
  } bad_cases[] = {
      {{"--src", "0", "--dst", "9", "--size", "1"},
       "--dst 9 is out of range: the network has 4 ranks"},
      {{"--src", "0", "--dst", "3", "--size", "1000000TiB"},
       "--size 1000000TiB: the message would take more than 2^61 ps (26 days) on link 0"},
      {{"--src", "0", "--dst", "3", "--size", "1", "--backend", "garnet"},
       "--backend: unknown network backend 'garnet' (expected analytical, congestion-aware, "
       "flow, roce)"},
  };
  for (const auto& c : bad_cases) {
    std::vector<std::string> args = {"net", "send", "--network", clos};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const CommandResult bad = run_orrery(args);
    EXPECT_EQ(bad.exit_code, 1) << c.message;
    EXPECT_NE(bad.err.find(c.message), std::string::npos) << bad.err;
  }
  std::filesystem::remove(clos);
}

}  // namespace net_cli_test
}  // namespace orrery
