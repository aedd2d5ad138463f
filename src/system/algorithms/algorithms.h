// system/algorithms/algorithms.h: the collective algorithms, one per file in this folder, each a
// stateless CollectiveAlgorithm (collective_algorithm.h) with its own per-stream state.
// collective_algorithm() in collective_algorithm.cpp picks one for a phase; tests reach them here.
#pragma once

#include "system/collective_algorithm.h"

namespace orrery::sys::algorithms {

// Which receives of ring, direct and halving-doubling reduce: a round's steps come as `unreduced`
// ones then `reduced` ones, and the round parity tells an all-reduce's reduce-scatter half (odd
// rounds) from its all-gather half. Part of an algorithm's per-stream state (zeroed at its start).
struct ReduceRounds {
  uint32_t unreduced;
  uint32_t reduced;
  bool odd_round;

  // Takes the next step, first opening a round of `unreduced_steps` then `reduced_steps` when the
  // last is used up; whether that step's receive reduces.
  bool next(PhaseOp op, uint32_t unreduced_steps, uint32_t reduced_steps) {
    if (unreduced == 0 && reduced == 0) {
      unreduced = unreduced_steps;
      reduced = reduced_steps;
      odd_round = !odd_round;
    }
    if (unreduced > 0) {
      --unreduced;
      return false;
    }
    --reduced;
    return op == PhaseOp::kReduceScatter || (op == PhaseOp::kAllReduce && odd_round);
  }
};

// Ring: n-1 (all-to-all: n(n-1)/2) steps to the next member, each waiting for the one message
// from the previous; an all-reduce runs twice round (reduce-scatter, then all-gather).
const CollectiveAlgorithm& ring();
// Direct: as ring, with a window of messages in flight to successive members (all of them, or N
// for directN); the second half of an all-reduce waits for every message of the first.
const CollectiveAlgorithm& direct();
// Halving-doubling (recursive halving and doubling): log2 n steps with the partner at distance 1,
// 2, 4, ... (all-gather: n/2, n/4, ...), an all-reduce turning round at the far end.
const CollectiveAlgorithm& halving_doubling();
// Double binary tree all-reduce: up a heap-ordered binary tree and back down, odd chunks on the
// mirrored tree.
const CollectiveAlgorithm& double_binary_tree();
// Broadcast and reduce: a pipelined chain from (to) the group's first member.
const CollectiveAlgorithm& chain();
// Gather and scatter: every member to (from) the group's first member at once.
const CollectiveAlgorithm& rooted();
// Barrier: dissemination, ceil(log2 n) rounds of 1-byte messages to the member 2^k ahead.
const CollectiveAlgorithm& barrier();
// In-network (SHARP-style) collectives on a Switch dimension: one hop up, one hop down.
const CollectiveAlgorithm& in_switch();
const CollectiveAlgorithm& nccl();

}  // namespace orrery::sys::algorithms
