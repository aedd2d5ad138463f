// hardware/embedded_presets.h: the files of presets/hardware/, compiled into the library (the
// build generates the table from the folder), so `--hardware dgx-h100` works wherever the binary
// is.
#pragma once

#include <cstddef>
#include <string_view>

namespace orrery::hw {

struct EmbeddedFile {
  std::string_view name;  // file name, e.g. "dgx-h100.yaml"
  std::string_view text;
};

extern const EmbeddedFile kEmbeddedPresets[];
extern const size_t kEmbeddedPresetCount;

}  // namespace orrery::hw
