// The remote memory models: what one access costs, and who waits for whom (docs/models/memory.md).
//
// Figures: latency 500 ns, bandwidth 50 GB/s (bytes per ns), 1 MiB accesses:
// 500 + floor(1,048,576 / 50) = 500 + 20,971 = 21,471 ns each.
#include "memory/remote_memory.h"

#include <gtest/gtest.h>

namespace orrery::memory {
namespace remote_memory_test {

constexpr uint64_t kMiB = 1 << 20;
constexpr int64_t kAccessNs = 21471;

RemoteMemoryConfig config(MemoryType type, uint32_t nodes = 0, uint32_t per_node = 0) {
  RemoteMemoryConfig out;
  out.type = type;
  out.latency_ns = 500;
  out.bandwidth_gbps = 50;
  out.num_nodes = nodes;
  out.num_npus_per_node = per_node;
  return out;
}

SimTime ns(int64_t value) { return SimTime::from_ns(value); }

SimTime access(RemoteMemory& memory, uint32_t rank, uint64_t bytes, SimTime now) {
  Expected<SimTime> done = memory.access(rank, bytes, now);
  EXPECT_TRUE(done) << done.error().message();
  return done ? *done : SimTime::zero();
}

TEST(RemoteMemory, an_access_costs_latency_plus_bytes_over_bandwidth_truncated_to_whole_ns) {
  for (MemoryType type : {MemoryType::kPerNpu, MemoryType::kPerNode, MemoryType::kPool}) {
    RemoteMemory memory(config(type, 2, 2), 4);
    EXPECT_EQ(memory.cost(kMiB), ns(kAccessNs));
    EXPECT_EQ(access(memory, 3, kMiB, ns(1000)), ns(1000 + kAccessNs));
  }
  RemoteMemory memory(config(MemoryType::kPerNpu), 1);
  EXPECT_EQ(memory.cost(0), ns(500));
  EXPECT_EQ(memory.cost(49), ns(500));  // 0.98 ns of transfer: none counted
  EXPECT_EQ(memory.cost(50), ns(501));
}

TEST(RemoteMemory, the_transfer_time_is_truncated_as_astra_sim_computes_it) {
  // ASTRA-sim computes (bytes / (bw x 1e9)) x 1e9 in doubles and truncates: 45 bytes at 3 GB/s
  // come out as 14.999999999999998 ns, so 14 ns, where exact arithmetic gives 15.
  RemoteMemoryConfig slow = config(MemoryType::kPerNpu);
  slow.latency_ns = 0;
  slow.bandwidth_gbps = 3;
  RemoteMemory memory(slow, 1);
  EXPECT_EQ(memory.cost(45), ns(14));
  EXPECT_EQ(memory.cost(46), ns(15));
}

TEST(RemoteMemory, per_npu_accesses_never_wait) {
  RemoteMemory memory(config(MemoryType::kPerNpu), 4);
  // Every rank at once, and a second access of rank 0 in the same instant: no contention at all.
  for (uint32_t rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(access(memory, rank, kMiB, ns(0)), ns(kAccessNs)) << "rank " << rank;
  }
  EXPECT_EQ(access(memory, 0, kMiB, ns(0)), ns(kAccessNs));
  EXPECT_EQ(memory.fifo_of(0), -1);
  EXPECT_EQ(memory.fifo_count(), 0u);
}

TEST(RemoteMemory, per_node_accesses_of_one_node_serialize_and_other_nodes_do_not_wait) {
  // Two nodes of two NPUs: ranks 0 and 1 share node 0, ranks 2 and 3 node 1.
  RemoteMemory memory(config(MemoryType::kPerNode, 2, 2), 4);
  EXPECT_EQ(memory.fifo_of(1), 0);
  EXPECT_EQ(memory.fifo_of(2), 1);
  EXPECT_EQ(access(memory, 0, kMiB, ns(0)), ns(kAccessNs));
  // Rank 1 waits for rank 0's whole access, latency included.
  EXPECT_EQ(access(memory, 1, kMiB, ns(0)), ns(2 * kAccessNs));
  // Rank 2 is on the other node.
  EXPECT_EQ(access(memory, 2, kMiB, ns(0)), ns(kAccessNs));
  // An access issued while node 0 is busy starts when it frees: at 42,942 ns.
  EXPECT_EQ(access(memory, 0, kMiB, ns(30000)), ns(3 * kAccessNs));
  // Once the FIFO has drained, an access starts when it is issued.
  EXPECT_EQ(access(memory, 1, kMiB, ns(100000)), ns(100000 + kAccessNs));
  EXPECT_EQ(access(memory, 3, kMiB, ns(100000)), ns(100000 + kAccessNs));
}

TEST(RemoteMemory, per_node_ranks_beyond_the_configured_nodes_get_nodes_of_their_own) {
  // One node of 2 NPUs but 5 ranks: ranks 2-3 form node 1 and rank 4 node 2.
  RemoteMemory memory(config(MemoryType::kPerNode, 1, 2), 5);
  EXPECT_EQ(memory.fifo_count(), 3u);
  EXPECT_EQ(memory.fifo_of(3), 1);
  EXPECT_EQ(memory.fifo_of(4), 2);
  EXPECT_EQ(access(memory, 2, kMiB, ns(0)), ns(kAccessNs));
  EXPECT_EQ(access(memory, 3, kMiB, ns(0)), ns(2 * kAccessNs));
  EXPECT_EQ(access(memory, 4, kMiB, ns(0)), ns(kAccessNs));
}

TEST(RemoteMemory, a_pool_serializes_every_access_in_issue_order) {
  RemoteMemory memory(config(MemoryType::kPool), 4);
  EXPECT_EQ(memory.fifo_count(), 1u);
  for (uint32_t rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(access(memory, rank, kMiB, ns(0)), ns((rank + 1) * kAccessNs)) << "rank " << rank;
  }
  // Smaller accesses queue the same way: 500 + 1,000 / 50 = 520 ns after the queue drains.
  EXPECT_EQ(access(memory, 0, 1000, ns(10)), ns(4 * kAccessNs + 520));
}

TEST(RemoteMemory, no_memory_expansion_rejects_memory_nodes_as_astra_sim_does) {
  RemoteMemory none(RemoteMemoryConfig{}, 2);
  EXPECT_EQ(none.cost(kMiB), SimTime::zero());
  Expected<SimTime> done = none.access(0, kMiB, ns(0));
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().kind(), ErrorKind::kConfig);
  EXPECT_NE(done.error().message().find("no remote memory file was given"), std::string::npos)
      << done.error().message();
  EXPECT_NE(done.error().message().find("--remote-memory-configuration"), std::string::npos);

  RemoteMemoryConfig from_file;
  from_file.path = "mem.json";
  RemoteMemory named(from_file, 2);
  Expected<SimTime> again = named.access(1, 1, ns(0));
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message().find("mem.json sets NO_MEMORY_EXPANSION"), std::string::npos)
      << again.error().message();
}

TEST(RemoteMemory, two_memories_keep_their_own_queues) {
  RemoteMemory first(config(MemoryType::kPool), 2);
  RemoteMemory second(config(MemoryType::kPool), 2);
  EXPECT_EQ(access(first, 0, kMiB, ns(0)), ns(kAccessNs));
  EXPECT_EQ(access(second, 0, kMiB, ns(0)), ns(kAccessNs));
}

}  // namespace remote_memory_test
}  // namespace orrery::memory
