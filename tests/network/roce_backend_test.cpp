// tests/network/roce_backend_test.cpp: the packet-level RoCE backend against closed forms
// (store-and-forward pipelines), fairness, PFC, loss recovery and determinism.
#include "network/roce_backend.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "network/generators.h"
#include "network/graph.h"
#include "network/network_test_support.h"

namespace orrery::net {
namespace roce_backend_test {

// A switch `s` with one cable per NPU, every link `gbps` GB/s (2^30 B/s) and `latency`.
GraphSpec star(uint32_t npus, uint64_t gbps, SimTime latency) {
  GraphSpec spec;
  spec.name = "star";
  spec.npus = npus;
  spec.switch_names = {"s"};
  for (uint32_t npu = 0; npu < npus; ++npu) {
    spec.links.push_back({npu, npus, Bandwidth::from_gbps(gbps), latency, 0});
    spec.links.push_back({npus, npu, Bandwidth::from_gbps(gbps), latency, 0});
  }
  return spec;
}

// Two leaves of `per_leaf` NPUs under one spine; NPU-leaf and leaf-spine latencies differ.
GraphSpec two_leaves(uint32_t per_leaf, uint64_t gbps) {
  ClosParams params;
  params.leaves = 2;
  params.npus_per_leaf = per_leaf;
  params.spines = 1;
  params.npu_link = {Bandwidth::from_gbps(gbps), SimTime::from_ns(1000)};
  params.uplink = {Bandwidth::from_gbps(gbps), SimTime::from_ns(2500)};
  Expected<GraphSpec> spec = make_clos2(params);
  EXPECT_TRUE(spec.has_value());
  return *spec;
}

struct RoceNet {
  RoceNet(GraphSpec spec, const RoceConfig& config) : deliveries(engine) {
    Expected<Graph> made = Graph::create(std::move(spec));
    EXPECT_TRUE(made.has_value()) << (made ? "" : made.error().message());
    graph = std::make_shared<const Graph>(std::move(*made));
    backend = std::make_unique<RoceBackend>(engine, graph, *graph->logical_topology(), config);
    backend->set_listener(deliveries);
  }
  EventEngine engine;
  std::shared_ptr<const Graph> graph;
  testing::Deliveries deliveries;
  std::unique_ptr<RoceBackend> backend;
};

constexpr uint64_t kNano = 1'000'000'000;
int64_t ser_ps(uint64_t bytes, uint64_t gbps) {
  return testing::expected_serialization_ps(bytes, gbps * kNano);
}

// Store and forward over H equal links: full packets leave back to back (S apart); the last,
// shorter packet (s) catches up with the one before it and waits for it at every switch, so it
// arrives n_full x S + s + (H - 1) x S + sum(latency) after the start.
TEST(RoceBackend, a_lone_message_follows_the_store_and_forward_closed_form) {
  RoceConfig config;
  const uint64_t gbps = 25;
  RoceNet net(two_leaves(2, gbps), config);
  const uint64_t bytes = 1'000'500;   // 1000 full packets and one of 500 B
  net.backend->send(0, 2, bytes, 7);  // npu0 -> leaf0 -> spine -> leaf1 -> npu2: 4 hops
  net.engine.run();
  ASSERT_EQ(net.deliveries.time.count(7), 1u);
  const int64_t full = ser_ps(1000 + 62, gbps);
  const int64_t last = ser_ps(500 + 62, gbps);
  const int64_t latency = 2 * 1'000'000 + 2 * 2'500'000;
  const int64_t expected = 1000 * full + last + 3 * full + latency;
  EXPECT_EQ(net.deliveries.time[7].ps(), expected);

  // Within 1% of the analytical time once headers are counted: (bytes + n x 62) / bw + latency.
  const double analytical =
      static_cast<double>(ser_ps(bytes + 1001 * 62, gbps)) + static_cast<double>(latency);
  EXPECT_LT(std::abs(static_cast<double>(net.deliveries.time[7].ps()) - analytical) / analytical,
            0.01);
  // Every byte of the message and its headers crossed the first link once; one ACK per packet
  // came back.
  const RoceTotals totals = net.backend->totals();
  EXPECT_EQ(totals.data_packets, 1001u);
  EXPECT_EQ(totals.control_packets, 1001u);
  EXPECT_EQ(totals.pauses, 0u);
  EXPECT_EQ(totals.drops, 0u);
  ASSERT_EQ(net.backend->flows().size(), 1u);
  EXPECT_EQ(net.backend->flows()[0].finish.ps(), expected);
  EXPECT_EQ(net.backend->in_flight(), 0u);
}

// NPUs that forward (rings, tori) store and forward like switches: same closed form over 2 hops.
TEST(RoceBackend, npus_that_forward_relay_packets) {
  GraphSpec spec;
  spec.name = "line";
  spec.npus = 3;
  spec.npu_forwarding = true;
  for (uint32_t i = 0; i < 2; ++i) {
    spec.links.push_back({i, i + 1, Bandwidth::from_gbps(25), SimTime::from_ns(700), 0});
    spec.links.push_back({i + 1, i, Bandwidth::from_gbps(25), SimTime::from_ns(700), 0});
  }
  RoceNet net(std::move(spec), RoceConfig{});
  net.backend->send(0, 2, 10'250, 1);  // 10 full packets and one of 250 B
  net.engine.run();
  ASSERT_EQ(net.deliveries.time.count(1), 1u);
  const int64_t full = ser_ps(1062, 25);
  EXPECT_EQ(net.deliveries.time[1].ps(), 10 * full + ser_ps(312, 25) + full + 2 * 700'000);
  EXPECT_EQ(net.backend->in_flight(), 0u);
}

// Two messages posted together on one pair. With one QP per pair they are work requests served in
// order: the first leaves at line rate and arrives as if alone (10 packets: 11 S + 2 L), the
// second right behind it (21 S + 2 L). With a QP per message the NIC interleaves them packet by
// packet, so the first arrives only one packet before the second (20 S + 2 L).
TEST(RoceBackend, a_pairs_messages_are_served_in_order_on_one_queue_pair) {
  const int64_t s = ser_ps(1062, 25);
  const int64_t l = 1'000'000;
  for (QpMode mode : {QpMode::kPair, QpMode::kMessage}) {
    RoceConfig config;
    config.qp = mode;
    RoceNet net(star(2, 25, SimTime::from_us(1)), config);
    net.backend->send(0, 1, 10'000, 1);
    net.backend->send(0, 1, 10'000, 2);
    net.engine.run();
    ASSERT_EQ(net.deliveries.time.size(), 2u);
    EXPECT_EQ(net.deliveries.time[1].ps(), (mode == QpMode::kPair ? 11 : 20) * s + 2 * l);
    EXPECT_EQ(net.deliveries.time[2].ps(), 21 * s + 2 * l);
    EXPECT_EQ(net.backend->totals().data_packets, 20u);
    EXPECT_EQ(net.backend->totals().control_packets, 20u);
    EXPECT_EQ(net.backend->link_stats()[0].messages, 2u);  // npu0 -> s carried two messages
    EXPECT_EQ(net.backend->in_flight(), 0u);
    // A third message after both are done opens a fresh QP (the idle one was released) and
    // again takes the lone-message time.
    const SimTime start = net.engine.now();
    net.backend->send(0, 1, 10'000, 3);
    net.engine.run();
    EXPECT_EQ((net.deliveries.time[3] - start).ps(), 11 * s + 2 * l);
    ASSERT_EQ(net.backend->flows().size(), 3u);
    EXPECT_EQ(net.backend->flows()[0].token, 1u);
  }
}

// Two QPs per pair (as NCCL_IB_QPS_PER_CONNECTION = 2): messages 1 and 3 go to QP 0, message 2
// to QP 1. The NIC alternates the two QPs, so messages 1 and 2 interleave (the 10th packet of 1
// leaves 19th: 20 S + 2 L; of 2, 20th: 21 S + 2 L) and message 3 follows 1 on its QP (31 S + 2 L).
TEST(RoceBackend, a_pairs_messages_take_its_queue_pairs_in_turn) {
  const int64_t s = ser_ps(1062, 25);
  const int64_t l = 1'000'000;
  RoceConfig config;
  config.qps_per_pair = 2;
  RoceNet net(star(2, 25, SimTime::from_us(1)), config);
  for (uint64_t token = 1; token <= 3; ++token) net.backend->send(0, 1, 10'000, token);
  net.engine.run();
  ASSERT_EQ(net.deliveries.time.size(), 3u);
  EXPECT_EQ(net.deliveries.time[1].ps(), 20 * s + 2 * l);
  EXPECT_EQ(net.deliveries.time[2].ps(), 21 * s + 2 * l);
  EXPECT_EQ(net.deliveries.time[3].ps(), 31 * s + 2 * l);
  EXPECT_EQ(net.backend->in_flight(), 0u);
}

// A long message alone reaches the line rate (payload share of the frames) under every scheme.
TEST(RoceBackend, one_flow_reaches_line_rate_under_every_scheme) {
  for (CongestionControl cc :
       {CongestionControl::kNone, CongestionControl::kDcqcn, CongestionControl::kDctcp,
        CongestionControl::kTimely, CongestionControl::kHpcc}) {
    SCOPED_TRACE(std::string(congestion_control_name(cc)));
    RoceConfig config;
    config.cc = cc;
    RoceNet net(star(2, 25, SimTime::from_us(1)), config);
    const uint64_t bytes = 20'000'000;
    net.backend->send(0, 1, bytes, 1);
    net.engine.run();
    ASSERT_EQ(net.deliveries.time.count(1), 1u);
    const double seconds = net.deliveries.time[1].seconds() - 2e-6;  // minus the latencies
    const uint32_t frame_overhead = cc == CongestionControl::kHpcc ? 62 + 8 : 62;
    const double line = 25.0 * 1073741824.0 * 1000.0 / (1000.0 + frame_overhead);
    // HPCC aims at eta = 95% of the bottleneck, so a lone flow settles near it.
    const double target = cc == CongestionControl::kHpcc ? 0.94 : 0.99;
    EXPECT_GT(static_cast<double>(bytes) / seconds, target * line);
    EXPECT_LE(static_cast<double>(bytes) / seconds, 1.0001 * line);
  }
}

// Two long flows into one receiver link: the second starts late, when the first runs at line
// rate; after convergence each gets half of the link, and the scheme (not PFC) did it.
// The additive steps are raised from the 50 Mb/s defaults so that convergence on this 43 Gb/s
// link fits in a few simulated milliseconds (it takes tens of milliseconds with the defaults).
void expect_fair_shares(RoceConfig config, SimTime from, SimTime to) {
  SCOPED_TRACE(std::string(congestion_control_name(config.cc)));
  const uint64_t gbps = 5;
  RoceNet net(star(3, gbps, SimTime::from_us(1)), config);
  net.backend->send(0, 2, 1'000'000'000, 1);
  net.engine.run_until(SimTime::from_us(200));
  net.backend->send(1, 2, 1'000'000'000, 2);
  net.engine.run_until(from);
  const uint64_t a0 = net.backend->delivered_bytes(1);
  const uint64_t b0 = net.backend->delivered_bytes(2);
  net.engine.run_until(to);
  const auto a = static_cast<double>(net.backend->delivered_bytes(1) - a0);
  const auto b = static_cast<double>(net.backend->delivered_bytes(2) - b0);
  const uint32_t frame = 1000 + 62 + (config.cc == CongestionControl::kHpcc ? 8 : 0);
  const double capacity = (to - from).seconds() * gbps * 1073741824.0 * 1000.0 / frame;
  EXPECT_GT(a / (a + b), 0.45) << a << " vs " << b;
  EXPECT_LT(a / (a + b), 0.55) << a << " vs " << b;
  EXPECT_GT(a + b, 0.85 * capacity);
  EXPECT_LE(a + b, 1.0001 * capacity);
  const RoceTotals totals = net.backend->totals();
  EXPECT_EQ(totals.drops, 0u);
  EXPECT_EQ(totals.pauses, 0u);
  if (config.cc != CongestionControl::kHpcc) {
    EXPECT_GT(totals.ecn_marks, 0u);
  }
  if (config.cc == CongestionControl::kDcqcn) {
    EXPECT_GT(totals.cnps, 0u);
  }
}

TEST(RoceBackend, two_flows_converge_to_fair_shares_under_dcqcn) {
  RoceConfig config;
  config.cc = CongestionControl::kDcqcn;
  config.dcqcn.rate_ai_bps = 500e6;
  config.dcqcn.rate_hai_bps = 1e9;
  expect_fair_shares(config, SimTime::from_us(15'000), SimTime::from_us(25'000));
}
TEST(RoceBackend, two_flows_converge_to_fair_shares_under_dctcp) {
  RoceConfig config;
  config.cc = CongestionControl::kDctcp;
  config.kmin_bytes = 20'000;  // DCTCP's step marking at K
  config.kmax_bytes = 20'000;
  expect_fair_shares(config, SimTime::from_us(5'000), SimTime::from_us(10'000));
}
TEST(RoceBackend, two_flows_converge_to_fair_shares_under_hpcc) {
  RoceConfig config;
  config.cc = CongestionControl::kHpcc;
  config.hpcc.rate_ai_bps = 500e6;
  expect_fair_shares(config, SimTime::from_us(5'000), SimTime::from_us(10'000));
}

// Incast: the three other NPUs of leaf 0 and npu0 itself... every NPU but npu4 sends 1 MB to npu4.
struct Incast {
  explicit Incast(RoceConfig config) : net(two_leaves(4, 5), config) {
    for (Rank src = 0; src < 8; ++src) {
      if (src != 4) net.backend->send(src, 4, 1'000'000, src);
    }
    net.engine.run();
  }
  uint64_t pauses_on(NodeId src, NodeId dst) const {
    for (const RocePortStats& port : net.backend->port_stats()) {
      if (port.src == src && port.dst == dst) return port.pauses;
    }
    return 0;
  }
  RoceNet net;
};

TEST(RoceBackend, incast_with_pfc_loses_nothing_and_pause_propagates_upstream) {
  RoceConfig config;
  config.buffer_bytes = 300'000;
  Incast incast(config);
  RoceNet& net = incast.net;
  ASSERT_EQ(net.deliveries.time.size(), 7u);
  const RoceTotals totals = net.backend->totals();
  EXPECT_EQ(totals.drops, 0u);
  EXPECT_EQ(totals.retransmitted, 0u);
  EXPECT_GT(totals.pauses, 0u);
  // Nodes: npus 0..7, leaf0 = 8, leaf1 = 9, spine = 10. The receiver's leaf pauses the spine,
  // the spine pauses leaf 0, and leaf 0 pauses its NICs.
  EXPECT_GT(incast.pauses_on(10, 9), 0u);
  EXPECT_GT(incast.pauses_on(8, 10), 0u);
  EXPECT_GT(incast.pauses_on(0, 8), 0u);
  EXPECT_GT(incast.pauses_on(5, 9), 0u);
  EXPECT_LE(totals.peak_buffer_bytes, config.buffer_bytes);
  // The receiver link is the bottleneck: the last delivery is no earlier than 7 MB of frames on it.
  SimTime last;
  for (const auto& [token, time] : net.deliveries.time) last = std::max(last, time);
  EXPECT_GE(last.ps(), ser_ps(7 * (1'000'000 + 1000 * 62), 5));
  EXPECT_LT(last.ps(), ser_ps(7 * (1'000'000 + 1000 * 62), 5) * 11 / 10);
}

TEST(RoceBackend, without_pfc_an_incast_drops_and_go_back_n_still_completes) {
  RoceConfig config;
  config.pfc = false;
  config.buffer_bytes = 100'000;
  config.rto = SimTime::from_us(200);
  Incast incast(config);
  RoceNet& net = incast.net;
  ASSERT_EQ(net.deliveries.time.size(), 7u);
  const RoceTotals totals = net.backend->totals();
  EXPECT_GT(totals.drops, 0u);
  EXPECT_GT(totals.retransmitted, 0u);
  EXPECT_GT(totals.nacks, 0u);
  EXPECT_EQ(totals.pauses, 0u);
  EXPECT_GE(totals.data_packets, 7000u + totals.retransmitted);
  for (Rank src = 0; src < 8; ++src) {
    if (src != 4) {
      EXPECT_EQ(net.backend->delivered_bytes(src), 1'000'000u);
    }
  }
}

// Losses on a QP carrying several messages: go-back-N rewinds across message boundaries, and
// every message still arrives whole and in posting order (records are kept in delivery order).
TEST(RoceBackend, go_back_n_across_the_messages_of_one_queue_pair) {
  RoceConfig config;
  config.pfc = false;
  config.buffer_bytes = 100'000;
  config.rto = SimTime::from_us(200);
  RoceNet net(two_leaves(4, 5), config);
  const uint64_t sizes[] = {300'500, 1'000, 250'000};  // 301, 1 and 250 packets
  for (Rank src = 0; src < 8; ++src) {
    if (src == 4) continue;
    for (uint64_t m = 0; m < 3; ++m) net.backend->send(src, 4, sizes[m], src * 10 + m);
  }
  net.engine.run();
  ASSERT_EQ(net.deliveries.time.size(), 21u);
  const RoceTotals totals = net.backend->totals();
  EXPECT_GT(totals.drops, 0u);
  EXPECT_GT(totals.retransmitted, 0u);
  EXPECT_EQ(net.backend->in_flight(), 0u);
  std::map<Rank, std::vector<uint64_t>> order;
  for (const RoceFlowRecord& r : net.backend->flows()) {
    EXPECT_EQ(r.bytes, sizes[r.token % 10]);
    EXPECT_EQ(net.backend->delivered_bytes(r.token), r.bytes);
    order[r.src].push_back(r.token);
  }
  for (const auto& [src, tokens] : order) {
    EXPECT_EQ(tokens, (std::vector<uint64_t>{src * 10u, src * 10u + 1, src * 10u + 2}));
  }
  // Each message's retransmissions are its own; together they are the run's.
  uint64_t retransmitted = 0;
  for (const RoceFlowRecord& r : net.backend->flows()) retransmitted += r.retransmitted;
  EXPECT_LE(retransmitted, totals.retransmitted);
}

TEST(RoceBackend, runs_are_deterministic_and_the_seed_matters) {
  auto run = [](uint64_t seed) {
    RoceConfig config;
    config.cc = CongestionControl::kDcqcn;
    config.buffer_bytes = 300'000;
    config.kmin_bytes = 5'000;
    config.kmax_bytes = 50'000;
    config.seed = seed;
    Incast incast(config);
    std::vector<int64_t> finish;
    for (const RoceFlowRecord& r : incast.net.backend->flows()) finish.push_back(r.finish.ps());
    const RoceTotals t = incast.net.backend->totals();
    finish.push_back(static_cast<int64_t>(t.ecn_marks));
    finish.push_back(static_cast<int64_t>(t.cnps));
    finish.push_back(static_cast<int64_t>(t.pauses));
    return finish;
  };
  const std::vector<int64_t> first = run(1);
  EXPECT_EQ(first, run(1));
  EXPECT_NE(first, run(2));
  EXPECT_GT(first[first.size() - 3], 0);  // ECN marks happened
}

TEST(RoceBackend, self_messages_zero_bytes_and_link_stats) {
  RoceNet net(star(2, 25, SimTime::from_us(1)), RoceConfig{});
  net.backend->send(1, 1, 4096, 1);
  net.backend->send(0, 1, 0, 2);
  net.engine.run();
  EXPECT_EQ(net.deliveries.time[1], SimTime::zero());
  // A zero-byte message is one header-only packet.
  EXPECT_EQ(net.deliveries.time[2].ps(), 2 * ser_ps(62, 25) + 2'000'000);
  const std::vector<LinkStats> links = net.backend->link_stats();
  ASSERT_EQ(links.size(), 4u);  // data out and in, ACK out and in
  EXPECT_EQ(links[0].src, 0u);
  EXPECT_EQ(links[0].bytes, 62u);
  EXPECT_EQ(links[0].messages, 1u);
  EXPECT_EQ(links[2].bytes, 64u);  // the ACK, switch -> npu0
}

TEST(RoceBackend, the_packet_trace_follows_the_selected_messages_hop_by_hop) {
  RoceConfig config;
  config.trace_messages = {1};
  RoceNet net(star(3, 25, SimTime::from_us(1)), config);
  net.backend->send(0, 2, 2500, 10);  // message 0: not traced
  net.backend->send(1, 1, 100, 11);   // to oneself: no message number
  net.backend->send(1, 2, 2500, 12);  // message 1: 3 packets, 3 ACKs
  net.engine.run();
  const std::vector<RocePacketEvent>& trace = net.backend->packet_trace();
  ASSERT_EQ(trace.size(), 18u);  // each frame: sent by the NIC, sent by the switch, received
  int data = 0;
  int acks = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    EXPECT_EQ(trace[i].message, 1u);
    if (i > 0) {
      EXPECT_GE(trace[i].time, trace[i - 1].time);
    }
    const GraphLink& link = net.graph->link(trace[i].link);
    if (trace[i].type == 0) {
      ++data;
      // sent on npu1 -> s, sent on s -> npu2, received at npu2
      if (trace[i].kind == RocePacketEvent::kReceive) {
        EXPECT_EQ(link.dst, 2u);
      } else {
        EXPECT_TRUE((link.src == 1 && link.dst == 3) || (link.src == 3 && link.dst == 2));
      }
    } else {
      EXPECT_EQ(trace[i].type, 1);
      ++acks;
    }
  }
  EXPECT_EQ(data, 9);
  EXPECT_EQ(acks, 9);
  EXPECT_EQ(trace[0].kind, RocePacketEvent::kTransmit);
  EXPECT_EQ(trace[0].psn, 0u);
  EXPECT_EQ(trace.back().kind, RocePacketEvent::kReceive);
  EXPECT_EQ(trace.back().type, 1);
  EXPECT_EQ(trace.back().psn, 3u);  // the last ACK: all three packets received
  EXPECT_EQ(trace.back().time,
            net.deliveries.time[12] + SimTime::from_ps(2 * ser_ps(64, 25)) + SimTime::from_us(2));
}

TEST(RoceConfig, parses_every_section_and_rejects_bad_keys_with_file_and_line) {
  Expected<RoceConfig> ok = parse_roce_config(
      "cc: hpcc\nmtu: 4000\nbuffer: 16MiB\necn: {kmin: 5KB, kmax: 200KB, pmax: 0.01}\n"
      "pfc:\n  enabled: false\n  xoff: 100KB\ndcqcn: {rate_ai: 40Mbps, increase_interval: 300us}\n"
      "hpcc: {eta: 0.9}\ntimely: {t_low: 10us}\nqueue_sample_interval: 10us\n"
      "trace_messages: [5, 2]\nqp: message\n",
      "cc.yaml");
  ASSERT_TRUE(ok.has_value()) << ok.error().message();
  EXPECT_EQ(ok->cc, CongestionControl::kHpcc);
  EXPECT_EQ(ok->mtu, 4000u);
  EXPECT_EQ(ok->buffer_bytes, 16u << 20);
  EXPECT_EQ(ok->kmin_bytes, 5000u);
  EXPECT_EQ(ok->kmax_bytes, 200'000u);
  EXPECT_DOUBLE_EQ(ok->pmax, 0.01);
  EXPECT_FALSE(ok->pfc);
  EXPECT_EQ(ok->xoff_bytes, 100'000u);
  EXPECT_DOUBLE_EQ(ok->dcqcn.rate_ai_bps, 40e6);
  EXPECT_EQ(ok->dcqcn.increase_interval, SimTime::from_us(300));
  EXPECT_DOUBLE_EQ(ok->hpcc.eta, 0.9);
  EXPECT_EQ(ok->timely.t_low, SimTime::from_us(10));
  EXPECT_EQ(ok->queue_sample_interval, SimTime::from_us(10));
  EXPECT_EQ(ok->trace_messages, (std::vector<uint64_t>{2, 5}));
  EXPECT_EQ(ok->qp, QpMode::kMessage);
  EXPECT_EQ(parse_roce_config("qps_per_pair: 4\n", "q.yaml")->qps_per_pair, 4u);
  EXPECT_EQ(parse_roce_config("", "empty.yaml")->qp, QpMode::kPair);

  const std::map<std::string, std::string> bad = {
      {"mtu: 1000\ncolour: red\n", "cc.yaml:2: unknown key 'colour' in a RoCE configuration"},
      {"cc: swift\n", "cc.yaml:1: key 'cc': found 'swift', expected none, dcqcn"},
      {"qp: flow\n", "cc.yaml:1: key 'qp': found 'flow', expected pair or message"},
      {"qp: message\nqps_per_pair: 4\n", "cc.yaml:2: qps_per_pair (4) needs qp: pair"},
      {"qps_per_pair: 0\n", "cc.yaml:1: key 'qps_per_pair': found '0', expected an integer from 1"},
      {"ecn:\n  kmin: 5KB\n  kmax: 1KB\n", "cc.yaml:2: ecn: kmax (1000) is below kmin (5000)"},
      {"dcqcn:\n  g: 2\n", "cc.yaml:2: key 'g': found '2', expected a number in (0, 1]"},
      {"hpcc:\n  eta: 0.9\n  wai: 3\n", "cc.yaml:3: unknown key 'wai' in section 'hpcc'"},
      {"dcqcn: {rate_ai: fast}\n",
       "cc.yaml:1: key 'rate_ai': found 'fast', expected a positive rate"},
      {"mtu: 10\n", "cc.yaml:1: key 'mtu': found '10', expected an integer from 64 to 65536"},
      {"pfc: {enabled: maybe}\n",
       "cc.yaml:1: key 'enabled': found 'maybe', expected true or false"},
      {"trace_messages: 3\n", "cc.yaml:1: key 'trace_messages': expected a list"},
      {"rto: soon\n", "cc.yaml:1: key 'rto': found 'soon', expected a positive time"},
      {"[1, 2]\n", "cc.yaml:1: expected a mapping"},
      {"cc: [\n", "cc.yaml:"},
  };
  for (const auto& [text, message] : bad) {
    Expected<RoceConfig> result = parse_roce_config(text, "cc.yaml");
    ASSERT_FALSE(result.has_value()) << text;
    EXPECT_EQ(result.error().message().rfind(message, 0), 0u)
        << "got: " << result.error().message() << "\nwanted: " << message;
  }
  EXPECT_FALSE(load_roce_config("/nonexistent/cc.yaml").has_value());
}

}  // namespace roce_backend_test
}  // namespace orrery::net
