// Issue 17's examples, each as a user hits it: every one gives a correct result or one clear error
// naming the file (or flag, or node) and what is wrong, exit code 1, in bounded time and memory
// (docs/numbers.md). Memory is the child's peak resident set, measured with wait4.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "chakra/trace_builder.h"
#include "chakra/trace_file.h"
#include "e2e/measured_run.h"
#include "e2e/run_command.h"

namespace orrery {
namespace hostile_input_test {

using test::TempDir;

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

constexpr const char* kSystem =
    R"({"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
 "preferred-dataset-splits": 1, "all-reduce-implementation": ["ring"],
 "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["ring"],
 "all-to-all-implementation": ["ring"], "collective-optimization": "baseline",
 "local-mem-bw": 1600})";
constexpr const char* kRing4 =
    "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n";

// Four rank files of one all-reduce of `bytes`, after a compute node of `micros` when nonzero.
void write_all_reduce(const std::string& prefix, int64_t bytes, uint64_t micros = 0) {
  for (int rank = 0; rank < 4; ++rank) {
    ChakraProtoMsg::GlobalMetadata metadata;
    metadata.set_version("0.0.4");
    Expected<chakra::TraceWriter> writer =
        chakra::TraceWriter::create(prefix + "." + std::to_string(rank) + ".et", metadata);
    ASSERT_TRUE(writer);
    if (micros > 0) {
      ChakraProtoMsg::Node compute = test::make_node(0, ChakraProtoMsg::COMP_NODE);
      compute.set_duration_micros(micros);
      test::add_attr(compute, "is_cpu_op").set_bool_val(false);
      ASSERT_TRUE(writer->write(compute));
    }
    ASSERT_TRUE(writer->write(test::coll_node(1, ChakraProtoMsg::ALL_REDUCE, bytes, {})));
    ASSERT_TRUE(writer->close());
  }
}

class HostileInput : public ::testing::Test {
 protected:
  void SetUp() override {
    write(dir.file("sys.json"), kSystem);
    write(dir.file("ring4.yml"), kRing4);
  }
  Measured run(std::vector<std::string> args) { return run_measured(args, dir.file("")); }
  // `orrery run` of the prefix on the 4-rank ring with the standard system file.
  Measured simulate(const std::string& prefix, std::vector<std::string> more = {}) {
    std::vector<std::string> args{"run", "-q",
                                  "-w",  dir.file(prefix),
                                  "-s",  dir.file("sys.json"),
                                  "-n",  dir.file("ring4.yml")};
    args.insert(args.end(), more.begin(), more.end());
    return run(args);
  }
  // One clear error, exit 1, bounded memory.
  static void expect_error(const Measured& result, const std::string& fragment) {
    EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
    EXPECT_NE(result.err.find("orrery: error: "), std::string::npos) << result.err;
    EXPECT_NE(result.err.find(fragment), std::string::npos) << result.err;
    EXPECT_LT(result.err.size(), 2000u) << "one message, not a page";
    EXPECT_LT(result.max_rss_kb, kMemoryLimitKb);
  }
  static std::string simulated_ns(const Measured& result) {
    const std::string key = "simulated time          ";
    const size_t at = result.out.find(key);
    if (at == std::string::npos) return "";
    return result.out.substr(at + key.size(), result.out.find(" ns", at) - at - key.size());
  }
  TempDir dir;
};

