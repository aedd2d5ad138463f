// network/link_table.h: statistics for the links a run actually uses, found by link id.
//
// Topologies can have billions of potential links (a FullyConnected group of n has n(n-1)), so
// links get a dense slot only when they first carry a message. Link ids are split into pages of
// 256 consecutive ids; a page of slot numbers (1 KiB) is allocated the first time one of its links
// is used, and an open-addressing hash table maps page numbers to pages. Collectives use the links
// of a group together and a group's links have consecutive ids, so pages fill densely and the page
// map stays small enough to live in cache. Reports sort by link id, so output never depends on
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
  static constexpr uint64_t kEmpty = UINT64_MAX;
  static constexpr uint32_t kNoSlot = UINT32_MAX;
  static constexpr int kPageBits = 8;
  static constexpr uint32_t kPageLinks = 1u << kPageBits;

  // Index of the page holding slots for `page_number`, created on first use.
  uint32_t page_of(uint64_t page_number);
  size_t bucket_of(uint64_t page_number) const;
  void grow();

  std::vector<uint64_t> keys_;    // page map: page number or kEmpty
  std::vector<uint32_t> values_;  // page map: page index
  int shift_ = 0;                 // 64 - log2(keys_.size())
  uint32_t page_count_ = 0;
  uint64_t last_page_number_ = kEmpty;  // one-entry cache of the page map
  uint32_t last_page_ = 0;
  std::vector<uint32_t> page_slots_;  // page index * kPageLinks + offset -> slot or kNoSlot
  std::vector<LinkId> links_;         // slot -> link id
  std::vector<LinkCounters> counters_;
};

}  // namespace orrery::net
