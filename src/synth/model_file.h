// synth/model_file.h: the file a trained model lives in (`orrery synth train -o model.pt`).
//
// One line "orrery-synth-model 1", one line of JSON (everything that is not a weight: the
// configuration, the codebook, the baseline, the corpus figures, and the name and shape of every
// tensor), then the tensors' float32 values, little-endian, in the order the JSON lists them. The
// bytes depend only on what is stored (JSON keys sorted, no timestamps), so the same training run
// writes the same file. The JSON part reads without libtorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace orrery::synth {

struct TensorBlob {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;  // product of shape
};

struct ModelFile {
  nlohmann::json meta;
  std::vector<TensorBlob> tensors;

  // The header's "format" ("" when it is absent or not a string, as in a hostile file).
  std::string format() const {
    const auto it = meta.find("format");
    return it != meta.end() && it->is_string() ? it->get<std::string>() : std::string();
  }
};

Status write_model_file(const std::string& path, const ModelFile& file);
// Errors name the file: not a model file, a version it does not know, bad JSON, truncated data.
Expected<ModelFile> read_model_file(const std::string& path);

}  // namespace orrery::synth
