// Recorded times: the profiler trace of the same run matched to the replayed iteration.
#include <gtest/gtest.h>

#include "convert/kineto_trace.h"
#include "replay/recorded_times.h"
#include "replay_test_support.h"

namespace orrery::replay {
namespace recorded_times_test {

TEST(RecordedTimes, longest_common_subsequence_of_small_sequences) {
  using Pairs = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(longest_common_subsequence({1, 2, 3}, {1, 2, 3}), (Pairs{{0, 0}, {1, 1}, {2, 2}}));
  // A name missing on one side costs only itself (a greedy match would skip ahead to the next 2).
  EXPECT_EQ(longest_common_subsequence({1, 2, 3, 2, 4}, {1, 3, 2, 4}).size(), 4u);
  EXPECT_EQ(longest_common_subsequence({5, 6}, {7, 8}).size(), 0u);
  EXPECT_TRUE(longest_common_subsequence({}, {1}).empty());
  const Pairs pairs = longest_common_subsequence({1, 9, 2, 9, 3}, {1, 2, 3, 9});
  ASSERT_EQ(pairs.size(), 3u);
  for (size_t at = 1; at < pairs.size(); ++at) {
    EXPECT_LT(pairs[at - 1].first, pairs[at].first);
    EXPECT_LT(pairs[at - 1].second, pairs[at].second);
  }
}

struct Loaded {
  convert::HostTrace host;
  ReplayPlan plan;
  RecordedTimes times;
};

Loaded load(const std::string& et, const std::string& profile) {
  Expected<convert::HostTrace> host = convert::read_host_trace(et);
  EXPECT_TRUE(host) << host.error().message();
  Expected<ReplayPlan> plan = build_plan(*host, {});
  EXPECT_TRUE(plan) << plan.error().message();
  Expected<convert::KinetoTrace> kineto = convert::read_kineto_trace(profile);
  EXPECT_TRUE(kineto) << kineto.error().message();
  RecordedTimes times = recorded_times(*plan, *host, *kineto);
  return {std::move(*host), std::move(*plan), std::move(times)};
}

// The MLP's profiler trace holds six iterations; ProfilerStep#2 is the one in the execution
// trace, and every node of it is matched.
TEST(RecordedTimes, mlp_iteration_and_every_node_matched) {
  const Loaded mlp = load(test::recorded_et("mlp_train"), test::recorded_profile("mlp_train"));
  const RecordedTimes& times = mlp.times;
  EXPECT_EQ(times.iteration_samples_us,
            (std::vector<double>{55007, 59044, 61376, 58967, 69535, 60087}));
  ASSERT_TRUE(times.iteration_us);
  EXPECT_DOUBLE_EQ(*times.iteration_us, (59044.0 + 60087.0) / 2) << "the median of the six";
  ASSERT_TRUE(times.traced_iteration_us);
  EXPECT_DOUBLE_EQ(*times.traced_iteration_us, 61376.0) << "ProfilerStep#2's own duration";
  EXPECT_EQ(times.nodes, 209u);
  EXPECT_EQ(times.nodes_matched, 209u);
  EXPECT_EQ(times.ops_matched, mlp.plan.ops.size());
  EXPECT_FALSE(times.has_gpu);
  // The recorded op times fit inside the iteration (each outermost op's inclusive duration).
  double sum = 0;
  for (const std::optional<double>& us : times.cpu_us) sum += us.value_or(0);
  EXPECT_GT(sum, 0.5 * 61376.0);
  EXPECT_LT(sum, 61376.0);
}

// The transformer's trace: the profiler left out 5 of 1,015 nodes (aten::div_ among them); the
// alignment loses only those.
TEST(RecordedTimes, nodes_missing_from_the_profile_cost_only_themselves) {
  const Loaded block =
      load(test::recorded_et("transformer_train"), test::recorded_profile("transformer_train"));
  EXPECT_EQ(block.times.nodes, 1015u);
  EXPECT_EQ(block.times.nodes_matched, 1010u);
}

// A GPU trace: each op's recorded GPU time is that of the kernels its runtime calls launched.
TEST(RecordedTimes, gpu_work_of_a_kineto_trace) {
  const Loaded linear = load(test::test_data("pytorch/linear_et.json.gz"),
                             test::test_data("pytorch/linear_kineto.json.gz"));
  EXPECT_TRUE(linear.times.has_gpu);
  EXPECT_EQ(linear.times.nodes_matched, linear.times.nodes);
  EXPECT_FALSE(linear.times.iteration_us) << "no ProfilerStep# in linear_kineto";
  double gpu = 0;
  size_t with_gpu = 0;
  for (size_t at = 0; at < linear.plan.ops.size(); ++at) {
    if (linear.times.gpu_us[at] && *linear.times.gpu_us[at] > 0) {
      ++with_gpu;
      gpu += *linear.times.gpu_us[at];
    }
  }
  EXPECT_GT(with_gpu, 100u);
  EXPECT_GT(gpu, 1000.0);
}

}  // namespace recorded_times_test
}  // namespace orrery::replay
