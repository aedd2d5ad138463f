// partition/model_file.h: trained models from the files PyTorch and ONNX users have.
//
// read_model() recognises the file by its content: a zip archive is PyTorch's (a TorchScript
// module, or a state dict saved with torch.save), anything else is tried as ONNX. The Model it
// returns is not finished: finish_model() gives it its input shape (from the data's features when
// the file does not say) and checks it.
//
// TorchScript: the module is frozen (parameters become constants) and its forward graph inlined,
// then read node by node as a chain: linear, conv2d/_convolution, relu, max_pool2d, flatten,
// view/reshape, dropout (inference: identity). Scripted and traced modules alike; anything else in
// the data path is an error naming the operation and its source line.
// State dict: the tensors in file order, layer by layer (`<prefix>.weight`, `<prefix>.bias`): dense
// layers only (a state dict does not say how convolutions stride, pad or pool), with ReLU between
// consecutive layers, which a state dict cannot say either. Read with our own reader of the
// pickle opcodes torch.save writes, because libtorch's torch::pickle_load rejects the OrderedDict
// every state_dict() is (pytorch/pytorch#37213, #100741).
// ONNX (partition/onnx_model.h): Gemm, MatMul + Add, Conv, Relu, MaxPool, Flatten, Reshape.
//
// read_torch_model and read_model live in the orrery_partition_torch library (the only file that
// includes libtorch), read_onnx_model in orrery_partition.
#pragma once

#include <string>

#include "core/error.h"
#include "partition/model.h"

namespace orrery::partition {

Expected<Model> read_model(const std::string& path);
Expected<Model> read_torch_model(const std::string& path);
Expected<Model> read_onnx_model(const std::string& path);
// An ONNX model from its bytes, named `source` in errors (for the fuzz target and tests).
Expected<Model> parse_onnx_model(const std::string& bytes, const std::string& source);

}  // namespace orrery::partition
