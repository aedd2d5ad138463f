#include "system/peer_model.h"

#include <cassert>

#include "network/analytical_backend.h"

namespace orrery::sys {

MessageFate PeerModel::route_p2p(Rank src, Rank dst, int64_t /*tag*/, uint64_t /*bytes*/,
                                 SimTime /*now*/) {
  return as_addressed(src, dst);
}

MessageFate PeerModel::as_addressed(Rank src, Rank dst) {
  MessageFate fate;
  fate.network_src = src;
  fate.network_dst = dst;
  fate.arrives_from = src;
  fate.arrives_at = dst;
  return fate;
}

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

// Mirror mode per class; point-to-point messages between representatives by the plan's table.
class ClassPeerModel final : public PeerModel {
 public:
  ClassPeerModel(const net::Topology& topology, net::TimeRounding rounding,
                 std::shared_ptr<const ClassPlan> plan, bool queue_peaks)
      : topology_(&topology), rounding_(rounding), plan_(std::move(plan)), traffic_(topology) {
    traffic_.set_classes(&plan_->members);
    traffic_.set_queue_peaks(queue_peaks);
  }

  uint32_t simulated_count() const override { return static_cast<uint32_t>(plan_->members.size()); }
  bool simulated(Rank rank) const override {
    return plan_->members[plan_->class_of[rank]].front() == rank;
  }
  uint32_t slot(Rank rank) const override { return plan_->class_of[rank]; }

  MessageFate route(const CollectiveMessage& message, SimTime now) override {
    MessageFate fate;
    fate.network_src = message.src;
    fate.network_dst = message.dst;
    if (message.dst != message.src && simulated(message.dst)) {
      // A group across classes: the message goes to the representative it is addressed to.
      fate.arrives_from = message.src;
      fate.arrives_at = message.dst;
      fate.transport = MessageFate::Transport::kTimer;
      fate.delay = delay_of(message.src, message.dst, message.bytes);
      auto found = plan_->direct.find({message.src, message.dst});
      if (found != plan_->direct.end()) {
        const MirrorTraffic::RoutePairs& pairs = plan_->p2p_pairs[found->second];
        traffic_.record_routes(&pairs, message.bytes, now, now + fate.delay);
        fate.copies = pairs.size();
      }
      return fate;
    }
    if (message.pattern == MirrorPattern::kNone) {
      // No mirror (class runs never send these: sim/rank_classes.cpp admits only algorithms
      // that mirror): the message travels as addressed.
      fate.arrives_from = message.src;
      fate.arrives_at = message.dst;
      return fate;
    }
    const uint32_t rank_class = plan_->class_of[message.src];
    const SimTime delay = delay_of(message.src, message.dst, message.bytes);
    fate.arrives_from = message.mirror_src;
    fate.arrives_at = message.src;
    fate.copies = plan_->members[rank_class].size();
    fate.transport = MessageFate::Transport::kTimer;
    fate.delay = delay;
    if (message.dim == kFlatPhase) {
      // One phase over a group (a ring over a group that is not a sub-grid, nccl): every
      // member's copy, pair by pair.
      auto found = plan_->flat.find({message.src, message.dst});
      if (found != plan_->flat.end()) {
        const MirrorTraffic::RoutePairs& pairs = plan_->p2p_pairs[found->second];
        traffic_.record_routes(&pairs, message.bytes, now, now + delay);
        fate.copies = pairs.size();
      }
      return fate;
    }
    if (message.pattern == MirrorPattern::kPairwise) {
      // The representative is the smallest member: coordinate 0 in every dimension its groups
      // span, an even block at every distance.
      assert(message.src_index == 0);
      traffic_.record_partner_message(message.dim, message.dst_index, message.bytes, now,
                                      now + delay, rank_class);
    } else {
      traffic_.record_message(message.dim, message.src_index, message.dst_index, message.bytes, now,
                              now + delay, rank_class);
    }
    return fate;
  }

  MessageFate route_p2p(Rank src, Rank dst, int64_t tag, uint64_t bytes, SimTime now) override {
    auto found = plan_->p2p.find({src, dst, tag});
    if (found == plan_->p2p.end()) return as_addressed(src, dst);
    const ClassPlan::P2pRoute& route = found->second;
    const SimTime delay = delay_of(src, dst, bytes);
    const MirrorTraffic::RoutePairs& pairs = plan_->p2p_pairs[route.pairs];
    traffic_.record_routes(&pairs, bytes, now, now + delay);
    MessageFate fate;
    fate.transport = MessageFate::Transport::kTimer;
    fate.delay = delay;
    fate.network_src = src;
    fate.network_dst = dst;
    fate.arrives_from = route.arrives_from;
    fate.arrives_at = route.arrives_at;
    fate.copies = pairs.size();
    return fate;
  }

  MessageFate route_switch_hop(Rank rank, uint32_t dim, bool up, uint64_t bytes,
                               SimTime now) override {
    const net::Dimension& spec = topology_->dimension(dim);
    SimTime delay = spec.latency + spec.bandwidth.serialization_time(bytes);
    if (rounding_ == net::TimeRounding::kAstraSim) delay = net::truncate_to_ns(delay);
    const uint32_t rank_class = plan_->class_of[rank];
    traffic_.record_switch(dim, up, bytes, now, now + delay, rank_class);
    MessageFate fate;
    fate.transport = MessageFate::Transport::kTimer;
    fate.delay = delay;
    fate.network_src = rank;
    fate.network_dst = rank;
    fate.copies = plan_->members[rank_class].size();
    return fate;
  }

  // Every member of the switch is of the representative's class and arrives with it.
  uint32_t switch_participants(Rank /*rank*/, uint32_t /*dim*/) const override { return 1; }

  const MirrorTraffic* traffic() const override { return &traffic_; }

 private:
  SimTime delay_of(Rank src, Rank dst, uint64_t bytes) const {
    SimTime delay = net::analytical_delay(*topology_, src, dst, bytes);
    if (rounding_ == net::TimeRounding::kAstraSim) delay = net::truncate_to_ns(delay);
    return delay;
  }

  const net::Topology* topology_;
  net::TimeRounding rounding_;
  std::shared_ptr<const ClassPlan> plan_;
  MirrorTraffic traffic_;
};

}  // namespace

std::unique_ptr<PeerModel> make_class_peer_model(const net::Topology& topology,
                                                 net::TimeRounding rounding,
                                                 std::shared_ptr<const ClassPlan> plan,
                                                 bool queue_peaks) {
  return std::make_unique<ClassPeerModel>(topology, rounding, std::move(plan), queue_peaks);
}

std::unique_ptr<PeerModel> make_full_peer_model(const net::Topology& topology) {
  return std::make_unique<FullPeerModel>(topology);
}

std::unique_ptr<PeerModel> make_mirror_peer_model(const net::Topology& topology,
                                                  net::TimeRounding rounding,
                                                  bool through_network) {
  return std::make_unique<MirrorPeerModel>(topology, rounding, through_network);
}

}  // namespace orrery::sys
