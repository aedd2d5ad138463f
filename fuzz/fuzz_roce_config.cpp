// fuzz_roce_config: the `roce` backend's configuration YAML (network/roce_config.h).
#include "fuzz/fuzz_support.h"
#include "network/roce_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)orrery::net::parse_roce_config(orrery::fuzz::as_text(data, size), "roce.yml");
  return 0;
}
