// network/roce_backend.h: `roce`, a packet-level RDMA-over-Converged-Ethernet network over a graph
// (docs/models/roce.md).
//
// Messages travel on queue pairs (QPs), reliable connections from a source NIC to a destination
// NIC, each on one ECMP path. With `qp: pair` (the default) a pair of NPUs has one QP while it
// has work, always on the same path: its messages are work requests served in order, so a
// message waits for the previous one's packets to leave, as RDMA's RC transport and NCCL's
// connections do; with `qp: message` every message is its own QP (as ASTRA-sim's ns-3 backend)
// on the path the flow backend gives it, so concurrent messages of a pair share the NIC packet
// by packet.
// A message is cut into packets of `mtu` payload bytes plus `header_bytes`; each packet is
// serialized on every link of its path (store and forward) and arrives one link latency later.
// A message is delivered when its last packet reaches the destination in order.
//
// NIC (one per NPU, on the NPU's links): control packets (ACK, NACK, CNP) first, then data from
// its QPs in round robin, each QP limited by its rate (pacing) and, for window schemes, its window.
// Switches are output-queued with a shared buffer: two strict priorities per egress port
// (control above data). A data packet joining an egress queue above Kmin is ECN-marked with a
// probability rising linearly to Pmax at Kmax (one generator, seeded from the configuration).
// PFC counts each switch's buffered data bytes per ingress link: above XOFF a PAUSE for the data
// priority reaches the upstream egress port one link latency (plus a 64-byte frame) later, and a
// resume follows below XON; an egress port paused stops sending data after its current packet.
// With PFC and the auto thresholds the buffer cannot overflow; without PFC a data packet that does
// not fit in the buffer is dropped, the receiver NACKs the first gap and the sender goes back N
// (a timeout covers lost tails). Control packets are never paused or dropped.
//
// Congestion control per run: none (line rate, PFC alone), DCQCN (CNPs from the receiver, rate
// cuts by alpha/2, fast recovery, additive and hyper increase on a timer), DCTCP (window cut by
// alpha/2 per marked window), TIMELY (RTT gradient) or HPCC (window from per-hop telemetry of
// queue length, transmitted bytes, time and rate, echoed in ACKs).
//
// Time is integer picoseconds; rates are doubles used in a fixed order, so runs are bit-identical.
// Packets live in a pool (no allocation per packet once warm). Cost: O(hops) events per packet
// (one at the end of each serialization, one at each arrival) plus one per ACK hop.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/event_engine.h"
#include "core/index_fifo.h"
#include "network/graph.h"
#include "network/network_backend.h"
#include "network/roce_config.h"

namespace orrery::net {

// One completed message.
struct RoceFlowRecord {
  uint64_t token = 0;
  Rank src = 0;
  Rank dst = 0;
  uint64_t bytes = 0;
  SimTime start;               // send() time
  SimTime finish;              // last byte delivered in order
  uint64_t retransmitted = 0;  // data packets sent again before the delivery
};

// What one egress port (directed link) saw; PFC fields count the link as an ingress at its
// destination switch (pauses_sent) and as an egress paused by it (paused time).
struct RocePortStats {
  LinkId link = 0;
  NodeId src = 0;
  NodeId dst = 0;
  uint64_t data_packets = 0;
  uint64_t peak_queue_bytes = 0;  // data bytes waiting at this egress port, at most
  uint64_t ecn_marks = 0;
  uint64_t drops = 0;
  uint64_t pauses = 0;  // PAUSE frames that reached this egress port
  SimTime paused;       // total time this egress port's data priority was paused
};

struct RoceTotals {
  uint64_t data_packets = 0;     // data packet transmissions by NICs (retransmissions included)
  uint64_t control_packets = 0;  // ACKs, NACKs and CNPs sent by NICs
  uint64_t cnps = 0;
  uint64_t nacks = 0;
  uint64_t timeouts = 0;
  uint64_t retransmitted = 0;  // data packets sent again
  uint64_t drops = 0;
  uint64_t ecn_marks = 0;
  uint64_t pauses = 0;             // PAUSE frames sent (XOFF)
  SimTime paused;                  // sum over egress ports of the time paused
  uint64_t peak_buffer_bytes = 0;  // most bytes in one switch's buffer
};

// One sample of a switch's buffer occupancy (queue_sample_interval > 0).
struct RoceQueueSample {
  SimTime time;
  NodeId node = 0;
  uint64_t bytes = 0;
};

// One hop of a traced packet (RoceConfig::trace_messages).
struct RocePacketEvent {
  enum Kind : uint8_t { kTransmit, kReceive, kDrop };
  SimTime time;
  uint64_t message = 0;  // send order
  uint64_t psn = 0;      // within the message; data, CNP: packet number; ACK/NACK: next expected
  LinkId link = 0;       // the link the frame starts on (kTransmit), arrived by or was dropped at
  Kind kind = kTransmit;
  uint8_t type = 0;  // 0 data, 1 ACK, 2 NACK, 3 CNP
  bool ecn = false;  // data: marked so far; ACK: echo
};

class RoceBackend final : public NetworkBackend, private EventHandler {
 public:
  // `logical` is the topology the system layer sees (same rank count as the graph).
  RoceBackend(EventEngine& engine, std::shared_ptr<const Graph> graph, Topology logical,
              RoceConfig config);
  ~RoceBackend() override;

