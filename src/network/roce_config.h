// network/roce_config.h: the configuration of the packet-level RoCE backend (docs/models/roce.md):
// packet sizes, switch buffers, ECN marking, PFC, loss recovery and the congestion control scheme
// with its parameters. Every field has a default from the literature, so an empty file (or none)
// is a valid configuration: PFC on, no end-to-end congestion control.
//
// The YAML file (every key optional; sizes as `32MiB`/`100KB`, times as `4us`, rates as `50Mbps`):
//   cc: dcqcn                 none | dcqcn | dctcp | timely | hpcc
//   mtu: 1000                 payload bytes per packet
//   qp: pair                  pair | message: which messages share a queue pair
//   qps_per_pair: 1           qp: pair: QPs per pair, messages spread over them in turn
//   pfc: {enabled: true, xoff: auto, xon_offset: auto, headroom: auto}
//   ecn: {kmin: 100KB, kmax: 400KB, pmax: 0.2}
//   dcqcn: {g: 0.00390625, rate_ai: 50Mbps, ...}
// Unknown keys, wrong types and out-of-range values are errors naming file:line and the key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/time.h"

namespace orrery::net {

enum class CongestionControl : uint8_t { kNone, kDcqcn, kDctcp, kTimely, kHpcc };

// Which messages share a queue pair. kPair: one QP per pair of NPUs while it has work, its
// messages served in order (RDMA RC semantics, as NCCL's connections); kMessage: a QP per message,
// concurrent messages of a pair interleaved packet by packet (as ASTRA-sim's ns-3 backend).
enum class QpMode : uint8_t { kPair, kMessage };

std::string_view congestion_control_name(CongestionControl cc);

struct RoceConfig {
  CongestionControl cc = CongestionControl::kNone;
  uint32_t mtu = 1000;          // payload bytes per data packet
  uint32_t header_bytes = 62;   // Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4
  uint32_t control_bytes = 64;  // ACK, NACK, CNP: a minimum Ethernet frame
  uint32_t int_hop_bytes = 8;   // HPCC: telemetry added to a data packet per switch hop
  uint32_t ack_interval = 1;    // data packets per ACK (a message's last is always acknowledged)
  QpMode qp = QpMode::kPair;
  // qp: pair: QPs per pair of NPUs (as NCCL_IB_QPS_PER_CONNECTION); the k-th message of a pair
  // goes to QP k mod n, and QP j takes the pair's j-th ECMP path.
  uint32_t qps_per_pair = 1;
  uint64_t seed = 1;  // ECN marking draws from one generator seeded here

  uint64_t buffer_bytes = 32ull << 20;  // shared buffer per switch

  // ECN (RED-like) on the egress queue a data packet joins: never below kmin, always above kmax,
  // linear up to pmax between.
  uint64_t kmin_bytes = 100'000;
  uint64_t kmax_bytes = 400'000;
  double pmax = 0.2;

  // PFC per ingress link and priority. 0 = auto: headroom = 2 x (link latency x rate) + 2 packets
  // (what is in flight when a PAUSE is sent); xoff = (buffer - all headrooms) / ingress links, so
  // the buffer can never overflow; xon = xoff - xon_offset (auto: 2 packets).
  bool pfc = true;
  uint64_t xoff_bytes = 0;
  uint64_t xon_offset_bytes = 0;
  uint64_t headroom_bytes = 0;

  // Loss recovery (go-back-N): a NACK on the first out-of-order packet, and a timeout when no
  // acknowledgement arrives for `rto` (armed only without PFC, where losses can happen).
  SimTime rto = SimTime::from_us(1000);

  // DCQCN (Zhu et al., SIGCOMM 2015; timer values as in NIC firmware and HPCC's ns-3 model).
  struct Dcqcn {
    double g = 1.0 / 256;                              // alpha gain
    SimTime alpha_interval = SimTime::from_us(1);      // alpha decays once per interval without CNP
    SimTime decrease_interval = SimTime::from_us(4);   // at most one rate cut per interval
    SimTime increase_interval = SimTime::from_us(55);  // rate increase timer
    SimTime cnp_interval =
        SimTime::from_us(50);            // receiver: at most one CNP per flow per interval (N)
    uint64_t byte_counter = 10'000'000;  // bytes sent per byte-counter period
    uint32_t fast_recovery = 5;          // F: periods of fast recovery before increases
    double rate_ai_bps = 50e6;           // additive increase, bits/s
    double rate_hai_bps = 100e6;         // hyper increase, bits/s
    double min_rate_bps = 100e6;
  } dcqcn;
  // DCTCP over RDMA: a window cut by alpha/2 once per window with marks (Alizadeh et al. 2010).
  struct Dctcp {
    double g = 1.0 / 16;
  } dctcp;
  // TIMELY: RTT-gradient rate control (Mittal et al., SIGCOMM 2015).
  struct Timely {
    double alpha = 0.875;     // EWMA weight of a new RTT difference
    double beta = 0.8;        // multiplicative decrease factor
    double delta_bps = 10e6;  // additive step
    SimTime t_low = SimTime::from_us(50);
    SimTime t_high = SimTime::from_us(500);
    SimTime min_rtt = SimTime::from_us(20);  // normalises the gradient
    uint32_t hai_after = 5;                  // negative gradients in a row before 5x steps
    uint64_t segment_bytes = 16'000;         // one rate update per segment acknowledged
    double min_rate_bps = 100e6;
  } timely;
  // HPCC: window from in-band telemetry of the most utilised hop (Li et al., SIGCOMM 2019).
  struct Hpcc {
    double eta = 0.95;          // target utilisation
    uint32_t max_stage = 5;     // additive-increase rounds before a multiplicative step
    double rate_ai_bps = 50e6;  // W_AI = rate_ai x base RTT
  } hpcc;

  // Record every switch's buffer occupancy at this period while traffic is in flight (0 = off).
  SimTime queue_sample_interval = SimTime::zero();
  // Messages whose packets are traced hop by hop, by send order (0 = the first message sent
  // between two different NPUs), sorted.
  std::vector<uint64_t> trace_messages;
};

// Parses a configuration file's text; `file_name` is used in messages. Errors (kConfig, kParse)
// name file:line and the key.
Expected<RoceConfig> parse_roce_config(std::string_view text, std::string_view file_name);
Expected<RoceConfig> load_roce_config(const std::filesystem::path& path);

// "50Mbps", "200Gbps", "25Gb/s", "1.5e9bps" -> bits per second.
Expected<double> parse_rate_text(std::string_view text);

}  // namespace orrery::net
