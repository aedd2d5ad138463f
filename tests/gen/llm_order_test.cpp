// The issue order of `gen llm` communication (docs/fuzzing.md, soak finding 2). The executor runs
// one collective or send at a time per rank and matches a group's collectives by issue order, so a
// plan is correct under any backend's timing only when every rank's communication is one chain
// (a total order by its dependencies), every member of a group meets the group's collectives in
// the same order (the k-th is the same op and size on every member), and the chains, the
// dependencies and the pipeline's sends and receives together form no cycle. These are checked on
// the traces, without simulation, over random plans; the two soak plans that deadlocked under the
// flow backend run to completion on their 16-NPU fat-tree.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "chakra/trace_builder.h"
#include "gen/gen_test_support.h"
#include "gen/llm_generator.h"
#include "sim/sim_test_support.h"

namespace orrery::gen {
namespace llm_order_test {

using chakra::NodeIndex;
using test::tiny_gpt;
using test::tiny_moe;

// A collective as its group's members must agree on it.
using CollectiveKey = std::tuple<int64_t, int64_t>;  // comm_type, comm_size

struct RankOrder {
  bool chained = true;    // every comm node depends (transitively) on the one before
  std::string unchained;  // the first node that does not, for the message
  size_t comm_nodes = 0;  // collectives and sends
  size_t sends = 0;
  std::vector<NodeIndex> topo;     // the graph in a topological order
  std::vector<std::string> names;  // the comm nodes in chain order
  // By group (pg_name): the collectives in chain order.
  std::map<std::string, std::vector<CollectiveKey>> by_group;
};

std::vector<NodeIndex> parents_of(const chakra::TraceGraph& graph, NodeIndex node) {
  std::vector<NodeIndex> parents;
  for (auto deps : {graph.data_deps(node), graph.ctrl_deps(node)}) {
    for (uint64_t id : deps) {
      const std::optional<NodeIndex> parent = graph.find(id);
      EXPECT_TRUE(parent) << graph.name(node) << " depends on missing id " << id;
      if (parent) parents.push_back(*parent);
    }
  }
  return parents;
}

bool takes_comm_slot(const chakra::TraceGraph& graph, NodeIndex node) {
  return graph.type(node) == ChakraProtoMsg::COMM_COLL_NODE ||
         graph.type(node) == ChakraProtoMsg::COMM_SEND_NODE;
}

// One rank's communication order. In a topological order the comm nodes are c0, c1, ...; they form
// a chain when each c_i has c_(i-1) among its ancestors, i.e. when the latest comm node among the
// ancestors of c_i's parents is c_(i-1) (ancestors of c_i are earlier in the order, so no later one
// can be among them).
RankOrder rank_order(const chakra::TraceGraph& graph) {
  RankOrder order;
  const NodeIndex size = graph.size();
  std::vector<std::vector<NodeIndex>> children(size);
  std::vector<uint32_t> pending(size, 0);
  for (NodeIndex node = 0; node < size; ++node) {
    for (NodeIndex parent : parents_of(graph, node)) {
      children[parent].push_back(node);
      ++pending[node];
    }
  }
  std::vector<NodeIndex> ready;
  for (NodeIndex node = 0; node < size; ++node)
    if (pending[node] == 0) ready.push_back(node);
  while (!ready.empty()) {
    const NodeIndex node = ready.back();
    ready.pop_back();
    order.topo.push_back(node);
    for (NodeIndex child : children[node])
      if (--pending[child] == 0) ready.push_back(child);
  }
  EXPECT_EQ(order.topo.size(), size) << "a rank's dependencies form a cycle";
  constexpr int64_t kNone = -1;
  std::vector<int64_t> latest(size, kNone);  // latest comm index among ancestors-or-self
  int64_t position = 0;
  for (NodeIndex node : order.topo) {
    int64_t before = kNone;
    for (NodeIndex parent : parents_of(graph, node)) before = std::max(before, latest[parent]);
    latest[node] = before;
    if (!takes_comm_slot(graph, node)) continue;
    if (before != position - 1 && order.chained) {
      order.chained = false;
      order.unchained = fmt::format("node {} ({})", graph.id(node), graph.name(node));
    }
    latest[node] = position++;
    ++order.comm_nodes;
    order.names.emplace_back(graph.name(node));
    if (graph.type(node) == ChakraProtoMsg::COMM_SEND_NODE) {
      ++order.sends;
      continue;
    }
    const auto type = graph.get_int(node, "comm_type");
    const auto bytes = graph.get_int(node, "comm_size");
    const auto group = graph.get_string(node, "pg_name");
    EXPECT_TRUE(type && type->has_value() && bytes && bytes->has_value() && group &&
                group->has_value())
        << graph.name(node);
    if (!type || !bytes || !group || !type->has_value() || !bytes->has_value() ||
        !group->has_value())
      continue;
    order.by_group[std::string(**group)].emplace_back(**type, **bytes);
  }
  return order;
}

// No cycle among all ranks' nodes once every group's k-th collective is one node (it starts when
// all members reach it) and every send precedes its receive: then, each rank running its chain in
// order, no run can deadlock whatever the timing. Returns the nodes left in a cycle (0 = none).
size_t nodes_in_cycles(const chakra::TraceSet& traces, const std::vector<RankOrder>& orders) {
  const uint32_t ranks = traces.rank_count();
  // Vertex ids: rank r's nodes at offset[r] ..; the k-th collective of a group maps to its first
  // member's vertex.
  std::vector<size_t> offset(ranks + 1, 0);
  for (uint32_t rank = 0; rank < ranks; ++rank)
    offset[rank + 1] = offset[rank] + traces.rank_graph(rank).size();
  std::vector<size_t> vertex(offset[ranks]);
  for (size_t index = 0; index < vertex.size(); ++index) vertex[index] = index;
  std::map<std::pair<std::string, size_t>, size_t> instance;      // (group, k) -> vertex
  std::map<std::tuple<int64_t, int64_t, int64_t>, size_t> sends;  // (src, dst, tag) -> vertex
  std::vector<std::pair<size_t, std::tuple<int64_t, int64_t, int64_t>>> recvs;
  for (uint32_t rank = 0; rank < ranks; ++rank) {
    const chakra::TraceGraph& graph = traces.rank_graph(rank);
    std::map<std::string, size_t> seen;
    for (NodeIndex node : orders[rank].topo) {  // comm nodes in chain order
      const size_t self = offset[rank] + node;
      if (graph.type(node) == ChakraProtoMsg::COMM_COLL_NODE) {
        const auto group = graph.get_string(node, "pg_name");
        const std::string name = group && group->has_value() ? std::string(**group) : "";
        vertex[self] = instance.emplace(std::pair{name, seen[name]++}, self).first->second;
      } else if (graph.type(node) == ChakraProtoMsg::COMM_SEND_NODE) {
        const auto dst = graph.get_int(node, "comm_dst");
        const auto tag = graph.get_int(node, "comm_tag");
        EXPECT_TRUE(
            sends.emplace(std::tuple{int64_t{rank}, dst->value_or(-1), tag->value_or(-1)}, self)
                .second);
      } else if (graph.type(node) == ChakraProtoMsg::COMM_RECV_NODE) {
        const auto src = graph.get_int(node, "comm_src");
        const auto tag = graph.get_int(node, "comm_tag");
        recvs.emplace_back(self, std::tuple{src->value_or(-1), int64_t{rank}, tag->value_or(-1)});
      }
    }
  }
  std::vector<std::vector<size_t>> children(vertex.size());
  auto edge = [&](size_t parent, size_t child) {
    if (vertex[parent] != vertex[child]) children[vertex[parent]].push_back(vertex[child]);
  };
  for (uint32_t rank = 0; rank < ranks; ++rank) {
    const chakra::TraceGraph& graph = traces.rank_graph(rank);
    for (NodeIndex node = 0; node < graph.size(); ++node)
      for (NodeIndex parent : parents_of(graph, node))
        edge(offset[rank] + parent, offset[rank] + node);
  }
  for (const auto& [recv, key] : recvs) {
    const auto send = sends.find(key);
    EXPECT_NE(send, sends.end()) << "a receive without a send";
    if (send != sends.end()) edge(send->second, recv);
  }
  std::vector<uint32_t> pending(vertex.size(), 0);
  size_t live = 0;
  for (size_t index = 0; index < vertex.size(); ++index) {
    if (vertex[index] != index) continue;
    ++live;
    for (size_t child : children[index]) ++pending[child];
  }
  std::vector<size_t> ready;
  for (size_t index = 0; index < vertex.size(); ++index)
    if (vertex[index] == index && pending[index] == 0) ready.push_back(index);
  size_t done = 0;
  while (!ready.empty()) {
    const size_t index = ready.back();
    ready.pop_back();
    ++done;
    for (size_t child : children[index])
      if (--pending[child] == 0) ready.push_back(child);
  }
  return live - done;
}

// Every member of every group meets the group's collectives in one order: the k-th is the same
// op and size on each, and ranks outside the group issue none of them.
void expect_one_order_per_group(const LlmGroups& groups, const std::vector<RankOrder>& orders) {
  for (uint32_t id = 1; id <= groups.count(); ++id) {
    const std::string name = std::to_string(id);
    const std::vector<uint32_t>& members = groups.members(id);
    ASSERT_GE(members.size(), 2U);
    const auto first = orders[members[0]].by_group.find(name);
    ASSERT_NE(first, orders[members[0]].by_group.end())
        << "group " << id << " (" << group_kind_name(groups.kind(id)) << ") has no collective";
    for (uint32_t member : members) {
      const auto seq = orders[member].by_group.find(name);
      ASSERT_NE(seq, orders[member].by_group.end()) << "rank " << member << ", group " << id;
      const std::vector<CollectiveKey>& expected = first->second;
      const std::vector<CollectiveKey>& got = seq->second;
      ASSERT_EQ(got.size(), expected.size()) << "rank " << member << ", group " << id;
      for (size_t k = 0; k < got.size(); ++k) {
        EXPECT_EQ(got[k], expected[k]) << "collective #" << k << " of group " << id << ": rank "
                                       << member << " against rank " << members[0];
      }
    }
    for (size_t rank = 0; rank < orders.size(); ++rank) {
      if (std::find(members.begin(), members.end(), rank) == members.end()) {
        EXPECT_EQ(orders[rank].by_group.count(name), 0U) << "rank " << rank << " not in " << id;
      }
    }
  }
}

std::string describe(const ParallelPlan& plan) {
  return fmt::format("dp {} tp {} pp {} cp {} ep {}{} zero {}{} {} v {} batch {}/{} bucket {}",
                     plan.dp, plan.tp, plan.pp, plan.cp, plan.ep, plan.sp ? " sp" : "", plan.zero,
                     plan.recompute ? " recompute" : "", schedule_name(plan.schedule),
                     plan.virtual_stages, plan.global_batch, plan.micro_batch, plan.bucket_bytes);
}

// Every property of the file's comment for one plan. Returns false when the plan is refused.
bool expect_consistent_order(const TransformerModel& model, const ParallelPlan& plan) {
  SCOPED_TRACE(describe(plan));
  Expected<LlmGenerator> generator = LlmGenerator::create(model, plan);
  if (!generator) return false;
  RankFileOptions options;
  options.threads = 1;
  Expected<BuiltTraces> built = build_llm_traces(*generator, "order", options);
  EXPECT_TRUE(built) << built.error().message();
  if (!built) return true;
  const chakra::TraceSet& traces = *built->traces;
  const uint32_t ranks = generator->ranks();
  EXPECT_EQ(traces.rank_count(), ranks);
  std::vector<RankOrder> orders;
  size_t sends = 0;
  for (uint32_t rank = 0; rank < ranks; ++rank) {
    orders.push_back(rank_order(traces.rank_graph(rank)));
    EXPECT_TRUE(orders.back().chained)
        << "rank " << rank << ": " << orders.back().unchained
        << " may take the comm slot before the comm node that precedes it";
    sends += orders.back().sends;
  }
  // pp - 1 boundaries per chunk and direction on every micro-batch, over every pipeline.
  EXPECT_EQ(sends, plan.pp == 1 ? 0
                                : 2 * (uint64_t{plan.chunks()} - 1) * plan.micro_batches() *
                                      (ranks / plan.pp));
  expect_one_order_per_group(generator->groups(), orders);
  EXPECT_EQ(nodes_in_cycles(traces, orders), 0U);
  return true;
}

TEST(LlmOrder, the_two_soak_plans_are_chained_and_consistent) {
  TransformerModel model = tiny_gpt();  // bench/soak.cpp's tiny model is smaller; same structure
  ParallelPlan run606 = test::plan_of(2, 2, 4, 4, 1);
  run606.sp = true;
  EXPECT_TRUE(expect_consistent_order(model, run606));
  ParallelPlan run1230 = test::plan_of(2, 4, 2, 8, 2);
  run1230.sp = true;
  run1230.zero = 3;
  EXPECT_TRUE(expect_consistent_order(model, run1230));
}

TEST(LlmOrder, interleaved_and_1f1b_pipelines_with_every_zero_stage_have_no_cycle) {
  for (uint32_t zero = 0; zero <= 3; ++zero) {
    for (const bool interleaved : {false, true}) {
      ParallelPlan plan = test::plan_of(2, 2, 2, 8, 1);
      plan.zero = zero;
      plan.sp = zero % 2 == 1;
      if (interleaved) {
        plan.schedule = PipelineSchedule::kInterleaved;
        plan.virtual_stages = 2;
      }
      EXPECT_TRUE(expect_consistent_order(tiny_gpt(), plan));
    }
  }
}

TEST(LlmOrder, random_plans_give_every_group_one_order_on_every_member) {
  std::mt19937_64 rng(17);
  size_t accepted = 0;
  size_t interleaved = 0;
  size_t moe = 0;
  for (int draw = 0; draw < 200 && accepted < 24; ++draw) {
    const test::RandomPlan drawn = test::random_plan(rng);
    const TransformerModel& model = drawn.model;
    const ParallelPlan& plan = drawn.plan;
    const bool expert = drawn.moe;
    if (plan.ranks() > 32) continue;
    if (!expect_consistent_order(model, plan)) continue;
    ++accepted;
    interleaved += plan.schedule == PipelineSchedule::kInterleaved ? 1 : 0;
    moe += expert ? 1 : 0;
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(accepted, 24U);
  EXPECT_GT(interleaved, 0U);
  EXPECT_GT(moe, 0U);
}

TEST(LlmOrder, a_zero3_prefetch_is_issued_before_the_collectives_of_the_layer_before) {
  // FSDP issues layer l's all-gather when layer l - 1 starts, so on one stream it precedes layer
  // l - 1's tensor-parallel collectives (program order), not the end of layer l - 1.
  ParallelPlan plan = test::plan_of(2, 2, 1, 2, 1);
  plan.zero = 3;
  Expected<LlmGenerator> generator = LlmGenerator::create(tiny_gpt(), plan);
  ASSERT_TRUE(generator) << generator.error().message();
  Expected<BuiltTraces> built = build_llm_traces(*generator, "zero3", RankFileOptions{});
  ASSERT_TRUE(built) << built.error().message();
  const RankOrder order = rank_order(built->traces->rank_graph(0));
  ASSERT_TRUE(order.chained) << order.unchained;
  auto at = [&](const std::string& name) {
    const auto found = std::find(order.names.begin(), order.names.end(), name);
    EXPECT_NE(found, order.names.end()) << name;
    return found - order.names.begin();
  };
  EXPECT_LT(at("mb0.L0.param_allgather"), at("mb0.L1.param_allgather"));
  EXPECT_EQ(at("mb0.L1.param_allgather") + 1, at("mb0.L0.attn_out.tp_allreduce"));
  EXPECT_EQ(at("mb0.L2.param_allgather") + 1, at("mb0.L1.attn_out.tp_allreduce"));
  // Backward: layer 2's gather is issued when layer 3's backward starts, before its collectives.
  EXPECT_LT(at("mb0.L2.bwd.param_allgather"), at("mb0.L3.mlp_norm.tp_allreduce"));
  EXPECT_GT(at("mb0.L2.bwd.param_allgather"), at("mb0.L3.bwd.param_allgather"));
}

// The soak's plans on its network (bench/soak.cpp: the tiny model, `topo generate fat-tree k=4`,
// logical [2, 2, 4]) and system files (kept from runs 606 and 1230 of seed 1), under the flow
// backend, whose timing made main's traces deadlock or disagree on a group's collective #8.
const char* kSoakModel = R"({"name": "tiny", "layers": 4, "hidden": 128, "heads": 4,
  "kv_heads": 4, "ffn": 512, "vocab": 1024, "seq": 128})";

std::string soak_system(const char* scheduling, int delay, const char* all_reduce,
                        const char* all_gather, const char* reduce_scatter, const char* all_to_all,
                        const char* optimization, int mem_bw) {
  return fmt::format(
      R"({{"scheduling-policy": "{}", "endpoint-delay": {}, "active-chunks-per-dimension": 1,
  "preferred-dataset-splits": 1, "all-reduce-implementation": [{}],
  "all-gather-implementation": [{}], "reduce-scatter-implementation": [{}],
  "all-to-all-implementation": [{}], "collective-optimization": "{}", "local-mem-bw": {},
  "roofline-enabled": 1, "peak-perf": 312}})",
      scheduling, delay, all_reduce, all_gather, reduce_scatter, all_to_all, optimization, mem_bw);
}

