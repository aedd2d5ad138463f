// gen/llm_options.h: `orrery gen llm`'s model and plan options as one value, and the generator they
// make, so that every tool taking a training plan (`orrery gen llm`, `orrery libra --llm-plan`)
// reads the same options with the same checks and defaults.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"
#include "gen/llm_generator.h"

namespace orrery::gen {

// The options as `orrery gen llm` spells them (--model, --global-batch, --tp, ...).
struct LlmOptions {
  std::string model;  // a preset or a JSON model file
  std::string dtype;  // "" = the model's
  uint64_t global_batch = 0;
  uint64_t micro_batch = 1;
  uint32_t seq = 0;
  uint32_t dp = 1, tp = 1, pp = 1, cp = 1, ep = 1;
  bool sp = false;
  uint32_t zero = 0;
  bool recompute = false;
  std::string schedule = "1f1b";
  uint32_t virtual_stages = 0;  // 0 = 2 for the interleaved schedule, else 1
  std::string bucket_size;      // "" = one bucket per layer
};

// Sets one option by its flag name without the dashes ("tp", "global-batch"; underscores are
// taken as hyphens). `value` is the flag's argument; "true"/"false" for --sp and --recompute.
// Errors name the option: an unknown name, a value that is not a number, a negative number.
Status set_llm_option(LlmOptions& options, std::string_view name, std::string_view value);

// Every option name set_llm_option takes, comma separated (for messages).
std::string llm_option_names();

// Resolves the model, checks the plan against it (errors name the flag to change) and makes the
// generator.
Expected<LlmGenerator> make_llm_generator(const LlmOptions& options);

}  // namespace orrery::gen