// "a collective of 2^59 bytes simulates in 0 ns, and 2^62 bytes finishes faster than 2^58"
TEST_F(HostileInput, collectives_beyond_two_to_the_50_bytes_are_refused_by_node) {
  for (const int shift : {58, 59, 62}) {
    const std::string prefix = "ar" + std::to_string(shift);
    write_all_reduce(dir.file(prefix), int64_t{1} << shift);
    expect_error(simulate(prefix), "node 1: comm_size");
    const Measured validate = run({"trace", "validate", dir.file(prefix + ".0.et")});
    EXPECT_EQ(validate.exit_code, 1) << validate.out;
    EXPECT_NE(validate.out.find("is more than 2^50 bytes (1 PiB)"), std::string::npos)
        << validate.out;
  }
  // Up to the limit, bigger is slower, never faster, and the time is the closed form: a ring
  // all-reduce of S bytes on 4 ranks sends 2 (n - 1) S / n over 50 GiB/s and reduces three chunks
  // of S / 4 with 3 accesses each at 1,600 GB/s (latencies are below the 0.01% asked).
  write_all_reduce(dir.file("ar40"), int64_t{1} << 40);
  write_all_reduce(dir.file("ar50"), int64_t{1} << 50);
  const Measured small = simulate("ar40");
  const Measured large = simulate("ar50");
  ASSERT_EQ(small.exit_code, 0) << small.err;
  ASSERT_EQ(large.exit_code, 0) << large.err;
  auto closed_form_s = [](double bytes) {
    return 1.5 * bytes / (50.0 * 1073741824.0) + 9.0 * (bytes / 4) / 1.6e12;
  };
  auto seconds = [](const std::string& text) {
    std::string digits;
    for (const char c : text) {
      if (c != ',') digits += c;
    }
    return std::stod(digits) / 1e9;
  };
  EXPECT_NEAR(seconds(simulated_ns(large)) / closed_form_s(std::ldexp(1.0, 50)), 1.0, 1e-4);
  EXPECT_NEAR(seconds(simulated_ns(small)) / closed_form_s(std::ldexp(1.0, 40)), 1.0, 1e-4);
  // And the generator refuses to write what no run takes.
  expect_error(run({"gen", "microbench", "--collective", "all-reduce", "--size",
                    "576460752303423488", "--ranks", "4", "-o", dir.file("g")}),
               "--size 576,460,752,303,423,488 bytes: more than 2^50 bytes (1 PiB)");
}

// "a duration_micros near 2^64 makes a run shorter than the same run without compute"
TEST_F(HostileInput, durations_beyond_the_run_limit_are_refused_and_validate_says_so) {
  write_all_reduce(dir.file("long"), 1 << 20, 18'446'744'073'709'551ULL);
  expect_error(simulate("long"), "node 0: duration_micros 18,446,744,073,709,551 is more than");
  const Measured validate = run({"trace", "validate", dir.file("long.0.et")});
  EXPECT_EQ(validate.exit_code, 1);
  EXPECT_NE(validate.out.find("invalid in lenient mode"), std::string::npos) << validate.out;
}

// A run whose times add up past 2^61 ps ends with an error naming the work in flight, not a
// wrapped-around time.
TEST_F(HostileInput, a_run_past_the_time_limit_names_the_limit) {
  write_all_reduce(dir.file("slow"), 1 << 20, 2'000'000'000'000ULL);  // 23 days of compute
  write(dir.file("sys2.json"), kSystem);
  const Measured fine = simulate("slow");
  ASSERT_EQ(fine.exit_code, 0) << fine.err;
  // --compute-scale 2 makes it 46 days: past the limit.
  const Measured result = simulate("slow", {"--compute-scale", "2"});
  expect_error(result, "the simulated time passes 2,305,843,009,213,693 ns (2^61 ps");
  EXPECT_NE(result.err.find("rank 0"), std::string::npos) << result.err;
}

// "a system file's local-mem-bw of 1e-12 gives 0 ns and 1e-300 a few microseconds, the remote
// memory file's bandwidth likewise"
TEST_F(HostileInput, bandwidths_below_a_megabyte_per_second_are_refused_by_file_and_line) {
  std::string system = kSystem;
  system.replace(system.find("\"local-mem-bw\": 1600"), 20, "\"local-mem-bw\": 1e-12");
  write(dir.file("tiny.json"), system);
  write_all_reduce(dir.file("w"), 1 << 20);
  expect_error(
      run({"run", "-w", dir.file("w"), "-s", dir.file("tiny.json"), "-n", dir.file("ring4.yml")}),
      "tiny.json:5: key 'local-mem-bw': expected a number from 0.001 to 1e+18 GB/s, "
      "found 1e-12");
  write(dir.file("mem.json"), R"({"memory-type": "PER_NPU_MEMORY_EXPANSION",
  "remote-mem-latency": 500, "remote-mem-bw": 1e-300})");
  expect_error(simulate("w", {"-m", dir.file("mem.json")}),
               "mem.json:2: key 'remote-mem-bw': expected a number from 0.001 to 1e+09 GB/s, "
               "found 1e-300");
}

// "--compute-scale nan is accepted and gives 0 ns; --comm-scale 1e30 gives 0 ns"; "range errors
// that print a 309-digit number"
TEST_F(HostileInput, scales_refuse_nan_infinities_and_absurd_factors_in_short_words) {
  write_all_reduce(dir.file("w"), 1 << 20, 5);
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"--compute-scale", "nan"},
                                                        {"--comm-scale", "1e30"},
                                                        {"--comm-scale", "inf"},
                                                        {"--injection-scale", "-1"},
                                                        {"--compute-scale", "0"}}) {
    const Measured result = simulate("w", {flag, value});
    expect_error(result, flag + ": expected a number from 1e-09 to 1e+09, found");
    EXPECT_LT(result.err.size(), 200u) << result.err;
  }
  // The largest scale still in range, applied to a size: the product is checked per node.
  write_all_reduce(dir.file("w2"), 1 << 21);
  const Measured product = simulate("w2", {"--comm-scale", "1e9"});
  expect_error(product, "node 1: comm_size 2,097,152 x --comm-scale 1e+09 is more than 2^50 bytes");
  const Measured scaled = simulate("w", {"--compute-scale", "2", "--comm-scale", "2"});
  EXPECT_EQ(scaled.exit_code, 0) << scaled.err;
}

