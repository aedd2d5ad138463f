// orrery trace rescale as a library: rescaling generated traces equals generating the larger plan
// directly (node by node, groups compared by their members), the fixed-global-batch mode scales
// what the batch drives, the stride is found from the groups, and what cannot be rescaled is
// refused with the group or node named.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

#include "chakra/comm_groups.h"
#include "chakra/trace_file.h"
#include "gen/dlrm_generator.h"
#include "gen/gen_test_support.h"
#include "gen/llm_generator.h"
#include "gen/rescale.h"
#include "sim/sim_test_support.h"

namespace orrery::gen {
namespace rescale_test {

using test::plan_of;
using test::TempDir;
using test::tiny_gpt;

GeneratedTraces generate(const TransformerModel& model, const ParallelPlan& plan,
                         const std::string& prefix) {
  Expected<LlmGenerator> gen = LlmGenerator::create(model, plan);
  EXPECT_TRUE(gen) << gen.error().message();
  RankFileOptions options;
  options.threads = 2;
  Expected<GeneratedTraces> traces = write_llm_traces(*gen, prefix, options);
  EXPECT_TRUE(traces) << traces.error().message();
  return traces ? *traces : GeneratedTraces{};
}

std::vector<ChakraProtoMsg::Node> read_nodes(const std::string& path) {
  std::vector<ChakraProtoMsg::Node> nodes;
  Expected<chakra::TraceReader> reader = chakra::TraceReader::open(path);
  EXPECT_TRUE(reader) << reader.error().message();
  if (!reader) return nodes;
  ChakraProtoMsg::Node node;
  while (true) {
    Expected<bool> more = reader->next(node);
    EXPECT_TRUE(more);
    if (!more || !*more) break;
    nodes.push_back(node);
  }
  return nodes;
}

// pg_name -> "[members]", so that groups numbered differently compare by what they are.
std::map<std::string, std::string> member_lists(const std::string& group_file, uint32_t ranks) {
  chakra::CommGroups groups(ranks);
  EXPECT_TRUE(chakra::load_comm_group_file(group_file, groups));
  std::map<std::string, std::string> lists;
  for (const auto& [name, group] : groups.named()) {
    std::string text;
    for (uint32_t rank : group.ranks) text += std::to_string(rank) + ",";
    lists[name] = text;
  }
  return lists;
}

void canonicalize(ChakraProtoMsg::Node& node, const std::map<std::string, std::string>& lists) {
  for (auto& attr : *node.mutable_attr()) {
    if (attr.name() == "pg_name") attr.set_string_val(lists.at(attr.string_val()));
  }
}

uint64_t attr_int(const ChakraProtoMsg::Node& node, const std::string& name) {
  for (const auto& attr : node.attr()) {
    if (attr.name() == name)
      return attr.has_uint64_val() ? attr.uint64_val() : static_cast<uint64_t>(attr.int64_val());
  }
  return 0;
}

// Every rank file of `a` equals the one of `b`, pg_names compared by members.
void expect_same_traces(const std::vector<std::string>& a, const std::string& a_groups,
                        const std::vector<std::string>& b, const std::string& b_groups) {
  ASSERT_EQ(a.size(), b.size());
  const auto ranks = static_cast<uint32_t>(a.size());
  const auto a_lists = member_lists(a_groups, ranks);
  const auto b_lists = member_lists(b_groups, ranks);
  EXPECT_EQ(a_lists.size(), b_lists.size());
  for (uint32_t rank = 0; rank < ranks; ++rank) {
    std::vector<ChakraProtoMsg::Node> x = read_nodes(a[rank]);
    std::vector<ChakraProtoMsg::Node> y = read_nodes(b[rank]);
    ASSERT_EQ(x.size(), y.size()) << "rank " << rank;
    for (size_t index = 0; index < x.size(); ++index) {
      canonicalize(x[index], a_lists);
      canonicalize(y[index], b_lists);
      ASSERT_EQ(x[index].SerializeAsString(), y[index].SerializeAsString())
          << "rank " << rank << " node " << x[index].name() << " vs " << y[index].name();
    }
  }
}

RescaleSpec spec_of(const GeneratedTraces& traces, const std::string& prefix, uint32_t from,
                    uint32_t to, const std::string& output) {
  RescaleSpec spec;
  spec.workload = prefix;
  spec.comm_groups = traces.group_file;
  spec.from_dp = from;
  spec.to_dp = to;
  spec.output = output;
  spec.threads = 2;
  return spec;
}

TEST(Rescale, dp_2_to_8_with_a_fixed_per_rank_batch_equals_generating_dp_8) {
  // tp 2 x dp 2 x pp 2 with sequence parallelism and tied embeddings (the embedding group stays
  // within a replica), under every ZeRO stage: the all-gathers of parameter shards shrink with the
  // group, and so do the optimizer steps and the tied all-reduce that work on the shard.
  for (const uint32_t zero : {0U, 1U, 2U, 3U}) {
    SCOPED_TRACE(fmt::format("ZeRO {}", zero));
    TempDir dir;
    ParallelPlan small = plan_of(2, 2, 2, 8);
    small.sp = true;
    small.zero = zero;
    const GeneratedTraces from = generate(tiny_gpt(), small, dir.file("dp2/w"));
    ParallelPlan big = small;
    big.dp = 8;
    big.global_batch = 32;  // the same 4 micro-batches per pipeline
    const GeneratedTraces direct = generate(tiny_gpt(), big, dir.file("dp8/w"));

    // Tensor groups {0, 1} would fit stride 1 as well as the data groups {0, 2} fit 2: say which.
    RescaleSpec spec = spec_of(from, dir.file("dp2/w"), 2, 8, dir.file("out/w"));
    spec.stride = 2;
    Expected<RescaleResult> result = rescale_traces(spec);
    ASSERT_TRUE(result) << result.error().message();
    EXPECT_EQ(result->new_ranks, 32u);
    // Input groups: 4 tensor and 4 embedding (replica), 4 data; out: 16 + 16 + 4.
    EXPECT_EQ(result->replica_groups, 8u);
    EXPECT_EQ(result->data_groups, 4u);
    EXPECT_EQ(result->new_groups, 36u);
    expect_same_traces(result->rank_files, result->group_file, direct.rank_files,
                       direct.group_file);

    // And back down: dp 8 -> 2 gives the dp 2 traces.
    RescaleSpec down = spec_of(direct, dir.file("dp8/w"), 8, 2, dir.file("down/w"));
    down.stride = 2;
    Expected<RescaleResult> back = rescale_traces(down);
    ASSERT_TRUE(back) << back.error().message();
    expect_same_traces(back->rank_files, back->group_file, from.rank_files, from.group_file);
  }
}

TEST(Rescale, a_fixed_global_batch_scales_what_the_batch_drives) {
  TempDir dir;
  // dp 2 with micro-batches of 4 sequences vs dp 8 with micro-batches of 1: both run 2
  // micro-batches of the same 16-sequence global batch. Untied embeddings: a tied embedding's
  // gradient all-reduce runs within a replica and would be scaled like activations (documented).
  TransformerModel model = tiny_gpt();
  model.tied_embeddings = false;
  ParallelPlan small = plan_of(2, 2, 2, 16, 4);
  const GeneratedTraces from = generate(model, small, dir.file("dp2/w"));
  ParallelPlan big = plan_of(8, 2, 2, 16, 1);
  const GeneratedTraces direct = generate(model, big, dir.file("dp8/w"));
  RescaleSpec spec = spec_of(from, dir.file("dp2/w"), 2, 8, dir.file("out/w"));
  spec.stride = 2;
  spec.batch = BatchScaling::kGlobal;
  Expected<RescaleResult> result = rescale_traces(spec);
  ASSERT_TRUE(result) << result.error().message();
  ASSERT_EQ(result->rank_files.size(), direct.rank_files.size());
  size_t optimizer = 0;
  for (uint32_t rank = 0; rank < 32; rank += 5) {
    const std::vector<ChakraProtoMsg::Node> x = read_nodes(result->rank_files[rank]);
    const std::vector<ChakraProtoMsg::Node> y = read_nodes(direct.rank_files[rank]);
    ASSERT_EQ(x.size(), y.size());
    for (size_t index = 0; index < x.size(); ++index) {
      ASSERT_EQ(x[index].name(), y[index].name());
      if (x[index].type() == ChakraProtoMsg::COMP_NODE) {
        if (x[index].name().find("optimizer") != std::string::npos) {
          // The known limit of the linear model: an optimizer step does not depend on the batch,
          // yet it is scaled by 2 / 8 with everything else.
          EXPECT_EQ(attr_int(x[index], "num_ops") * 4, attr_int(y[index], "num_ops"));
          ++optimizer;
        } else {
          // Matrix products, attention and element-wise work are linear in the micro-batch.
          EXPECT_EQ(attr_int(x[index], "num_ops"), attr_int(y[index], "num_ops"))
              << x[index].name();
        }
      } else {
        // Tensor-parallel collectives and pipeline messages carry b s h: a quarter; gradient
        // reductions are the parameters': unchanged.
        EXPECT_EQ(attr_int(x[index], "comm_size"), attr_int(y[index], "comm_size"))
            << x[index].name();
      }
    }
  }
  EXPECT_GT(optimizer, 0u);
}

TEST(Rescale, stride_is_found_from_the_groups_or_asked_for) {
  TempDir dir;
  // tp 4 x dp 2: data groups {0, 4}, {1, 5}, ...; tensor groups of 4 do not fit 2 members.
  const GeneratedTraces tp4 = generate(tiny_gpt(), plan_of(2, 4, 1, 2), dir.file("tp4/w"));
  Expected<RescaleResult> found =
      rescale_traces(spec_of(tp4, dir.file("tp4/w"), 2, 4, dir.file("o1/w")));
  ASSERT_TRUE(found) << found.error().message();
  EXPECT_EQ(found->stride, 4u);
  EXPECT_EQ(found->new_ranks, 16u);
  // tp 2 x dp 2: {0, 1} and {0, 2} both look like data groups.
  const GeneratedTraces tp2 = generate(tiny_gpt(), plan_of(2, 2, 1, 2), dir.file("tp2/w"));
  Expected<RescaleResult> ambiguous =
      rescale_traces(spec_of(tp2, dir.file("tp2/w"), 2, 4, dir.file("o2/w")));
  ASSERT_FALSE(ambiguous);
  EXPECT_CONTAINS(ambiguous.error().message(), "ambiguous: groups fit strides 1, 2");
  RescaleSpec given = spec_of(tp2, dir.file("tp2/w"), 2, 4, dir.file("o3/w"));
  given.stride = 2;
  EXPECT_TRUE(rescale_traces(given));
}

TEST(Rescale, what_cannot_be_rescaled_is_refused_by_name) {
  TempDir dir;
  // Expert groups span 2 of the 4 data-parallel replicas.
  ParallelPlan moe = plan_of(4, 1, 1, 4);
  moe.ep = 2;
  const GeneratedTraces experts = generate(test::tiny_moe(), moe, dir.file("moe/w"));
  RescaleSpec spec = spec_of(experts, dir.file("moe/w"), 4, 8, dir.file("o1/w"));
  spec.stride = 1;
  Expected<RescaleResult> result = rescale_traces(spec);
  ASSERT_FALSE(result);
  EXPECT_CONTAINS(result.error().message(), "spans 2 of the 4 data-parallel replicas");

  // DLRM's embedding all-to-all over every rank depends on the sharding.
  DlrmPlan plan;
  plan.ranks = 4;
  plan.global_batch = 64;
  Expected<DlrmGenerator> dlrm = DlrmGenerator::create(*resolve_dlrm_model("dlrm-kaggle"), plan);
  ASSERT_TRUE(dlrm);
  Expected<GeneratedTraces> traces = write_dlrm_traces(*dlrm, dir.file("dlrm/d"), {});
  ASSERT_TRUE(traces);
  Expected<RescaleResult> a2a =
      rescale_traces(spec_of(*traces, dir.file("dlrm/d"), 4, 8, dir.file("o2/w")));
  ASSERT_FALSE(a2a);
  EXPECT_CONTAINS(a2a.error().message(), "node 0 ('emb.index_all_to_all'): ALL_TO_ALL");

  const GeneratedTraces plain = generate(tiny_gpt(), plan_of(2, 2, 1, 2), dir.file("p/w"));
  RescaleSpec odd = spec_of(plain, dir.file("p/w"), 3, 6, dir.file("o3/w"));
  Expected<RescaleResult> indivisible = rescale_traces(odd);
  ASSERT_FALSE(indivisible);
  EXPECT_CONTAINS(indivisible.error().message(), "--from-dp 3 does not divide the 4 ranks");
  EXPECT_FALSE(parse_batch_scaling("weak"));
  // Writing over the input.
  RescaleSpec same = spec_of(plain, dir.file("p/w"), 2, 4, dir.file("p/w"));
  same.stride = 2;
  Expected<RescaleResult> overwrite = rescale_traces(same);
  ASSERT_FALSE(overwrite);
  EXPECT_CONTAINS(overwrite.error().message(), "would overwrite the input rank file");
}

}  // namespace rescale_test
}  // namespace orrery::gen