  std::string_view name() const override { return "roce"; }
  const Topology& topology() const override { return logical_; }
  void set_listener(DeliveryListener& listener) override;
  void send(Rank src, Rank dst, uint64_t bytes, uint64_t token) override;
  // In-network collectives are not modelled at packet level: the hop takes the lone-link time
  // (latency + serialization of the packets) and touches no queue.
  void send_switch(Rank rank, uint32_t dim, bool up, uint64_t bytes, uint64_t token) override;
  uint64_t in_flight() const override { return in_flight_; }
  // Bytes and busy time per link count every frame (data, headers, control); peak_queue is the
  // most data packets waiting at the link's egress port; messages counts first transmissions of
  // first packets.
  std::vector<LinkStats> link_stats() const override;
  size_t memory_bytes() const override;

  const RoceConfig& config() const { return config_; }
  const std::vector<RoceFlowRecord>& flows() const { return records_; }
  std::vector<RocePortStats> port_stats() const;  // ports that carried traffic, by link id
  RoceTotals totals() const;
  const std::vector<RoceQueueSample>& queue_samples() const { return samples_; }
  const std::vector<RocePacketEvent>& packet_trace() const { return trace_; }
  // Data bytes delivered in order so far to the receiver of the message carrying `token`
  // (its full size once delivered; 0 for unknown tokens). For tests of rates and fairness.
  uint64_t delivered_bytes(uint64_t token) const;
  // The sending rate of the QP carrying `token` now, bits per second (0 when unknown).
  double rate_bps(uint64_t token) const;
  // Summary lines for the command line (totals, PAUSE, ECN, drops, queue peaks).
  std::vector<std::string> summary_lines() const override;
  // Everything above as JSON (flows, ports, totals, queue samples).
  std::string stats_json() const override;

 private:
  static constexpr uint32_t kNil = UINT32_MAX;
  static constexpr int kMaxIntHops = 8;
  enum EventKind : uint16_t {
    kTxDone = 0,      // arg: link
    kArrive = 1,      // arg: packet
    kPause = 2,       // arg: link << 1 | on
    kNicWake = 3,     // arg: link (NIC egress)
    kDcqcnTimer = 4,  // arg: qp << 32 | generation
    kRtoTimer = 5,    // arg: qp << 32 | generation
    kLocal = 6,       // arg: token slot (message to oneself, send_switch)
    kSample = 7,
  };
  enum PacketType : uint8_t { kData = 0, kAck = 1, kNack = 2, kCnp = 3 };
  static constexpr int kControl = 0;  // priority classes
  static constexpr int kDataClass = 1;

