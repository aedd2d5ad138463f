#include "convert/json_file.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "core/text_file.h"

namespace orrery::convert {

namespace {

constexpr unsigned kChunk = 1U << 20;

// The size of the decompressed contents of `path`, when cheap to tell: a plain file's size, or a
// gzip file's ISIZE trailer (the size modulo 2^32, so only a hint). 0 when unknown. The trailer is
// written by whoever wrote the file and bounds nothing: it is trusted only up to 16 times the
// compressed size (real traces compress 10 to 40 times), so a forged or cut trailer cannot make the
// reader reserve gigabytes for a small file; beyond the hint the text grows with what is read.
size_t expected_size(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return 0;
  unsigned char magic[2] = {0, 0};
  const bool gzip = std::fread(magic, 1, 2, file) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  size_t size = 0;
  if (std::fseek(file, 0, SEEK_END) == 0) {
    const long end = std::ftell(file);
    if (!gzip && end > 0) {
      size = static_cast<size_t>(end);
    } else if (gzip && end >= 4 && std::fseek(file, end - 4, SEEK_SET) == 0) {
      unsigned char trailer[4] = {0, 0, 0, 0};
      if (std::fread(trailer, 1, 4, file) == 4) {
        size = static_cast<size_t>(trailer[0]) | static_cast<size_t>(trailer[1]) << 8 |
               static_cast<size_t>(trailer[2]) << 16 | static_cast<size_t>(trailer[3]) << 24;
        size = std::min(size, 16 * static_cast<size_t>(end));
      }
    }
  }
  std::fclose(file);
  return size;
}

// Reads up to `limit` bytes of the decompressed stream of `path` (everything when limit is 0).
Expected<std::string> read_gz(const std::string& path, size_t limit) {
  // A folder opens and seeks to a meaningless end (LONG_MAX on ext4): refuse it before the hint.
  if (Status file = refuse_folder(path); !file) return file.error();
  const size_t hint = limit == 0 ? expected_size(path) : limit;
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    return Error::make(ErrorKind::kIo, "{}: cannot open: {}", path, std::strerror(errno));
  }
  gzbuffer(file, kChunk);
  std::string text;
  // One allocation for the expected size; growth beyond it (a wrong hint) doubles as usual.
  text.resize(std::max<size_t>(hint + 1, kChunk));
  size_t filled = 0;
  while (limit == 0 || filled < limit) {
    if (filled == text.size()) text.resize(text.size() * 2);
    size_t want = std::min<size_t>(text.size() - filled, 1U << 30);
    if (limit != 0) want = std::min(want, limit - filled);
    const int got = gzread(file, text.data() + filled, static_cast<unsigned>(want));
    if (got < 0) {
      int code = 0;
      const char* message = gzerror(file, &code);
      std::string reason = code == Z_ERRNO ? std::strerror(errno) : std::string(message);
      gzclose(file);
      return Error::make(ErrorKind::kIo, "{}: read failed after {} bytes: {}", path, filled,
                         reason);
    }
    filled += static_cast<size_t>(got);
    if (got == 0) break;
  }
  gzclose(file);
  text.resize(filled);
  return text;
}

}  // namespace

Expected<std::string> read_file_text(const std::string& path) { return read_gz(path, 0); }

Expected<std::string> read_file_head(const std::string& path, size_t bytes) {
  if (bytes == 0) return std::string();
  return read_gz(path, bytes);
}

Error json_parse_error(const std::string& path, size_t byte, size_t size, const std::string& what) {
  std::string message = what;
  if (const size_t at = message.find("parse error"); at != std::string::npos)
    message = message.substr(at);
  return Error::make(ErrorKind::kParse, "{}: not a complete JSON document{} (byte {} of {}): {}",
                     path, byte >= size ? ", it ends too early" : "", byte, size, message);
}

Expected<nlohmann::json> parse_json_text(const std::string& path, const std::string& text) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    return json_parse_error(path, error.byte, text.size(), error.what());
  } catch (const nlohmann::json::exception& error) {
    // A number beyond a double's range ("1e999"): no position, but the message names the text.
    std::string message = error.what();
    if (const size_t at = message.find("] "); at != std::string::npos)
      message = message.substr(at + 2);
    return Error::make(ErrorKind::kParse, "{}: {} (beyond the range of a double)", path, message);
  }
}

Expected<nlohmann::json> read_json_file(const std::string& path) {
  Expected<std::string> text = read_file_text(path);
  if (!text) return text.error();
  return parse_json_text(path, *text);
}

}  // namespace orrery::convert
