#include "core/text_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

namespace orrery {

Expected<std::string> read_text_file(const std::filesystem::path& path, std::string_view what) {
  std::error_code status_error;
  if (std::filesystem::is_directory(path, status_error)) {
    return Error::make(ErrorKind::kIo, "{}: is a folder, not {}", path.string(),
                       what.empty() ? std::string_view("a file") : what);
  }
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    return Error::make(ErrorKind::kIo, "{}: cannot open{}{}{}{}", path.string(),
                       what.empty() ? "" : " ", what, error != 0 ? ": " : "",
                       error != 0 ? std::strerror(error) : "");
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Error::make(ErrorKind::kIo, "{}: read failed", path.string());
  return std::move(text).str();
}

}  // namespace orrery
