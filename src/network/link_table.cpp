#include "network/link_table.h"

#include <algorithm>
#include <bit>
#include <cassert>

namespace orrery::net {

namespace {
constexpr size_t kInitialBuckets = 64;
}  // namespace

LinkTable::LinkTable()
    : keys_(kInitialBuckets, kEmpty),
      values_(kInitialBuckets, 0),
      shift_(64 - std::countr_zero(kInitialBuckets)) {}

size_t LinkTable::bucket_of(LinkId link) const {
  // Fibonacci hashing: spreads the dense, patterned link ids over the table.
  return static_cast<size_t>((link * 0x9E3779B97F4A7C15ULL) >> shift_);
}

uint32_t LinkTable::slot(LinkId link) {
  assert(link != kEmpty);
  const size_t mask = keys_.size() - 1;
  for (size_t bucket = bucket_of(link);; bucket = (bucket + 1) & mask) {
    if (keys_[bucket] == link) return values_[bucket];
    if (keys_[bucket] == kEmpty) {
      const auto new_slot = static_cast<uint32_t>(links_.size());
      keys_[bucket] = link;
      values_[bucket] = new_slot;
      links_.push_back(link);
      counters_.emplace_back();
      if (links_.size() * 2 > keys_.size()) grow();
      return new_slot;
    }
  }
}

void LinkTable::grow() {
  const size_t buckets = keys_.size() * 2;
  keys_.assign(buckets, kEmpty);
  values_.assign(buckets, 0);
  shift_ = 64 - std::countr_zero(buckets);
  const size_t mask = buckets - 1;
  for (uint32_t slot_index = 0; slot_index < links_.size(); ++slot_index) {
    size_t bucket = bucket_of(links_[slot_index]);
    while (keys_[bucket] != kEmpty) bucket = (bucket + 1) & mask;
    keys_[bucket] = links_[slot_index];
    values_[bucket] = slot_index;
  }
}

std::vector<LinkStats> LinkTable::report(const Topology& topology) const {
  std::vector<uint32_t> order(links_.size());
  for (uint32_t slot_index = 0; slot_index < order.size(); ++slot_index)
    order[slot_index] = slot_index;
  std::sort(order.begin(), order.end(),
            [this](uint32_t a, uint32_t b) { return links_[a] < links_[b]; });
  std::vector<LinkStats> stats;
  stats.reserve(order.size());
  for (const uint32_t slot_index : order) {
    const LinkInfo info = topology.link_info(links_[slot_index]);
    const LinkCounters& counters = counters_[slot_index];
    LinkStats entry;
    entry.link = links_[slot_index];
    entry.src = info.src;
    entry.dst = info.dst;
    entry.dimension = info.dimension;
    entry.bytes = counters.bytes;
    entry.busy = counters.busy;
    entry.peak_queue = counters.peak;
    entry.messages = counters.messages;
    stats.push_back(entry);
  }
  return stats;
}

size_t LinkTable::memory_bytes() const {
  return keys_.capacity() * sizeof(LinkId) + values_.capacity() * sizeof(uint32_t) +
         links_.capacity() * sizeof(LinkId) + counters_.capacity() * sizeof(LinkCounters);
}

}  // namespace orrery::net
