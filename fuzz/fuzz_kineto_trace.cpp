// fuzz_kineto_trace: Kineto (PyTorch profiler) traces (convert/kineto_trace.h).
#include "convert/kineto_trace.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)orrery::convert::parse_kineto_text("kineto.json", orrery::fuzz::as_text(data, size));
  return 0;
}
