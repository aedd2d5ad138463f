#include "synth/model_file.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/text_file.h"

namespace orrery::synth {
namespace {

constexpr const char* kMagic = "orrery-synth-model 1";
static_assert(std::endian::native == std::endian::little, "model files are little-endian");

}  // namespace

Status write_model_file(const std::string& path, const ModelFile& file) {
  nlohmann::json meta = file.meta;
  nlohmann::json tensors = nlohmann::json::array();
  for (const TensorBlob& blob : file.tensors) {
    tensors.push_back({{"name", blob.name}, {"shape", blob.shape}});
  }
  meta["tensors"] = tensors;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Error::make(ErrorKind::kIo, "{}: cannot write the model file", path);
  out << kMagic << '\n' << meta.dump() << '\n';
  for (const TensorBlob& blob : file.tensors) {
    out.write(reinterpret_cast<const char*>(blob.values.data()),
              static_cast<std::streamsize>(blob.values.size() * sizeof(float)));
  }
  out.close();
  if (!out) return Error::make(ErrorKind::kIo, "{}: writing the model file failed", path);
  return Status::ok();
}

Expected<ModelFile> read_model_file(const std::string& path) {
  if (Status file = refuse_folder(path, "the model file"); !file) return file.error();
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) return cannot_open(path, "the model file", errno);
  std::string magic;
  std::getline(in, magic);
  if (magic != kMagic) {
    if (magic.rfind("orrery-synth-model", 0) == 0) {
      return Error::make(ErrorKind::kParse, "{}: model file version '{}', expected '{}'", path,
                         magic, kMagic);
    }
    return Error::make(ErrorKind::kParse,
                       "{}: not an orrery synth model file (it does not start with '{}')", path,
                       kMagic);
  }
  std::string header;
  std::getline(in, header);
  ModelFile file;
  try {
    file.meta = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception& error) {
    return Error::make(ErrorKind::kParse, "{}: the model's JSON header does not parse: {}", path,
                       error.what());
  }
  if (!file.meta.contains("tensors") || !file.meta["tensors"].is_array()) {
    return Error::make(ErrorKind::kParse, "{}: the model's header lists no tensors", path);
  }
  // The values left in the file bound every tensor before its buffer is allocated, so a header
  // claiming more than the file holds is refused without allocating it.
  const std::streamoff start = in.tellg();
  in.seekg(0, std::ios::end);
  uint64_t left = static_cast<uint64_t>(in.tellg() - start) / sizeof(float);
  in.seekg(start);
  try {
    for (const auto& entry : file.meta["tensors"]) {
      TensorBlob blob;
      blob.name = entry.at("name").get<std::string>();
      blob.shape = entry.at("shape").get<std::vector<int64_t>>();
      uint64_t count = 1;
      for (int64_t dim : blob.shape) {
        if (dim < 0 || dim > (int64_t{1} << 32)) {
          return Error::make(ErrorKind::kParse, "{}: tensor '{}' has a bad shape", path, blob.name);
        }
        // Checked before multiplying: a product of 2^32-sized dimensions would wrap.
        if (dim != 0 && count > left / static_cast<uint64_t>(dim)) {
          return Error::make(ErrorKind::kParse,
                             "{}: truncated in the values of tensor '{}' (its shape needs more "
                             "values than the file holds)",
                             path, blob.name);
        }
        count *= static_cast<uint64_t>(dim);
      }
      if (count > left) {
        return Error::make(ErrorKind::kParse,
                           "{}: truncated in the values of tensor '{}' (its shape needs more "
                           "values than the file holds)",
                           path, blob.name);
      }
      left -= count;
      blob.values.resize(count);
      in.read(reinterpret_cast<char*>(blob.values.data()),
              static_cast<std::streamsize>(count * sizeof(float)));
      if (!in) {
        return Error::make(ErrorKind::kParse, "{}: truncated in the values of tensor '{}'", path,
                           blob.name);
      }
      file.tensors.push_back(std::move(blob));
    }
  } catch (const nlohmann::json::exception& error) {
    return Error::make(ErrorKind::kParse, "{}: bad tensor list in the header: {}", path,
                       error.what());
  }
  if (in.peek() != std::char_traits<char>::eof()) {
    return Error::make(ErrorKind::kParse, "{}: bytes after the last tensor", path);
  }
  file.meta.erase("tensors");
  return file;
}

}  // namespace orrery::synth
