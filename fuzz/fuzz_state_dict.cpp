// fuzz_state_dict: `orrery partition`'s reader of torch.save state dicts, which interprets the
// pickle opcodes itself (libtorch's own unpickler refuses the OrderedDict of every state dict).
// The input is the archive's data.pkl; the archive is written around it with libtorch's
// PyTorchStreamWriter, beside four storages ("0" to "3") of 64 bytes, so the fuzzer spends its
// time in the pickle and the tensor views rather than in the zip's checksums. A model that reads is
// finished and run on two rows of zeros.
#include <caffe2/serialize/inline_container.h>

#include <string>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "partition/model.h"
#include "partition/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orrery::partition;
  const std::string path = orrery::fuzz::write_input(nullptr, 0, ".pt");
  {
    caffe2::serialize::PyTorchStreamWriter writer(path);
    writer.writeRecord("data.pkl", data, size);
    const std::vector<char> storage(64, 0);
    for (const char* key : {"data/0", "data/1", "data/2", "data/3"}) {
      writer.writeRecord(key, storage.data(), storage.size());
    }
    writer.writeEndOfFile();
  }
  orrery::Expected<Model> model = read_torch_model(path);
  if (!model || !finish_model(*model, 16)) return 0;
  (void)forward(*model, Matrix::Zero(2, model->input.features()));
  return 0;
}
