// system/collective_algorithm.h: the interface between the collective engine and one algorithm.
//
// The engine (collective_engine.h) owns everything an algorithm does not decide: chunking, the
// per-dimension queues and their scheduling, matching messages to receives, the endpoint delay and
// the reduction cost, the network and the peer model. An algorithm decides, for one phase of one
// chunk at one member, what to send to whom and what a receive does: it is a state machine driven
// by three calls (start, on_continue after an endpoint delay, on_receive when an expected message
// has come) acting through a PhaseRun. Each algorithm keeps its own state in the run's fixed-size
// state block (an algorithm-specific trivially copyable struct), so no allocation happens per
// phase and adding an algorithm touches no other algorithm.
//
// Algorithm objects are stateless singletons (collective_algorithm(op, config)); one file per
// algorithm under system/algorithms/. Every rule is the one docs/models/system.md states and
// ASTRA-sim 2.x implements (tests/sim reproduce its figures to the nanosecond).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string_view>
#include <type_traits>

#include "core/error.h"
#include "core/time.h"
#include "network/topology.h"
#include "system/nccl_model.h"
#include "system/system_config.h"

namespace orrery::sys {

class CollectiveEngine;

// What a phase computes over its members (a hierarchical collective runs several phases).
enum class PhaseOp : uint8_t {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kAllToAll,
  kBroadcast,
  kReduce,
  kGather,
  kScatter,
  kBarrier
};

// How every member's copy of a message lies relative to the sender's, for a peer model that
// simulates one member and mirrors the others (peer_model.h): a shift (every member sends to the
// member the same number of positions on: ring, direct) or a pairwise exchange (members swap with
// a partner at a distance: halving-doubling). Messages of other algorithms have no mirror.
enum class MirrorPattern : uint8_t { kNone, kShift, kPairwise };

// The part of a stream an algorithm reads and writes: its phase, its member position and its
// state block.
struct AlgorithmStream {
  static constexpr size_t kStateBytes = 64;
  PhaseOp op = PhaseOp::kAllReduce;
  bool anticlockwise = false;  // ring direction of the phase
  uint32_t members = 0;        // n
  uint32_t index = 0;          // this member's position among them
  uint32_t chunk = 0;          // the chunk of the collective this stream carries
  uint32_t window = 0;         // the configuration's window (directN), 0 when none
  uint64_t size = 0;           // input bytes of the phase
  alignas(8) std::byte state[kStateBytes];
};

// One phase of one stream, as an algorithm sees it. Valid for the duration of one call from the
// engine; finish() ends the phase and must be the last thing the call does.
class PhaseRun {
 public:
  PhaseOp op() const { return stream_->op; }
  uint32_t members() const { return stream_->members; }
  uint32_t index() const { return stream_->index; }
  uint32_t chunk() const { return stream_->chunk; }
  uint32_t window() const { return stream_->window; }
  uint64_t size() const { return stream_->size; }
  bool anticlockwise() const { return stream_->anticlockwise; }

  // The algorithm's state, zeroed before start().
  template <typename State>
  State& state() {
    static_assert(sizeof(State) <= AlgorithmStream::kStateBytes, "algorithm state too large");
    static_assert(std::is_trivially_copyable_v<State> && std::is_trivially_destructible_v<State>);
    static_assert(alignof(State) <= 8);
    return *std::launder(reinterpret_cast<State*>(stream_->state));
  }

  // The endpoint delay, then (when `reduce`) the reduction of `bytes`, then on_continue.
  void after_endpoint_delay(bool reduce, uint64_t bytes);
  // on_continue after `delay` (an algorithm that times itself: nccl).
  void after_delay(SimTime delay);
  // The run's system configuration and network, for algorithms that model the machine (nccl).
  const SystemConfig& system() const;
  const net::Topology& topology() const;
  // The rank of member `index` of this phase (its group's ranks in order).
  uint32_t member_rank(uint32_t index) const;
  // The fabric NCCL sees for this phase's members (nccl_fabric), computed once per member list
  // and kept by the engine: it is O(members), and every member asks (nccl).
  const NcclFabric& nccl_fabric() const;
  // Sends `bytes` to member `to` (no receive is implied).
  void send(uint32_t to, uint64_t bytes);
  // Waits for the next message of this phase from member `from`; on_receive runs when it is in.
  void expect(uint32_t from);
  // Sends `bytes` to member `to` and waits for the message from member `from` that mirrors it (what
  // `from` sends this member in the same step), then on_receive. `pattern` says how every member's
  // copy lies, for a peer model that mirrors the members it does not simulate.
  void exchange(uint32_t to, uint32_t from, uint64_t bytes, MirrorPattern pattern);
  // In-network collectives: sends `up_bytes` to the dimension's switch, which answers every
  // member with `down_bytes` once all have sent; expect_from_switch waits for that answer.
  void send_to_switch(uint64_t up_bytes, uint64_t down_bytes);
  void expect_from_switch();
  // The phase is over at this member: the stream moves on to its next phase or completes.
  void finish();
  // Stops the run with `error`: the phase cannot run (nccl, when NCCL_ALGO and NCCL_PROTO leave
  // it no algorithm). Nothing else may follow in the call.
  void fail(Error error);

 private:
  friend class CollectiveEngine;
  PhaseRun(CollectiveEngine& engine, uint32_t stream_id, AlgorithmStream& stream)
      : engine_(&engine), stream_id_(stream_id), stream_(&stream) {}

  CollectiveEngine* engine_;
  uint32_t stream_id_;
  AlgorithmStream* stream_;
};

class CollectiveAlgorithm {
 public:
  virtual ~CollectiveAlgorithm() = default;
  CollectiveAlgorithm(const CollectiveAlgorithm&) = delete;
  CollectiveAlgorithm& operator=(const CollectiveAlgorithm&) = delete;

  virtual std::string_view name() const = 0;
  // The phase begins at this member (every phase begins with an endpoint delay or a receive).
  virtual void start(PhaseRun& run) const = 0;
  // An endpoint delay asked for with after_endpoint_delay is over (and its reduction done).
  virtual void on_continue(PhaseRun& run) const = 0;
  // A message this member waits for (expect, exchange, expect_from_switch) has arrived.
  virtual void on_receive(PhaseRun& run) const = 0;

 protected:
  CollectiveAlgorithm() = default;
};

// The algorithm that runs a phase of `op` configured as `config` (broadcast, reduce, gather,
// scatter and barrier have one algorithm each, whatever the configuration). The object lives for
// the whole program.
const CollectiveAlgorithm& collective_algorithm(PhaseOp op, const Algorithm& config);

// Helpers shared by the algorithms.
inline uint32_t ceil_log2(uint32_t value) {
  uint32_t bits = 0;
  while ((1u << bits) < value) ++bits;
  return bits;
}
inline uint32_t floor_log2(uint32_t value) {
  uint32_t bits = 0;
  while ((2u << bits) <= value) ++bits;
  return bits;
}

}  // namespace orrery::sys
