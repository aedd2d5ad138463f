// Peak memory from tensor lifetimes: hand-built traces whose activities are played to the tracker
// at hand-chosen times, so every figure can be read off the timeline in the comment.
#include "workload/local_memory.h"

#include <gtest/gtest.h>

#include "chakra/trace_builder.h"

namespace orrery::workload {
namespace local_memory_test {

using chakra::TraceGraph;
using ChakraProtoMsg::Node;

constexpr uint64_t kMiB = 1 << 20;

// Adds `inputs` or `outputs` as name, size pairs.
void tensors(Node& node, const char* attribute,
             std::initializer_list<std::pair<const char*, std::string>> list) {
  auto& attr = test::add_attr(node, attribute);
  auto* values = attr.mutable_string_list();
  for (const auto& [name, size] : list) {
    values->add_values(name);
    values->add_values(size);
  }
}

Node kernel(uint64_t id, std::initializer_list<std::pair<const char*, std::string>> in,
            std::initializer_list<std::pair<const char*, std::string>> out) {
  Node node = test::comp_node(id);
  if (in.size() > 0) tensors(node, "inputs", in);
  if (out.size() > 0) tensors(node, "outputs", out);
  return node;
}

std::string mib(uint64_t count) { return std::to_string(count * kMiB); }

// Plays one rank's activities: start and end times in ns per node index.
class Player {
 public:
  Player(LocalMemoryTracker& tracker, const TraceGraph& graph, net::Rank rank = 0)
      : tracker_(tracker), graph_(graph), rank_(rank) {}
  void start(chakra::NodeIndex node, int64_t ns) {
    const SimTime at = SimTime::from_ns(ns);
    tracker_.on_activity_start({rank_, node, Activity::kCompute, at, at}, graph_);
  }
  void end(chakra::NodeIndex node, int64_t started, int64_t ns) {
    tracker_.on_activity(
        {rank_, node, Activity::kCompute, SimTime::from_ns(started), SimTime::from_ns(ns)}, graph_);
  }

