// fuzz_host_trace: PyTorch execution traces (the host trace, convert/host_trace.h), then the
// conversion of what reads to Chakra nodes (convert/pytorch_converter.h).
#include "convert/host_trace.h"
#include "convert/pytorch_converter.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orrery;
  Expected<convert::HostTrace> host =
      convert::parse_host_text("host.json", fuzz::as_text(data, size));
  if (!host) return 0;
  convert::ConvertOptions options;
  (void)convert::convert_pytorch_trace(*host, nullptr, options);
  return 0;
}
