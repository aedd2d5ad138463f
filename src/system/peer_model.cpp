#include "system/peer_model.h"

#include <cassert>

#include "network/analytical_backend.h"

namespace orrery::sys {

namespace {

class FullPeerModel final : public PeerModel {
 public:
  explicit FullPeerModel(const net::Topology& topology) : topology_(&topology) {}

  uint32_t simulated_count() const override { return topology_->rank_count(); }
  bool simulated(Rank /*rank*/) const override { return true; }
  uint32_t slot(Rank rank) const override { return rank; }

  MessageFate route(const CollectiveMessage& message, SimTime /*now*/) override {
    MessageFate fate;
    fate.network_src = message.src;
    fate.network_dst = message.dst;
    fate.arrives_from = message.src;
    fate.arrives_at = message.dst;
    return fate;
  }

  MessageFate route_switch_hop(Rank rank, uint32_t /*dim*/, bool /*up*/, uint64_t /*bytes*/,
                               SimTime /*now*/) override {
    MessageFate fate;
    fate.network_src = rank;
    fate.network_dst = rank;
    return fate;
  }

  uint32_t switch_participants(Rank /*rank*/, uint32_t dim) const override {
    return topology_->size(dim);
  }

 private:
  const net::Topology* topology_;
};

class MirrorPeerModel final : public PeerModel {
 public:
  MirrorPeerModel(const net::Topology& topology, net::TimeRounding rounding, bool through_network)
      : topology_(&topology),
        rounding_(rounding),
        through_network_(through_network),
        traffic_(topology) {}

  uint32_t simulated_count() const override { return 1; }
  bool simulated(Rank rank) const override { return rank == 0; }
  uint32_t slot(Rank /*rank*/) const override { return 0; }

  MessageFate route(const CollectiveMessage& message, SimTime now) override {
    MessageFate fate;
    fate.network_src = message.src;
    fate.network_dst = message.dst;
    if (message.pattern == MirrorPattern::kNone) {
      // No mirror (symmetric runs never send these): the message travels as addressed.
      fate.arrives_from = message.src;
      fate.arrives_at = message.dst;
      return fate;
    }
    SimTime delay = net::analytical_delay(*topology_, message.src, message.dst, message.bytes);
    if (rounding_ == net::TimeRounding::kAstraSim) delay = net::truncate_to_ns(delay);
    if (message.pattern == MirrorPattern::kPairwise) {
      // The representative (coordinate 0, an even block at every distance) sends upwards; members
      // of odd blocks send downwards: the links carry different traffic, expanded rank by rank.
      assert(message.src_index == 0);
      traffic_.record_partner_message(message.dim, message.dst_index, message.bytes, now,
                                      now + delay);
    } else {
      traffic_.record_message(message.dim, message.src_index, message.dst_index, message.bytes, now,
                              now + delay);
    }
    fate.arrives_from = message.mirror_src;
    fate.arrives_at = message.src;
    // Every rank sends its copy: the message count is the network's.
    fate.copies = topology_->rank_count();
    if (!through_network_) {
      fate.transport = MessageFate::Transport::kTimer;
      fate.delay = delay;
    }
    return fate;
  }

  MessageFate route_switch_hop(Rank rank, uint32_t dim, bool up, uint64_t bytes,
                               SimTime now) override {
    const net::Dimension& spec = topology_->dimension(dim);
    SimTime delay = spec.latency + spec.bandwidth.serialization_time(bytes);
    if (rounding_ == net::TimeRounding::kAstraSim) delay = net::truncate_to_ns(delay);
    traffic_.record_switch(dim, up, bytes, now, now + delay);
    MessageFate fate;
    fate.transport = MessageFate::Transport::kTimer;
    fate.delay = delay;
    fate.network_src = rank;
    fate.network_dst = rank;
    fate.copies = topology_->rank_count();
    return fate;
  }

  // Every member arrives with the representative.
  uint32_t switch_participants(Rank /*rank*/, uint32_t /*dim*/) const override { return 1; }

  const MirrorTraffic* traffic() const override { return &traffic_; }

 private:
  const net::Topology* topology_;
  net::TimeRounding rounding_;
  bool through_network_;
  MirrorTraffic traffic_;
};

}  // namespace

std::unique_ptr<PeerModel> make_full_peer_model(const net::Topology& topology) {
  return std::make_unique<FullPeerModel>(topology);
}

std::unique_ptr<PeerModel> make_mirror_peer_model(const net::Topology& topology,
                                                  net::TimeRounding rounding,
                                                  bool through_network) {
  return std::make_unique<MirrorPeerModel>(topology, rounding, through_network);
}

}  // namespace orrery::sys
