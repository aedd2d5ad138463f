// fuzz_synth_model: the model files of `orrery synth` (synth/model_file.h): the magic line, the
// JSON header, the tensors' float32 values; then the header's codebook and baseline as the model
// loaders read them, and a baseline that reads is sampled once.
#include "fuzz/fuzz_support.h"
#include "synth/baseline.h"
#include "synth/codebook.h"
#include "synth/model_file.h"
#include "synth/random.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orrery::synth;
  orrery::Expected<ModelFile> file =
      read_model_file(orrery::fuzz::write_input(data, size, ".pt"));
  if (!file) return 0;
  if (const auto it = file->meta.find("codebook"); it != file->meta.end()) {
    (void)Codebook::from_json(*it);
  }
  if (const auto it = file->meta.find("baseline"); it != file->meta.end()) {
    if (orrery::Expected<Baseline> baseline = Baseline::from_json(*it)) {
      Rng rng(1);
      (void)baseline->sample(rng, 2);
    }
  }
  return 0;
}