 private:
  LocalMemoryTracker& tracker_;
  const TraceGraph& graph_;
  net::Rank rank_;
};

LocalMemoryTracker make(const std::vector<const TraceGraph*>& graphs) {
  Expected<LocalMemoryTracker> tracker = LocalMemoryTracker::create(graphs);
  EXPECT_TRUE(tracker) << tracker.error().message();
  return std::move(*tracker);
}

TEST(LocalMemory, a_chain_holds_a_tensor_from_its_producer_to_its_last_consumer) {
  // A writes x (1 MiB) over [0, 10]; B reads x and writes y (2 MiB) over [10, 20]; C reads y over
  // [20, 30]. x lives [0, 20], y [10, 30]: 3 MiB while B runs, the peak.
  TraceGraph graph = test::build_graph({kernel(1, {}, {{"x", mib(1)}}),
                                        kernel(2, {{"x", mib(1)}}, {{"y", mib(2)}}),
                                        kernel(3, {{"y", mib(2)}}, {})});
  LocalMemoryTracker tracker = make({&graph});
  EXPECT_TRUE(tracker.has_tensor_attributes());
  Player play(tracker, graph);
  EXPECT_EQ(tracker.held(0), 0u);
  play.start(0, 0);
  EXPECT_EQ(tracker.held(0), kMiB);
  play.end(0, 0, 10);
  play.start(1, 10);
  EXPECT_EQ(tracker.held(0), 3 * kMiB);
  play.end(1, 10, 20);
  EXPECT_EQ(tracker.held(0), 2 * kMiB);  // x freed with its last reader
  play.start(2, 20);
  play.end(2, 20, 30);
  EXPECT_EQ(tracker.held(0), 0u);
  EXPECT_EQ(tracker.peak(0), 3 * kMiB);
}

TEST(LocalMemory, a_tensor_nobody_writes_is_held_from_the_start_until_its_last_reader_ends) {
  // The weight w (4 MiB) is read by A and C: held from time 0, before A starts, until C ends. With
  // the chain above the peak is 3 + 4 = 7 MiB while B runs.
  TraceGraph graph = test::build_graph({kernel(1, {{"w", mib(4)}}, {{"x", mib(1)}}),
                                        kernel(2, {{"x", mib(1)}}, {{"y", mib(2)}}),
                                        kernel(3, {{"y", mib(2)}, {"w", mib(4)}}, {})});
  LocalMemoryTracker tracker = make({&graph});
  EXPECT_EQ(tracker.held(0), 4 * kMiB);
  Player play(tracker, graph);
  play.start(0, 5);
  play.end(0, 5, 10);
  play.start(1, 10);
  EXPECT_EQ(tracker.held(0), 7 * kMiB);
  play.end(1, 10, 20);
  play.start(2, 20);
  EXPECT_EQ(tracker.held(0), 6 * kMiB);
  play.end(2, 20, 30);
  EXPECT_EQ(tracker.held(0), 0u);
  EXPECT_EQ(tracker.peak(0), 7 * kMiB);
}

TEST(LocalMemory, a_tensor_nobody_reads_stays_to_the_end_of_the_run) {
  // A weight gradient dw (3 MiB) written by B and read by no one stays after B ends.
  TraceGraph graph = test::build_graph(
      {kernel(1, {}, {{"x", mib(1)}}), kernel(2, {{"x", mib(1)}}, {{"dw", mib(3)}})});
  LocalMemoryTracker tracker = make({&graph});
  Player play(tracker, graph);
  play.start(0, 0);
  play.end(0, 0, 10);
  play.start(1, 10);
  play.end(1, 10, 20);
  EXPECT_EQ(tracker.held(0), 3 * kMiB);
  EXPECT_EQ(tracker.peak(0), 4 * kMiB);
}

TEST(LocalMemory, sizes_may_be_written_as_floats) {
  // The symbolic tensor graph generator writes "32768.0"; an exponent works too.
  TraceGraph graph = test::build_graph(
      {kernel(1, {}, {{"a", "32768.0"}, {"b", "1e3"}, {"c", "1000"}, {"empty", "0.0"}})});
  LocalMemoryTracker tracker = make({&graph});
  Player play(tracker, graph);
  play.start(0, 0);
  EXPECT_EQ(tracker.held(0), 32768u + 1000u + 1000u);
  play.end(0, 0, 1);
  EXPECT_EQ(tracker.peak(0), 34768u);
}

TEST(LocalMemory, changes_at_one_instant_count_together) {
  // P (100 bytes) ends at 10 and Q (200 bytes), independent of it, starts at 10; even when Q's
  // start is heard first the peak is 200, not 300: at no time do both hold memory.
  Node p = kernel(1, {}, {{"p", "100"}});
  Node p_reader = kernel(2, {{"p", "100"}}, {});
  Node q = kernel(3, {}, {{"q", "200"}});
  Node q_reader = kernel(4, {{"q", "200"}}, {});
  TraceGraph graph = test::build_graph({p, p_reader, q, q_reader});
  LocalMemoryTracker tracker = make({&graph});
  Player play(tracker, graph);
  play.start(0, 0);
  play.start(1, 0);
  play.start(2, 10);
  play.start(3, 10);
  play.end(0, 0, 10);
  play.end(1, 0, 10);
  play.end(2, 10, 20);
  play.end(3, 10, 20);
  EXPECT_EQ(tracker.peak(0), 200u);
}

TEST(LocalMemory, a_node_that_reads_and_writes_a_tensor_in_place_uses_it_once) {
  // A writes x; B updates x in place (reads and writes it); C reads it. x is freed once, by C.
  TraceGraph graph = test::build_graph({kernel(1, {}, {{"x", mib(1)}}),
                                        kernel(2, {{"x", mib(1)}}, {{"x", mib(1)}}),
                                        kernel(3, {{"x", mib(1)}}, {})});
  LocalMemoryTracker tracker = make({&graph});
  Player play(tracker, graph);
  for (chakra::NodeIndex node = 0; node < 3; ++node) {
    play.start(node, 10 * node);
    EXPECT_EQ(tracker.held(0), kMiB);
    play.end(node, 10 * node, 10 * node + 10);
  }
  EXPECT_EQ(tracker.held(0), 0u);
  EXPECT_EQ(tracker.peak(0), kMiB);
}

TEST(LocalMemory, nodes_without_tensor_attributes_hold_what_they_touch_while_they_run) {
  // A compute node holds its tensor_size, a collective its comm_size, each only while it runs.
  Node compute = test::comp_node(1);
  test::add_attr(compute, "tensor_size").set_uint64_val(300);
  Node collective = test::coll_node(2, ChakraProtoMsg::ALL_REDUCE, 500);
  TraceGraph graph = test::build_graph({compute, collective});
  LocalMemoryTracker tracker = make({&graph});
  EXPECT_FALSE(tracker.has_tensor_attributes());
  Player play(tracker, graph);
  play.start(0, 0);
  play.start(1, 5);
  EXPECT_EQ(tracker.held(0), 800u);
  play.end(0, 0, 10);
  EXPECT_EQ(tracker.held(0), 500u);
  play.end(1, 5, 20);
  EXPECT_EQ(tracker.held(0), 0u);
  EXPECT_EQ(tracker.peak(0), 800u);
}

TEST(LocalMemory, an_outputs_attribute_without_a_value_lists_nothing) {
  // The generator writes collectives so: inputs listed, outputs present but empty.
  Node collective = test::coll_node(1, ChakraProtoMsg::ALL_GATHER, 64);
  tensors(collective, "inputs", {{"g", "64"}});
  test::add_attr(collective, "outputs");
  TraceGraph graph = test::build_graph({collective});
  LocalMemoryTracker tracker = make({&graph});
  EXPECT_TRUE(tracker.has_tensor_attributes());
  EXPECT_EQ(tracker.held(0), 64u);  // read and never written: held from the start
  Player play(tracker, graph);
  play.start(0, 0);
  play.end(0, 0, 10);
  EXPECT_EQ(tracker.held(0), 0u);
  EXPECT_EQ(tracker.peak(0), 64u);
}

TEST(LocalMemory, nodes_that_take_no_time_are_not_counted) {
  // A compute node with neither a duration nor FLOPs never runs, so its reading x does not keep x
  // alive after B, the last reader that runs.
  Node idle = test::make_node(3, ChakraProtoMsg::COMP_NODE);
  tensors(idle, "inputs", {{"x", "100"}});
  TraceGraph graph =
      test::build_graph({kernel(1, {}, {{"x", "100"}}), kernel(2, {{"x", "100"}}, {}), idle});
  LocalMemoryTracker tracker = make({&graph});
  Player play(tracker, graph);
  play.start(0, 0);
  play.end(0, 0, 10);
  play.start(1, 10);
  play.end(1, 10, 20);
  EXPECT_EQ(tracker.held(0), 0u);
}

TEST(LocalMemory, ranks_are_tracked_apart) {
  TraceGraph small = test::build_graph({kernel(1, {}, {{"x", "10"}})});
  TraceGraph large = test::build_graph({kernel(1, {}, {{"x", "1000"}})});
  LocalMemoryTracker tracker = make({&small, &large});
  Player first(tracker, small, 0);
  Player second(tracker, large, 1);
  first.start(0, 0);
  second.start(0, 0);
  first.end(0, 0, 5);
  second.end(0, 0, 5);
  EXPECT_EQ(tracker.peak(0), 10u);
  EXPECT_EQ(tracker.peak(1), 1000u);
}

TEST(LocalMemory, ranks_running_one_trace_share_its_preparation_but_not_their_state) {
  // Both ranks run the same TraceGraph (orrery run --uniform): each holds its own tensors.
  TraceGraph graph =
      test::build_graph({kernel(1, {{"w", "50"}}, {{"x", "100"}}), kernel(2, {{"x", "100"}}, {})});
  LocalMemoryTracker tracker = make({&graph, &graph});
  Player first(tracker, graph, 0);
  Player second(tracker, graph, 1);
  first.start(0, 0);
  EXPECT_EQ(tracker.held(0), 150u);
  EXPECT_EQ(tracker.held(1), 50u);
  first.end(0, 0, 10);
  first.start(1, 10);
  first.end(1, 10, 20);
  EXPECT_EQ(tracker.held(0), 0u);
  second.start(0, 30);
  second.end(0, 30, 40);
  EXPECT_EQ(tracker.held(1), 100u);
  EXPECT_EQ(tracker.peak(0), 150u);
  EXPECT_EQ(tracker.peak(1), 150u);
}

TEST(LocalMemory, malformed_tensor_lists_are_errors_naming_the_node) {
  auto error_of = [](const Node& node) {
    TraceGraph graph = test::build_graph({node});
    Expected<LocalMemoryTracker> tracker = LocalMemoryTracker::create({&graph});
    EXPECT_FALSE(tracker);
    return tracker ? std::string() : tracker.error().message();
  };
  Node odd = test::comp_node(7);
  test::add_attr(odd, "inputs").mutable_string_list()->add_values("x");
  EXPECT_NE(error_of(odd).find("node 7: 'inputs' has 1 strings, expected tensor name and size "
                               "pairs"),
            std::string::npos)
      << error_of(odd);
  Node bad_size = kernel(8, {}, {{"y", "lots"}});
  EXPECT_NE(error_of(bad_size).find("node 8: 'outputs' gives tensor 'y' the size 'lots'"),
            std::string::npos)
      << error_of(bad_size);
  Node negative = kernel(9, {{"z", "-4"}}, {});
  EXPECT_NE(error_of(negative).find("the size '-4'"), std::string::npos);
  Node not_a_list = test::comp_node(10);
  test::add_attr(not_a_list, "inputs").set_int64_val(3);
  EXPECT_NE(error_of(not_a_list).find("node 10"), std::string::npos) << error_of(not_a_list);
}

}  // namespace local_memory_test
}  // namespace orrery::workload