// "a number out of double range in a JSON config (1e999)": was an uncaught exception, exit 134.
TEST_F(HostileInput, a_number_beyond_a_double_is_a_parse_error_with_its_line) {
  write(dir.file("big.json"),
        "{\n  \"scheduling-policy\": \"LIFO\",\n  \"endpoint-delay\": 1e999\n}");
  write_all_reduce(dir.file("w"), 1 << 20);
  expect_error(
      run({"run", "-w", dir.file("w"), "-s", dir.file("big.json"), "-n", dir.file("ring4.yml")}),
      "big.json:3: ");
}

// "a network of 2^30 NPUs under run --uniform or net send (bad_alloc)"
TEST_F(HostileInput, a_network_of_two_to_the_30_npus_is_refused_before_allocating) {
  write(dir.file("huge.yml"),
        "topology: [ Ring ]\nnpus_count: [ 1073741824 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n");
  write_all_reduce(dir.file("w"), 1 << 20);
  expect_error(run({"run", "-q", "--uniform", "-w", dir.file("w"), "-s", dir.file("sys.json"), "-n",
                    dir.file("huge.yml")}),
               "huge.yml:2: the dimensions up to 0 make more than 16,777,216 ranks (2^24)");
  for (const char* backend : {"analytical", "congestion-aware"}) {
    expect_error(run({"net", "send", "--network", dir.file("huge.yml"), "--backend", backend,
                      "--src", "0", "--dst", "1", "--size", "1MiB"}),
                 "more than 16,777,216 ranks (2^24)");
  }
}

// "gen inference --output-lengths 100000000" (bad_alloc); "gen llm --seq 0 silently meaning the
// default"
TEST_F(HostileInput, generators_refuse_plans_beyond_what_a_rank_file_holds) {
  expect_error(run({"gen", "inference", "--model", "llama2-7b", "--prompt-lengths", "16",
                    "--output-lengths", "100000000", "-o", dir.file("inf/s")}),
               "--output-lengths: 100000000 decode steps make at least 3200000000 nodes per rank");
  expect_error(run({"gen", "llm", "--model", "gpt3-6.7b", "--global-batch", "4", "--seq", "0", "-o",
                    dir.file("l/w")}),
               "--seq: expected 1 or more, found 0");
  expect_error(run({"gen", "llm", "--model", "gpt3-6.7b", "--global-batch", "100000000000", "-o",
                    dir.file("l/w")}),
               "micro-batches per pipeline make at least");
}

// "preferred-dataset-splits is accepted up to 2^32 - 1 and the work grows with its square"
TEST_F(HostileInput, dataset_splits_are_bounded_and_slow_values_warned_about) {
  write_all_reduce(dir.file("w"), 1 << 20);
  for (const char* splits : {"100000", "1000000", "4294967295"}) {
    std::string system = kSystem;
    system.replace(system.find("\"preferred-dataset-splits\": 1"), 29,
                   std::string("\"preferred-dataset-splits\": ") + splits);
    write(dir.file("split.json"), system);
    expect_error(run({"run", "-q", "-w", dir.file("w"), "-s", dir.file("split.json"), "-n",
                      dir.file("ring4.yml")}),
                 "key 'preferred-dataset-splits': expected an integer from 1 to 65536");
  }
  std::string system = kSystem;
  system.replace(system.find("\"preferred-dataset-splits\": 1"), 29,
                 "\"preferred-dataset-splits\": 5000");
  write(dir.file("slow.json"), system);
  const Measured slow = run(
      {"run", "-q", "-w", dir.file("w"), "-s", dir.file("slow.json"), "-n", dir.file("ring4.yml")});
  EXPECT_EQ(slow.exit_code, 0) << slow.err;
  EXPECT_NE(slow.err.find("orrery: warning: " + dir.file("slow.json") +
                          ":2: key 'preferred-dataset-splits': 5000 chunks per collective"),
            std::string::npos)
      << slow.err;
  // --strict makes that warning an error.
  expect_error(run({"run", "-q", "--strict", "-w", dir.file("w"), "-s", dir.file("slow.json"), "-n",
                    dir.file("ring4.yml")}),
               "5000 chunks per collective");
}

