#include <gtest/gtest.h>

#include <set>

#include "synth/baseline.h"
#include "synth_test_support.h"

namespace orrery::synth {
namespace baseline_test {

TEST(Baseline, depth_buckets_double) {
  EXPECT_EQ(depth_bucket(0), 0u);
  EXPECT_EQ(depth_bucket(3), 3u);
  EXPECT_EQ(depth_bucket(4), 4u);
  EXPECT_EQ(depth_bucket(5), 4u);
  EXPECT_EQ(depth_bucket(6), 5u);
  EXPECT_EQ(depth_bucket(8), 6u);
  EXPECT_EQ(depth_bucket(12), 7u);
  EXPECT_EQ(depth_bucket(16), 8u);
}

TEST(Baseline, a_corpus_of_one_chain_gives_prefixes_of_that_chain) {
  // Every layer has one node with one parent in the layer before, and each depth has one class
  // tuple: the counts allow only the chain, cut where the size chain draws its end (at most as
  // deep as the corpus).
  const Dag dag = test::chain_with_all_reduce(3);
  const Codebook book = Codebook::fit({dag}, {});
  const EncodedDag encoded = encode_dag(layer_dag(dag), book);
  const Baseline baseline = Baseline::fit({encoded}, 64);
  Rng rng(3);
  std::set<uint32_t> sizes;
  for (int idx = 0; idx < 40; ++idx) {
    const EncodedDag sample = baseline.sample(rng, 4);
    ASSERT_GE(sample.size(), 1u);
    ASSERT_LE(sample.size(), 4u);
    sizes.insert(sample.size());
    EXPECT_EQ(sample.ranks, 4u);
    for (uint32_t node = 0; node < sample.size(); ++node)
      EXPECT_EQ(sample.x[node], encoded.x[node]);
    std::vector<std::pair<uint32_t, uint32_t>> chain;
    for (uint32_t node = 1; node < sample.size(); ++node) chain.emplace_back(node - 1, node);
    EXPECT_EQ(sample.edges, chain);
  }
  EXPECT_EQ(sizes.size(), 4u);  // every length from 1 to 4 is drawn
}

TEST(Baseline, samples_stay_in_the_window_and_survive_json) {
  // A fan: one source, then layers of 4 that each depend on the whole layer before.
  Dag dag;
  dag.nodes.push_back(test::compute(1, 1));
  uint32_t previous_first = 0, previous_size = 1;
  for (int layer = 0; layer < 5; ++layer) {
    const uint32_t first = dag.size();
    for (int idx = 0; idx < 4; ++idx) {
      dag.nodes.push_back(test::collective(NodeKind::kAllGather, 1024));
      for (uint32_t parent = previous_first; parent < previous_first + previous_size; ++parent) {
        dag.edges.emplace_back(parent, dag.size() - 1);
      }
    }
    previous_first = first;
    previous_size = 4;
  }
  const Codebook book = Codebook::fit({dag}, {});
  const EncodedDag encoded = encode_dag(layer_dag(dag), book);
  const Baseline baseline = Baseline::fit({encoded}, 10);
  Expected<Baseline> back = Baseline::from_json(baseline.to_json());
  ASSERT_TRUE(back) << back.error().message();
  Rng a(11), b(11);
  for (int idx = 0; idx < 5; ++idx) {
    const EncodedDag sample = baseline.sample(a, 2);
    EXPECT_LE(sample.size(), 10u);
    EXPECT_EQ(sample.layer_start[1], 1u);
    const EncodedDag again = back->sample(b, 2);
    EXPECT_EQ(sample.x, again.x);
    EXPECT_EQ(sample.edges, again.edges);
    for (const auto& [parent, child] : sample.edges) EXPECT_LT(parent, child);
  }
}

TEST(Baseline, bad_json_is_an_error) {
  Expected<Baseline> bad = Baseline::from_json(nlohmann::json{{"first_size", 3}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("baseline"), std::string::npos);
}

}  // namespace baseline_test
}  // namespace orrery::synth
