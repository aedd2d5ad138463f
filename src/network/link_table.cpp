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

size_t LinkTable::bucket_of(uint64_t page_number) const {
  // Fibonacci hashing spreads patterned page numbers over the table.
  return static_cast<size_t>((page_number * 0x9E3779B97F4A7C15ULL) >> shift_);
}

uint32_t LinkTable::page_of(uint64_t page_number) {
  if (page_number == last_page_number_) return last_page_;
  const size_t mask = keys_.size() - 1;
  size_t bucket = bucket_of(page_number);
  while (keys_[bucket] != page_number && keys_[bucket] != kEmpty) bucket = (bucket + 1) & mask;
  uint32_t page = 0;
  if (keys_[bucket] == page_number) {
    page = values_[bucket];
  } else {
    page = page_count_++;
    keys_[bucket] = page_number;
    values_[bucket] = page;
    page_slots_.resize(page_slots_.size() + kPageLinks, kNoSlot);
    if (size_t{page_count_} * 2 > keys_.size()) grow();
  }
  last_page_number_ = page_number;
  last_page_ = page;
  return page;
}

uint32_t LinkTable::slot(LinkId link) {
  const uint32_t page = page_of(link >> kPageBits);
  uint32_t& entry = page_slots_[size_t{page} * kPageLinks + (link & (kPageLinks - 1))];
  if (entry == kNoSlot) {
    entry = static_cast<uint32_t>(links_.size());
    links_.push_back(link);
    counters_.emplace_back();
  }
  return entry;
}

void LinkTable::grow() {
  std::vector<uint64_t> old_keys = std::move(keys_);
  std::vector<uint32_t> old_values = std::move(values_);
  const size_t buckets = old_keys.size() * 2;
  keys_.assign(buckets, kEmpty);
  values_.assign(buckets, 0);
  shift_ = 64 - std::countr_zero(buckets);
  const size_t mask = buckets - 1;
  for (size_t old_bucket = 0; old_bucket < old_keys.size(); ++old_bucket) {
    if (old_keys[old_bucket] == kEmpty) continue;
    size_t bucket = bucket_of(old_keys[old_bucket]);
    while (keys_[bucket] != kEmpty) bucket = (bucket + 1) & mask;
    keys_[bucket] = old_keys[old_bucket];
    values_[bucket] = old_values[old_bucket];
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
  return keys_.capacity() * sizeof(uint64_t) + values_.capacity() * sizeof(uint32_t) +
         page_slots_.capacity() * sizeof(uint32_t) + links_.capacity() * sizeof(LinkId) +
         counters_.capacity() * sizeof(LinkCounters);
}

}  // namespace orrery::net