void expect_finishes_on_the_fat_tree(const ParallelPlan& plan, const std::string& system,
                                     const std::string& backend) {
  SCOPED_TRACE(describe(plan) + " on " + backend);
  const test::TempDir dir;
  test::write_text(dir.file("tiny.json"), kSoakModel);
  Expected<TransformerModel> model = load_model_file(dir.file("tiny.json"));
  ASSERT_TRUE(model) << model.error().message();
  Expected<LlmGenerator> generator = LlmGenerator::create(*model, plan);
  ASSERT_TRUE(generator) << generator.error().message();
  Expected<BuiltTraces> built = build_llm_traces(*generator, "soak", RankFileOptions{});
  ASSERT_TRUE(built) << built.error().message();
  test::RunInputs inputs;
  inputs.traces = built->traces;
  inputs.system = system;
  inputs.network = "generator: fat-tree\nk: 4\n";
  std::string groups = "{";
  for (uint32_t id = 1; id <= generator->groups().count(); ++id) {
    groups += fmt::format("{}\"{}\": [{}]", id == 1 ? "" : ", ", id,
                          fmt::join(generator->groups().members(id), ", "));
  }
  inputs.comm_groups = groups + "}";
  inputs.settings.backend = backend;
  Expected<sim::RunResult> result = test::simulate(inputs);
  ASSERT_TRUE(result) << result.error().message();
  ASSERT_EQ(result->rank_results.size(), 16U);
  for (const auto& rank : result->rank_results) {
    EXPECT_TRUE(rank.finished) << "rank " << rank.rank;
    EXPECT_EQ(rank.completed, rank.nodes) << "rank " << rank.rank;
  }
}

TEST(LlmOrder, soak_run_606_finishes_under_flow_on_the_fat_tree) {
  ParallelPlan plan = test::plan_of(2, 2, 4, 4, 1);
  plan.sp = true;
  expect_finishes_on_the_fat_tree(
      plan,
      soak_system("LIFO", 37, R"("direct", "direct", "halvingDoubling")",
                  R"("ring", "halvingDoubling", "halvingDoubling")",
                  R"("ring", "ring", "halvingDoubling")", R"("direct", "ring", "direct")",
                  "localBWAware", 400),
      "flow");
}

TEST(LlmOrder, soak_run_1230_finishes_under_flow_on_the_fat_tree) {
  ParallelPlan plan = test::plan_of(2, 4, 2, 8, 2);
  plan.sp = true;
  plan.zero = 3;
  expect_finishes_on_the_fat_tree(
      plan,
      soak_system("LIFO", 2, R"("direct", "direct", "ring")",
                  R"("direct", "halvingDoubling", "halvingDoubling")",
                  R"("halvingDoubling", "halvingDoubling", "direct")",
                  R"("halvingDoubling", "direct", "direct")", "baseline", 50),
      "flow");
}

}  // namespace llm_order_test
}  // namespace orrery::gen
