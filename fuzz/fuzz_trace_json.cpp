// fuzz_trace_json: the JSON documents `orrery trace from-json` turns back into .et files
// (chakra/json_codec.h), then the .et written read again.
#include "chakra/json_codec.h"
#include "chakra/trace_file.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orrery;
  const std::string json = fuzz::write_input(data, size, ".json");
  const std::string et = json + ".et";
  if (chakra::json_to_trace(json, et)) (void)chakra::load_trace(et);
  return 0;
}
