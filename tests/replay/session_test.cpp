// Communication setup and the cross-rank agreement check, without running anything.
#include <gtest/gtest.h>

#include "replay/session.h"
#include "replay_test_support.h"

namespace orrery::replay {
namespace session_test {

ReplayPlan ddp_plan(int rank) {
  Expected<convert::HostTrace> host = convert::read_host_trace(
      test::recorded("ddp", "rank" + std::to_string(rank) + "_et.json.gz"));
  EXPECT_TRUE(host) << host.error().message();
  Expected<ReplayPlan> plan = build_plan(*host, {});
  EXPECT_TRUE(plan) << plan.error().message();
  return std::move(*plan);
}

TEST(ReplaySession, ddp_all_reduces_over_two_processes) {
  const ReplayPlan plan = ddp_plan(0);
  std::vector<std::string> notes;
  const std::vector<CommSetup> setups = plan_communication(plan, 0, 2, 2, notes);
  size_t count = 0;
  for (size_t at = 0; at < setups.size(); ++at) {
    if (plan.ops[at].kind != OpKind::kComm) continue;
    ASSERT_TRUE(setups[at].request) << setups[at].reason;
    EXPECT_EQ(setups[at].request->kind, CommOpKind::kAllReduce);
    EXPECT_EQ(setups[at].group, (std::vector<uint32_t>{0, 1}));
    ++count;
  }
  EXPECT_EQ(count, 2u);
  EXPECT_TRUE(notes.empty());
  EXPECT_EQ(comm_signature(setups, 0),
            "rank 0\nc 0,1 all-reduce 1071144 0\nc 0,1 all-reduce 526336 0\n");
}

TEST(ReplaySession, a_group_larger_than_the_replay_is_skipped_with_the_reason) {
  const ReplayPlan plan = ddp_plan(0);
  std::vector<std::string> notes;
  const std::vector<CommSetup> setups = plan_communication(plan, 0, 1, 2, notes);
  for (size_t at = 0; at < setups.size(); ++at) {
    if (plan.ops[at].kind != OpKind::kComm) continue;
    EXPECT_FALSE(setups[at].request);
    EXPECT_EQ(setups[at].reason, "its group has 2 ranks (0,1) and the replay runs 1 process");
  }
  // Without the job's size, the whole job is the replay's processes, and the report says so.
  const std::vector<CommSetup> alone = plan_communication(plan, 0, 1, 0, notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("does not say how many ranks its job had"), std::string::npos);
  for (size_t at = 0; at < alone.size(); ++at) {
    if (plan.ops[at].kind == OpKind::kComm) {
      EXPECT_TRUE(alone[at].request);
    }
  }
}

TEST(ReplaySession, ranks_that_disagree_are_named_before_anything_runs) {
  EXPECT_TRUE(
      check_signatures({"rank 0\nc 0,1 all-reduce 64 0\n", "rank 1\nc 0,1 all-reduce 64 0\n"}));
  const Status sizes =
      check_signatures({"rank 0\nc 0,1 all-reduce 64 0\n", "rank 1\nc 0,1 all-reduce 32 0\n"});
  ASSERT_FALSE(sizes);
  EXPECT_EQ(sizes.error().message(),
            "the ranks' traces disagree on the collectives of group 0,1: collective 1 is "
            "all-reduce of 64 B on rank 0 and all-reduce of 32 B on rank 1 (a replay would hang)");
  const Status count = check_signatures(
      {"rank 0\nc 0,1 all-reduce 64 0\nc 0,1 broadcast 8 1\n", "rank 1\nc 0,1 all-reduce 64 0\n"});
  ASSERT_FALSE(count);
  EXPECT_NE(count.error().message().find("collective 2 is broadcast of 8 B from group rank 1 on "
                                         "rank 0 and missing on rank 1"),
            std::string::npos)
      << count.error().message();
  EXPECT_TRUE(check_signatures({"rank 0\ns 1 7 100 0\n", "rank 1\nr 0 7 100 0\n"}));
  const Status unmatched = check_signatures({"rank 0\ns 1 7 100 0\n", "rank 1\n"});
  ASSERT_FALSE(unmatched);
  EXPECT_NE(unmatched.error().message().find("messages from rank 0 to rank 1: message 1 is sent "
                                             "as tag 7, 100 B and received as missing"),
            std::string::npos)
      << unmatched.error().message();
  // The two recorded DDP ranks agree.
  std::vector<std::string> signatures;
  for (int rank : {0, 1}) {
    std::vector<std::string> notes;
    signatures.push_back(
        comm_signature(plan_communication(ddp_plan(rank), static_cast<uint32_t>(rank), 2, 2, notes),
                       static_cast<uint32_t>(rank)));
  }
  const Status agreed = check_signatures(signatures);
  EXPECT_TRUE(agreed) << agreed.error().message();
}

}  // namespace session_test
}  // namespace orrery::replay
