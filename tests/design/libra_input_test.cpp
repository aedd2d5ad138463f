// LIBRA's files read unchanged, orrery's problem file, and constraint text.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "design/libra_input.h"
#include "scratch_dir.h"

// Some inputs are the public files in ../shared/data; without that folder these tests skip.
#define SKIP_WITHOUT_SHARED_DATA()                            \
  if (!std::filesystem::is_directory(ORRERY_SHARED_DATA_DIR)) \
  GTEST_SKIP() << "no " ORRERY_SHARED_DATA_DIR

namespace orrery::design {
namespace libra_input_test {

std::string libra_input(const std::string& relative) {
  return std::string(ORRERY_SHARED_DATA_DIR) + "/astra-sim+libra/inputs/" + relative;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = (test::scratch_dir("libra-input") / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(LibraConstraint, sums_orderings_factors_and_fixed_values_parse) {
  Expected<LinearConstraint> a = parse_constraint("sum = 500", 3);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->coefficients, (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(a->relation, Relation::kEqual);
  EXPECT_EQ(a->rhs, 500);
  Expected<LinearConstraint> b = parse_constraint("B0 >= B1", 3);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->coefficients, (std::vector<double>{1, -1, 0}));
  EXPECT_EQ(b->relation, Relation::kGreaterEqual);
  EXPECT_EQ(b->rhs, 0);
  Expected<LinearConstraint> c = parse_constraint("2*B2 + 0.5 B0 - 10 <= B1 + 40", 3);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->coefficients, (std::vector<double>{0.5, -1, 2}));
  EXPECT_EQ(c->relation, Relation::kLessEqual);
  EXPECT_EQ(c->rhs, 50);
}

TEST(LibraConstraint, bad_text_names_the_problem) {
  Expected<LinearConstraint> a = parse_constraint("B3 = 5", 3);
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message().find("B3 but the network has 3 dimensions"), std::string::npos)
      << a.error().message();
  Expected<LinearConstraint> b = parse_constraint("B0 >= B1 >= B2", 3);
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message().find("one relation per constraint"), std::string::npos);
  Expected<LinearConstraint> c = parse_constraint("B0 + X = 3", 3);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message().find("unknown term 'x'"), std::string::npos);
  EXPECT_FALSE(parse_constraint("500 = 500", 3));
  EXPECT_FALSE(parse_constraint("B0 500", 3));
}

TEST(LibraFiles, libra_networks_read_unchanged) {
  SKIP_WITHOUT_SHARED_DATA();
  Expected<std::vector<Dimension>> three =
      load_libra_network(libra_input("network/3d_network.yml"));
  ASSERT_TRUE(three) << three.error().message();
  ASSERT_EQ(three->size(), 3u);
  EXPECT_EQ((*three)[0].kind, TopologyKind::kRing);
  EXPECT_EQ((*three)[1].kind, TopologyKind::kFullyConnected);
  EXPECT_EQ((*three)[2].kind, TopologyKind::kSwitch);
  EXPECT_EQ((*three)[0].size, 16u);
  EXPECT_EQ((*three)[2].size, 32u);
  EXPECT_EQ((*three)[2].cost_dimension, "InterPod");
  Expected<std::vector<Dimension>> four = load_libra_network(libra_input("network/4d_network.yml"));
  ASSERT_TRUE(four);
  EXPECT_EQ(four->size(), 4u);
  EXPECT_EQ((*four)[0].cost_dimension, "InterChiplet");
}

TEST(LibraFiles, every_libra_workload_reads_with_its_layer_count) {
  SKIP_WITHOUT_SHARED_DATA();
  const std::pair<const char*, size_t> expected[] = {
      {"GPT_3", 18}, {"MSFT_1T", 18}, {"ResNet_50", 54}, {"Turing_NLG", 18}, {"DLRM", 20}};
  for (const auto& [name, layers] : expected) {
    Expected<std::vector<Layer>> loaded =
        load_libra_workload(libra_input(std::string("workload/") + name + ".txt"));
    ASSERT_TRUE(loaded) << loaded.error().message();
    EXPECT_EQ(loaded->size(), layers) << name;
  }
  Expected<std::vector<Layer>> gpt = load_libra_workload(libra_input("workload/GPT_3.txt"));
  ASSERT_TRUE(gpt);
  // Q1 -1 9375000 NONE 0 9375000 ALLREDUCE 805306368 9375000 ALLREDUCE 452984832 10
  EXPECT_EQ((*gpt)[0].name, "Q1");
  EXPECT_EQ((*gpt)[0].phases[1].collective, CollectiveKind::kAllReduce);
  EXPECT_EQ((*gpt)[0].phases[1].bytes, 805306368.0);
  EXPECT_EQ((*gpt)[0].phases[2].bytes, 452984832.0);
  EXPECT_EQ((*gpt)[0].phases[0].compute_ns, 9375000.0);
}

