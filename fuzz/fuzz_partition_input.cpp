// fuzz_partition_input: what `orrery partition` reads with readers of its own: ONNX models (the
// graph interpreted node by node over Debian's ONNX schema) and CSV datasets. The first byte picks
// (even: ONNX, odd: CSV). A model that reads is finished for 16 features a row, as for the CSV
// rows of a 4 x 4 image, and run on two rows of zeros; a dataset that reads is scored against its
// own features. PyTorch archives go through libtorch's zip reader and are left to the tests.
#include <cstdint>

#include "fuzz/fuzz_support.h"
#include "partition/dataset.h"
#include "partition/model.h"
#include "partition/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace orrery::partition;
  if (size == 0) return 0;
  const std::string rest = orrery::fuzz::as_text(data + 1, size - 1);
  if (data[0] % 2 == 0) {
    orrery::Expected<Model> model = parse_onnx_model(rest, "model.onnx");
    if (!model || !finish_model(*model, 16)) return 0;
    (void)forward(*model, Matrix::Zero(2, model->input.features()));
    return 0;
  }
  orrery::Expected<Dataset> set = parse_csv_dataset(rest, "data.csv");
  if (!set) return 0;
  (void)accuracy(set->features, set->labels);
  return 0;
}
