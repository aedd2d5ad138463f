#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "chakra/comm_groups.h"
#include "chakra/trace_builder.h"
#include "chakra/trace_file.h"
#include "chakra/validation.h"
#include "synth/simulate.h"
#include "synth/trace_writer.h"
#include "synth_test_support.h"

namespace orrery::synth {
namespace trace_writer_test {

using test::collective;
using test::compute;
using test::make_dag;
using test::p2p;

// c0; s1 r2 (after c0); all-reduce on pairs after r2; r4 after it; s5 after r4.
Dag pipeline_like() {
  return make_dag({compute(1'000'000'000, 1'000'000), p2p(NodeKind::kSend, 4096),
                   p2p(NodeKind::kRecv, 4096), collective(NodeKind::kAllReduce, 1 << 20, {2, 1}),
                   p2p(NodeKind::kRecv, 8192), p2p(NodeKind::kSend, 2048)},
                  {{0, 1}, {0, 2}, {2, 3}, {3, 4}, {4, 5}}, 4);
}

TEST(TraceWriter, a_receive_takes_the_oldest_send_before_it_and_strays_get_partners) {
  const SpmdProgram program = pair_point_to_point(pipeline_like());
  ASSERT_EQ(program.dag.size(), 8u);
  EXPECT_EQ(program.partners_added, 2u);
  // Layer order: c0 and both partners (they have no parents), s1 r2, all-reduce, r4, s5.
  std::vector<NodeKind> kinds;
  for (const DagNode& node : program.dag.nodes) kinds.push_back(node.kind);
  EXPECT_EQ(kinds, (std::vector<NodeKind>{NodeKind::kCompute, NodeKind::kSend, NodeKind::kRecv,
                                          NodeKind::kSend, NodeKind::kRecv, NodeKind::kAllReduce,
                                          NodeKind::kRecv, NodeKind::kSend}));
  // s1 <-> r2 tag 0; the new send <-> r4 tag 1 (size 8192); s5 <-> the new receive tag 2.
  EXPECT_EQ(program.tags, (std::vector<int32_t>{-1, 1, 2, 0, 0, -1, 1, 2}));
  EXPECT_EQ(program.dag.nodes[1].comm_bytes, 8192u);
  EXPECT_EQ(program.dag.nodes[2].comm_bytes, 2048u);
}

// Two collectives of one communicator that no path orders are ordered (the earlier in layer order
// first), so no rank can issue them the other way round; ordered ones and other communicators get
// nothing; a shape that does not fit the job shares the whole job's communicator.
TEST(TraceWriter, collectives_of_one_communicator_are_issued_in_one_order) {
  const Dag dag = make_dag(
      {compute(1'000'000, 1'000), collective(NodeKind::kAllReduce, 1, {2, 4}),
       collective(NodeKind::kAllReduce, 2, {2, 4}), collective(NodeKind::kAllGather, 3, {2, 1}),
       collective(NodeKind::kAllGather, 4, {2, 1}), collective(NodeKind::kAllReduce, 5, {}),
       collective(NodeKind::kAllReduce, 6, {3, 1})},
      {{0, 1}, {0, 2}, {1, 3}, {3, 4}, {0, 5}, {0, 6}}, 8);
  const SpmdProgram program = pair_point_to_point(dag, 8);
  EXPECT_EQ(program.collective_orderings, 2u);
  std::map<uint64_t, uint32_t> by_bytes;  // comm_bytes identify the nodes after renumbering
  for (uint32_t node = 0; node < program.dag.size(); ++node)
    by_bytes[program.dag.nodes[node].comm_bytes] = node;
  const auto has_edge = [&](uint64_t from, uint64_t to) {
    const std::pair<uint32_t, uint32_t> edge{by_bytes.at(from), by_bytes.at(to)};
    return std::find(program.dag.edges.begin(), program.dag.edges.end(), edge) !=
           program.dag.edges.end();
  };
  EXPECT_TRUE(has_edge(1, 2)) << "the two all-reduces of shape {2, 4}";
  EXPECT_TRUE(has_edge(5, 6)) << "the whole job and the shape that falls back to it";
  EXPECT_FALSE(has_edge(1, 5));
  EXPECT_FALSE(has_edge(2, 3));
  EXPECT_EQ(program.dag.edges.size(), 8u) << "six edges of the program, two orderings";
  // With 24 ranks the shape {3, 1} has communicators of its own: nothing to order there.
  EXPECT_EQ(pair_point_to_point(dag, 24).collective_orderings, 1u);
}

TEST(TraceWriter, group_shapes_partition_the_ranks_or_fall_back_to_the_whole_job) {
  EXPECT_EQ(group_members({2, 1}, 5, 8), (std::vector<uint32_t>{4, 5}));
  EXPECT_EQ(group_members({2, 4}, 5, 8), (std::vector<uint32_t>{1, 5}));
  EXPECT_EQ(group_members({4, 2}, 3, 16), (std::vector<uint32_t>{1, 3, 5, 7}));
  EXPECT_EQ(group_members({4, 2}, 9, 16), (std::vector<uint32_t>{9, 11, 13, 15}));
  EXPECT_TRUE(group_members({3, 1}, 0, 8).empty());                       // 3 does not divide 8
  EXPECT_TRUE(group_members({8, 1}, 0, 8).empty());                       // the whole job
  EXPECT_EQ(group_members({2, 0}, 3, 4), (std::vector<uint32_t>{2, 3}));  // irregular: blocks
}

TEST(TraceWriter, every_rank_file_passes_strict_validation_and_the_set_simulates) {
  test::TempDir dir;
  TraceSetOptions options;
  options.generator = "test";
  Expected<TraceSetReport> report = write_trace_set(pipeline_like(), dir.file("w"), options);
  ASSERT_TRUE(report) << report.error().message();
  EXPECT_EQ(report->ranks, 4u);
  const SpmdProgram program = pair_point_to_point(pipeline_like(), 4);
  EXPECT_EQ(report->program.edges, program.dag.edges) << "the program it wrote";
  EXPECT_EQ(report->program.size(), 8u);
  ASSERT_EQ(report->rank_files.size(), 4u);
  for (const std::string& path : report->rank_files) {
    Expected<chakra::TraceGraph> graph = chakra::load_trace(path);
    ASSERT_TRUE(graph) << graph.error().message();
    const chakra::ValidationReport validation = chakra::validate_trace(*graph);
    EXPECT_TRUE(validation.passes(chakra::ValidationMode::kStrict)) << path;
    EXPECT_EQ(graph->size(), 8u);
  }
  // Rank 2's all-reduce runs on {2, 3}, the second group.
  Expected<chakra::TraceGraph> rank2 = chakra::load_trace(report->rank_files[2]);
  ASSERT_TRUE(rank2);
  Expected<std::optional<std::string_view>> pg = rank2->get_string(5, "pg_name");
  ASSERT_TRUE(pg && pg->has_value());
  EXPECT_EQ(**pg, "2");
  chakra::CommGroups groups(4);
  ASSERT_TRUE(chakra::load_comm_group_file(report->group_file, groups));
  ASSERT_NE(groups.find("2"), nullptr);
  EXPECT_EQ(groups.find("2")->ranks, (std::vector<uint32_t>{2, 3}));

  Platform platform;
  platform.ranks = 4;
  Expected<SimulationBench> bench = SimulationBench::create(platform, dir.file("bench"));
  ASSERT_TRUE(bench) << bench.error().message();
  Expected<SimFigures> figures = bench->simulate_trace_set(dir.file("w"), report->group_file);
  ASSERT_TRUE(figures) << figures.error().message();
  // At least the compute node: 1e9 FLOPs at 1e6 bytes is compute-bound, 1e9 / 312e12 s = 3,205 ns.
  EXPECT_GT(figures->time_ns, 3205.0);
  EXPECT_GT(figures->comm_fraction, 0.0);
  EXPECT_LT(figures->comm_fraction, 1.0);
}

TEST(TraceWriter, a_receive_before_its_send_in_the_program_does_not_deadlock_the_ring) {
  // recv -> compute -> send on every rank: pairing the two would wait around the ring forever.
  const Dag dag = make_dag(
      {p2p(NodeKind::kRecv, 1 << 20), compute(1'000'000, 1'000), p2p(NodeKind::kSend, 1 << 20)},
      {{0, 1}, {1, 2}}, 8);
  test::TempDir dir;
  Platform platform;
  platform.ranks = 8;
  Expected<SimulationBench> bench = SimulationBench::create(platform, dir.file("bench"));
  ASSERT_TRUE(bench) << bench.error().message();
  Expected<SimFigures> figures = bench->simulate(dag, "ring");
  ASSERT_TRUE(figures) << figures.error().message();
  EXPECT_GT(figures->time_ns, 0.0);
  EXPECT_EQ(pair_point_to_point(dag).partners_added, 2u);
  // The scratch files are gone.
  EXPECT_FALSE(std::filesystem::exists(dir.file("bench/ring.0.et")));
}

TEST(TraceWriter, a_group_shape_that_does_not_fit_runs_on_the_whole_job) {
  const Dag dag = make_dag({collective(NodeKind::kAllGather, 4096, {3, 1})}, {}, 4);
  test::TempDir dir;
  Expected<TraceSetReport> report = write_trace_set(dag, dir.file("w"), {});
  ASSERT_TRUE(report) << report.error().message();
  EXPECT_EQ(report->whole_job_fallbacks, 1u);
  Expected<chakra::TraceGraph> graph = chakra::load_trace(report->rank_files[0]);
  ASSERT_TRUE(graph);
  EXPECT_EQ(graph->find_attribute(0, "pg_name"), nullptr);
}

}  // namespace trace_writer_test
}  // namespace orrery::synth
