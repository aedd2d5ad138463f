#include <gtest/gtest.h>

#include "synth/codebook.h"
#include "synth_test_support.h"

namespace orrery::synth {
namespace codebook_test {

TEST(Quantizer, few_distinct_values_get_a_bin_each_and_decode_exactly) {
  const Quantizer q = Quantizer::fit({0, 1024, 4096, 1024, 0, 65536}, 8);
  ASSERT_EQ(q.classes(), 4u);  // zero + three values
  EXPECT_EQ(q.encode(0), 0u);
  EXPECT_EQ(q.encode(1024), 1u);
  EXPECT_EQ(q.encode(4096), 2u);
  EXPECT_EQ(q.encode(65536), 3u);
  for (uint64_t value : {1024u, 4096u, 65536u}) EXPECT_EQ(q.decode(q.encode(value)), value);
  EXPECT_EQ(q.decode(0), 0u);
  // Between and beyond the corpus's values: the bin above, or the last one.
  EXPECT_EQ(q.encode(2000), 2u);
  EXPECT_EQ(q.encode(1u << 30), 3u);
}

TEST(Quantizer, many_values_get_quantile_bins_decoding_to_their_median) {
  std::vector<uint64_t> values;
  for (uint64_t value = 1; value <= 100; ++value) values.push_back(value);
  const Quantizer q = Quantizer::fit(values, 4);
  // Cuts at ranks 25, 50, 75 (values 26, 51, 76), then the maximum.
  EXPECT_EQ(q.upper_bounds(), (std::vector<uint64_t>{26, 51, 76, 100}));
  EXPECT_EQ(q.encode(26), 1u);
  EXPECT_EQ(q.encode(27), 2u);
  EXPECT_EQ(q.decode(1), 13u);  // bin 1..26: median of 26 values is the 13th
  EXPECT_EQ(q.decode(4), 88u);  // bin 77..100
}

TEST(Quantizer, one_bin_holds_every_value_and_decodes_to_their_median) {
  // Was a read before the start of an empty vector: one bin makes no cut before the maximum.
  const Quantizer q = Quantizer::fit({0, 3, 1, 2, 9, 7}, 1);
  EXPECT_EQ(q.upper_bounds(), (std::vector<uint64_t>{9}));
  EXPECT_EQ(q.encode(0), 0u);
  EXPECT_EQ(q.encode(1), 1u);
  EXPECT_EQ(q.encode(9), 1u);
  EXPECT_EQ(q.decode(1), 3u);  // 1, 2, 3, 7, 9
}

TEST(Quantizer, survives_json) {
  const Quantizer q = Quantizer::fit({5, 10, 20, 40, 80, 160}, 3);
  Expected<Quantizer> back = Quantizer::from_json(q.to_json(), "test");
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(back->upper_bounds(), q.upper_bounds());
  for (uint32_t cls = 0; cls < q.classes(); ++cls) EXPECT_EQ(back->decode(cls), q.decode(cls));
}

TEST(Quantizer, json_with_unequal_lists_is_an_error) {
  Expected<Quantizer> bad =
      Quantizer::from_json(nlohmann::json{{"upper_bounds", {1, 2}}, {"medians", {1}}}, "flops");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("quantizer 'flops'"), std::string::npos);
}

TEST(Codebook, keeps_the_most_frequent_group_shapes_and_encodes_round_trip) {
  Dag dag;
  for (int idx = 0; idx < 3; ++idx) {
    dag.nodes.push_back(test::collective(NodeKind::kAllReduce, 1 << 20, {4, 1}));
  }
  dag.nodes.push_back(test::collective(NodeKind::kAllGather, 1 << 10, {2, 4}));
  dag.nodes.push_back(test::collective(NodeKind::kAllGather, 1 << 10, {2, 2}));
  dag.nodes.push_back(test::compute(1'000'000, 4096));
  CodebookOptions options;
  options.max_groups = 2;
  const Codebook book = Codebook::fit({dag}, options);
  ASSERT_EQ(book.groups().size(), 2u);
  EXPECT_EQ(book.groups()[0], (GroupShape{4, 1}));
  EXPECT_EQ(book.groups()[1], (GroupShape{2, 2}));  // tie with {2, 4}: the smaller shape first
  const auto counts = book.class_counts();
  EXPECT_EQ(counts[0], kNodeKindCount);
  EXPECT_EQ(counts[1], 3u);
  EXPECT_EQ(book.decode(book.encode(dag.nodes[0])), dag.nodes[0]);
  EXPECT_EQ(book.decode(book.encode(dag.nodes[5])), dag.nodes[5]);
  // A shape not in the vocabulary decodes as the whole job.
  EXPECT_TRUE(book.decode(book.encode(dag.nodes[3])).group.whole_job());

  Expected<Codebook> back = Codebook::from_json(book.to_json());
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(back->groups(), book.groups());
  EXPECT_EQ(back->encode(dag.nodes[4]), book.encode(dag.nodes[4]));
}

TEST(Codebook, decoding_drops_magnitudes_the_kind_does_not_use) {
  const Dag dag = test::chain_with_all_reduce(2);
  const Codebook book = Codebook::fit({dag}, {});
  NodeClasses classes = book.encode(dag.nodes[0]);  // compute with FLOPs and bytes
  classes[0] = static_cast<uint16_t>(NodeKind::kAllReduce);
  uint32_t dropped = 0;
  const DagNode node = book.decode(classes, &dropped);
  EXPECT_EQ(node.kind, NodeKind::kAllReduce);
  EXPECT_EQ(node.flops, 0u);
  EXPECT_EQ(node.tensor_bytes, 0u);
  EXPECT_EQ(dropped, 2u);
}

}  // namespace codebook_test
}  // namespace orrery::synth