// "a system file with more implementations per list than the network has dimensions accepted
// without a word (ASTRA-sim asserts)"
TEST_F(HostileInput, more_implementations_than_dimensions_is_an_error) {
  std::string system = kSystem;
  const std::string one = "\"all-reduce-implementation\": [\"ring\"]";
  system.replace(system.find(one), one.size(),
                 "\"all-reduce-implementation\": [\"ring\", \"ring\", \"ring\"]");
  write(dir.file("three.json"), system);
  write_all_reduce(dir.file("w"), 1 << 20);
  expect_error(run({"run", "-q", "-w", dir.file("w"), "-s", dir.file("three.json"), "-n",
                    dir.file("ring4.yml")}),
               "key 'all-reduce-implementation' lists 3 implementation(s) but the network has 1 "
               "dimension(s)");
}

// "duplicate keys in YAML and JSON configs silently resolved (first wins in one reader, last in
// another); unknown keys in ASTRA-sim network files ignored without a warning"
TEST_F(HostileInput, duplicate_keys_are_errors_and_unknown_network_keys_warnings) {
  write_all_reduce(dir.file("w"), 1 << 20);
  write(dir.file("dup.json"), std::string(kSystem).insert(1, "\"endpoint-delay\": 20000,\n"));
  expect_error(run({"run", "-q", "-w", dir.file("w"), "-s", dir.file("dup.json"), "-n",
                    dir.file("ring4.yml")}),
               "dup.json:2: key 'endpoint-delay' is given twice (first on line 1)");
  write(dir.file("dup.yml"), std::string(kRing4) + "latency: [ 1.0 ]\n");
  expect_error(run({"net", "info", "--network", dir.file("dup.yml")}),
               "dup.yml:5: key 'latency' is given twice (first on line 4)");
  write(dir.file("typo.yml"), std::string(kRing4) + "latancy: [ 1.0 ]\n");
  const Measured warned = simulate("w");
  EXPECT_EQ(warned.exit_code, 0);
  const Measured typo = run(
      {"run", "-q", "-w", dir.file("w"), "-s", dir.file("sys.json"), "-n", dir.file("typo.yml")});
  EXPECT_EQ(typo.exit_code, 0) << typo.err;
  EXPECT_NE(typo.err.find("orrery: warning: " + dir.file("typo.yml") +
                          ":5: key 'latancy' is not an ASTRA-sim network key"),
            std::string::npos)
      << typo.err;
  expect_error(run({"run", "-q", "--strict", "-w", dir.file("w"), "-s", dir.file("sys.json"), "-n",
                    dir.file("typo.yml")}),
               "key 'latancy' is not an ASTRA-sim network key (topology, npus_count, bandwidth, "
               "latency); ignored (--strict: warnings are errors)");
  const Measured info = run({"net", "info", "--network", dir.file("typo.yml")});
  EXPECT_EQ(info.exit_code, 0);
  EXPECT_NE(info.err.find("key 'latancy' is not an ASTRA-sim network key"), std::string::npos)
      << info.err;
}

// "a self-loop link reported without its file line or switch name"
TEST_F(HostileInput, a_self_loop_names_its_line_and_switch) {
  write(dir.file("self.yml"),
        "npus: 2\nswitches: [s0]\nlinks:\n  - [npu0, s0, 100Gbps, 1us]\n"
        "  - [npu1, s0, 100Gbps, 1us]\n  - [s0, s0, 100Gbps, 1us]\n");
  expect_error(run({"topo", "validate", dir.file("self.yml")}),
               "self.yml:6: link [s0, s0] connects 's0' to itself");
}

// "libra --given -1,2,3 accepted with an inf ms row"; "LIBRA with -c 'sum = 1e308' (the LP solver
// aborts)"
TEST_F(HostileInput, libra_refuses_negative_given_bandwidths_and_absurd_constraints) {
  const std::string problem =
      std::string(ORRERY_TEST_DATA_DIR) + "/../../examples/libra/tp_dp_3d.yml";
  expect_error(run({"libra", problem, "--given", "-1,2,3"}),
               "--given: expected a number from 0.001 to 1e+09, found -1");
  expect_error(run({"libra", problem, "-c", "sum = 1e308"}),
               "constraint 'sum = 1e308': the number 1e+308 is out of range");
  expect_error(run({"libra", problem, "-c", "sum = 1e999"}), "constraint 'sum = 1e999'");
}

