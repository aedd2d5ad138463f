// bench/bench_support.h: pieces the network benchmarks share.
#pragma once

#include <cstdint>

#include "network/network_backend.h"

namespace orrery::bench {

// Counts deliveries (a benchmark's listener: nothing else to do per message).
class DeliveryCounter final : public net::DeliveryListener {
 public:
  void on_delivered(uint64_t) override { ++delivered; }
  uint64_t delivered = 0;
};

}  // namespace orrery::bench