TEST(LibraFiles, communicator_and_cost_model_read_unchanged) {
  SKIP_WITHOUT_SHARED_DATA();
  auto groups = load_libra_communicator(libra_input("communicator/GPT_3_4d.yml"));
  ASSERT_TRUE(groups) << groups.error().message();
  EXPECT_EQ((*groups)[0], (std::vector<int32_t>{4, 4, -1, -1}));
  EXPECT_EQ((*groups)[2], (std::vector<int32_t>{-1, 2, 4, 32}));
  auto cost = load_libra_cost_model(libra_input("cost_model/3d_cost_model.yml"));
  ASSERT_TRUE(cost) << cost.error().message();
  ASSERT_EQ(cost->size(), 3u);
  EXPECT_EQ((*cost)[2].first, "InterPod");
  EXPECT_DOUBLE_EQ((*cost)[2].second.nic, 31.60003);
  EXPECT_DOUBLE_EQ((*cost)[0].second.link, 4.00001);
}

TEST(LibraFiles, workload_line_with_missing_fields_names_file_and_line) {
  const std::string path =
      write_temp("bad.txt", "a -1 1 NONE 0 1 NONE 0 1 NONE 0 10\nb -1 1 NONE 0 1 NONE\n");
  Expected<std::vector<Layer>> layers = load_libra_workload(path);
  ASSERT_FALSE(layers);
  EXPECT_NE(layers.error().message().find("bad.txt:2: 7 fields, expected 12"), std::string::npos)
      << layers.error().message();
  const std::string path2 = write_temp("bad2.txt", "a -1 1 BROADCAST 5 1 NONE 0 1 NONE 0 10\n");
  Expected<std::vector<Layer>> layers2 = load_libra_workload(path2);
  ASSERT_FALSE(layers2);
  EXPECT_NE(layers2.error().message().find("bad2.txt:1: unknown collective 'BROADCAST'"),
            std::string::npos)
      << layers2.error().message();
}

TEST(LibraFiles, problem_file_inline_and_by_reference) {
  SKIP_WITHOUT_SHARED_DATA();
  const std::string path = write_temp("problem.yml", R"(name: tiny
network:
  - {topology: Ring, size: 4, cost_dimension: A}
  - {topology: Switch, size: 8, cost_dimension: B}
workload:
  - name: l0
    forward: {compute_ns: 100, collective: all-reduce, bytes: 1000, groups: [4, 8]}
  - name: l1
    weight_grad: {compute_ns: 50, collective: ALLGATHER, bytes: 10}
communicator:
  weight_grad: [-1, 8]
cost_model:
  A: {Link: 2}
  B: {Link: 3, Switch: 5, Nic: 7}
constraints: ["sum = 100", "B0 >= B1"]
objective: PerfOpt
baseline: [60, 40]
)");
  Expected<Problem> problem = load_problem(path);
  ASSERT_TRUE(problem) << problem.error().message();
  EXPECT_EQ(problem->workload_name, "tiny");
  ASSERT_EQ(problem->layers.size(), 2u);
  EXPECT_EQ(problem->layers[1].phases[2].groups, (std::vector<int32_t>{-1, 8}));
  EXPECT_EQ(problem->constraints.size(), 2u);
  EXPECT_EQ(problem->baseline, (std::vector<double>{60, 40}));

  const std::string by_reference = write_temp(
      "by_reference.json",
      fmt::format(R"({{"network": "{}", "workload": "{}", "communicator": "{}",
                      "cost_model": "{}", "constraints": ["sum = 500"]}})",
                  libra_input("network/3d_network.yml"), libra_input("workload/GPT_3.txt"),
                  libra_input("communicator/GPT_3_3d.yml"),
                  libra_input("cost_model/3d_cost_model.yml")));
  Expected<Problem> gpt = load_problem(by_reference);
  ASSERT_TRUE(gpt) << gpt.error().message();
  EXPECT_EQ(gpt->workload_name, "GPT_3");
  EXPECT_EQ(gpt->layers[0].phases[2].groups, (std::vector<int32_t>{-1, 8, 32}));
}

TEST(LibraFiles, problem_file_errors_name_file_and_line) {
  const std::string path = write_temp("bad_problem.yml", R"(network:
  - {topology: Ring, size: 4}
  - {topology: Torus, size: 8}
workload: []
)");
  Expected<Problem> problem = load_problem(path);
  ASSERT_FALSE(problem);
  EXPECT_NE(problem.error().message().find("bad_problem.yml:3: unknown topology 'Torus'"),
            std::string::npos)
      << problem.error().message();
  const std::string path2 = write_temp("bad_key.yml", "network: []\nworkloads: x\n");
  Expected<Problem> problem2 = load_problem(path2);
  ASSERT_FALSE(problem2);
  EXPECT_NE(problem2.error().message().find("bad_key.yml:2: unknown key 'workloads'"),
            std::string::npos)
      << problem2.error().message();
}

}  // namespace libra_input_test
}  // namespace orrery::design
