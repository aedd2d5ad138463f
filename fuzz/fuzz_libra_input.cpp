// fuzz_libra_input: LIBRA's inputs (design/libra_input.h): constraint text, LIBRA's network,
// workload, communicator and cost-model files, and orrery's problem file. The first byte picks the
// reader.
#include "design/libra_input.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orrery;
  if (size == 0) return 0;
  const uint8_t which = data[0] % 6;
  ++data;
  --size;
  switch (which) {
    case 0:
      (void)design::parse_constraint(fuzz::as_text(data, size), 1 + size % 4);
      break;
    case 1:
      (void)design::load_libra_network(fuzz::write_input(data, size, ".yml"));
      break;
    case 2:
      (void)design::load_libra_workload(fuzz::write_input(data, size, ".txt"));
      break;
    case 3:
      (void)design::load_libra_communicator(fuzz::write_input(data, size, ".yml"));
      break;
    case 4:
      (void)design::load_libra_cost_model(fuzz::write_input(data, size, ".yml"));
      break;
    default:
      (void)design::load_problem(fuzz::write_input(data, size, ".yml"));
      break;
  }
  return 0;
}
