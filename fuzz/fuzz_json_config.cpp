// fuzz_json_config: the JSON configuration files: ASTRA-sim's system and remote-memory files, the
// communicator-group file (and, on the same bytes, the rank map of `gen --classes`), the process
// groups of METADATA nodes, and the transformer and DLRM model files of `orrery gen`. The first
// byte picks the reader.
#include "fuzz/fuzz_support.h"
#include "gen/dlrm_generator.h"
#include "gen/transformer_model.h"
#include "memory/remote_memory_config.h"
#include "system/system_config.h"
#include "chakra/comm_groups.h"
#include "chakra/rank_map.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orrery;
  if (size == 0) return 0;
  const uint8_t which = data[0] % 6;
  ++data;
  --size;
  const std::string text = fuzz::as_text(data, size);
  switch (which) {
    case 0:
      (void)sys::parse_system_config("sys.json", text);
      break;
    case 1:
      (void)memory::parse_remote_memory_config("mem.json", text);
      break;
    case 2: {
      chakra::CommGroups groups(16);
      const std::string path = fuzz::write_input(data, size, ".json");
      (void)chakra::load_comm_group_file(path, groups);
      (void)chakra::read_rank_map(path);
      break;
    }
    case 3: {
      chakra::CommGroups groups(16);
      (void)chakra::add_groups_from_metadata(text, "node 1", groups);
      break;
    }
    case 4:
      if (Expected<gen::TransformerModel> model =
              gen::load_model_file(fuzz::write_input(data, size, ".json"))) {
        (void)gen::validate_model(*model);
      }
      break;
    default:
      if (Expected<gen::DlrmModel> model =
              gen::load_dlrm_file(fuzz::write_input(data, size, ".json"))) {
        (void)gen::validate_dlrm_model(*model);
      }
      break;
  }
  return 0;
}