  struct IntHop {
    uint64_t tx_bytes = 0;
    int64_t ts = 0;
    uint64_t qlen = 0;
    double rate = 0;  // bytes per ps
  };
  struct Packet {
    int64_t sent_ps = 0;  // data: when the NIC sent it; control: echoed from the data packet
    uint64_t psn = 0;     // data, CNP: packet number; ACK/NACK: next expected packet number
    uint32_t qp = 0;
    uint32_t next = kNil;     // queue or free list
    uint32_t size = 0;        // bytes on the wire
    uint32_t in_link = kNil;  // ingress link at the switch holding it (PFC accounting)
    uint16_t hop = 0;         // index into the QP's path (data) or reverse path (control)
    uint8_t type = kData;
    uint8_t ecn = 0;  // data: congestion experienced; ACK: echo
    uint8_t int_hops = 0;
    uint8_t retransmission = 0;
    uint8_t first = 0;  // data: the first packet of its message (link statistics)
  };
  struct Queue {
    IndexFifo list;  // packets, linked through Packet::next
    uint32_t packets = 0;
    uint64_t bytes = 0;
  };
  struct Port {
    NodeId src = 0;
    NodeId dst = 0;
    bool nic = false;         // src is an NPU: data comes from its QPs
    bool to_nic = false;      // dst is an NPU: no PFC accounting there
    bool tx_pending = false;  // a kTxDone event is scheduled
    bool paused = false;      // data priority paused by the downstream switch
    bool xoff = false;        // this link as an ingress: PAUSE sent, no resume yet
    int64_t busy_until = 0;
    int64_t latency = 0;
    int64_t ser_data = 0;  // serialization of a full data packet and of a control packet
    int64_t ser_control = 0;
    double rate = 0;  // bytes per ps
    Bandwidth bandwidth;
    std::array<Queue, 2> queue;
    uint64_t ingress_bytes = 0;  // data bytes from this link buffered at dst
    uint64_t xoff_at = 0;
    uint64_t xon_at = 0;
    uint64_t tx_bytes = 0;  // every byte sent (HPCC telemetry)
    int64_t paused_since = 0;
    int64_t wake_at = -1;  // NIC: pending kNicWake time
    // NIC: QPs with data to send, round robin.
    std::vector<uint32_t> qps;
    uint32_t rr = 0;  // where the next turn starts (modulo the list)
    // statistics
    uint64_t frames = 0;
    uint64_t data_packets = 0;
    uint64_t messages = 0;
    int64_t busy_ps = 0;
    uint64_t peak_queue_bytes = 0;
    uint32_t peak_queue_packets = 0;
    uint64_t ecn_marks = 0;
    uint64_t drops = 0;
    uint64_t pauses = 0;
    int64_t paused_ps = 0;
  };
  // One message: a work request posted on its QP, whose packet numbers [first, end) it owns.
  struct Message {
    uint64_t token = 0;
    uint64_t bytes = 0;
    uint64_t first = 0;
    uint64_t end = 0;
    uint64_t seq = 0;  // send order (packet trace numbering)
    int64_t start_ps = 0;
    uint64_t retransmitted = 0;
    uint32_t next = kNil;  // the next message on the same QP
    bool traced = false;
  };
  // A queue pair: a reliable connection from one NIC to another on one ECMP path. Its messages
  // are served in posting order on one packet-number space; its congestion control state lives
  // as long as it does (RoceConfig::qp decides whether a pair's messages share one).
  struct Qp {
    Rank src = 0;
    Rank dst = 0;
    uint32_t lane = 0;  // qp: pair: which of the pair's qps_per_pair QPs
    uint32_t generation = 0;
    uint32_t alive = 0;  // packets of this QP in the network
    Path path;           // data links, source to destination
    Path reverse;        // control links, destination to source
    int64_t base_rtt = 0;
    double line_rate = 0;  // bytes per ps, the NIC link
    double bdp = 0;        // line rate x base RTT, bytes: the largest window
    bool live = false;     // holds messages or packets (not on the free list)
    // messages, oldest first (linked through Message::next): the first is the oldest not fully
    // acknowledged; tx the one holding snd_nxt (or an earlier one), rx the oldest not delivered
    IndexFifo messages;
    uint32_t tx = kNil;
    uint32_t rx = kNil;
    uint64_t posted = 0;  // packet numbers given to messages so far
    uint32_t traced = 0;  // messages on this QP that go to the packet trace
    // sender
    uint64_t snd_nxt = 0;
    uint64_t snd_una = 0;
    uint64_t max_sent = 0;  // highest psn sent + 1
    double rate = 0;        // bytes per ps
    double window = 0;      // bytes in flight allowed (0 = no window)
    int64_t next_send_ps = 0;
    int64_t last_progress_ps = 0;
    int64_t rto_at = -1;       // pending timeout event time (-1: none)
    int64_t increase_at = -1;  // pending DCQCN increase event time (-1: none)
    bool in_nic = false;
    // receiver
    uint64_t rcv_nxt = 0;
    uint32_t unacked = 0;
    bool ece = false;
    int64_t last_cnp_ps = INT64_MIN / 2;
    uint64_t nacked = UINT64_MAX;  // rcv_nxt a NACK was sent for
    // DCQCN
    double alpha = 1.0;
    double target = 0;
    int64_t alpha_ps = 0;
    int64_t decrease_ps = INT64_MIN / 2;
    uint32_t increase_count = 0;  // timer periods since the last cut
    uint32_t byte_count = 0;      // byte-counter periods since the last cut
    uint64_t bytes_since_cut = 0;
    // DCTCP
    uint64_t window_end = 0;
    uint64_t acked_window = 0;
    uint64_t marked_window = 0;
    // TIMELY
    int64_t prev_rtt = -1;
    double rtt_diff = 0;
    uint32_t hai_streak = 0;
    uint64_t next_update = 0;
    // HPCC
    double wc = 0;
    double u = 1.0;
    uint32_t stage = 0;
    uint64_t update_psn = 0;
    uint8_t prev_hops = 0;
    std::array<IntHop, kMaxIntHops> prev_int{};
  };