// "an unknown verb answered with 'A subcommand is required'; parse errors exiting with codes
// 104-114 while every other error exits 1"
TEST_F(HostileInput, usage_errors_exit_1_and_name_the_unknown_verb) {
  expect_error(run({"simulate"}), "unknown verb 'simulate' for orrery (expected one of: trace,");
  expect_error(run({"trace", "valdiate", "x.et"}), "unknown verb 'valdiate' for orrery trace");
  expect_error(run({"run", "--no-such-flag"}), "");
  expect_error(run({"gen", "microbench", "--ranks", "many"}), "--ranks");
  expect_error(run({}), "A subcommand is required");
  EXPECT_EQ(run({"--help"}).exit_code, 0);
  EXPECT_EQ(run({"run", "--help"}).exit_code, 0);
  EXPECT_EQ(run({"--version"}).exit_code, 0);
  // The verbs that are executables of their own (libtorch, MPI) answer the same way, not with
  // CLI11's codes 106 and 109 and its bare message.
  expect_error(run({"sweep", "--bogus"}), "The following argument was not expected: --bogus");
  expect_error(run({"replay", "--bogus"}), "The following argument was not expected: --bogus");
  expect_error(run({"partition", "--model", "m.pt"}), "is required");
  expect_error(run({"synth", "train", "--corpus", "c"}), "--output is required");
  EXPECT_EQ(run({"sweep", "--help"}).exit_code, 0);
}

// Found by feeding every flag of every verb "-1", "nan", huge and empty values: CLI11 wrapped
// "-1" around for unsigned options ("gen dlrm --rows -1" made tables of 2^64 - 1 rows), a thread
// count of 10^20 aborted the sweep creating its threads, and --time-limit took nan.
TEST_F(HostileInput, negative_whole_numbers_and_thread_counts_are_refused) {
  expect_error(run({"gen", "dlrm", "--model", "dlrm-mlperf", "--ranks", "8", "--rows", "-1", "-o",
                    "unused"}),
               "--rows: expected a whole number of 0 or more, found '-1'");
  expect_error(run({"trace", "validate", "--examples", "-1", "x.et"}),
               "--examples: expected a whole number of 0 or more, found '-1'");
  // Beyond 2^64 - 1 CLI11 took 2^64 - 1.
  expect_error(run({"replay", "--seed", "99999999999999999999", "x.json"}),
               "--seed: '99999999999999999999' is beyond 2^64 - 1");
  expect_error(run({"replay", "--iteration", "99999999999999999999", "x.json"}),
               "--iteration: '99999999999999999999' is beyond 2^63 - 1");
  expect_error(run({"sweep", "s.yml", "--threads", "99999999999999999999"}),
               "--threads: expected a thread count from 0 (one per core) to 4096, found "
               "'99999999999999999999'");
  expect_error(run({"run", "-j", "-1", "-w", "x"}),
               "--threads: expected a thread count from 0 (one per core) to 4096, found '-1'");
  expect_error(run({"gen", "llm", "--threads", "5000"}), "--threads: expected a thread count");
  expect_error(
      run({"shard", "plan", "--model", "dlrm-mlperf", "--world-size", "2", "--time-limit", "nan"}),
      "--time-limit: expected a number from 0.001 to 1e+06, found nan");
}

// The README said what the binary did not: "gen dlrm --list-models showing pooling 26 when the
// default is one lookup per table"; "topo generate --list listing rail's nvlink_* parameters
// twice"; "trace rescale --comm-group where every other verb says --comm-groups".
TEST_F(HostileInput, listings_and_flags_say_what_the_readme_says) {
  const Measured models = run({"gen", "dlrm", "--list-models"});
  ASSERT_EQ(models.exit_code, 0);
  EXPECT_NE(models.out.find("dlrm-kaggle      26    16      6,432,181         1 "),
            std::string::npos)
      << models.out;
  const Measured list = run({"topo", "generate", "--list"});
  ASSERT_EQ(list.exit_code, 0);
  const std::string rail = list.out.substr(list.out.find("\nrail\n"));
  const std::string rail_only = rail.substr(0, rail.find("\n\n", 1));
  size_t count = 0;
  for (size_t at = rail_only.find("nvlink_bandwidth"); at != std::string::npos;
       at = rail_only.find("nvlink_bandwidth", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 1u) << rail_only;
  const Measured help = run({"trace", "rescale", "--help"});
  EXPECT_NE(help.out.find("--comm-groups"), std::string::npos) << help.out;
}

}  // namespace hostile_input_test
}  // namespace orrery
