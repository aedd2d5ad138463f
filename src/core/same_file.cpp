#include "core/same_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace orrery {
namespace {

// Closes a descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly `size` bytes into `out`; false on an error or an early end.
bool read_exactly(int fd, char* out, size_t size) {
  while (size > 0) {
    const ssize_t got = ::read(fd, out, size);
    if (got <= 0) return false;
    out += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

}  // namespace

SameFileChecker::SameFileChecker(const std::string& reference, size_t max_bytes) {
  const Fd file{::open(reference.c_str(), O_RDONLY | O_CLOEXEC)};
  struct stat info {};
  if (file.fd < 0 || ::fstat(file.fd, &info) != 0 || !S_ISREG(info.st_mode)) return;
  const auto size = static_cast<size_t>(info.st_size);
  if (size > max_bytes) return;
  bytes_.resize(size);
  usable_ = read_exactly(file.fd, bytes_.data(), size);
}

bool SameFileChecker::matches(const std::string& path) const {
  if (!usable_) return false;
  // A size that differs answers without opening the file.
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode) ||
      static_cast<size_t>(info.st_size) != bytes_.size()) {
    return false;
  }
  const Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) return false;
  // Compare block by block so a file that differs early costs little.
  constexpr size_t kBlock = size_t{1} << 16;
  std::vector<char> block(std::min(kBlock, bytes_.size()));
  for (size_t offset = 0; offset < bytes_.size(); offset += block.size()) {
    const size_t length = std::min(block.size(), bytes_.size() - offset);
    if (!read_exactly(file.fd, block.data(), length) ||
        std::memcmp(block.data(), bytes_.data() + offset, length) != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace orrery