  void handle_event(const Event& event) override;
  uint32_t take_packet();
  // A message that never enters the fabric (to oneself, in-network hops): delivered `delay` on.
  void deliver_after(SimTime delay, uint64_t token);
  void free_packet(uint32_t index);
  void push(Queue& queue, uint32_t packet);
  uint32_t pop(Queue& queue);
  void try_start(LinkId link);
  void transmit(LinkId link, uint32_t packet);
  bool nic_send(LinkId link);
  void arrive(uint32_t packet);
  void enqueue_switch(LinkId link, uint32_t packet, LinkId in_link);
  void receive_data(uint32_t packet);
  void receive_control(uint32_t packet);
  void send_control(uint32_t qp, PacketType type, uint64_t psn, uint32_t echo);
  void pause(LinkId link, bool on);
  // The QP a new message from src to dst goes on: the pair's live one, or a new one.
  uint32_t qp_for(Rank src, Rank dst);
  void activate(uint32_t qp);
  void maybe_release(uint32_t qp);
  // The QP's message holding packet `psn` (kNil when it is already acknowledged and gone).
  uint32_t message_at(const Qp& q, uint64_t psn) const;
  void arm_rto(uint32_t qp);
  void on_rto(uint32_t qp);
  void on_dcqcn_timer(uint32_t qp);
  void dcqcn_increase(Qp& q);
  void dcqcn_cnp(Qp& q);
  void dctcp_ack(Qp& q, uint64_t newly, bool ece);
  void timely_ack(Qp& q, int64_t rtt);
  void hpcc_ack(Qp& q, const Packet& ack, uint32_t packet);
  double uniform();
  void sample_queues();
  void trace(uint32_t packet, RocePacketEvent::Kind kind, LinkId link);

  EventEngine& engine_;
  std::shared_ptr<const Graph> graph_;
  Topology logical_;
  RoceConfig config_;
  HandlerId id_;
  DeliveryListener* listener_ = nullptr;
  std::vector<Port> ports_;
  std::vector<uint32_t> nic_link_;     // NPU -> its first outgoing link
  std::vector<uint64_t> buffer_used_;  // per node (switches)
  std::vector<uint64_t> buffer_peak_;
  std::vector<Packet> packets_;
  std::vector<IntHop> int_;  // HPCC: kMaxIntHops per packet
  uint32_t free_packets_ = kNil;
  std::vector<Qp> qps_;
  std::vector<uint32_t> free_qps_;
  std::vector<Message> messages_;
  std::vector<uint32_t> free_messages_;
  // qp: pair: the live QP of (src << 32 | dst, lane).
  struct LaneKey {
    uint64_t pair = 0;
    uint32_t lane = 0;
    bool operator==(const LaneKey&) const = default;
  };
  struct LaneHash {
    size_t operator()(const LaneKey& k) const { return mix64(k.pair ^ (uint64_t{k.lane} << 58)); }
  };
  std::unordered_map<LaneKey, uint32_t, LaneHash> pair_qp_;
  std::vector<uint64_t> local_tokens_;
  std::vector<uint32_t> free_local_;
  std::vector<RoceFlowRecord> records_;
  std::vector<RoceQueueSample> samples_;
  std::vector<RocePacketEvent> trace_;
  bool sampling_ = false;
  RoceTotals totals_;
  uint64_t rng_;
  FlowLabels labels_;
  uint64_t sequence_ = 0;  // messages between different NPUs so far (packet trace numbering)
  uint64_t in_flight_ = 0;
};

// Backends over a graph by name: "roce" (with `config`), else as make_fabric_backend.
Expected<std::unique_ptr<NetworkBackend>> make_roce_backend(EventEngine& engine,
                                                            std::shared_ptr<const Graph> graph,
                                                            const Topology& logical,
                                                            const RoceConfig& config);

}  // namespace orrery::net
