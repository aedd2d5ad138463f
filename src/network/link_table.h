// network/link_table.h: statistics for the links a run actually uses, found by link id.
//
// Topologies can have billions of potential links (a FullyConnected group of n has n(n-1)), so
// links get a dense slot only when they first carry a message. Slots index plain arrays; the id ->
// slot map is an open-addressing hash table. Reports sort by link id, so output never depends on
// hashing or on the order links were first used.
#pragma once

#include <cstdint>
#include <vector>

#include "core/time.h"
#include "network/network_backend.h"
#include "network/topology.h"

namespace orrery::net {

struct LinkCounters {
  uint64_t bytes = 0;
  SimTime busy;
  uint64_t messages = 0;
  uint32_t present = 0;  // messages at the link now (sent, queued or in service)
  uint32_t peak = 0;     // the most at once
};

class LinkTable {
 public:
  LinkTable();

  // The slot of `link`, created with zero counters on first use. Any time; O(1) expected,
  // amortized (the table doubles when half full).
  uint32_t slot(LinkId link);

  LinkCounters& counters(uint32_t slot) { return counters_[slot]; }
  const LinkCounters& counters(uint32_t slot) const { return counters_[slot]; }
  LinkId link(uint32_t slot) const { return links_[slot]; }
  // Links with a slot.
  uint32_t size() const { return static_cast<uint32_t>(links_.size()); }

  // Every used link with its endpoints, ordered by link id. O(size x log size).
  std::vector<LinkStats> report(const Topology& topology) const;

  size_t memory_bytes() const;

 private:
  static constexpr LinkId kEmpty = UINT64_MAX;
  size_t bucket_of(LinkId link) const;
  void grow();

  std::vector<LinkId> keys_;      // hash table: link id or kEmpty
  std::vector<uint32_t> values_;  // hash table: slot
  int shift_ = 0;                 // 64 - log2(keys_.size())
  std::vector<LinkId> links_;     // slot -> link id
  std::vector<LinkCounters> counters_;
};

}  // namespace orrery::net
