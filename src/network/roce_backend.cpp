#include "network/roce_backend.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include <fmt/format.h>

#include "core/slot_pool.h"
#include "core/units.h"

namespace orrery::net {

namespace {

// bits per second -> bytes per picosecond
double bytes_per_ps(double bps) { return bps / 8.0 / 1e12; }

}  // namespace

RoceBackend::RoceBackend(EventEngine& engine, std::shared_ptr<const Graph> graph, Topology logical,
                         RoceConfig config)
    : engine_(engine),
      graph_(std::move(graph)),
      logical_(std::move(logical)),
      config_(config),
      id_(engine.register_handler(*this)),
      rng_(config.seed ^ 0x9e3779b97f4a7c15ull) {
  const Graph& g = *graph_;
  const uint32_t data_frame = config_.mtu + config_.header_bytes;
  ports_.resize(g.link_count());
  for (LinkId id = 0; id < g.link_count(); ++id) {
    const GraphLink& link = g.link(id);
    Port& port = ports_[id];
    port.src = link.src;
    port.dst = link.dst;
    port.nic = !g.is_switch(link.src);
    port.to_nic = !g.is_switch(link.dst);
    port.latency = link.latency.ps();
    port.bandwidth = link.bandwidth;
    port.rate = link.bandwidth.bytes_per_second() / 1e12;
    port.ser_data = link.bandwidth.serialization_time(data_frame).ps();
    port.ser_control = link.bandwidth.serialization_time(config_.control_bytes).ps();
  }
  buffer_used_.assign(g.node_count(), 0);
  buffer_peak_.assign(g.node_count(), 0);

  // PFC thresholds per ingress link of every switch: headroom covers what is still coming once a
  // PAUSE is sent (a round trip of the link at line rate and a packet at each end); the auto XOFF
  // shares what is left of the buffer equally, so the sum never exceeds the buffer.
  std::vector<uint64_t> headroom_total(g.node_count(), 0);
  std::vector<uint32_t> ingress_count(g.node_count(), 0);
  std::vector<uint64_t> headroom(ports_.size(), 0);
  for (LinkId id = 0; id < ports_.size(); ++id) {
    const Port& port = ports_[id];
    if (port.to_nic && !g.spec().npu_forwarding) continue;
    headroom[id] = config_.headroom_bytes != 0
                       ? config_.headroom_bytes
                       : static_cast<uint64_t>(
                             std::ceil(2.0 * static_cast<double>(port.latency) * port.rate)) +
                             2ull * data_frame;
    headroom_total[port.dst] += headroom[id];
    ingress_count[port.dst] += 1;
  }
  const uint64_t xon_offset =
      config_.xon_offset_bytes != 0 ? config_.xon_offset_bytes : 2ull * data_frame;
  for (LinkId id = 0; id < ports_.size(); ++id) {
    Port& port = ports_[id];
    if (ingress_count[port.dst] == 0) continue;
    uint64_t xoff = config_.xoff_bytes;
    if (xoff == 0) {
      const uint64_t free = config_.buffer_bytes > headroom_total[port.dst]
                                ? config_.buffer_bytes - headroom_total[port.dst]
                                : 0;
      // A buffer too small for the headrooms still pauses early (two packets); losslessness is
      // then not guaranteed and drops are counted.
      xoff = std::max<uint64_t>(free / ingress_count[port.dst], 2ull * data_frame);
    }
    port.xoff_at = xoff;
    port.xon_at = xoff > xon_offset ? xoff - xon_offset : 0;
  }
}

RoceBackend::~RoceBackend() { engine_.unregister_handler(id_); }

void RoceBackend::set_listener(DeliveryListener& listener) {
  assert(listener_ == nullptr);
  listener_ = &listener;
}

double RoceBackend::uniform() {
  rng_ += 0x9e3779b97f4a7c15ull;
  return static_cast<double>(mix64(rng_) >> 11) * 0x1.0p-53;
}

uint32_t RoceBackend::take_packet() {
  uint32_t index;
  if (free_packets_ != kNil) {
    index = free_packets_;
    free_packets_ = packets_[index].next;
    packets_[index] = Packet{};
  } else {
    packets_.emplace_back();
    index = static_cast<uint32_t>(packets_.size() - 1);
    if (config_.cc == CongestionControl::kHpcc) int_.resize(packets_.size() * kMaxIntHops);
  }
  return index;
}

void RoceBackend::free_packet(uint32_t index) {
  packets_[index].next = free_packets_;
  free_packets_ = index;
}

void RoceBackend::push(Queue& queue, uint32_t packet) {
  queue.list.push_back(packets_, packet, &Packet::next);
  ++queue.packets;
  queue.bytes += packets_[packet].size;
}

uint32_t RoceBackend::pop(Queue& queue) {
  const uint32_t packet = queue.list.pop_front(packets_, &Packet::next);
  --queue.packets;
  queue.bytes -= packets_[packet].size;
  return packet;
}

void RoceBackend::send(Rank src, Rank dst, uint64_t bytes, uint64_t token) {
  assert(src < graph_->npu_count() && dst < graph_->npu_count());
  ++in_flight_;
  if (src == dst) {
    deliver_after(SimTime::zero(), token);
    return;
  }
  const uint32_t qp = qp_for(src, dst);
  const uint32_t m = take_slot(messages_, free_messages_);
  Message& msg = messages_[m];
  Qp& q = qps_[qp];
  msg.token = token;
  msg.bytes = bytes;
  msg.first = q.posted;
  msg.end = q.posted + (bytes == 0 ? 1 : (bytes + config_.mtu - 1) / config_.mtu);
  msg.seq = sequence_++;
  msg.start_ps = engine_.now().ps();
  msg.traced =
      std::binary_search(config_.trace_messages.begin(), config_.trace_messages.end(), msg.seq);
  q.posted = msg.end;
  if (msg.traced) ++q.traced;
  q.messages.push_back(messages_, m, &Message::next);
  if (q.tx == kNil) q.tx = m;
  if (q.rx == kNil) q.rx = m;
  activate(qp);
  if (config_.queue_sample_interval > SimTime::zero() && !sampling_) {
    sampling_ = true;
    engine_.schedule_after(config_.queue_sample_interval, id_, kSample, 0);
  }
}

uint32_t RoceBackend::qp_for(Rank src, Rank dst) {
  // The pair's messages take its QPs in turn (one QP: always the same).
  const uint32_t lane = config_.qps_per_pair > 1
                            ? static_cast<uint32_t>(labels_.next(src, dst) % config_.qps_per_pair)
                            : 0;
  const LaneKey key{(uint64_t{src} << 32) | dst, lane};
  if (config_.qp == QpMode::kPair) {
    if (auto it = pair_qp_.find(key); it != pair_qp_.end()) return it->second;
  }
  uint32_t index;
  if (!free_qps_.empty()) {
    index = free_qps_.back();
    free_qps_.pop_back();
  } else {
    qps_.emplace_back();
    index = static_cast<uint32_t>(qps_.size() - 1);
  }
  {
    // Reset the record but keep the path vectors' capacity (no allocation once warm).
    Qp& old = qps_[index];
    Path path = std::move(old.path);
    Path reverse = std::move(old.reverse);
    const uint32_t generation = old.generation + 1;
    old = Qp{};
    old.path = std::move(path);
    old.reverse = std::move(reverse);
    old.path.clear();
    old.reverse.clear();
    old.generation = generation;
  }
  if (config_.qp == QpMode::kPair) pair_qp_.emplace(key, index);
  Qp& f = qps_[index];
  f.live = true;
  f.src = src;
  f.dst = dst;
  f.lane = lane;
  // The path. qp: pair: QP j of a pair keeps the pair's j-th path (one UDP source port) however
  // often it is closed and opened again; drawing a new one at every reopening would let congested
  // paths keep their QPs (busy ones never close) while idle ones move, piling pairs onto hot
  // links. qp: message: the k-th message of a pair takes the k-th label, as in the flow backend.
  const uint64_t label = config_.qp == QpMode::kPair ? lane : labels_.next(*graph_, src, dst);
  graph_->route(src, dst, label, f.path);
  graph_->route(dst, src, label, f.reverse);
  const int64_t now = engine_.now().ps();
  f.last_progress_ps = now;
  f.alpha_ps = now;
  int64_t rtt = 0;
  for (LinkId link : f.path) rtt += ports_[link].latency + ports_[link].ser_data;
  for (LinkId link : f.reverse) rtt += ports_[link].latency + ports_[link].ser_control;
  f.base_rtt = rtt;
  f.line_rate = ports_[f.path[0]].rate;
  f.rate = f.line_rate;
  f.bdp = std::max(f.line_rate * static_cast<double>(rtt),
                   static_cast<double>(config_.mtu + config_.header_bytes));
  switch (config_.cc) {
    case CongestionControl::kDcqcn:
      f.target = f.line_rate;
      break;
    case CongestionControl::kDctcp:
      f.window = f.bdp;
      break;
    case CongestionControl::kHpcc:
      f.window = f.bdp;
      f.wc = f.bdp;
      break;
    default:
      break;
  }
  return index;
}

uint32_t RoceBackend::message_at(const Qp& q, uint64_t psn) const {
  for (uint32_t m = q.messages.head; m != kNil; m = messages_[m].next) {
    if (psn < messages_[m].first) return kNil;
    if (psn < messages_[m].end) return m;
  }
  return kNil;
}

void RoceBackend::send_switch(Rank rank, uint32_t dim, bool up, uint64_t bytes, uint64_t token) {
  ++in_flight_;
  const LinkId link = graph_->edge_link(rank, dim, up);
  Port& port = ports_[link];
  const uint64_t packets = bytes == 0 ? 1 : (bytes + config_.mtu - 1) / config_.mtu;
  const uint64_t wire = bytes + packets * config_.header_bytes;
  const SimTime ser = port.bandwidth.serialization_time(wire);
  port.tx_bytes += wire;
  port.frames += packets;
  port.busy_ps += ser.ps();
  ++port.messages;
  deliver_after(ser + SimTime::from_ps(port.latency), token);
}

void RoceBackend::deliver_after(SimTime delay, uint64_t token) {
  const uint32_t slot = take_slot(local_tokens_, free_local_);
  local_tokens_[slot] = token;
  engine_.schedule_after(delay, id_, kLocal, slot);
}

void RoceBackend::activate(uint32_t qp) {
  Qp& q = qps_[qp];
  if (!q.in_nic && q.snd_nxt < q.posted) {
    q.in_nic = true;
    ports_[q.path[0]].qps.push_back(qp);
  }
  try_start(q.path[0]);
}

void RoceBackend::try_start(LinkId link) {
  Port& port = ports_[link];
  if (port.tx_pending) return;  // the end of the current frame will call again
  if (!port.queue[kControl].list.empty()) {
    transmit(link, pop(port.queue[kControl]));
    return;
  }
  if (port.paused) return;
  // Packets in transit first (switches; NPUs that forward), then the NIC's own QPs.
  if (!port.queue[kDataClass].list.empty()) {
    transmit(link, pop(port.queue[kDataClass]));
  } else if (port.nic) {
    nic_send(link);
  }
}

void RoceBackend::transmit(LinkId link, uint32_t packet) {
  Port& port = ports_[link];
  Packet& k = packets_[packet];
  const int64_t now = engine_.now().ps();
  const uint32_t data_frame = config_.mtu + config_.header_bytes;
  const int64_t ser = k.size == data_frame ? port.ser_data
                      : k.size == config_.control_bytes
                          ? port.ser_control
                          : port.bandwidth.serialization_time(k.size).ps();
  port.busy_until = now + ser;
  port.tx_pending = true;
  engine_.schedule_at(SimTime::from_ps(now + ser), id_, kTxDone, link);
  engine_.schedule_at(SimTime::from_ps(now + ser + port.latency), id_, kArrive, packet);
  ++port.frames;
  port.busy_ps += ser;
  port.tx_bytes += k.size;
  if (qps_[k.qp].traced != 0) trace(packet, RocePacketEvent::kTransmit, link);
  if (k.type != kData) return;
  ++port.data_packets;
  if (k.first != 0 && k.retransmission == 0) ++port.messages;
  if (k.in_link == kNil) return;  // from the NIC's own QP
  // Leaving a switch (or a forwarding NPU): free its buffer and the ingress link's PFC count.
  buffer_used_[port.src] -= k.size;
  Port& in = ports_[k.in_link];
  in.ingress_bytes -= k.size;
  if (in.xoff && in.ingress_bytes <= in.xon_at) {
    in.xoff = false;
    engine_.schedule_at(SimTime::from_ps(now + in.ser_control + in.latency), id_, kPause,
                        uint64_t{k.in_link} << 1);
  }
  if (config_.cc == CongestionControl::kHpcc && k.int_hops < kMaxIntHops) {
    IntHop& hop = int_[size_t{packet} * kMaxIntHops + k.int_hops];
    hop.tx_bytes = port.tx_bytes;
    hop.ts = now;
    hop.qlen = port.queue[kDataClass].bytes;
    hop.rate = port.rate;
    ++k.int_hops;
  }
}

bool RoceBackend::nic_send(LinkId link) {
  Port& port = ports_[link];
  const size_t n = port.qps.size();
  if (n == 0) return false;
  const int64_t now = engine_.now().ps();
  int64_t earliest = INT64_MAX;
  for (size_t i = 0; i < n; ++i) {
    const size_t at = (port.rr + i) % n;
    const uint32_t index = port.qps[at];
    Qp& f = qps_[index];
    if (f.snd_nxt >= f.posted) continue;
    if (f.window > 0 && f.snd_nxt > f.snd_una &&
        static_cast<double>((f.snd_nxt - f.snd_una) * config_.mtu) >= f.window) {
      continue;
    }
    if (f.next_send_ps > now) {
      earliest = std::min(earliest, f.next_send_ps);
      continue;
    }
    // The next turn starts after this QP (taken modulo the list then, so a QP that joins at the
    // end now is next in line).
    port.rr = static_cast<uint32_t>(at + 1);
    const uint32_t packet = take_packet();
    Packet& k = packets_[packet];
    k.type = kData;
    k.qp = index;
    k.psn = f.snd_nxt;
    k.sent_ps = now;
    // The message holding snd_nxt: the cursor only moves forward, except after going back N.
    if (f.tx == kNil || messages_[f.tx].first > f.snd_nxt) f.tx = f.messages.head;
    while (messages_[f.tx].end <= f.snd_nxt) f.tx = messages_[f.tx].next;
    Message& msg = messages_[f.tx];
    k.first = f.snd_nxt == msg.first ? 1 : 0;
    const uint64_t offset = (f.snd_nxt - msg.first) * config_.mtu;
    uint32_t size = static_cast<uint32_t>(
                        std::min<uint64_t>(config_.mtu, msg.bytes - std::min(msg.bytes, offset))) +
                    config_.header_bytes;
    if (config_.cc == CongestionControl::kHpcc) {
      const size_t switches = std::min<size_t>(f.path.size() - 1, kMaxIntHops);
      size += static_cast<uint32_t>(switches) * config_.int_hop_bytes;
    }
    k.size = size;
    if (f.snd_nxt < f.max_sent) {
      k.retransmission = 1;
      ++msg.retransmitted;
      ++totals_.retransmitted;
    }
    ++f.snd_nxt;
    f.max_sent = std::max(f.max_sent, f.snd_nxt);
    if (f.snd_nxt == f.posted) {
      // Everything sent: leave the round robin until a new message, a NACK or a timeout.
      port.qps.erase(port.qps.begin() + static_cast<std::ptrdiff_t>(at));
      port.rr = static_cast<uint32_t>(at);
      f.in_nic = false;
    }
    if (config_.cc == CongestionControl::kDcqcn && f.rate < f.line_rate) {
      f.bytes_since_cut += size;
      if (f.bytes_since_cut >= config_.dcqcn.byte_counter) {
        f.bytes_since_cut = 0;
        ++f.byte_count;
        dcqcn_increase(f);
      }
    }
    ++f.alive;
    ++totals_.data_packets;
    // Pacing: a QP below line rate waits size / rate before its next packet.
    f.next_send_ps = f.rate < f.line_rate * (1 - 1e-9)
                         ? now + std::llround(static_cast<double>(size) / f.rate)
                         : now;
    if (!config_.pfc) arm_rto(index);
    transmit(link, packet);
    return true;
  }
  if (earliest != INT64_MAX && (port.wake_at < 0 || earliest < port.wake_at)) {
    port.wake_at = earliest;
    engine_.schedule_at(SimTime::from_ps(earliest), id_, kNicWake, link);
  }
  return false;
}

void RoceBackend::handle_event(const Event& event) {
  switch (event.kind) {
    case kTxDone: {
      const auto link = static_cast<uint32_t>(event.arg);
      ports_[link].tx_pending = false;
      try_start(link);
      break;
    }
    case kArrive:
      arrive(static_cast<uint32_t>(event.arg));
      break;
    case kPause:
      pause(static_cast<uint32_t>(event.arg >> 1), (event.arg & 1) != 0);
      break;
    case kNicWake: {
      const auto link = static_cast<uint32_t>(event.arg);
      Port& port = ports_[link];
      if (port.wake_at != event.time.ps()) break;  // superseded by an earlier wake-up
      port.wake_at = -1;
      try_start(link);
      break;
    }
    case kDcqcnTimer:
    case kRtoTimer: {
      const auto index = static_cast<uint32_t>(event.arg >> 32);
      const auto generation = static_cast<uint32_t>(event.arg);
      Qp& f = qps_[index];
      if (!f.live || f.generation != generation) break;
      if (event.kind == kRtoTimer) {
        if (f.rto_at == event.time.ps()) on_rto(index);
      } else if (f.increase_at == event.time.ps()) {
        on_dcqcn_timer(index);
      }
      break;
    }
    case kLocal: {
      const auto slot = static_cast<uint32_t>(event.arg);
      const uint64_t token = local_tokens_[slot];
      free_local_.push_back(slot);
      --in_flight_;
      if (listener_ != nullptr) listener_->on_delivered(token);
      break;
    }
    case kSample:
      sample_queues();
      break;
    default:
      assert(false && "roce: unknown event kind");
  }
}

void RoceBackend::arrive(uint32_t packet) {
  Packet& k = packets_[packet];
  const Qp& f = qps_[k.qp];
  const Path& path = k.type == kData ? f.path : f.reverse;
  const LinkId link = path[k.hop];
  if (k.hop + 1u == path.size()) {
    if (f.traced != 0) trace(packet, RocePacketEvent::kReceive, link);
    if (k.type == kData) {
      receive_data(packet);
    } else {
      receive_control(packet);
    }
    return;
  }
  ++k.hop;
  enqueue_switch(path[k.hop], packet, link);
}

void RoceBackend::enqueue_switch(LinkId link, uint32_t packet, LinkId in_link) {
  Port& out = ports_[link];
  Packet& k = packets_[packet];
  if (k.type != kData) {
    push(out.queue[kControl], packet);
    try_start(link);
    return;
  }
  const NodeId node = out.src;
  if (buffer_used_[node] + k.size > config_.buffer_bytes) {
    if (qps_[k.qp].traced != 0) trace(packet, RocePacketEvent::kDrop, link);
    ++out.drops;
    ++totals_.drops;
    const uint32_t qp = k.qp;
    --qps_[qp].alive;
    free_packet(packet);
    maybe_release(qp);
    return;
  }
  Queue& queue = out.queue[kDataClass];
  if (queue.bytes > config_.kmin_bytes) {
    bool mark = queue.bytes >= config_.kmax_bytes;
    if (!mark) {
      const double p = config_.pmax * static_cast<double>(queue.bytes - config_.kmin_bytes) /
                       static_cast<double>(config_.kmax_bytes - config_.kmin_bytes);
      mark = uniform() < p;
    }
    if (mark) {
      k.ecn = 1;
      ++out.ecn_marks;
      ++totals_.ecn_marks;
    }
  }
  buffer_used_[node] += k.size;
  buffer_peak_[node] = std::max(buffer_peak_[node], buffer_used_[node]);
  k.in_link = static_cast<uint32_t>(in_link);
  Port& in = ports_[in_link];
  in.ingress_bytes += k.size;
  if (config_.pfc && !in.xoff && in.ingress_bytes >= in.xoff_at) {
    in.xoff = true;
    ++totals_.pauses;
    engine_.schedule_at(SimTime::from_ps(engine_.now().ps() + in.ser_control + in.latency), id_,
                        kPause, (in_link << 1) | 1);
  }
  push(queue, packet);
  out.peak_queue_bytes = std::max(out.peak_queue_bytes, queue.bytes);
  out.peak_queue_packets = std::max(out.peak_queue_packets, queue.packets);
  try_start(link);
}

void RoceBackend::pause(LinkId link, bool on) {
  Port& port = ports_[link];
  const int64_t now = engine_.now().ps();
  if (on) {
    if (port.paused) return;
    port.paused = true;
    port.paused_since = now;
    ++port.pauses;
  } else {
    if (!port.paused) return;
    port.paused = false;
    port.paused_ps += now - port.paused_since;
    try_start(link);
  }
}

void RoceBackend::send_control(uint32_t qp, PacketType type, uint64_t psn, uint32_t echo) {
  const uint32_t packet = take_packet();  // may move packets_: index, not reference, for echo
  Packet& c = packets_[packet];
  Qp& f = qps_[qp];
  c.type = type;
  c.qp = qp;
  c.psn = psn;
  c.size = config_.control_bytes;
  c.sent_ps = echo != kNil ? packets_[echo].sent_ps : engine_.now().ps();
  c.ecn = type == kAck && f.ece ? 1 : 0;
  if (config_.cc == CongestionControl::kHpcc && echo != kNil) {
    c.int_hops = packets_[echo].int_hops;
    std::copy_n(int_.begin() + static_cast<std::ptrdiff_t>(size_t{echo} * kMaxIntHops), c.int_hops,
                int_.begin() + static_cast<std::ptrdiff_t>(size_t{packet} * kMaxIntHops));
  }
  ++f.alive;
  ++totals_.control_packets;
  const LinkId link = f.reverse[0];
  push(ports_[link].queue[kControl], packet);
  try_start(link);
}

void RoceBackend::receive_data(uint32_t packet) {
  const uint32_t index = packets_[packet].qp;
  const uint64_t psn = packets_[packet].psn;
  const bool ecn = packets_[packet].ecn != 0;
  const int64_t now = engine_.now().ps();
  uint64_t delivered = UINT64_MAX;  // token of the message this packet completes
  Qp& f = qps_[index];              // send_control moves packets_, never qps_
  if (psn == f.rcv_nxt) {
    ++f.rcv_nxt;
    if (ecn) f.ece = true;
    if (ecn && config_.cc == CongestionControl::kDcqcn &&
        now - f.last_cnp_ps >= config_.dcqcn.cnp_interval.ps()) {
      f.last_cnp_ps = now;
      ++totals_.cnps;
      send_control(index, kCnp, psn, kNil);
    }
    // Acknowledge every ack_interval packets and the last packet of every message.
    ++f.unacked;
    const bool complete = f.rx != kNil && f.rcv_nxt == messages_[f.rx].end;
    if (f.unacked >= config_.ack_interval || complete) {
      send_control(index, kAck, f.rcv_nxt, packet);
      f.unacked = 0;
      f.ece = false;
    }
    if (complete) {
      const Message& done = messages_[f.rx];
      records_.push_back({done.token, f.src, f.dst, done.bytes, SimTime::from_ps(done.start_ps),
                          SimTime::from_ps(now), done.retransmitted});
      delivered = done.token;
      f.rx = done.next;
    }
  } else if (psn > f.rcv_nxt && f.nacked != f.rcv_nxt) {
    f.nacked = f.rcv_nxt;
    ++totals_.nacks;
    send_control(index, kNack, f.rcv_nxt, packet);
  }
  --f.alive;
  free_packet(packet);
  maybe_release(index);
  if (delivered != UINT64_MAX) {
    --in_flight_;
    // may send: on this very QP (qp: pair), and may move qps_ and messages_
    if (listener_ != nullptr) listener_->on_delivered(delivered);
  }
}

void RoceBackend::receive_control(uint32_t packet) {
  const Packet k = packets_[packet];
  Qp& f = qps_[k.qp];
  const int64_t now = engine_.now().ps();
  --f.alive;
  switch (k.type) {
    case kAck:
    case kNack: {
      if (k.psn > f.snd_una) {
        const uint64_t newly = k.psn - f.snd_una;
        f.snd_una = k.psn;
        f.last_progress_ps = now;
        if (f.snd_nxt < f.snd_una) f.snd_nxt = f.snd_una;
        // Messages acknowledged to their last packet are done on the sender's side too.
        while (!f.messages.empty() && messages_[f.messages.head].end <= f.snd_una) {
          const uint32_t done = f.messages.pop_front(messages_, &Message::next);
          if (f.tx == done) f.tx = f.messages.head;
          if (messages_[done].traced) --f.traced;
          free_messages_.push_back(done);
        }
        if (f.messages.empty()) f.tx = f.rx = kNil;
        if (k.type == kAck) {
          switch (config_.cc) {
            case CongestionControl::kDctcp:
              dctcp_ack(f, newly, k.ecn != 0);
              break;
            case CongestionControl::kTimely:
              if (f.snd_una >= f.next_update) {
                f.next_update =
                    f.snd_una + std::max<uint64_t>(1, config_.timely.segment_bytes / config_.mtu);
                timely_ack(f, now - k.sent_ps);
              }
              break;
            case CongestionControl::kHpcc:
              hpcc_ack(f, k, packet);
              break;
            default:
              break;
          }
        }
      }
      if (k.type == kNack && f.snd_nxt > k.psn) f.snd_nxt = k.psn;  // go back N
      break;
    }
    case kCnp:
      dcqcn_cnp(f);
      break;
    default:
      break;
  }
  free_packet(packet);
  if (f.snd_nxt < f.posted) {
    activate(k.qp);  // after go-back-N, or the window may have opened
  }
  maybe_release(k.qp);
}

void RoceBackend::maybe_release(uint32_t qp) {
  Qp& f = qps_[qp];
  if (!f.live || !f.messages.empty() || f.alive != 0) return;
  assert(!f.in_nic && f.snd_una == f.posted && f.rcv_nxt == f.posted);
  f.live = false;
  if (config_.qp == QpMode::kPair) pair_qp_.erase(LaneKey{(uint64_t{f.src} << 32) | f.dst, f.lane});
  free_qps_.push_back(qp);
}

void RoceBackend::arm_rto(uint32_t flow) {
  Qp& f = qps_[flow];
  if (f.rto_at >= 0) return;
  f.rto_at = std::max(engine_.now().ps(), f.last_progress_ps + config_.rto.ps());
  engine_.schedule_at(SimTime::from_ps(f.rto_at), id_, kRtoTimer,
                      (uint64_t{flow} << 32) | f.generation);
}

void RoceBackend::on_rto(uint32_t flow) {
  Qp& f = qps_[flow];
  f.rto_at = -1;
  if (f.snd_una == f.posted) return;
  const int64_t now = engine_.now().ps();
  if (now - f.last_progress_ps >= config_.rto.ps()) {
    ++totals_.timeouts;
    f.snd_nxt = f.snd_una;
    f.last_progress_ps = now;
    activate(flow);
  }
  arm_rto(flow);
}

void RoceBackend::dcqcn_cnp(Qp& f) {
  const auto& d = config_.dcqcn;
  const int64_t now = engine_.now().ps();
  const int64_t periods = (now - f.alpha_ps) / d.alpha_interval.ps();
  if (periods > 0) {
    f.alpha *= std::pow(1 - d.g, static_cast<double>(periods));
    f.alpha_ps += periods * d.alpha_interval.ps();
  }
  f.alpha = (1 - d.g) * f.alpha + d.g;
  if (now - f.decrease_ps < d.decrease_interval.ps()) return;
  f.decrease_ps = now;
  f.target = f.rate;
  f.rate = std::max(bytes_per_ps(d.min_rate_bps), f.rate * (1 - f.alpha / 2));
  f.increase_count = 0;
  f.byte_count = 0;
  f.bytes_since_cut = 0;
  f.increase_at = now + d.increase_interval.ps();
  const auto index = static_cast<uint64_t>(&f - qps_.data());
  engine_.schedule_at(SimTime::from_ps(f.increase_at), id_, kDcqcnTimer,
                      (index << 32) | f.generation);
}

void RoceBackend::on_dcqcn_timer(uint32_t flow) {
  Qp& f = qps_[flow];
  ++f.increase_count;
  dcqcn_increase(f);
  if (f.rate >= f.line_rate) {
    f.increase_at = -1;
    return;
  }
  f.increase_at = engine_.now().ps() + config_.dcqcn.increase_interval.ps();
  engine_.schedule_at(SimTime::from_ps(f.increase_at), id_, kDcqcnTimer,
                      (uint64_t{flow} << 32) | f.generation);
}

void RoceBackend::dcqcn_increase(Qp& f) {
  // The stage is set by the timer count T and the byte count BC since the last cut: fast recovery
  // while both are at most F, hyper increase by (min(T, BC) - F) x R_HAI once both exceed F,
  // additive increase in between (Zhu et al. 2015, section 3).
  const auto& d = config_.dcqcn;
  const uint32_t high = std::max(f.increase_count, f.byte_count);
  const uint32_t low = std::min(f.increase_count, f.byte_count);
  if (low > d.fast_recovery) {
    f.target += bytes_per_ps(d.rate_hai_bps) * static_cast<double>(low - d.fast_recovery);
  } else if (high > d.fast_recovery) {
    f.target += bytes_per_ps(d.rate_ai_bps);
  }
  f.target = std::min(f.target, f.line_rate);
  f.rate = (f.rate + f.target) / 2;
  if (f.rate >= f.line_rate * (1 - 1e-6)) f.rate = f.line_rate;
}

void RoceBackend::dctcp_ack(Qp& f, uint64_t newly, bool ece) {
  const double mss = config_.mtu;
  const double acked = static_cast<double>(newly) * mss;
  f.acked_window += newly;
  if (ece) {
    f.marked_window += newly;
  } else {
    f.window += mss * acked / f.window;  // one packet per window of acknowledgements
  }
  if (f.snd_una >= f.window_end) {
    const double fraction = f.acked_window == 0 ? 0.0
                                                : static_cast<double>(f.marked_window) /
                                                      static_cast<double>(f.acked_window);
    f.alpha = (1 - config_.dctcp.g) * f.alpha + config_.dctcp.g * fraction;
    if (f.marked_window > 0) f.window *= 1 - f.alpha / 2;
    f.window_end = f.snd_nxt;
    f.acked_window = 0;
    f.marked_window = 0;
  }
  f.window = std::clamp(f.window, mss, f.bdp);
}

void RoceBackend::timely_ack(Qp& f, int64_t rtt) {
  const auto& t = config_.timely;
  if (f.prev_rtt < 0) {
    f.prev_rtt = rtt;
    return;
  }
  const auto new_diff = static_cast<double>(rtt - f.prev_rtt);
  f.prev_rtt = rtt;
  f.rtt_diff = (1 - t.alpha) * f.rtt_diff + t.alpha * new_diff;
  const double gradient = f.rtt_diff / static_cast<double>(t.min_rtt.ps());
  const double delta = bytes_per_ps(t.delta_bps);
  if (rtt < t.t_low.ps()) {
    f.rate += delta;
    f.hai_streak = 0;
  } else if (rtt > t.t_high.ps()) {
    f.rate *= 1 - t.beta * (1 - static_cast<double>(t.t_high.ps()) / static_cast<double>(rtt));
    f.hai_streak = 0;
  } else if (gradient <= 0) {
    ++f.hai_streak;
    f.rate += (f.hai_streak >= t.hai_after ? 5.0 : 1.0) * delta;
  } else {
    f.rate *= 1 - t.beta * std::min(gradient, 1.0);
    f.hai_streak = 0;
  }
  f.rate = std::clamp(f.rate, bytes_per_ps(t.min_rate_bps), f.line_rate);
}

void RoceBackend::hpcc_ack(Qp& f, const Packet& ack, uint32_t packet) {
  const auto& h = config_.hpcc;
  const int hops = std::min<int>(ack.int_hops, kMaxIntHops);
  if (hops == 0) return;
  const IntHop* now_int = &int_[size_t{packet} * kMaxIntHops];
  const auto rtt = static_cast<double>(f.base_rtt);
  if (f.prev_hops == hops) {
    double u_max = 0;
    double tau = 0;
    for (int i = 0; i < hops; ++i) {
      const IntHop& cur = now_int[i];
      const IntHop& prev = f.prev_int[static_cast<size_t>(i)];
      const int64_t dt = cur.ts - prev.ts;
      if (dt <= 0) continue;
      const double tx_rate =
          static_cast<double>(cur.tx_bytes - prev.tx_bytes) / static_cast<double>(dt);
      const double u = static_cast<double>(std::min(cur.qlen, prev.qlen)) / (cur.rate * rtt) +
                       tx_rate / cur.rate;
      if (u > u_max) {
        u_max = u;
        tau = static_cast<double>(dt);
      }
    }
    if (tau > 0) {
      tau = std::min(tau, rtt);
      f.u = (1 - tau / rtt) * f.u + tau / rtt * u_max;
      const double w_ai = bytes_per_ps(h.rate_ai_bps) * rtt;
      double w;
      if (f.u >= h.eta || f.stage >= h.max_stage) {
        w = f.wc / (f.u / h.eta) + w_ai;
        if (ack.psn > f.update_psn) {
          f.stage = 0;
          f.update_psn = f.snd_nxt;
          f.wc = std::clamp(w, static_cast<double>(config_.mtu), f.bdp);
        }
      } else {
        w = f.wc + w_ai;
        if (ack.psn > f.update_psn) {
          ++f.stage;
          f.update_psn = f.snd_nxt;
          f.wc = std::clamp(w, static_cast<double>(config_.mtu), f.bdp);
        }
      }
      f.window = std::clamp(w, static_cast<double>(config_.mtu), f.bdp);
      f.rate = std::min(f.line_rate, f.window / rtt);
    }
  }
  std::copy_n(now_int, hops, f.prev_int.begin());
  f.prev_hops = static_cast<uint8_t>(hops);
}

void RoceBackend::trace(uint32_t packet, RocePacketEvent::Kind kind, LinkId link) {
  const Packet& k = packets_[packet];
  // An ACK names the next packet expected: it acknowledges the message holding the one before.
  const uint64_t psn = k.type == kAck && k.psn > 0 ? k.psn - 1 : k.psn;
  const uint32_t m = message_at(qps_[k.qp], psn);
  if (m == kNil || !messages_[m].traced) return;
  RocePacketEvent e;
  e.time = engine_.now();
  e.message = messages_[m].seq;
  e.psn = k.psn - messages_[m].first;  // numbered within the message
  e.link = link;
  e.kind = kind;
  e.type = k.type;
  e.ecn = k.ecn != 0;
  trace_.push_back(e);
}

void RoceBackend::sample_queues() {
  const SimTime now = engine_.now();
  for (NodeId node = graph_->npu_count(); node < graph_->node_count(); ++node) {
    if (buffer_used_[node] > 0) samples_.push_back({now, node, buffer_used_[node]});
  }
  if (in_flight_ > 0) {
    engine_.schedule_after(config_.queue_sample_interval, id_, kSample, 0);
  } else {
    sampling_ = false;
  }
}

uint64_t RoceBackend::delivered_bytes(uint64_t token) const {
  for (const Qp& q : qps_) {
    if (!q.live) continue;
    for (uint32_t m = q.rx; m != kNil; m = messages_[m].next) {
      const Message& msg = messages_[m];
      if (msg.token != token) continue;
      const uint64_t received = q.rcv_nxt > msg.first ? q.rcv_nxt - msg.first : 0;
      return std::min(msg.bytes, received * config_.mtu);
    }
  }
  for (const RoceFlowRecord& r : records_) {
    if (r.token == token) return r.bytes;
  }
  return 0;
}

double RoceBackend::rate_bps(uint64_t token) const {
  for (const Qp& q : qps_) {
    if (!q.live) continue;
    for (uint32_t m = q.messages.head; m != kNil; m = messages_[m].next) {
      if (messages_[m].token == token) return q.rate * 8e12;
    }
  }
  return 0;
}

std::vector<LinkStats> RoceBackend::link_stats() const {
  std::vector<LinkStats> out;
  for (LinkId id = 0; id < ports_.size(); ++id) {
    const Port& port = ports_[id];
    if (port.frames == 0) continue;
    LinkStats s;
    s.link = id;
    s.src = port.src;
    s.dst = port.dst;
    s.dimension = graph_->link(id).dimension;
    s.bytes = port.tx_bytes;
    s.busy = SimTime::from_ps(port.busy_ps);
    s.peak_queue = port.peak_queue_packets;
    s.messages = port.messages;
    out.push_back(s);
  }
  return out;
}

std::vector<RocePortStats> RoceBackend::port_stats() const {
  std::vector<RocePortStats> out;
  for (LinkId id = 0; id < ports_.size(); ++id) {
    const Port& port = ports_[id];
    if (port.frames == 0 && port.drops == 0) continue;
    RocePortStats s;
    s.link = id;
    s.src = port.src;
    s.dst = port.dst;
    s.data_packets = port.data_packets;
    s.peak_queue_bytes = port.peak_queue_bytes;
    s.ecn_marks = port.ecn_marks;
    s.drops = port.drops;
    s.pauses = port.pauses;
    s.paused = SimTime::from_ps(port.paused_ps +
                                (port.paused ? engine_.now().ps() - port.paused_since : 0));
    out.push_back(s);
  }
  return out;
}

RoceTotals RoceBackend::totals() const {
  RoceTotals t = totals_;
  t.paused = SimTime::zero();
  for (const RocePortStats& s : port_stats()) t.paused += s.paused;
  for (uint64_t peak : buffer_peak_) t.peak_buffer_bytes = std::max(t.peak_buffer_bytes, peak);
  return t;
}

size_t RoceBackend::memory_bytes() const {
  size_t bytes = ports_.size() * sizeof(Port) + packets_.capacity() * sizeof(Packet) +
                 int_.capacity() * sizeof(IntHop) + qps_.capacity() * sizeof(Qp) +
                 messages_.capacity() * sizeof(Message) +
                 records_.capacity() * sizeof(RoceFlowRecord) +
                 samples_.capacity() * sizeof(RoceQueueSample);
  for (const Qp& f : qps_) bytes += (f.path.capacity() + f.reverse.capacity()) * sizeof(LinkId);
  return bytes;
}

std::vector<std::string> RoceBackend::summary_lines() const {
  const RoceTotals t = totals();
  std::vector<std::string> lines;
  lines.push_back(
      fmt::format("roce: cc {}, PFC {}, mtu {} B, {} messages, {} data packets, {} "
                  "control packets",
                  congestion_control_name(config_.cc), config_.pfc ? "on" : "off", config_.mtu,
                  format_count(records_.size()), format_count(t.data_packets),
                  format_count(t.control_packets)));
  lines.push_back(fmt::format(
      "roce: PAUSE frames {}, paused {:.3f} us (sum over ports), ECN marks "
      "{}, CNPs {}, drops {}, retransmitted packets {}, timeouts {}",
      format_count(t.pauses), t.paused.us(), format_count(t.ecn_marks), format_count(t.cnps),
      format_count(t.drops), format_count(t.retransmitted), format_count(t.timeouts)));
  uint64_t peak_port = 0;
  for (const Port& port : ports_) peak_port = std::max(peak_port, port.peak_queue_bytes);
  lines.push_back(fmt::format("roce: peak switch buffer {}, peak egress queue {}",
                              format_bytes(t.peak_buffer_bytes), format_bytes(peak_port)));
  return lines;
}

std::string RoceBackend::stats_json() const {
  const RoceTotals t = totals();
  std::string out = "{\n";
  out += fmt::format(
      "  \"cc\": \"{}\",\n  \"pfc\": {},\n  \"totals\": {{\"data_packets\": {}, "
      "\"control_packets\": {}, \"cnps\": {}, \"nacks\": {}, \"timeouts\": {}, "
      "\"retransmitted\": {}, \"drops\": {}, \"ecn_marks\": {}, \"pauses\": {}, \"paused_us\": "
      "{:.6f}, \"peak_buffer_bytes\": {}}},\n",
      congestion_control_name(config_.cc), config_.pfc, t.data_packets, t.control_packets, t.cnps,
      t.nacks, t.timeouts, t.retransmitted, t.drops, t.ecn_marks, t.pauses, t.paused.us(),
      t.peak_buffer_bytes);
  out += "  \"flows\": [";
  for (size_t i = 0; i < records_.size(); ++i) {
    const RoceFlowRecord& r = records_[i];
    out += fmt::format(
        "{}\n    {{\"token\": {}, \"src\": {}, \"dst\": {}, \"bytes\": {}, "
        "\"start_us\": {:.6f}, \"finish_us\": {:.6f}, \"fct_us\": {:.6f}}}",
        i == 0 ? "" : ",", r.token, r.src, r.dst, r.bytes, r.start.us(), r.finish.us(),
        (r.finish - r.start).us());
  }
  out += "\n  ],\n  \"ports\": [";
  const std::vector<RocePortStats> ports = port_stats();
  for (size_t i = 0; i < ports.size(); ++i) {
    const RocePortStats& p = ports[i];
    out += fmt::format(
        "{}\n    {{\"link\": {}, \"src\": \"{}\", \"dst\": \"{}\", \"data_packets\": "
        "{}, \"peak_queue_bytes\": {}, \"ecn_marks\": {}, \"drops\": {}, "
        "\"pauses\": {}, \"paused_us\": {:.6f}}}",
        i == 0 ? "" : ",", p.link, graph_->node_name(p.src), graph_->node_name(p.dst),
        p.data_packets, p.peak_queue_bytes, p.ecn_marks, p.drops, p.pauses, p.paused.us());
  }
  out += "\n  ],\n  \"queue_samples\": [";
  for (size_t i = 0; i < samples_.size(); ++i) {
    const RoceQueueSample& s = samples_[i];
    out += fmt::format("{}\n    {{\"time_us\": {:.6f}, \"switch\": \"{}\", \"bytes\": {}}}",
                       i == 0 ? "" : ",", s.time.us(), graph_->node_name(s.node), s.bytes);
  }
  out += "\n  ],\n  \"packet_trace\": [";
  static constexpr std::string_view kKinds[] = {"tx", "rx", "drop"};
  static constexpr std::string_view kTypes[] = {"data", "ack", "nack", "cnp"};
  for (size_t i = 0; i < trace_.size(); ++i) {
    const RocePacketEvent& e = trace_[i];
    const GraphLink& link = graph_->link(e.link);
    out += fmt::format(
        "{}\n    {{\"time_us\": {:.6f}, \"message\": {}, \"event\": \"{}\", \"type\": "
        "\"{}\", \"psn\": {}, \"from\": \"{}\", \"to\": \"{}\", \"ecn\": {}}}",
        i == 0 ? "" : ",", e.time.us(), e.message, kKinds[e.kind], kTypes[e.type], e.psn,
        graph_->node_name(link.src), graph_->node_name(link.dst), e.ecn);
  }
  out += "\n  ]\n}\n";
  return out;
}

Expected<std::unique_ptr<NetworkBackend>> make_roce_backend(EventEngine& engine,
                                                            std::shared_ptr<const Graph> graph,
                                                            const Topology& logical,
                                                            const RoceConfig& config) {
  if (graph->npu_count() != logical.rank_count()) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "roce backend: the graph has {} NPUs but the logical topology {} ranks",
                       graph->npu_count(), logical.rank_count());
  }
  return std::unique_ptr<NetworkBackend>(
      std::make_unique<RoceBackend>(engine, std::move(graph), logical, config));
}

}  // namespace orrery::net
